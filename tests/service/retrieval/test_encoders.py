"""service.retrieval.encoders (shared input definitions) and service.retrieval.neural (onnxruntime Models).

The bundle test trains a tiny models folder (synthetic corpus, small dimensions, 1-2 epochs) and checks
that scores computed through onnxruntime equal the torch models' scores.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from index_copy import copy_index

from service.codes import code_fallbacks, record_codes
from service.corpus.record import Claim, PatentRecord
from service.retrieval.encoders import (
    PAD,
    UNK,
    CodeVocabulary,
    ModelsFolderError,
    UnsupportedLanguageError,
    Vocabulary,
    document_ids,
    document_text,
    pad_batch,
)

REPO = Path(__file__).resolve().parents[3]
TOL = 1e-5


def _record(**kw: object) -> PatentRecord:
    base: dict[str, object] = {"id": "EP0000001B1", "country": "EP", "number": "0000001", "kind": "B1", "source": "t"}
    base.update(kw)
    return PatentRecord.model_validate(base)


def test_vocabulary_ids_drop_unknown_terms_and_cap() -> None:
    v = Vocabulary(["coil", "core", "wind"])
    assert v.terms[:2] == [PAD, UNK] and len(v) == 5
    assert v.ids(["coil", "nope", "wind", "core"]).tolist() == [2, 4, 3]
    assert v.ids(["coil", "nope", "wind", "core"], max_len=2).tolist() == [2, 4]
    assert v.ids([]).dtype == np.int64
    again = Vocabulary.from_json(json.loads(json.dumps(v.to_json())))
    assert again.terms == v.terms
    with pytest.raises(ValueError, match="not a vocabulary"):
        Vocabulary.from_json({"terms": ["a"]})


def test_codes_fall_back_to_known_ancestors() -> None:
    assert code_fallbacks("H01F 27/14") == ["H01F27/14", "H01F27/00", "H01F", "H01", "H"]
    codes = CodeVocabulary(["H01F27/00", "A61K", "H01F27/14"])
    assert codes.code_ids(["H01F27/16", "A61K31/00", "H01F27/14", "G06F17/30"]).tolist() == [2, 3, 4]


def test_document_text_prefers_english_claims() -> None:
    claims = {"en": [Claim(num=1, text="A coil.")], "de": [Claim(num=1, text="Eine Spule.")]}
    rec = _record(title={"en": "Coil"}, abstract={"en": "About coils."}, claims=claims)
    assert document_text(rec) == ("A coil.", "en")
    rec = _record(title={"en": "Coil", "de": "Spule"}, claims={"de": claims["de"]})
    assert document_text(rec) == ("Coil", "en")
    rec = _record(title={"de": "Spule"}, claims={"de": claims["de"]})
    assert document_text(rec) == ("Eine Spule.", "de")
    assert document_text(_record()) == ("", "en")
    assert record_codes(_record(cpc=["H01F27/14"], ipc=["H01F27/14", "H01F27/00"])) == ["H01F27/14", "H01F27/00"]


def test_pad_batch() -> None:
    ids, lengths = pad_batch([np.array([5, 6, 7]), np.zeros(0, dtype=np.int64)])
    assert ids.tolist() == [[5, 6, 7], [0, 0, 0]] and lengths.tolist() == [3, 0]
    ids, lengths = pad_batch([np.zeros(0, dtype=np.int64)])
    assert ids.shape == (1, 1) and lengths.tolist() == [0]


def test_service_module_does_not_import_torch_or_training() -> None:
    code = (
        "import sys, service.retrieval.encoders\n"
        "bad = [m for m in ('torch', 'gensim', 'training') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)


# ------------------------------------------------------------------------------------------- bundle


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, list[PatentRecord]]:
    """Tiny models trained for the module (7-10 s): the tests that use them are marked slow."""
    pytest.importorskip("torch")
    pytest.importorskip("gensim")
    pytest.importorskip("onnxruntime")
    import torch

    from service.corpus.jsonl import write_corpus
    from training.models.dual import DualConfig
    from training.models.rankers import RankerConfig
    from training.models.train import TrainConfig, train_models
    from training.synth import generate

    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("models")
    corpus = root / "corpus.jsonl"
    write_corpus(generate(50, seed=11), corpus)
    cfg = TrainConfig(
        word_dim=12,
        code_dim=6,
        w2v_epochs=2,
        w2v_min_count=1,
        w2v_min_tokens=50,
        walks_per_node=3,
        walk_length=10,
        max_graph_nodes=500,
        threads=1,
        progress=False,
        dev_negatives=8,
        device="cpu",
        ranker=RankerConfig(text_filters=8, meta_filters=4, hidden=16, epochs=1),
        dual=DualConfig(epochs=2, thresholds_grid=[(0.0, 0.5)]),
    )
    out = train_models(corpus, root / "models", config=cfg)
    from service.corpus.jsonl import read_corpus

    return out, list(read_corpus(corpus))


@pytest.mark.slow
def test_models_folder_is_self_describing(trained: tuple[Any, list[PatentRecord]]) -> None:
    out, records = trained
    meta = json.loads((out.out_dir / "meta.json").read_text())
    assert meta["format"] == "priorart-models" and meta["version"] == 1
    assert {"torch", "gensim", "onnx"} <= set(meta["versions"])
    assert meta["device"]["used"] == "cpu"
    for part in (
        "read_corpus",
        "word2vec",
        "deepwalk",
        "ranker_text",
        "ranker_meta",
        "ranker_joint",
        "dual",
        "export",
        "doc_vectors",
        "total",
    ):
        assert part in meta["timings_s"]
    for kind in ("text", "meta", "joint", "stacked", "dual"):
        assert 0.0 <= meta["dev"][kind]["ndcg"] <= 1.0
    files = set(meta["files"])
    assert {"split.json", "dense/doc_vectors.npy", "dual/doc.onnx", "rankers/joint/mlp.onnx"} <= files
    on_disk = {p.relative_to(out.out_dir).as_posix() for p in out.out_dir.rglob("*") if p.is_file()}
    assert on_disk - {"meta.json"} == files
    split = json.loads((out.out_dir / "split.json").read_text())
    assert sorted(split["train"] + split["dev"] + split["test"]) == sorted(r.id for r in records)
    assert json.loads((out.out_dir / "dense/doc_ids.json").read_text()) == [r.id for r in records]


@pytest.mark.slow
def test_onnx_models_match_torch(trained: tuple[Any, list[PatentRecord]]) -> None:
    import torch

    from service.retrieval.neural import Models
    from service.text.analysis import get_analyzer

    out, records = trained
    bundle = Models(out.out_dir, threads=1, device="cpu", verify=True)
    assert "CPUExecutionProvider" in bundle.providers
    assert "en" in bundle.languages

    # dense stage: documents and queries
    docs = np.concatenate([bundle.encode_documents(records[i:i + 7])["dual"] for i in range(0, len(records), 7)])
    saved = np.load(out.out_dir / "dense/doc_vectors.npy")
    assert docs.shape == saved.shape == (len(records), bundle.dim)
    assert float(np.abs(docs - saved).max()) <= TOL
    dual = out.models["dual"].eval()
    query = records[0].title["en"] + " " + records[0].abstract.get("en", "")
    q_ids = bundle.query_term_ids(query, "en")
    assert q_ids.tolist() == bundle.vocabs["en"].ids(get_analyzer("en")(query), 200).tolist()
    with torch.no_grad():
        ref_q = dual.scale(dual.encode_query("en", torch.from_numpy(q_ids)[None], torch.tensor([len(q_ids)])))
    assert float(np.abs(bundle.encode_query(query, "en") - ref_q.numpy()[0]).max()) <= TOL

    # rerank: every ranker's score through onnxruntime == torch
    cands = records[:9]
    codes = record_codes(records[0])
    got = bundle.rerank_records(query, "en", codes, cands, batch_size=4)
    qc = bundle.code_ids(codes)
    d_terms = [document_ids(r, bundle.vocabs["en"], bundle.doc_max_terms) for r in cands]
    d_codes = [bundle.code_ids(record_codes(r)) for r in cands]
    ti, tl = pad_batch([q_ids] * len(cands))
    ci, cl = pad_batch([qc] * len(cands))
    di, dl = pad_batch(d_terms)
    dci, dcl = pad_batch(d_codes)
    t = torch.from_numpy
    ref = {}
    with torch.no_grad():
        for kind in ("text", "meta", "joint"):
            model = out.models[kind].eval()
            q = model.encode_query("en", t(ti), t(tl), t(ci), t(cl))
            d = model.encode_doc(t(di), t(dl), t(dci), t(dcl))
            ref[kind] = model.score(q, d).numpy()
    w_text, w_meta = bundle.stacked_weights
    ref["stacked"] = w_text * ref["text"] + w_meta * ref["meta"]
    for kind in ("text", "meta", "joint", "stacked"):
        assert got[kind].shape == (len(cands),)
        assert float(np.abs(got[kind] - ref[kind]).max()) <= TOL, kind
    assert all(v.size == 0 for v in bundle.rerank_records(query, "en", codes, []).values())
    query_side = Models(out.out_dir, sides=("query",), device="cpu")
    with pytest.raises(ModelsFolderError, match="without the document side"):
        query_side.encode_documents(cands)


@pytest.mark.slow
def test_models_errors(trained: tuple[Any, list[PatentRecord]], tmp_path: Path) -> None:
    from service.retrieval.neural import Models

    out, _ = trained
    bundle = Models(out.out_dir, threads=1, device="cpu")
    with pytest.raises(UnsupportedLanguageError, match="no es query encoder"):
        bundle.encode_query("consulta", "es")
    copy = tmp_path / "models"
    copy_index(out.out_dir, copy)
    with open(copy / "rankers/meta/mlp.onnx", "ab") as fh:
        fh.write(b"\0")
    with pytest.raises(ModelsFolderError, match=r"rankers/meta/mlp\.onnx"):
        Models(copy, verify=True)
    (copy / "meta.json").unlink()
    with pytest.raises(ModelsFolderError, match="meta.json: missing"):
        Models(copy)
    from training.models.train import train_models

    with pytest.raises(FileExistsError, match="not a models folder"):
        train_models(out.meta["corpus"]["path"], copy)
    (copy / "meta.json").write_text(json.dumps({"format": "priorart-index", "version": 1}))
    with pytest.raises(FileExistsError, match="another kind of folder"):
        train_models(out.meta["corpus"]["path"], copy)
    assert (copy / "dense/doc_vectors.npy").exists()  # nothing was deleted
