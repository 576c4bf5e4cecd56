"""Orthogonality report: correlations against scipy, Jaccard and Borda by hand, files and the CLI."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import kendalltau, pearsonr
from typer.testing import CliRunner

from training.evaluation.trec import write_qrels, write_run
from training.ltr.orthogonality import borda_runs, correlations, jaccard, orthogonality, write_report

# q1: 4 relevant documents; q2: 1 relevant document; q3: 3 relevant documents
QRELS = {
    "q1": {"a": 1, "b": 1, "c": 1, "d": 1, "x": 0},
    "q2": {"e": 1},
    "q3": {"f": 1, "g": 2, "h": 1},
}
RUN_A = {
    "q1": {"a": 9.0, "b": 7.0, "c": 4.0, "d": 1.0, "x": 8.0},
    "q2": {"e": 2.0, "y": 5.0, "z": 1.0},
    "q3": {"f": 3.0, "g": 2.0, "h": 1.0},
}
RUN_B = {
    "q1": {"a": 0.5, "b": 0.9, "c": 0.3, "x": 0.1, "y": 0.2},  # d not retrieved
    "q2": {"e": 10.0, "y": 1.0},
    "q3": {"f": 1.0, "g": 3.0, "h": 2.0, "z": 0.0},
}


def test_per_query_correlations_equal_scipy_on_the_shared_relevant_documents() -> None:
    c = correlations(RUN_A, RUN_B, QRELS, min_points=3)
    # q1: a, b, c retrieved by both (d only by A); q3: f, g, h; q2 has one point: left out
    p1, k1 = pearsonr([9, 7, 4], [0.5, 0.9, 0.3])[0], kendalltau([9, 7, 4], [0.5, 0.9, 0.3])[0]
    p3, k3 = pearsonr([3, 2, 1], [1, 3, 2])[0], kendalltau([3, 2, 1], [1, 3, 2])[0]
    assert c["n_queries"] == 2
    assert c["pearson_query"] == pytest.approx((p1 + p3) / 2)
    assert c["kendall_query"] == pytest.approx((k1 + k3) / 2)


def test_pooled_correlations_use_scores_min_max_normalised_per_query_and_run() -> None:
    c = correlations(RUN_A, RUN_B, QRELS)
    # min-max over each run's list of the query: A q1 [1, 9], B q1 [0.1, 0.9], ...
    a = [(9 - 1) / 8, (7 - 1) / 8, (4 - 1) / 8, (2 - 1) / 4, 1.0, 0.5, 0.0]
    b = [(0.5 - 0.1) / 0.8, (0.9 - 0.1) / 0.8, (0.3 - 0.1) / 0.8, 1.0, 1 / 3, 1.0, 2 / 3]
    # order: q1 (a, b, c), q2 (e), q3 (f, g, h)
    assert c["n_pairs"] == 7
    assert c["pearson_pooled"] == pytest.approx(pearsonr(a, b)[0])
    assert c["kendall_pooled"] == pytest.approx(kendalltau(a, b)[0])


def test_jaccard_of_relevant_documents_in_the_top_k_by_hand() -> None:
    # k = 3: A q1 top a, x, b -> {a, b}; B q1 top b, a, c -> {a, b, c}: 2/3
    #        A q2 top y, e, z -> {e}; B q2 -> {e}: 1; A q3 {f, g, h}, B q3 top g, h, f -> {f, g, h}: 1
    value, n = jaccard(RUN_A, RUN_B, QRELS, k=3)
    assert n == 3 and value == pytest.approx((2 / 3 + 1 + 1) / 3)
    value, n = jaccard(RUN_A, RUN_B, QRELS, k=1)  # A: {a}, {}, {f}; B: {b}, {e}, {g}
    assert n == 3 and value == 0.0


def test_borda_of_two_runs_by_hand() -> None:
    fused = borda_runs({"A": {"q": {"a": 3.0, "b": 1.0}}, "B": {"q": {"b": 4.0, "c": 2.0}}}, {"A": 0.5, "B": 0.5})
    # A points: a 1, b 0 (c missing -> 0); B points: b 1, c 0
    assert fused == {"q": {"a": 0.5, "b": 0.5, "c": 0.0}}


def test_report_mode_and_measures() -> None:
    rep = orthogonality({"A": RUN_A, "B": RUN_B}, QRELS)
    (p,) = rep.pairs
    assert p.mode == "per-query" and p.n == 2
    pooled = orthogonality({"A": RUN_A, "B": RUN_B}, QRELS, mode="pooled").pairs[0]
    assert pooled.mode == "pooled" and pooled.n == 7 and pooled.pearson == pytest.approx(p.pearson_pooled)
    one_rel = {q: {d: g for d, g in j.items() if d in ("a", "e", "f")} for q, j in QRELS.items()}
    auto = orthogonality({"A": RUN_A, "B": RUN_B}, one_rel).pairs[0]
    assert auto.mode == "pooled"  # one relevant document per query: no query qualifies, pooled is used
    assert p.measures["a"]["mrr"] == pytest.approx((1 + 1 / 2 + 1) / 3)
    assert 0 <= p.measures["borda"]["mrr"] <= 1
    with pytest.raises(ValueError, match="mode"):
        orthogonality({"A": RUN_A, "B": RUN_B}, QRELS, mode="median")
    with pytest.raises(ValueError, match="two runs"):
        orthogonality({"A": RUN_A}, QRELS)


def test_write_report_writes_table_csv_json_and_a_heatmap(tmp_path: Path) -> None:
    run_c = {q: {d: -s for d, s in docs.items()} for q, docs in RUN_A.items()}  # reversed A
    rep = orthogonality({"A": RUN_A, "B": RUN_B, "C": run_c}, QRELS)
    paths = write_report(rep, tmp_path, title="toy")
    png = paths["png"].read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    rows = list(csv.DictReader(paths["csv"].open()))
    assert [(r["system_a"], r["system_b"]) for r in rows] == [("A", "B"), ("A", "C"), ("B", "C")]
    assert float(rows[1]["pearson"]) == pytest.approx(-1.0)  # A against its own negation
    data = json.loads(paths["json"].read_text())  # valid JSON (NaN written as null)
    assert data["systems"] == ["A", "B", "C"]
    assert "| A | C | per-query |" in paths["md"].read_text()


def test_orthogonality_command(tmp_path: Path) -> None:
    from training.cli import app

    write_run(RUN_A, tmp_path / "alpha.run")
    write_run(RUN_B, tmp_path / "beta.run")
    write_qrels(QRELS, tmp_path / "qrels.txt")
    res = CliRunner().invoke(app, ["orthogonality", str(tmp_path / "alpha.run"), str(tmp_path / "beta.run"),
                                   "--qrels", str(tmp_path / "qrels.txt"), "-o", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    assert "| alpha | beta | per-query | 2 |" in res.output
    assert (tmp_path / "out" / "orthogonality.png").is_file()
    res = CliRunner().invoke(app, ["orthogonality", str(tmp_path / "alpha.run"), "--qrels",
                                   str(tmp_path / "qrels.txt")])
    assert res.exit_code == 2 and "at least two" in res.output


def test_correlation_is_undefined_for_constant_scores() -> None:
    flat = {q: dict.fromkeys(docs, 1.0) for q, docs in RUN_A.items()}
    c = correlations(RUN_A, flat, QRELS)
    assert np.isnan(c["pearson_query"]) and np.isnan(c["pearson_pooled"])
