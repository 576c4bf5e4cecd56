"""Kernel pooling over the query-document similarity of word vectors (issue 33 item 4; K-NRM, Xiong et al. 2017,
with the index's own frozen word vectors): features of the first documents that a learned ranker reads.

For each language a query reaches, its image there (:class:`service.passages.lm.QueryImage`: the query through the
translation tables, its own language untranslated) gives query terms ``q`` with weights ``p(q)`` (its
:data:`QUERY_TERMS` most probable, weights renormalised). Each term ``t`` of a document in that language (all of its
text, counted ``c(t)``: the passage index's postings) is compared with each query term: similarity 1 for the same
term, else the cosine of their word vectors (:class:`service.text.word_vectors.WordVectors`; 0 where either has
none). A kernel ``k`` (mean ``mu``, width ``sigma``, :data:`KERNELS`) turns similarities into a soft count,

    soft_k(q, d) = sum_t c(t) exp(-(sim(q, t) - mu)^2 / (2 sigma^2)),

and a document's feature ``k`` is ``sum_q p(q) log(1 + SCALE * soft_k(q, d) / len(d))`` (``len(d)`` its terms in
that language: a density, so that a long description does not win by length), the largest over the languages.
The first kernel (``mu`` 1, K-NRM's width 1e-3: computed as the indicator of the same term) counts exact matches;
the others, matches of similar words: what BM25 and the passages cannot see. Bilingual through the tables: a German
query meets an English document as its English image, compared in the English vectors' space.

The similarities and the sums are compiled loops (numba, cached on disk, warmed at a server's start-up:
service/startup.py ``KERNEL_MODULES``), summed in the order they are written: the numpy products with BLAS they
replaced (issue 63) give the same features to float32's precision (tests/service/test_kernel_pooling.py), not the same
bits (a BLAS product's order of summation is its own, by CPU).
"""

from __future__ import annotations

import heapq
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
from numba import njit

from service.passages.segments import SegmentedPassageIndex, term_counts
from service.text.analysis import SUPPORTED_LANGS

if TYPE_CHECKING:
    from service.passages.arrays import PassageArrays
    from service.passages.lm import QueryImage
    from service.text.word_vectors import WordVectors

KERNELS: tuple[tuple[float, float], ...] = ((1.0, 1e-3), (0.9, 0.1), (0.7, 0.1), (0.5, 0.1), (0.3, 0.1))
"""(mu, sigma) of each kernel: exact matches, then similar words at decreasing similarity."""

MUS = np.array([mu for mu, _ in KERNELS[1:]], dtype=np.float32)
SLOPES = np.array([-0.5 / (sigma * sigma) for _, sigma in KERNELS[1:]], dtype=np.float32)
"""The soft kernels' means and ``-1 / (2 sigma^2)`` (float32, as the features are computed)."""

KERNEL_FEATURES: tuple[str, ...] = tuple("kernel_exact" if mu == 1.0 else f"kernel_{mu:g}" for mu, _ in KERNELS)
"""Their names among the ranker's features (service/ranker.py)."""

def reads_kernels(features: Collection[str]) -> bool:
    """Does a ranker of these features read the kernel features (and so need the index's word vectors)?"""
    return bool(set(features) & set(KERNEL_FEATURES))


QUERY_TERMS = 48
"""The most probable terms of a query's image that are compared."""

SCALE = 1000.0  # soft counts per thousand terms of the document


class KernelPooling:
    """The kernel features of documents of one passage index (plain or segmented) against query images, with the
    word vectors of its terms (each segment's vocabulary mapped to vector rows once, at its first use)."""

    def __init__(self, passages: PassageArrays | SegmentedPassageIndex, vectors: WordVectors) -> None:
        self.passages, self.vectors = passages, vectors
        self._maps: dict[int, tuple[npt.NDArray[np.int64], npt.NDArray[np.int8]]] = {}

    def _map(self, part: PassageArrays) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int8]]:
        """The segment's joint term ids -> vector rows (-1: none) and languages (index in SUPPORTED_LANGS)."""
        got = self._maps.get(id(part))
        if got is None:
            raw, off = bytes(part.vocab.data), np.asarray(part.vocab.offsets).tolist()
            keys = [raw[a:b].decode("utf-8") for a, b in zip(off[:-1], off[1:], strict=True)]
            code = {lang: i for i, lang in enumerate(SUPPORTED_LANGS)}
            langs = np.array([code[k.split("\0", 1)[0]] for k in keys], dtype=np.int8)
            got = self._maps[id(part)] = (self.vectors.rows(keys), langs)
        return got

    def features(self, images: Mapping[str, QueryImage], rows: npt.ArrayLike) -> np.ndarray:
        """The :data:`KERNEL_FEATURES` of ``rows`` (one row each; 0 for a document with no text in a language the
        query reaches). Cost: the distinct terms of the documents against the query's terms, their similarities and
        each document's sums in compiled loops (no BLAS call: on a busy 2-core machine its threads made the numpy
        products 80-340 ms a search, the loops 7-11 ms), one exponential per kernel (numpy's, vectorised): ~7 ms of
        CPU for 20 long patents (27,000 distinct terms) and a claim's terms."""
        r = np.asarray(rows, dtype=np.int64).reshape(-1)
        out = np.zeros((len(r), len(KERNELS)))
        if not len(r) or not images:
            return out
        if isinstance(self.passages, SegmentedPassageIndex):
            seg, local = self.passages.locate(r)
            parts = [(self.passages.parts[int(s)], np.flatnonzero(seg == s)) for s in np.unique(seg)]
        else:
            local, parts = r, [(self.passages, np.arange(len(r)))]
        for part, at in parts:
            out[at] = self._part_features(part, images, local[at])
        return out

    def _part_features(self, part: PassageArrays, images: Mapping[str, QueryImage], rows: np.ndarray) -> np.ndarray:
        vec_row, term_lang = self._map(part)
        doc_of, all_ids, all_counts = term_counts(part, rows)
        best = np.zeros((len(rows), len(KERNELS)))
        for lang, image in images.items():
            phi = self._language(part, lang, image, vec_row, term_lang, doc_of, all_ids, all_counts, len(rows))
            if phi is not None:
                best = np.maximum(best, phi)
        return best

    def _language(self, part: PassageArrays, lang: str, image: QueryImage, vec_row: np.ndarray,
                  term_lang: np.ndarray, doc_of: np.ndarray, ids: np.ndarray, counts: np.ndarray,
                  n: int) -> np.ndarray | None:
        sel = term_lang[ids] == SUPPORTED_LANGS.index(lang)
        if not sel.any():
            return None
        d, t, c = doc_of[sel], ids[sel], counts[sel]
        terms = heapq.nsmallest(QUERY_TERMS, image.probs.items(), key=lambda kv: (-kv[1], kv[0]))
        p = np.array([w for _, w in terms])
        p = p / p.sum()
        q_id = np.array([part.vocab.lookup(lang, term) for term, _ in terms], dtype=np.int64)
        q_row = self.vectors.rows([f"{lang}\0{term}" for term, _ in terms])
        uniq, u_of = np.unique(t, return_inverse=True)
        # (distinct document terms, query terms): 1 for the same term, else the cosine of their vectors (0 without);
        # per kernel each one's value, the exact kernel the same term (its width 1e-3 makes it that)
        sim = _similarities(self.vectors.vectors, vec_row[uniq], q_row, uniq, q_id)
        values = _exponents(sim, uniq, q_id, MUS, SLOPES)
        np.exp(values[1:], out=values[1:])
        return _pooled(d.astype(np.int64), u_of.astype(np.int64), c.astype(np.float64), values, n, p, SCALE)


@njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
def _similarities(vectors: np.ndarray, u_row: np.ndarray, q_row: np.ndarray, u_id: np.ndarray,
                  q_id: np.ndarray) -> np.ndarray:
    """(distinct document terms, query terms): 1 where the term is the query term, else the dot product of their
    word vectors (unit length: the cosine; 0 where either has none) in float32, its sum vectorised over the
    dimensions (as a BLAS product sums them; compiled: no BLAS call, whose threads stalled on a busy machine)."""
    n_u, n_q, dim = len(u_row), len(q_row), vectors.shape[1]
    sim = np.zeros((n_u, n_q), dtype=np.float32)
    for u in range(n_u):
        r = u_row[u]
        for j in range(n_q):
            if u_id[u] == q_id[j]:
                sim[u, j] = np.float32(1.0)
            elif r >= 0 and q_row[j] >= 0:
                qr = q_row[j]
                acc = np.float32(0.0)
                for k in range(dim):
                    acc += vectors[r, k] * vectors[qr, k]
                sim[u, j] = acc
    return sim


@njit(cache=True, nogil=True)
def _exponents(sim: np.ndarray, u_id: np.ndarray, q_id: np.ndarray, mus: np.ndarray,
               slopes: np.ndarray) -> np.ndarray:
    """(kernels, distinct document terms, query terms): the exact kernel's value (1 for the same term, else 0) and
    each soft kernel's exponent ``(sim - mu)^2 * slope``, in float32 (the caller takes their exponential, over the
    soft kernels' contiguous block). Written kernel by kernel in the array's order: half the time of the (term,
    kernel, query term) layout it replaced, the same values (issue 63)."""
    n_u, n_q, n_k = sim.shape[0], sim.shape[1], len(mus)
    out = np.empty((n_k + 1, n_u, n_q), dtype=np.float32)
    for u in range(n_u):
        for j in range(n_q):
            out[0, u, j] = np.float32(1.0) if u_id[u] == q_id[j] else np.float32(0.0)
    for k in range(n_k):
        mu, slope = mus[k], slopes[k]
        for u in range(n_u):
            for j in range(n_q):
                x = sim[u, j] - mu
                out[k + 1, u, j] = (x * x) * slope
    return out


@njit(cache=True, nogil=True)
def _pooled(doc_of: np.ndarray, u_of: np.ndarray, counts: np.ndarray, values: np.ndarray, n: int, p: np.ndarray,
            scale: float) -> np.ndarray:
    """Each document's kernel features: its terms' soft counts (each entry's count times its distinct term's
    ``values[:, u]``, (kernels, query terms)), summed per document in float64 over its entries in order, over its
    length (the sum of its counts), ``sum_q p(q) log(1 + scale * soft / len)`` per kernel."""
    n_k, n_q = values.shape[0], values.shape[2]
    soft = np.zeros((n, n_k, n_q))
    doc_len = np.zeros(n)
    for e in range(len(doc_of)):
        d, c, u = doc_of[e], counts[e], u_of[e]
        doc_len[d] += c
        for k in range(n_k):
            for j in range(n_q):
                soft[d, k, j] += c * values[k, u, j]
    out = np.zeros((n, n_k))
    for d in range(n):
        length = doc_len[d] if doc_len[d] > 0 else 1.0
        for k in range(n_k):
            total = 0.0
            for j in range(n_q):
                total += p[j] * np.log1p(scale * soft[d, k, j] / length)
            out[d, k] = total
    return out


_warm = False


def warm() -> None:
    """Compile (or load from numba's cache) the kernel features' loops for the arrays a search gives them, so that a
    process's first search does not wait for the compiler (service/startup.py ``KERNEL_MODULES``). Once per
    process."""
    global _warm
    if _warm:
        return
    ids = np.zeros(1, dtype=np.int64)
    values = _exponents(_similarities(np.ones((1, 2), dtype=np.float32), ids, ids, ids, ids), ids, ids, MUS, SLOPES)
    _pooled(ids, ids, np.ones(1), values, 1, np.ones(1), SCALE)
    _warm = True


def kernel_pooling(passages: Any, vectors: WordVectors | None) -> KernelPooling | None:
    """The kernel features of an index's passages (None without word vectors or passages)."""
    return KernelPooling(passages, vectors) if passages is not None and vectors is not None else None


__all__ = ["KERNELS", "KERNEL_FEATURES", "QUERY_TERMS", "KernelPooling", "kernel_pooling", "reads_kernels",
           "warm"]
