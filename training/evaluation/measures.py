"""Document-level measures: ir-measures (pytrec_eval) for the standard ones, PRES written here.

Conventions (those of trec_eval): documents are ranked by descending score, ties broken by
descending document id; a grade > 0 is relevant (nDCG uses the grade as the gain). Only queries
with at least one relevant document in the qrels are evaluated; a judged query missing from the
run scores 0 on every measure; run queries without judgments are ignored.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import ir_measures
from ir_measures import AP, RR, R, Success, nDCG
from ir_measures import P as Prec

from training.evaluation.trec import ranked

log = logging.getLogger(__name__)

# Our names -> ir-measures measures.
_IR_MEASURES: dict[str, Any] = {
    "ndcg": nDCG,
    "ndcg@5": nDCG @ 5,
    "map": AP,
    "map@100": AP @ 100,
    "mrr": RR,
    "p@1": Prec @ 1,
    "p@5": Prec @ 5,
    "recall@100": R @ 100,
    "success@1": Success @ 1,
    "success@10": Success @ 10,
}
_CUSTOM = ("pres@100",)
MEASURE_NAMES: tuple[str, ...] = (
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
)
"""Every measure :func:`evaluate_run` computes, in report order."""


@dataclass(frozen=True)
class EvalReport:
    """Mean of each measure over the evaluated queries, and every query's values."""

    aggregate: dict[str, float]
    per_query: dict[str, dict[str, float]] = field(repr=False)

    @property
    def queries(self) -> int:
        return len(self.per_query)

    def measure(self, name: str) -> dict[str, float]:
        """Per-query values of one measure (query id -> value)."""
        if name not in self.aggregate:
            raise KeyError(f"measure {name!r} not in this report; it has {', '.join(self.aggregate)}")
        return {qid: values[name] for qid, values in self.per_query.items()}

    def to_dict(self) -> dict[str, float | int]:
        """``{"queries": n, <measure>: mean, ...}`` (JSON-ready)."""
        return {"queries": self.queries, **self.aggregate}


def pres(ranking: Sequence[str], relevant: Collection[str], n_max: int = 100) -> float:
    """Patent Retrieval Evaluation Score (Magdy and Jones, 2010) of one ranked list.

    ``PRES = 1 - (sum(r_i)/n - (n+1)/2) / N_max`` over the ``n`` relevant documents, where ``r_i`` is
    the rank of the i-th relevant document within the first ``N_max``; the ``n - n_R`` relevant
    documents not found there are placed right after ``N_max``, behind the ``n_R`` found ones:
    ranks ``N_max + n_R + 1 ... N_max + n``. 1 is all relevant on top, 0 none found in the first
    ``N_max``. When ``n > N_max`` the formula is used as is; the best score is then ``N_max / n``
    (the best recall reachable).
    """
    if n_max < 1:
        raise ValueError(f"n_max must be >= 1, got {n_max}")
    rel = set(relevant)
    n = len(rel)
    if n == 0:
        raise ValueError("PRES needs at least one relevant document")
    found_ranks = [rank for rank, doc in enumerate(ranking[:n_max], 1) if doc in rel]
    n_found = len(found_ranks)
    missing_ranks_sum = sum(n_max + n_found + i for i in range(1, n - n_found + 1))
    mean_rank = (sum(found_ranks) + missing_ranks_sum) / n
    return 1.0 - (mean_rank - (n + 1) / 2) / n_max


def evaluate_run(
    run: Mapping[str, Mapping[str, float]],
    qrels: Mapping[str, Mapping[str, int]],
    measures: Iterable[str] = MEASURE_NAMES,
) -> EvalReport:
    """Evaluate a document run against qrels (see the module docstring for the conventions)."""
    names = list(measures)
    unknown = [m for m in names if m not in _IR_MEASURES and m not in _CUSTOM]
    if unknown:
        raise ValueError(f"unknown measure(s) {', '.join(unknown)}; choose from {', '.join(MEASURE_NAMES)}")
    judged = {qid: dict(docs) for qid, docs in qrels.items() if any(rel > 0 for rel in docs.values())}
    if not judged:
        raise ValueError("no query in the qrels has a relevant document (grade > 0); nothing to evaluate")
    skipped = len(qrels) - len(judged)
    if skipped:
        log.warning("%d judged queries have no relevant document and are not evaluated", skipped)
    if run and not any(qid in judged for qid in run):
        raise ValueError(
            f"the run and the qrels share no query id (run: {next(iter(run))!r}..., "
            f"qrels: {next(iter(judged))!r}...); are they for the same topics?"
        )
    unjudged = [qid for qid in run if qid not in judged]
    if unjudged:
        log.warning("%d run queries have no relevant judgments and are ignored (e.g. %s)", len(unjudged), unjudged[0])
    missing = [qid for qid in judged if qid not in run or not run[qid]]
    if missing:
        log.info("%d judged queries have no results in the run (they score 0)", len(missing))

    per_query: dict[str, dict[str, float]] = {qid: dict.fromkeys(names, 0.0) for qid in judged}
    by_measure = {_IR_MEASURES[m]: m for m in names if m in _IR_MEASURES}
    if by_measure:
        sub_run = {qid: {doc: float(s) for doc, s in run[qid].items()} for qid in judged if run.get(qid)}
        if sub_run:
            for metric in ir_measures.iter_calc(list(by_measure), judged, sub_run):
                per_query[metric.query_id][by_measure[metric.measure]] = float(metric.value)
    if "pres@100" in names:
        for qid, docs in judged.items():
            ranking = [doc for doc, _ in ranked(run.get(qid, {}))]
            per_query[qid]["pres@100"] = pres(ranking, [d for d, rel in docs.items() if rel > 0], n_max=100)

    aggregate = {m: sum(v[m] for v in per_query.values()) / len(per_query) for m in names}
    return EvalReport(aggregate=aggregate, per_query=per_query)
