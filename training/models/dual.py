"""Dual encoder for the dense stage, trained with smooth learning (Liu et al., "Cross-lingual document
retrieval with smooth learning").

- Encoders: one embedding table per language, initialised from word2vec and fine-tuned; average
  pooling over the valid terms followed by tanh (``linear=True`` puts a linear layer before the
  tanh). A German query uses the German table, an English query and every document the English one
  (the document side is English, see :mod:`service.retrieval.encoders`).
- Smooth cosine similarity ``SCS(u, v) = <u, v> / ((|u| + l)(|v| + l))`` with ``l > 0``: bounded
  gradient near the origin (the paper's Figure 1); in (-1, 1).
- Smooth ordinal search loss (SOSL): ordered relevance classes ``0 < 1 < 2`` separated by thresholds
  ``-1 < t_1 < t_2 < 1``; a pair of class ``y`` costs nothing when ``t_y < s <= t_{y+1}`` (with
  ``t_0 = -inf``, ``t_K = +inf``) and the squared distance past the violated threshold otherwise
  (the immediate-threshold construction with a squared hinge, which is smooth). As in the paper the
  thresholds are not learned but grid-searched: a short screening run per threshold pair, then the pair
  with the best dev NDCG is trained fully. Note that SCS cannot reach 1: for ``u = v`` it is
  ``|u|^2 / (|u| + l)^2``, so a high upper threshold keeps pushing relevant pairs up.
- Exported vectors are ``v / (|v| + l)`` so that an inner product of a query and a document vector is
  exactly their SCS: FAISS uses inner product on the vectors as stored (no L2 normalisation).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from service.retrieval.encoders import pad_batch
from training.models.pairs import RankingData, sample_pointwise
from training.models.rankers import EarlyStopping, TrainResult, dev_ndcg, to_batch

log = logging.getLogger(__name__)


def smooth_cosine(u: torch.Tensor, v: torch.Tensor, l: float = 1.0) -> torch.Tensor:  # noqa: E741
    """``<u, v> / ((|u| + l)(|v| + l))`` row-wise, [batch]."""
    if l <= 0:
        raise ValueError("the smoothing constant l must be > 0")
    return (u * v).sum(-1) / ((u.norm(dim=-1) + l) * (v.norm(dim=-1) + l))


def sosl_loss(scores: torch.Tensor, labels: torch.Tensor, thresholds: Sequence[float]) -> torch.Tensor:
    """Smooth ordinal search loss: mean of ``relu(t_y - s)^2 + relu(s - t_{y+1})^2`` (see the module doc)."""
    th = list(thresholds)
    if any(not -1.0 < t < 1.0 for t in th) or any(a >= b for a, b in zip(th, th[1:], strict=False)):
        raise ValueError(f"thresholds must be increasing and inside (-1, 1), got {th}")
    inf = torch.tensor([float("inf")], dtype=scores.dtype, device=scores.device)
    bounds = torch.cat([-inf, torch.tensor(th, dtype=scores.dtype, device=scores.device), inf])
    if int(labels.max()) > len(th) or int(labels.min()) < 0:
        raise ValueError(f"labels must be in 0..{len(th)} for {len(th)} thresholds")
    lower = bounds[labels]
    upper = bounds[labels + 1]
    below = torch.where(torch.isinf(lower), torch.zeros_like(scores), torch.clamp(lower - scores, min=0))
    above = torch.where(torch.isinf(upper), torch.zeros_like(scores), torch.clamp(scores - upper, min=0))
    return (below**2 + above**2).mean()


class MeanEncoder(nn.Module):
    """Average pooling of embeddings over the valid terms, optional linear layer, tanh."""

    def __init__(self, embedding: nn.Embedding, *, linear: bool = False) -> None:
        super().__init__()
        self.embedding = embedding
        dim = embedding.embedding_dim
        self.linear = nn.Linear(dim, dim) if linear else None

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        x = self.embedding(ids)
        pos = torch.arange(ids.shape[1], device=ids.device)
        mask = (pos.unsqueeze(0) < lengths.unsqueeze(1)).to(x.dtype)
        mean = (x * mask.unsqueeze(-1)).sum(1) / torch.clamp(lengths, min=1).unsqueeze(1).to(x.dtype)
        if self.linear is not None:
            mean = self.linear(mean)
        return torch.tanh(mean)


@dataclass
class DualConfig:
    """Hyper-parameters of the dual encoder and its training."""

    smooth_l: float = 1.0
    thresholds_grid: list[tuple[float, float]] = field(
        default_factory=lambda: [(0.0, 0.4), (0.2, 0.6), (0.4, 0.8), (0.5, 0.9), (0.6, 0.95)]
    )
    grid_epochs: int = 4  # screening run per threshold pair; the best pair is then trained for ``epochs``
    linear: bool = False
    lr: float = 0.01
    batch_size: int = 128
    epochs: int = 12
    patience: int = 3
    negatives: int = 4
    seed: int = 13

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class DualEncoder(nn.Module):
    """Per-language query encoders and an English document encoder into one space (see module doc)."""

    def __init__(
        self,
        word_vectors: Mapping[str, np.ndarray],
        query_langs: Sequence[str],
        *,
        smooth_l: float = 1.0,
        linear: bool = False,
    ) -> None:
        super().__init__()
        if "en" not in word_vectors:
            raise ValueError("the document side needs English word vectors")
        dims = {np.asarray(v).shape[1] for v in word_vectors.values()}
        if len(dims) != 1:
            raise ValueError(f"word vectors of all languages must have one dimension, got {sorted(dims)}")
        self.dim = dims.pop()
        self.smooth_l = smooth_l
        tables = {
            lang: nn.Embedding.from_pretrained(
                torch.as_tensor(np.asarray(word_vectors[lang], dtype=np.float32)), freeze=False, padding_idx=0
            )
            for lang in sorted({"en", *query_langs})
        }
        self.tables = nn.ModuleDict(tables)
        self.query = nn.ModuleDict({lang: MeanEncoder(tables[lang], linear=linear) for lang in query_langs})
        self.doc = MeanEncoder(tables["en"], linear=linear)

    @property
    def query_langs(self) -> list[str]:
        return list(self.query.keys())

    def encode_query(self, lang: str, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        if lang not in self.query:
            raise ValueError(f"no {lang} query encoder; this dual encoder has {self.query_langs}")
        return self.query[lang](ids, lengths)

    def encode_doc(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        return self.doc(ids, lengths)

    def scale(self, v: torch.Tensor) -> torch.Tensor:
        """``v / (|v| + l)``: the exported vector (inner products of scaled vectors are SCS)."""
        return v / (v.norm(dim=-1, keepdim=True) + self.smooth_l)

    def similarity(self, q: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
        return smooth_cosine(q, d, self.smooth_l)


@torch.no_grad()
def encode_documents(
    model: DualEncoder, seqs: Iterable[np.ndarray], device: torch.device | str = "cpu", batch_size: int = 256
) -> np.ndarray:
    """Scaled document vectors (float32 [n, dim]) of id sequences, in order."""
    model.eval()
    device = torch.device(device)
    out: list[np.ndarray] = []
    batch: list[np.ndarray] = []

    def flush() -> None:
        ids, lengths = pad_batch(batch)
        v = model.scale(model.encode_doc(torch.from_numpy(ids).to(device), torch.from_numpy(lengths).to(device)))
        out.append(v.cpu().numpy().astype(np.float32))

    for s in seqs:
        batch.append(s)
        if len(batch) >= batch_size:
            flush()
            batch = []
    if batch:
        flush()
    return np.concatenate(out) if out else np.zeros((0, model.dim), dtype=np.float32)


@torch.no_grad()
def dual_dev_scores(model: DualEncoder, data: RankingData, device: torch.device) -> list[np.ndarray]:
    """SCS of every dev topic's candidates (empty array for a topic in a language without encoder)."""
    model.eval()
    if not data.dev:
        return []
    docs = np.unique(np.concatenate(data.dev_candidates))
    where = {int(d): i for i, d in enumerate(docs)}
    ids, lengths = to_batch([data.pool.terms[i] for i in docs], device)
    dv = model.encode_doc(ids, lengths)
    out: list[np.ndarray] = []
    for t, cands in zip(data.dev, data.dev_candidates, strict=True):
        if t.lang not in model.query_langs:
            out.append(np.zeros(0))
            continue
        qi, ql = to_batch([t.terms], device)
        q = model.encode_query(t.lang, qi, ql)
        d = dv[torch.as_tensor([where[int(c)] for c in cands], device=device)]
        out.append(model.similarity(q.expand(len(d), -1), d).cpu().numpy())
    return out


def _train_one(
    data: RankingData,
    word_vectors: Mapping[str, np.ndarray],
    config: DualConfig,
    thresholds: tuple[float, float],
    device: torch.device,
    progress: bool,
    epochs: int,
) -> TrainResult:
    from tqdm import tqdm

    torch.manual_seed(config.seed)
    langs = [lang for lang in data.languages if lang in word_vectors]
    model = DualEncoder(word_vectors, langs, smooth_l=config.smooth_l, linear=config.linear).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=config.lr)
    rng = np.random.default_rng(config.seed)
    usable = np.asarray([i for i, t in enumerate(data.train) if t.lang in langs], dtype=np.int64)
    result = TrainResult(model)
    stopper = EarlyStopping(model, config.patience)
    for epoch in range(1, epochs + 1):
        model.train()
        rows = sample_pointwise(data, rng, negatives=config.negatives)
        rows = rows[np.isin(rows[:, 0], usable)]
        if len(rows) == 0:
            raise ValueError("no training examples for the dual encoder")
        batches: list[np.ndarray] = []
        for lang in langs:
            sel = rows[[data.train[int(t)].lang == lang for t in rows[:, 0]]]
            sel = sel[rng.permutation(len(sel))]
            batches.extend(sel[s : s + config.batch_size] for s in range(0, len(sel), config.batch_size))
        total = 0.0
        desc = f"dual {thresholds} epoch {epoch}"
        for b in tqdm(rng.permutation(len(batches)), desc=desc, unit="batch", leave=False, disable=not progress):
            batch = batches[int(b)]
            lang = data.train[int(batch[0, 0])].lang
            qi, ql = to_batch([data.train[int(t)].terms for t in batch[:, 0]], device)
            di, dl = to_batch([data.pool.terms[int(d)] for d in batch[:, 1]], device)
            s = model.similarity(model.encode_query(lang, qi, ql), model.encode_doc(di, dl))
            loss = sosl_loss(s, torch.as_tensor(batch[:, 2], device=device), thresholds)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss.detach()) * len(batch)
        train_loss = total / len(rows)
        dev = dev_ndcg(dual_dev_scores(model, data, device), data)
        log.info("dual %s epoch %d: loss %.4f, dev ndcg %.4f", thresholds, epoch, train_loss, dev["ndcg"])
        if stopper.update(result, epoch, train_loss, dev):
            break
    stopper.restore()
    return result


@dataclass
class DualResult(TrainResult):
    thresholds: tuple[float, float] = (0.0, 0.5)
    grid: list[dict[str, Any]] = field(default_factory=list)


def train_dual(
    data: RankingData,
    word_vectors: Mapping[str, np.ndarray],
    config: DualConfig,
    *,
    device: torch.device | str = "cpu",
    progress: bool = True,
) -> DualResult:
    """Grid-search the SOSL thresholds, then train the chosen pair fully.

    Each pair of ``config.thresholds_grid`` gets a screening run of ``grid_epochs`` epochs (fresh model,
    same seed); the pair with the best dev NDCG is trained for ``epochs`` epochs with early stopping
    (a single-pair grid skips the screening).
    """
    if not config.thresholds_grid:
        raise ValueError("thresholds_grid is empty")
    device = torch.device(device)
    start = time.perf_counter()
    grid: list[dict[str, Any]] = []
    grid_pairs = [(float(a), float(b)) for a, b in config.thresholds_grid]
    chosen = grid_pairs[0]
    if len(grid_pairs) > 1:
        best = -np.inf
        for th in grid_pairs:
            res = _train_one(data, word_vectors, config, th, device, progress, min(config.grid_epochs, config.epochs))
            grid.append({"thresholds": list(th), "best_epoch": res.best_epoch, **res.best_dev})
            cur = res.best_dev.get("ndcg", float("nan"))
            if not np.isnan(cur) and cur > best:
                best, chosen = cur, th
    res = _train_one(data, word_vectors, config, chosen, device, progress, config.epochs)
    return DualResult(res.model, res.history, res.best_epoch, res.best_dev, time.perf_counter() - start, chosen, grid)
