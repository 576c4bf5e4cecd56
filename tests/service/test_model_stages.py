"""service.retrieval.model_stages: dense + rerank stages over precomputed encodings, fusion weights, devices.

The reference oracle is :class:`service.retrieval.encoders.ModelBundle` (onnxruntime over the same models
folder, encoding the documents at query time): precomputed document encodings must give the same scores.
"""

from __future__ import annotations

import json
import shutil
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("faiss")
pytest.importorskip("torch")
pytest.importorskip("gensim")

from models_fixture import tiny_index  # noqa: E402

from service.api.settings import Settings  # noqa: E402
from service.codes import record_codes  # noqa: E402
from service.index.store import DocStore  # noqa: E402
from service.pipeline import Candidates, FirstStageStep, FusionStep, Pipeline, Query  # noqa: E402
from service.retrieval import model_stages as ms  # noqa: E402
from service.retrieval.encoders import ModelBundle  # noqa: E402
from service.retrieval.first_stage import FirstStage  # noqa: E402

TOL = 1e-5


@pytest.fixture(scope="module")
def index() -> Path:
    return tiny_index()


@pytest.fixture(scope="module")
def loaded(index: Path) -> dict[str, Any]:
    return ms.load_model_stages(index, Settings(index_dir=index, device="cpu"))


def _stage(loaded: dict[str, Any], name: str) -> Any:
    return next(s for s in loaded["stages"] if s.name == name)


def _query_of(docs: DocStore, row: int) -> tuple[str, list[str]]:
    rec = docs.get_row(row)
    return f"{rec.title['en']}\n{rec.abstract.get('en', '')}", record_codes(rec)


def test_select_providers() -> None:
    assert ms.select_providers("cpu", ["CUDAExecutionProvider", "CPUExecutionProvider"]) == (
        ["CPUExecutionProvider"], None)
    assert ms.select_providers("auto", ["CUDAExecutionProvider", "CPUExecutionProvider"]) == (
        ["CUDAExecutionProvider", "CPUExecutionProvider"], None)
    cuda = ms.select_providers("cuda", ["CUDAExecutionProvider", "CPUExecutionProvider"])
    assert cuda[0][0] == "CUDAExecutionProvider"
    providers, warning = ms.select_providers("auto", ["CPUExecutionProvider"])
    assert providers == ["CPUExecutionProvider"] and warning is not None and "CPU" in warning
    with pytest.raises(ms.ModelStageError, match="unknown device"):
        ms.select_providers("gpu", [])


def test_cuda_provider_chosen_when_onnxruntime_has_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import onnxruntime as ort

    monkeypatch.setattr(ort, "get_available_providers", lambda: ["CUDAExecutionProvider", "CPUExecutionProvider"])
    notices: list[str] = []
    assert ms._providers("auto", notices) == ["CUDAExecutionProvider", "CPUExecutionProvider"] and not notices
    monkeypatch.setattr(ort, "get_available_providers", lambda: ["CPUExecutionProvider"])
    assert ms._providers("cuda", notices) == ["CPUExecutionProvider"]
    assert notices and "cuda asked for" in notices[0]


def test_contract_without_fusion_weights(loaded: dict[str, Any]) -> None:
    assert [s.name for s in loaded["stages"]] == ["dense", "rerank"]
    assert loaded["weights"] == {"bm25": 1.0} and loaded["device"] == "cpu"
    assert any("no learned fusion weights" in n for n in loaded["notices"])
    models = loaded["extra"]["models"]
    assert models["onnx_providers"] == ["CPUExecutionProvider"] and models["dense"]["kind"] == "flat"
    assert "en" in models["languages"]
    for stage in loaded["stages"]:
        json.dumps(stage.describe())  # /health must serialise it


def test_precomputed_encodings_match_the_bundle(index: Path, loaded: dict[str, Any]) -> None:
    bundle = ModelBundle.load(index / "models", verify=False)
    docs = DocStore.load(index)
    records = [docs.get_row(r) for r in range(len(docs))]
    vectors = np.load(index / "dense" / "vectors.npy")
    np.testing.assert_allclose(vectors, bundle.encode_documents(records), atol=TOL)
    text, codes = _query_of(docs, 3)
    rows = np.array([9, 0, 4, 17, 33, 12, 5])
    got = _stage(loaded, "rerank").scores(text, "en", codes, rows)
    want = bundle.rerank_scores(text, "en", codes, [records[int(r)] for r in rows])
    for kind in ("text", "meta", "joint", "stacked"):
        np.testing.assert_allclose(got[kind], want[kind], atol=TOL, err_msg=kind)
    dense = _stage(loaded, "dense")
    q = bundle.encode_query(text, "en")
    np.testing.assert_allclose(dense.dense.scores(q, rows), vectors[rows] @ q, atol=TOL)


def test_pipeline_union_scores_and_modes(index: Path, loaded: dict[str, Any]) -> None:
    first = FirstStageStep(FirstStage.load(index))
    dense, rerank = _stage(loaded, "dense"), _stage(loaded, "rerank")
    docs = first.fs.docs
    text, codes = _query_of(docs, 7)
    q = Query(text=text, lang="en", codes=codes, k=10, depth=8)
    cands = first.run(q, Candidates(rows=np.zeros(0, dtype=np.int64)))
    n_bm25 = len(cands)
    bm25_before = cands.scores["bm25"].copy()
    cands = dense.run(q, cands)
    assert len(cands) >= n_bm25 and len(cands) <= n_bm25 + 8
    np.testing.assert_array_equal(cands.scores["bm25"][:n_bm25], bm25_before)
    assert np.all(cands.scores["bm25"][n_bm25:] == 0.0)  # dense-only rows: BM25 lower bound 0
    qv = dense.models.encode_query(text, "en")
    np.testing.assert_allclose(cands.scores["dense"], dense.dense.scores(qv, cands.rows), atol=1e-9)
    top8 = dense.dense.search(qv, 8).rows
    assert set(top8.tolist()) <= set(cands.rows.tolist())
    assert q.info["dense"]["hits"] == 8

    all_scores = rerank.scores(text, "en", codes, cands.rows)
    cases = (("stacked", True, {"text": "text", "meta": "meta"}), ("joint", True, {"text": "joint"}),
             ("stacked", False, {"text": "text"}))
    for mode, use_meta, want in cases:
        c = Candidates(rows=cands.rows.copy(), scores=dict(cands.scores))
        out = ms.RerankStep(rerank.models, rerank.encodings, mode=mode, use_meta=use_meta).run(q, c)
        for comp, ranker in want.items():
            np.testing.assert_allclose(out.scores[comp], all_scores[ranker], atol=1e-6)
        assert ("meta" in out.scores) == ("meta" in want)
    with pytest.raises(ms.ModelStageError, match="unknown rerank mode"):
        ms.RerankStep(rerank.models, rerank.encodings, mode="mean")


def test_dense_only_and_filters(index: Path, loaded: dict[str, Any]) -> None:
    first = FirstStageStep(FirstStage.load(index))
    dense = _stage(loaded, "dense")
    docs = first.fs.docs
    text, codes = _query_of(docs, 11)
    dated = docs.dates[docs.dates > np.iinfo(np.int32).min]
    cut = date.fromordinal(date(1970, 1, 1).toordinal() + int(np.median(dated)))
    q = Query(text=text, lang="en", k=50, depth=50, before=cut)
    cands = dense.run(q, first.run(q, Candidates(rows=np.zeros(0, dtype=np.int64))))
    allowed = docs.date_mask(cut)
    assert len(cands) > 0 and allowed[cands.rows].all()
    # dense only, publication-number query, no first stage: the document itself is excluded
    only = dense.with_only(True)
    q2 = Query(text=docs.ids[11], k=5, depth=5)
    out = only.run(q2, Candidates(rows=np.zeros(0, dtype=np.int64)))
    assert q2.query_doc == docs.ids[11] and 11 not in out.rows.tolist() and len(out) == 5
    assert list(out.scores) == ["dense"] and np.all(np.diff(out.scores["dense"]) <= 0)
    mask = ms.filter_mask(docs, Query(text="x", codes=codes[:1], code_level="subclass"))
    assert mask is not None and mask.sum() < len(docs) and mask[11]


def test_fusion_weights_nearest_depth_and_engine(index: Path, tmp_path: Path) -> None:
    from service.engine import Engine

    root = tmp_path / "index"
    shutil.copytree(index, root)
    fusion = {
        "format": ms.FUSION_FORMAT, "version": ms.FUSION_VERSION, "default_variant": "joint",
        "dev": {"topics": 3},
        "variants": {"joint": {"depths": {
            "40": {"weights": {"bm25": 0.5, "dense": 0.2, "text": 0.3}, "dev_ndcg": 0.5, "bm25_ndcg": 0.4},
            "200": {"weights": {"bm25": 0.9, "dense": 0.0, "text": 0.1}, "dev_ndcg": 0.6, "bm25_ndcg": 0.6},
        }}},
    }
    (root / ms.FUSION_FILE).write_text(json.dumps(fusion))
    fw = ms.FusionWeights.load(root / ms.FUSION_FILE)
    assert fw.nearest_depth(10) == 40 and fw.nearest_depth(120) == 40 and fw.nearest_depth(121) == 200
    assert fw.for_depth(1000) == {"bm25": 0.9, "dense": 0.0, "text": 0.1}
    # the engine re-verifies checksums: register the new file like `priorart fuse` does
    from service.index.store import update_meta

    update_meta(root, {"fusion": {"version": 1, "file": ms.FUSION_FILE}})
    engine = Engine.load(root, settings=Settings(index_dir=root, device="cpu", default_depth=40))
    assert engine.pipeline.names == ["bm25", "dense", "rerank", "weights", "fusion"]
    rerank: Any = next(s for s in engine.pipeline.stages if s.name == "rerank")
    assert rerank.mode == "joint" and rerank.use_meta
    health = engine.health()
    assert health["device"] == "cpu" and health["stages"] == engine.pipeline.names
    assert health["models"]["fusion"]["variant"] == "joint"
    docs = engine.first_stage.docs
    text, codes = _query_of(docs, 5)
    q = Query(text=text, lang="en", codes=codes, k=5, depth=150)
    cands, _ = engine.pipeline.run(q)
    assert q.info["fusion"] == {"variant": "joint", "depth": 200, "weights": fw.by_depth[200]}
    assert cands.weights == fw.by_depth[200]
    q = Query(text=text, lang="en", k=5, depth=150, weights={"dense": 1.0})
    cands, _ = engine.pipeline.run(q)
    assert cands.weights == {"dense": 1.0} and q.info["fusion"]["variant"] == "request"
    # the ranking is the documented formula over the candidate set
    p = Pipeline([FirstStageStep(engine.first_stage), *engine.pipeline.stages[1:3], FusionStep({"dense": 1.0}, "t")])
    other, _ = p.run(Query(text=text, lang="en", k=5, depth=150))
    assert other.rows.tolist() == cands.rows.tolist()
    (root / ms.FUSION_FILE).write_text(json.dumps({**fusion, "version": 7}))
    with pytest.raises(ms.ModelStageError, match="rerun `priorart fuse`"):
        ms.FusionWeights.load(root / ms.FUSION_FILE)


def test_unknown_language_is_skipped_with_a_note(loaded: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    dense, rerank = _stage(loaded, "dense"), _stage(loaded, "rerank")
    monkeypatch.setattr(ms.Models, "languages", property(lambda self: ("en",)))  # as if no German encoders
    q = Query(text="eine Pumpe mit Ventil", lang="de", k=5, depth=5)
    cands = Candidates(rows=np.array([0, 1]), scores={"bm25": np.array([2.0, 1.0])})
    cands = rerank.run(q, dense.run(q, cands))
    assert cands.rows.tolist() == [0, 1]
    assert np.isnan(cands.scores["dense"]).all() and np.isnan(cands.scores["text"]).all()
    assert any("no de query encoder" in n for n in q.info["notes"])
