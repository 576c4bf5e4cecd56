"""Compiled loops of the passage ranker (numba): the candidates' index entries of the query terms, and the context
of ``qsf_passage_propagate`` over the candidates' section trees.

They compute what the numpy code of :mod:`service.passages.ranker` computed before them, with the same sums in the
same order where it had an order (the regression test compares the ranker with the reference implementation within
1e-9 on the real data): numpy's version was dozens of whole-array calls per query, and a Python loop per class of
sibling-list length, most of a ``/passages`` request's time on small candidate sets. Compiled at first use and cached
on disk by numba, like :mod:`service.retrieval.kernels`; they release the GIL.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from service.index.arrays import readonly


@njit(cache=True, nogil=True)
def _query_entries(term_id, starts, counts, qmap, use_map, q_sorted, q_order):
    n_total = 0
    for i in range(len(counts)):
        n_total += counts[i]
    em = np.empty(n_total, dtype=np.int64)
    em_doc = np.empty(n_total, dtype=np.int64)
    eq = np.empty(n_total, dtype=np.int64)
    c = 0
    nq = len(q_sorted)
    for d in range(len(starts)):
        for e in range(starts[d], starts[d] + counts[d]):
            t = term_id[e]
            if use_map:
                q = qmap[t]
            else:  # binary search over the sorted query term ids
                lo = 0
                hi = nq
                while lo < hi:
                    mid = (lo + hi) >> 1
                    if q_sorted[mid] < t:
                        lo = mid + 1
                    else:
                        hi = mid
                q = q_order[lo] if lo < nq and q_sorted[lo] == t else -1
            if q >= 0:
                em[c] = e
                em_doc[c] = d
                eq[c] = q
                c += 1
    return em[:c], em_doc[:c], eq[:c]


def query_entries(term_id: np.ndarray, starts: np.ndarray, counts: np.ndarray, qmap: np.ndarray | None,
                  qj: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The term entries ``[starts[d], starts[d] + counts[d])`` of each candidate ``d`` whose term is a query term:
    their positions in the index, their candidate and the query term each is (``qj``: the query's term ids).
    ``qmap``: term id -> query term (-1 elsewhere), or None to search the sorted ids (very large vocabularies)."""
    order = np.argsort(qj, kind="stable").astype(np.int64)
    sorted_ids = qj[order].astype(np.int64)
    use_map = qmap is not None
    return _query_entries(readonly(term_id), starts.astype(np.int64), counts.astype(np.int64),
                          qmap if qmap is not None else np.zeros(1, dtype=np.int32), use_map, sorted_ids, order)


@njit(cache=True, nogil=True)
def _passage_propagate(w, st, p_sec, p_doc, n, s_parent, s_depth):
    n_sec = len(s_parent)
    n_pass = len(st)
    max_depth = 0
    for i in range(n_sec):
        max_depth = max(max_depth, s_depth[i])
    width = 2 * max_depth + 6
    # sections sorted by (depth, parent), stable: a level, and a list of siblings, is a run
    key = s_depth * np.int64(n_sec + 1) + (s_parent + 1)
    perm = np.argsort(key, kind="mergesort")
    inv = np.empty(n_sec, dtype=np.int64)
    for i in range(n_sec):
        inv[perm[i]] = i
    par = np.empty(n_sec, dtype=np.int64)
    depth = np.empty(n_sec, dtype=np.int64)
    for i in range(n_sec):
        p = s_parent[perm[i]]
        par[i] = inv[p] if p >= 0 else -1
        depth[i] = s_depth[perm[i]]
    direct = np.zeros(n_sec)
    for g in range(n_pass):
        direct[inv[p_sec[g]]] += st[g]
    # full[c, k] = F(c, k) = w(k) S(c) + down[c, k]; down[x, k] = sum over the children c of x of F(c, k + 1)
    down = np.zeros((n_sec, width))
    full = np.zeros((n_sec, width))
    hi = n_sec
    for d in range(max_depth, -1, -1):
        lo = hi
        while lo > 0 and depth[lo - 1] == d:
            lo -= 1
        for i in range(lo, hi):
            for k in range(width):
                full[i, k] = w[k] * direct[i] + down[i, k]
        if d > 0:
            start = lo
            while start < hi:  # each sibling list adds its F(., k + 1) to its parent's down(., k)
                end = start + 1
                while end < hi and par[end] == par[start]:
                    end += 1
                for k in range(width - 1):
                    total = 0.0
                    for i in range(start, end):
                        total += full[i, k + 1]
                    down[par[start], k] += total
                start = end
        hi = lo
    # others[c, j - 1]: sum of F(c', j + 3) over c's siblings c' (prefix + suffix sums: no cancellation)
    others = np.zeros((n_sec, max(max_depth, 1)))
    start = 0
    while start < n_sec:
        end = start + 1
        while end < n_sec and par[end] == par[start] and depth[end] == depth[start]:
            end += 1
        if par[start] >= 0 and end - start > 1:
            for j in range(max_depth):
                col = j + 4
                run = 0.0
                for i in range(start, end):
                    others[i, j] = run
                    run += full[i, col]
                run = 0.0
                for i in range(end - 1, start - 1, -1):
                    others[i, j] += run
                    run += full[i, col]
        start = end
    out = np.empty(n_sec)
    for i in range(n_sec):
        total = down[i, 2]  # j = 0: the sections below
        at = i
        for j in range(1, max_depth + 1):
            up = par[at]
            if up < 0:
                break
            total += others[at, j - 1] + w[2 + j] * direct[up]
            at = up
        out[i] = total
    size = np.zeros(n, dtype=np.int64)
    for g in range(n_pass):
        size[p_doc[g]] += 1
    result = np.zeros(n_pass)
    for g in range(n_pass):
        m = size[p_doc[g]]
        if m > 1:
            sec = inv[p_sec[g]]
            result[g] = (out[sec] + w[2] * (direct[sec] - st[g])) / (m - 1)
    return result


def passage_propagate(w: np.ndarray, st: np.ndarray, p_sec: np.ndarray, p_doc: np.ndarray, n: int,
                      s_parent: np.ndarray, s_depth: np.ndarray) -> np.ndarray:
    """``sum_{g' != g} Sim_title(g') w(dist(g, g'))`` over the other passages of each passage's document, divided by
    their number (0 for a document's only passage); ``w[d]``: the weight of tree distance ``d`` (at least
    ``2 * max depth + 8`` of them). See :func:`service.passages.ranker._passage_propagate` for the method."""
    return _passage_propagate(w, st, p_sec.astype(np.int64), p_doc.astype(np.int64), n, s_parent.astype(np.int64),
                              s_depth.astype(np.int64))


_warm = False


def warm() -> None:
    """Compile (or load from numba's cache) the kernels for the arrays a passage index gives them (memory-mapped,
    read-only, or in memory), so that a process's first ``/passages`` does not wait for the compiler. Once per
    process; every :class:`service.passages.arrays.PassageArrays` calls it when made."""
    global _warm
    if _warm:
        return
    starts, counts = np.array([0], dtype=np.int64), np.array([2], dtype=np.int64)
    qj = np.array([1], dtype=np.int64)
    term_id = np.array([1, 3], dtype=np.int32)  # read-only in the kernel, memory-mapped or in memory alike
    query_entries(term_id, starts, counts, np.array([-1, 0, -1, -1], dtype=np.int32), qj)
    query_entries(term_id, starts, counts, None, qj)
    # one document: a root section with one child, a passage in each
    passage_propagate(np.ones(16), np.array([1.0, 2.0]), np.array([0, 1]), np.array([0, 0]), 1,
                      np.array([-1, 0]), np.array([0, 1]))
    _warm = True
