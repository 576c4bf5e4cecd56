"""Orthogonality of retrieval systems (Schamoni and Riezler 2015): which combination can help.

For every pair of systems, given as TREC runs over the same topics and one qrels file:

- **Pearson** and **Kendall** (tau-b) correlation of the two systems' scores of the *relevant documents
  both retrieved* (within the first ``depth`` of each run; irrelevant documents are left out, as in the
  paper). Two ways to collect the data points:

  * ``per-query`` (the paper's): per query with at least ``min_points`` (3) relevant documents retrieved
    by both, the correlation of the raw scores; the mean over those queries;
  * ``pooled``: every (query, relevant document) pair retrieved by both, scores min-max normalised per
    query and run first (raw scores of different queries are not comparable), one correlation over all.

  ``mode="auto"`` reports ``per-query`` when at least one query qualifies and ``pooled`` otherwise; the
  table says which one each row used (our tasks have one relevant document per query, so no query
  qualifies and the rows are pooled). Both variants are always computed and written to the CSV.
- **Jaccard** overlap of the relevant documents each system retrieves in its top ``k`` (100): per query
  ``|A & B| / |A | B|`` over the queries where the union is not empty, averaged.
- **Borda**: the two runs combined by Borda points (:func:`service.fusion.fuse` with ``borda``, weight
  ``kappa`` = 0.5 unless given), evaluated by MRR and MAP, next to each system's own.

Outputs (:func:`write_report`): ``orthogonality.md`` (table), ``orthogonality.csv`` (every figure),
``orthogonality.json``, and ``orthogonality.png`` (heatmaps of Pearson, Kendall, Jaccard and the Borda
MRR; matplotlib, Agg backend).
"""

from __future__ import annotations

import csv
import itertools
import json
import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from service.fusion import fuse
from training.evaluation.measures import evaluate_run
from training.evaluation.trec import Qrels, Run, ranked

MODES = ("auto", "per-query", "pooled")


@dataclass
class PairReport:
    a: str
    b: str
    mode: str  # per-query | pooled: the data points used for `pearson` / `kendall`
    pearson: float
    kendall: float
    n: int  # queries (per-query) or (query, document) pairs (pooled)
    pearson_query: float
    kendall_query: float
    n_queries: int
    pearson_pooled: float
    kendall_pooled: float
    n_pairs: int
    jaccard: float
    jaccard_queries: int
    kappa: float
    measures: dict[str, dict[str, float]]  # "a" / "b" / "borda" -> measure -> value


@dataclass
class OrthogonalityReport:
    systems: list[str]
    pairs: list[PairReport]
    settings: dict[str, Any]
    singles: dict[str, dict[str, float]]

    def to_dict(self) -> dict[str, Any]:
        return {"systems": self.systems, "settings": self.settings, "singles": self.singles,
                "pairs": [asdict(p) for p in self.pairs]}


def top(run_q: Mapping[str, float], depth: int) -> dict[str, float]:
    """The first ``depth`` documents of one query's run (trec_eval's order)."""
    return dict(ranked(run_q)[:depth])


def _minmax(scores: Mapping[str, float]) -> dict[str, float]:
    if not scores:
        return {}
    lo, hi = min(scores.values()), max(scores.values())
    return {d: ((s - lo) / (hi - lo) if hi > lo else 1.0) for d, s in scores.items()}


def _corr(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """(Pearson, Kendall tau-b); NaN where undefined (fewer than 2 points or a constant vector)."""
    from scipy.stats import kendalltau, pearsonr

    if len(x) < 2:
        return math.nan, math.nan
    xa, ya = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if np.ptp(xa) == 0 or np.ptp(ya) == 0:
        return math.nan, math.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(pearsonr(xa, ya)[0]), float(kendalltau(xa, ya)[0])


def correlations(
    run_a: Run, run_b: Run, qrels: Qrels, *, depth: int = 1000, min_points: int = 3
) -> dict[str, float]:
    """Per-query and pooled Pearson/Kendall over relevant documents retrieved by both (module docstring)."""
    pq_p: list[float] = []
    pq_k: list[float] = []
    pooled_a: list[float] = []
    pooled_b: list[float] = []
    for qid, judged in qrels.items():
        rel = {d for d, g in judged.items() if g > 0}
        if not rel:
            continue
        ta, tb = top(run_a.get(qid, {}), depth), top(run_b.get(qid, {}), depth)
        both = sorted(rel & set(ta) & set(tb))
        if not both:
            continue
        na, nb = _minmax(ta), _minmax(tb)
        pooled_a.extend(na[d] for d in both)
        pooled_b.extend(nb[d] for d in both)
        if len(both) >= min_points:
            p, k = _corr([ta[d] for d in both], [tb[d] for d in both])
            if not math.isnan(p):
                pq_p.append(p)
            if not math.isnan(k):
                pq_k.append(k)
    pp, kp = _corr(pooled_a, pooled_b)
    return {
        "pearson_query": float(np.mean(pq_p)) if pq_p else math.nan,
        "kendall_query": float(np.mean(pq_k)) if pq_k else math.nan,
        "n_queries": len(pq_p),
        "pearson_pooled": pp,
        "kendall_pooled": kp,
        "n_pairs": len(pooled_a),
    }


def jaccard(run_a: Run, run_b: Run, qrels: Qrels, *, k: int = 100) -> tuple[float, int]:
    """Mean per-query Jaccard overlap of the relevant documents in each run's top ``k``; (mean, queries)."""
    vals: list[float] = []
    for qid, judged in qrels.items():
        rel = {d for d, g in judged.items() if g > 0}
        a = rel & set(top(run_a.get(qid, {}), k))
        b = rel & set(top(run_b.get(qid, {}), k))
        union = a | b
        if union:
            vals.append(len(a & b) / len(union))
    return (float(np.mean(vals)) if vals else math.nan), len(vals)


def borda_runs(runs: Mapping[str, Run], weights: Mapping[str, float]) -> Run:
    """Borda combination of runs (documents missing from a run get 0 points from it)."""
    out: Run = {}
    qids = sorted({q for r in runs.values() for q in r})
    for qid in qids:
        docs = sorted({d for r in runs.values() for d in r.get(qid, {})})
        if not docs:
            continue
        scores = {name: np.asarray([r.get(qid, {}).get(d, np.nan) for d in docs], dtype=np.float64)
                  for name, r in runs.items()}
        fused = fuse("borda", scores, weights)
        out[qid] = dict(zip(docs, fused.tolist(), strict=True))
    return out


def orthogonality(
    runs: Mapping[str, Run],
    qrels: Qrels,
    *,
    mode: str = "auto",
    depth: int = 1000,
    k: int = 100,
    min_points: int = 3,
    kappa: float = 0.5,
    kappas: Mapping[tuple[str, str], float] | None = None,
    measures: Sequence[str] = ("mrr", "map"),
) -> OrthogonalityReport:
    """Every pair of systems (see the module docstring); ``kappas`` gives a tuned weight per pair."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; valid: {', '.join(MODES)}")
    if len(runs) < 2:
        raise ValueError(f"need at least two runs to compare, got {len(runs)}")
    if not 0 <= kappa <= 1:
        raise ValueError(f"kappa must be in [0, 1], got {kappa}")
    names = list(runs)
    singles = {n: evaluate_run(runs[n], qrels, measures).aggregate for n in names}
    pairs: list[PairReport] = []
    for a, b in itertools.combinations(names, 2):
        c = correlations(runs[a], runs[b], qrels, depth=depth, min_points=min_points)
        use = mode if mode != "auto" else ("per-query" if c["n_queries"] > 0 else "pooled")
        if use == "per-query":
            pearson, kendall, n = c["pearson_query"], c["kendall_query"], int(c["n_queries"])
        else:
            pearson, kendall, n = c["pearson_pooled"], c["kendall_pooled"], int(c["n_pairs"])
        jac, jq = jaccard(runs[a], runs[b], qrels, k=k)
        kap = (kappas or {}).get((a, b), kappa)
        fused = borda_runs({a: runs[a], b: runs[b]}, {a: kap, b: 1 - kap})
        both = evaluate_run(fused, qrels, measures).aggregate
        pairs.append(PairReport(
            a, b, use, pearson, kendall, n, c["pearson_query"], c["kendall_query"], int(c["n_queries"]),
            c["pearson_pooled"], c["kendall_pooled"], int(c["n_pairs"]), jac, jq, kap,
            {"a": singles[a], "b": singles[b], "borda": both},
        ))
    settings = {"mode": mode, "depth": depth, "k": k, "min_points": min_points, "kappa": kappa,
                "measures": list(measures), "queries": sum(1 for j in qrels.values() if any(g > 0 for g in j.values()))}
    return OrthogonalityReport(names, pairs, settings, singles)


# --------------------------------------------------------------------------------------------------
# output
# --------------------------------------------------------------------------------------------------


def _f(x: float, nd: int = 3) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{nd}f}"


def markdown_table(report: OrthogonalityReport) -> str:
    m = report.settings["measures"]
    head = ["A", "B", "points", "n", "Pearson", "Kendall", f"Jaccard@{report.settings['k']}", "kappa",
            *[f"{x} A" for x in m], *[f"{x} B" for x in m], *[f"{x} Borda" for x in m]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for p in report.pairs:
        cells = [p.a, p.b, p.mode, str(p.n), _f(p.pearson), _f(p.kendall), _f(p.jaccard), f"{p.kappa:.2f}",
                 *[_f(p.measures["a"][x]) for x in m], *[_f(p.measures["b"][x]) for x in m],
                 *[_f(p.measures["borda"][x]) for x in m]]
        lines.append("| " + " | ".join(cells) + " |")
    s = report.settings
    lines.append("")
    lines.append(
        f"{s['queries']} judged queries. Correlations over relevant documents retrieved by both runs within "
        f"their first {s['depth']} (per-query: queries with >= {s['min_points']} such documents, mean of "
        "per-query correlations of raw scores; pooled: all (query, relevant document) pairs, scores min-max "
        f"normalised per query and run). Jaccard of the relevant documents in each top {s['k']}, mean over "
        "queries where either run has one. Borda: kappa * A + (1 - kappa) * B on Borda points."
    )
    return "\n".join(lines) + "\n"


def _matrix(report: OrthogonalityReport, attr: str, diag: float | None = 1.0) -> np.ndarray:
    n = len(report.systems)
    mat = np.full((n, n), np.nan)
    idx = {s: i for i, s in enumerate(report.systems)}
    for p in report.pairs:
        v = getattr(p, attr) if attr != "borda_mrr" else p.measures["borda"].get("mrr", math.nan)
        mat[idx[p.a], idx[p.b]] = mat[idx[p.b], idx[p.a]] = v
    for s, i in idx.items():
        mat[i, i] = report.singles[s].get("mrr", math.nan) if attr == "borda_mrr" else (diag if diag is not None
                                                                                          else math.nan)
    return mat


def heatmap(report: OrthogonalityReport, path: str | Path, title: str = "") -> Path:
    """Four heatmaps (Pearson, Kendall, Jaccard, Borda MRR with each single system's MRR on the diagonal)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [("pearson", "Pearson (relevant docs)", (-1, 1), "RdBu_r"),
              ("kendall", "Kendall tau-b (relevant docs)", (-1, 1), "RdBu_r"),
              ("jaccard", f"Jaccard@{report.settings['k']} (relevant docs)", (0, 1), "viridis"),
              ("borda_mrr", "MRR: Borda(A, B); diagonal: single", (0, 1), "viridis")]
    n = len(report.systems)
    size = max(3.2, 0.7 * n + 1.8)
    fig, axes = plt.subplots(2, 2, figsize=(2 * size, 2 * size - 0.5))
    for ax, (attr, label, (lo, hi), cmap) in zip(axes.ravel(), panels, strict=True):
        mat = _matrix(report, attr)
        cm = plt.get_cmap(cmap).with_extremes(bad="lightgrey")  # undefined (constant scores): grey, "n/a"
        im = ax.imshow(np.ma.masked_invalid(mat), vmin=lo, vmax=hi, cmap=cm)
        ax.set_xticks(range(n), report.systems, rotation=45, ha="right", fontsize=8)
        ax.set_yticks(range(n), report.systems, fontsize=8)
        ax.set_title(label, fontsize=9)
        for i in range(n):
            for j in range(n):
                v = mat[i, j]
                txt = "n/a" if math.isnan(v) else f"{v:.2f}"
                shade = 0.0 if math.isnan(v) else (v - lo) / (hi - lo)
                dark = not math.isnan(v) and ((cmap == "viridis" and shade < 0.6)
                                              or (cmap == "RdBu_r" and abs(shade - 0.5) > 0.3))
                ax.text(j, i, txt, ha="center", va="center", fontsize=7, color="white" if dark else "black")
        fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    modes = sorted({p.mode for p in report.pairs})
    fig.suptitle((title + "\n" if title else "") + f"correlation points: {', '.join(modes)}", fontsize=10)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_report(report: OrthogonalityReport, out_dir: str | Path, *, title: str = "") -> dict[str, Path]:
    """Write ``orthogonality.{md,csv,json,png}`` into ``out_dir``; returns the paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"md": out / "orthogonality.md", "csv": out / "orthogonality.csv", "json": out / "orthogonality.json",
             "png": out / "orthogonality.png"}
    paths["md"].write_text((f"# {title}\n\n" if title else "") + markdown_table(report), encoding="utf-8")
    m = report.settings["measures"]
    with open(paths["csv"], "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["system_a", "system_b", "mode", "n", "pearson", "kendall", "pearson_query", "kendall_query",
                    "n_queries", "pearson_pooled", "kendall_pooled", "n_pairs", f"jaccard@{report.settings['k']}",
                    "jaccard_queries", "kappa", *[f"{x}_{s}" for s in ("a", "b", "borda") for x in m]])
        for p in report.pairs:
            w.writerow([p.a, p.b, p.mode, p.n, p.pearson, p.kendall, p.pearson_query, p.kendall_query, p.n_queries,
                        p.pearson_pooled, p.kendall_pooled, p.n_pairs, p.jaccard, p.jaccard_queries, p.kappa,
                        *[p.measures[s][x] for s in ("a", "b", "borda") for x in m]])
    paths["json"].write_text(json.dumps(_clean(report.to_dict()), indent=1) + "\n", encoding="utf-8")
    heatmap(report, paths["png"], title)
    return paths


def _clean(x: Any) -> Any:
    """JSON-ready: NaN -> None (``json.dumps`` would write the invalid token ``NaN``)."""
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_clean(v) for v in x]
    if isinstance(x, float) and math.isnan(x):
        return None
    return x
