"""training.fusion: leak-free dev topics, the grid over the pipeline's features, the shrunk choice, cross-validation
and the install rule, fusion.json, the plot; on tiny models and on the real dev split."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from index_copy import copy_index

from service.fusion import fuse_linear
from training import fusion as fu
from training.evaluation.measures import evaluate_run
from training.evaluation.trec import Topic


def _features(rng: np.random.Generator, n: int, *, signal: float, task: str = "t", group: str | None = None,
              profile: str = "nocodes") -> fu.TopicFeatures:
    """One topic: BM25 weakly informative, ``text`` as informative as ``signal`` (0: noise)."""
    grades = np.zeros(n)
    rel = rng.choice(n, 2, replace=False)
    grades[rel] = [2, 1]
    bm25 = np.abs(rng.normal(size=n)) + 0.2 * grades
    text = rng.normal(size=n) + signal * grades
    rows = rng.permutation(10 * n)[:n].astype(np.int64)
    qid = group or f"q{rng.integers(1 << 30)}"
    dt = fu.DevTopic(Topic(qid=qid, text="x"), task, qid, profile, {f"d{r}": int(g) for r, g in zip(rows, grades,
                                                                                                   strict=True) if g})
    return fu.TopicFeatures(dt, rows, {"bm25": bm25, "text": text}, np.ones(n, dtype=bool), grades,
                            np.sort(grades[grades > 0])[::-1])


def test_simplex_grid_and_depths() -> None:
    g = fu.simplex_grid(4)
    assert g.shape == (286, 4) and np.allclose(g.sum(axis=1), 1.0) and (g >= 0).all()
    assert fu.simplex_grid(3, 0.5).shape == (6, 3)
    with pytest.raises(fu.FusionError, match="divide 1"):
        fu.simplex_grid(3, 0.3)
    assert fu.parse_depths("1000,40,40") == [40, 1000]
    with pytest.raises(fu.FusionError, match="1..1000"):
        fu.parse_depths("0,40")


def test_grid_measures_are_trec_evals() -> None:
    rng = np.random.default_rng(0)
    tf = _features(rng, 40, signal=1.0)
    grid = fu.simplex_grid(2, 0.25)
    ndcg, rr = fu.grid_measures(tf, ("bm25", "text"), grid)
    fused = fuse_linear(tf.scores, ("bm25", "text"), grid)
    qrels = {"q": {**{f"d{r}": int(g) for r, g in zip(tf.rows, tf.grades, strict=True) if g}}}
    for p in range(len(grid)):
        order = np.lexsort((tf.rows, -fused[:, p]))  # the pipeline's order: score, then lower row
        run = {"q": {f"d{tf.rows[i]}": float(len(order) - k) for k, i in enumerate(order)}}
        ev = evaluate_run(run, qrels, ["ndcg", "mrr"]).aggregate
        assert ndcg[p] == pytest.approx(ev["ndcg"]) and rr[p] == pytest.approx(ev["mrr"])


def test_choice_is_shrunk_toward_bm25() -> None:
    grid = fu.simplex_grid(2, 0.5)  # (0,1) (0.5,0.5) (1,0); bm25 is column 0
    noise = np.array([[0.5, 0.52, 0.5], [0.6, 0.58, 0.6], [0.4, 0.41, 0.4]])  # differences within one SE
    assert fu.choose(noise, grid, 0) == 2  # BM25 alone
    real = np.array([[0.5, 0.8, 0.5], [0.6, 0.9, 0.6], [0.4, 0.7, 0.4], [0.3, 0.6, 0.3]])
    assert fu.choose(real, grid, 0) == 1


def test_folds_keep_a_grant_together_and_spread_tasks() -> None:
    groups = ["EP1", "EP1", "EP2", "EP2", "EP3", "US1", "US2", "US3"]
    tasks = ["xling"] * 5 + ["known-item"] * 3
    fold = fu.fold_ids(groups, tasks, 3)
    assert fold[0] == fold[1] and fold[2] == fold[3]
    assert len(set(fold[5:].tolist())) == 3 and len(set(fold[[0, 2, 4]].tolist())) == 3
    assert fu.group_of("EP0640886B1-de") == "EP0640886B1" and fu.group_of("US07861316B2") == "US07861316B2"


def test_install_only_what_beats_bm25_held_out() -> None:
    rng = np.random.default_rng(3)
    helpful = [_features(rng, 60, signal=3.0) for _ in range(20)]
    cell = fu.decide("nocodes", 40, helpful, ["bm25", "text"], folds=5)
    assert cell.installed and cell.weights["text"] > 0 and cell.cv_ndcg > cell.bm25_ndcg and cell.p < 0.05
    assert cell.single["text"] > cell.single["bm25"] == pytest.approx(cell.bm25_ndcg)
    noise = [_features(rng, 60, signal=0.0) for _ in range(20)]
    cell = fu.decide("nocodes", 40, noise, ["bm25", "text"], folds=5)
    assert not cell.installed
    assert any(w in cell.reason for w in ("did not beat BM25", "BM25 alone", "not significantly"))
    few = fu.decide("codes", 40, helpful[:3], ["bm25", "text"], folds=2)
    assert not few.installed and "too few dev topics" in few.reason


def test_task_validity_and_profiles() -> None:
    from service.index.folder import BuildSettings

    bm25 = {"scoring": "bm25", "k1": 1.2, "b": 0.75, "epsilon": 0.25}
    full = BuildSettings.from_dict({"index_langs": ["en", "de", "fr"],
                                    "fields": ["title", "abstract", "claims", "description"], **bm25})
    v = fu.task_validity(full)
    assert v["xling"] and "--index-langs en" in v["xling"]
    assert v["known-item"] and "claims,description" in v["known-item"]
    plain = BuildSettings.from_dict({"index_langs": ["en"], "fields": ["claims", "description"], **bm25})
    assert fu.task_validity(plain) == {"xling": None, "known-item": None}
    t = Topic(qid="EP1B1-de", text="Pumpe", lang="de", ipc=["F04B1/00"], cpc=["F04B53/10", "H01F27/14"])
    mine = fu.profiled([t], {"EP1B1-de": {"EP1B1": 1}}, "xling", own_codes=False)
    assert [d.profile for d in mine] == ["nocodes", "codes"]
    assert mine[0].topic.codes == [] and mine[1].topic.codes == ["F04B", "H01F"]  # subclass only, never the exact
    given = fu.profiled([t], {"EP1B1-de": {"EP9B1": 2}}, "given", own_codes=True)
    assert given[1].topic.codes == t.codes and given[1].group == "EP1B1"
    assert fu.profiled([t], {"EP1B1-de": {"EP1B1": 0}}, "x", own_codes=False) == []  # nothing relevant


@pytest.mark.slow
def test_fuse_command_with_given_topics(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    pytest.importorskip("torch")
    from models_fixture import tiny_index, tiny_models
    from typer.testing import CliRunner

    from service.corpus.jsonl import read_corpus
    from service.engine import Engine
    from service.index.folder import load_meta
    from service.settings import Settings
    from training.cli import app
    from training.evaluation.trec import write_qrels, write_topics
    from training.synth import synth_topics

    corpus, _ = tiny_models()
    index = tmp_path / "index"
    copy_index(tiny_index(), index)
    topics, qrels = synth_topics(read_corpus(corpus), 12, seed=0)
    write_topics([Topic.model_validate(t) for t in topics], tmp_path / "t.jsonl")
    write_qrels(qrels, tmp_path / "q.txt")
    res = CliRunner().invoke(app, ["fuse", str(index), "--topics", str(tmp_path / "t.jsonl"), "--qrels",
                                   str(tmp_path / "q.txt"), "--depths", "5,20", "--folds", "3", "--device", "cpu",
                                   "--json", "--no-progress"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    cells = {(c["profile"], c["depth"]) for c in summary["cells"]}
    assert cells == {("nocodes", 5), ("nocodes", 20), ("codes", 5), ("codes", 20)}
    for c in summary["cells"]:
        assert set(c["single"]) <= {"bm25", "dense", "text", "meta", "joint"}
        assert c["installed"] == (c["cv_ndcg"] > c["bm25_ndcg"] + 1e-9 and c["topics"] >= fu.MIN_TOPICS
                                  and c["weights"]["bm25"] < 1.0 and c["p"] < fu.ALPHA and all(
                                      t["cv"] >= t["bm25"] or t["p"] >= 0.05 for t in c["by_task"].values()))
        # without codes the meta and joint rankers read the codes predicted for the query: weighed in both profiles
        assert {"meta", "joint"} <= set(c["weights"])
    data = json.loads((index / "fusion.json").read_text())
    assert data["format"] == "priorart-fusion" and data["learning"]["linear"]["folds"] == 3
    assert (index / "fusion.png").stat().st_size > 10_000
    meta = load_meta(index, verify=True)  # registered, every checksum right
    assert meta.components["fusion"]["file"] == "fusion.json"
    engine = Engine.load(index, settings=Settings(index_dir=index, device="cpu"))
    assert engine.pipeline.names[-4:] == ["fusion", "evidence", "collapse", "explain"]
    assert engine.pipeline.fusion.model.linear["nocodes"].installed == any(
        c["installed"] for c in summary["cells"] if c["profile"] == "nocodes")
    res = CliRunner().invoke(app, ["fuse", str(index), "--task", "xling"])
    assert res.exit_code == 2 and "does not suit this index" in res.output


@pytest.mark.realdata
@pytest.mark.slow
def test_real_dev_topics_are_leak_free_and_fusion_never_hurts(real_corpus: Path, tmp_path: Path) -> None:
    """Tiny models trained on the real corpus; fusion learned on the real DEV topics (xling + known-item)."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("torch")
    from models_fixture import train_tiny

    from service.index.folder import IndexFolder
    from service.index.store import DocStore
    from training.build import build_index
    from training.models.pairs import Split

    models = train_tiny(real_corpus, tmp_path / "models")
    index = tmp_path / "index"
    report = build_index(real_corpus, index, index_langs="en", fields="claims,description", models_dir=models,
                         device="cpu", progress=False, fuse=True)
    assert report.fusion is not None and "skipped" not in report.fusion
    assert report.fusion["tasks"]["xling"] > 0 and report.fusion["tasks"]["known-item"] > 0
    folder = IndexFolder.open(index)
    docs = DocStore.load(index)
    dev, _ = fu.dev_topics(folder, docs, "auto")
    split = Split.load(models / "split.json")
    assert all(split.part[d] == "dev" for t in dev for d in t.judged)
    for t in dev:  # no topic carries more than subclass codes of the document it looks for
        assert all(len(c) == 4 for c in t.topic.codes) and (t.profile == "codes") == bool(t.topic.codes)
    for c in report.fusion["cells"]:  # whatever was installed beat BM25 on the held-out folds
        assert not c["installed"] or (c["cv_ndcg"] > c["bm25_ndcg"] and c["p"] < fu.ALPHA)
