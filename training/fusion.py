"""Fusion weights learned leak-free (``priorart fuse INDEX``; ``priorart build --models`` runs it too).

The service fuses min-max normalised component scores linearly (:mod:`service.fusion`). This module
learns the weights, per query profile (with / without classification codes) and candidate depth, and
installs them only where they beat BM25 on held-out dev topics.

Dev topics come from the documents ``models/split.json`` puts in DEV (the models never trained on
them), built by the evaluation task builders of :mod:`training.tasks` so they look like real queries:

- ``xling``: the German and French first claims (reference signs stripped) of the dev trilingual EP
  grants; relevant: the grant. Valid only for an index without German/French BM25 indexes (else a topic
  finds its own text).
- ``known-item``: English title + abstract of the dev US utility grants; relevant: the grant. Valid only
  for an index whose fields leave out title and abstract.
- or given topics and qrels (``--topics``/``--qrels``; e.g. synthetic prior-art topics of dev-split
  documents, whose codes are the query document's own while the relevant documents are others).

Every topic enters in both profiles. ``nocodes``: text (and language) only, as a pasted claim.
``codes``: with classification codes a real query could carry: given topics keep their own codes; an
``xling`` or ``known-item`` topic, whose relevant document is its own publication, gets that
publication's codes truncated to subclass (what a real application shares with its prior art; the
full codes would identify the very document sought, the leak that made fusion look perfect on dev and
rank real claims near random).

Features. The index's own pipeline (:func:`service.pipeline.compose`) runs each topic at each depth in
feature mode (:meth:`~service.pipeline.Pipeline.features`): every candidate with every component's score
and which components did not apply. Nothing is scored here; the fused ranking of a weight vector is
:func:`service.fusion.fuse_linear`, the service's own code.

Objective. Mean NDCG (trec_eval ``ndcg``: no cut-off, gain = grade, log2 discount; the ideal ranking
holds every judged relevant document) of the fused ranking of the whole candidate set, ties by lower row.

Choice on a set of topics. Grid over the simplex (step 0.1) of the profile's components (bm25, dense, text,
meta and joint, those the index has; in ``nocodes`` the meta and joint rankers read the codes the rerank stage
predicts for the query from its first documents, service/stages/rerank.py). The best mean NDCG is shrunk
toward BM25 by the one-standard-error rule: among the grid points whose mean paired NDCG difference to
the best is within one standard error of that difference, the one with the largest BM25 weight.

Cross-validation and installation. ``folds`` folds (default 5) by source publication (both languages
of a grant in one fold), stratified by task; each fold is scored with the choice made on the others.
The weights of a (profile, depth) are installed only when the cross-validated NDCG beats BM25's on the
same topics significantly (p < 0.05, paired randomisation test: a gain of a few topics is noise) and no
task is significantly worse; else that profile ranks by BM25 alone and ``fusion.json`` (so the service)
says why. Installed weights are the choice on all dev
topics of the profile.

Output: ``INDEX/fusion.json`` (:class:`service.fusion.FusionModel`, with the cross-validated table) and
``INDEX/fusion.png`` (dev NDCG against depth per component, BM25 and the cross-validated fusion, per
profile, like Figure 3 of the meta-text embeddings paper), registered in the index's ``meta.json``.
"""

from __future__ import annotations

import itertools
import logging
import random
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from service.fusion import (
    BM25_ONLY,
    PROFILES,
    FusionError,
    FusionModel,
    ProfileWeights,
    fuse_linear,
)
from service.index.components import write_part
from service.index.folder import BuildSettings, IndexFolder, Layout
from service.index.store import DocStore
from service.pipeline import Pipeline, compose
from service.query import Query
from service.retrieval.encoders import ModelsLayout
from service.settings import Settings
from service.text.analysis import SUPPORTED_LANGS
from training.evaluation.significance import randomisation_test
from training.evaluation.trec import Qrels, Topic

log = logging.getLogger(__name__)

DEFAULT_DEPTHS = (40, 200, 400, 1000)
GRID_STEP = 0.1
DEFAULT_FOLDS = 5
MIN_TOPICS = 4
ALPHA = 0.05
"""Installed only when the cross-validated gain over BM25 has p below this (paired randomisation test)."""
TASKS = ("xling", "known-item")
PROFILE_COMPONENTS: dict[str, tuple[str, ...]] = {
    "nocodes": ("bm25", "dense", "text", "meta", "joint"),  # meta, joint: on the codes predicted for the query
    "codes": ("bm25", "dense", "text", "meta", "joint"),
}
SINGLE = ("bm25", "dense", "text", "meta", "joint")
LANG_SUFFIXES = tuple(f"-{lang}" for lang in SUPPORTED_LANGS)


# --------------------------------------------------------------------------------------------------
# dev topics
# --------------------------------------------------------------------------------------------------


def task_validity(settings: BuildSettings) -> dict[str, str | None]:
    """Per task: ``None`` when its topics suit an index with these build settings, else the reason not."""
    langs = set(settings.index_langs)
    fields = set(settings.fields)
    return {
        "xling": None if not (langs & {"de", "fr"})
        else f"the index has {'/'.join(sorted(langs & {'de', 'fr'}))} BM25 indexes: a German/French claim would find "
             "its own text (build with --index-langs en)",
        "known-item": None if not (fields & {"title", "abstract"})
        else "the index holds titles/abstracts: a title+abstract query would find its own text "
             "(build with --fields claims,description)",
    }


@dataclass(frozen=True)
class DevTopic:
    """One dev topic in one profile: the query, its task, its source publication (fold key) and grades."""

    topic: Topic
    task: str
    group: str
    profile: str
    judged: dict[str, int]


def subclass_codes(codes: Iterable[str]) -> list[str]:
    """Codes truncated to subclass (``H01F27/14`` -> ``H01F``), de-duplicated, in order."""
    return list(dict.fromkeys(c[:4] for c in codes if len(c) >= 4))


def group_of(qid: str) -> str:
    """The source publication of a topic id (``EP0640886B1-de`` -> ``EP0640886B1``)."""
    return qid[:-3] if qid.endswith(LANG_SUFFIXES) else qid


def profiled(topics: Sequence[Topic], qrels: Qrels, task: str, *, own_codes: bool) -> list[DevTopic]:
    """Each judged topic in both profiles (see the module doc: ``own_codes`` False -> subclass codes)."""
    out: list[DevTopic] = []
    for t in topics:
        judged = {d: g for d, g in qrels.get(t.qid, {}).items() if g > 0}
        if not judged:
            continue
        bare = t.model_copy(update={"ipc": [], "cpc": []})
        out.append(DevTopic(bare, task, group_of(t.qid), "nocodes", judged))
        codes = t.codes if own_codes else subclass_codes(t.codes)
        if codes:
            out.append(DevTopic(t.model_copy(update={"ipc": [], "cpc": codes}), task, group_of(t.qid), "codes", judged))
    return out


def split_records(docs: DocStore, ids: Iterable[str]) -> list[Any]:
    """Records of the doc store whose ids are in ``ids`` (row order)."""
    wanted = set(ids)
    return [docs.get_row(r) for r, doc_id in enumerate(docs.ids) if doc_id in wanted]


def dev_topics(folder: IndexFolder, docs: DocStore, tasks: str | Sequence[str] = "auto", *,
               part: str = "dev", split: Any = None) -> tuple[list[DevTopic], dict[str, int]]:
    """The dev topics of an index with models (module doc); ``part="test"`` gives the test topics.

    ``split``: a :class:`training.models.pairs.Split` (default: the index's ``models/split.json``)."""
    from training.models.pairs import Split
    from training.tasks import known_item_task, xling_task

    split_path = folder.path(Layout.MODELS) / ModelsLayout.SPLIT
    if split is None:
        if not split_path.is_file():
            raise FusionError(f"{split_path} is missing: fusion needs an index built with --models")
        split = Split.load(split_path)
    validity = task_validity(folder.settings)
    if tasks == "auto":
        chosen = [t for t in TASKS if validity[t] is None]
        if not chosen:
            reasons = "; ".join(f"{t}: {validity[t]}" for t in TASKS)
            raise FusionError(f"no leak-free dev task suits this index ({reasons}); pass dev topics and qrels "
                              "(priorart fuse --topics T --qrels Q) or build for a task")
    else:
        chosen = [tasks] if isinstance(tasks, str) else list(tasks)
        bad = [t for t in chosen if t not in TASKS]
        if bad:
            raise FusionError(f"unknown task(s) {bad}; choose from auto, {', '.join(TASKS)}")
        for t in chosen:
            if validity[t] is not None:
                raise FusionError(f"task {t} does not suit this index: {validity[t]}")
    records = split_records(docs, split.ids(part))
    out: list[DevTopic] = []
    counts: dict[str, int] = {}
    for task in chosen:
        try:
            built = xling_task(records) if task == "xling" else known_item_task(records, n=max(1, len(records)))
        except ValueError as exc:  # no eligible record in the part
            log.warning("no %s %s topics: %s", part, task, exc)
            counts[task] = 0
            continue
        counts[task] = len(built.topics)
        out += profiled(built.topics, built.qrels, task, own_codes=False)
    if not out:
        raise FusionError(f"no {part} topics for task(s) {', '.join(chosen)} in this index ({len(records)} {part} "
                          "documents)")
    return out, counts


# --------------------------------------------------------------------------------------------------
# features (the pipeline's) and NDCG over the weight grid
# --------------------------------------------------------------------------------------------------


@dataclass
class TopicFeatures:
    """One dev topic at one depth: its candidates' component scores (from the pipeline) and grades."""

    dev: DevTopic
    rows: np.ndarray
    scores: dict[str, np.ndarray]
    in_first: np.ndarray
    grades: np.ndarray
    ideal: np.ndarray

    def __len__(self) -> int:
        return len(self.rows)


def collect(pipeline: Pipeline, topics: Sequence[DevTopic], depth: int, *, progress: bool = False
            ) -> list[TopicFeatures]:
    """Each topic through the pipeline in feature mode at ``depth``."""
    from tqdm import tqdm

    out: list[TopicFeatures] = []
    ids = pipeline.docs.ids
    for dt in tqdm(topics, desc=f"dev topics @{depth}", unit="q", disable=not progress, file=sys.stderr):
        t = dt.topic
        cands = pipeline.features(Query(text=t.text, lang=t.lang, codes=t.codes, before=t.before, k=depth, depth=depth))
        grades = np.asarray([dt.judged.get(ids[int(r)], 0) for r in cands.rows], dtype=np.float64)
        ideal = np.sort(np.asarray(list(dt.judged.values()), dtype=np.float64))[::-1]
        out.append(TopicFeatures(dt, cands.rows.copy(), {k: np.asarray(v, dtype=np.float64)
                                                         for k, v in cands.scores.items()}, cands.in_first.copy(),
                                 grades, ideal))
    return out


def simplex_grid(n: int, step: float = GRID_STEP) -> np.ndarray:
    """Every weight vector of ``n`` non-negative multiples of ``step`` summing to 1 (``[points, n]``)."""
    units = round(1.0 / step)
    if not np.isclose(units * step, 1.0):
        raise FusionError(f"grid step must divide 1, got {step}")
    pts = [c for c in itertools.product(range(units + 1), repeat=n) if sum(c) == units]
    return np.asarray(pts, dtype=np.float64) / units


def _discounts(n: int) -> np.ndarray:
    return 1.0 / np.log2(np.arange(2, n + 2, dtype=np.float64))


def ranks_of_relevant(tf: TopicFeatures, fused: np.ndarray) -> np.ndarray:
    """0-based rank of each relevant candidate (``[r, points]``) under each fused column, ties by lower row."""
    rel = np.flatnonzero(tf.grades > 0)
    f_rel = fused[rel]  # [r, points]
    higher = (fused[None, :, :] > f_rel[:, None, :]).sum(axis=1)
    tied_lower = (fused[None, :, :] == f_rel[:, None, :]) & (tf.rows[None, :, None] < tf.rows[rel][:, None, None])
    return np.asarray(higher + tied_lower.sum(axis=1))


def grid_measures(tf: TopicFeatures, comps: Sequence[str], grid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """NDCG and reciprocal rank of the fused ranking of every grid point (``[points]`` each)."""
    if len(tf.ideal) == 0 or len(tf) == 0 or not (tf.grades > 0).any():
        return np.zeros(len(grid)), np.zeros(len(grid))
    fused = fuse_linear(tf.scores, comps, grid)
    rank0 = ranks_of_relevant(tf, fused)
    rel = tf.grades[tf.grades > 0]
    idcg = float((tf.ideal * _discounts(len(tf.ideal))).sum())
    ndcg = (rel[:, None] / np.log2(rank0 + 2.0)).sum(axis=0) / idcg
    rr = 1.0 / (rank0.min(axis=0) + 1.0)
    return ndcg, rr


# --------------------------------------------------------------------------------------------------
# choice, cross-validation, installation
# --------------------------------------------------------------------------------------------------


def choose(ndcg: np.ndarray, grid: np.ndarray, bm25_col: int) -> int:
    """Grid point for topics with per-topic NDCG ``ndcg`` (``[topics, points]``): the best mean, shrunk to the
    point with the largest BM25 weight among those within one standard error of the best (paired)."""
    means = ndcg.mean(axis=0)
    best = int(np.argmax(means))
    diff = ndcg[:, [best]] - ndcg  # [topics, points], >= 0 on average
    n = ndcg.shape[0]
    se = diff.std(axis=0, ddof=1) / np.sqrt(n) if n > 1 else np.zeros(ndcg.shape[1])
    close = np.flatnonzero(diff.mean(axis=0) <= se + 1e-12)
    # largest BM25 weight, then the higher mean, then grid order
    return int(max(close, key=lambda p: (grid[p, bm25_col], means[p], -p)))


def fold_ids(groups: Sequence[str], tasks: Sequence[str], folds: int, seed: int = 0) -> np.ndarray:
    """Fold of each topic (``groups``: its source publication, ``tasks``: its task): the groups of each task
    dealt round-robin after a seeded shuffle, so both languages of a grant share a fold."""
    rng = random.Random(seed)
    fold_of: dict[str, int] = {}
    for task in sorted(set(tasks)):
        mine = sorted({g for g, t in zip(groups, tasks, strict=True) if t == task})
        rng.shuffle(mine)
        for i, g in enumerate(mine):
            fold_of.setdefault(g, i % folds)
    return np.asarray([fold_of[g] for g in groups], dtype=np.int64)


@dataclass
class Cell:
    """One (profile, depth): the cross-validated comparison and the decision."""

    profile: str
    depth: int
    topics: int
    components: list[str]
    single: dict[str, float]  # NDCG of each component alone (no learning), all dev topics of the profile
    bm25_ndcg: float
    cv_ndcg: float  # fused, each fold scored with the choice made on the other folds
    bm25_mrr: float
    cv_mrr: float
    p: float  # paired randomisation test, cv fused vs BM25 NDCG
    by_task: dict[str, dict[str, float]]
    weights: dict[str, float]  # the choice on all topics
    installed: bool
    reason: str
    candidates: float

    def to_json(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in ("topics", "components", "single", "bm25_ndcg", "cv_ndcg", "bm25_mrr",
                                              "cv_mrr", "p", "by_task", "weights", "installed", "reason",
                                              "candidates")}


def decide(profile: str, depth: int, feats: Sequence[TopicFeatures], comps: Sequence[str], *, folds: int,
           step: float = GRID_STEP, seed: int = 0) -> Cell:
    """Cross-validate the choice for one (profile, depth) and decide whether to install it (module doc)."""
    grid = simplex_grid(len(comps), step)
    bm25_col = comps.index("bm25")
    bm25_point = int(np.flatnonzero(grid[:, bm25_col] == 1.0)[0])
    per = [grid_measures(tf, comps, grid) for tf in feats]
    ndcg = np.asarray([p[0] for p in per])  # [topics, points]
    rr = np.asarray([p[1] for p in per])
    n = len(feats)
    single = {}
    for c in SINGLE:
        if c in comps:
            one = np.zeros((1, len(comps)))
            one[0, comps.index(c)] = 1.0
            single[c] = float(np.mean([grid_measures(tf, comps, one)[0][0] for tf in feats])) if n else 0.0
    fold = fold_ids([tf.dev.group for tf in feats], [tf.dev.task for tf in feats], folds, seed)
    cv_ndcg = np.zeros(n)
    cv_rr = np.zeros(n)
    for f in np.unique(fold):
        train, test = fold != f, fold == f
        pick = choose(ndcg[train], grid, bm25_col) if train.any() else bm25_point
        cv_ndcg[test], cv_rr[test] = ndcg[test, pick], rr[test, pick]
    bm25_ndcg, bm25_rr = ndcg[:, bm25_point], rr[:, bm25_point]
    p = randomisation_test(list(cv_ndcg), list(bm25_ndcg), permutations=2000, seed=seed) if n > 1 else 1.0
    by_task: dict[str, dict[str, float]] = {}
    worse: list[str] = []
    for task in sorted({tf.dev.task for tf in feats}):
        m = np.asarray([tf.dev.task == task for tf in feats])
        pt = randomisation_test(list(cv_ndcg[m]), list(bm25_ndcg[m]), permutations=2000, seed=seed) if m.sum() > 1 \
            else 1.0
        by_task[task] = {"topics": int(m.sum()), "bm25": float(bm25_ndcg[m].mean()), "cv": float(cv_ndcg[m].mean()),
                         "p": pt}
        if cv_ndcg[m].mean() < bm25_ndcg[m].mean() and pt < ALPHA:
            worse.append(task)
    weights = {c: float(w) for c, w in zip(comps, grid[choose(ndcg, grid, bm25_col)], strict=True)} if n \
        else dict(BM25_ONLY)
    gain = float(cv_ndcg.mean() - bm25_ndcg.mean()) if n else 0.0
    if n < MIN_TOPICS:
        installed, reason = False, f"too few dev topics ({n}; at least {MIN_TOPICS})"
    elif weights.get("bm25", 0.0) == 1.0:
        installed, reason = False, "the learned weights are BM25 alone"
    elif gain <= 1e-9:
        installed, reason = False, (f"learned weights did not beat BM25 on held-out dev topics ({folds}-fold CV nDCG "
                                    f"{cv_ndcg.mean():.3f} vs BM25 {bm25_ndcg.mean():.3f}, {n} topics)")
    elif p >= ALPHA:
        installed, reason = False, (f"learned weights not significantly above BM25 on held-out dev topics "
                                    f"({folds}-fold CV nDCG {cv_ndcg.mean():.3f} vs BM25 {bm25_ndcg.mean():.3f}, "
                                    f"p = {p:.2f}, {n} topics)")
    elif worse:
        installed, reason = False, f"worse than BM25 on task(s) {', '.join(worse)} (p < {ALPHA})"
    else:
        installed, reason = True, (f"learned on {n} dev topics; {folds}-fold CV nDCG {cv_ndcg.mean():.3f} vs BM25 "
                                   f"{bm25_ndcg.mean():.3f} (p = {p:.3g})")
    return Cell(profile, depth, n, list(comps), single, float(bm25_ndcg.mean()) if n else 0.0,
                float(cv_ndcg.mean()) if n else 0.0, float(bm25_rr.mean()) if n else 0.0,
                float(cv_rr.mean()) if n else 0.0, float(p), by_task, weights, installed, reason,
                float(np.mean([len(tf) for tf in feats])) if n else 0.0)


# --------------------------------------------------------------------------------------------------
# the command's work
# --------------------------------------------------------------------------------------------------


@dataclass
class FusionResult:
    index_dir: Path
    cells: list[Cell]
    dev: dict[str, Any]
    seconds: float
    plot: Path | None
    model: FusionModel = field(repr=False, default_factory=lambda: FusionModel.bm25_only(""))

    def summary(self) -> dict[str, Any]:
        return {"dev_topics": self.dev["topics"], "tasks": self.dev["tasks"], "folds": self.dev["folds"],
                "seconds": round(self.seconds, 2),
                "profiles": {p: {"installed": pw.installed, "reason": pw.reason}
                             for p, pw in self.model.linear.items()},
                "cells": [{"profile": c.profile, "depth": c.depth, **c.to_json()} for c in self.cells]}


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
    folds: int = DEFAULT_FOLDS,
    step: float = GRID_STEP,
    device: str = "auto",
    progress: bool = False,
    plot: bool = True,
    seed: int = 0,
    folder: IndexFolder | None = None,
) -> FusionResult:
    """Learn, cross-validate and install the linear weights of an index (module doc); writes ``fusion.json``."""
    started = time.perf_counter()
    folder = folder or IndexFolder.open(index_dir, verify=False)
    root = folder.root
    depths = parse_depths(depths)
    if folds < 2:
        raise FusionError(f"folds must be >= 2, got {folds}")
    if not folder.has("models"):
        raise FusionError(f"{root} has no models/: build it with --models MODELS_DIR")
    pipeline = compose(folder, Settings(index_dir=root, device=device))
    try:
        if topics is not None:
            if qrels is None:
                raise FusionError("dev topics given without qrels")
            dev = profiled(topics, qrels, "given", own_codes=True)
            counts = {"given": len(topics)}
        else:
            dev, counts = dev_topics(folder, pipeline.docs, tasks)
        if not dev:
            raise FusionError("no dev topic has a relevant document")
        available = {"bm25"} | {c for s in pipeline.names for c in {"dense": ("dense",),
                                                                      "rerank": ("text", "meta", "joint")}.get(s, ())}
        cells: list[Cell] = []
        learned: dict[str, dict[int, dict[str, float]]] = {p: {} for p in PROFILES}
        installed: dict[str, dict[int, bool]] = {p: {} for p in PROFILES}
        reasons: dict[str, list[str]] = {p: [] for p in PROFILES}
        for depth in depths:
            feats_all = collect(pipeline, dev, depth, progress=progress)
            for profile in PROFILES:
                comps = [c for c in PROFILE_COMPONENTS[profile] if c in available]
                feats = [f for f in feats_all if f.dev.profile == profile]
                if len(comps) < 2 or not feats:
                    why = "no dev topics with codes" if not feats else "no neural component for this profile"
                    reasons[profile].append(f"depth {depth}: {why}")
                    continue
                cell = decide(profile, depth, feats, comps, folds=folds, step=step, seed=seed)
                cells.append(cell)
                learned[profile][depth] = cell.weights
                installed[profile][depth] = cell.installed
                reasons[profile].append(f"depth {depth}: {cell.reason}")
                log.info("%s @%d: BM25 %.4f, CV fusion %.4f (%s) -> %s", profile, depth, cell.bm25_ndcg, cell.cv_ndcg,
                         cell.weights, "installed" if cell.installed else cell.reason)
    finally:
        pipeline.docs.close()
    linear: dict[str, ProfileWeights] = {}
    for profile in PROFILES:
        ok = [d for d, v in installed[profile].items() if v]
        if ok:  # depths that did not beat BM25 keep BM25 alone
            use = {d: (learned[profile][d] if installed[profile][d] else dict(BM25_ONLY)) for d in learned[profile]}
            n = max(c.topics for c in cells if c.profile == profile)
            why = (f"learned leak-free on {n} dev topics, installed at depth(s) {', '.join(map(str, sorted(ok)))} "
                   f"where {folds}-fold cross-validation put it above BM25")
            linear[profile] = ProfileWeights(True, why, use, learned[profile])
        else:
            why = "; ".join(reasons[profile]) or "nothing learned"
            linear[profile] = ProfileWeights(False, _short_reason(cells, profile) or why, {}, learned[profile])
    old = FusionModel.of_folder(folder)
    judged = len({(t.topic.qid, t.profile) for t in dev})
    info = {"topics": judged, "tasks": counts, "folds": folds, "depths": depths, "grid_step": step,
            "objective": "mean nDCG (trec_eval ndcg, no cut-off) of the fused ranking of the candidate set",
            "choice": "best grid point shrunk toward BM25 by the one-standard-error rule",
            "install": f"cross-validated nDCG above BM25's with p < {ALPHA}, no task worse with p < {ALPHA}",
            "cells": [{"profile": c.profile, "depth": c.depth, **c.to_json()} for c in cells],
            "device": pipeline.device}
    model = FusionModel(linear, old.borda, old.linlearn, old.default_method if old.default_method in old.methods
                        else "linear", {**old.sources, "linear": "priorart fuse (leak-free, cross-validated)"},
                        {"linear": info})
    entry = write_part("fusion", folder.root, model.to_json())
    png = plot_dev_curves(cells, folder.path(Layout.FUSION_PLOT)) if plot and cells else None
    changed = [Layout.FUSION] + ([Layout.FUSION_PLOT] if png else [])
    folder.register({"fusion": {**entry, "plot": Layout.FUSION_PLOT if png else None,
                                "installed": {p: pw.installed for p, pw in linear.items()}}}, changed=changed)
    seconds = time.perf_counter() - started
    log.info("fusion weights written to %s in %.1f s", folder.path(Layout.FUSION), seconds)
    return FusionResult(root, cells, info, seconds, png, model)


def _short_reason(cells: Sequence[Cell], profile: str) -> str:
    mine = [c for c in cells if c.profile == profile]
    if not mine:
        return ""
    c = max(mine, key=lambda c: c.depth)
    return c.reason


def format_cells(cells: Sequence[Cell]) -> str:
    """The cross-validated table (one row per profile and depth)."""
    names = [c for c in SINGLE if any(c in cell.single for cell in cells)]
    head = f"{'profile':<8} {'depth':>5} {'topics':>6} " + " ".join(f"{n:>6}" for n in names) + \
        f" {'fused':>7} {'p':>6}  {'MRR bm25':>8} {'fused':>6}  decision"
    lines = [head]
    for c in cells:
        vals = " ".join(f"{c.single[n]:>6.3f}" if n in c.single else f"{'-':>6}" for n in names)
        lines.append(f"{c.profile:<8} {c.depth:>5} {c.topics:>6} {vals} {c.cv_ndcg:>7.3f} {c.p:>6.3f}  "
                     f"{c.bm25_mrr:>8.3f} {c.cv_mrr:>6.3f}  "
                     f"{'installed ' + _fmt_w(c.weights) if c.installed else 'BM25 only: ' + c.reason}")
    return "\n".join(lines)


def _fmt_w(w: Mapping[str, float]) -> str:
    return ", ".join(f"{k} {v:.1f}" for k, v in w.items() if v)


def plot_dev_curves(cells: Sequence[Cell], path: Path) -> Path:
    """Figure-3-like PNG: dev nDCG against candidate depth, per profile: each component alone, BM25, CV fusion."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    profiles = [p for p in PROFILES if any(c.profile == p for c in cells)]
    fig, axes = plt.subplots(1, len(profiles), figsize=(5.5 * len(profiles), 4), sharey=True, squeeze=False)
    for ax, profile in zip(axes[0], profiles, strict=True):
        mine = sorted((c for c in cells if c.profile == profile), key=lambda c: c.depth)
        x = np.arange(len(mine))
        for name in SINGLE:
            if name == "bm25" or not all(name in c.single for c in mine):
                continue
            ax.plot(x, [c.single[name] for c in mine], marker="o", linestyle="--", label=f"{name} alone")
        ax.plot(x, [c.bm25_ndcg for c in mine], marker="s", color="black", linewidth=2, label="BM25 (first stage)")
        ax.plot(x, [c.cv_ndcg for c in mine], marker="D", color="tab:red", linewidth=2,
                label="weighted fusion (cross-validated)")
        for xi, c in zip(x, mine, strict=True):
            if c.installed:
                ax.annotate("installed", (xi, c.cv_ndcg), textcoords="offset points", xytext=(0, 6), fontsize=7,
                            ha="center")
        ax.set_xticks(x, [str(c.depth) for c in mine])
        ax.set_xlabel("candidate depth")
        ax.set_title(f"queries {'with' if profile == 'codes' else 'without'} codes ({mine[0].topics} dev topics)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    axes[0][0].set_ylabel("dev nDCG (held-out folds for the fusion)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


__all__ = ["Cell", "DevTopic", "FusionError", "FusionResult", "TopicFeatures", "choose", "collect", "decide",
           "dev_topics", "fold_ids", "format_cells", "grid_measures", "learn_fusion", "parse_depths", "profiled",
           "simplex_grid", "task_validity"]
