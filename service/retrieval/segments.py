"""A live generation's sparse index of one language, its segments searched where they lie (issue 32, item 2).

A generation after ``priorart add`` is a run of segments (service/index/live.py), each with its own sparse index
(raw tf and lengths; its stored weights were computed with its own statistics and are not read here). Opening the
generation maps each segment's arrays (a segment the running process opened already is reused:
``first_stage.open_sparse``) and sums the generation's statistics, cheaply: the vocabulary (first appearance,
segment after segment, as :meth:`service.retrieval.sparse.SparseIndex.join` numbers it), each term's live document
frequency, idf and the BM25 floor, each row's length and length norm, ``N`` and ``avgdl``. Nothing is copied: a
query reads its terms' postings in every segment that holds them, computes each posting's weight with the
generation's statistics as it reads it, passes over deleted rows (a mask per segment) and adds into one accumulator
of the generation's rows (:mod:`service.retrieval.segment_kernels`). The scores are those of the segments joined
into one index, bit for bit (BM25), so those of one build of the live documents up to the summation order of the
floor's mean (~1e-16): tested against the join and against a fresh build.

MaxScore still skips: the top k is taken across the segments with one threshold, and each term's bound is the
largest weight it can have in any segment. A segment's largest tf part (``tf (k1 + 1) / (tf + norm)``) is computed
once per segment with its own length norms (``avgdl_s``); with the generation's ``avgdl`` a norm can only shrink by
``avgdl_s / avgdl`` (when that is below 1), so the part grows by at most its inverse, and the bound is
``idf * max over segments of (part_s * max(1, avgdl / avgdl_s))`` (slightly above the largest weight: a bound,
not the maximum; deleted rows' postings count in it).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from service.index.arrays import by_segment, readonly, segment_starts
from service.retrieval import segment_kernels as sk
from service.retrieval.sparse import (
    SPARSE_FORMAT,
    SPARSE_VERSION,
    BaseSparseIndex,
    Segments,
    SegmentTerms,
    SparseIndex,
    _prefault,
    _term_weight,
    weighting,
)

_BOUND_MARGIN = 1e-12  # relative: the bound's rounding (a few ulps) kept below it


class SparseGeneration(BaseSparseIndex):
    """The sparse index of a run of segments ``parts`` (rows of ``parts[0]``, then ``parts[1]``, ...) without the local
    rows ``deleted[i]`` of each, searched in place with the run's statistics (module docstring). ``prefault``: read the
    pages of the arrays a search reads (rows, tf, column pointers) in now, once per segment object."""

    def __init__(self, parts: Sequence[SparseIndex], deleted: Sequence[np.ndarray], *, prefault: bool = True) -> None:
        terms = SegmentTerms.of(parts, deleted)
        first = parts[0]
        self.parts = list(parts)
        self.scoring, self.k1, self.b, self.epsilon = first.scoring, first.k1, first.b, first.epsilon
        df_all = terms.df()
        vocab, kept = terms.live_vocab(df_all)
        self.vocab = vocab
        if len(kept) == len(df_all):
            self.__dict__["term_id"] = terms.term_id  # (BaseSparseIndex.term_id: the run's own, in column order)
        self.df = df_all[kept].astype(np.int32)
        self.doc_len = terms.doc_len
        self.n_rows = len(terms.doc_len)
        self.n_docs = int(np.count_nonzero(terms.doc_len))
        total_len = int(terms.doc_len.sum(dtype=np.int64))
        idf, self.idf_floor, self.avgdl, norm = weighting(self.df, terms.doc_len, self.n_docs, total_len, self.scoring,
                                                         self.k1, self.b, self.epsilon)
        self.idf = readonly(np.asarray(idf, dtype=np.float64))  # (read-only, as the kernels are compiled for)
        if norm is None:  # tf-idf: each row's own norm (no collection statistic in it); 0 for a deleted row
            norm = np.concatenate([np.asarray(p.doc_norm, dtype=np.float64) for p in parts])
            norm[terms.doc_len == 0] = 0.0
        self.doc_norm = norm
        self.own_terms = len(vocab)
        self._nonnegative: bool | None = None
        # each term's local column in each segment (-1: none there, or none live)
        new_of = np.full(len(df_all), -1, dtype=np.int64)
        new_of[kept] = np.arange(len(kept))
        loc = np.full((len(parts), len(vocab)), -1, dtype=np.int32)
        for i, (cols, live) in enumerate(zip(terms.maps, terms.lens, strict=True)):
            g = new_of[cols]
            here = (g >= 0) & (live > 0)
            loc[i, g[here]] = np.flatnonzero(here)
        self.loc = readonly(loc)
        self.deads = terms.deads
        starts = segment_starts([p.n_rows for p in parts])
        self.starts = starts  # each segment's first row, and the number of rows last
        # the segments' arrays as the kernels read them (their addresses; the table holds the arrays)
        table = sk.SegmentTable([p.rows for p in parts], [p.tf for p in parts],
                                [np.asarray(p.indptr, dtype=np.int64) for p in parts], terms.deads,
                                [p.n_rows for p in parts])
        self._segments = Segments(table, self.loc, readonly(self.doc_norm))
        self._bm25 = self.scoring == "bm25"
        if prefault:
            for p in parts:
                _ready(p)
        self._max_weight: np.ndarray | None = None  # (:attr:`max_weight`, at first use)
        self.params = {"format": SPARSE_FORMAT, "version": SPARSE_VERSION, "scoring": self.scoring, "k1": self.k1,
                       "b": self.b, "epsilon": self.epsilon, "n_rows": self.n_rows, "n_docs": self.n_docs,
                       "n_terms": len(vocab), "nnz": int(self.df.sum(dtype=np.int64)), "avgdl": self.avgdl,
                       "idf_floor": self.idf_floor, "segments": len(parts)}

    def _bounds(self) -> np.ndarray:
        """Each term's bound on its weights over every segment (module docstring)."""
        part_max = np.zeros(len(self.vocab), dtype=np.float64)
        for i, p in enumerate(self.parts):
            here = np.flatnonzero(self.loc[i] >= 0)
            if not len(here):
                continue
            grow = max(1.0, self.avgdl / p.avgdl) if self._bm25 and p.avgdl > 0 else 1.0
            np.maximum.at(part_max, here, _tf_parts(p)[self.loc[i, here]] * grow)
        return readonly(self.idf * part_max * (1.0 + _BOUND_MARGIN))

    @property
    def max_weight(self) -> np.ndarray:
        """Each term's bound on its weights (module docstring), computed at first use (a generation opened only to be
        counted never needs it)."""
        if self._max_weight is None:
            self._max_weight = self._bounds()
        return self._max_weight

    def own_df(self) -> np.ndarray:
        return np.asarray(self.df, dtype=np.int64)

    # ------------------------------------------------------------------ scoring

    def postings(self, term: str) -> tuple[np.ndarray, np.ndarray]:
        """(rows, raw tf) of a term's live postings, the segments' in turn (a copy of this term's)."""
        t = self.term_id.get(term)
        if t is None:
            return np.zeros(0, np.int32), np.zeros(0, np.int32)
        rows_l, tf_l = [], []
        for i, p in enumerate(self.parts):
            c = int(self.loc[i, t])
            if c < 0:
                continue
            lo, hi = int(p.indptr[c]), int(p.indptr[c + 1])
            rows, tfs = np.asarray(p.rows[lo:hi]), np.asarray(p.tf[lo:hi])
            if len(self.deads[i]):
                live = ~self.deads[i][rows]
                rows, tfs = rows[live], tfs[live]
            rows_l.append(rows.astype(np.int64) + int(self.starts[i]))
            tf_l.append(tfs)
        return np.concatenate(rows_l).astype(np.int32), np.concatenate(tf_l).astype(np.int32)

    def segments(self) -> Segments:
        return self._segments

    def restricted(self, allowed: np.ndarray) -> SparseIndex:
        """A whole index of only the live postings of the rows ``allowed`` marks, weighted with this generation's
        statistics (df, idf, lengths, vocabulary: the whole generation's), read from the segments that hold such rows
        (a watch's search of the documents an add brought: service/watch/evaluate.py)."""
        cols_l, rows_l, tf_l = [], [], []
        gen_of_local = []
        for i, p in enumerate(self.parts):
            g = np.full(len(p.vocab), -1, dtype=np.int64)
            here = np.flatnonzero(self.loc[i] >= 0)
            g[self.loc[i, here]] = here
            gen_of_local.append(g)
        for i, _here, _local in by_segment(self.starts, np.flatnonzero(allowed)):
            p = self.parts[i]
            start = int(self.starts[i])
            mine = np.asarray(allowed[start : start + p.n_rows], dtype=np.bool_)
            if len(self.deads[i]):
                mine = mine & ~self.deads[i]
            if not mine.any():
                continue
            keep = np.flatnonzero(mine[np.asarray(p.rows)])
            local = np.repeat(np.arange(len(p.vocab)), np.diff(np.asarray(p.indptr)))[keep]
            cols = gen_of_local[i][local]
            ok = cols >= 0
            cols_l.append(cols[ok])
            rows_l.append(np.asarray(p.rows)[keep][ok].astype(np.int64) + start)
            tf_l.append(np.asarray(p.tf)[keep][ok])
        col = np.concatenate(cols_l) if cols_l else np.zeros(0, np.int64)
        order = np.argsort(col, kind="stable")  # the segments in turn: rows increase within a column
        col = col[order]
        rows = (np.concatenate(rows_l)[order] if rows_l else np.zeros(0, np.int64)).astype(np.int32)
        tf = np.concatenate(tf_l)[order] if tf_l else np.zeros(0, np.int32)
        indptr = np.concatenate([[0], np.cumsum(np.bincount(col, minlength=len(self.vocab)))]).astype(np.int64)
        weights = _term_weight(self.scoring, self.k1, tf.astype(np.float64), self.doc_norm[rows], self.idf[col])
        sub = SparseIndex(vocab=self.vocab, params={**self.params, "nnz": len(rows)},
                          arrays={"indptr": indptr, "rows": rows, "tf": tf, "weights": weights, "df": self.df,
                                  "idf": self.idf, "doc_len": self.doc_len, "doc_norm": self.doc_norm})
        sub.__dict__["term_id"] = self.term_id
        return sub

    def joined(self) -> SparseIndex:
        """The segments joined into one index (a copy: :meth:`SparseIndex.join`)."""
        return SparseIndex.join(self.parts, [np.flatnonzero(d) for d in self.deads])


def _tf_parts(part: SparseIndex) -> np.ndarray:
    """A segment's largest tf part per local column (with its own norms), computed once per segment object (a reload
    reuses the segments it has open, and these with them)."""
    got = part.__dict__.get("_tf_parts")
    if got is None:
        got = sk.tf_part_max(part.indptr, part.rows, part.tf, part.doc_norm, part.k1, part.scoring == "bm25")
        part.__dict__["_tf_parts"] = got
    return got


def _ready(part: SparseIndex) -> None:
    """Read the pages a search of a segment reads (rows, tf, column pointers, norms) in, once per segment object, and
    compute its largest tf parts while at it (its stored weights are not read)."""
    if part.__dict__.get("_paged"):
        return
    _prefault([part.indptr, part.rows, part.tf])
    _tf_parts(part)
    part.__dict__["_paged"] = True
