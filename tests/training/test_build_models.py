"""``priorart build --models``: models copied and verified, documents encoded once, FAISS index, meta.json."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

pytest.importorskip("onnxruntime")
pytest.importorskip("faiss")
pytest.importorskip("torch")
pytest.importorskip("gensim")

from index_copy import copy_index
from models_fixture import tiny_index, tiny_models  # noqa: E402

from service.index.folder import load_meta  # noqa: E402
from service.index.store import DocStore  # noqa: E402
from service.retrieval.dense import DenseIndex  # noqa: E402
from training.build import BuildError, add_models, build_index  # noqa: E402
from training.commands import build as build_command  # noqa: E402

pytestmark = pytest.mark.slow  # every test uses the tiny trained models (models_fixture: 16 s once per process)


def _cli() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        """test root"""

    build_command.register(app)
    return app


def test_index_with_models_is_self_describing() -> None:
    index = tiny_index()
    _, models = tiny_models()
    meta = load_meta(index, verify=True)  # every file, models/ dense/ rerank/ included, is checksummed
    comps = meta.components
    n = comps["docstore"]["n_docs"]
    assert comps["models"]["version"] == 1 and comps["dense"]["version"] == 1 and comps["rerank"]["version"] == 1
    assert comps["dense"]["kind"] == "flat" and comps["dense"]["metric"] == "inner_product"
    assert {f for f in meta.files if f.startswith("models/")} >= {"models/meta.json", "models/split.json",
                                                                   "models/dual/doc.onnx"}
    assert not any(f.startswith(("models/checkpoints/", "models/dense/")) for f in meta.files)
    assert comps["models"]["omitted"] and all(o.startswith(("checkpoints/", "dense/"))
                                              for o in comps["models"]["omitted"])
    vectors = np.load(index / "dense" / "vectors.npy")
    assert vectors.shape == (n, comps["dense"]["dim"]) and vectors.dtype == np.float32
    for name, rel in comps["rerank"]["files"].items():
        arr = np.load(index / rel)
        assert arr.shape == (n, comps["rerank"]["dims"][name]) and arr.dtype == np.float32
    # same documents, same order as the training corpus: the index's vectors equal the trained ones
    trained = np.load(models / "dense" / "doc_vectors.npy")
    assert json.loads((models / "dense" / "doc_ids.json").read_text()) == DocStore.load(index).ids
    np.testing.assert_allclose(vectors, trained, atol=1e-5)
    assert "fusion" not in comps  # built with fuse=False


def test_corrupt_models_folder_is_refused(tmp_path: Path) -> None:
    corpus, models = tiny_models()
    bad = tmp_path / "models"
    copy_index(models, bad)
    with open(bad / "rankers" / "joint" / "mlp.onnx", "ab") as fh:
        fh.write(b"\0")
    with pytest.raises(BuildError, match=r"rankers/joint/mlp\.onnx.*size"):
        build_index(corpus, tmp_path / "index", models_dir=bad, progress=False)
    assert not (tmp_path / "index").exists()  # nothing half-built left behind
    with pytest.raises(BuildError, match="not a models folder"):
        build_index(corpus, tmp_path / "index", models_dir=tmp_path, progress=False)
    with pytest.raises(BuildError, match="unknown dense index"):
        build_index(corpus, tmp_path / "index", models_dir=models, dense_index="annoy", progress=False)


@pytest.mark.parametrize("kind", ["hnsw", "ivf"])
def test_approximate_dense_index(tmp_path: Path, kind: str) -> None:
    _, models = tiny_models()
    index = tmp_path / "index"
    copy_index(tiny_index(), index)
    report = add_models(index, models, dense_index=kind, device="cpu", batch_size=7, progress=False)
    assert report["documents"] == len(DocStore.load(index)) and report["dense"]["kind"] == kind
    assert set(report["seconds"]) >= {"copy", "encode", "faiss", "total"}
    comps = load_meta(index, verify=True).components
    assert comps["dense"]["kind"] == kind
    dense = DenseIndex.load(index, device="cpu")
    exact = DenseIndex.load(index, device="cpu", exact=True)
    vectors = np.load(index / "dense" / "vectors.npy")
    np.testing.assert_allclose(vectors, np.load(tiny_index() / "dense" / "vectors.npy"), atol=1e-6)  # batch size
    q = vectors[3]
    # 60 documents: HNSW (efSearch 128) and IVF (one list) are exhaustive here
    assert dense.search(q, 5).rows.tolist() == exact.search(q, 5).rows.tolist()
    assert exact.search(q, 5).rows.tolist() == np.argsort(-(vectors @ q), kind="stable")[:5].tolist()


def test_cli_build_with_models(tmp_path: Path) -> None:
    corpus, models = tiny_models()
    runner = CliRunner()
    res = runner.invoke(_cli(), ["build", str(corpus), "-o", str(tmp_path / "i"), "--models", str(models),
                                 "--no-fuse", "--dense-index", "flat", "--device", "cpu"])
    assert res.exit_code == 0, res.output
    assert "models: 60 documents encoded" in res.output and "flat FAISS index" in res.output
    res = runner.invoke(_cli(), ["build", str(corpus), "-o", str(tmp_path / "j"), "--models", str(models),
                                 "--dense-index", "lsh"])
    assert res.exit_code == 2 and "unknown dense index 'lsh'" in res.output
    # the synthetic index holds de/fr indexes and titles: no dev task suits it, fusion is skipped with a reason
    res = runner.invoke(_cli(), ["build", str(corpus), "-o", str(tmp_path / "k"), "--models", str(models),
                                 "--device", "cpu"])
    assert res.exit_code == 0, res.output
    assert "fusion: BM25 only; no weights learned (no leak-free dev task suits this index" in res.output


def test_evaluate_systems_through_the_pipeline(tmp_path: Path) -> None:
    from service.corpus.jsonl import read_corpus
    from training.commands import evaluate as evaluate_command
    from training.evaluation.trec import Topic, read_run, write_qrels, write_topics
    from training.synth import synth_topics

    corpus, _ = tiny_models()
    index = tiny_index()
    topics, qrels = synth_topics(read_corpus(corpus), 6, seed=1)
    write_topics([Topic.model_validate(t) for t in topics], tmp_path / "t.jsonl")
    write_qrels(qrels, tmp_path / "q.txt")
    app = _cli()
    evaluate_command.register(app)
    runs: dict[str, dict[str, dict[str, float]]] = {}
    for system in ("bm25", "dense", "rerank", "fusion"):
        res = CliRunner().invoke(app, ["evaluate", str(index), str(tmp_path / "t.jsonl"), str(tmp_path / "q.txt"),
                                       "--system", system, "--depth", "20", "--k", "20", "--device", "cpu", "--json",
                                       "--run", str(tmp_path / f"{system}.run")])
        assert res.exit_code == 0, res.output
        obj = json.loads(res.stdout)
        assert obj["queries"] == len(qrels) and 0 <= obj["ndcg"] <= 1
        runs[system] = read_run(tmp_path / f"{system}.run")
        assert obj["system"].startswith(system) and obj["stage_ms_mean"]["bm25"] > 0
    assert "bm25 -> dense -> rerank -> fusion" in json.loads(res.stdout)["system"]  # the index's own pipeline
    for qid, bm25 in runs["bm25"].items():
        order = sorted(bm25, key=lambda d: -bm25[d])
        fused = sorted(runs["fusion"][qid], key=lambda d: -runs["fusion"][qid][d])
        # no fusion.json: BM25 weight only, dense-only candidates (BM25 0) after the BM25 ones
        assert fused[: len(order)] == order
        assert len(runs["dense"][qid]) <= 20
    res = CliRunner().invoke(app, ["evaluate", str(index), str(tmp_path / "t.jsonl"), str(tmp_path / "q.txt"),
                                   "--system", "semantic"])
    assert res.exit_code == 2 and "unknown system 'semantic'" in res.output
