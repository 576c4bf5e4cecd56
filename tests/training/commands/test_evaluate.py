"""``priorart evaluate`` / ``evaluate-run``: report keys and values, run files, comparisons, errors."""

from __future__ import annotations

import json
import types
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from training.commands import evaluate as evaluate_command
from training.commands.evaluate import format_table
from training.evaluation.measures import MEASURE_NAMES, evaluate_run
from training.evaluation.trec import Topic, read_run, write_qrels, write_run, write_topics

JSON_KEYS = {
    "queries",
    "ndcg",
    "ndcg@5",
    "map",
    "map@100",
    "mrr",
    "p@1",
    "p@5",
    "recall@100",
    "pres@100",
    "success@1",
    "success@10",
}


def _cli() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        """test root"""

    evaluate_command.register(app)
    return app


QRELS = {f"q{i}": {f"d{i}": 1} for i in range(12)}
# good: the relevant doc first for every query; bad: relevant doc third for most queries
GOOD = {f"q{i}": {f"d{i}": 3.0, "x": 2.0, "y": 1.0} for i in range(12)}
BAD = {f"q{i}": {"x": 3.0, "y": 2.0, f"d{i}": 1.0 if i % 4 else 5.0} for i in range(12)}


@pytest.fixture()
def files(tmp_path: Path) -> dict[str, Path]:
    paths = {"qrels": tmp_path / "qrels.txt", "good": tmp_path / "good.trec", "bad": tmp_path / "bad.trec"}
    write_qrels(QRELS, paths["qrels"])
    write_run(GOOD, paths["good"])
    write_run(BAD, paths["bad"])
    return paths


def test_evaluate_run_json(files: dict[str, Path]) -> None:
    res = CliRunner().invoke(_cli(), ["evaluate-run", str(files["bad"]), str(files["qrels"]), "--json"])
    assert res.exit_code == 0, res.output
    obj = json.loads(res.stdout)
    assert set(obj) >= JSON_KEYS
    expected = evaluate_run(BAD, QRELS).aggregate
    for name in MEASURE_NAMES:
        assert obj[name] == pytest.approx(expected[name])
    # 3 of 12 queries have the relevant doc first, 9 at rank 3
    assert obj["queries"] == 12
    assert obj["mrr"] == pytest.approx((3 * 1 + 9 / 3) / 12)
    assert obj["p@1"] == pytest.approx(0.25)


def test_evaluate_run_compare(files: dict[str, Path]) -> None:
    args = ["evaluate-run", str(files["good"]), str(files["qrels"]), "--json", "--compare", str(files["bad"])]
    args += ["--compare", str(files["good"])]
    res = CliRunner().invoke(_cli(), args)
    assert res.exit_code == 0, res.output
    obj = json.loads(res.stdout)
    assert obj["mrr"] == 1.0
    cmp = obj["compare"]
    assert set(cmp) == {"bad.trec", "good.trec"}
    # 9 of 12 paired differences in MRR are 2/3, 3 are 0: exact test, only the all-same-sign
    # patterns of the 9 reach the observed mean -> p = 2 * 2**3 / 2**12 = 1/256
    assert cmp["bad.trec"]["p"]["mrr"] == pytest.approx(1 / 256)
    assert cmp["bad.trec"]["measures"]["mrr"] == pytest.approx(0.5)
    assert all(p == 1.0 for p in cmp["good.trec"]["p"].values())


def test_evaluate_run_table(files: dict[str, Path]) -> None:
    res = CliRunner().invoke(
        _cli(), ["evaluate-run", str(files["good"]), str(files["qrels"]), "--compare", str(files["bad"])]
    )
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert lines[0].split() == ["measure", "good.trec", "bad.trec", "p"]
    assert lines[1].split() == ["queries", "12", "12"]
    rows = {ln.split()[0]: ln.split()[1:] for ln in lines[2:] if ln.split() and ln.split()[0] in MEASURE_NAMES}
    assert set(rows) == set(MEASURE_NAMES)
    assert rows["mrr"] == ["1.0000", "0.5000", "0.0039"]


def test_format_table_without_comparison() -> None:
    table = format_table(evaluate_run(GOOD, QRELS))
    assert table.splitlines()[2].split() == ["ndcg", "1.0000"]


@pytest.mark.parametrize(
    ("content", "message"),
    [("q1 Q0 d1 1 x tag\n", "run.trec:1"), ("", "no query")],
)
def test_evaluate_run_errors(tmp_path: Path, files: dict[str, Path], content: str, message: str) -> None:
    run = tmp_path / "run.trec"
    run.write_text(content, encoding="utf-8")
    qrels = files["qrels"] if content else tmp_path / "empty_qrels.txt"
    if not content:
        qrels.write_text("q1 0 d1 0\n", encoding="utf-8")
    res = CliRunner().invoke(_cli(), ["evaluate-run", str(run), str(qrels)])
    assert res.exit_code == 2
    assert message in res.output
    assert "Traceback" not in res.output


@pytest.mark.slow
def test_evaluate_runs_the_index_pipeline(tmp_path: Path) -> None:
    """No dense stage (--no-dense): the pipeline is the first stage, so the run is the first stage's ranking, in
    order."""
    from service.corpus.jsonl import write_corpus
    from service.retrieval.first_stage import FirstStage
    from training.build import build_index
    from training.synth import generate

    records = list(generate(80, seed=3))
    write_corpus(records, tmp_path / "c.jsonl")
    build_index(tmp_path / "c.jsonl", tmp_path / "index", index_langs="en", progress=False, dense=False)
    assert records[5].cpc
    topics = [Topic(qid="a", text=records[5].title["en"], lang="en", cpc=records[5].cpc[:1]),
              Topic(qid="b", text=records[9].abstract["en"], lang="en")]
    write_topics(topics, tmp_path / "topics.jsonl")
    write_qrels({"a": {records[5].id: 1}, "b": {records[9].id: 1}}, tmp_path / "qrels.txt")
    run_path = tmp_path / "out" / "run.trec"
    args = ["evaluate", str(tmp_path / "index"), str(tmp_path / "topics.jsonl"), str(tmp_path / "qrels.txt")]
    res = CliRunner().invoke(_cli(), [*args, "--json", "--run", str(run_path), "--k", "5", "--no-progress",
                                      "--system", "fusion"])
    assert res.exit_code == 0, res.output
    obj = json.loads(res.stdout)
    assert set(obj) >= JSON_KEYS and obj["queries"] == 2
    assert obj["system"].startswith("fusion: resolve -> bm25 -> fusion")
    first = FirstStage.load(tmp_path / "index")
    run = read_run(run_path)
    for t in topics:
        want = [h.doc_id for h in first.search(t.text, lang=t.lang, k=5).hits]
        assert sorted(run[t.qid], key=lambda d: -run[t.qid][d]) == want
    res = CliRunner().invoke(_cli(), [*args, "--json", "--filter-codes", "--system", "bm25"])
    assert res.exit_code == 0, res.output
    filtered = [h.doc_id for h in first.search(topics[0].text, lang="en", k=1000, codes=topics[0].codes).hits]
    assert json.loads(res.stdout)["queries"] == 2
    assert 0 < len(filtered) < 80
    res = CliRunner().invoke(_cli(), [*args, "--run", str(run_path), "--filter-codes", "--k", "1000"])
    got = read_run(run_path)["a"]
    assert sorted(got, key=lambda d: -got[d]) == filtered
    res = CliRunner().invoke(_cli(), [*args, "--system", "semantic"])
    assert res.exit_code == 2 and "unknown system 'semantic'" in res.output


@pytest.mark.slow
@pytest.mark.server
def test_evaluate_measures_what_the_running_server_returns(tmp_path: Path) -> None:
    """Issue 60: `priorart evaluate` ran the pipeline without the evidence step (MRR 0.670 on hidden titles where
    /search gave 0.809). By default each topic's run is now the list a running server's /search returns (the ids in
    order, on a default build: dense stage, learned ranker, passages), so its MRR is the server's; --system fusion
    is the fused order (/search with evidence_docs 0)."""
    import httpx
    from live_server import live_server
    from suite_corpus import write_suite_corpus

    from service.settings import Settings
    from training.build import build_index

    records = write_suite_corpus(tmp_path / "c.jsonl", 300)  # (the suite's collection: tests/suite_corpus.py)
    build_index(tmp_path / "c.jsonl", tmp_path / "index", progress=False)
    picked = records[::10]
    topics = [Topic(qid=f"q{i}", text=r.claims["en"][0].text, lang="en") for i, r in enumerate(picked)]
    qrels = {t.qid: {r.id: 1} for t, r in zip(topics, picked, strict=True)}
    write_topics(topics, tmp_path / "topics.jsonl")
    write_qrels(qrels, tmp_path / "qrels.txt")
    args = ["evaluate", str(tmp_path / "index"), str(tmp_path / "topics.jsonl"), str(tmp_path / "qrels.txt"),
            "--json", "--k", "20", "--no-progress"]
    measured = {}
    for system in ("search", "fusion"):
        res = CliRunner().invoke(_cli(), [*args, "--system", system, "--run", str(tmp_path / f"{system}.trec")])
        assert res.exit_code == 0, res.output
        measured[system] = json.loads(res.stdout)
    assert "-> evidence (the learned ranker of the first 20)" in measured["search"]["system"]
    with live_server(Settings(index_dir=tmp_path / "index")) as addr:
        served: dict[str, dict[str, dict[str, float]]] = {"search": {}, "fusion": {}}
        for t in topics:
            for system, extra in (("search", {}), ("fusion", {"evidence_docs": 0})):
                r = httpx.post(f"http://{addr}/search", json={"query": t.text, "lang": "en", "k": 20, **extra},
                               timeout=60)
                assert r.status_code == 200, r.text
                ids = [h["id"] for h in r.json()["results"]]
                served[system][t.qid] = {d: float(len(ids) - i) for i, d in enumerate(ids)}
    for system in ("search", "fusion"):
        run = read_run(tmp_path / f"{system}.trec")
        for t in topics:
            assert sorted(run[t.qid], key=lambda d: -run[t.qid][d]) == sorted(
                served[system][t.qid], key=lambda d: -served[system][t.qid][d]), (system, t.qid)
        assert measured[system]["mrr"] == pytest.approx(evaluate_run(served[system], qrels).aggregate["mrr"])
    assert served["search"] != served["fusion"]  # the evidence step reorders: the two are different measures


def test_run_topics_reports_the_topic_on_error() -> None:
    from training.runs import run_topics

    class Failing:
        def run(self, query: Any, **options: Any) -> Any:
            raise ValueError("empty query")

    class Engine:
        docs = types.SimpleNamespace(ids=[])
        pipeline = Failing()

    with pytest.raises(ValueError, match="topic q7: empty query"):
        run_topics(Engine(), [Topic(qid="q7", text="x")])  # type: ignore[arg-type]


@pytest.mark.realdata
@pytest.mark.slow
def test_evaluate_known_item_end_to_end(tmp_path: Path, us_dir: Path) -> None:
    """Build a claims+description index of the real US grants and evaluate the known-item task."""
    pytest.importorskip("training.commands.build", reason="`priorart build` is not available yet")
    from service.corpus.jsonl import write_corpus
    from training.commands import build as build_command
    from training.commands import tasks as tasks_command
    from training.ingest import iter_records

    app = _cli()
    build_command.register(app)
    tasks_command.register(app)
    corpus = tmp_path / "us.jsonl"
    write_corpus(iter_records([us_dir]), corpus)
    task = tmp_path / "task"
    index = tmp_path / "index"
    runner = CliRunner()
    res = runner.invoke(app, ["task", "known-item", str(corpus), "-o", str(task)])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["build", str(corpus), "-o", str(index), "--fields", "claims,description"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(
        app,
        [
            "evaluate",
            str(index),
            str(task / "topics.jsonl"),
            str(task / "qrels.txt"),
            "--json",
            "--run",
            str(tmp_path / "run.trec"),
        ],
    )
    assert res.exit_code == 0, res.output
    obj = json.loads(res.stdout)
    assert set(obj) >= JSON_KEYS
    assert obj["queries"] > 100
    assert 0.3 < obj["mrr"] <= 1.0
    assert (tmp_path / "run.trec").stat().st_size > 0


@pytest.mark.realdata
@pytest.mark.slow
def test_evaluate_xling_without_translation(tmp_path: Path, ep_dir: Path) -> None:
    """German/French first claims against an English-only index of the real EP grants, no translation."""
    pytest.importorskip("training.commands.build", reason="`priorart build` is not available yet")
    from service.corpus.jsonl import write_corpus
    from training.commands import build as build_command
    from training.commands import tasks as tasks_command
    from training.ingest import iter_records

    app = _cli()
    build_command.register(app)
    tasks_command.register(app)
    corpus = tmp_path / "ep.jsonl"
    write_corpus(iter_records([ep_dir]), corpus)
    runner = CliRunner()
    res = runner.invoke(app, ["task", "xling", str(corpus), "-o", str(tmp_path / "task")])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["build", str(corpus), "-o", str(tmp_path / "index"), "--index-langs", "en"])
    assert res.exit_code == 0, res.output
    task = tmp_path / "task"
    args = ["evaluate", str(tmp_path / "index"), str(task / "topics.jsonl"), str(task / "qrels.txt")]
    res = runner.invoke(app, [*args, "--json", "--no-translate"])
    assert res.exit_code == 0, res.output
    obj = json.loads(res.stdout)
    assert set(obj) >= JSON_KEYS
    assert obj["queries"] == 50 and obj["translate"] is False
    assert 0.0 <= obj["pres@100"] <= 1.0 and 0.0 <= obj["ndcg"] <= 1.0
    assert obj["mrr"] > 0.3  # reference signs, numbers and formulas are shared across languages


def test_evaluate_run_passages_map_d_prec_d_hand_worked(tmp_path: Path) -> None:
    # q1: document A has relevant passages A/p1 and A/p3; the run ranks A/p1, A/p2, A/p3 (and B/p1).
    #   AP in A = (1/1 + 2/3) / 2 = 0.8333...; PREC in A = 2 relevant of 3 retrieved = 0.6667
    # q2: document C has relevant C/p2; the run retrieves C/p1 only -> AP 0, PREC 0
    # MAP(D) = (0.8333 + 0) / 2 = 0.41667; PREC(D) = (0.6667 + 0) / 2 = 0.33333
    run = tmp_path / "passages.run"
    run.write_text(
        "q1 Q0 A/p1 1 0.9 t\nq1 Q0 A/p2 2 0.8 t\nq1 Q0 B/p1 3 0.7 t\nq1 Q0 A/p3 4 0.6 t\nq2 Q0 C/p1 1 0.5 t\n"
    )
    qrels = tmp_path / "passages.qrels"
    qrels.write_text("q1 0 A/p1 1\nq1 0 A/p3 1\nq1 0 A/p2 0\nq2 0 C/p2 1\n")
    from training.cli import app

    res = CliRunner().invoke(app, ["evaluate-run", str(run), str(qrels), "--passages", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["queries"] == 2
    assert out["map(d)"] == pytest.approx((1 + 2 / 3) / 2 / 2)
    assert out["prec(d)"] == pytest.approx((2 / 3) / 2)
    bad = tmp_path / "bad.run"
    bad.write_text("q1 Q0 nopassage 1 0.9 t\n")
    res = CliRunner().invoke(app, ["evaluate-run", str(bad), str(qrels), "--passages"])
    assert res.exit_code != 0 and "not a passage id" in res.output
