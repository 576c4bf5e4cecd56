"""Dense pairwise linear learning (domain knowledge, LinLearn) and Borda weight tuning.

:class:`PairwiseLinear` minimises the l1-regularised pairwise hinge loss
``sum max(0, margin - w . (x+ - x-)) + l1 * |w|_1`` by mini-batch SGD with a soft-threshold after each
step (truncated gradient, Langford et al. 2009), the dense twin of the word-pair learner.

LinLearn (Schamoni et al. 2014): every system's score is one feature, min-max normalised over each
query's candidate list (what :func:`service.fusion.fuse` applies at query time); pairs are
(relevant, non-relevant) candidates of the same dev query. Borda: ``kappa`` of a pair of systems by grid
search of a dev measure (MAP, or MRR).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from service.fusion import fuse, minmax

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------------
# the learner
# --------------------------------------------------------------------------------------------------


class PairwiseLinear:
    """Mini-batch SGD on the pairwise hinge loss with l1 soft-thresholding (see the module docstring)."""

    def __init__(self, dim: int, *, lr: float = 0.05, l1: float = 1e-4, margin: float = 1.0, batch: int = 32,
                 seed: int = 0) -> None:
        if dim < 1 or lr <= 0 or l1 < 0 or batch < 1:
            raise ValueError(f"bad learner settings: dim={dim}, lr={lr}, l1={l1}, batch={batch}")
        self.w = np.zeros(dim, dtype=np.float64)
        self.lr, self.l1, self.margin, self.batch = lr, l1, margin, batch
        self.rng = np.random.default_rng(seed)

    def loss(self, diffs: np.ndarray) -> float:
        return float(np.maximum(0.0, self.margin - diffs @ self.w).mean()) if len(diffs) else 0.0

    def partial_fit(self, diffs: np.ndarray) -> float:
        """One pass over ``diffs`` (rows ``x+ - x-``) in random order; returns the mean hinge loss before it."""
        diffs = np.asarray(diffs, dtype=np.float64)
        before = self.loss(diffs)
        order = self.rng.permutation(len(diffs))
        for start in range(0, len(order), self.batch):
            b = diffs[order[start : start + self.batch]]
            viol = self.margin - b @ self.w > 0
            if viol.any():
                self.w += self.lr * b[viol].sum(axis=0) / len(b)
            if self.l1:
                shrink = self.lr * self.l1
                self.w = np.sign(self.w) * np.maximum(0.0, np.abs(self.w) - shrink)
        return before


def fit_pairwise_linear(
    diffs: np.ndarray | Callable[[int], np.ndarray],
    dim: int,
    *,
    epochs: int = 30,
    lr: float = 0.05,
    l1: float = 1e-4,
    margin: float = 1.0,
    batch: int = 32,
    seed: int = 0,
    dev: Callable[[np.ndarray], float] | None = None,
    patience: int = 5,
) -> tuple[np.ndarray, list[dict[str, float]]]:
    """Train; ``diffs`` is an array or ``epoch -> array`` (re-sampled pairs). With ``dev`` (weights ->
    dev measure, higher is better) keep the best epoch's weights and stop after ``patience`` epochs
    without improvement. Returns ``(weights, history)``."""
    learner = PairwiseLinear(dim, lr=lr, l1=l1, margin=margin, batch=batch, seed=seed)
    history: list[dict[str, float]] = []
    best_w, best, since = learner.w.copy(), -np.inf, 0
    for epoch in range(epochs):
        d = diffs(epoch) if callable(diffs) else diffs
        loss = learner.partial_fit(d)
        entry = {"epoch": float(epoch + 1), "loss": loss, "nnz": float(np.count_nonzero(learner.w))}
        if dev is not None:
            val = dev(learner.w)
            entry["dev"] = val
            if val > best + 1e-9:
                best, best_w, since = val, learner.w.copy(), 0
            else:
                since += 1
        history.append(entry)
        if dev is not None and since >= patience:
            break
    return (best_w if dev is not None else learner.w.copy()), history


# --------------------------------------------------------------------------------------------------
# candidate lists, measures
# --------------------------------------------------------------------------------------------------


@dataclass
class CandidateList:
    """One dev/test query: candidate documents, each system's raw scores (NaN: not scored), relevance."""

    qid: str
    doc_ids: list[str]
    scores: dict[str, np.ndarray]
    rels: np.ndarray
    n_relevant: int  # relevant documents of the query, in the list or not

    def __post_init__(self) -> None:
        n = len(self.doc_ids)
        if len(self.rels) != n or any(len(a) != n for a in self.scores.values()):
            raise ValueError(f"{self.qid}: scores/relevance arrays do not match {n} candidates")


def ranking_order(fused: np.ndarray) -> np.ndarray:
    """Candidates by descending score, ties in list order (stable)."""
    return np.argsort(-np.asarray(fused, dtype=np.float64), kind="stable")


def list_measure(fused: np.ndarray, rels: np.ndarray, n_relevant: int, measure: str = "map") -> float:
    """AP (``map``) or reciprocal rank (``mrr``) of one list; relevant documents missing from it count as not found."""
    if n_relevant <= 0:
        return 0.0
    hits = (np.asarray(rels)[ranking_order(fused)] > 0).astype(np.float64)
    if measure == "mrr":
        first = np.flatnonzero(hits)
        return 1.0 / (first[0] + 1) if len(first) else 0.0
    if measure == "map":
        prec = np.cumsum(hits) / np.arange(1, len(hits) + 1)
        return float((prec * hits).sum() / n_relevant)
    raise ValueError(f"unknown measure {measure!r}; valid: map, mrr")


def mean_measure(lists: Sequence[CandidateList], fuse: Callable[[CandidateList], np.ndarray], measure: str) -> float:
    vals = [list_measure(fuse(c), c.rels, c.n_relevant, measure) for c in lists]
    return float(np.mean(vals)) if vals else float("nan")


# --------------------------------------------------------------------------------------------------
# LinLearn and Borda
# --------------------------------------------------------------------------------------------------


@dataclass
class LinLearnConfig:
    epochs: int = 60
    lr: float = 0.05
    l1: float = 1e-4
    margin: float = 0.1  # features are in [0, 1]: a unit margin would need large weights
    batch: int = 32
    max_negatives: int = 100  # per relevant document and query (highest-scored by any system first)
    seed: int = 13
    measure: str = "map"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class LinLearnResult:
    weights: dict[str, float]
    dev: float
    history: list[dict[str, float]] = field(default_factory=list)
    pairs: int = 0


def feature_matrix(c: CandidateList, features: Sequence[str]) -> np.ndarray:
    """Min-max normalised scores ``[candidates, features]`` (a missing system counts 0)."""
    n = len(c.doc_ids)
    return np.column_stack([minmax(c.scores[f]) if f in c.scores else np.zeros(n) for f in features])


def linlearn_diffs(lists: Sequence[CandidateList], features: Sequence[str], max_negatives: int) -> np.ndarray:
    """Rows ``x(relevant) - x(non-relevant)`` of every query; the ``max_negatives`` non-relevant candidates
    with the highest best feature value are used (the hard ones)."""
    rows: list[np.ndarray] = []
    for c in lists:
        x = feature_matrix(c, features)
        pos = np.flatnonzero(c.rels > 0)
        neg = np.flatnonzero(c.rels <= 0)
        if not len(pos) or not len(neg):
            continue
        if len(neg) > max_negatives:
            hardness = x[neg].max(axis=1)
            neg = neg[np.argsort(-hardness, kind="stable")[:max_negatives]]
        rows.append((x[pos][:, None, :] - x[neg][None, :, :]).reshape(-1, len(features)))
    return np.concatenate(rows) if rows else np.zeros((0, len(features)))


def train_linlearn(lists: Sequence[CandidateList], features: Sequence[str],
                   cfg: LinLearnConfig | None = None) -> LinLearnResult:
    """Pairwise linear combination of the systems' normalised scores (weights per feature)."""
    cfg = cfg or LinLearnConfig()
    feats = list(features)
    diffs = linlearn_diffs(lists, feats, cfg.max_negatives)
    if not len(diffs):
        raise ValueError("no (relevant, non-relevant) pair in the dev candidate lists: cannot train LinLearn")
    w, history = fit_pairwise_linear(diffs, len(feats), epochs=cfg.epochs, lr=cfg.lr, l1=cfg.l1, margin=cfg.margin,
                                     batch=cfg.batch, seed=cfg.seed)
    weights = {f: float(v) for f, v in zip(feats, w, strict=True)}
    dev = mean_measure(lists, lambda c: fuse("linlearn", c.scores, weights), cfg.measure)
    return LinLearnResult(weights, dev, history, len(diffs))


def tune_borda(
    lists: Sequence[CandidateList], a: str, b: str, *, step: float = 0.05, measure: str = "map"
) -> tuple[float, float, list[tuple[float, float]]]:
    """Grid search of ``kappa`` in ``[0, 1]`` for ``kappa * a + (1 - kappa) * b`` (Borda points).

    Returns ``(kappa, dev measure, curve)``; among equal values the one closest to 0.5 wins.
    """
    if not 0 < step <= 1:
        raise ValueError(f"step must be in (0, 1], got {step}")
    grid = np.round(np.linspace(0.0, 1.0, int(round(1 / step)) + 1), 6)
    def at(kappa: float) -> float:
        weights = {a: kappa, b: 1.0 - kappa}
        return mean_measure(lists, lambda c: fuse("borda", c.scores, weights), measure)

    curve = [(float(k), at(float(k))) for k in grid]
    best = max(v for _, v in curve)
    kappa = min((k for k, v in curve if v >= best - 1e-12), key=lambda k: abs(k - 0.5))
    return kappa, best, curve


def borda_weights(kappa: float, a: str, b: str) -> dict[str, float]:
    return {a: kappa, b: 1.0 - kappa}


def fuse_lists(lists: Sequence[CandidateList], method: str, weights: Mapping[str, float]) -> dict[str, np.ndarray]:
    """Fused scores per query id with ``borda`` or ``linlearn``."""
    if method not in ("borda", "linlearn"):
        raise ValueError(f"unknown method {method!r}; valid: borda, linlearn")
    return {c.qid: fuse(method, c.scores, weights) for c in lists}
