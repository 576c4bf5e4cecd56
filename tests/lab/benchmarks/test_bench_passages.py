"""``priorart-lab bench passages`` and ``bench service --passages --compare-fused`` on a small synthetic index
(figures not asserted)."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from lab.commands import bench
from service.corpus.jsonl import write_corpus
from training.build import build_index
from training.synth import generate

pytestmark = pytest.mark.slow  # a synthetic index for the module (13 s) and the benches' timed runs


@pytest.fixture(scope="module")
def synth_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("bench-passages")
    write_corpus(generate(300, 5), folder / "corpus.jsonl")
    build_index(folder / "corpus.jsonl", folder / "index", progress=False)
    return folder / "index"


def test_passage_bench_compares_with_todays_implementation(synth_index: Path) -> None:
    from lab.benchmarks.passages import format_report, run_passage_bench

    report = run_passage_bench(synth_index, queries=6, depth=200, reference_queries=3, http=False)
    assert report["queries"] == 6 and report["documents"] == 300
    assert report["candidates_mean"] > 10
    assert report["reference"]["queries"] == 3
    assert report["reference"]["identical_hits"] == 3  # the same passages and scores as today's ranker
    assert {"bm25", "passages"} <= set(report["per_stage"])
    assert report["engine"]["n"] == 6 and report["first_query_ms"] > 0
    text = format_report(report)
    assert "today's implementation" in text and "identical hits 3/3" in text


def test_bench_cli_refuses_bad_options(synth_index: Path) -> None:
    app = typer.Typer()
    bench.register(app)
    res = CliRunner().invoke(app, ["bench", "passages", str(synth_index), "--variant", "bm25", "--no-http"])
    assert res.exit_code == 2 and "unknown passage variant" in res.output


def test_service_bench_times_passages(synth_index: Path) -> None:
    from lab.benchmarks.service import format_report, run_service_bench

    report = run_service_bench(synth_index, queries=5, depth=200, http=False, passages=True, compare_fused=True)
    assert report["passages_engine"]["p50"] > 0
    assert "passages e2e" in format_report(report)
    # the fused order, timed beside the default path (issue 63's goal: its p50 at most 1.3x)
    assert report["fused"]["p50"] > 0 and report["fused_ratio_p50"] == report["engine"]["p50"] / report["fused"]["p50"]
    assert "evidence" in report["per_stage"] and "fused order" in format_report(report)
    assert 0 <= report["fused"]["own_first"] <= 1 and "first claims, their first 60 words" in format_report(report)


def test_service_bench_takes_whole_first_claims_or_their_first_words(synth_index: Path) -> None:
    """``--words``: the known-item queries are the first claims' first N words, or (0) the whole claims."""
    from lab.benchmarks.service import _queries
    from service.engine import Engine

    engine = Engine.load(synth_index)
    cut, whole = _queries(engine, 5, 0, 8), _queries(engine, 5, 0, 0)
    engine.close()
    assert [d for d, _ in cut] == [d for d, _ in whole]
    assert all(len(t.split()) == 8 for _, t in cut)
    assert any(len(t.split()) > 8 for _, t in whole)
    assert all(w.startswith(c) for (_, c), (_, w) in zip(cut, whole, strict=True))
