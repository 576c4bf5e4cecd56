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

The similarities are a BLAS product of the terms' vectors in float32, in one BLAS thread (:func:`one_blas_thread`);
the kernels' values and the sums are compiled loops (numba, cached on disk, warmed at a server's start-up:
service/startup.py ``KERNEL_MODULES``), the sums in the order they are written. A document's distinct terms with no
vector that are no query term share one row (the same values). The numpy arithmetic of the first version gives the
same features to float32's precision (tests/service/test_kernel_pooling.py), not the same bits (a BLAS product's
order of summation is its own, by CPU).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
from numba import njit

from service.index.arrays import readonly
from service.passages.ranker import term_table
from service.passages.segments import term_counts
from service.text.analysis import SUPPORTED_LANGS

if TYPE_CHECKING:
    from service.passages.arrays import PassageArrays
    from service.passages.lm import QueryImage
    from service.passages.reader import PassageReader
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


def query_terms(probs: Mapping[str, float]) -> list[tuple[str, float]]:
    """The :data:`QUERY_TERMS` most probable terms of an image with their probabilities, most probable first, ties in
    term order (``sorted(probs.items(), key=(-p, term))[:QUERY_TERMS]``, sorting only the candidates: the terms at
    least as probable as the one at the cut)."""
    items = list(probs.items())
    if len(items) > QUERY_TERMS:
        ps = np.fromiter((p for _, p in items), dtype=np.float64, count=len(items))
        cut = np.partition(ps, len(ps) - QUERY_TERMS)[len(ps) - QUERY_TERMS]
        items = [kv for kv in items if kv[1] >= cut]
    return sorted(items, key=lambda kv: (-kv[1], kv[0]))[:QUERY_TERMS]

log = logging.getLogger(__name__)

SCALE = 1000.0  # soft counts per thousand terms of the document

NO_TERM = np.iinfo(np.int64).min
"""The id of the row that the terms with no vector share (no term's id: not even a query term missing from the
vocabulary, -1)."""


class KernelPooling:
    """The kernel features of documents of one passage index (a build's or a generation's) against query images, with
    the word vectors of its terms (each segment's vocabulary mapped to vector rows once, at its first use)."""

    def __init__(self, passages: PassageReader, vectors: WordVectors) -> None:
        self.passages, self.vectors = passages, vectors
        one_blas_thread()
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
        query reaches). Cost: the distinct terms of the documents against the query's terms, their similarities (a
        BLAS product), each document's sums (compiled loops), one exponential per kernel (numpy's, vectorised): 2.9
        ms a search of the load mix on the real corpus, 20 documents, up to 23,000 distinct terms a language."""
        r = np.asarray(rows, dtype=np.int64).reshape(-1)
        out = np.zeros((len(r), len(KERNELS)))
        if not len(r) or not images:
            return out
        seg, local = self.passages.locate(r)  # each row's segment (a build: one)
        for s in np.unique(seg).tolist():
            at = np.flatnonzero(seg == s)
            out[at] = self._part_features(self.passages.parts[s], images, local[at])
        return out

    def _cosines(self, rows: np.ndarray) -> np.ndarray:
        """The word vectors of ``rows`` (unit length), 0 where a row is -1 (no vector)."""
        return _gathered(self.vectors.vectors, rows)

    def _part_features(self, part: PassageArrays, images: Mapping[str, QueryImage], rows: np.ndarray) -> np.ndarray:
        vec_row, term_lang = self._map(part)
        doc_of, u_of, counts, uniq = _entries(part, rows)
        u_lang, u_row = term_lang[uniq], vec_row[uniq]
        best = np.zeros((len(rows), len(KERNELS)))
        for lang, image in images.items():
            code = SUPPORTED_LANGS.index(lang)
            if not (u_lang == code).any():
                continue
            terms = query_terms(image.probs)
            p = np.array([w for _, w in terms])
            p = p / p.sum()
            q_id = np.array(part.vocab.lookup_all(lang, [term for term, _ in terms]), dtype=np.int64)
            q_row = self.vectors.rows([f"{lang}\0{term}" for term, _ in terms])
            # the language's entries, their terms renumbered: those with a vector or that are a query term, then
            # one row that the others share (no vector, no query term: similarity 0 to every query term, the same
            # values; a quarter of a document's distinct terms); the same features, bit for bit
            entries, t_id, t_row, t_of = _language_terms(u_of, u_lang, u_row, uniq, q_id, code)
            # (terms, query terms): 1 for the same term, else the cosine of their vectors (0 without); per term each
            # soft kernel's value (the exact kernel: the query term it is, if any)
            sim = self._cosines(t_row) @ self._cosines(q_row).T
            values, exact = _exponents(sim, t_id, q_id, MUS, SLOPES)
            np.exp(values, out=values)
            phi = _pooled(doc_of[entries], t_of, counts[entries], values, exact, len(rows), p, SCALE)
            best = np.maximum(best, phi)
        return best


def _entries(part: PassageArrays, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every term entry of the ``rows`` of a segment, rows in their order: the entry's row (its index in ``rows``),
    its distinct term (an index into the last array, the distinct terms' joint ids: once for every language, each
    term being of one) and its count in the row's text (the sum of its postings). In one compiled pass with this
    thread's term table (:func:`service.passages.ranker.term_table`); above its vocabulary size,
    :func:`service.passages.segments.term_counts` and ``np.unique`` (the terms then in id order: the same features)."""
    table = term_table(len(part.vocab))
    if table is None:
        doc_of, ids, counts = term_counts(part, rows)
        uniq, u_of = np.unique(ids, return_inverse=True)
        return doc_of, u_of.astype(np.int64), counts, uniq
    return _entries_in(readonly(part.docs), rows.astype(np.int64), readonly(part.term_id), readonly(part.term_end),
                       readonly(part.post_count), table)


@njit(cache=True, nogil=True)
def _entries_in(docs: np.ndarray, rows: np.ndarray, term_id: np.ndarray, term_end: np.ndarray,
                post_count: np.ndarray, table: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_entries`' loop: a row's entries are ``docs[r, 2]`` to ``docs[r + 1, 2]``, its postings from
    ``docs[r, 3]``, an entry's those from the previous entry's ``term_end`` (0 for the first) to its own; ``table``
    (term id -> distinct term, all -1) gives each term its number at its first entry, and is all -1 again after."""
    n_e = 0
    for r in rows:
        n_e += docs[r + 1, 2] - docs[r, 2]
    doc_of = np.empty(n_e, dtype=np.int64)
    u_of = np.empty(n_e, dtype=np.int64)
    counts = np.empty(n_e, dtype=np.float64)
    uniq = np.empty(n_e, dtype=np.int64)
    n_u = 0
    i = 0
    for d in range(len(rows)):
        r = rows[d]
        base = docs[r, 3]
        prev = 0
        for e in range(docs[r, 2], docs[r + 1, 2]):
            end = term_end[e]
            total = 0
            for q in range(base + prev, base + end):
                total += post_count[q]
            prev = end
            t = term_id[e]
            u = table[t]
            if u < 0:
                u = n_u
                table[t] = u
                uniq[u] = t
                n_u += 1
            doc_of[i], u_of[i], counts[i] = d, u, total
            i += 1
    for u in range(n_u):
        table[uniq[u]] = -1
    return doc_of, u_of, counts, uniq[:n_u]


@njit(cache=True, nogil=True)
def _language_terms(u_of: np.ndarray, u_lang: np.ndarray, u_row: np.ndarray, u_id: np.ndarray, q_id: np.ndarray,
                    code: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The entries (``u_of``: each one's distinct term) of the terms of language ``code``, in their order, and those
    terms renumbered: the ids and vector rows of the terms that have a vector or are a query term, in their order,
    then one row (id :data:`NO_TERM`, no vector) for all the others; each entry's new term."""
    n_u = len(u_lang)
    slot = np.full(n_u, -1, dtype=np.int64)
    kept = 0
    shared = False
    for u in range(n_u):
        if u_lang[u] != code:
            continue
        if u_row[u] >= 0:
            slot[u] = kept
            kept += 1
            continue
        for j in range(len(q_id)):
            if q_id[j] == u_id[u]:
                slot[u] = kept
                kept += 1
                break
        if slot[u] < 0:
            shared = True
    n_t = kept + 1 if shared else kept
    t_id = np.full(n_t, NO_TERM, dtype=np.int64)
    t_row = np.full(n_t, -1, dtype=np.int64)
    for u in range(n_u):
        if slot[u] >= 0:
            t_id[slot[u]], t_row[slot[u]] = u_id[u], u_row[u]
        elif u_lang[u] == code:
            slot[u] = kept
    n_e = 0
    for e in range(len(u_of)):
        if u_lang[u_of[e]] == code:
            n_e += 1
    entries = np.empty(n_e, dtype=np.int64)
    t_of = np.empty(n_e, dtype=np.int64)
    i = 0
    for e in range(len(u_of)):
        u = u_of[e]
        if u_lang[u] == code:
            entries[i], t_of[i] = e, slot[u]
            i += 1
    return entries, t_id, t_row, t_of


@njit(cache=True, nogil=True)
def _exponents(sim: np.ndarray, u_id: np.ndarray, q_id: np.ndarray, mus: np.ndarray,
               slopes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct document terms, soft kernels, query terms): each soft kernel's exponent ``(sim - mu)^2 * slope``, in
    float32 (the caller takes their exponential, over the whole array), a term's values together (its entries add
    them to their documents); and each term's place among the query terms (-1: none; the exact kernel's value is 1
    there, else 0; ``sim`` is set to 1 there, in place). The pooling reads a term's values in one place: half the
    time it took with the (kernel, term, query term) layout this replaced (1.24 -> 0.57 ms a search of the load mix,
    with the exact kernel's zeros no longer added), the same values (issue 63)."""
    n_u, n_q, n_k = sim.shape[0], sim.shape[1], len(mus)
    out = np.empty((n_u, n_k, n_q), dtype=np.float32)
    exact = np.full(n_u, -1, dtype=np.int64)
    for u in range(n_u):
        for j in range(n_q):
            if u_id[u] == q_id[j]:
                exact[u] = j
                sim[u, j] = np.float32(1.0)
        for k in range(n_k):
            mu, slope = mus[k], slopes[k]
            for j in range(n_q):
                x = sim[u, j] - mu
                out[u, k, j] = (x * x) * slope
    return out, exact


@njit(cache=True, nogil=True)
def _gathered(vectors: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The rows ``rows`` of ``vectors``, zeros where a row is -1 (in one pass: ``np.take`` and a masked write took
    twice as long, 0.29 ms a search of the English claims on the real corpus)."""
    dim = vectors.shape[1]
    out = np.zeros((len(rows), dim), dtype=vectors.dtype)
    for i in range(len(rows)):
        r = rows[i]
        if r >= 0:
            for j in range(dim):
                out[i, j] = vectors[r, j]
    return out


@njit(cache=True, nogil=True)
def _pooled(doc_of: np.ndarray, u_of: np.ndarray, counts: np.ndarray, values: np.ndarray, exact: np.ndarray, n: int,
            p: np.ndarray, scale: float) -> np.ndarray:
    """Each document's kernel features: its terms' soft counts (each entry's count times its distinct term's
    ``values[u]``, (soft kernels, query terms), and its count for the query term it is, ``exact[u]``), summed per
    document in float64 over its entries in order, over its length (the sum of its counts), ``sum_q p(q) log(1 +
    scale * soft / len)`` per kernel. (The exact kernel's zeros are not added: adding 0 changes no sum.) A term's
    values are read as one row of (soft kernels x query terms), added to its document's row in one contiguous loop
    (the compiler's vector instructions; the same sums, in the same order, as the (kernel, query term) loops this
    replaced, at less than half their time)."""
    n_k, n_q = values.shape[1] + 1, values.shape[2]
    width = (n_k - 1) * n_q
    flat = values.reshape(values.shape[0], width)
    soft = np.zeros((n, width))
    hits = np.zeros((n, n_q))
    doc_len = np.zeros(n)
    for e in range(len(doc_of)):
        d, c, u = doc_of[e], counts[e], u_of[e]
        doc_len[d] += c
        if exact[u] >= 0:
            hits[d, exact[u]] += c
        for i in range(width):
            soft[d, i] += c * flat[u, i]
    out = np.zeros((n, n_k))
    for d in range(n):
        length = doc_len[d] if doc_len[d] > 0 else 1.0
        total = 0.0
        for j in range(n_q):
            total += p[j] * np.log1p(scale * hits[d, j] / length)
        out[d, 0] = total
        for k in range(1, n_k):
            total = 0.0
            for j in range(n_q):
                total += p[j] * np.log1p(scale * soft[d, (k - 1) * n_q + j] / length)
            out[d, k] = total
    return out


_one_thread = False


def one_blas_thread() -> None:
    """numpy's BLAS in one thread in this process, from now on (once per process; logged), and every other BLAS
    library loaded by then (FAISS's, in an index with the dense stage): the similarities are a BLAS product, and a
    searching process runs its searches side by side (requests, a writer's evaluation threads), not one search on
    every core. With a thread per core, OpenBLAS's threads waited on each other whenever the cores were busy: the
    products took 80-340 ms a search on a busy 2-core machine, about 0.3 ms in one thread (issue 63)."""
    global _one_thread
    if _one_thread:
        return
    from threadpoolctl import threadpool_info, threadpool_limits

    blas = [lib for lib in threadpool_info() if lib.get("user_api") == "blas"]
    threadpool_limits(1, user_api="blas")
    log.info("BLAS: one thread in this process (%s)", ", ".join(
        f"{lib['internal_api']} {lib.get('version')}: {lib['num_threads']} before" for lib in blas) or "none loaded")
    _one_thread = True


COMPACT_TYPES = (np.uint8, np.uint16, np.uint32)
"""The types a passage index's ``term_end`` and ``post_count`` come in (service/passages/builder.py ``compact``)."""

_warm = False


def warm() -> None:
    """Compile (or load from numba's cache) the kernel features' loops for the arrays a search gives them, so that a
    process's first search does not wait for the compiler (service/startup.py ``KERNEL_MODULES``). Once per
    process."""
    global _warm
    if _warm:
        return
    ids = np.zeros(1, dtype=np.int64)
    docs = readonly(np.array([[0, 0, 0, 0], [1, 1, 1, 1]], dtype=np.int64))
    term_id = readonly(np.zeros(1, dtype=np.int32))
    for end_type in COMPACT_TYPES:  # (a passage index keeps these two in the smallest type that holds them)
        for count_type in COMPACT_TYPES:
            _entries_in(docs, ids, term_id, readonly(np.ones(1, dtype=end_type)),
                        readonly(np.ones(1, dtype=count_type)), np.full(1, -1, dtype=np.int32))
    _language_terms(ids, np.zeros(1, dtype=np.int8), ids, ids, ids, 0)
    _gathered(np.zeros((1, 1), dtype=np.float32), ids)
    values, exact = _exponents(np.ones((1, 1), dtype=np.float32), ids, ids, MUS, SLOPES)
    _pooled(ids, ids, np.ones(1), values, exact, 1, np.ones(1), SCALE)
    _warm = True


def kernel_pooling(passages: Any, vectors: WordVectors | None) -> KernelPooling | None:
    """The kernel features of an index's passages (None without word vectors or passages)."""
    return KernelPooling(passages, vectors) if passages is not None and vectors is not None else None


__all__ = ["KERNELS", "KERNEL_FEATURES", "QUERY_TERMS", "KernelPooling", "kernel_pooling", "reads_kernels",
           "warm"]
