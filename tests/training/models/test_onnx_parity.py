"""ONNX graphs agree with the torch modules they were exported from (max abs difference <= 1e-5)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

from service.retrieval.encoders import pad_batch  # noqa: E402
from training.models.dual import DualEncoder  # noqa: E402
from training.models.export import (  # noqa: E402
    JointMLP,
    PairMLP,
    ScaledEncoder,
    export_dual,
    export_encoder,
    export_mlp,
    export_ranker,
)
from training.models.rankers import CNNEncoder, Ranker, RankerConfig  # noqa: E402

TOL = 1e-5
SHAPES = [(1, 1), (3, 4), (8, 9), (17, 37)]  # (batch, longest sequence)


@pytest.fixture(autouse=True)
def _threads() -> None:
    torch.set_num_threads(1)


def _session(path: Path) -> Any:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    return ort.InferenceSession(str(path), sess_options=opts, providers=["CPUExecutionProvider"])


def _vectors(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    v = rng.normal(scale=0.5, size=(n, dim)).astype(np.float32)
    v[:2] = 0.0
    return v


def _random_seqs(rng: np.random.Generator, batch: int, longest: int, vocab: int) -> list[np.ndarray]:
    seqs = [rng.integers(2, vocab, size=int(rng.integers(0, longest + 1))) for _ in range(batch)]
    seqs[0] = rng.integers(2, vocab, size=longest)  # the longest one sets the width
    if batch > 2:
        seqs[1] = np.zeros(0, dtype=np.int64)  # an empty query/document
    return seqs


def _check_encoder(module: Any, path: Path, vocab: int, rng: np.random.Generator) -> float:
    export_encoder(module, path)
    sess = _session(path)
    worst = 0.0
    for batch, longest in SHAPES:
        ids, lengths = pad_batch(_random_seqs(rng, batch, longest, vocab))
        with torch.no_grad():
            ref = module(torch.from_numpy(ids), torch.from_numpy(lengths)).numpy()
        got = sess.run(None, {"ids": ids, "lengths": lengths})[0]
        assert got.shape == ref.shape == (batch, ref.shape[1])
        worst = max(worst, float(np.abs(got - ref).max()))
    return worst


@pytest.mark.parametrize("window", [1, 4])
def test_cnn_encoder_parity(tmp_path: Path, window: int) -> None:
    rng = np.random.default_rng(window)
    enc = CNNEncoder(_vectors(rng, 60, 12), filters=10, window=window).eval()
    assert _check_encoder(enc, tmp_path / "cnn.onnx", 60, rng) <= TOL


@pytest.mark.parametrize("linear", [False, True])
def test_dual_encoder_parity(tmp_path: Path, linear: bool) -> None:
    rng = np.random.default_rng(7)
    model = DualEncoder(
        {"en": _vectors(rng, 50, 16), "de": _vectors(rng, 40, 16)}, ["en", "de"], smooth_l=0.5, linear=linear
    ).eval()
    assert _check_encoder(ScaledEncoder(model.query["de"], 0.5), tmp_path / "q.onnx", 40, rng) <= TOL
    assert _check_encoder(ScaledEncoder(model.doc, 0.5), tmp_path / "d.onnx", 50, rng) <= TOL
    # the exported files of export_dual are the same graphs
    comp = export_dual(model, tmp_path / "bundle")
    assert comp["query"] == {"en": "dual/query.en.onnx", "de": "dual/query.de.onnx"}
    ids, lengths = pad_batch(_random_seqs(rng, 5, 11, 40))
    with torch.no_grad():
        ref = model.scale(model.encode_query("de", torch.from_numpy(ids), torch.from_numpy(lengths))).numpy()
    got = _session(tmp_path / "bundle" / "dual/query.de.onnx").run(None, {"ids": ids, "lengths": lengths})[0]
    assert float(np.abs(got - ref).max()) <= TOL


def test_ranker_heads_parity(tmp_path: Path) -> None:
    rng = np.random.default_rng(11)
    cfg = RankerConfig(text_filters=9, meta_filters=5, hidden=13, dropout=0.5)
    words = {"en": _vectors(rng, 30, 8), "fr": _vectors(rng, 30, 8)}
    codes = _vectors(rng, 20, 6)
    for kind in ("text", "meta", "joint"):
        model = Ranker(kind, words, codes, cfg, query_langs=["en", "fr"]).eval()
        head: Any
        if kind == "joint":
            head, dims, names = JointMLP(model), [9, 9, 5, 5], ["query_text", "doc_text", "query_meta", "doc_meta"]
        else:
            d = 9 if kind == "text" else 5
            head, dims, names = PairMLP(model), [d, d], ["query", "doc"]
        path = tmp_path / f"{kind}.onnx"
        export_mlp(head, dims, names, path)
        sess = _session(path)
        for batch in (1, 4, 33):
            feeds = {n: rng.normal(size=(batch, d)).astype(np.float32) for n, d in zip(names, dims, strict=True)}
            with torch.no_grad():
                ref = head(*[torch.from_numpy(feeds[n]) for n in names]).numpy()
            got = sess.run(None, feeds)[0]
            assert got.shape == (batch,)
            assert float(np.abs(got - ref).max()) <= TOL


def test_exported_ranker_scores_match_torch(tmp_path: Path) -> None:
    """End to end through the exported files: encoders + head in onnxruntime == Ranker.score in torch."""
    rng = np.random.default_rng(3)
    cfg = RankerConfig(text_filters=7, meta_filters=4, hidden=11)
    model = Ranker("joint", {"en": _vectors(rng, 40, 8)}, _vectors(rng, 25, 5), cfg).eval()
    comp: dict[str, Any] = export_ranker(model, tmp_path, "rankers/joint")
    q_ids, q_len = pad_batch([rng.integers(2, 40, size=6)])
    qc_ids, qc_len = pad_batch([rng.integers(2, 25, size=3)])
    d_ids, d_len = pad_batch(_random_seqs(rng, 6, 20, 40))
    dc_ids, dc_len = pad_batch(_random_seqs(rng, 6, 4, 25))
    run = {k: _session(tmp_path / v) for k, v in comp.items() if isinstance(v, str)}
    qt = _session(tmp_path / comp["query_text"]["en"]).run(None, {"ids": q_ids, "lengths": q_len})[0]
    qm = run["query_meta"].run(None, {"ids": qc_ids, "lengths": qc_len})[0]
    dt = run["doc_text"].run(None, {"ids": d_ids, "lengths": d_len})[0]
    dm = run["doc_meta"].run(None, {"ids": dc_ids, "lengths": dc_len})[0]
    got = run["mlp"].run(
        None, {"query_text": np.repeat(qt, 6, 0), "doc_text": dt, "query_meta": np.repeat(qm, 6, 0), "doc_meta": dm}
    )[0]
    t = torch.from_numpy
    with torch.no_grad():
        q = model.encode_query("en", t(q_ids), t(q_len), t(qc_ids), t(qc_len))
        d = model.encode_doc(t(d_ids), t(d_len), t(dc_ids), t(dc_len))
        q.text, q.meta = q.text.expand(6, -1), q.meta.expand(6, -1)  # type: ignore[union-attr]
        ref = model.score(q, d).numpy()
    assert float(np.abs(got - ref).max()) <= TOL
