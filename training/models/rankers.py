"""Neural rankers over text and classification-code embeddings (the meta-text embeddings paper).

- :class:`CNNEncoder`: fixed embeddings -> convolution of window ``h`` -> tanh -> average pooling
  over the valid positions. Text: window 4 over word2vec vectors; meta: window 1 over DeepWalk code
  vectors (order-free). Sequences are right-padded; the input is ``ids`` [batch, length] and
  ``lengths`` [batch]. A sequence shorter than the window (or empty) gives one position over its
  zero-padded window, so every input has an output.
- :class:`Ranker` (``kind`` = ``text`` | ``meta`` | ``joint``): per-language query text encoders (the
  paper's cross-lingual setting has separate query and document encoders; our queries are en/de/fr and
  the document side is English), one English document text encoder, query and document meta
  encoders, and an MLP ``S = tanh(O relu(U [c_q; c_d; c_q_meta; c_d_meta]))`` over the parts the kind
  uses (``interactions=True``, the default, adds ``c_q * c_d`` and ``|c_q - c_d|`` per part: on our
  data the paper's plain concatenation stayed near random on dev, see ``RankerConfig``; English
  queries share the document encoder, ``share_en_encoder``). ``stacked`` is not a module: a text-only
  and a meta-only ranker combined linearly, ``w_text * S_text + w_meta * S_meta``, the weight
  grid-searched on dev (:func:`fit_stacked`).
- :func:`train_ranker`: pairwise hinge ``max(0, 1 - (S(q, d+) - S(q, d-)))`` over
  :func:`training.models.pairs.sample_pairs` (re-sampled each epoch), Adam, embeddings fixed,
  early stopping on dev NDCG (best epoch kept), fixed seeds, tqdm bars.

torch is imported here at module level: import this module only from training code.
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from service.retrieval.encoders import pad_batch
from training.models.pairs import RankingData, ndcg, sample_pairs

log = logging.getLogger(__name__)

KINDS = ("text", "meta", "joint")
_EMPTY = np.zeros(0, dtype=np.int64)


class CNNEncoder(nn.Module):
    """Convolution (window ``h``, ``filters`` maps) over embeddings, tanh, average pooling over valid positions."""

    def __init__(
        self,
        embeddings: np.ndarray | torch.Tensor,
        *,
        filters: int,
        window: int,
        trainable: bool = False,
    ) -> None:
        super().__init__()
        if window < 1 or filters < 1:
            raise ValueError("window and filters must be >= 1")
        weight = torch.as_tensor(np.asarray(embeddings, dtype=np.float32))
        self.embedding = nn.Embedding.from_pretrained(weight, freeze=not trainable, padding_idx=0)
        self.window = window
        self.conv = nn.Conv1d(weight.shape[1], filters, window)

    @property
    def dim(self) -> int:
        return int(self.conv.out_channels)

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        x = self.embedding(ids)  # [B, T, k]
        pos = torch.arange(ids.shape[1], device=ids.device)
        mask = (pos.unsqueeze(0) < lengths.unsqueeze(1)).to(x.dtype)
        x = (x * mask.unsqueeze(-1)).transpose(1, 2)  # [B, k, T]
        x = F.pad(x, (0, self.window))  # [B, k, T + h]: every input has >= 1 window
        p = torch.tanh(self.conv(x))  # [B, m, T + 1]
        n_valid = torch.clamp(lengths - self.window + 1, min=1)
        pos2 = torch.arange(p.shape[2], device=ids.device)
        vmask = (pos2.unsqueeze(0) < n_valid.unsqueeze(1)).to(p.dtype)
        return (p * vmask.unsqueeze(1)).sum(-1) / n_valid.unsqueeze(1).to(p.dtype)


class MLPScorer(nn.Module):
    """``tanh(O relu(U x))`` with dropout on the hidden layer; output in (-1, 1), shape [batch]."""

    def __init__(self, in_dim: int, hidden: int, dropout: float = 0.3) -> None:
        super().__init__()
        self.hidden = nn.Linear(in_dim, hidden)
        self.out = nn.Linear(hidden, 1)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.out(self.drop(torch.relu(self.hidden(x))))).squeeze(-1)


@dataclass
class RankerConfig:
    """Hyper-parameters of one ranker and its training."""

    text_filters: int = 100
    text_window: int = 4
    meta_filters: int = 30
    meta_window: int = 1
    hidden: int = 256
    dropout: float = 0.3
    lr: float = 1e-3
    batch_size: int = 64
    epochs: int = 8
    patience: int = 3
    interactions: bool = True  # add q*d and |q-d| of each part to the MLP input (False: the paper's [c_q; c_d])
    share_en_encoder: bool = True  # English queries use the document text encoder (same language, same space)
    negatives: int = 4
    max_rel1_pairs: int = 2
    seed: int = 13

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Parts:
    """Encoded query or document side: the text and/or meta vectors the ranker uses."""

    text: torch.Tensor | None = None
    meta: torch.Tensor | None = None


class Ranker(nn.Module):
    """Text-only, meta-only or joint (text+meta) ranker (see the module docstring)."""

    def __init__(
        self,
        kind: str,
        word_vectors: Mapping[str, np.ndarray],
        code_vectors: np.ndarray | None,
        config: RankerConfig,
        query_langs: Sequence[str] = ("en",),
    ) -> None:
        super().__init__()
        if kind not in KINDS:
            raise ValueError(f"unknown ranker kind {kind!r}; choose one of {', '.join(KINDS)}")
        self.kind = kind
        self.config = config
        self.uses_text = kind in ("text", "joint")
        self.uses_meta = kind in ("meta", "joint")
        in_dim = 0
        self.query_text = nn.ModuleDict()
        if self.uses_text:
            if "en" not in word_vectors:
                raise ValueError("the document side needs English word vectors")
            missing = [lang for lang in query_langs if lang not in word_vectors]
            if missing:
                raise ValueError(f"no word vectors for query languages {missing}")
            self.doc_text = CNNEncoder(word_vectors["en"], filters=config.text_filters, window=config.text_window)
            for lang in query_langs:
                if lang == "en" and config.share_en_encoder:
                    self.query_text[lang] = self.doc_text
                else:
                    self.query_text[lang] = CNNEncoder(
                        word_vectors[lang], filters=config.text_filters, window=config.text_window
                    )
            in_dim += (4 if config.interactions else 2) * config.text_filters
        if self.uses_meta:
            if code_vectors is None:
                raise ValueError(f"a {kind} ranker needs code vectors")
            self.query_meta = CNNEncoder(code_vectors, filters=config.meta_filters, window=config.meta_window)
            self.doc_meta = CNNEncoder(code_vectors, filters=config.meta_filters, window=config.meta_window)
            in_dim += (4 if config.interactions else 2) * config.meta_filters
        self.mlp = MLPScorer(in_dim, config.hidden, config.dropout)

    @property
    def query_langs(self) -> list[str]:
        return list(self.query_text.keys())

    def encode_query(
        self, lang: str, ids: torch.Tensor, lengths: torch.Tensor, code_ids: torch.Tensor, code_lengths: torch.Tensor
    ) -> Parts:
        parts = Parts()
        if self.uses_text:
            if lang not in self.query_text:
                raise ValueError(f"no {lang} query encoder; this ranker has {self.query_langs}")
            parts.text = self.query_text[lang](ids, lengths)
        if self.uses_meta:
            parts.meta = self.query_meta(code_ids, code_lengths)
        return parts

    def encode_doc(
        self, ids: torch.Tensor, lengths: torch.Tensor, code_ids: torch.Tensor, code_lengths: torch.Tensor
    ) -> Parts:
        parts = Parts()
        if self.uses_text:
            parts.text = self.doc_text(ids, lengths)
        if self.uses_meta:
            parts.meta = self.doc_meta(code_ids, code_lengths)
        return parts

    def score(self, q: Parts, d: Parts) -> torch.Tensor:
        """MLP over ``[c_q; c_d; c_q_meta; c_d_meta]`` (the parts this kind uses), [batch]."""
        return self.mlp(mlp_features(q.text, d.text, q.meta, d.meta, interactions=self.config.interactions))


def mlp_features(
    q_text: torch.Tensor | None,
    d_text: torch.Tensor | None,
    q_meta: torch.Tensor | None,
    d_meta: torch.Tensor | None,
    *,
    interactions: bool,
) -> torch.Tensor:
    """The MLP input: ``[c_q; c_d; c_q_meta; c_d_meta]`` (parts present), then with ``interactions``
    ``[c_q * c_d; |c_q - c_d|; c_q_meta * c_d_meta; |c_q_meta - c_d_meta|]``."""
    feats = [t for t in (q_text, d_text, q_meta, d_meta) if t is not None]
    if interactions:
        for q, d in ((q_text, d_text), (q_meta, d_meta)):
            if q is not None and d is not None:
                feats += [q * d, (q - d).abs()]
    return torch.cat(feats, dim=-1)


def hinge_loss(better: torch.Tensor, worse: torch.Tensor, margin: float = 1.0) -> torch.Tensor:
    """Pairwise hinge ``mean(max(0, margin - (S+ - S-)))``."""
    return torch.clamp(margin - (better - worse), min=0).mean()


# --------------------------------------------------------------------------------------------------
# batching helpers
# --------------------------------------------------------------------------------------------------


def to_batch(seqs: Sequence[np.ndarray], device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    ids, lengths = pad_batch(seqs)
    return torch.from_numpy(ids).to(device), torch.from_numpy(lengths).to(device)


def encode_pool_docs(
    model: Ranker, data: RankingData, idx: np.ndarray, device: torch.device, batch_size: int = 32
) -> Parts:
    """Document parts of pool documents ``idx``, in order.

    Documents are encoded in chunks of similar length (sorted by length) so that short documents are
    not padded to the longest one; the result is put back in ``idx`` order.
    """
    idx = np.asarray(idx, dtype=np.int64)
    lengths = np.asarray([len(data.pool.terms[i]) for i in idx])
    order = np.argsort(lengths, kind="stable")
    texts: list[torch.Tensor] = []
    metas: list[torch.Tensor] = []
    for s in range(0, len(idx), batch_size):
        chunk = idx[order[s : s + batch_size]]
        ids, lens = to_batch([data.pool.terms[i] for i in chunk] if model.uses_text else [_EMPTY] * len(chunk), device)
        cids, clens = to_batch(
            [data.pool.codes[i] for i in chunk] if model.uses_meta else [_EMPTY] * len(chunk), device
        )
        p = model.encode_doc(ids, lens, cids, clens)
        if p.text is not None:
            texts.append(p.text)
        if p.meta is not None:
            metas.append(p.meta)
    inverse = torch.as_tensor(np.argsort(order, kind="stable"), device=device)
    return Parts(torch.cat(texts)[inverse] if texts else None, torch.cat(metas)[inverse] if metas else None)


def _take(p: Parts, idx: torch.Tensor) -> Parts:
    return Parts(p.text[idx] if p.text is not None else None, p.meta[idx] if p.meta is not None else None)


def encode_topics(model: Ranker, topics: Sequence[Any], device: torch.device) -> Parts:
    """Query parts of topics that share one language (``topics[i].lang``)."""
    langs = {t.lang for t in topics}
    if len(langs) != 1:
        raise ValueError(f"encode_topics needs topics of one language, got {sorted(langs)}")
    ids, lengths = to_batch([t.terms if model.uses_text else _EMPTY for t in topics], device)
    cids, clens = to_batch([t.codes if model.uses_meta else _EMPTY for t in topics], device)
    return model.encode_query(langs.pop(), ids, lengths, cids, clens)


@torch.no_grad()
def dev_scores(model: Ranker, data: RankingData, device: torch.device) -> list[np.ndarray]:
    """Scores of every dev topic's candidates (in ``data.dev_candidates`` order)."""
    model.eval()
    if not data.dev:
        return []
    all_docs = np.unique(np.concatenate(data.dev_candidates))
    where = {int(d): i for i, d in enumerate(all_docs)}
    dparts = encode_pool_docs(model, data, all_docs, device)
    out: list[np.ndarray] = [np.zeros(0)] * len(data.dev)
    by_lang: dict[str, list[int]] = {}
    for i, t in enumerate(data.dev):
        if t.lang in model.query_langs or not model.uses_text:
            by_lang.setdefault(t.lang, []).append(i)
    for _lang, idxs in by_lang.items():
        qparts = encode_topics(model, [data.dev[i] for i in idxs], device)
        for j, i in enumerate(idxs):
            cands = torch.as_tensor([where[int(c)] for c in data.dev_candidates[i]], device=device)
            n = len(cands)
            q = Parts(
                qparts.text[j : j + 1].expand(n, -1) if qparts.text is not None else None,
                qparts.meta[j : j + 1].expand(n, -1) if qparts.meta is not None else None,
            )
            out[i] = model.score(q, _take(dparts, cands)).cpu().numpy()
    return out


def dev_ndcg(scores: Sequence[np.ndarray], data: RankingData, langs: Sequence[str] | None = None) -> dict[str, float]:
    """Mean dev NDCG overall and per query language (topics without scores are skipped)."""
    per: dict[str, list[float]] = {}
    for s, rels, t in zip(scores, data.dev_rels, data.dev, strict=True):
        if len(s) == 0 or (langs is not None and t.lang not in langs):
            continue
        per.setdefault(t.lang, []).append(ndcg(s, rels))
    out = {f"ndcg_{lang}": float(np.mean(v)) for lang, v in sorted(per.items())}
    allv = [x for v in per.values() for x in v]
    out["ndcg"] = float(np.mean(allv)) if allv else float("nan")
    out["topics"] = float(len(allv))
    return out


@dataclass
class TrainResult:
    """A trained model with its per-epoch history and the best dev NDCG."""

    model: Any
    history: list[dict[str, float]] = field(default_factory=list)
    best_epoch: int = 0
    best_dev: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0


class EarlyStopping:
    """Early stopping on dev NDCG (or -train loss when dev has no judged topic), keeping the best epoch."""

    def __init__(self, model: nn.Module, patience: int) -> None:
        self.model = model
        self.patience = patience
        self.best = -1.0
        self.bad = 0
        self.state = copy.deepcopy(model.state_dict())

    def update(self, result: TrainResult, epoch: int, train_loss: float, dev: dict[str, float]) -> bool:
        """Record the epoch in ``result``; True when training should stop."""
        result.history.append({"epoch": float(epoch), "train_loss": train_loss, **dev})
        score = dev["ndcg"] if not np.isnan(dev["ndcg"]) else -train_loss
        if score > self.best:
            self.best, self.bad = score, 0
            self.state = copy.deepcopy(self.model.state_dict())
            result.best_epoch, result.best_dev = epoch, dev
            return False
        self.bad += 1
        return self.bad >= self.patience

    def restore(self) -> None:
        """Load the best epoch's weights and switch to eval mode."""
        self.model.load_state_dict(self.state)
        self.model.eval()


def _topic_batches(
    rows: np.ndarray, langs: Sequence[str], batch_size: int, rng: np.random.Generator
) -> list[np.ndarray]:
    """Batches of one query language holding all rows of consecutive topics (topics in random order).

    Keeping a topic's rows together encodes its query and relevant documents once per batch.
    """
    by_topic: dict[int, list[int]] = {}
    for i, t in enumerate(rows[:, 0].tolist()):
        by_topic.setdefault(t, []).append(i)
    batches: list[np.ndarray] = []
    for lang in sorted(set(langs)):
        topics = [t for t in by_topic if langs[t] == lang]
        cur: list[int] = []
        for j in rng.permutation(len(topics)):
            cur.extend(by_topic[topics[int(j)]])
            if len(cur) >= batch_size:
                batches.append(rows[cur])
                cur = []
        if cur:
            batches.append(rows[cur])
    return batches


def train_ranker(
    kind: str,
    data: RankingData,
    word_vectors: Mapping[str, np.ndarray],
    code_vectors: np.ndarray | None,
    config: RankerConfig,
    *,
    device: torch.device | str = "cpu",
    progress: bool = True,
) -> TrainResult:
    """Train one ranker with the pairwise hinge loss and early stopping on dev NDCG (see the module doc)."""
    from tqdm import tqdm

    device = torch.device(device)
    torch.manual_seed(config.seed)
    langs = [lang for lang in data.languages if lang in word_vectors] if kind != "meta" else ["en"]
    model = Ranker(kind, word_vectors, code_vectors, config, query_langs=langs).to(device)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.Adam(params, lr=config.lr)
    rng = np.random.default_rng(config.seed)
    start = time.perf_counter()
    result = TrainResult(model)
    stopper = EarlyStopping(model, config.patience)
    usable = [i for i, t in enumerate(data.train) if kind == "meta" or t.lang in langs]
    for epoch in range(1, config.epochs + 1):
        model.train()
        pairs = sample_pairs(data, rng, negatives=config.negatives, max_rel1_pairs=config.max_rel1_pairs)
        pairs = pairs[np.isin(pairs[:, 0], usable)]
        if len(pairs) == 0:
            raise ValueError("no training pairs: the training topics have no judged documents")
        batches = _topic_batches(pairs, [data.train[i].lang for i in range(len(data.train))], config.batch_size, rng)
        order = rng.permutation(len(batches))
        total = 0.0
        bar = tqdm(order, desc=f"{kind} ranker epoch {epoch}", unit="batch", leave=False, disable=not progress)
        for b in bar:
            batch = batches[int(b)]
            topics = np.unique(batch[:, 0])
            docs = np.unique(batch[:, 1:])
            qparts = encode_topics(model, [data.train[int(t)] for t in topics], device)
            dparts = encode_pool_docs(model, data, docs, device)
            ti = torch.as_tensor(np.searchsorted(topics, batch[:, 0]), device=device)
            bi = torch.as_tensor(np.searchsorted(docs, batch[:, 1]), device=device)
            wi = torch.as_tensor(np.searchsorted(docs, batch[:, 2]), device=device)
            q = _take(qparts, ti)
            loss = hinge_loss(model.score(q, _take(dparts, bi)), model.score(q, _take(dparts, wi)))
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss.detach()) * len(batch)
        train_loss = total / len(pairs)
        dev = dev_ndcg(dev_scores(model, data, device), data)
        log.info("%s ranker epoch %d: loss %.4f, dev ndcg %.4f", kind, epoch, train_loss, dev["ndcg"])
        if stopper.update(result, epoch, train_loss, dev):
            break
    stopper.restore()
    result.seconds = time.perf_counter() - start
    return result


def fit_stacked(
    text_scores: Sequence[np.ndarray], meta_scores: Sequence[np.ndarray], data: RankingData, step: float = 0.05
) -> tuple[float, float, float]:
    """Grid-search ``w`` in [0, 1]: stacked = (1 - w) * text + w * meta; returns ``(w_text, w_meta, dev ndcg)``."""
    best = (1.0, 0.0, -1.0)
    for w in np.round(np.arange(0.0, 1.0 + 1e-9, step), 6):
        scores = [(1 - w) * t + w * m if len(t) else t for t, m in zip(text_scores, meta_scores, strict=True)]
        val = dev_ndcg(scores, data)["ndcg"]
        if not np.isnan(val) and val > best[2] + 1e-12:
            best = (float(1 - w), float(w), float(val))
    return best
