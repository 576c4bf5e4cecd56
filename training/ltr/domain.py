"""Training the domain-knowledge model: dense pairwise linear learner over :data:`FEATURES`.

Same tuples as the word-pair model and the neural rankers (re-sampled each epoch by
:func:`training.models.pairs.sample_pairs`); features from :meth:`DomainStore.features` with the
query metadata of ``LtrConfig.query_meta``; standardised with the mean and standard deviation of the
first epoch's tuple documents; :class:`training.ltr.linlearn.PairwiseLinear` (hinge, l1 soft-threshold);
early stopping on dev NDCG ranking the pool (:func:`training.ltr.data.dev_rankings`).
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from service.retrieval.domain import FEATURES, DomainModel
from training.ltr.data import LtrData
from training.ltr.linlearn import PairwiseLinear
from training.models.pairs import ndcg

log = logging.getLogger(__name__)


@dataclass
class DomainConfig:
    epochs: int = 40
    lr: float = 0.02
    l1: float = 1e-3
    margin: float = 1.0
    batch: int = 32
    patience: int = 6
    seed: int = 13

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class DomainResult:
    model: DomainModel
    best_epoch: int
    dev_ndcg: float
    history: list[dict[str, float]] = field(default_factory=list)
    seconds: float = 0.0


def tuple_features(data: LtrData, pairs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Feature rows of the better and the worse document of each tuple ``[topic, better, worse]``."""
    better = np.zeros((len(pairs), len(FEATURES)))
    worse = np.zeros((len(pairs), len(FEATURES)))
    for t in np.unique(pairs[:, 0]) if len(pairs) else []:
        sel = np.flatnonzero(pairs[:, 0] == t)
        rows, inv = np.unique(pairs[sel][:, 1:], return_inverse=True)
        x = data.domain.features(data.train_q[int(t)].meta, rows)
        inv = inv.reshape(-1, 2)
        better[sel] = x[inv[:, 0]]
        worse[sel] = x[inv[:, 1]]
    return better, worse


def dev_scores(model: DomainModel, data: LtrData) -> list[np.ndarray]:
    return [model.score(data.domain.features(q.meta, cands))
            for q, cands in zip(data.dev_q, data.dev_candidates, strict=True)]


def dev_ndcg(model: DomainModel, data: LtrData) -> float:
    vals = [ndcg(s, r) for s, r in zip(dev_scores(model, data), data.dev_rels, strict=True)]
    return float(np.mean(vals)) if vals else float("nan")


def train_domain(data: LtrData, cfg: DomainConfig | None = None) -> DomainResult:
    cfg = cfg or DomainConfig()
    rng = np.random.default_rng(cfg.seed)
    t0 = time.perf_counter()
    feats = list(FEATURES)
    learner = PairwiseLinear(len(feats), lr=cfg.lr, l1=cfg.l1, margin=cfg.margin, batch=cfg.batch, seed=cfg.seed)
    mean = std = None
    history: list[dict[str, float]] = []
    best_model: DomainModel | None = None
    best, best_epoch, since = -np.inf, 0, 0
    for epoch in range(1, cfg.epochs + 1):
        pairs = data.pairs(rng)
        xb, xw = tuple_features(data, pairs)
        if mean is None or std is None:
            allx = np.concatenate([xb, xw]) if len(xb) else np.zeros((1, len(feats)))
            mean, std = allx.mean(axis=0), allx.std(axis=0)
            std = np.where(std > 0, std, 1.0)
        loss = learner.partial_fit((xb - xw) / std)
        model = DomainModel(feats, mean, std, learner.w.copy())
        dev = dev_ndcg(model, data) if data.dev_q else -loss
        history.append({"epoch": epoch, "loss": loss, "dev_ndcg": dev, "nnz": int(np.count_nonzero(learner.w))})
        if dev > best + 1e-9:
            best, best_epoch, since, best_model = dev, epoch, 0, model
        else:
            since += 1
            if since >= cfg.patience:
                break
    if best_model is None:
        raise ValueError("domain model: no epoch ran (epochs must be >= 1)")
    best_model.info = {"query_meta": list(data.config.query_meta), "best_epoch": best_epoch, "dev_ndcg": float(best),
                       "settings": cfg.to_json()}
    log.info("domain model: best epoch %d, dev ndcg %.4f, weights %s", best_epoch, best,
             {f: round(float(w), 3) for f, w in zip(feats, best_model.weights, strict=True) if w})
    return DomainResult(best_model, best_epoch, float(best), history, time.perf_counter() - t0)
