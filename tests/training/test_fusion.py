"""training.fusion: grid search of fusion weights on dev topics, never below BM25, fusion.json, the plot."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from service.evaluation.measures import evaluate_run
from training import fusion as fu


def _topic(rng: np.random.Generator, n: int, n_rel: int, ties: bool = False) -> fu.TopicScores:
    rows = rng.permutation(10 * n)[:n].astype(np.int64)
    scores = {c: rng.normal(size=n) for c in ("bm25", "dense", "text", "meta", "joint", "stacked")}
    if ties:  # coarse scores: many exact ties, broken by row
        scores = {c: np.round(v) for c, v in scores.items()}
    n_bm25 = n * 2 // 3
    scores["bm25"] = np.abs(scores["bm25"]) + 0.5
    scores["bm25"][n_bm25:] = 0.0  # dense-only rows
    grades = np.zeros(n)
    grades[rng.choice(n, n_rel, replace=False)] = rng.integers(1, 3, size=n_rel)
    ideal = np.sort(np.concatenate([grades[grades > 0], [1.0]]))[::-1]  # one relevant doc not retrieved
    in_bm25 = np.arange(n) < n_bm25
    return fu.TopicScores(f"q{rng.integers(1 << 30)}", rows, [f"d{r}" for r in rows], scores, in_bm25, ~in_bm25,
                          grades, ideal)


def test_simplex_grid() -> None:
    g = fu.simplex_grid(4)
    assert g.shape == (286, 4) and np.allclose(g.sum(axis=1), 1.0) and (g >= 0).all()
    assert any(np.array_equal(row, [1, 0, 0, 0]) for row in g)
    assert fu.simplex_grid(3, 0.5).shape == (6, 3)
    with pytest.raises(fu.FusionError, match="divide 1"):
        fu.simplex_grid(3, 0.3)


def test_ndcg_is_trec_evals() -> None:
    rng = np.random.default_rng(0)
    ts = _topic(rng, 40, 4)
    order = fu.rank_order(ts.scores["dense"], ts.rows)
    run = {"q": {ts.ids[int(i)]: float(len(order) - r) for r, i in enumerate(order)}}
    qrels = {"q": {**{ts.ids[i]: int(g) for i, g in enumerate(ts.grades) if g > 0}, "missing": 1}}
    assert fu.ndcg_of(ts, ts.scores["dense"]) == pytest.approx(evaluate_run(run, qrels, ["ndcg"]).aggregate["ndcg"])


@pytest.mark.parametrize("ties", [False, True])
def test_vectorised_grid_equals_the_pipeline_formula(ties: bool) -> None:
    rng = np.random.default_rng(1)
    topics = [_topic(rng, int(rng.integers(20, 60)), int(rng.integers(1, 5)), ties) for _ in range(6)]
    comps = ("bm25", "dense", "text", "meta")
    grid = fu.simplex_grid(4, 0.25)
    got = fu.grid_ndcg(topics, comps, "text", grid)
    for p, w in enumerate(grid):
        weights = dict(zip(comps, w, strict=True))
        want = np.mean([fu.ndcg_of(ts, fu.fused_scores(ts, weights)) for ts in topics])
        assert got[p] == pytest.approx(want, abs=1e-12), weights


def test_learned_weights_never_below_bm25_and_prefer_bm25_on_ties() -> None:
    rng = np.random.default_rng(2)
    topics = [_topic(rng, 50, 3) for _ in range(8)]
    res = fu.learn_depth(topics, 40)
    bm25 = np.mean([fu.ndcg_of(ts, ts.scores["bm25"], ts.in_bm25) for ts in topics])
    assert res.bm25_ndcg == pytest.approx(bm25)
    for v in fu.VARIANT_COMPONENTS:
        assert res.fused_ndcg[v] >= res.bm25_ndcg - 1e-12
        assert sum(res.weights[v].values()) == pytest.approx(1.0)
    # every candidate list ranked perfectly by BM25: all grid points with enough BM25 weight tie; BM25 alone wins
    for ts in topics:
        ts.scores["bm25"] = np.where(ts.in_bm25, 1.0 + ts.grades * 10 + np.linspace(0, 0.1, len(ts)), 0.0)
        ts.grades[~ts.in_bm25] = 0
    res = fu.learn_depth(topics, 40, variants=("joint",))
    assert res.weights["joint"]["bm25"] == 1.0 and res.ties["joint"] >= 1


def test_task_validity() -> None:
    full = {"index_langs": ["en", "de", "fr"], "fields": ["title", "abstract", "claims", "description"]}
    v = fu.task_validity(full)
    assert v["xling"] and "--index-langs en" in v["xling"]
    assert v["known-item"] and "claims,description" in v["known-item"]
    v = fu.task_validity({"index_langs": ["en"], "fields": ["claims", "description"]})
    assert v == {"xling": None, "known-item": None}
    assert fu.parse_depths("1000,40,40") == [40, 1000]
    with pytest.raises(fu.FusionError, match="1..1000"):
        fu.parse_depths("0,40")


@pytest.mark.slow
def test_fuse_command_with_given_topics(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    pytest.importorskip("torch")
    from models_fixture import tiny_index, tiny_models
    from typer.testing import CliRunner

    from service.api.settings import Settings
    from service.corpus.jsonl import read_corpus
    from service.engine import Engine
    from service.evaluation.trec import Topic, write_qrels, write_topics
    from service.index.store import load_meta
    from training.cli import app
    from training.synth import synth_topics

    corpus, _ = tiny_models()
    index = tmp_path / "index"
    shutil.copytree(tiny_index(), index)
    topics, qrels = synth_topics(read_corpus(corpus), 8, seed=0)
    write_topics([Topic.model_validate(t) for t in topics], tmp_path / "t.jsonl")
    write_qrels(qrels, tmp_path / "q.txt")
    res = CliRunner().invoke(app, ["fuse", str(index), "--topics", str(tmp_path / "t.jsonl"), "--qrels",
                                   str(tmp_path / "q.txt"), "--depths", "5,20", "--device", "cpu", "--json"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    assert set(summary["depths"]) == {"5", "20"}
    data = json.loads((index / "models" / "fusion.json").read_text())
    for v in data["variants"].values():
        for d in v["depths"].values():
            assert d["dev_ndcg"] >= d["bm25_ndcg"] - 1e-12
    assert (index / "models" / "fusion.png").stat().st_size > 10_000
    meta = load_meta(index, verify=True)
    assert meta.components["fusion"]["default_variant"] == data["default_variant"]
    engine = Engine.load(index, settings=Settings(index_dir=index, device="cpu"))
    assert engine.pipeline.names[-2:] == ["weights", "fusion"]
    res = CliRunner().invoke(app, ["fuse", str(index), "--task", "xling"])
    assert res.exit_code == 2 and "no dev topics for task(s) xling" in res.output


@pytest.mark.realdata
@pytest.mark.slow
def test_fusion_on_real_dev_split_is_never_below_bm25(real_corpus: Path, tmp_path: Path) -> None:
    """Tiny models trained on the real corpus; fusion tuned on the real DEV topics (xling + known-item)."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("torch")
    from models_fixture import train_tiny

    from service.retrieval.first_stage import FirstStage
    from training.build import build_index
    from training.models.pairs import Split

    models = train_tiny(real_corpus, tmp_path / "models")
    index = tmp_path / "index"
    report = build_index(real_corpus, index, index_langs="en", fields="claims,description", models_dir=models,
                         device="cpu", progress=False, fuse=True)
    assert report.fusion is not None and "skipped" not in report.fusion
    data = json.loads((index / "models" / "fusion.json").read_text())
    assert data["dev"]["tasks"]["xling"] > 0 and data["dev"]["tasks"]["known-item"] > 0
    for variant in data["variants"].values():
        for depth, d in variant["depths"].items():
            assert d["dev_ndcg"] >= d["bm25_ndcg"] - 1e-12, (depth, d)
    # the BM25 figure is the first stage's own dev NDCG (ir-measures over its run), not a grid artefact
    split = Split.load(models / "split.json")
    dev = fu.dev_set(index, "auto")
    assert all(split.part[doc] == "dev" for q in dev.qrels.values() for doc in q)
    first = FirstStage.load(index)
    for depth in (40, 1000):
        run = {t.qid: {h.doc_id: float(depth - h.rank) for h in first.search(t.text, lang=t.lang, k=depth).hits}
               for t in dev.topics}
        ndcg = evaluate_run(run, dev.qrels, ["ndcg"]).aggregate["ndcg"]
        assert data["variants"]["stacked"]["depths"][str(depth)]["bm25_ndcg"] == pytest.approx(ndcg, abs=1e-9)
