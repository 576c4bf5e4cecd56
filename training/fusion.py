"""Learned fusion weights: grid search on the DEV split, per candidate depth (``priorart fuse INDEX_DIR``).

The pipeline's final score is ``sum_c w_c * minmax(s_c) / sum_c w_c`` over the components
(``bm25``, ``dense``, ``text``, ``meta``) of the candidate set (BM25 top depth united with the dense
top depth), see :class:`service.pipeline.FusionStep`. This module learns ``w`` on dev topics:

Dev topics. Built from the documents of the index that ``models/split.json`` puts in the DEV part,
with the evaluation task builders of :mod:`training.tasks`, so dev topics look like the test topics:

- ``xling``: the German and French first claims (reference signs stripped) of the dev trilingual EP
  grants; relevant: the grant. Valid only for an index without German/French BM25 indexes (else the
  topic finds its own text verbatim).
- ``known-item``: English title + abstract of the dev US utility grants; relevant: the grant. Valid
  only for an index whose fields leave out title and abstract (``--fields claims,description``).
- ``auto`` takes every valid task (and fails with a message when none is valid); or pass explicit
  ``topics`` + ``qrels`` (e.g. synthetic topics of dev-split documents).

Objective. Mean NDCG over the dev topics (trec_eval's ``ndcg``: no cut-off, gain = grade, log2
discount; the ideal ranking holds every judged relevant document, retrieved or not) of the fused
ranking of the whole candidate set, ties broken by lower row as in the pipeline.

Search. Grid over the simplex of the variant's components with step 0.1 (286 points for four
components), min-max normalised scores. BM25 alone (``w_bm25 = 1``) is a grid point and ranks the
BM25 candidates exactly as the first stage does (dense-only candidates get BM25 0, below every BM25
candidate, see :mod:`service.retrieval.model_stages`), so the learned weights are never below BM25 on
the dev topics they were tuned on (checked after the search: a violation raises). Ties between grid
points go to the larger BM25 weight (the more conservative choice), then grid order.

Variants (what the rerank stage puts into ``text``/``meta``): ``stacked`` (text-only + meta-only
rankers), ``joint`` (joint text+meta ranker as ``text``), ``text`` (text-only ranker, no meta). Each is
tuned; ``default_variant`` (the best mean dev NDCG over the depths) is what the service runs.

Output: ``INDEX/models/fusion.json`` (the weights belong to the index: they depend on its BM25
settings, fields, languages and translation tables, not only on the models) and ``INDEX/models/fusion.png``
(dev NDCG vs depth for plain reranking, weighted fusion and BM25, like Figure 3 of the meta-text
embeddings paper), both registered in the index's ``meta.json`` (``components.fusion``).
"""

from __future__ import annotations

import itertools
import json
import logging
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from service.evaluation.trec import Qrels, Topic
from service.index.store import DocStore, load_meta, update_meta
from service.pipeline import Candidates, FirstStageStep, Query
from service.retrieval.first_stage import FirstStage

log = logging.getLogger(__name__)

DEFAULT_DEPTHS = (40, 200, 400, 1000)
GRID_STEP = 0.1
TASKS = ("xling", "known-item")
RANKERS = ("text", "meta", "joint", "stacked")
VARIANT_COMPONENTS: dict[str, tuple[str, ...]] = {
    "stacked": ("bm25", "dense", "text", "meta"),
    "joint": ("bm25", "dense", "text"),
    "text": ("bm25", "dense", "text"),
}
VARIANT_TEXT = {"stacked": "text", "joint": "joint", "text": "text"}  # ranker score used as ``text``
PLOT_FILE = "models/fusion.png"


class FusionError(ValueError):
    """Fusion weights cannot be learned for this index (the message says why and what to do)."""


# --------------------------------------------------------------------------------------------------
# dev topics
# --------------------------------------------------------------------------------------------------


def task_validity(settings: Mapping[str, Any]) -> dict[str, str | None]:
    """Per task: ``None`` when its topics suit an index with these build settings, else the reason not."""
    langs = set(settings.get("index_langs", []))
    fields = set(settings.get("fields", []))
    out: dict[str, str | None] = {}
    out["xling"] = (
        None if not (langs & {"de", "fr"})
        else f"the index has {'/'.join(sorted(langs & {'de', 'fr'}))} BM25 indexes: a German/French claim would find "
             "its own text (build with --index-langs en)"
    )
    out["known-item"] = (
        None if not (fields & {"title", "abstract"})
        else "the index holds titles/abstracts: a title+abstract query would find its own text "
             "(build with --fields claims,description)"
    )
    return out


@dataclass
class DevSet:
    topics: list[Topic]
    qrels: Qrels
    tasks: dict[str, int] = field(default_factory=dict)


def split_part_records(docs: DocStore, ids: Iterable[str]) -> list[Any]:
    """Records of the doc store whose ids are in ``ids`` (row order)."""
    wanted = set(ids)
    return [docs.get_row(r) for r, doc_id in enumerate(docs.ids) if doc_id in wanted]


def task_topics(records: Sequence[Any], task: str) -> tuple[list[Topic], Qrels]:
    """Topics + qrels of one evaluation task over ``records`` (all eligible, reference signs stripped)."""
    from training.tasks import known_item_task, xling_task

    if task == "xling":
        t = xling_task(records)
    elif task == "known-item":
        t = known_item_task(records, n=max(1, len(records)))
    else:
        raise FusionError(f"unknown task {task!r}; choose from {', '.join(TASKS)}")
    return t.topics, t.qrels


def dev_set(index_dir: str | Path, tasks: str | Sequence[str] = "auto", *, part: str = "dev") -> DevSet:
    """The dev topics of an index with models (see the module doc); ``part="test"`` gives the test topics."""
    from training.models.pairs import Split

    root = Path(index_dir)
    meta = load_meta(root, verify=False)
    split_path = root / "models" / "split.json"
    if not split_path.is_file():
        raise FusionError(f"{split_path} is missing: fusion needs an index built with --models")
    split = Split.load(split_path)
    validity = task_validity(meta.settings)
    if tasks == "auto":
        chosen = [t for t in TASKS if validity[t] is None]
        if not chosen:
            reasons = "; ".join(f"{t}: {validity[t]}" for t in TASKS)
            raise FusionError(f"no dev task suits this index ({reasons}); or pass dev topics and qrels")
    else:
        chosen = [tasks] if isinstance(tasks, str) else list(tasks)
        bad = [t for t in chosen if t not in TASKS]
        if bad:
            raise FusionError(f"unknown task(s) {bad}; choose from auto, {', '.join(TASKS)}")
        for t in chosen:
            if validity[t] is not None:
                log.warning("task %s on this index: %s", t, validity[t])
    docs = DocStore.load(root)
    try:
        records = split_part_records(docs, split.ids(part))
    finally:
        docs.close()
    topics: list[Topic] = []
    qrels: Qrels = {}
    counts: dict[str, int] = {}
    for task in chosen:
        try:
            ts, qs = task_topics(records, task)
        except ValueError as exc:  # no eligible record of the part
            log.warning("no %s %s topics: %s", part, task, exc)
            counts[task] = 0
            continue
        topics += ts
        qrels.update(qs)
        counts[task] = len(ts)
    if not topics:
        raise FusionError(f"no {part} topics for task(s) {', '.join(chosen)} in this index ({len(records)} {part} "
                          "documents)")
    return DevSet(topics, qrels, counts)


# --------------------------------------------------------------------------------------------------
# candidate lists with every component's score
# --------------------------------------------------------------------------------------------------


@dataclass
class TopicScores:
    """One topic's candidates at one depth: raw score per component, ranker scores, grades."""

    qid: str
    rows: np.ndarray
    ids: list[str]
    scores: dict[str, np.ndarray]  # bm25 (0 for dense-only rows), dense, text, meta, joint, stacked
    in_bm25: np.ndarray  # bool: returned by the first stage
    in_dense: np.ndarray  # bool: returned by the dense search
    grades: np.ndarray  # relevance grade of each candidate
    ideal: np.ndarray  # every judged grade > 0 of the topic, descending (for the ideal DCG)
    ms: dict[str, float] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.rows)


@dataclass
class Stages:
    """The stage objects of an index (first stage + the model stages it was built with)."""

    first: FirstStageStep
    dense: Any
    rerank: Any
    device: str
    notices: list[str]

    @classmethod
    def load(cls, index_dir: str | Path, device: str = "auto") -> Stages:
        from service.api.settings import Settings
        from service.retrieval.model_stages import load_model_stages

        root = Path(index_dir)
        first = FirstStageStep(FirstStage.load(root))
        if not (root / "models" / "meta.json").is_file():
            raise FusionError(f"{root} has no models/: build it with --models MODELS_DIR")
        loaded = load_model_stages(root, Settings(index_dir=root, device=device))
        by_name = {s.name: s for s in loaded["stages"]}
        if "rerank" not in by_name:
            raise FusionError(f"{root}: no rerank stage ({'; '.join(loaded['notices'])})")
        return cls(first, by_name.get("dense"), by_name["rerank"], loaded["device"], loaded["notices"])


def collect(
    stages: Stages, topics: Sequence[Topic], qrels: Qrels, depth: int, *, progress: bool = False
) -> list[TopicScores]:
    """Run every topic through first stage + dense + rankers at ``depth``; keep all component scores."""
    from tqdm import tqdm

    from service.retrieval.model_stages import query_text_lang

    out: list[TopicScores] = []
    docs = stages.first.fs.docs
    for topic in tqdm(topics, desc=f"topics @{depth}", unit="q", disable=not progress, file=sys.stderr):
        q = Query(text=topic.text, lang=topic.lang, codes=topic.codes, before=topic.before, k=depth, depth=depth)
        ms: dict[str, float] = {}
        t = time.perf_counter()
        cands = stages.first.run(q, Candidates(rows=np.zeros(0, dtype=np.int64)))
        ms["bm25"] = (time.perf_counter() - t) * 1000
        n_bm25 = len(cands)
        in_dense_rows = np.zeros(0, dtype=np.int64)
        if stages.dense is not None:
            t = time.perf_counter()
            found = stages.dense.search(q)
            cands = stages.dense.merge(q, cands, found)
            ms["dense"] = (time.perf_counter() - t) * 1000
            if found is not None:
                in_dense_rows = found[1].rows
        t = time.perf_counter()
        text, lang = query_text_lang(q)
        if lang in stages.rerank.models.languages:
            ranks = stages.rerank.scores(text, lang, q.codes, cands.rows)
        else:
            ranks = {k: np.full(len(cands), np.nan) for k in RANKERS}
        ms["rerank"] = (time.perf_counter() - t) * 1000
        scores = {k: np.asarray(v, dtype=np.float64) for k, v in cands.scores.items()}
        scores.update(ranks)
        if "bm25" not in scores:
            scores["bm25"] = np.zeros(len(cands))
        if "dense" not in scores:
            scores["dense"] = np.full(len(cands), np.nan)
        in_bm25 = np.zeros(len(cands), dtype=bool)
        in_bm25[:n_bm25] = True
        in_dense = np.isin(cands.rows, in_dense_rows)
        ids = [docs.ids[int(r)] for r in cands.rows]
        judged = qrels.get(topic.qid, {})
        grades = np.asarray([judged.get(i, 0) for i in ids], dtype=np.float64)
        ideal = np.sort(np.asarray([g for g in judged.values() if g > 0], dtype=np.float64))[::-1]
        out.append(TopicScores(topic.qid, cands.rows.copy(), ids, scores, in_bm25, in_dense, grades, ideal, ms))
    return out


# --------------------------------------------------------------------------------------------------
# ranking and NDCG
# --------------------------------------------------------------------------------------------------


def minmax(x: np.ndarray) -> np.ndarray:
    """Min-max over the candidates, NaN -> 0 (the pipeline's normalisation)."""
    from service.pipeline import minmax as _minmax

    return _minmax(np.asarray(x, dtype=np.float64))


def _discounts(n: int) -> np.ndarray:
    return 1.0 / np.log2(np.arange(2, n + 2, dtype=np.float64))


def ndcg_of_order(grades_in_order: np.ndarray, ideal: np.ndarray) -> float:
    """trec_eval ``ndcg`` of one ranked list (grades in rank order) against the ideal grades."""
    if len(ideal) == 0:
        return 0.0
    idcg = float((ideal * _discounts(len(ideal))).sum())
    g = np.asarray(grades_in_order, dtype=np.float64)
    return float((g * _discounts(len(g))).sum()) / idcg


def rank_order(scores: np.ndarray, rows: np.ndarray, keep: np.ndarray | None = None) -> np.ndarray:
    """Candidate indices best first: descending score, ties by lower row (the pipeline's order)."""
    idx = np.arange(len(rows)) if keep is None else np.flatnonzero(keep)
    s = np.nan_to_num(np.asarray(scores, dtype=np.float64)[idx], nan=-np.inf)
    return idx[np.lexsort((rows[idx], -s))]


def ndcg_of(ts: TopicScores, scores: np.ndarray, keep: np.ndarray | None = None) -> float:
    return ndcg_of_order(ts.grades[rank_order(scores, ts.rows, keep)], ts.ideal)


def fused_scores(ts: TopicScores, weights: Mapping[str, float], text_from: str = "text") -> np.ndarray:
    """The pipeline's fused score with ``weights`` (``text`` read from ranker ``text_from``)."""
    fused = np.zeros(len(ts))
    total = 0.0
    for name, w in weights.items():
        src = text_from if name == "text" else name
        if src not in ts.scores:
            continue
        total += w
        if w:
            fused += w * minmax(ts.scores[src])
    return fused / total if total > 0 else fused


def simplex_grid(n: int, step: float = GRID_STEP) -> np.ndarray:
    """Every weight vector of ``n`` non-negative multiples of ``step`` summing to 1 ([points, n])."""
    units = round(1.0 / step)
    if not np.isclose(units * step, 1.0):
        raise FusionError(f"grid step must divide 1, got {step}")
    pts = [c for c in itertools.product(range(units + 1), repeat=n) if sum(c) == units]
    return np.asarray(pts, dtype=np.float64) / units


def grid_ndcg(topics: Sequence[TopicScores], components: Sequence[str], text_from: str, grid: np.ndarray) -> np.ndarray:
    """Mean NDCG of every grid point ([points]) over the topics, exact ranks with the pipeline's tie rule.

    The fused scores are computed with the same floating-point operations as ``FusionStep`` (component by
    component in ``components`` order, then divided by the weight total), so exact ties come out the same.
    """
    total = np.zeros(len(grid))
    for ts in topics:
        rel = np.flatnonzero(ts.grades > 0)
        if len(ts.ideal) == 0 or len(ts) == 0 or len(rel) == 0:
            continue
        present = [(j, text_from if c == "text" else c) for j, c in enumerate(components)]
        present = [(j, src) for j, src in present if src in ts.scores]
        fused = np.zeros((len(ts), len(grid)))
        for j, src in present:
            fused += minmax(ts.scores[src])[:, None] * grid[None, :, j]  # w * x; a zero weight adds exactly 0
        weight_total = np.array([sum(float(grid[p, j]) for j, _ in present) for p in range(len(grid))])
        fused = np.divide(fused, weight_total[None, :], out=fused, where=weight_total[None, :] > 0)
        idcg = float((ts.ideal * _discounts(len(ts.ideal))).sum())
        f_rel = fused[rel]  # [r, points]
        # rank of a relevant row = rows scoring strictly higher + tied rows with a lower row number
        higher = (fused[None, :, :] > f_rel[:, None, :]).sum(axis=1)  # [r, points]
        tied_lower = ((fused[None, :, :] == f_rel[:, None, :]) & (ts.rows[None, :, None] < ts.rows[rel][:, None, None]))
        rank0 = higher + tied_lower.sum(axis=1)
        dcg = (ts.grades[rel][:, None] / np.log2(rank0 + 2.0)).sum(axis=0)
        total += dcg / idcg
    return total / max(1, len(topics))


@dataclass
class DepthResult:
    depth: int
    weights: dict[str, dict[str, float]]  # variant -> weights
    fused_ndcg: dict[str, float]  # variant -> dev NDCG at its weights
    bm25_ndcg: float
    rerank_ndcg: dict[str, float]  # plain rerank by each ranker over the candidates
    dense_ndcg: float | None
    candidates: float
    recall: float  # fraction of judged relevant documents among the candidates
    ties: dict[str, int]


def learn_depth(topics: Sequence[TopicScores], depth: int, *, step: float = GRID_STEP,
                variants: Sequence[str] = tuple(VARIANT_COMPONENTS), has_dense: bool = True) -> DepthResult:
    """Grid search of every variant's weights at one depth (see the module doc)."""
    bm25 = float(np.mean([ndcg_of(ts, ts.scores["bm25"], ts.in_bm25) for ts in topics]))
    weights: dict[str, dict[str, float]] = {}
    fused: dict[str, float] = {}
    ties: dict[str, int] = {}
    for variant in variants:
        comps = tuple(c for c in VARIANT_COMPONENTS[variant] if has_dense or c != "dense")
        grid = simplex_grid(len(comps), step)
        values = grid_ndcg(topics, comps, VARIANT_TEXT[variant], grid)
        best = float(values.max())
        at_best = np.flatnonzero(values >= best - 1e-12)
        pick = int(at_best[np.argmax(grid[at_best, 0])])  # comps[0] is bm25: most conservative tie
        w = {c: float(v) for c, v in zip(comps, grid[pick], strict=True)}  # k / 10: the nearest doubles to 0.k
        check = float(np.mean([ndcg_of(ts, fused_scores(ts, w, VARIANT_TEXT[variant])) for ts in topics]))
        if abs(check - best) > 1e-9:  # only float ties can differ between the two formulas
            log.warning("depth %d %s: grid NDCG %.6f, pipeline formula %.6f", depth, variant, best, check)
        if check < bm25 - 1e-12:
            raise RuntimeError(f"fusion ({check:.6f}) below BM25 ({bm25:.6f}) on the dev topics at depth {depth}: "
                               "the BM25 grid point must reproduce the first stage")
        weights[variant], fused[variant], ties[variant] = w, check, len(at_best)
    rerank = {k: float(np.mean([ndcg_of(ts, ts.scores[k]) for ts in topics])) for k in RANKERS}
    dense = float(np.mean([ndcg_of(ts, ts.scores["dense"], ts.in_dense) for ts in topics])) if has_dense else None
    n_rel = sum(len(ts.ideal) for ts in topics)
    found = sum(int((ts.grades > 0).sum()) for ts in topics)
    return DepthResult(depth, weights, fused, bm25, rerank, dense, float(np.mean([len(ts) for ts in topics])),
                       found / n_rel if n_rel else 0.0, ties)


# --------------------------------------------------------------------------------------------------
# the command's work
# --------------------------------------------------------------------------------------------------


@dataclass
class FusionResult:
    index_dir: Path
    default_variant: str
    depths: list[DepthResult]
    dev: dict[str, Any]
    seconds: float
    plot: Path | None
    data: dict[str, Any]

    def summary(self) -> dict[str, Any]:
        return {
            "default_variant": self.default_variant,
            "dev_topics": self.dev["topics"],
            "tasks": self.dev["tasks"],
            "seconds": round(self.seconds, 2),
            "depths": {
                str(d.depth): {"weights": d.weights[self.default_variant], "fusion": d.fused_ndcg[self.default_variant],
                               "bm25": d.bm25_ndcg, "rerank_joint": d.rerank_ndcg["joint"]}
                for d in self.depths
            },
        }


def parse_depths(text: str | Sequence[int]) -> list[int]:
    items = [int(x) for x in text.split(",") if x.strip()] if isinstance(text, str) else [int(x) for x in text]
    if not items or any(d < 1 or d > 1000 for d in items):
        raise FusionError(f"depths must be integers in 1..1000, got {text!r}")
    return sorted(set(items))


def learn_fusion(
    index_dir: str | Path,
    *,
    depths: Sequence[int] = DEFAULT_DEPTHS,
    tasks: str | Sequence[str] = "auto",
    topics: Sequence[Topic] | None = None,
    qrels: Qrels | None = None,
    default_variant: str | None = None,
    step: float = GRID_STEP,
    device: str = "auto",
    progress: bool = False,
    plot: bool = True,
) -> FusionResult:
    """Learn the weights of every variant at every depth on the dev topics; write ``models/fusion.json``."""
    from service.retrieval.model_stages import FUSION_FILE, FUSION_FORMAT, FUSION_VERSION

    started = time.perf_counter()
    root = Path(index_dir)
    depths = parse_depths(depths)
    if default_variant is not None and default_variant not in VARIANT_COMPONENTS:
        raise FusionError(f"unknown variant {default_variant!r}; choose from {', '.join(VARIANT_COMPONENTS)}")
    if topics is not None:
        if qrels is None:
            raise FusionError("dev topics given without qrels")
        dev = DevSet(list(topics), dict(qrels), {"given": len(topics)})
    else:
        dev = dev_set(root, tasks)
    judged = [t for t in dev.topics if any(g > 0 for g in dev.qrels.get(t.qid, {}).values())]
    if not judged:
        raise FusionError("no dev topic has a relevant document")
    stages = Stages.load(root, device)
    has_dense = stages.dense is not None
    results: list[DepthResult] = []
    for depth in depths:
        scored = collect(stages, judged, dev.qrels, depth, progress=progress)
        results.append(learn_depth(scored, depth, step=step, has_dense=has_dense))
        r = results[-1]
        log.info("depth %d: BM25 %.4f, rerank joint %.4f, fusion %s", depth, r.bm25_ndcg, r.rerank_ndcg["joint"],
                 ", ".join(f"{v} {x:.4f}" for v, x in r.fused_ndcg.items()))
    means = {v: float(np.mean([r.fused_ndcg[v] for r in results])) for v in VARIANT_COMPONENTS}
    chosen = default_variant or max(VARIANT_COMPONENTS, key=lambda v: (means[v], v == "stacked"))
    data: dict[str, Any] = {
        "format": FUSION_FORMAT,
        "version": FUSION_VERSION,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "method": f"grid search over the simplex (step {step:.2f}) of min-max normalised component scores, "
                  "maximising mean dev NDCG (trec_eval ndcg, no cut-off) of the fused ranking of the candidate set",
        "normalisation": "min-max over the candidate set; unscored -> 0; dense-only candidates have BM25 0",
        "dev": {"part": "dev" if topics is None else "given", "topics": len(judged), "tasks": dev.tasks,
                "split": "models/split.json"},
        "default_variant": chosen,
        "default_reason": "given" if default_variant else "best mean dev NDCG over the depths",
        "mean_dev_ndcg": means,
        "device": stages.device,
        "variants": {
            v: {
                "rerank": {"mode": "joint" if v == "joint" else "stacked", "use_meta": v != "text"},
                "components": [c for c in VARIANT_COMPONENTS[v] if has_dense or c != "dense"],
                "depths": {
                    str(r.depth): {"weights": r.weights[v], "dev_ndcg": r.fused_ndcg[v], "bm25_ndcg": r.bm25_ndcg,
                                   "tied_grid_points": r.ties[v]}
                    for r in results
                },
            }
            for v in VARIANT_COMPONENTS
        },
        "dev_metrics": {
            str(r.depth): {"bm25": r.bm25_ndcg, "dense": r.dense_ndcg, "rerank": r.rerank_ndcg,
                           "fusion": r.fused_ndcg, "candidates_mean": r.candidates, "candidate_recall": r.recall}
            for r in results
        },
    }
    out = root / FUSION_FILE
    out.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    png = None
    if plot:
        png = root / PLOT_FILE
        plot_dev_curves(data, png)
    update_meta(root, {"fusion": {"version": FUSION_VERSION, "file": FUSION_FILE,
                                  "plot": PLOT_FILE if png else None, "default_variant": chosen,
                                  "depths": depths, "dev_topics": len(judged)}})
    seconds = time.perf_counter() - started
    log.info("fusion weights (default variant %s) written to %s in %.1f s", chosen, out, seconds)
    return FusionResult(root, chosen, results, data["dev"], seconds, png, data)


def plot_dev_curves(data: Mapping[str, Any], path: Path, title: str | None = None) -> Path:
    """Figure-3-like PNG: (a) plain reranking vs BM25, (b) weighted fusion vs BM25, dev NDCG over depth."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = data["dev_metrics"]
    depths = sorted(int(d) for d in metrics)
    x = np.arange(len(depths))

    def series(get: Any) -> list[float]:
        return [float(get(metrics[str(d)])) for d in depths]

    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    bm25 = series(lambda m: m["bm25"])
    labels = {"text": ("text only", "o", "-"), "meta": ("meta only", "v", "--"),
              "joint": ("text+meta (joint)", "o", "-"), "stacked": ("text+meta (stacked)", "D", "-.")}
    for name, (label, marker, style) in labels.items():
        axes[0].plot(x, series(lambda m, n=name: m["rerank"][n]), marker=marker, linestyle=style,
                     label=f"rerank: {label}")
    if all(metrics[str(d)].get("dense") is not None for d in depths):
        axes[0].plot(x, series(lambda m: m["dense"]), marker="^", linestyle=":", label="dense only")
    for v, (marker, style) in zip(VARIANT_COMPONENTS, (("o", "-"), ("D", "--"), ("v", "-.")), strict=True):
        axes[1].plot(x, series(lambda m, v=v: m["fusion"][v]), marker=marker, linestyle=style,
                     label=f"weighted: {v}{' (default)' if v == data.get('default_variant') else ''}")
    for ax, sub in zip(axes, ("(a) reranking", "(b) weighted fusion"), strict=True):
        ax.plot(x, bm25, marker="s", color="black", linewidth=2, label="BM25 (first stage)")
        ax.set_xticks(x, [str(d) for d in depths])
        ax.set_xlabel("candidate depth")
        ax.set_title(sub)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    axes[0].set_ylabel("dev NDCG")
    n = data.get("dev", {}).get("topics")
    fig.suptitle(title or f"dev NDCG vs candidate depth ({n} dev topics)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
