"""``priorart-lab experiment passages``: alpha, beta, sigma of each QSF variant tuned as the paper does, held out.

Queries and judgments come from the reference-sign proxy (:mod:`training.passage_tuning`): claims of
the real EP and US documents with their drawing reference signs removed; relevant passages are the
description paragraphs of the same document that name those signs. Candidates are all documents
with a description (the query's own without its claims).

The documents that give queries are split into ``folds`` folds (sorted by id, dealt in turn); for
each fold the grid search (alpha, beta in 0..1 step 0.1, sigma in {0.5, 1, 2, 5}, maximising
MAP(D), k = 1500) runs on the other folds' queries and the chosen parameters are evaluated on the
fold's queries. Reported per variant: held-out MAP(D) per fold and pooled over all queries, the
current service defaults (alpha = beta = 0.5, sigma = 1) and the paper's Table 4 values on the same
queries, and a paired randomisation test of tuned (held-out) against the defaults.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from lab.experiments import ExperimentError
from service.corpus.record import PatentRecord
from service.passages import DEFAULT_PARAMS, PAPER_PARAMS, PAPER_SIGMAS, VARIANTS, PassageIndex
from service.text.translation import TranslationTable
from training.evaluation.significance import randomisation_test
from training.passage_tuning import TuningQuery, evaluate_params, proxy_tuning_queries, tune


@dataclass(frozen=True)
class PassageTuningSettings:
    folds: int = 2
    grid_step: float = 0.1
    sigmas: tuple[float, ...] = PAPER_SIGMAS
    k: int = 1500
    max_per_doc: int = 3
    variants: tuple[str, ...] = VARIANTS
    permutations: int = 10_000


@dataclass
class VariantResult:
    variant: str
    folds: list[dict[str, Any]]  # per fold: tuned params (on the other folds), train MAP(D), held-out MAP(D)
    tuned: float  # held-out MAP(D) pooled over all queries
    defaults: float  # the service defaults on the same queries
    paper: float  # the paper's Table 4 alpha/beta (sigma 1) on the same queries
    p_vs_defaults: float
    per_query: dict[str, dict[str, float]] = field(default_factory=dict)


@dataclass
class PassageTuningResult:
    settings: dict[str, Any]
    documents: int
    query_documents: int
    queries: int
    seconds: float
    variants: list[VariantResult]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def load_records(data: Path) -> list[PatentRecord]:
    """The EP and US documents of the shared data that have a description (the candidates)."""
    from training.ingest import shared_records

    return [r for r in shared_records(data) if r.description]


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def load_tables(folder: Path) -> dict[tuple[str, str], TranslationTable]:
    """Every ``<src>-<tgt>.json`` table of a folder (or of an index folder's ``translation/``)."""
    folder = folder / "translation" if (folder / "translation").is_dir() else folder
    tables = {}
    for path in sorted(folder.glob("*-*.json")):
        table = TranslationTable.load(path)
        tables[(table.src, table.tgt)] = table
    if not tables:
        raise ExperimentError(f"no <src>-<tgt>.json translation table in {folder}")
    return tables


def run_passage_tuning(
    records: Sequence[PatentRecord], settings: PassageTuningSettings | None = None, *, progress: bool | None = None,
    translations: Mapping[tuple[str, str], TranslationTable] | None = None,
    fold_params: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
) -> PassageTuningResult:
    """Tune every variant with ``settings.folds``-fold cross-validation over the proxy queries of ``records``;
    ``translations``: the queries also reach the other languages through these tables, as in the service (their
    passages shape the scale; the judged passages are in the query's language). ``fold_params``: per variant, the
    ``folds`` rows of an earlier result (alpha, beta, sigma, train_map_d per fold): each fold is evaluated at those
    parameters instead of tuned again (the grid search is most of the time; the docs' regression check uses it)."""
    s = settings or PassageTuningSettings()
    if s.folds < 2:
        raise ExperimentError(f"folds must be >= 2, got {s.folds}")
    bad = [v for v in s.variants if v not in VARIANTS]
    if bad:
        raise ExperimentError(f"unknown variant(s) {bad}; valid: {', '.join(VARIANTS)}")
    started = time.perf_counter()
    index = PassageIndex.from_records(records)
    index, queries = proxy_tuning_queries(records, max_per_doc=s.max_per_doc, index=index)
    docs = sorted({doc for q in queries for doc in q.relevant})
    if len(docs) < s.folds:
        raise ExperimentError(f"{len(docs)} documents give proxy queries; need at least {s.folds}")
    fold_of = {doc: i % s.folds for i, doc in enumerate(docs)}
    folds: list[list[TuningQuery]] = [[q for q in queries if fold_of[next(iter(q.relevant))] == f]
                                      for f in range(s.folds)]
    show = sys.stderr.isatty() if progress is None else progress
    out: list[VariantResult] = []
    for variant in tqdm(s.variants, desc="variants", disable=not show, file=sys.stderr):
        uses_beta = variant not in ("qsf_v", "qsf_v_title")
        uses_sigma = variant.endswith("propagate")
        held: dict[str, float] = {}
        fold_rows: list[dict[str, Any]] = []
        for f, test in enumerate(folds):
            if fold_params is not None:
                given = fold_params[variant][f]
                alpha, beta, sigma, train_value = given["alpha"], given["beta"], given["sigma"], given["train_map_d"]
            else:
                train = [q for g, qs in enumerate(folds) if g != f for q in qs]
                res = tune(index, train, s.grid_step, variant=variant, sigmas=s.sigmas, k=s.k,
                           translations=translations)
                alpha, beta, sigma, train_value = res.alpha, res.beta, res.sigma, res.value
            values = evaluate_params(index, test, variant=variant, alpha=alpha, beta=beta, sigma=sigma, k=s.k,
                                     translations=translations)
            held.update(values)
            fold_rows.append({"fold": f, "alpha": alpha, "beta": beta, "sigma": sigma, "train_map_d": train_value,
                              "heldout_map_d": _mean(list(values.values())), "queries": len(values)})
        defaults = evaluate_params(index, queries, variant=variant, alpha=DEFAULT_PARAMS["alpha"],
                                   beta=DEFAULT_PARAMS["beta"] if uses_beta else None,
                                   sigma=DEFAULT_PARAMS["sigma"] if uses_sigma else None, k=s.k,
                                   translations=translations)
        pa, pb = PAPER_PARAMS[variant]
        paper = evaluate_params(index, queries, variant=variant, alpha=pa, beta=pb, sigma=1.0 if uses_sigma else None,
                                k=s.k, translations=translations)
        p = randomisation_test(held, defaults, permutations=s.permutations)
        out.append(VariantResult(
            variant=variant, folds=fold_rows, tuned=_mean(list(held.values())),
            defaults=_mean(list(defaults.values())), paper=_mean(list(paper.values())), p_vs_defaults=p,
            per_query={qid: {"tuned": held[qid], "defaults": defaults[qid], "paper": paper[qid]} for qid in held},
        ))
    return PassageTuningResult(
        settings=asdict(s), documents=len(records), query_documents=len(docs), queries=len(queries),
        seconds=time.perf_counter() - started, variants=out,
    )


def _params(row: dict[str, Any]) -> str:
    parts = [f"a={row['alpha']:.1f}"]
    if row["beta"] is not None:
        parts.append(f"b={row['beta']:.1f}")
    if row["sigma"] is not None:
        parts.append(f"s={row['sigma']:g}")
    return " ".join(parts)


def format_table(result: PassageTuningResult) -> str:
    """Held-out MAP(D) per variant against the defaults and the paper's values."""
    n_folds = result.settings["folds"]
    lines = [
        f"proxy: {result.queries} queries from {result.query_documents} documents, {result.documents} candidate "
        f"documents; {n_folds}-fold by document; grid step {result.settings['grid_step']}, sigma in "
        f"{list(result.settings['sigmas'])}, k {result.settings['k']}; {result.seconds:.0f} s",
        f"{'variant':<24}{'defaults':>9}{'paper':>8}{'tuned':>8}  {'held-out per fold':<22}{'p':>7}  tuned on the "
        "other folds",
    ]
    for v in result.variants:
        per_fold = " / ".join(f"{row['heldout_map_d']:.3f}" for row in v.folds)
        params = "; ".join(_params(row) for row in v.folds)
        lines.append(f"{v.variant:<24}{v.defaults:>9.3f}{v.paper:>8.3f}{v.tuned:>8.3f}  {per_fold:<22}"
                     f"{v.p_vs_defaults:>7.3f}  {params}")
    lines.append("MAP(D) (k = 1500); defaults = the service's alpha = beta = 0.5, sigma = 1; paper = Table 4 "
                 "alpha/beta with sigma 1; tuned = each query scored with the parameters tuned on the folds it is "
                 "not in; p = paired randomisation test, tuned vs defaults.")
    return "\n".join(lines)
