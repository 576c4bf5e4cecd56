"""MaxScore (Turtle & Flood 1995): a one-route query of single terms for a small k, written once for every sparse
index (issue 60, item 3).

An index is read here as a table of segments (:class:`service.retrieval.segment_kernels.SegmentTable`): one build is
one segment whose postings carry their stored weights; a live generation is a run of segments whose postings carry
raw tf, weighed as they are read with the generation's statistics (:func:`service.retrieval.segment_kernels._weight`)
and passed over where deleted. Only the reading of a posting's weight depends on that
(:func:`service.retrieval.segment_kernels._posting`); the steps, the bounds and the order of the additions are one.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from service.index.arrays import readonly
from service.retrieval.kernels import ScoreAccumulator, _mask, _offer, _sift_down, _sift_up, _worse, lower_bound
from service.retrieval.segment_kernels import (
    NROWS,
    SegmentTable,
    _count,
    _live_row,
    _posting,
    _postings,
)

# A query of single terms for a small k (service.retrieval.sparse.BaseSparseIndex.search): the units that can add most
# (rare terms: short posting lists) are added whole into an accumulator's arrays, listing the rows they reach; once the
# units left cannot lift a row that only they reach into the top k, those are looked up for the listed rows that can
# still make it (galloping search over their long lists), cutting rows as the k-th best rises, and the last rows'
# scores are added up unit after unit in the query's order: bit for bit what a full accumulation adds.
#
# The partial scores of the units added whole are float32 (the accumulator's ``partial``: half the float64 array's
# cache lines, and a row is new where its partial score is still 0, with no array of marks). They only decide which
# rows are cut, with bounds that hold whatever their rounding: a sum of ``m`` float32 weights (each rounded, then each
# addition) is within ``m * 2**-23`` of the float64 sum, relatively, so the bounds widen by ``eps = (m + 2) * 2**-23``
# (lower bounds of the k-th best shrink by it, upper bounds of a row grow by it); the scores returned are always the
# float64 ones of the last rows. A weight rounded to float32 is raised to ``TINY32`` at least (a partial score of 0
# means "not reached"), which the bounds allow for as ``m * TINY32`` absolutely.

LOOKUP_RATIO = 2  # a unit that could be cut off is still merged whole when it has at most this many postings per row
#                   merged so far (looking it up for the candidates would cost more)


@njit(cache=True, nogil=True)
def _gallop(rows, p, hi, c):
    """The first position in ``[p, hi)`` whose row is >= ``c`` (rows increasing): doubling steps, then bisection."""
    if p >= hi or rows[p] >= c:
        return p
    step = 1
    while p + step < hi and rows[p + step] < c:
        step *= 2
    # rows[p + step // 2] < c; rows[p + step] >= c, or the end
    return lower_bound(rows, p + step // 2 + 1, min(p + step, hi), c)


@njit(cache=True, nogil=True)
def _kth_value(values, n, k):
    """The k-th largest of ``values[:n]`` (n >= k)."""
    h = np.empty(k, dtype=np.float64)
    size = 0
    for i in range(n):
        v = values[i]
        if size < k:
            h[size] = v
            j = size  # sift up (the smallest at the root)
            while j > 0 and h[j] < h[(j - 1) // 2]:
                h[j], h[(j - 1) // 2] = h[(j - 1) // 2], h[j]
                j = (j - 1) // 2
            size += 1
        elif v > h[0]:
            h[0] = v
            j = 0
            while True:
                left = 2 * j + 1
                if left >= size:
                    break
                child = left
                if left + 1 < size and h[left + 1] < h[left]:
                    child = left + 1
                if h[child] >= h[j]:
                    break
                h[j], h[child] = h[child], h[j]
                j = child
    return h[0]


@njit(cache=True, nogil=True)
def _keep(cands, part, c, rest, theta, eps):
    """Keep the candidates whose partial score (within ``eps`` relatively) plus ``rest`` can reach ``theta`` (a lower
    bound of the k-th best score); their new count."""
    kept = 0
    for j in range(c):
        if part[j] * (1.0 + eps) + rest * (1.0 + 1e-9) >= theta:
            cands[kept] = cands[j]
            part[kept] = part[j]
            kept += 1
    return kept


@njit(cache=True, nogil=True)
def _kth_listed(scores, touched, nt, k, mask, use_mask):
    """The k-th best score of the listed rows that ``mask`` allows, and whether there are k of them."""
    hs = np.empty(k, dtype=np.float64)
    hr = np.empty(k, dtype=np.int64)
    size = 0
    for i in range(nt):
        r = int(touched[i])
        if use_mask and not mask[r]:
            continue
        s = scores[r]
        if size < k:  # (_offer, written out: see there)
            hs[size] = s
            hr[size] = r
            _sift_up(hs, hr, size)
            size += 1
        elif _worse(hs[0], hr[0], s, r):
            hs[0] = s
            hr[0] = r
            _sift_down(hs, hr, size, 0)
    return (hs[0], True) if size == k else (0.0, False)


TINY32 = np.float32(1e-30)  # the least float32 weight added (see above)


@njit(cache=True, nogil=True)
def _lowered(v, eps, tiny):
    """A lower bound of a score whose float32-based estimate (a partial score, or one plus weights looked up) is ``v``:
    ``eps`` relative, ``tiny`` absolute (see above)."""
    return v * (1.0 - eps) - tiny


@njit(cache=True, nogil=True)
def _rest(order, whole, ubs):
    """What the units not added whole (looked up below) can add to a row together."""
    rest = 0.0
    for i in range(len(order)):
        if not whole[order[i]]:
            rest += ubs[order[i]]
    return rest


@njit(cache=True, nogil=True)
def _listed(partial, touched, nt, ok, have, theta, rest, eps, mask, use_mask):
    """The rows the units added whole listed (``touched[:nt]``), their partial scores zeroed as they are read: those
    the mask allows whose partial score plus ``rest`` can reach ``theta`` (where there is one), in increasing row
    order, with their partial scores (none when not ``ok``). MaxScore's candidates before the look-ups, one index's
    (:func:`_candidates`) and a generation's segments' (service/retrieval/segment_kernels.py) alike."""
    cands = np.empty(nt, dtype=np.int64)
    part = np.empty(nt, dtype=np.float64)
    c = 0
    for i in range(nt):  # the candidates, and the partial scores zeroed
        r = int(touched[i])
        s = np.float64(partial[r])
        partial[r] = 0.0
        if not ok or s == 0.0 or (use_mask and not mask[r]):
            continue
        if have and s * (1.0 + eps) + rest * (1.0 + 1e-9) < theta:
            continue
        cands[c] = r
        part[c] = s
        c += 1
    at_sorted = np.argsort(cands[:c])
    return cands[at_sorted], part[at_sorted]


@njit(cache=True, nogil=True)
def _best_listed(cands, part, c, k):
    """The rows of the ``2 k`` best partial scores (ties at the cut included) and their scores: looked up in every unit
    left, their scores are real ones, so the k-th best of them is near the final theta (see :func:`_candidates`)."""
    cut = _kth_value(part, c, 2 * k)
    best = np.empty(c, dtype=np.float64)
    at = np.empty(c, dtype=np.int64)
    picked = 0
    for j in range(c):
        if part[j] >= cut:
            best[picked] = part[j]
            at[picked] = cands[j]
            picked += 1
    return at, best, picked


@njit(cache=True, nogil=True)
def _best_of(cands, exact, k):
    hs = np.empty(k, dtype=np.float64)
    hr = np.empty(k, dtype=np.int64)
    size = 0
    for i in range(len(cands)):
        s = exact[i]
        r = cands[i]
        if s == 0.0:
            continue
        size = _offer(hs, hr, size, k, s, r)
    return hs[:size], hr[:size]


@njit(cache=True, nogil=True)
def _look_up(seg, loc, norm, k1p, bm25, t, idf, mu, cands, c, part):
    """``part[j] += weight * mu`` of each (increasing) candidate row found in term ``t``'s postings; a segment's
    candidates (a run of them) are looked up in that segment's list by a galloping search."""
    for s in range(loc.shape[0]):
        p, hi, rows, tfs, wts, _, o = _postings(seg, loc, s, t)
        if p == hi:
            continue
        a = lower_bound(cands, 0, c, o)
        b = lower_bound(cands, a, c, o + seg[s, NROWS])
        for j in range(a, b):
            lr = cands[j] - o
            p = _gallop(rows, p, hi, lr)
            if p >= hi:
                break
            if rows[p] == lr:
                w = _posting(wts, tfs, p, cands[j], idf, norm, k1p, bm25)
                part[j] += w if mu == 1.0 else w * mu
                p += 1


@njit(cache=True, nogil=True)
def _candidates(seg, loc, norm, k1p, bm25, ids, idfs, mults, ubs, cnt, order, left,
                k, mask, use_mask, partial, touched, budget):
    """The candidates of MaxScore (see above), in increasing order, or ``ok`` False when more than ``budget`` rows
    would be listed. ``order``: the units, those that can add most first; ``left[i]``: what ``order[i:]`` can add to
    a row together; ``cnt[u]``: unit ``u``'s postings in every segment. Partial scores only grow (every weight is
    >= 0), so the k-th best partial score (theta, lowered by the float32 bound) is a lower bound of the k-th best
    score, and a row whose partial score plus what its units left can add is below it is out. The units added whole
    go into ``partial`` (float32 zeros, one per row: left zeroed), listing the rows they reach in ``touched`` (room for
    ``budget`` + 1 rows)."""
    m = len(order)
    eps = (m + 2) * 2.0**-23  # relative bound of a float32 partial score (see above)
    tiny = m * np.float64(TINY32)  # ... and absolute
    whole = np.zeros(m, dtype=np.bool_)
    nt = 0
    theta = 0.0
    have = False
    top = np.float32(0.0)
    ok = True
    for i in range(m):
        u = order[i]
        essential = not (have and left[i] * (1.0 + 1e-9) < theta)
        if not essential and cnt[u] > LOOKUP_RATIO * nt:
            continue  # looked up below
        whole[u] = True
        if ubs[u] == 0.0:
            continue  # adds 0 to every row (the last rows' scores still add its zeros, in order)
        if nt + cnt[u] > budget:
            ok = False
            break
        mu = mults[u]
        idf = idfs[u]
        t = ids[u]
        for s in range(loc.shape[0]):
            lo, hi, rows, tfs, wts, dead, o = _postings(seg, loc, s, t)
            for j in range(lo, hi):
                r = _live_row(rows, dead, o, j)
                if r < 0:
                    continue
                w = _posting(wts, tfs, j, r, idf, norm, k1p, bm25)
                s0 = partial[r]
                touched[nt] = r  # branch-free: written always, kept when the row is new (its partial score still 0)
                nt += s0 == 0.0
                sv = s0 + max(np.float32(w if mu == 1.0 else w * mu), TINY32)
                partial[r] = sv
                top = max(top, sv)
        if essential and i + 1 < m and left[i + 1] * (1.0 + 1e-9) < top * (1.0 - eps):  # may the units left be cut?
            kth, have = _kth_listed(partial, touched, nt, k, mask, use_mask)
            theta = _lowered(kth, eps, tiny)
    if ok:
        kth, have = _kth_listed(partial, touched, nt, k, mask, use_mask)
        theta = _lowered(kth, eps, tiny)
    rest = _rest(order, whole, ubs)  # what the units looked up can add
    cands, part = _listed(partial, touched, nt, ok, have, theta, rest, eps, mask, use_mask)
    c = len(cands)
    if not ok:
        return cands[:0], False
    if rest == 0.0:
        return cands, True
    # from here ``part`` is a float32 partial score plus float64 weights looked up: within eps of the float64 sum
    if have and c > 2 * k:
        # the rows of the best partial scores, looked up in every unit left: their scores are real ones, so the k-th
        # best of them is near the final theta, and most candidates fail against it before any other look-up
        at, best, picked = _best_listed(cands, part, c, k)
        for i in range(m):
            u = order[i]
            if not whole[u]:
                _look_up(seg, loc, norm, k1p, bm25, ids[u], idfs[u], mults[u], at, picked, best)
        theta = max(theta, _lowered(_kth_value(best, picked, k), eps, tiny))
        c = _keep(cands, part, c, rest, theta, eps)
    for i in range(m):  # the units left, those that can add most first, looked up for the candidates left
        u = order[i]
        if whole[u]:
            continue
        _look_up(seg, loc, norm, k1p, bm25, ids[u], idfs[u], mults[u], cands, c, part)
        rest -= ubs[u]
        if c >= k:
            theta = max(theta, _lowered(_kth_value(part, c, k), eps, tiny))
            have = True
        if have:
            c = _keep(cands, part, c, max(rest, 0.0), theta, eps)
    return cands[:c], True


@njit(cache=True, nogil=True)
def _rescore(seg, loc, norm, k1p, bm25, ids, idfs, mults, cands):
    """Each candidate's score, added unit after unit in the query's order (the accumulator's additions for that row,
    bit for bit)."""
    out = np.zeros(len(cands), dtype=np.float64)
    for u in range(len(ids)):
        _look_up(seg, loc, norm, k1p, bm25, ids[u], idfs[u], mults[u], cands, len(cands), out)
    return out


@njit(cache=True, nogil=True)
def _maxscore(seg, loc, norm, k1, bm25, max_weight, idf, ids, mults, k, mask, use_mask, partial, touched, budget):
    """MaxScore in one compiled call (every call from Python costs, the more so in a cold cache): the units' bounds
    and postings, the candidates, their scores in the query's order, the best k best first (ties by lower row)."""
    n = len(ids)
    ubs = np.empty(n, dtype=np.float64)
    idfs = np.empty(n, dtype=np.float64)
    cnt = np.empty(n, dtype=np.int64)
    for u in range(n):
        ubs[u] = max_weight[ids[u]] * mults[u]
        idfs[u] = idf[ids[u]]
        cnt[u] = _count(seg, loc, ids[u])
    order = np.argsort(-ubs, kind="mergesort")
    left = np.empty(n, dtype=np.float64)
    acc = 0.0
    for i in range(n - 1, -1, -1):
        acc += ubs[order[i]]
        left[i] = acc
    k1p = k1 + 1.0
    cands, ok = _candidates(seg, loc, norm, k1p, bm25, ids, idfs, mults, ubs, cnt, order, left, k, mask, use_mask,
                            partial, touched, budget)
    if not ok:
        return cands, np.empty(0, dtype=np.float64), False
    vals, best = _best_of(cands, _rescore(seg, loc, norm, k1p, bm25, ids, idfs, mults, cands), k)
    for i in range(1, len(best)):  # best first, ties by lower row (insertion sort: k is small)
        v, r = vals[i], best[i]
        j = i - 1
        while j >= 0 and _worse(vals[j], best[j], v, r):
            vals[j + 1] = vals[j]
            best[j + 1] = best[j]
            j -= 1
        vals[j + 1] = v
        best[j + 1] = r
    return best, vals, True


def maxscore(acc: ScoreAccumulator, k: int, mask: np.ndarray | None, segments: SegmentTable, loc: np.ndarray,
             norm: np.ndarray, k1: float, bm25: bool, max_weight: np.ndarray, idf: np.ndarray, ids: np.ndarray,
             mults: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """The ``k`` best non-zero rows that ``mask`` allows and their scores, for a query of single terms: unit ``u`` is
    term ``ids[u]`` (column ``loc[s, ids[u]]`` of segment ``s``, -1: none there), each posting's weight times
    ``mults[u]`` (every weight >= 0; a stored one, or tf weighed with ``idf[ids[u]]``, the rows' ``norm`` and ``k1``),
    at most ``max_weight[ids[u]] * mults[u]`` to a row; by MaxScore (see above): best first, ties by lower row, the
    scores those of a full accumulation bit for bit. ``acc``: a zeroed accumulator (MaxScore uses its ``partial`` and
    ``touched`` arrays and leaves ``partial`` zeroed). None when more rows would be listed than the accumulator lists
    (a query of common terms only): accumulate it whole instead."""
    if acc.n:
        raise ValueError("maxscore needs a zeroed accumulator")
    best, vals, ok = _maxscore(segments.table, loc, norm, float(k1), bool(bm25), readonly(max_weight), readonly(idf),
                               ids, mults, k, _mask(mask), mask is not None, acc.partial, acc.touched, acc.cap)
    return (best, vals) if ok else None


_warm = False


def warm() -> None:
    """Compile (or load from numba's cache) MaxScore for the arrays an index gives it: a build's one segment of
    stored weights and a generation's segments of tf; once per process (:func:`service.startup.warm_kernels`)."""
    global _warm
    if _warm:
        return
    one = readonly(np.array([1.0]))
    ids, mults = np.array([0], dtype=np.int64), np.array([1.0])
    acc = ScoreAccumulator(3)
    rows, indptr = np.array([0, 1], dtype=np.int32), np.array([0, 2], dtype=np.int64)
    stored = (SegmentTable([rows], [np.array([1, 2], dtype=np.int32)], [indptr], [np.zeros(0, dtype=np.bool_)], [3],
                           weights=[np.array([0.5, 1.5])]), readonly(np.zeros((1, 0), dtype=np.int32)))
    held = SegmentTable([np.array([0, 1], dtype=np.int32), np.array([0], dtype=np.int32)],
                        [np.array([1, 2], dtype=np.int32), np.array([3], dtype=np.int32)],
                        [np.array([0, 2], dtype=np.int64), np.array([0, 1], dtype=np.int64)],
                        [np.zeros(0, dtype=np.bool_), np.array([False])], [2, 1])
    weighed = held, readonly(np.zeros((2, 1), dtype=np.int32))
    for table, loc in (stored, weighed):
        for m in (None, np.ones(3, dtype=np.bool_)):
            maxscore(acc, 1, m, table, loc, readonly(np.ones(3)), 1.2, True, one, one, ids, mults)
    _warm = True
