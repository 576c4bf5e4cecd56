"""Measures, PRES, MAP(D)/PREC(D) and the randomisation test against hand-worked examples."""

from __future__ import annotations

import math

import numpy as np
import pytest

from training.evaluation.measures import MEASURE_NAMES, evaluate_run, pres
from training.evaluation.passages import (
    average_precision_in_document,
    evaluate_passages,
    precision_in_document,
)
from training.evaluation.significance import compare_reports, randomisation_test

# ---------------------------------------------------------------- PRES (Magdy and Jones 2010)
# PRES = 1 - (sum(r_i)/n - (n+1)/2) / N_max; relevant docs not in the top N_max get the ranks
# N_max + n_R + 1 ... N_max + n (n_R = relevant found in the top N_max).


def test_pres_all_found() -> None:
    # n=2 at ranks 1 and 3: mean rank 2, (n+1)/2 = 1.5 -> 1 - 0.5/100 = 0.995
    assert pres(["a", "x", "b"], {"a", "b"}) == pytest.approx(0.995)


def test_pres_perfect_is_one() -> None:
    assert pres(["a", "b", "x"], {"a", "b"}) == pytest.approx(1.0)


def test_pres_one_missing() -> None:
    # n=3, found at ranks 2 and 50 (n_R=2); the missing one goes to 100+2+1 = 103.
    # sum 155, mean 51.6667, minus (3+1)/2=2 -> 49.6667 / 100 -> PRES = 0.503333
    ranking = [f"x{i}" for i in range(100)]
    ranking[1] = "a"
    ranking[49] = "b"
    assert pres(ranking, {"a", "b", "c"}) == pytest.approx(1 - (155 / 3 - 2) / 100)
    assert pres(ranking, {"a", "b", "c"}) == pytest.approx(0.5033333333)


def test_pres_none_found_is_zero() -> None:
    # n=4, none found: ranks 101..104, mean 102.5, minus 2.5 = 100 -> 1 - 100/100 = 0
    assert pres(["x", "y"], {"a", "b", "c", "d"}) == pytest.approx(0.0)


def test_pres_beyond_nmax_counts_as_missing() -> None:
    # the only relevant doc at rank 150 (> N_max=100) is placed at 101: 1 - (101 - 1)/100 = 0
    ranking = [f"x{i}" for i in range(149)] + ["a"]
    assert pres(ranking, {"a"}) == pytest.approx(0.0)
    # at rank 100 exactly it counts: 1 - (100 - 1)/100 = 0.01
    assert pres(ranking[50:], {"a"}) == pytest.approx(0.01)


def test_pres_more_relevant_than_nmax() -> None:
    # N_max=3, n=5, relevant at ranks 1,2,3 (n_R=3); missing at 3+3+1=7 and 8.
    # sum 21, mean 4.2, minus (5+1)/2=3 -> 1.2/3 = 0.4 -> PRES 0.6 = N_max/n (best reachable)
    rel = {"a", "b", "c", "d", "e"}
    assert pres(["a", "b", "c", "d", "e"], rel, n_max=3) == pytest.approx(0.6)
    # only one found, at rank 2: missing at 3+1+1 = 5, 6, 7, 8; sum 2+26 = 28, mean 5.6
    # 5.6 - 3 = 2.6 -> 1 - 2.6/3 = 0.133333
    assert pres(["x", "a", "y"], rel, n_max=3) == pytest.approx(0.1333333333)


def test_pres_bad_input() -> None:
    with pytest.raises(ValueError, match="relevant"):
        pres(["a"], set())
    with pytest.raises(ValueError, match="n_max"):
        pres(["a"], {"a"}, n_max=0)


# ---------------------------------------------------------------- evaluate_run

QRELS = {
    "q1": {"d1": 1, "d3": 2, "d5": 0},
    "q2": {"x": 1},
    "q3": {"y": 1},  # not in the run: scores 0 everywhere
    "q4": {"z": 0},  # no relevant document: not evaluated
}
RUN = {
    "q1": {"d1": 0.9, "d2": 0.8, "d3": 0.7, "d4": 0.6},
    # tie between x and b: trec_eval breaks ties by descending doc id -> a, x, b
    "q2": {"a": 2.0, "b": 1.0, "x": 1.0},
    "q9": {"d1": 1.0},  # no judgments: ignored
}


def test_evaluate_run_per_query_hand_worked() -> None:
    rep = evaluate_run(RUN, QRELS)
    assert set(rep.per_query) == {"q1", "q2", "q3"}
    assert rep.queries == 3
    q1 = rep.per_query["q1"]
    # q1 ranking d1 d2 d3 d4; relevant d1 (grade 1) at 1, d3 (grade 2) at 3
    assert q1["map"] == pytest.approx((1 / 1 + 2 / 3) / 2)
    assert q1["map@100"] == pytest.approx((1 / 1 + 2 / 3) / 2)
    assert q1["mrr"] == pytest.approx(1.0)
    assert q1["p@1"] == pytest.approx(1.0)
    assert q1["p@5"] == pytest.approx(2 / 5)  # divided by 5 even though 4 were retrieved
    assert q1["recall@100"] == pytest.approx(1.0)
    # nDCG with gain = grade, discount log2(rank+1): DCG = 1/1 + 2/log2(4) = 2;
    # ideal d3, d1: 2/1 + 1/log2(3) = 2.63093 -> 0.760191
    ideal = 2 + 1 / math.log2(3)
    assert q1["ndcg"] == pytest.approx(2 / ideal)
    assert q1["ndcg@5"] == pytest.approx(2 / ideal)
    assert q1["success@1"] == 1.0 and q1["success@10"] == 1.0
    assert q1["pres@100"] == pytest.approx(0.995)  # ranks 1, 3 as in test_pres_all_found

    q2 = rep.per_query["q2"]
    # ranking a, x, b: x at rank 2
    assert q2["mrr"] == pytest.approx(0.5)
    assert q2["map"] == pytest.approx(0.5)
    assert q2["p@1"] == 0.0
    assert q2["p@5"] == pytest.approx(0.2)
    assert q2["ndcg"] == pytest.approx(1 / math.log2(3))
    assert q2["success@1"] == 0.0 and q2["success@10"] == 1.0
    assert q2["pres@100"] == pytest.approx(1 - (2 - 1) / 100)

    assert all(v == 0.0 for v in rep.per_query["q3"].values())


def test_evaluate_run_aggregate_is_mean_over_judged_queries() -> None:
    rep = evaluate_run(RUN, QRELS)
    agg = rep.aggregate
    assert list(agg) == list(MEASURE_NAMES)
    assert agg["map"] == pytest.approx(((1 + 2 / 3) / 2 + 0.5 + 0) / 3)
    assert agg["mrr"] == pytest.approx(0.5)
    assert agg["p@1"] == pytest.approx(1 / 3)
    assert agg["recall@100"] == pytest.approx(2 / 3)
    assert agg["pres@100"] == pytest.approx((0.995 + 0.99) / 3)
    assert agg["ndcg"] == pytest.approx((2 / (2 + 1 / math.log2(3)) + 1 / math.log2(3)) / 3)
    d = rep.to_dict()
    assert d["queries"] == 3 and d["mrr"] == agg["mrr"]
    assert rep.measure("mrr") == {"q1": 1.0, "q2": 0.5, "q3": 0.0}


def test_recall_at_100_cuts_off() -> None:
    run = {"q": {f"d{i:03d}": 1000.0 - i for i in range(150)}}
    rep = evaluate_run(run, {"q": {"d010": 1, "d120": 1}})
    assert rep.per_query["q"]["recall@100"] == pytest.approx(0.5)
    assert rep.per_query["q"]["map@100"] == pytest.approx((1 / 11) / 2)
    assert rep.per_query["q"]["map"] == pytest.approx((1 / 11 + 2 / 121) / 2)


def test_evaluate_run_errors() -> None:
    with pytest.raises(ValueError, match="no query"):
        evaluate_run(RUN, {"q": {"d": 0}})
    with pytest.raises(ValueError, match="unknown measure"):
        evaluate_run(RUN, QRELS, measures=["ndcg", "bogus"])
    with pytest.raises(ValueError, match="share no query"):
        evaluate_run({"other": {"d1": 1.0}}, QRELS)
    assert evaluate_run({}, QRELS).aggregate["mrr"] == 0.0  # an empty run is a valid (bad) run
    with pytest.raises(KeyError):
        evaluate_run(RUN, QRELS, measures=["mrr"]).measure("map")


# ---------------------------------------------------------------- MAP(D) / PREC(D)

P_QRELS: dict[str, dict[str, set[str]]] = {
    "q1": {"D1": {"p1", "p3"}, "D2": {"p2"}, "D4": {"p7"}},
    "q2": {"E1": {"e1"}},
    "q3": {"F": set()},  # no relevant passage: not evaluated
}
P_RUN: dict[str, list[tuple[str, str, float]]] = {
    # given out of order on purpose: ranking is by score
    "q1": [
        ("D1", "p3", 0.7),
        ("D1", "p1", 0.9),
        ("D3", "p9", 0.85),  # not a relevant document: ignored
        ("D1", "p2", 0.8),
        ("D2", "p5", 0.6),
    ],
    "q2": [("E2", "x", 1.0)],
}


def test_in_document_measures() -> None:
    # passages p1 p2 p3, relevant p1 (P=1/1) and p3 (P=2/3): AP = (1 + 2/3)/2
    assert average_precision_in_document(["p1", "p2", "p3"], {"p1", "p3"}) == pytest.approx(5 / 6)
    # a relevant passage never retrieved still counts in the denominator: (1/2)/2
    assert average_precision_in_document(["p2", "p1"], {"p1", "p9"}) == pytest.approx(0.25)
    assert precision_in_document(["p1", "p2", "p3"], {"p1", "p3"}) == pytest.approx(2 / 3)
    assert precision_in_document([], {"p1"}) == 0.0


def test_passage_measures_hand_worked() -> None:
    rep = evaluate_passages(P_RUN, P_QRELS)
    assert set(rep.per_query) == {"q1", "q2"}
    # q1: D1 -> passages p1, p2, p3: AP 5/6, precision 2/3; D2 -> [p5]: 0, 0; D4 not retrieved: 0, 0
    # MAP(D) = (5/6 + 0 + 0)/3 = 0.277778; PREC(D) = (2/3)/3 = 0.222222
    assert rep.per_query["q1"]["map(d)"] == pytest.approx(5 / 18)
    assert rep.per_query["q1"]["prec(d)"] == pytest.approx(2 / 9)
    # q2: its only relevant document is not retrieved
    assert rep.per_query["q2"] == {"map(d)": 0.0, "prec(d)": 0.0}
    assert rep.aggregate["map(d)"] == pytest.approx(5 / 36)
    assert rep.aggregate["prec(d)"] == pytest.approx(1 / 9)


def test_passage_measures_retrieved_only() -> None:
    rep = evaluate_passages(P_RUN, P_QRELS, retrieved_only=True)
    # q1 averages over D1 and D2 only: (5/6 + 0)/2, (2/3 + 0)/2; q2 has none retrieved: 0
    assert rep.per_query["q1"]["map(d)"] == pytest.approx(5 / 12)
    assert rep.per_query["q1"]["prec(d)"] == pytest.approx(1 / 3)
    assert rep.aggregate["map(d)"] == pytest.approx(5 / 24)


def test_passage_measures_errors() -> None:
    with pytest.raises(ValueError, match="twice"):
        evaluate_passages({"q1": [("D1", "p1", 1.0), ("D1", "p1", 0.5)]}, P_QRELS)
    with pytest.raises(ValueError, match="nothing to evaluate"):
        evaluate_passages(P_RUN, {"q": {"D": set()}})


# ---------------------------------------------------------------- randomisation test


def test_randomisation_identical_runs() -> None:
    a = {f"q{i}": float(i % 7) / 7 for i in range(40)}
    assert randomisation_test(a, dict(a)) == 1.0  # Monte Carlo branch (2**40 > 10,000)
    small = {"q1": 0.3, "q2": 0.7}
    assert randomisation_test(small, dict(small)) == 1.0  # exact branch


def test_randomisation_strong_difference() -> None:
    rng = np.random.default_rng(1)
    a = {f"q{i}": 0.8 + 0.1 * rng.random() for i in range(30)}
    b = {f"q{i}": 0.2 + 0.1 * rng.random() for i in range(30)}
    p = randomisation_test(a, b)
    assert p < 0.01
    assert p == randomisation_test(a, b)  # fixed seed: reproducible
    assert randomisation_test(b, a) == p  # two-sided: symmetric


def test_randomisation_exact_hand_worked() -> None:
    # differences [3, 1]: observed |mean| 2; sign patterns give |mean| 2, 1, 1, 2 -> p = 2/4
    assert randomisation_test([4.0, 2.0], [1.0, 1.0]) == pytest.approx(0.5)
    # five equal positive differences: only all-plus and all-minus reach it -> p = 2/32
    assert randomisation_test([1.0] * 5, [0.0] * 5) == pytest.approx(2 / 32)


def test_randomisation_weak_difference_not_significant() -> None:
    rng = np.random.default_rng(2)
    base = rng.random(50)
    noise = rng.normal(0, 0.2, 50)
    p = randomisation_test(list(base), list(base + noise))
    assert p > 0.05


def test_randomisation_bad_input() -> None:
    with pytest.raises(ValueError, match="different queries"):
        randomisation_test({"q1": 1.0}, {"q2": 1.0})
    with pytest.raises(ValueError, match="length"):
        randomisation_test([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="permutations"):
        randomisation_test([1.0], [1.0], permutations=0)


def test_compare_reports() -> None:
    qrels = {f"q{i}": {"rel": 1} for i in range(30)}
    good = {f"q{i}": {"rel": 2.0, "x": 1.0} for i in range(30)}
    bad = {f"q{i}": {"x": 2.0, "y": 1.5} for i in range(30)}
    ps = compare_reports(evaluate_run(good, qrels), evaluate_run(bad, qrels), ["mrr", "pres@100"])
    assert set(ps) == {"mrr", "pres@100"}
    assert ps["mrr"] < 0.01
    same = compare_reports(evaluate_run(good, qrels), evaluate_run(good, qrels))
    assert set(same) == set(MEASURE_NAMES) and all(p == 1.0 for p in same.values())
