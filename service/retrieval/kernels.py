"""Compiled loops of the first stage (numba) and the accumulator they fill: postings into scores, a PSQ unit's
expected tf and BM25 term, the top k, the routes merged on one scale, MaxScore, and which query terms a row contains.

A query's scores go into a :class:`ScoreAccumulator`: a zeroed score array kept between queries (an
:class:`AccumulatorPool` per first stage lends them out). While the rows a query reaches are few, the kernels that
add into it list them (``touched``; ``seen`` marks them), and the top k, the routes' statistics and merge and the
reset after the query walk those rows only; a query that reaches many rows is scanned row by row. A one-route query
of single terms for a small k is searched by MaxScore (:func:`maxscore`): its long posting lists of common terms are
looked up only for the rows that can still reach the top k.

They compute exactly what the numpy code before them did, e.g.:

- :meth:`ScoreAccumulator.add_postings` adds, term after term and posting after posting, ``weights[j] * mult`` (or
  the stored weight itself when ``mult`` is 1) into ``scores[rows[j]]``: the additions of ``np.add.at`` in the same
  order, so the scores are bit-identical; :func:`maxscore` adds each last candidate's weights in that order too.
- :meth:`ScoreAccumulator.top_k` is ``top_k(scores, k, (scores != 0) & mask)`` with the count of the rows that mask
  allows: one pass over the listed (or all) rows with a heap of ``k`` (ties go to the lower row, whatever order the
  rows were reached in).

The functions are compiled at first use (about a second) and cached on disk by numba
(``NUMBA_CACHE_DIR`` when the package folder is read-only); a server calls :func:`warm` at start-up
(:func:`service.startup.warm_kernels`, for each shard replica too), so a first query does not pay it. A process that
only writes an index (``build``, ``add``) loads none of them. They release the GIL (``nogil``).
"""

from __future__ import annotations

import threading

import numpy as np
from numba import njit

from service.index.arrays import readonly

# Every index array goes into a kernel read-only (``readonly``, a view): numba compiles a kernel once per combination
# of argument types, writable and read-only arrays being different types, and an index's arrays are read-only when
# memory-mapped but writable when built or joined in memory; one kind means one variant per kernel (and dtypes) to
# compile at a cold start, not one per combination.
_NO_MASK = readonly(np.zeros(0, dtype=np.bool_))
_NO_WINNER = np.zeros(0, dtype=np.int16)


def _mask(mask: np.ndarray | None) -> np.ndarray:
    """A kernel's ``mask`` argument: read-only, an empty one for none."""
    return _NO_MASK if mask is None else readonly(mask)


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
    return _expected_tf(scratch, readonly(rows), readonly(tf), los, his, probs)


@njit(cache=True, nogil=True)
def lower_bound(a, lo, hi, x):
    """The first position in ``[lo, hi)`` whose value is >= ``x`` (``hi`` when none), ``a[lo:hi]`` increasing: a
    bisection (compiled: call it from compiled code). The passage kernels' look-up of a query term keeps its own
    loop: calling this from there measured 3-5 % slower per /passages (``priorart-lab bench passages``, 100k)."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


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
            a = lower_bound(postings, lo, hi, r)
            found[i, j] = a < hi and postings[a] == r
    return found


def contains(indptr: np.ndarray, postings: np.ndarray, term_ids: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``found[i, j]``: row ``rows[i]`` is in the (sorted) postings of term ``term_ids[j]``."""
    return _contains(readonly(indptr), readonly(postings), term_ids, rows)


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
def _live_lengths(indptr, rows, dead):
    out = np.zeros(len(indptr) - 1, dtype=np.int64)
    for t in range(len(indptr) - 1):
        n = 0
        for j in range(indptr[t], indptr[t + 1]):
            if not dead[rows[j]]:
                n += 1
        out[t] = n
    return out


def live_lengths(indptr: np.ndarray, rows: np.ndarray, dead: np.ndarray) -> np.ndarray:
    """Per column of a segment, its postings whose row is not ``dead`` (a mask over the segment's rows)."""
    return np.asarray(_live_lengths(readonly(np.asarray(indptr, dtype=np.int64)), readonly(np.asarray(rows)),
                                    readonly(np.asarray(dead, dtype=np.bool_))))


@njit(cache=True, nogil=True)
def _scatter_columns(indptr, rows, tf, dead, cols, dst, row_offset, out_rows, out_tf):
    use_dead = len(dead) > 0
    for k in range(len(cols)):
        t = cols[k]
        d = dst[k]
        for j in range(indptr[t], indptr[t + 1]):
            if use_dead and dead[rows[j]]:
                continue
            out_rows[d] = rows[j] + row_offset
            out_tf[d] = tf[j]
            d += 1


def scatter_columns(indptr: np.ndarray, rows: np.ndarray, tf: np.ndarray, dead: np.ndarray, cols: np.ndarray,
                    dst: np.ndarray, row_offset: int, out_rows: np.ndarray, out_tf: np.ndarray) -> None:
    """Copy the columns ``cols[k]`` of a segment (``rows``/``tf`` in ``[indptr[t], indptr[t + 1])``, but the postings
    of ``dead`` rows: a mask over the segment's rows, or empty) to ``dst[k]`` onwards in ``out_rows``/``out_tf``,
    their rows moved by ``row_offset`` (:meth:`SparseIndex.join`: a joined column is the segments' columns one after
    the other)."""
    _scatter_columns(readonly(np.asarray(indptr, dtype=np.int64)), readonly(np.asarray(rows)),
                     readonly(np.asarray(tf)), readonly(np.asarray(dead, dtype=np.bool_)),
                     readonly(np.asarray(cols, dtype=np.int64)), readonly(np.asarray(dst, dtype=np.int64)),
                     np.int64(row_offset), out_rows, out_tf)


@njit(cache=True, nogil=True)
def _max_per_term(indptr, weights):
    out = np.zeros(len(indptr) - 1, dtype=np.float64)
    for t in range(len(indptr) - 1):
        best = 0.0
        for j in range(indptr[t], indptr[t + 1]):
            if j == indptr[t] or weights[j] > best:
                best = weights[j]
        out[t] = best
    return out


def max_per_term(indptr: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """The largest weight of each term's postings (0 for a term without postings)."""
    return _max_per_term(readonly(indptr), readonly(weights))


# ---------------------------------------------------------------------------- into the accumulator
# Every add returns the number of rows listed. While ``track``, a row reached for the first time is listed:
# ``touched[nt] = r; nt += 1 - seen[r]``, branch-free (written always, kept when the row is new; a branch would be
# mispredicted on a good part of the postings).


@njit(cache=True, nogil=True)
def _acc_postings(scores, seen, touched, nt, track, rows, weights, los, his, mults):
    for i in range(len(los)):
        m = mults[i]
        if m == 1.0:
            if track:
                for j in range(los[i], his[i]):
                    r = rows[j]
                    touched[nt] = r
                    nt += 1 - seen[r]
                    seen[r] = 1
                    scores[r] += weights[j]
            else:
                for j in range(los[i], his[i]):
                    scores[rows[j]] += weights[j]
        elif track:
            for j in range(los[i], his[i]):
                r = rows[j]
                touched[nt] = r
                nt += 1 - seen[r]
                seen[r] = 1
                scores[r] += weights[j] * m
        else:
            for j in range(los[i], his[i]):
                scores[rows[j]] += weights[j] * m
    return nt


@njit(cache=True, nogil=True)
def _acc_bm25(scores, seen, touched, nt, track, rows, tf_e, doc_norm, idf, k1, weight):
    k1p1 = k1 + 1.0
    for i in range(len(rows)):
        r = rows[i]
        tf = tf_e[i]
        if track:
            touched[nt] = r
            nt += 1 - seen[r]
            seen[r] = 1
        scores[r] += weight * (idf * (tf * k1p1 / (tf + doc_norm[r])))
    return nt


@njit(cache=True, nogil=True)
def _acc_values(scores, seen, touched, nt, track, rows, values):
    for i in range(len(rows)):
        r = rows[i]
        if track:
            touched[nt] = r
            nt += 1 - seen[r]
            seen[r] = 1
        scores[r] += values[i]
    return nt


# ---------------------------------------------------------------------------- out of the accumulator
# ``dense``: every row (in increasing order) instead of the listed ones.


@njit(cache=True, nogil=True)
def _offer(hs, hr, size, k, s, r):
    """Keep (s, r) in the heap of the k best seen so far (``size`` kept); returns the new size. The scans over many
    rows (:func:`_top_k`, :func:`_top_k_bounded`, :func:`_kth_listed`) write its test out in their loop instead: a
    call per row there, inlined or not, is measurably slower (``priorart-lab bench first-stage``)."""
    if size < k:
        hs[size] = s
        hr[size] = r
        _sift_up(hs, hr, size)
        return size + 1
    if _worse(hs[0], hr[0], s, r):
        hs[0] = s
        hr[0] = r
        _sift_down(hs, hr, size, 0)
    return size


@njit(cache=True, nogil=True)
def _qualifies(s, r, seen, mask, use_mask, nonzero):
    if nonzero:
        if s == 0.0:
            return False
    elif not seen[r]:
        return False
    return not (use_mask and not mask[r])


@njit(cache=True, nogil=True)
def _top_k(scores, seen, touched, nt, dense, k, mask, use_mask, nonzero):
    """The k best (score, lower row) of the rows that ``mask`` allows and that score non-zero (``nonzero``) or were
    reached (``seen``), in any order. Once k are kept, a row is looked at further only when it beats the worst kept
    (rarely, and predictably so: a test of every row for whether it qualifies was mispredicted on many of them)."""
    hs = np.empty(k, dtype=np.float64)
    hr = np.empty(k, dtype=np.int64)
    size = 0
    n = len(scores) if dense else nt
    for i in range(n):
        r = i if dense else int(touched[i])
        s = scores[r]
        if size == k:
            if not _worse(hs[0], hr[0], s, r) or not _qualifies(s, r, seen, mask, use_mask, nonzero):
                continue  # (most rows, once k are kept, at the first test)
            hs[0] = s
            hr[0] = r
            _sift_down(hs, hr, size, 0)
        elif _qualifies(s, r, seen, mask, use_mask, nonzero):
            size = _offer(hs, hr, size, k, s, r)
    return hs[:size], hr[:size]


@njit(cache=True, nogil=True)
def _top_k_bounded(scores, seen, rows, los, his, starts, ubs, k, mask, use_mask):
    """The k best non-zero rows of fully accumulated ``scores``, enumerating the rows of the query's units in the
    given order (units ``u`` own the posting ranges ``[los[j], his[j])`` for ``j`` in ``[starts[u], starts[u+1])``)
    and stopping once no row left can enter: ``ubs[u]`` bounds what units ``u, u+1, ...`` together can give a row
    (MaxScore, Turtle & Flood 1995), so a row reached only by them scores below the k-th best found when that bound
    is (with a margin for rounding) below it. Marks the rows it enumerated in ``seen``. Returns the heap."""
    hs = np.empty(k, dtype=np.float64)
    hr = np.empty(k, dtype=np.int64)
    size = 0
    for u in range(len(starts) - 1):
        if size == k and hs[0] > 0.0 and ubs[u] * (1.0 + 1e-9) < hs[0]:
            break
        for j in range(starts[u], starts[u + 1]):
            for p in range(los[j], his[j]):
                r = np.int64(rows[p])
                if seen[r]:
                    continue
                seen[r] = 1
                s = scores[r]
                if s == 0.0 or (use_mask and not mask[r]):
                    continue
                if size < k:  # (_offer, written out: see there)
                    hs[size] = s
                    hr[size] = r
                    _sift_up(hs, hr, size)
                    size += 1
                elif _worse(hs[0], hr[0], s, r):
                    hs[0] = s
                    hr[0] = r
                    _sift_down(hs, hr, size, 0)
    return hs[:size], hr[:size]


@njit(cache=True, nogil=True)
def _matched_max(scores, touched, nt, dense, mask, use_mask):
    """How many rows score non-zero and pass ``mask``, and their best score (0 when none); branch-free (a row every
    way goes through the same instructions: vectorised over every row when ``dense``)."""
    found = 0
    best = -np.inf
    n = len(scores) if dense else nt
    if use_mask:
        for i in range(n):
            r = i if dense else int(touched[i])
            s = scores[r]
            ok = (s != 0.0) & mask[r]
            found += ok
            best = max(best, s if ok else -np.inf)
    else:
        for i in range(n):
            s = scores[i if dense else int(touched[i])]
            ok = s != 0.0
            found += ok
            best = max(best, s if ok else -np.inf)
    return found, (best if found else 0.0)


@njit(cache=True, nogil=True)
def _merge(final, winner, fseen, ftouched, fnt, ftrack, scores, touched, nt, dense, mask, use_mask, norm, route, slope,
           knee):
    """Routes merged on one scale: a row's ``final`` is its best ``score / norm`` over the routes that matched it
    (non-zero, allowed by ``mask``; ``fseen`` marks every such row), ``winner`` the route that gave it; the first
    route to reach a score keeps it on a tie. ``slope`` (1: none): the part of ``score / norm`` above ``knee`` is
    multiplied by it (a translated route's saturation ceiling brought down to the own route's). Branch-free in the
    dense case (vectorised over every row)."""
    bend = slope != 1.0
    if dense and not ftrack:
        for r in range(len(scores)):
            s = scores[r]
            ok = (s != 0.0) & (mask[r] if use_mask else True)
            normed = s / norm
            normed = knee + (normed - knee) * slope if bend and normed > knee else normed
            better = ok & (normed > final[r])
            final[r] = normed if better else final[r]
            winner[r] = route if better else winner[r]
            fseen[r] |= ok
        return fnt
    n = len(scores) if dense else nt
    for i in range(n):
        r = i if dense else int(touched[i])
        s = scores[r]
        if s == 0.0 or (use_mask and not mask[r]):
            continue
        normed = s / norm
        if bend and normed > knee:
            normed = knee + (normed - knee) * slope
        if normed > final[r]:
            final[r] = normed
            winner[r] = route
        if ftrack:
            ftouched[fnt] = r
            fnt += 1 - fseen[r]
        fseen[r] = 1
    return fnt


@njit(cache=True, nogil=True)
def _unmark(seen, touched, nt):
    for i in range(nt):
        seen[touched[i]] = 0


@njit(cache=True, nogil=True)
def _reset(scores, seen, winner, has_winner, touched, nt):
    for i in range(nt):
        r = touched[i]
        scores[r] = 0.0
        seen[r] = 0
        if has_winner:
            winner[r] = -1


# ---------------------------------------------------------------------------- MaxScore (one route of single terms)
# A query of single terms for a small k (service.retrieval.sparse.SparseIndex.search): the units that can add most
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
def _look_up(rows, weights, lo, hi, mu, cands, c, part):
    """``part[j] += weight * mu`` of each (increasing) candidate row found in the postings ``[lo, hi)``."""
    p = lo
    for j in range(c):
        p = _gallop(rows, p, hi, cands[j])
        if p >= hi:
            break
        if rows[p] == cands[j]:
            part[j] += weights[p] if mu == 1.0 else weights[p] * mu
            p += 1


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
def _candidates(rows, weights, los, his, mults, ubs, order, left, k, mask, use_mask, partial, touched, budget):
    """The candidates of MaxScore (see above), in increasing order, or ``ok`` False when more than ``budget`` rows
    would be listed. ``order``: the units, those that can add most first; ``left[i]``: what ``order[i:]`` can add to
    a row together. Partial scores only grow (every weight is >= 0), so the k-th best partial score (theta, lowered by
    the float32 bound) is a lower bound of the k-th best score, and a row whose partial score plus what its units left
    can add is below it is out. The units added whole go into ``partial`` (float32 zeros, one per row: left zeroed),
    listing the rows they reach in ``touched`` (room for ``budget`` + 1 rows)."""
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
        if not essential and his[u] - los[u] > LOOKUP_RATIO * nt:
            continue  # looked up below
        whole[u] = True
        if ubs[u] == 0.0:
            continue  # adds 0 to every row (the last rows' scores still add its zeros, in order)
        if nt + (his[u] - los[u]) > budget:
            ok = False
            break
        mu = mults[u]
        for j in range(los[u], his[u]):
            r = rows[j]
            s0 = partial[r]
            touched[nt] = r  # branch-free: written always, kept when the row is new (its partial score still 0)
            nt += s0 == 0.0
            s = s0 + max(np.float32(weights[j] if mu == 1.0 else weights[j] * mu), TINY32)
            partial[r] = s
            top = max(top, s)
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
                _look_up(rows, weights, los[u], his[u], mults[u], at, picked, best)
        theta = max(theta, _lowered(_kth_value(best, picked, k), eps, tiny))
        c = _keep(cands, part, c, rest, theta, eps)
    for i in range(m):  # the units left, those that can add most first, looked up for the candidates left
        u = order[i]
        if whole[u]:
            continue
        _look_up(rows, weights, los[u], his[u], mults[u], cands, c, part)
        rest -= ubs[u]
        if c >= k:
            theta = max(theta, _lowered(_kth_value(part, c, k), eps, tiny))
            have = True
        if have:
            c = _keep(cands, part, c, max(rest, 0.0), theta, eps)
    return cands[:c], True


@njit(cache=True, nogil=True)
def _rescore(cands, rows, weights, los, his, mults):
    """Each candidate's score, added unit after unit in the query's order (the accumulator's additions for that row,
    bit for bit): its posting in each unit found by a galloping search over the (increasing) rows."""
    out = np.zeros(len(cands), dtype=np.float64)
    for u in range(len(los)):
        p = los[u]
        hi = his[u]
        mu = mults[u]
        for i in range(len(cands)):
            p = _gallop(rows, p, hi, cands[i])
            if p >= hi:
                break
            if rows[p] == cands[i]:
                out[i] += weights[p] if mu == 1.0 else weights[p] * mu
                p += 1
    return out


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
def _maxscore(rows, weights, indptr, max_weight, ids, mults, k, mask, use_mask, partial, touched, budget):
    """MaxScore in one compiled call (every call from Python costs, the more so in a cold cache): the units' posting
    ranges and bounds, the candidates, their scores in the query's order, the best k best first (ties by lower row)."""
    los = np.empty(len(ids), dtype=np.int64)
    his = np.empty(len(ids), dtype=np.int64)
    ubs = np.empty(len(ids), dtype=np.float64)
    for u in range(len(ids)):
        los[u] = indptr[ids[u]]
        his[u] = indptr[ids[u] + 1]
        ubs[u] = max_weight[ids[u]] * mults[u]
    order = np.argsort(-ubs, kind="mergesort")
    left = np.empty(len(order), dtype=np.float64)
    acc = 0.0
    for i in range(len(order) - 1, -1, -1):
        acc += ubs[order[i]]
        left[i] = acc
    cands, ok = _candidates(rows, weights, los, his, mults, ubs, order, left, k, mask, use_mask, partial, touched,
                            budget)
    if not ok:
        return cands, np.empty(0, dtype=np.float64), False
    vals, best = _best_of(cands, _rescore(cands, rows, weights, los, his, mults), k)
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


def maxscore(acc: ScoreAccumulator, k: int, mask: np.ndarray | None, rows: np.ndarray, weights: np.ndarray,
             indptr: np.ndarray, max_weight: np.ndarray, ids: np.ndarray,
             mults: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """The ``k`` best non-zero rows that ``mask`` allows and their scores, for a query of single terms: unit ``u`` adds
    ``weights[j] * mults[u]`` for ``j`` in ``[indptr[ids[u]], indptr[ids[u] + 1])`` (every weight >= 0), at most
    ``max_weight[ids[u]] * mults[u]`` to a row; by MaxScore (Turtle & Flood 1995; see above): best first, ties by lower
    row, the scores those of a full accumulation bit for bit. ``acc``: a zeroed accumulator (MaxScore uses its
    ``partial`` and ``touched`` arrays and leaves ``partial`` zeroed). None when more rows would be listed than the
    accumulator lists (a query of common terms only): accumulate it whole instead."""
    if acc.n:
        raise ValueError("maxscore needs a zeroed accumulator")
    best, vals, ok = _maxscore(readonly(rows), readonly(weights), readonly(indptr), max_weight, ids, mults, k,
                               _mask(mask), mask is not None, acc.partial, acc.touched, acc.cap)
    return (best, vals) if ok else None


class ScoreAccumulator:
    """One query's scores per row (``scores``; rows it did not reach hold 0), kept between queries.

    While the rows reached are few (at most ``n_rows * TRACK_FRACTION``) it lists them (:attr:`rows`), and the top k,
    the route statistics, the merge and :meth:`reset` walk those rows only; an add that would reach more turns the
    listing off (``tracking`` False), and they scan every row (one pass each, in row order) and the reset zeroes
    the arrays whole. ``winner`` (the route whose score a row has, -1 for none) exists on the accumulator that merges
    routes (:meth:`merge`); ``partial`` (float32, zeros between queries) is :func:`maxscore`'s. Not thread-safe: one
    query at a time (:class:`AccumulatorPool` lends one to each)."""

    TRACK_FRACTION = 0.25

    def __init__(self, n_rows: int) -> None:
        self.n_rows = n_rows
        self.scores = np.zeros(n_rows, dtype=np.float64)
        self.seen = np.zeros(n_rows, dtype=np.uint8)
        self.touched = np.empty(n_rows + 1, dtype=np.int32)  # one spare: the branch-free append writes past the end
        self.partial = np.zeros(n_rows, dtype=np.float32)  # MaxScore's partial scores (see :func:`maxscore`)
        self.n = 0  # rows listed in ``touched``
        self.tracking = True
        self.cap = int(n_rows * self.TRACK_FRACTION)
        self._scratch: np.ndarray | None = None  # zeros for a PSQ unit's expected tf, made on first use
        self._row_scratch: np.ndarray | None = None  # the rows a PSQ unit reaches (segments searched in place)
        self.winner: np.ndarray | None = None
        self._seen_dirty = False  # ``seen`` holds marks that ``touched`` does not list (reset zeroes it whole)

    @property
    def rows(self) -> np.ndarray:
        """The rows reached, in the order they were first reached (a view; only while :attr:`tracking`)."""
        if not self.tracking:
            raise RuntimeError("the accumulator stopped listing its rows (too many): scan the scores instead")
        return self.touched[: self.n]

    @property
    def scratch(self) -> np.ndarray:
        """Zeros, one per row, for :func:`expected_tf` (which leaves them zeroed)."""
        if self._scratch is None:
            self._scratch = np.zeros(self.n_rows, dtype=np.float64)
        return self._scratch

    @property
    def row_scratch(self) -> np.ndarray:
        """Room for every row and one (int32), for the rows a PSQ unit of a segmented index reaches
        (:mod:`service.retrieval.segment_kernels`)."""
        if self._row_scratch is None:
            self._row_scratch = np.empty(self.n_rows + 1, dtype=np.int32)
        return self._row_scratch

    def unmark(self) -> None:
        """Before a bounded top k marks the rows it enumerates in ``seen``: clear the marks of the rows listed before
        the listing stopped (the reset then zeroes ``seen`` whole)."""
        if self.n and not self._seen_dirty:
            _unmark(self.seen, self.touched, self.n)
        self._seen_dirty = True

    def _track(self, reach: int) -> bool:
        """Whether the next add (of ``reach`` values) is listed; off for good once the rows could exceed the cap."""
        if self.tracking and self.n + reach > self.cap:
            self.tracking = False
        return self.tracking

    def add_postings(self, rows: np.ndarray, weights: np.ndarray, los: np.ndarray, his: np.ndarray,
                     mults: np.ndarray) -> None:
        """``scores[rows[j]] += weights[j] * mults[i]`` for ``j`` in ``[los[i], his[i])``, term ``i`` by term ``i``
        (the stored weight itself when ``mults[i]`` is 1)."""
        track = self._track(int((his - los).sum()))
        self.n = _acc_postings(self.scores, self.seen, self.touched, self.n, track, readonly(rows), readonly(weights),
                               los, his, mults)

    def add_bm25(self, rows: np.ndarray, tf_e: np.ndarray, doc_norm: np.ndarray, idf: float, k1: float,
                 weight: float) -> None:
        """``scores[rows] += weight * idf * tf (k1 + 1) / (tf + doc_norm[rows])`` (rows distinct): a PSQ unit's BM25
        term, the operations of ``_term_weight`` in its order (bit-identical)."""
        track = self._track(len(rows))
        self.n = _acc_bm25(self.scores, self.seen, self.touched, self.n, track, readonly(rows), tf_e,
                           readonly(doc_norm), float(idf), float(k1), float(weight))

    def add_values(self, rows: np.ndarray, values: np.ndarray) -> None:
        """``scores[rows] += values`` (rows distinct)."""
        track = self._track(len(rows))
        self.n = _acc_values(self.scores, self.seen, self.touched, self.n, track, readonly(rows), values)

    def top_k(self, k: int, mask: np.ndarray | None = None, *, nonzero: bool = True) -> np.ndarray:
        """The ``k`` best rows that ``mask`` allows and that score non-zero (``nonzero``; else: that were reached, by
        :meth:`merge`), best first, ties by lower row."""
        vals, rows = _top_k(self.scores, self.seen, self.touched, self.n, not self.tracking, k, _mask(mask),
                            mask is not None, nonzero)
        return _best_first(vals, rows)

    def top_k_bounded(self, k: int, mask: np.ndarray | None, rows: np.ndarray, los: np.ndarray, his: np.ndarray,
                      starts: np.ndarray, ubs: np.ndarray) -> np.ndarray:
        """:meth:`top_k`'s rows (non-zero) by the query's postings, their units' best first, stopping where the
        units left cannot lift a row into the top ``k`` (see ``_top_k_bounded``; ``ubs[u]``: the most units ``u``
        and after can add to a row's score). The scores must be complete (every unit added)."""
        self.unmark()
        vals, out = _top_k_bounded(self.scores, self.seen, readonly(rows), los, his, starts, ubs, k, _mask(mask),
                                   mask is not None)
        return _best_first(vals, out)

    def matched(self, mask: np.ndarray | None = None) -> int:
        """How many rows score non-zero and pass ``mask``."""
        return self.matched_max(mask)[0]

    def matched_max(self, mask: np.ndarray | None = None) -> tuple[int, float]:
        """How many rows score non-zero and pass ``mask``, and their best score (0.0 when none)."""
        n, best = _matched_max(self.scores, self.touched, self.n, not self.tracking, _mask(mask), mask is not None)
        return int(n), float(best)

    def merge(self, route: ScoreAccumulator, mask: np.ndarray | None, norm: float, index: int, slope: float = 1.0,
              knee: float = 1.0) -> None:
        """Merge a route's scores on one scale: every row it matched (non-zero, allowed by ``mask``) is reached here,
        with the best ``score / norm`` of the routes merged so far; ``winner[row] = index`` where this route's is
        better (the first route merged keeps a tie). ``slope``: what is above ``knee`` after the division is
        multiplied by it."""
        if self.winner is None:
            self.winner = np.full(self.n_rows, -1, dtype=np.int16)
        track = self._track(route.n if route.tracking else self.n_rows)
        self.n = _merge(self.scores, self.winner, self.seen, self.touched, self.n, track, route.scores,
                        route.touched, route.n, not route.tracking, _mask(mask), mask is not None, float(norm),
                        index, float(slope), float(knee))

    def reset(self) -> None:
        """Zero the scores (and marks, winners) of the rows reached, so the next query starts from zeros."""
        if self.n == 0 and self.tracking and not self._seen_dirty:
            return  # nothing was added (or MaxScore used the arrays and left them zeroed)
        if self.tracking and not self._seen_dirty:
            _reset(self.scores, self.seen, _NO_WINNER if self.winner is None else self.winner,
                   self.winner is not None, self.touched, self.n)
        else:
            self.scores.fill(0.0)
            self.seen.fill(0)
            if self.winner is not None:
                self.winner.fill(-1)
        self.n = 0
        self.tracking = True
        self._seen_dirty = False


def _best_first(vals: np.ndarray, rows: np.ndarray) -> np.ndarray:
    return rows[np.lexsort((rows, -vals))]


class AccumulatorPool:
    """Accumulators of ``n_rows`` rows, lent to queries and taken back zeroed (thread-safe). It keeps as many as the
    most queries that ran at once needed (each about 21 bytes per row)."""

    def __init__(self, n_rows: int) -> None:
        self.n_rows = n_rows
        self._free: list[ScoreAccumulator] = []
        self._lock = threading.Lock()

    def take(self, count: int) -> list[ScoreAccumulator]:
        """``count`` zeroed accumulators; give them back with :meth:`give` (in a ``finally``)."""
        free = self._free
        with self._lock:
            cut = max(len(free) - count, 0)
            taken = free[cut:]
            del free[cut:]
        while len(taken) < count:
            taken.append(ScoreAccumulator(self.n_rows))
        return taken

    def give(self, taken: list[ScoreAccumulator]) -> None:
        """Reset the accumulators :meth:`take` lent and keep them for the next queries."""
        for acc in taken:
            acc.reset()
        with self._lock:
            self._free.extend(taken)


_warm = False


def warm() -> None:
    """Compile (or load from numba's cache) every kernel for the arrays an index gives it (read-only, see
    ``_NO_MASK``; rows of either dtype where both occur). Once per process; a server calls it at start-up
    (:func:`service.startup.warm_kernels`); elsewhere a kernel is read from numba's cache (or compiled) at its first
    use."""
    global _warm
    if _warm:
        return
    rows, weights = np.array([1, 2], dtype=np.int32), np.array([0.5, 1.5])
    bounds = np.array([0], dtype=np.int64), np.array([2], dtype=np.int64), np.array([1.0])
    acc, merged = ScoreAccumulator(4), ScoreAccumulator(4)
    acc.add_postings(rows, weights, *bounds)
    tf = np.array([1, 3], dtype=np.int32)
    indptr, ids, at = np.array([0, 2], dtype=np.int64), np.array([0], dtype=np.int64), np.array([2], dtype=np.int64)
    contains(indptr, rows, ids, at)
    expected_tf(np.zeros(4), rows, tf, *bounds)
    for r in (rows, np.array([1, 2], dtype=np.int64)):
        acc.add_bm25(r, np.array([1.0, 2.0]), np.ones(4), 1.0, 1.2, 1.0)
        acc.add_values(r, np.array([1.0, 2.0]))
    max_per_term(indptr, weights)
    dead = np.zeros(3, dtype=np.bool_)  # a live generation's join (SparseIndex.join)
    live_lengths(indptr, rows, dead)
    out_rows, out_tf = np.empty(2, np.int32), np.empty(2, np.int32)
    scatter_columns(indptr, rows, tf, dead, np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64), 0, out_rows,
                    out_tf)
    mask = np.ones(4, dtype=np.bool_)
    starts = np.array([0, 1], dtype=np.int64)
    two_units = np.array([0, 1], dtype=np.int64), np.array([1, 2], dtype=np.int64), np.array([0, 1, 2], dtype=np.int64)
    for m in (None, mask):
        acc.top_k(1, m)
        acc.top_k(1, m, nonzero=False)
        acc.matched_max(m)
        merged.merge(acc, m, 2.0, 0)
        acc.top_k_bounded(1, m, rows, bounds[0], bounds[1], starts, np.array([1.0]))
        # two units, their bounds reversed as SparseIndex gives them (a view of negative stride: layout 'A')
        acc.top_k_bounded(1, m, rows, *two_units, np.cumsum(np.array([1.5, 0.5])[::-1])[::-1])
    merged.top_k(1, nonzero=False)
    merged.reset()
    acc.reset()
    listed = ScoreAccumulator(16)  # rows still listed at the reset (the 4-row ones above stopped listing: cap 1)
    listed.add_values(np.array([1, 2], dtype=np.int64), np.array([1.0, 2.0]))
    listed.reset()
    for m in (None, mask):
        maxscore(acc, 1, m, rows, weights, indptr, np.array([1.5]), np.array([0], dtype=np.int64), np.array([1.0]))
    _warm = True
