"""The accumulator a first stage's scores go into, and its compiled loops (numba): the top k, the routes merged on one
scale, and the arrays of a generation's join. The loops that read an index's postings into it (every index is read
as a table of segments: one build is one) are :mod:`service.retrieval.segment_kernels`'s and, for MaxScore,
:mod:`service.retrieval.maxscore`'s.

A query's scores go into a :class:`ScoreAccumulator`: a zeroed score array kept between queries (an
:class:`AccumulatorPool` per first stage lends them out). While the rows a query reaches are few, the kernels that
add into it list them (``touched``; ``seen`` marks them), and the top k, the routes' statistics and merge and the
reset after the query walk those rows only; a query that reaches many rows is scanned row by row. A one-route query
of single terms for a small k is searched by MaxScore (:mod:`service.retrieval.maxscore`, one for every index): its
long posting lists of common terms are looked up only for the rows that can still reach the top k.

They compute exactly what the numpy code before them did, e.g.:

- a query's postings are added term after term and posting after posting, ``weight * mult`` (or the weight itself
  when ``mult`` is 1) into the row's score: the additions of ``np.add.at`` in the same order, so the scores are
  bit-identical; MaxScore adds each last candidate's weights in that order too.
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
    rows (:func:`_top_k`, the segments' ``_top_k_bounded``, MaxScore's ``_kth_listed``) write its test out in their loop
    instead: a call per row there, inlined or not, is measurably slower (``priorart-lab bench first-stage``)."""
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


class ScoreAccumulator:
    """One query's scores per row (``scores``; rows it did not reach hold 0), kept between queries.

    While the rows reached are few (at most ``n_rows * TRACK_FRACTION``) it lists them (:attr:`rows`), and the top k,
    the route statistics, the merge and :meth:`reset` walk those rows only; an add that would reach more turns the
    listing off (``tracking`` False), and they scan every row (one pass each, in row order) and the reset zeroes
    the arrays whole. ``winner`` (the route whose score a row has, -1 for none) exists on the accumulator that merges
    routes (:meth:`merge`); ``partial`` (float32, zeros between queries) is MaxScore's
    (:mod:`service.retrieval.maxscore`). Not thread-safe: one query at a time (:class:`AccumulatorPool` lends one
    to each)."""

    TRACK_FRACTION = 0.25

    def __init__(self, n_rows: int) -> None:
        self.n_rows = n_rows
        self.scores = np.zeros(n_rows, dtype=np.float64)
        self.seen = np.zeros(n_rows, dtype=np.uint8)
        self.touched = np.empty(n_rows + 1, dtype=np.int32)  # one spare: the branch-free append writes past the end
        self.partial = np.zeros(n_rows, dtype=np.float32)  # MaxScore's partial scores (service/retrieval/maxscore.py)
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
        """Zeros, one per row, for a PSQ unit's expected tf (:mod:`service.retrieval.segment_kernels`, which leaves
        them zeroed)."""
        if self._scratch is None:
            self._scratch = np.zeros(self.n_rows, dtype=np.float64)
        return self._scratch

    @property
    def row_scratch(self) -> np.ndarray:
        """Room for every row and one (int32), for the rows a PSQ unit reaches
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
    acc, merged = ScoreAccumulator(4), ScoreAccumulator(4)
    tf = np.array([1, 3], dtype=np.int32)
    indptr = np.array([0, 2], dtype=np.int64)
    for r in (rows, np.array([1, 2], dtype=np.int64)):
        acc.add_values(r, np.array([1.0, 2.0]))
    max_per_term(indptr, weights)
    dead = np.zeros(3, dtype=np.bool_)  # a live generation's join (SparseIndex.join)
    live_lengths(indptr, rows, dead)
    out_rows, out_tf = np.empty(2, np.int32), np.empty(2, np.int32)
    scatter_columns(indptr, rows, tf, dead, np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64), 0, out_rows,
                    out_tf)
    mask = np.ones(4, dtype=np.bool_)
    for m in (None, mask):
        acc.top_k(1, m)
        acc.top_k(1, m, nonzero=False)
        acc.matched_max(m)
        merged.merge(acc, m, 2.0, 0)
    merged.top_k(1, nonzero=False)
    merged.reset()
    acc.reset()
    listed = ScoreAccumulator(16)  # rows still listed at the reset (the 4-row ones above stopped listing: cap 1)
    listed.add_values(np.array([1, 2], dtype=np.int64), np.array([1.0, 2.0]))
    listed.reset()
    _warm = True
