"""The learned ranker over evidence (service/ranker.py, training/ranker.py): the trees the service evaluates give
LightGBM's scores, the network's ONNX graph gives torch's, both learn an order from features, a ranker installed in an
index orders /search's first documents (and says so), and the features of a search are what they claim to be."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from index_copy import copy_index

from service.codes import codes_at
from service.kernel_pooling import KERNEL_FEATURES
from service.query import QueryError
from service.ranker import FEATURES, FIELD_FEATURES, RankerModel, TreeEnsemble, _code_shares
from training.ranker import (
    RANKER_FEATURES,
    TopicEvidence,
    export_onnx,
    first_evidence,
    install_into,
    learn,
    mlp_scores,
    ranker_part,
    ranking,
    scores,
    train_mlp,
    write_ranker,
)
from training.synth import SynthConfig, write_synthetic


def _topics(n: int, seed: int = 0) -> list[TopicEvidence]:
    """Topics whose relevant document is the one with the highest passage feature plus noise, whatever its fused
    rank: an order the fused score alone does not give."""
    rng = np.random.default_rng(seed)
    out = []
    p = FEATURES.index("passage")
    for q in range(n):
        X = rng.random((20, len(FEATURES)))
        X[:, FEATURES.index("rank")] = 1.0 / np.log2(np.arange(20) + 2.0)
        grades = np.zeros(20)
        grades[int(np.argmax(X[:, p] + 0.1 * rng.random(20)))] = 1.0
        out.append(TopicEvidence(f"q{q}", [f"d{q}-{i}" for i in range(20)], X, grades, [f"rest{q}"]))
    return out


def _mrr(topics: list[TopicEvidence], ranked: list[list[str]]) -> float:
    rr = []
    for t, ids in zip(topics, ranked, strict=True):
        rel = {t.ids[i] for i in np.flatnonzero(t.grades)}
        rr.append(next((1.0 / (k + 1) for k, d in enumerate(ids) if d in rel), 0.0))
    return float(np.mean(rr))


@pytest.mark.parametrize("zero_as_missing", [False, True])
def test_the_services_trees_give_lightgbms_scores(zero_as_missing: bool) -> None:
    import lightgbm as lgb

    rng = np.random.default_rng(1)
    X = rng.random((1500, len(FEATURES)))
    X[X < 0.2] = 0.0  # zeros (missing values where LightGBM is told so)
    y = (X[:, 0] + 2 * X[:, 5] + 0.3 * rng.random(1500) > 1.6).astype(int)
    params = {"objective": "lambdarank", "num_leaves": 15, "min_data_in_leaf": 5, "verbose": -1,
              "zero_as_missing": zero_as_missing}
    booster = lgb.train(params, lgb.Dataset(X, y, group=[15] * 100, params={"verbose": -1}), num_boost_round=40)
    trees = TreeEnsemble.from_lightgbm(booster.dump_model())
    test = rng.random((300, len(FEATURES)))
    test[test < 0.3] = 0.0
    want = booster.predict(test, raw_score=True)
    np.testing.assert_allclose(trees.score(test), want, rtol=0, atol=1e-9)
    back = TreeEnsemble.from_json(json.loads(json.dumps(trees.to_json())))  # as ranker.json stores it
    np.testing.assert_allclose(back.score(test), want, rtol=0, atol=1e-9)


@pytest.mark.parametrize("kind", ["gbm", "mlp"])
def test_both_rankers_learn_an_order_the_fused_rank_does_not_give(kind: str) -> None:
    train, test = _topics(150, seed=2), _topics(60, seed=3)
    model = learn(kind, train)
    learned = _mrr(test, [ranking(t, scores(kind, model, t.X)) for t in test])
    fused = _mrr(test, [t.ids + t.rest for t in test])
    assert learned > fused + 0.3, (learned, fused)
    t = test[0]
    assert ranking(t, scores(kind, model, t.X))[-1] == "rest0"  # the documents after the first ones keep their place
    again = learn(kind, train)  # learning is deterministic: the ranker the experiment writes is the one it measured
    np.testing.assert_array_equal(scores(kind, again, t.X), scores(kind, model, t.X))


def test_the_networks_onnx_graph_gives_its_scores(tmp_path: Path) -> None:
    from service.retrieval.neural import OnnxGraph

    topics = _topics(40, seed=4)
    model = train_mlp(topics)
    graph = OnnxGraph(export_onnx(model, tmp_path / "model.onnx"), ["CPUExecutionProvider"])
    X = topics[0].X
    np.testing.assert_allclose(np.asarray(graph(features=X.astype(np.float32))).reshape(-1), mlp_scores(model, X),
                               rtol=1e-5, atol=1e-5)


def test_code_agreement_leaves_each_documents_own_vote_out() -> None:
    codes = [["H01F 27/14"], ["H01F 27/20"], ["H01F 1/00"], ["B65D 5/00"]]
    shares = _code_shares([codes_at(c, "subclass") for c in codes])
    # the first three share H01F: each gets the other two's votes of H01F over the other three's votes
    votes = [1.0, 1 / 2, 1 / 3, 1 / 4]
    assert shares[0] == pytest.approx((votes[1] + votes[2]) / (votes[1] + votes[2] + votes[3]))
    assert shares[3] == 0.0  # its subclass is voted by nobody else
    assert _code_shares([codes_at(["H01F 27/14"], "subclass")])[0] == 0.0  # alone: no other vote


def test_code_agreement_is_the_same_to_the_last_bit_in_every_process() -> None:
    """The votes are summed in the documents' code order, not a set's: a set's order changes with the process's
    string hashing (PYTHONHASHSEED), the sums' last bit with it, and a model learned on them (LightGBM bins the
    values) with that. Two runs of the ranking experiment ranked 67 topics differently for this reason."""
    import subprocess
    import sys

    program = (
        "import random; from service.codes import codes_at; from service.ranker import _code_shares\n"
        "rng = random.Random(3)\n"
        "pool = [f'{s}{c} {g}/{d:02d}' for s in 'ABCGH' for c in ('01F', '04L', '21K') for g in (1, 27, 33)"
        " for d in (0, 14)]\n"
        "docs = [rng.sample(pool, rng.randint(1, 9)) for _ in range(20)]\n"
        "print(*(_code_shares([codes_at(d, level) for d in docs]).tobytes().hex() for level in ('subclass',"
        " 'main_group')))\n")
    outs = {subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": str(seed)}).stdout for seed in range(6)}
    assert len(outs) == 1, outs


def test_a_ranker_with_features_this_code_does_not_compute_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown"):
        RankerModel("gbm", ["fused", "sentiment"], 20, None, {})
    with pytest.raises(ValueError, match="kind"):
        RankerModel.of_part({"kind": "svm", "features": ["fused"], "docs": 20}, Path("."))


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["gbm", "mlp"])
def test_an_installed_ranker_orders_the_first_documents_of_search(tmp_path: Path, kind: str) -> None:
    """Installed into an index (the index part ``ranker``), the ranker orders /search's first documents by its scores
    of their evidence: ``ranked_by`` says so, each of them carries its ``ranker`` component, the query its predicted
    codes; ``evidence_docs: 0`` is still the fused order, ``evidence_by: passage`` the passage rule; the features are
    those of the search. An index built without one orders by the best passage and refuses ``evidence_by: ranker``."""
    from service.engine import Engine
    from service.index.folder import IndexFolder
    from service.schema import SearchRequest
    from service.settings import Settings
    from training.build import build_index
    from training.synth import SynthConfig, write_synthetic

    write_synthetic(tmp_path / "all.jsonl", SynthConfig(n=300, seed=7), progress=False)
    idx = tmp_path / "index"
    build_index(tmp_path / "all.jsonl", idx, translation=False, compounds="", progress=False, ranker="none")
    engine = Engine.load(idx, settings=Settings(index_dir=idx))
    assert engine.evidence.ranker is None
    rec = engine.docs.get_row(5)
    text = rec.title["en"] + " " + rec.abstract.get("en", "")
    req = SearchRequest(query=text, lang="en", k=20)
    before = engine.search(req)
    assert before.ranked_by == "passage evidence"
    with pytest.raises(QueryError, match="no learned ranker"):
        engine.search(req.model_copy(update={"evidence_by": "ranker"}))
    cands, ev = first_evidence(engine, engine.query(req), 20)
    assert ev is not None and ev.X.shape == (20, len(FEATURES))
    col = {f: j for j, f in enumerate(FEATURES)}
    assert ev.X[0, col["rank"]] == 1.0 and ev.X[:, col["fused"]].max() == 1.0
    assert set(np.unique(ev.X[:, col["own_route"]])) <= {0.0, 1.0} and ev.X[:, col["translated"]].max() == 0.0
    assert ev.X[:, col["feedback"]].max() == pytest.approx(1.0) and ev.X[0, col["query_terms"]] > 0
    # per field, the best passage's score: the best of them is the document's best passage (the query is a title
    # and an abstract: abstracts match)
    fields = ev.X[:, [col[f] for f in FIELD_FEATURES]]
    assert np.allclose(fields.max(axis=1), ev.X[:, col["passage"]]) and fields[:, 0].max() > 0
    engine.close()

    model = learn(kind, [t.only(RANKER_FEATURES) for t in _topics(80, seed=5)])
    folder = write_ranker(tmp_path / "ranker", ranker_part(kind, model, docs=20, report={"test": True}))
    (entry,) = install_into(idx, folder)
    assert entry["kind"] == kind and (idx / "ranker" / "ranker.json").is_file()
    engine = Engine.load(idx, settings=Settings(index_dir=idx))  # checksummed with the rest
    ranker = engine.evidence.ranker
    assert ranker is not None and ranker.kind == kind and ranker.features == list(RANKER_FEATURES)
    # its kernel features read the index's word vectors, trained on its passages when the ranker was installed
    assert set(KERNEL_FEATURES) <= set(RANKER_FEATURES)
    assert "word_vectors/vectors.npy" in IndexFolder.open(idx).meta.files
    cands, ev = first_evidence(engine, engine.query(req), 20)
    assert ev is not None and ev.X[:, [col[f] for f in KERNEL_FEATURES]].max() > 0
    res = engine.search(req)
    assert res.ranked_by == "learned ranker"
    first = [h for h in res.results if "ranker" in h.components]
    assert len(first) == 20 and [h.components["ranker"] for h in first] == sorted(
        (h.components["ranker"] for h in first), reverse=True)
    assert res.query.predicted_codes and "evidence" in [s.name for s in res.stages]
    want = engine.evidence.ranker.score(ev.X)  # the same search's features, scored by the installed model
    order = np.lexsort((np.arange(20), -want))
    assert [h.id for h in first] == [engine.docs.ids[int(cands.rows[i])] for i in order]
    rule = engine.search(req.model_copy(update={"evidence_by": "passage"}))
    assert rule.ranked_by == "passage evidence" and [h.id for h in rule.results] == [h.id for h in before.results]
    fused = engine.search(req.model_copy(update={"evidence_docs": 0}))
    assert fused.ranked_by == "fusion"
    assert [h.id for h in fused.results] == [engine.docs.ids[int(r)] for r in cands.rows[:20]]  # the fused order
    engine.close()
    # without the word vectors its kernel features read, the ranker is not used: the passage rule orders, and says so
    IndexFolder.open(idx).register({}, remove=["word_vectors"])
    engine = Engine.load(idx, settings=Settings(index_dir=idx))
    assert engine.evidence.ranker is None and any("kernel features" in n for n in engine.notices)
    assert engine.search(req).ranked_by == "passage evidence"
    engine.close()


@pytest.mark.slow
def test_the_build_installs_the_ranker_it_is_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``priorart build --ranker``: a ranker folder (what ``experiment ranking --ranker-out`` writes) goes into the
    index as its part ``ranker``, checksummed with the rest, and the report says so; by default the project's
    (training/rankers/default); ``none`` and a default that was never written leave it out; a folder without a
    ranker is refused with the reason."""
    import training.ranker as tr
    from service.engine import Engine
    from service.index.folder import IndexFolder
    from service.settings import Settings
    from training.build import BuildError, build_index
    from training.ranker import read_ranker
    from training.synth import SynthConfig, write_synthetic

    write_synthetic(tmp_path / "all.jsonl", SynthConfig(n=120, seed=9), progress=False)
    model = learn("gbm", [t.only(RANKER_FEATURES) for t in _topics(60, seed=6)])
    folder = write_ranker(tmp_path / "ranker", ranker_part("gbm", model, docs=15, report={"why": "a test"}))
    assert read_ranker(folder)["body"]["docs"] == 15
    options = {"translation": False, "compounds": "", "progress": False}
    report = build_index(tmp_path / "all.jsonl", tmp_path / "with", ranker=folder, **options)
    assert report.ranker == {"kind": "gbm", "docs": 15, "source": str(folder)}
    index = IndexFolder.open(tmp_path / "with")  # verified: the ranker's files are checksummed
    assert index.components["ranker"]["kind"] == "gbm" and "ranker/ranker.json" in index.meta.files
    engine = Engine.load(tmp_path / "with", settings=Settings(index_dir=tmp_path / "with"))
    ranker = engine.evidence.ranker
    assert ranker is not None and ranker.docs == 15 and ranker.info["report"] == {"why": "a test"}
    engine.close()
    assert build_index(tmp_path / "all.jsonl", tmp_path / "none", ranker="none", **options).ranker is None
    shipped = read_ranker(tr.DEFAULT_RANKER)["body"]  # the project's (experiment ranking --ranker-out), the default
    assert build_index(tmp_path / "all.jsonl", tmp_path / "shipped", **options).ranker == {
        "kind": shipped["kind"], "docs": shipped["docs"], "source": "default"}
    bm25 = read_ranker(tr.BM25_RANKER)["body"]  # without the dense stage: the one learned without its cosine
    assert "dense" not in bm25["features"]
    assert build_index(tmp_path / "all.jsonl", tmp_path / "no-dense", dense=False, **options).ranker == {
        "kind": bm25["kind"], "docs": bm25["docs"], "source": "default (without the dense stage)"}
    monkeypatch.setattr(tr, "DEFAULT_RANKER", tmp_path / "never-written")
    assert build_index(tmp_path / "all.jsonl", tmp_path / "default", **options).ranker is None
    with pytest.raises(BuildError, match="no ranker.json"):
        build_index(tmp_path / "all.jsonl", tmp_path / "bad", ranker=tmp_path, **options)
    # a sharded build installs it into every shard, or none with "none"; a bad folder is refused before any shard
    from training.build import build_sharded_index

    for given, want in ((folder, 15), ("none", None)):
        out = tmp_path / f"sharded-{want}"
        build_sharded_index(tmp_path / "all.jsonl", out, shards=2, ranker=given, **options)
        engine = Engine.load(out, settings=Settings(index_dir=out))
        assert (engine.evidence.ranker.docs if engine.evidence.ranker is not None else None) == want
        engine.close()
    with pytest.raises(BuildError, match="no ranker.json"):
        build_sharded_index(tmp_path / "all.jsonl", tmp_path / "sharded-bad", shards=2, ranker=tmp_path, **options)
    assert not (tmp_path / "sharded-bad").exists()


@pytest.mark.slow
def test_install_ranker_puts_the_ranker_into_an_index_built_without_it(tmp_path: Path) -> None:
    """``priorart install-ranker``: an index built with ``--ranker none`` and changed by an ``add`` (a live generation
    of two segments) gets the ranker without a rebuild; it is checksummed with the rest, and /search orders by it;
    the same into every shard of a sharded index; a folder without a ranker, or an index whose writers' lock is held,
    is refused with the reason and leaves the index as it was."""
    from typer.testing import CliRunner

    from service.corpus.jsonl import read_corpus
    from service.engine import Engine
    from service.index.folder import IndexFolder, Layout
    from service.index.live import add_documents, compact
    from service.schema import SearchRequest
    from service.settings import Settings
    from training.build import build_index, build_sharded_index
    from training.cli import app
    from training.synth import SynthConfig, write_synthetic

    write_synthetic(tmp_path / "all.jsonl", SynthConfig(n=160, seed=12), progress=False)
    records = list(read_corpus(tmp_path / "all.jsonl"))
    idx = tmp_path / "index"
    options = {"translation": False, "compounds": "", "progress": False, "ranker": "none"}
    build_index(records[:140], idx, **options)
    add_documents(idx, records[140:], progress=False)
    assert len(IndexFolder.open(idx).segments) == 2
    res = CliRunner().invoke(app, ["install-ranker", str(idx), "--ranker", str(tmp_path)])
    assert res.exit_code == 2 and "no ranker.json" in res.output
    with IndexFolder.open(idx).writer_lock():  # an add running there
        res = CliRunner().invoke(app, ["install-ranker", str(idx)])
    assert res.exit_code == 2 and "another add/delete/compact is running" in res.output
    assert "ranker" not in IndexFolder.open(idx).components
    # a ranker of before the kernel features first: the default then replaces it and trains the word vectors
    old = [f for f in RANKER_FEATURES if f not in KERNEL_FEATURES]
    model = learn("gbm", [t.only(old) for t in _topics(60, seed=8)])
    install_into(idx, write_ranker(tmp_path / "old", ranker_part("gbm", model, docs=20, report={}, features=old)))
    assert "word_vectors" not in IndexFolder.open(idx).components
    res = CliRunner().invoke(app, ["install-ranker", str(idx)])
    assert res.exit_code == 0, res.output
    assert "installed" in res.output and "from default" in res.output
    folder = IndexFolder.open(idx)  # verified: the ranker's file is checksummed with the rest
    assert folder.components["ranker"]["source"] == "default" and len(folder.segments) == 2
    assert folder.components["word_vectors"]["terms"] > 0  # trained on both segments' passages for its kernels
    engine = Engine.load(idx, settings=Settings(index_dir=idx))
    assert engine.evidence.kernels is not None
    rec = records[150]
    res_search = engine.search(SearchRequest(query=rec.title["en"], lang="en", k=5))
    assert engine.evidence.ranker is not None and res_search.ranked_by == "learned ranker"
    engine.close()
    compact(idx, progress=False)  # kept by a compaction, as every index-level part
    engine = Engine.load(idx, settings=Settings(index_dir=idx))
    assert engine.evidence.ranker is not None and engine.evidence.kernels is not None
    assert len(IndexFolder.open(idx).segments) == 1
    engine.close()

    sharded = tmp_path / "sharded"
    write_synthetic(tmp_path / "s.jsonl", SynthConfig(n=120, seed=13), progress=False)
    build_sharded_index(tmp_path / "s.jsonl", sharded, shards=2, **options)
    res = CliRunner().invoke(app, ["install-ranker", str(sharded)])
    assert res.exit_code == 0 and "(2 shards)" in res.output, res.output
    engine = Engine.load(sharded, settings=Settings(index_dir=sharded))
    assert engine.evidence.ranker is not None
    engine.close()
    # one set of word vectors, learned from both shards' passages, in each shard (as the sharded build learns them):
    # the kernel features of a document do not depend on the shard it lands in
    shard_dirs = [sharded / Layout.shard(i) for i in range(2)]
    entries = [IndexFolder.open(p).components["word_vectors"] for p in shard_dirs]
    assert entries[0]["terms"] > 0 and entries[0] == entries[1], entries
    files = [{f.name: f.read_bytes() for f in sorted((p / entries[0]["dir"]).iterdir())} for p in shard_dirs]
    assert files[0] and files[0] == files[1]


def test_install_ranker_without_word2vec_installs_the_ranker_and_says_it_has_no_vectors(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without gensim (a service-only installation) the ranker is written, its entry says why there are no word
    vectors, and the engine then orders by the passage rule and says so, as after a build without them."""
    import training.word_vectors as wv_module
    from service.engine import Engine
    from service.index.folder import IndexFolder
    from service.settings import Settings
    from training.build import build_index

    write_synthetic(tmp_path / "all.jsonl", SynthConfig(n=80, seed=4), progress=False)
    idx = tmp_path / "index"
    build_index(tmp_path / "all.jsonl", idx, translation=False, compounds="", progress=False, ranker="none")

    def missing(*args: object, **kwargs: object) -> None:
        raise ImportError("No module named 'gensim'")

    monkeypatch.setattr(wv_module, "train_word2vec", missing)
    (entry,) = install_into(idx)
    assert entry["word_vectors"].startswith("none (") and "the training extra installs it" in entry["word_vectors"]
    folder = IndexFolder.open(idx)
    assert "ranker" in folder.components and "word_vectors" not in folder.components
    engine = Engine.load(idx, settings=Settings(index_dir=idx))
    try:
        assert engine.evidence.ranker is None and any("kernel features" in n for n in engine.notices)
    finally:
        engine.close()


@pytest.mark.slow
def test_a_ranker_that_reads_the_models_scores_has_every_ranker_scored(tmp_path: Path) -> None:
    """The neural components' scores (``MODEL_FEATURES``) are features where the index has models: min-max over the
    first documents a component scored, 0 where it did not apply. An index whose fusion weighs none of the rankers
    does not score them, so their columns are 0 unless every component is asked for; an installed ranker that reads
    them asks for every one, and its order is its score of those features."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("faiss")
    pytest.importorskip("torch")
    pytest.importorskip("gensim")
    from models_fixture import tiny_index

    from service.engine import Engine
    from service.ranker import MODEL_FEATURES, _component, reads_models
    from service.schema import SearchRequest
    from service.settings import Settings

    idx = tmp_path / "index"
    copy_index(tiny_index(), idx)  # with models, the fusion not learned (BM25 alone)
    engine = Engine.load(idx, settings=Settings(index_dir=idx, evidence_by="passage"))
    rec = engine.docs.get_row(5)
    req = SearchRequest(query=rec.title["en"] + " " + rec.abstract.get("en", ""), lang="en", k=20)
    col = [FEATURES.index(f) for f in MODEL_FEATURES]
    cands, ev = first_evidence(engine, engine.query(req), 20)
    assert ev is not None
    assert set(cands.scores) == {"bm25", "dense"} and "not scored" in cands.skipped["text"]
    assert ev.X[:, col[0]].max() == 1.0 and not ev.X[:, col[1:]].any()  # the dense stage always scores
    q = engine.query(req)
    q.every_component = True
    cands, ev = first_evidence(engine, q, 20)
    assert ev is not None and {"text", "meta", "joint"} <= set(cands.scores)  # meta and joint on predicted codes
    for j, name in zip(col, MODEL_FEATURES, strict=True):
        assert np.array_equal(ev.X[:, j], _component(cands.scores[name][:20]))
        assert ev.X[:, j].max() == 1.0 and ev.X[:, j].min() == 0.0
    assert np.array_equal(_component(np.array([np.nan, 2.0, 4.0, np.nan, 3.0])), [0.0, 0.0, 1.0, 0.0, 0.5])
    engine.close()

    features = tuple(f for f in FEATURES if f not in KERNEL_FEATURES and f not in ("feedback", "own_route",
                                                                                    "doc_query_lang"))
    assert reads_models(features) and not reads_models(RANKER_FEATURES)
    model = learn("gbm", [t.only(features) for t in _topics(80, seed=3)])
    install_into(idx, write_ranker(tmp_path / "ranker", ranker_part("gbm", model, docs=20, report={},
                                                                    features=features)))
    engine = Engine.load(idx, settings=Settings(index_dir=idx))
    assert engine.evidence.ranker is not None and engine.evidence.ranker.features == list(features)
    res = engine.search(req)
    assert res.ranked_by == "learned ranker" and res.fusion is not None
    assert {res.fusion.components[c] for c in ("text", "meta", "joint")} == {"computed, weight 0"}
    q = engine.query(req)
    q.every_component = True
    cands, ev = first_evidence(engine, q, 20)
    assert ev is not None
    want = engine.evidence.ranker.score(ev.X)
    order = np.lexsort((np.arange(20), -want))
    assert [h.id for h in res.results] == [engine.docs.ids[int(cands.rows[i])] for i in order]
    engine.close()


@pytest.mark.slow
def test_the_code_classifier_predicts_a_querys_codes_in_every_language_and_the_ranker_reads_them(
        tmp_path: Path) -> None:
    """Built with the corpus' classification (``--cpc``: here the synthetic corpus' own), the index has the code
    classifier. It classifies a query through its English image, a German or French one through the tables; the
    evidence's ``class_*`` features are the predicted share of each document's codes, the response's predicted codes
    the classifier's subclasses. Built without a title list, the index has none, and the features are 0."""
    from service.code_classifier import code_agreement
    from service.codes import codes_at, record_codes
    from service.engine import Engine
    from service.ranker import CLASSIFIER_FEATURES
    from service.schema import SearchRequest
    from service.settings import Settings
    from training.build import build_index

    scheme = tmp_path / "scheme.tsv.gz"
    write_synthetic(tmp_path / "all.jsonl", SynthConfig(n=300, seed=7), scheme_path=scheme, progress=False)
    idx = tmp_path / "index"
    report = build_index(tmp_path / "all.jsonl", idx, progress=False, ranker="none", cpc=scheme)
    assert report.code_classifier is not None and "code classifier from scheme.tsv.gz" in report.code_classifier
    engine = Engine.load(idx, settings=Settings(index_dir=idx))
    assert engine.evidence.code_classifier is not None
    col = [FEATURES.index(f) for f in CLASSIFIER_FEATURES]
    rec = next(r for r in (engine.docs.get_row(i) for i in range(len(engine.docs))) if r.claims.get("de"))
    hits = 0
    for lang, text in (("en", rec.title["en"] + " " + rec.abstract.get("en", "")),
                       ("de", min(rec.claims["de"], key=lambda c: c.num).text),
                       ("fr", min(rec.claims.get("fr") or rec.claims["de"], key=lambda c: c.num).text)):
        images, _ = engine.evidence.passage_query(text, lang)
        classified = engine.evidence.classify(images)
        assert classified is not None and classified["subclass"] and classified["main_group"], lang
        hits += classified["subclass"][0][0] in codes_at(record_codes(rec), "subclass")
        req = SearchRequest(query=text, lang=lang, k=20)
        cands, ev = first_evidence(engine, engine.query(req), 20)
        assert ev is not None
        held = [record_codes(engine.docs.header_row(int(r))) for r in cands.rows[:20]]
        for j, level in zip(col, ("subclass", "main_group"), strict=True):
            assert np.allclose(ev.X[:, j], code_agreement(classified[level], [codes_at(c, level) for c in held]))
        assert ev.X[:, col[0]].max() > 0
        assert ev.predicted_codes == classified["subclass"]
    assert hits >= 2  # the document's own subclass first for most of its texts
    engine.close()
    plain = tmp_path / "plain"
    report = build_index(tmp_path / "all.jsonl", plain, progress=False, ranker="none", cpc=None,
                         translation=False, compounds="")
    assert report.code_classifier is not None and "no CPC title list" in report.code_classifier
    engine = Engine.load(plain, settings=Settings(index_dir=plain))
    assert engine.evidence.code_classifier is None
    cands, ev = first_evidence(engine, engine.query(SearchRequest(query=rec.title["en"], lang="en", k=20)), 20)
    assert ev is not None and not ev.X[:, col].any()
    engine.close()


@pytest.mark.slow
def test_the_evidence_step_computes_what_the_installed_ranker_reads_and_analyses_the_query_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 63 item 2: a /search computes the features its installed ranker reads, no others (no feedback search
    unless one is read: the first stage runs once), and the ranker's scores are those of every feature computed and
    then selected, to the last bit; the feedback search runs once more only where the feature is asked for; the
    query is analysed once and translated once per route for the whole request (the first stage, the passages, the
    matched words)."""
    import service.stages.evidence as evidence_module
    from service.engine import Engine
    from service.ranker import evidence_features
    from service.retrieval.first_stage import FirstStage
    from service.retrieval.resources import Route
    from service.schema import SearchRequest
    from service.settings import Settings
    from service.text.analysis import Analyzer
    from training.build import build_index

    write_synthetic(tmp_path / "all.jsonl", SynthConfig(n=200, seed=11), progress=False)
    idx = tmp_path / "index"
    build_index(tmp_path / "all.jsonl", idx, compounds="", progress=False)  # the project's ranker, word vectors
    engine = Engine.load(idx, settings=Settings(index_dir=idx))
    ranker = engine.evidence.ranker
    assert ranker is not None and engine.evidence.kernels is not None and "feedback" not in ranker.features
    assert set(ranker.features) < set(FEATURES)  # (it reads fewer than the code computes for learning)
    calls: dict[str, int] = {"run": 0, "analysis": 0, "translation": 0}
    seen: list[tuple[Any, ...]] = []

    def counted(name: str, f: Any) -> Any:
        def wrapper(*args: Any, **kw: Any) -> Any:
            calls[name] += 1
            return f(*args, **kw)
        return wrapper

    def recorded(*args: Any, **kw: Any) -> Any:
        """The engine's call, and every feature computed from the same evidence (before the engine reorders the
        candidates), with the feedback search it then runs counted apart."""
        ev = evidence_features(*args, **kw)
        before = dict(calls)
        every = evidence_features(*args[:6], FEATURES, *args[7:], **kw)
        seen.append((args, kw, ev, every, calls["run"] - before["run"]))
        calls.update(before)  # (the request's counts, not these)
        return ev

    monkeypatch.setattr(FirstStage, "run", counted("run", FirstStage.run))
    query_text = {"text": ""}

    def of_query(f: Any) -> Any:  # the query's analyses (the passages' own-words rule analyses passage texts too)
        def wrapper(self: Any, text: str, *args: Any, **kw: Any) -> Any:
            if " ".join(text.split()) == query_text["text"]:
                calls["analysis"] += 1
            return f(self, text, *args, **kw)
        return wrapper

    monkeypatch.setattr(Analyzer, "__call__", of_query(Analyzer.__call__))
    monkeypatch.setattr(Analyzer, "groups", of_query(Analyzer.groups))
    monkeypatch.setattr(Route, "sourced_units", counted("translation", Route.sourced_units))
    monkeypatch.setattr(evidence_module, "evidence_features", recorded)
    for i, lang in enumerate(("en", "de", "fr")):
        rec = next(r for r in (engine.docs.get_row(j) for j in range(i * 7, len(engine.docs))) if lang in r.title)
        req = SearchRequest(query=f"{rec.title[lang]} {rec.abstract.get(lang, '')}", lang=lang, k=20, explain=True)
        query_text["text"] = " ".join(req.query.split())
        for name in calls:
            calls[name] = 0
        seen.clear()
        res = engine.search(req)
        assert res.ranked_by == "learned ranker" and len(seen) == 1
        routes = len(res.query.routes)
        assert calls == {"run": 1, "analysis": 1, "translation": routes}, (lang, calls, res.query.routes)
        args, kw, ev, every, feedback_runs = seen[0]
        assert ev.computed == tuple(f for f in FEATURES if f in ranker.features)
        unread = [j for j, f in enumerate(FEATURES) if f not in ranker.features]
        assert not ev.X[:, unread].any()
        # every feature computed, then the ranker's selected: the same columns and scores, to the bit
        assert every.computed == FEATURES
        cols = [FEATURES.index(f) for f in ranker.features]
        assert np.array_equal(every.X[:, cols], ev.X[:, cols])
        assert np.array_equal(ranker.score(every.X), ranker.score(ev.X))
        assert every.predicted_codes == ev.predicted_codes
        # the feedback search runs where the feature is read, once
        assert feedback_runs == 1 and every.X[:, FEATURES.index("feedback")].max() == pytest.approx(1.0)
    with pytest.raises(ValueError, match="unknown to this code"):
        evidence_features(*args[:6], ["no such feature"], *args[7:], **kw)
    engine.close()
