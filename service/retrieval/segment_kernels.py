"""Compiled loops of every sparse index, read as a table of segments (issue 60, item 3): a build is one segment
(:class:`service.retrieval.sparse.SparseIndex`), a live generation its segments searched in place
(:class:`service.retrieval.segments.SparseGeneration`).

Each segment's postings stay where they lie (its memory-mapped ``rows``/``tf``/``indptr``); a query's term is found
in segment ``s`` at its local column ``loc[s, t]`` (-1: not there; a ``loc`` of no columns: each term its own, one
build's), a posting's row is ``off[s]`` plus its local row, and a deleted row (``dead[s]``, a mask over the
segment's rows; empty when it has none) is passed over. A build's segment carries its stored weights, read as they
are (:func:`_posting`). A generation's postings carry raw tf: the weight of a posting is computed where it is read,
with the generation's statistics (the term's idf, the row's length norm
``norm``: BM25 ``k1 * (1 - b + b * len / avgdl)``, tf-idf the row's own L2 norm), by the operations of the build's
``_term_weight`` in its order, so a score is bit for bit the one of the same postings weighted once and joined
(BM25; tf-idf's ``log1p`` is libm's on both sides). The additions into a row's score keep the order of the query's
units (a row lies in one segment), so the accumulator holds the join's scores exactly.

The accumulator and its top k are :mod:`service.retrieval.kernels`'s, MaxScore :mod:`service.retrieval.maxscore`'s
(over the same table). The segments' arrays reach a kernel as one table of their addresses and lengths
(:class:`SegmentTable`, made once per index; a kernel views segment ``s``'s arrays with ``carray``): a
numba typed list of the arrays would do the same, but its methods are compiled in every new process (2 s), and a
tuple would compile every kernel once per number of segments.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numba import carray, njit, types
from numba.extending import intrinsic

from service.index.arrays import readonly
from service.retrieval.kernels import (
    _sift_down,
    _sift_up,
    _worse,
    lower_bound,
)


def _pointer_to(nbtype: Any) -> Any:
    """An intrinsic: an address (int64) as a pointer to ``nbtype`` (what ``carray`` views)."""

    @intrinsic
    def cast(typingctx: Any, addr: Any) -> Any:
        ptr = types.CPointer(nbtype)

        def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
            return builder.inttoptr(args[0], context.get_value_type(ptr))

        return ptr(types.int64), codegen

    return cast


_as_i32 = _pointer_to(types.int32)
_as_i64 = _pointer_to(types.int64)
_as_u8 = _pointer_to(types.uint8)
_as_f64 = _pointer_to(types.float64)

# the columns of a segment table (one row per segment)
ROWS, TF, PTR, DEAD, NNZ, NPTR, NDEAD, OFF, NROWS, WTS, NWTS = range(11)


class SegmentTable:
    """The segments' arrays as the kernels read them: ``table[s]`` holds the addresses of segment ``s``'s rows, tf,
    column pointers, deleted-row mask and stored weights, their lengths, its first generation row and its number of
    rows; ``keep`` holds the arrays themselves. ``weights``: one build's own (float64, one per posting), read instead
    of weighing tf (:func:`_posting`); a PSQ unit still reads tf. The addresses are valid only while this object
    lives: keep it, not just ``table``, for as long as the kernels are given ``table``."""

    def __init__(self, rows: Sequence[np.ndarray], tf: Sequence[np.ndarray], indptr: Sequence[np.ndarray],
                 dead: Sequence[np.ndarray], n_rows: Sequence[int],
                 weights: Sequence[np.ndarray] | None = None) -> None:
        self.keep: list[np.ndarray] = []
        table = np.zeros((len(rows), 11), dtype=np.int64)
        first = 0
        stored = weights if weights is not None else [np.zeros(0)] * len(rows)
        for s, (r, t, p, d, n, w) in enumerate(zip(rows, tf, indptr, dead, n_rows, stored, strict=True)):
            if len(r) != len(t) or (weights is not None and len(w) != len(r)) or (len(d) and len(d) != n):
                raise ValueError(f"segment {s}: rows, tf, weights or deleted rows of different lengths")
            n_w = len(w)  # (0: the segment's tf is weighed)
            r, t, p = self._held(r, np.int32), self._held(t, np.int32), self._held(p, np.int64)
            d = self._held(d if len(d) else np.zeros(1, dtype=np.bool_), np.bool_).view(np.uint8)
            w = self._held(w if n_w else np.zeros(1), np.float64)  # (an address to read, even of nothing)
            table[s] = (r.ctypes.data, t.ctypes.data, p.ctypes.data, d.ctypes.data, len(r), len(p),
                        len(d) if len(dead[s]) else 0, first, n, w.ctypes.data, n_w)
            first += int(n)
        self.table = readonly(table)

    def _held(self, a: np.ndarray, dtype: type) -> np.ndarray:
        a = np.ascontiguousarray(np.asarray(a))
        if a.dtype != np.dtype(dtype):
            raise TypeError(f"segment array of dtype {a.dtype}, expected {np.dtype(dtype)}")
        self.keep.append(a)
        return a


@njit(cache=True, nogil=True, inline="always")
def _segment(seg, s):
    """Segment ``s``'s arrays, viewed where they lie: its column pointers, posting rows, tf, stored weights (empty:
    its tf is weighed), deleted-row mask (empty: none deleted), and its first generation row."""
    return (carray(_as_i64(seg[s, PTR]), (seg[s, NPTR],)), carray(_as_i32(seg[s, ROWS]), (seg[s, NNZ],)),
            carray(_as_i32(seg[s, TF]), (seg[s, NNZ],)), carray(_as_f64(seg[s, WTS]), (seg[s, NWTS],)),
            carray(_as_u8(seg[s, DEAD]), (seg[s, NDEAD],)), seg[s, OFF])


@njit(cache=True, nogil=True, inline="always")
def _col(loc, s, t):
    """Term ``t``'s column in segment ``s`` (-1: none there); a ``loc`` of no columns: the term's own (one build)."""
    if loc.shape[1] == 0:
        return t
    return loc[s, t]


@njit(cache=True, nogil=True, inline="always")
def _postings(seg, loc, s, t):
    """Term ``t``'s postings in segment ``s``: their range ``[lo, hi)`` there (empty where the segment lacks the term),
    then the segment's arrays and first row (:func:`_segment`)."""
    ip, rows, tfs, wts, dead, o = _segment(seg, s)
    c = _col(loc, s, t)
    if c < 0:
        return np.int64(0), np.int64(0), rows, tfs, wts, dead, o
    return ip[c], ip[c + 1], rows, tfs, wts, dead, o


@njit(cache=True, nogil=True, inline="always")
def _live_row(rows, dead, o, p):
    """Posting ``p``'s generation row (its segment's first row ``o`` plus its local row), or -1 where that row is
    deleted (``dead``: the segment's deleted-row mask, empty when it has none)."""
    lr = rows[p]
    if len(dead) > 0 and dead[lr]:
        return np.int64(-1)
    return o + lr


@njit(cache=True, nogil=True, inline="always")
def _weight(f, r, idf, norm, k1p, bm25):
    """A posting's weight: tf ``f`` in generation row ``r`` (the build's ``_term_weight``, its operations in order)."""
    if bm25:
        return idf * (f * k1p / (f + norm[r]))
    d = norm[r]
    if d == 0.0:  # (the build's nan_to_num of a row without text)
        return 0.0
    return idf * np.log1p(f) / d


@njit(cache=True, nogil=True, inline="always")
def _posting(wts, tfs, j, r, idf, norm, k1p, bm25):
    """Posting ``j``'s weight (generation row ``r``): the stored one where the segment has them, else its tf weighed."""
    if len(wts) > 0:
        return wts[j]
    return _weight(np.float64(tfs[j]), r, idf, norm, k1p, bm25)


@njit(cache=True, nogil=True)
def _count(seg, loc, t):
    """The postings of generation term ``t`` over every segment (deleted rows' included)."""
    n = 0
    for s in range(loc.shape[0]):
        lo, hi, _, _, _, _, _ = _postings(seg, loc, s, t)
        n += hi - lo
    return n


@njit(cache=True, nogil=True)
def _accumulate(scores, seen, touched, nt, track, cap, scratch, buf, seg, loc, norm, k1,
                bm25, kinds, mults, idfs, scales, ceils, starts, terms, probs):
    """A route's units added into the accumulator, unit after unit (``kinds[u]`` 0: one term with p = 1, its postings'
    weights times ``mults[u]``; 1: a PSQ unit, its targets ``terms[starts[u]:starts[u+1]]`` with probabilities
    ``probs``: the expected tf over them (in ``scratch``, left zeroed; the rows reached listed in ``buf``), divided by
    ``scales[u]``, through BM25 with the unit's idf, capped at ``ceils[u]`` when that is >= 0, times ``mults[u]``).
    While ``track``, rows reached for the first time are listed in ``touched``; an add that could take the listed rows
    past ``cap`` turns the listing off. Returns the rows listed and whether the listing is still on."""
    k1p = k1 + 1.0
    n_seg = loc.shape[0]
    for u in range(len(kinds)):
        m = mults[u]
        idf = idfs[u]
        reach = 0
        for j in range(starts[u], starts[u + 1]):
            reach += _count(seg, loc, terms[j])
        if track and nt + reach > cap:
            track = False
        if kinds[u] == 0:
            t = terms[starts[u]]
            for s in range(n_seg):
                lo, hi, rows, tfs, wts, dead, o = _postings(seg, loc, s, t)
                for p in range(lo, hi):
                    r = _live_row(rows, dead, o, p)
                    if r < 0:
                        continue
                    w = _posting(wts, tfs, p, r, idf, norm, k1p, bm25)
                    if track:
                        touched[nt] = r
                        nt += 1 - seen[r]
                        seen[r] = 1
                    scores[r] += w if m == 1.0 else w * m
            continue
        n = 0
        for j in range(starts[u], starts[u + 1]):
            t = terms[j]
            pr = probs[j]
            for s in range(n_seg):
                lo, hi, rows, tfs, _, dead, o = _postings(seg, loc, s, t)
                for p in range(lo, hi):
                    r = _live_row(rows, dead, o, p)
                    if r < 0:
                        continue
                    buf[n] = r  # branch-free: kept when the row is new (its expected tf still 0; p * tf > 0)
                    n += scratch[r] == 0.0
                    scratch[r] += pr * np.float64(tfs[p])
        scale = scales[u]
        ceil = ceils[u]
        for i in range(n):
            r = buf[i]
            f = scratch[r] / scale
            scratch[r] = 0.0
            if bm25:
                part = f * k1p / (f + norm[r])
                if ceil >= 0.0 and part > ceil:
                    part = ceil
                v = m * (idf * part)
            else:
                d = norm[r]
                v = 0.0 if d == 0.0 else m * (idf * np.log1p(f) / d)
            if track:
                touched[nt] = r
                nt += 1 - seen[r]
                seen[r] = 1
            scores[r] += v
    return nt, track


@njit(cache=True, nogil=True)
def _top_k_bounded(scores, seen, seg, loc, terms, starts, ubs, k, mask, use_mask):
    """:func:`service.retrieval.kernels._top_k_bounded` over the segments: the rows of the units' terms (unit ``u``:
    ``terms[starts[u]:starts[u+1]]``, units in the order of ``ubs``, what units ``u`` and after can add) enumerated
    segment by segment until no row left can enter the top k."""
    hs = np.empty(k, dtype=np.float64)
    hr = np.empty(k, dtype=np.int64)
    size = 0
    for u in range(len(starts) - 1):
        if size == k and hs[0] > 0.0 and ubs[u] * (1.0 + 1e-9) < hs[0]:
            break
        for j in range(starts[u], starts[u + 1]):
            t = terms[j]
            for s in range(loc.shape[0]):
                lo, hi, rows, _, _, _, o = _postings(seg, loc, s, t)
                for p in range(lo, hi):
                    r = o + np.int64(rows[p])
                    if seen[r]:
                        continue
                    seen[r] = 1
                    sc = scores[r]
                    if sc == 0.0 or (use_mask and not mask[r]):  # (a deleted row scores 0: never added)
                        continue
                    if size < k:
                        hs[size] = sc
                        hr[size] = r
                        _sift_up(hs, hr, size)
                        size += 1
                    elif _worse(hs[0], hr[0], sc, r):
                        hs[0] = sc
                        hr[0] = r
                        _sift_down(hs, hr, size, 0)
    return hs[:size], hr[:size]


@njit(cache=True, nogil=True)
def _contains(seg, loc, term_ids, rows):
    """``found[i, j]``: live generation row ``rows[i]`` holds term ``term_ids[j]``."""
    found = np.zeros((len(rows), len(term_ids)), dtype=np.bool_)
    n_seg = seg.shape[0]
    for i in range(len(rows)):
        r = rows[i]
        s = 0
        lo, hi = 0, n_seg
        while lo < hi:  # the last segment whose first row is <= r
            mid = (lo + hi) >> 1
            if seg[mid, OFF] <= r:
                lo = mid + 1
            else:
                hi = mid
        s = lo - 1
        _, _, _, _, dead, o = _segment(seg, s)
        lr = r - o
        if len(dead) > 0 and dead[lr]:
            continue
        for j in range(len(term_ids)):
            first, end, seg_rows, _, _, _, _ = _postings(seg, loc, s, term_ids[j])
            a = lower_bound(seg_rows, first, end, lr)
            found[i, j] = a < end and seg_rows[a] == lr
    return found


@njit(cache=True, nogil=True)
def _tf_part_max(indptr, rows, tf, doc_norm, k1, bm25):
    """Per column of one segment, the largest tf part of its weights with the segment's own length norms (BM25
    ``tf (k1 + 1) / (tf + norm)``, tf-idf ``ln(1 + tf) / norm``): what the generation's bound of a term starts from."""
    k1p = k1 + 1.0
    out = np.zeros(len(indptr) - 1, dtype=np.float64)
    for t in range(len(indptr) - 1):
        best = 0.0
        for j in range(indptr[t], indptr[t + 1]):
            w = _weight(np.float64(tf[j]), rows[j], 1.0, doc_norm, k1p, bm25)
            if w > best:
                best = w
        out[t] = best
    return out


def tf_part_max(indptr: np.ndarray, rows: np.ndarray, tf: np.ndarray, doc_norm: np.ndarray, k1: float,
                bm25: bool) -> np.ndarray:
    """See :func:`_tf_part_max`."""
    return _tf_part_max(readonly(np.asarray(indptr)), readonly(np.asarray(rows)), readonly(np.asarray(tf)),
                        readonly(np.asarray(doc_norm, dtype=np.float64)), float(k1), bool(bm25))


_warm = False


def warm() -> None:
    """Compile (or load from numba's cache) every kernel for the arrays an index gives them (a build's one segment and
    a generation's segments are the same types); once per process (:func:`service.startup.warm_kernels`)."""
    global _warm
    if _warm:
        return
    from service.retrieval.kernels import ScoreAccumulator, _mask

    held = SegmentTable([np.array([0, 1], dtype=np.int32), np.array([0], dtype=np.int32)],
                        [np.array([1, 2], dtype=np.int32), np.array([3], dtype=np.int32)],
                        [np.array([0, 2], dtype=np.int64), np.array([0, 1], dtype=np.int64)],
                        [np.zeros(0, dtype=np.bool_), np.array([False])], [2, 1])
    seg = held.table  # (valid while ``held`` holds the arrays)
    loc = readonly(np.zeros((2, 1), dtype=np.int32))
    norm = readonly(np.ones(3))
    acc = ScoreAccumulator(3)
    one = np.array([1.0])
    ints = np.array([0, 1], dtype=np.int64), np.array([0], dtype=np.int64)
    for kind in (0, 1):
        acc.n, acc.tracking = _accumulate(acc.scores, acc.seen, acc.touched, acc.n, acc.tracking, acc.cap,
                                          acc.scratch, acc.row_scratch, seg, loc, norm, 1.2, True,
                                          np.array([kind], dtype=np.int64), one, one, one, -one, ints[0], ints[1], one)
    mask = np.ones(3, dtype=np.bool_)
    for m in (None, mask):
        acc.unmark()
        _top_k_bounded(acc.scores, acc.seen, seg, loc, ints[1], ints[0], np.cumsum(np.array([1.0])[::-1])[::-1], 1,
                       _mask(m), m is not None)
    acc.reset()
    _contains(seg, loc, ints[1], ints[0])
    tf_part_max(np.array([0, 2], dtype=np.int64), np.array([0, 1], dtype=np.int32), np.array([1, 2], dtype=np.int32),
                np.ones(2), 1.2, True)
    del held
    _warm = True
