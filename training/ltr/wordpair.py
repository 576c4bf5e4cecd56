"""Training the sparse word-pair model: l1-regularised pairwise hinge loss by SGD over hashed pair features.

Objective (Schamoni et al. 2014, the "VW" model): over tuples ``(q, d+, d-)``
``sum max(0, margin - (f(q, d+) - f(q, d-))) + l1 * |w|_1`` with
``f(q, d) = sum_{i in q, j in d} w[h(i, j)]`` (:mod:`service.retrieval.wordpair`).

SGD, one tuple at a time, in random order, tuples re-sampled every epoch by the neural rankers' sampler
(:func:`training.models.pairs.sample_pairs`: every judged document against 4 random training
negatives, relevance 2 against up to 2 relevance-1 documents):

- the feature vector of a tuple is ``phi(q, d+) - phi(q, d-)``; pairs whose document term occurs in both
  documents cancel, so only the terms of ``d+`` not in ``d-`` (+1) and of ``d-`` not in ``d+`` (-1) are
  hashed (exact, and cheaper);
- when the margin is violated: ``w += lr * (phi(q, d+) - phi(q, d-))``;
- l1 by clipping with the cumulative penalty of Tsuruoka et al. (2009), the lazy form of the truncated
  gradient (Langford et al. 2009): ``u`` is the total penalty ``lr * l1`` per step so far, ``c_k`` what
  weight ``k`` has received; each weight of the tuple is pulled towards 0 by what it is owed and clipped
  at 0 (``w_k > 0: w_k = max(0, w_k - (u + c_k))``; ``w_k < 0: w_k = min(0, w_k + (u - c_k))``), so
  weights that are not pushed often enough become exactly 0. Before every evaluation all weights are
  brought up to date.

Early stopping on the dev topics' NDCG when ranking the pool (:func:`training.ltr.data.dev_rankings`:
judged documents + the rest of the pool; the rankers' judged + 20 random documents are too easy, see
there); ``l1`` from a small grid by the same dev NDCG.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from service.retrieval.wordpair import DEFAULT_BITS, DocTermStore, WordPairModel, column_sums, pair_buckets
from training.ltr.data import LtrData, QuerySide
from training.models.pairs import ndcg

log = logging.getLogger(__name__)


@dataclass
class WordPairConfig:
    bits: int = DEFAULT_BITS
    epochs: int = 12
    lr: float = 0.01
    l1: float = 3e-4
    l1_grid: tuple[float, ...] = (3e-4, 1e-3)  # empty: use ``l1``
    margin: float = 1.0
    patience: int = 3
    seed: int = 13

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class WordPairResult:
    w: np.ndarray  # float32 [2**bits]
    l1: float
    best_epoch: int
    dev_ndcg: float
    history: list[dict[str, float]] = field(default_factory=list)
    grid: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def nnz(self) -> int:
        return int(np.count_nonzero(self.w))

    def model(self, settings: dict[str, Any] | None = None) -> WordPairModel:
        info = {"l1": self.l1, "best_epoch": self.best_epoch, "dev_ndcg": self.dev_ndcg, **(settings or {})}
        return WordPairModel.from_dense(self.w, info)


class L1HingeSGD:
    """Sparse SGD with cumulative-penalty l1 clipping (see the module docstring)."""

    def __init__(self, dim: int, *, lr: float, l1: float, margin: float = 1.0) -> None:
        if lr <= 0 or l1 < 0:
            raise ValueError(f"lr must be > 0 and l1 >= 0 (lr={lr}, l1={l1})")
        self.w = np.zeros(dim, dtype=np.float64)
        self.c = np.zeros(dim, dtype=np.float64)  # penalty each weight has received (signed)
        self.u = 0.0  # penalty every weight is owed
        self.lr, self.l1, self.margin = lr, l1, margin

    def _clip(self, idx: np.ndarray) -> None:
        z = self.w[idx]
        c = self.c[idx]
        new = np.where(z > 0, np.maximum(0.0, z - (self.u + c)),
                       np.where(z < 0, np.minimum(0.0, z + (self.u - c)), 0.0))
        self.c[idx] = c + (new - z)
        self.w[idx] = new

    def step(self, plus: np.ndarray, minus: np.ndarray) -> float:
        """One tuple: ``plus`` / ``minus`` are the bucket numbers of ``phi(q, d+)`` / ``phi(q, d-)`` (after
        cancelling shared pairs). Returns the hinge loss before the update."""
        self.u += self.lr * self.l1
        margin = float(self.w[plus].sum() - self.w[minus].sum())
        loss = max(0.0, self.margin - margin)
        if loss > 0:
            np.add.at(self.w, plus, self.lr)
            np.add.at(self.w, minus, -self.lr)
        if self.l1:
            self._clip(np.concatenate([plus, minus]))
        return loss

    def settle(self) -> None:
        """Apply the pending penalty to every non-zero weight (the non-lazy state)."""
        if self.l1:
            self._clip(np.flatnonzero(self.w))


def _row_terms(store: DocTermStore, row: int) -> np.ndarray:
    return np.asarray(store.ids[int(store.indptr[row]) : int(store.indptr[row + 1])])


def tuple_buckets(
    q: QuerySide, store: DocTermStore, better: int, worse: int, bits: int
) -> tuple[np.ndarray, np.ndarray]:
    """Buckets of ``phi(q, better)`` and ``phi(q, worse)`` without the pairs the two documents share."""
    a, b = _row_terms(store, better), _row_terms(store, worse)
    only_a = np.setdiff1d(a, b, assume_unique=True)
    only_b = np.setdiff1d(b, a, assume_unique=True)
    return (pair_buckets(q.hashes, store.hashes[only_a], bits).ravel(),
            pair_buckets(q.hashes, store.hashes[only_b], bits).ravel())


def score_candidates(w: np.ndarray, bits: int, q: QuerySide, store: DocTermStore, rows: np.ndarray) -> np.ndarray:
    """Word-pair scores of store rows for one query (the service's computation, on a dense ``w``)."""
    rows = np.asarray(rows, dtype=np.int64)
    pos, ids = store.gather(rows)
    if len(ids) == 0 or len(q.hashes) == 0:
        return np.zeros(len(rows))
    uniq, inv = np.unique(ids, return_inverse=True)
    sums = column_sums(w, q.hashes, store.hashes[uniq], bits)
    return np.bincount(pos, weights=sums[inv], minlength=len(rows))


def dev_ndcg(w: np.ndarray, bits: int, data: LtrData) -> float:
    vals = [ndcg(score_candidates(w, bits, q, data.terms, cands), rels)
            for q, cands, rels in zip(data.dev_q, data.dev_candidates, data.dev_rels, strict=True)]
    return float(np.mean(vals)) if vals else float("nan")


def _train_one(data: LtrData, cfg: WordPairConfig, l1: float) -> WordPairResult:
    rng = np.random.default_rng(cfg.seed)
    sgd = L1HingeSGD(1 << cfg.bits, lr=cfg.lr, l1=l1, margin=cfg.margin)
    history: list[dict[str, float]] = []
    best_w = np.zeros(1 << cfg.bits, dtype=np.float32)
    best, best_epoch, since = -np.inf, 0, 0
    t0 = time.perf_counter()
    for epoch in range(1, cfg.epochs + 1):
        te = time.perf_counter()
        pairs = data.pairs(rng)
        pairs = pairs[rng.permutation(len(pairs))]
        losses = np.zeros(len(pairs))
        for n, (t, better, worse) in enumerate(pairs.tolist()):
            plus, minus = tuple_buckets(data.train_q[t], data.terms, better, worse, cfg.bits)
            losses[n] = sgd.step(plus, minus)
        sgd.settle()
        dev = dev_ndcg(sgd.w, cfg.bits, data) if data.dev_q else -float(losses.mean())
        nnz = int(np.count_nonzero(sgd.w))
        history.append({"epoch": epoch, "loss": float(losses.mean()), "dev_ndcg": dev, "nnz": nnz,
                        "pairs": len(pairs), "seconds": time.perf_counter() - te})
        log.info("wordpair l1=%g epoch %d: loss %.4f, dev ndcg %.4f, %d non-zero weights, %.1f s", l1, epoch,
                 losses.mean(), dev, nnz, time.perf_counter() - te)
        if dev > best + 1e-9:
            best, best_epoch, since = dev, epoch, 0
            best_w = sgd.w.astype(np.float32)
        else:
            since += 1
            if since >= cfg.patience:
                break
    return WordPairResult(best_w, l1, best_epoch, float(best), history, seconds=time.perf_counter() - t0)


def train_wordpair(data: LtrData, cfg: WordPairConfig | None = None) -> WordPairResult:
    """Train on ``data`` (train topics; dev topics for early stopping and the l1 grid)."""
    cfg = cfg or WordPairConfig()
    grid: Sequence[float] = cfg.l1_grid or (cfg.l1,)
    t0 = time.perf_counter()
    best: WordPairResult | None = None
    scores: dict[str, float] = {}
    for l1 in grid:
        res = _train_one(data, cfg, l1)
        scores[f"{l1:g}"] = res.dev_ndcg
        if best is None or res.dev_ndcg > best.dev_ndcg + 1e-9:
            best = res
    if best is None:
        raise ValueError("l1_grid is empty and no l1 given")
    best.grid = scores
    best.seconds = time.perf_counter() - t0
    return best
