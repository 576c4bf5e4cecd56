"""Compiled loops of the first stage (numba): postings into a score array, its top k, a PSQ unit's expected tf and
BM25 term, and which query terms a row contains.

They replace whole-array numpy passes and numpy calls per query term (issue 15, "first-stage tail": behind bm25s'
numba backend and PISA's C++ at p50), and compute exactly what the numpy code did, e.g.:

- :func:`add_postings` adds, term after term and posting after posting, ``weights[j] * mult`` (or the
  stored weight itself when ``mult`` is 1) into ``scores[rows[j]]``: the additions of ``np.add.at`` in
  the same order, so the scores are bit-identical.
- :func:`top_k_nonzero` is ``top_k(scores, k, (scores != 0) & mask)`` with the count of the rows that
  mask allows: one pass over the scores with a heap of ``k`` (rows come in increasing order, so a row
  ties with a kept row only to lose to it: ties go to the lower row, as before).

The functions are compiled at first use (about a second) and cached on disk by numba
(``NUMBA_CACHE_DIR`` when the package folder is read-only); :func:`warm` compiles them at load, so a
first query does not pay it. They release the GIL (``nogil``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

_NO_MASK = np.zeros(0, dtype=np.bool_)


@njit(cache=True, nogil=True)
def _add_postings(scores, rows, weights, los, his, mults):
    for i in range(len(los)):
        m = mults[i]
        if m == 1.0:
            for j in range(los[i], his[i]):
                scores[rows[j]] += weights[j]
        else:
            for j in range(los[i], his[i]):
                scores[rows[j]] += weights[j] * m


def add_postings(scores: np.ndarray, rows: np.ndarray, weights: np.ndarray, los: np.ndarray, his: np.ndarray,
                 mults: np.ndarray) -> None:
    """``scores[rows[j]] += weights[j] * mults[i]`` for ``j`` in ``[los[i], his[i])``, term ``i`` by term ``i``."""
    _add_postings(scores, rows, weights, los, his, mults)


@njit(cache=True, nogil=True)
def _expected_tf(scratch, rows, tf, los, his, probs):
    total = 0
    for i in range(len(los)):
        total += his[i] - los[i]
        p = probs[i]
        for j in range(los[i], his[i]):
            scratch[rows[j]] += p * np.float64(tf[j])
    # the rows reached, in increasing order (the gathers and the scatter that follow then walk memory forward): a
    # sort of the postings' rows when they are few, else a scan of the whole scratch array, as the numpy code did
    if total * 8 < len(scratch):
        reached = np.empty(total, dtype=np.int64)
        n = 0
        for i in range(len(los)):
            for j in range(los[i], his[i]):
                reached[n] = rows[j]
                n += 1
        out_rows = np.unique(reached)
    else:
        n = 0
        for r in range(len(scratch)):
            n += scratch[r] != 0.0
        out_rows = np.empty(n + 1, dtype=np.int64)
        n = 0
        for r in range(len(scratch)):  # branch-free (written always, kept when non-zero): a branch mispredicted
            out_rows[n] = r  # on about half the rows cost several ns each
            n += scratch[r] != 0.0
        out_rows = out_rows[:n]
    out_tf = np.empty(len(out_rows), dtype=np.float64)
    for i in range(len(out_rows)):
        r = out_rows[i]
        out_tf[i] = scratch[r]
        scratch[r] = 0.0
    return out_rows, out_tf


def expected_tf(scratch: np.ndarray, rows: np.ndarray, tf: np.ndarray, los: np.ndarray, his: np.ndarray,
                probs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A PSQ unit's expected term frequency ``sum_i probs[i] * tf`` of every row in the postings of its targets
    (``[los[i], his[i])``), summed target after target as ``np.add.at`` did: the rows (increasing) and their
    expected tf. ``scratch``: zeros, one per row, left zeroed (probabilities must be positive)."""
    return _expected_tf(scratch, rows, tf, los, his, probs)


@njit(cache=True, nogil=True)
def _add_bm25(scores, rows, tf_e, doc_norm, idf, k1, weight):
    k1p1 = k1 + 1.0
    for i in range(len(rows)):
        r = rows[i]
        tf = tf_e[i]
        scores[r] += weight * (idf * (tf * k1p1 / (tf + doc_norm[r])))


def add_bm25(scores: np.ndarray, rows: np.ndarray, tf_e: np.ndarray, doc_norm: np.ndarray, idf: float, k1: float,
             weight: float) -> None:
    """``scores[rows] += weight * idf * tf (k1 + 1) / (tf + doc_norm[rows])`` (rows distinct): a PSQ unit's BM25
    term, the operations of ``_term_weight`` in its order (bit-identical)."""
    _add_bm25(scores, rows, tf_e, doc_norm, float(idf), float(k1), float(weight))


@njit(cache=True, nogil=True)
def _contains(indptr, postings, term_ids, rows):
    found = np.zeros((len(rows), len(term_ids)), dtype=np.bool_)
    for j in range(len(term_ids)):
        t = term_ids[j]
        lo = indptr[t]
        hi = indptr[t + 1]
        if hi == lo:
            continue
        for i in range(len(rows)):
            r = rows[i]
            a = lo
            b = hi
            while a < b:  # the first posting >= r
                m = (a + b) >> 1
                if postings[m] < r:
                    a = m + 1
                else:
                    b = m
            found[i, j] = a < hi and postings[a] == r
    return found


def contains(indptr: np.ndarray, postings: np.ndarray, term_ids: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``found[i, j]``: row ``rows[i]`` is in the (sorted) postings of term ``term_ids[j]``."""
    return _contains(indptr, postings, term_ids, rows)


@njit(cache=True, nogil=True)
def _worse(s_a, r_a, s_b, r_b):
    return s_a < s_b or (s_a == s_b and r_a > r_b)


@njit(cache=True, nogil=True)
def _swap(hs, hr, a, b):
    hs[a], hs[b] = hs[b], hs[a]
    hr[a], hr[b] = hr[b], hr[a]


@njit(cache=True, nogil=True)
def _sift_up(hs, hr, i):
    """Restore the heap (the worst kept row at the root) after a push at ``i``."""
    while i > 0:
        parent = (i - 1) // 2
        if not _worse(hs[i], hr[i], hs[parent], hr[parent]):
            return
        _swap(hs, hr, i, parent)
        i = parent


@njit(cache=True, nogil=True)
def _sift_down(hs, hr, size, i):
    """Restore the heap of ``size`` after the root was replaced."""
    while True:
        left = 2 * i + 1
        if left >= size:
            return
        child = left
        right = left + 1
        if right < size and _worse(hs[right], hr[right], hs[left], hr[left]):
            child = right
        if not _worse(hs[child], hr[child], hs[i], hr[i]):
            return
        _swap(hs, hr, i, child)
        i = child


@njit(cache=True, nogil=True)
def _count_nonzero(scores, mask, use_mask):
    matched = 0
    if use_mask:
        for r in range(len(scores)):
            matched += (scores[r] != 0.0) & mask[r]
    else:
        for r in range(len(scores)):
            matched += scores[r] != 0.0
    return matched


@njit(cache=True, nogil=True)
def _top_k_nonzero(scores, k, mask, use_mask):
    hs = np.empty(k, dtype=np.float64)
    hr = np.empty(k, dtype=np.int64)
    size = 0
    n = len(scores)
    r = 0
    while r < n and size < k:  # the first k allowed non-zero rows: push, sift up (the worst kept at the root)
        s = scores[r]
        if s != 0.0 and not (use_mask and not mask[r]):
            hs[size] = s
            hr[size] = r
            _sift_up(hs, hr, size)
            size += 1
        r += 1
    if size == k:
        # the branch taken for most rows is `s > worst kept`, rarely true (a branch on `s != 0` first, true
        # for about half the rows, cost several ns per row in mispredictions); an equal score comes from a
        # higher row, which loses the tie
        worst = hs[0]
        for j in range(r, n):
            s = scores[j]
            if s > worst:
                if s == 0.0 or (use_mask and not mask[j]):
                    continue
                hs[0] = s
                hr[0] = j
                _sift_down(hs, hr, size, 0)
                worst = hs[0]
    return hs[:size], hr[:size], _count_nonzero(scores, mask, use_mask)


def top_k_nonzero(scores: np.ndarray, k: int, mask: np.ndarray | None = None) -> tuple[np.ndarray, int]:
    """The rows of the ``k`` best non-zero scores that ``mask`` allows (best first, ties by lower row) and
    how many rows are non-zero and allowed."""
    vals, rows, matched = _top_k_nonzero(scores, k, _NO_MASK if mask is None else mask, mask is not None)
    order = np.lexsort((rows, -vals))
    return rows[order], int(matched)


def _readonly(a: np.ndarray) -> np.ndarray:
    a = a.view()
    a.flags.writeable = False
    return a


_warm = False


def warm() -> None:
    """Compile (or load from numba's cache) every kernel for the arrays an index gives it: its postings
    writable (built or joined in memory) or read-only (memory-mapped), masks of either kind. Once per
    process; every :class:`service.retrieval.sparse.SparseIndex` calls it when made."""
    global _warm
    if _warm:
        return
    rows, weights = np.array([1, 2], dtype=np.int32), np.array([0.5, 1.5])
    bounds = np.array([0], dtype=np.int64), np.array([2], dtype=np.int64), np.array([1.0])
    scores = np.zeros(4, dtype=np.float64)
    add_postings(scores, rows, weights, *bounds)
    add_postings(scores, _readonly(rows), _readonly(weights), *bounds)
    tf = np.array([1, 3], dtype=np.int32)
    indptr, ids, at = np.array([0, 2], dtype=np.int64), np.array([0], dtype=np.int64), np.array([2], dtype=np.int64)
    contains(indptr, rows, ids, at)
    contains(_readonly(indptr), _readonly(rows), ids, at)
    expected_tf(np.zeros(4), rows, tf, *bounds)
    expected_tf(np.zeros(4), _readonly(rows), _readonly(tf), *bounds)
    norms = np.ones(4)
    for r in (rows, _readonly(rows), np.array([1, 2], dtype=np.int64)):
        for d in (norms, _readonly(norms)):
            add_bm25(scores, r, np.array([1.0, 2.0]), d, 1.0, 1.2, 1.0)
    mask = np.ones(4, dtype=np.bool_)
    for s in (scores, _readonly(scores)):
        top_k_nonzero(s, 1)
        top_k_nonzero(s, 1, mask)
        top_k_nonzero(s, 1, _readonly(mask))
    _warm = True
