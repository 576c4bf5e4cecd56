"""Maps of the pretrained encoder's vectors fine-tuned on patents with smooth learning (seed 004: Liu et al.,
"Cross-lingual document retrieval with smooth learning").

What is learned: low-rank residual maps ``a(x) = x + U (V^T x)`` (``U, V``: ``[dim, rank]``, ``U`` starts at zero, so
an untrained map is the frozen encoder), L2-normalised after, in one of three places (``sides``):

- ``query``: one map on the query vectors; the documents keep the frozen encoder's vectors;
- ``both``: one map on queries and documents alike;
- ``documents``: one map per language of the document's dense text (en, de, fr:
  :func:`service.retrieval.pretrained.document_language`) on the document vectors; the queries keep theirs, so a
  query costs what it cost before.

Either way the maps are small (``2 * dim * rank`` floats each: 98 KB at rank 32) and can ship in the repository.

Objective (the seed's, :mod:`training.models.dual`): the smooth cosine similarity ``SCS(a(q), d)`` of a query and a
document, and the smooth ordinal search loss over three ordered classes: 2 = the query's own grant (the aligned
claims and titles of the trilingual grants, across languages), 1 = another document of one of its main groups, 0 =
any other; the ``hard`` highest-scoring documents of classes 0 and 1 under the current adapter are the query's
candidates each epoch, with its own grant. The thresholds are taken from the frozen encoder's scores of the
training pairs (``thresholds="auto"``: the lower one at the 90th percentile of the negatives' SCS, the upper one at
the 25th percentile of the own grants'), so they sit where the pretrained model puts the classes. ``objective=
"infonce"`` trains the same adapter with the usual contrastive loss (softmax of cosines over the own grant and the
candidates, temperature 0.05), for comparison.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

DEFAULT_DOC_MAPS = Path(__file__).resolve().parents[1] / "encoders" / "doc-maps.npz"
"""The document maps ``priorart build`` installs by default (written by ``priorart-lab experiment adapter
--maps-out``)."""

Objective = Literal["sosl", "infonce"]
OBJECTIVES: tuple[str, ...] = ("sosl", "infonce")
SIDES: tuple[str, ...] = ("query", "both", "documents")
DOC_LANGS: tuple[str, ...] = ("en", "de", "fr")  # the ``documents`` maps, in this order


@dataclass(frozen=True)
class AdapterConfig:
    rank: int = 32
    epochs: int = 40
    lr: float = 3e-3
    weight_decay: float = 1e-3
    hard: int = 64  # candidates per query per epoch: the highest-scoring other documents
    smooth_l: float = 0.1  # SCS's smoothing constant
    thresholds: tuple[float, float] | str = "auto"
    objective: Objective = "sosl"
    sides: str = "query"  # SIDES
    doc_maps: tuple[str, ...] = DOC_LANGS  # (sides="documents") the languages whose documents are mapped; the others
    # keep the frozen vectors
    temperature: float = 0.05  # (infonce)
    batch: int = 64
    seed: int = 0


@dataclass
class AdapterPairs:
    """Training data: ``queries[i]`` (frozen query vectors, L2-normalised) belongs to document row ``own[i]`` of
    ``docs`` (the document vectors as the index holds them, L2-normalised), whose text in the query's target language
    is ``positives[i]``; ``related[i]``: rows of the documents sharing a main group with it (class 1);
    ``doc_langs``/``pos_langs``: the :data:`DOC_LANGS` index of each ``docs`` row's and each positive's text."""

    queries: np.ndarray
    positives: np.ndarray
    own: np.ndarray
    docs: np.ndarray
    related: list[np.ndarray]
    doc_langs: np.ndarray | None = None
    pos_langs: np.ndarray | None = None


@dataclass
class Maps:
    """Learned maps: ``u``, ``v`` float32 ``[maps, dim, rank]`` (one map for ``query``/``both``, one per
    :data:`DOC_LANGS` for ``documents``)."""

    sides: str
    u: np.ndarray
    v: np.ndarray

    def queries(self, q: np.ndarray) -> np.ndarray:
        return adapt(q, self.u[0], self.v[0]) if self.sides in ("query", "both") else q

    def documents(self, d: np.ndarray, langs: np.ndarray) -> np.ndarray:
        if self.sides == "query":
            return d
        if self.sides == "both":
            return adapt(d, self.u[0], self.v[0])
        out = d.copy()
        for i in range(len(self.u)):
            rows = np.flatnonzero(langs == i)
            if len(rows):
                out[rows] = adapt(d[rows], self.u[i], self.v[i])
        return out


def document_maps(maps: Maps, langs: Sequence[str], info: dict[str, Any]) -> Any:
    """The service's :class:`service.retrieval.pretrained.DocumentMaps` of ``maps`` (``sides="documents"``) for the
    languages ``langs`` (the others keep the frozen vectors)."""
    from service.retrieval.pretrained import DocumentMaps

    if maps.sides != "documents":
        raise ValueError(f"only document maps go into an index, not {maps.sides!r} maps")
    rows = [DOC_LANGS.index(lang) for lang in langs]
    return DocumentMaps(maps.u[rows], maps.v[rows], list(langs), info)


def adapt(x: np.ndarray, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``x + U (V^T x)`` row-wise, L2-normalised: :func:`service.retrieval.pretrained.low_rank_map`, which the
    installed document maps apply."""
    from service.retrieval.pretrained import low_rank_map

    return low_rank_map(x, u, v)


def auto_thresholds(pairs: AdapterPairs, smooth_l: float) -> tuple[float, float]:
    """The SOSL thresholds where the frozen encoder puts the classes (module docstring)."""
    def scs(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return (a * b).sum(-1) / ((np.linalg.norm(a, axis=-1) + smooth_l) * (np.linalg.norm(b, axis=-1) + smooth_l))

    pos = scs(pairs.queries, pairs.positives)
    rng = np.random.default_rng(0)
    idx = rng.integers(0, len(pairs.docs), size=(len(pairs.queries), 32))
    neg = scs(np.repeat(pairs.queries, 32, axis=0), pairs.docs[idx.ravel()])
    lo, hi = float(np.percentile(neg, 90)), float(np.percentile(pos, 25))
    if hi <= lo + 0.01:  # the classes overlap under the frozen model: keep a margin
        mid = (lo + hi) / 2
        lo, hi = mid - 0.02, mid + 0.02
    return lo, hi


def _langs(x: np.ndarray | None, n: int) -> np.ndarray:
    return np.zeros(n, dtype=np.int64) if x is None else np.asarray(x, dtype=np.int64)


def pairs_mrr(pairs: AdapterPairs, maps: Maps | None = None) -> float:
    """MRR of each pair's own document (its ``positives`` row standing in for its ``own`` row of ``docs``) under
    ``maps`` (None: the frozen vectors)."""
    q, docs, pos = pairs.queries, pairs.docs, pairs.positives
    if maps is not None:
        q = maps.queries(q)
        docs = maps.documents(docs, _langs(pairs.doc_langs, len(docs)))
        pos = maps.documents(pos, _langs(pairs.pos_langs, len(pos)))
    scores = q @ docs.T
    scores[np.arange(len(q)), pairs.own] = -np.inf
    own = (q * pos).sum(1)
    return float(np.mean(1.0 / (1 + (scores > own[:, None]).sum(1))))


def train_adapter(pairs: AdapterPairs, config: AdapterConfig | None = None,
                  dev: AdapterPairs | None = None) -> tuple[Maps, dict]:
    """Learn the maps of ``config.sides`` on ``pairs``; returns them and a report (thresholds, the loss per epoch).
    ``dev``: pairs of other grants scored after each epoch (:func:`pairs_mrr`); the epoch with the best dev MRR is
    returned, the untrained maps (epoch 0: the frozen encoder) included, so maps that never beat the frozen encoder
    on ``dev`` come back as zero."""
    import torch

    from training.models.dual import smooth_cosine, sosl_loss

    c = config or AdapterConfig()
    if c.objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {', '.join(OBJECTIVES)}, got {c.objective!r}")
    if c.sides not in SIDES:
        raise ValueError(f"sides must be one of {', '.join(SIDES)}, got {c.sides!r}")
    n, dim = pairs.queries.shape
    if n == 0:
        raise ValueError("no training pairs")
    th: tuple[float, float] = (auto_thresholds(pairs, c.smooth_l) if isinstance(c.thresholds, str)
                               else (float(c.thresholds[0]), float(c.thresholds[1])))
    torch.manual_seed(c.seed)
    rng = np.random.default_rng(c.seed)
    q_all = torch.as_tensor(pairs.queries, dtype=torch.float32)
    p_all = torch.as_tensor(pairs.positives, dtype=torch.float32)
    d_all = torch.as_tensor(pairs.docs, dtype=torch.float32)
    d_lang = torch.as_tensor(_langs(pairs.doc_langs, len(pairs.docs)))
    p_lang = torch.as_tensor(_langs(pairs.pos_langs, n))
    count = len(DOC_LANGS) if c.sides == "documents" else 1
    unknown = set(c.doc_maps) - set(DOC_LANGS)
    if unknown:
        raise ValueError(f"doc_maps: unknown languages {sorted(unknown)}; valid: {', '.join(DOC_LANGS)}")
    live = torch.tensor([1.0 if c.sides != "documents" or DOC_LANGS[i] in c.doc_maps else 0.0 for i in range(count)])
    u = torch.nn.Parameter(torch.zeros(count, dim, c.rank))
    v = torch.nn.Parameter(torch.randn(count, dim, c.rank) / np.sqrt(dim))
    opt = torch.optim.AdamW([u, v], lr=c.lr, weight_decay=c.weight_decay)
    hard = min(c.hard, len(pairs.docs) - 1)
    losses: list[float] = []

    def unit(x: torch.Tensor) -> torch.Tensor:
        return x / x.norm(dim=-1, keepdim=True).clamp_min(1e-6)

    def mapped(x: torch.Tensor, which: torch.Tensor | int) -> torch.Tensor:  # x [..., dim], which [...] or a map
        if isinstance(which, int):
            return x + (x @ v[which]) @ u[which].T
        out = x
        for i in range(count):  # every map on every row, each row keeping its own language's (3 small matmuls)
            if live[i]:
                out = torch.where((which == i).unsqueeze(-1), x + (x @ v[i]) @ u[i].T, out)
        return out

    def queries(x: torch.Tensor) -> torch.Tensor:  # (unnormalised: SCS reads the norm)
        return mapped(x, 0) if c.sides in ("query", "both") else x

    def documents(x: torch.Tensor, langs: torch.Tensor) -> torch.Tensor:
        if c.sides == "query":
            return x
        return unit(mapped(x, 0) if c.sides == "both" else mapped(x, langs))

    def maps() -> Maps:
        return Maps(c.sides, u.detach().numpy().astype(np.float32).copy(), v.detach().numpy().astype(np.float32).copy())

    best = (pairs_mrr(dev) if dev is not None else -1.0, 0, maps())
    dev_mrr: list[float] = [best[0]] if dev is not None else []
    for _epoch in range(c.epochs):
        with torch.no_grad():  # each query's hardest other documents under the current maps
            sims = unit(queries(q_all)) @ documents(d_all, d_lang).T
            sims[torch.arange(n), torch.as_tensor(pairs.own)] = -np.inf
            cand = torch.topk(sims, hard, dim=1).indices.numpy()
        total = 0.0
        order = rng.permutation(n)
        for s in range(0, n, c.batch):
            b = order[s:s + c.batch]
            q = queries(q_all[b])
            rows = torch.as_tensor(cand[b])
            docs = documents(d_all[rows], d_lang[rows])  # [B, hard, dim]
            pos = documents(p_all[b], p_lang[b])
            if c.objective == "sosl":
                labels = np.zeros((len(b), hard), dtype=np.int64)
                for i, row in enumerate(b):
                    labels[i] = np.isin(cand[row], pairs.related[row]).astype(np.int64)
                qq = q.unsqueeze(1).expand(-1, hard, -1)
                # each class weighs the same: the own grant's term against the mean of its candidates' (a plain
                # mean over the pairs is 1 own grant to ``hard`` others, and is lowest with every score pushed down)
                loss = (sosl_loss(smooth_cosine(q, pos, c.smooth_l), torch.full((len(b),), 2, dtype=torch.int64), th)
                        + sosl_loss(smooth_cosine(qq, docs, c.smooth_l).ravel(), torch.as_tensor(labels).ravel(), th))
            else:
                qn = unit(q)
                logits = torch.cat([(qn * pos).sum(-1, keepdim=True), torch.einsum("bd,bkd->bk", qn, docs)], 1)
                loss = torch.nn.functional.cross_entropy(logits / c.temperature,
                                                         torch.zeros(len(b), dtype=torch.int64))
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss.detach()) * len(b)
        losses.append(total / n)
        if dev is not None:
            now = maps()
            dev_mrr.append(pairs_mrr(dev, now))
            if dev_mrr[-1] > best[0]:
                best = (dev_mrr[-1], len(losses), now)
    report = {"thresholds": [float(t) for t in th], "loss": losses, "pairs": n, "documents": len(pairs.docs),
              "config": {k: (list(val) if isinstance(val, tuple) else val) for k, val in c.__dict__.items()}}
    if dev is None:
        return maps(), report
    report |= {"dev mrr": dev_mrr, "epoch": best[1], "dev pairs": len(dev.queries)}
    return best[2], report


def rank_of(queries: np.ndarray, docs: np.ndarray, truth: Sequence[int]) -> np.ndarray:
    """1-based rank of ``docs[truth[i]]`` for each query by inner product (ties count against it)."""
    scores = queries @ docs.T
    own = scores[np.arange(len(truth)), np.asarray(truth)]
    return 1 + (scores > own[:, None]).sum(1)


__all__ = ["DEFAULT_DOC_MAPS", "DOC_LANGS", "OBJECTIVES", "SIDES", "AdapterConfig", "AdapterPairs", "Maps", "adapt",
           "auto_thresholds", "document_maps", "pairs_mrr", "rank_of", "train_adapter"]
