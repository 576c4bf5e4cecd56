"""Sparse scorer: BM25 or tf-idf over a term-major (CSC) matrix, with PSQ structured queries.

Storage (one folder per indexed language, plain ``.npy``/``.json``, loadable memory-mapped):

=================  ======================================================================
``params.json``    format/version, scoring, k1, b, epsilon, n_rows, n_docs, avgdl, ...
``vocab.json``     column -> term
``indptr.npy``     int64, column ``t`` is ``[indptr[t], indptr[t+1])`` of the arrays below
``rows.npy``       int32 document rows, increasing within a column
``tf.npy``         int32 raw term frequencies
``weights.npy``    float64 precomputed score of the term in the document (monolingual fast path)
``df.npy``         int32 document frequency per term
``idf.npy``        float64 idf per term (after the BM25 floor)
``doc_len.npy``    int32 number of index terms per row
``doc_norm.npy``   float64 per row: BM25 ``k1*(1-b+b*len/avgdl)``; tf-idf the L2 norm of ``ln(1+tf)``
=================  ======================================================================

Scoring. ``N`` is the number of rows that have at least one term (rows of documents without text in
this language are empty and count neither in ``N`` nor in ``avgdl``).

- ``bm25`` reproduces ``rank_bm25.BM25Okapi`` exactly (it is the project's reference oracle):
  ``idf(t) = ln((N - df + 0.5) / (df + 0.5))``; negative values are replaced by
  ``epsilon * mean(idf over the vocabulary)``;
  ``score(q, d) = sum_u w_u * idf_u * tf_u(d) * (k1 + 1) / (tf_u(d) + k1 * (1 - b + b * len(d) / avgdl))``.
  Defaults ``k1 = 1.2, b = 0.75`` (Robertson's usual setting; rank-bm25's own default is k1 = 1.5),
  ``epsilon = 0.25`` (rank-bm25's).
- ``tfidf`` is SMART ``lnc.ntn``: documents log tf, no idf, cosine-normalised; queries raw count
  times idf. The log tf is ``ln(1 + tf)`` (stays positive for the fractional expected tf of PSQ):
  ``score(q, d) = sum_u w_u * idf_u * ln(1 + tf_u(d)) / ||d||`` with ``idf(t) = ln(N / df)`` and
  ``||d|| = sqrt(sum_{t in d} ln(1 + tf(t, d))^2)`` (a query norm would not change the ranking).

Queries are *units* ``(mapping, weight)``: ``mapping`` is ``{target_term: probability}`` and
``weight`` the query-term count (terms counted with repetition, as rank-bm25 does). A monolingual
term is ``({term: 1.0}, count)``. For a PSQ unit (Darwish & Oard 2003) the score uses the expected
term frequency ``tf_u(d) = sum_t p(t) tf(t, d)`` and expected document frequency
``df_u = sum_t p(t) df(t)`` in the formulas above. Terms absent from the vocabulary contribute
nothing. Units whose mapping is a single term with ``p = 1`` take the fast path (precomputed weights).

Collection statistics (:class:`CollectionStats`: ``N``, the summed document length, ``df`` per term) are
what the weights depend on besides a document's own counts. They add up over disjoint parts of a
collection, so a shard of a sharded index (``service/shards.py``) is weighted with the *global*
statistics (the sum over every shard): :meth:`SparseIndex.reweighted` (and :meth:`SparseIndex.join` with
``stats``) computes ``N``, ``df``, idf, the epsilon floor (mean idf over the global vocabulary),
``avgdl`` and the per-posting weights from them with the same code as a build, and gives the index the
global vocabulary (terms of other shards with empty postings), so ``expected_df``/``unit_idf`` (PSQ,
query reduction, the route reference scores) are the unsharded index's too.

The segments of a live generation (service/index/live.py) are searched where they lie, each with the generation's
statistics (:class:`service.retrieval.segments.SparseGeneration`: the weights computed as the postings are read);
:meth:`SparseIndex.join` copies them into one index (a sharded index's global weighting, tests). Both kinds are a
:class:`BaseSparseIndex`: what the first stage, the passages' routes and the watches search.
"""

from __future__ import annotations

import copy
import json
import math
import mmap
from abc import ABC, abstractmethod
from array import array
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import scipy.sparse as sp

from service.index.arrays import readonly
from service.index.folder import IndexFormatError, check_scoring
from service.phases import timed
from service.retrieval import kernels, maxscore
from service.retrieval import segment_kernels as sk
from service.versioned import read_versioned

SPARSE_FORMAT = "priorart-sparse"
SPARSE_VERSION = 1

QueryUnit = tuple[Mapping[str, float], float]
# MaxScore (SparseIndex.search) up to this k: deeper, the k-th best score is too low to cut off the long posting lists
# and a full accumulation is faster (docs/RESULTS.md, "Speed")
MAXSCORE_MAX_K = 100

_ARRAYS = ("indptr", "rows", "tf", "weights", "df", "idf", "doc_len", "doc_norm")
_WEIGHT_CHUNK = 1 << 20  # postings per step when precomputing weights (bounds temporary memory)


def monolingual_units(terms: Iterable[str]) -> list[QueryUnit]:
    """``['a', 'b', 'a']`` -> ``[({'a': 1.0}, 2.0), ({'b': 1.0}, 1.0)]`` (first-occurrence order)."""
    return [({t: 1.0}, float(c)) for t, c in Counter(terms).items()]


@dataclass(frozen=True)
class CollectionStats:
    """The collection statistics of a sparse index: documents with text (``N``), their summed length and
    the document frequency of every term. Summable over disjoint parts (shards): ``sum(parts, start)``."""

    n_docs: int = 0
    total_len: int = 0
    df: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, index: BaseSparseIndex) -> CollectionStats:
        """The statistics of the documents ``index`` holds (its own, not the ones it is weighted with)."""
        own = index.own_terms
        return cls(int(np.count_nonzero(np.asarray(index.doc_len))), int(np.asarray(index.doc_len).sum(dtype=np.int64)),
                   dict(zip(index.vocab[:own], index.own_df().tolist(), strict=True)))

    def __add__(self, other: CollectionStats) -> CollectionStats:
        df = dict(self.df)
        for term, n in other.df.items():
            df[term] = df.get(term, 0) + n
        return CollectionStats(self.n_docs + other.n_docs, self.total_len + other.total_len, df)

    def to_json(self) -> dict[str, Any]:
        return {"n_docs": self.n_docs, "total_len": self.total_len, "n_terms": len(self.df)}


@dataclass
class SegmentTerms:
    """The vocabulary of a run of segments as one generation numbers it (the one home of it: :meth:`SparseIndex.join`
    and :class:`service.retrieval.segments.SparseGeneration`): every term of every segment gets a column in order of
    first appearance, segment after segment (the first segment's columns keep their numbers); terms found only in
    deleted rows leave it afterwards (:meth:`live_vocab`)."""

    term_id: dict[str, int]  # every term of every segment -> its column
    maps: list[np.ndarray]  # per segment: the column of each of its local columns (int64)
    deads: list[np.ndarray]  # per segment: its deleted rows as a mask over its rows (empty when none)
    lens: list[np.ndarray]  # per segment: the live postings of each local column (int64)
    doc_len: np.ndarray  # the segments' row lengths in turn, 0 for a deleted row (int32)
    offsets: list[int]  # each segment's first row

    @classmethod
    def of(cls, parts: Sequence[SparseIndex], deleted: Sequence[np.ndarray]) -> SegmentTerms:
        if not parts or len(parts) != len(deleted):
            raise ValueError("a run of segments needs one deletion array per segment")
        first = parts[0]
        for p in parts[1:]:
            if (p.scoring, p.k1, p.b, p.epsilon) != (first.scoring, first.k1, first.b, first.epsilon):
                raise IndexFormatError("segments scored with other parameters cannot be searched as one")
        # the first segment's own term -> column map, copied (made once per process for a segment the loader shares
        # across reloads), not a lookup per term
        term_id: dict[str, int] = dict(first.term_id)
        maps, deads, lens, len_l = [], [], [], []
        for i, (part, gone) in enumerate(zip(parts, deleted, strict=True)):
            maps.append(np.arange(len(part.vocab), dtype=np.int64) if i == 0 else
                        np.fromiter((term_id.setdefault(t, len(term_id)) for t in part.vocab), dtype=np.int64,
                                    count=len(part.vocab)))
            doc_len = np.array(part.doc_len, dtype=np.int32)
            dead = np.zeros(0, dtype=np.bool_)
            if len(gone):
                dead = np.zeros(part.n_rows, dtype=np.bool_)
                dead[gone] = True
                doc_len[gone] = 0
            deads.append(dead)
            len_l.append(doc_len)
            lens.append(np.diff(np.asarray(part.indptr, dtype=np.int64)) if not len(gone) else
                        kernels.live_lengths(part.indptr, part.rows, dead))
        offsets = np.cumsum([0] + [part.n_rows for part in parts[:-1]]).tolist()
        return cls(term_id, maps, deads, lens, np.concatenate(len_l), offsets)

    def df(self) -> np.ndarray:
        """The live document frequency of every column (int64; 0 for a term of deleted rows only)."""
        df = np.zeros(len(self.term_id), dtype=np.int64)
        for cols, n in zip(self.maps, self.lens, strict=True):
            df[cols] += n  # (a segment's columns are distinct)
        return df

    def live_vocab(self, df: np.ndarray) -> tuple[list[str], np.ndarray]:
        """The vocabulary without the terms of deleted rows only, and the columns it keeps (increasing)."""
        vocab = list(self.term_id)
        if (df > 0).all():
            return vocab, np.arange(len(vocab))
        kept = np.flatnonzero(df > 0)
        return [vocab[i] for i in kept.tolist()], kept


class Reach:
    """What a query's units reach in an index (:meth:`BaseSparseIndex.accumulate`): per unit the terms whose postings
    it added (``terms[j]`` for ``j`` in ``starts[u]:starts[u+1]``) and the most it can add to a row's score (``ubs``;
    ``bounded`` False when a unit has no such bound or it is negative)."""

    __slots__ = ("terms", "starts", "ubs", "bounded")

    def __init__(self) -> None:
        self.terms: list[int] = []
        self.starts: list[int] = [0]
        self.ubs: list[float] = []
        self.bounded = True

    def unit(self, terms: list[int], ub: float | None) -> None:
        self.terms += terms
        self.starts.append(len(self.terms))
        self.ubs.append(ub if ub is not None else math.inf)
        if ub is None or not ub >= 0:
            self.bounded = False

    def by_bound(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The units, those that can add most first: their terms, where each unit's terms start (and the end), and
        what units ``u, u+1, ...`` can add to a row together (what a bounded top k stops on)."""
        order = sorted(range(len(self.ubs)), key=lambda u: -self.ubs[u])
        terms: list[int] = []
        starts = [0]
        for u in order:
            terms += self.terms[self.starts[u] : self.starts[u + 1]]
            starts.append(len(terms))
        ubs = np.array([self.ubs[u] for u in order], dtype=np.float64)
        left = np.ascontiguousarray(np.cumsum(ubs[::-1])[::-1])  # (contiguous: one compiled variant of the top k)
        return np.array(terms, dtype=np.int64), np.array(starts, dtype=np.int64), left


class SparseIndexBuilder:
    """Accumulates documents row by row (memory: ~8 bytes per distinct term per document)."""

    def __init__(self, *, scoring: str = "bm25", k1: float = 1.2, b: float = 0.75, epsilon: float = 0.25) -> None:
        check_scoring(scoring, k1, b, epsilon)
        self.scoring, self.k1, self.b, self.epsilon = scoring, k1, b, epsilon
        self._vocab: dict[str, int] = {}
        self._indptr = array("q", [0])
        self._cols = array("i")
        self._tfs = array("i")
        self._lens = array("i")

    def __len__(self) -> int:
        return len(self._lens)

    def add(self, terms: Sequence[str]) -> int:
        """Append one document (its analysed terms; empty for a document without text); returns its row."""
        counts = Counter(terms)
        vocab = self._vocab
        self._cols.extend([vocab.setdefault(t, len(vocab)) for t in counts])
        self._tfs.extend(counts.values())
        self._indptr.append(len(self._cols))
        self._lens.append(len(terms))
        return len(self._lens) - 1

    def finish(self) -> SparseIndex:
        """Transpose to term-major order and precompute idf and per-posting weights."""
        n_rows = len(self._lens)
        vocab = list(self._vocab)
        n_terms = len(vocab)
        csr = sp.csr_matrix(
            (
                np.frombuffer(self._tfs, dtype=np.int32) if self._tfs else np.zeros(0, np.int32),
                np.frombuffer(self._cols, dtype=np.int32) if self._cols else np.zeros(0, np.int32),
                np.frombuffer(self._indptr, dtype=np.int64),
            ),
            shape=(n_rows, n_terms),
        )
        csc = csr.tocsc()
        del csr
        self._cols, self._tfs, self._indptr = array("i"), array("i"), array("q", [0])
        csc.sort_indices()
        doc_len = np.frombuffer(self._lens, dtype=np.int32).copy() if self._lens else np.zeros(0, np.int32)
        self._lens = array("i")
        self._vocab = {}
        return SparseIndex._from_arrays(
            vocab=vocab,
            indptr=csc.indptr.astype(np.int64, copy=False),
            rows=csc.indices.astype(np.int32, copy=False),
            tf=csc.data.astype(np.int32, copy=False),
            doc_len=doc_len,
            scoring=self.scoring,
            k1=self.k1,
            b=self.b,
            epsilon=self.epsilon,
        )


class Segments(NamedTuple):
    """An index's postings as the compiled loops read them, whatever its shape: ``table`` its segments' arrays (one
    build: one segment of stored weights; a live generation: its segments, raw tf weighed as read, deleted rows
    passed over), ``loc[s, t]`` term ``t``'s column in segment ``s`` (-1: none; no columns: each term its own), and
    ``norm`` each row's length norm (what a tf is weighed with)."""

    table: sk.SegmentTable
    loc: np.ndarray
    norm: np.ndarray


class BaseSparseIndex(ABC):
    """One language's BM25/tf-idf index as a search sees it: the collection statistics (vocabulary, df, idf after the
    floor, each row's length and norm, ``N``, ``avgdl``) and the postings searched with them. :class:`SparseIndex`
    holds its postings in one set of arrays (a build, a compacted generation, a join);
    :class:`service.retrieval.segments.SparseGeneration` reads them from a live generation's segments where they
    lie. Rows are the doc store rows; a search adds into a :class:`kernels.ScoreAccumulator` of ``n_rows`` rows."""

    vocab: list[str]
    df: np.ndarray
    idf: np.ndarray
    doc_len: np.ndarray
    doc_norm: np.ndarray
    params: dict[str, Any]
    scoring: str
    k1: float
    b: float
    epsilon: float
    n_rows: int
    n_docs: int
    avgdl: float
    idf_floor: float
    own_terms: int  # columns [0, own_terms) have postings here; the rest are terms of other shards
    _nonnegative: bool | None = None

    @cached_property
    def term_id(self) -> dict[str, int]:
        """Term -> column (made at first use: a segment opened only to be joined never needs it)."""
        return {t: i for i, t in enumerate(self.vocab)}

    @property
    @abstractmethod
    def max_weight(self) -> np.ndarray:
        """Per term, at least its largest posting weight (what the term can add to a row's score: the bounds of the
        top k and of MaxScore)."""

    @property
    def nonnegative(self) -> bool:
        """Every posting weight is >= 0 (idf >= 0: BM25's floor is below 0 only when most terms are in more than half
        of the documents), so a row's partial score never exceeds its score (what MaxScore relies on)."""
        if self._nonnegative is None:
            self._nonnegative = bool(len(self.idf) == 0 or float(np.min(self.idf)) >= 0.0)
        return self._nonnegative

    def __len__(self) -> int:
        return self.n_rows

    @abstractmethod
    def own_df(self) -> np.ndarray:
        """The document frequency of the terms ``[0, own_terms)`` among the rows this index holds."""

    @abstractmethod
    def postings(self, term: str) -> tuple[np.ndarray, np.ndarray]:
        """(rows, raw tf) of a term; empty arrays for an unknown term."""

    @abstractmethod
    def restricted(self, allowed: np.ndarray) -> SparseIndex:
        """This index with only the postings of the rows ``allowed`` marks, every statistic of the whole index (see
        :meth:`SparseIndex.restricted`)."""

    @abstractmethod
    def segments(self) -> Segments:
        """The postings as the kernels read them (one reader for every index: :class:`Segments`)."""

    def expected_df(self, mapping: Mapping[str, float]) -> float:
        """``sum_t p(t) df(t)`` over the mapping's terms present in the vocabulary."""
        total = 0.0
        for term, p in mapping.items():
            t = self.term_id.get(term)
            if t is not None:
                total += p * float(self.df[t])
        return total

    def idf_of(self, df: float) -> float:
        """idf for a (possibly expected, fractional) document frequency; 0 for df <= 0."""
        if df <= 0 or self.n_docs == 0:
            return 0.0
        if self.scoring == "bm25":
            value = math.log(self.n_docs - df + 0.5) - math.log(df + 0.5)
            return self.idf_floor if value < 0 else value
        return math.log(self.n_docs / df)

    def unit_idf(self, mapping: Mapping[str, float]) -> float:
        """idf of a query unit (for a single known term with p = 1: the stored idf)."""
        if len(mapping) == 1:
            ((term, p),) = mapping.items()
            t = self.term_id.get(term)
            if t is None:
                return 0.0
            if p == 1.0:
                return float(self.idf[t])
        return self.idf_of(self.expected_df(mapping))

    def score(self, units: Sequence[QueryUnit]) -> np.ndarray:
        """Dense score per row for a (structured) query; see the module docstring.

        Rows that contain no query target term score exactly 0. (A search adds into an accumulator it keeps,
        :meth:`accumulate`; this makes one for the query.)
        """
        acc = kernels.ScoreAccumulator(self.n_rows)
        self.accumulate(units, acc)
        return acc.scores

    def search(self, units: Sequence[QueryUnit], acc: kernels.ScoreAccumulator, k: int,
               mask: np.ndarray | None = None, *, count: bool = True,
               saturate: bool = False, scale_tf: bool = False) -> tuple[np.ndarray, np.ndarray, int | None]:
        """One route's search: the ``k`` best rows that score non-zero and ``mask`` allows (best first, ties by lower
        row), their scores, and how many rows those are (``count``; None when not counted).

        Without ``count``, a query of single terms (no PSQ unit; every weight >= 0) for at most ``MAXSCORE_MAX_K`` rows
        is searched by MaxScore (:func:`service.retrieval.maxscore.maxscore`): the long posting lists of its common
        terms are not added whole, only looked up for the rows that can still reach the top k, so the rows it matches
        are not counted. Same rows and the same scores, bit for bit, as accumulating the whole query (``count``, or
        any other query)."""
        if k <= 0:
            raise ValueError(f"k must be positive, got {k}")
        if not count and k <= MAXSCORE_MAX_K and self.nonnegative:
            terms = self._single_terms(units)
            if terms is not None and len(terms[0]):
                found = self._maxscore(acc, k, mask, *terms)
                if found is not None:
                    return found[0], found[1], None
        reach = self.accumulate(units, acc, saturate=saturate, scale_tf=scale_tf)
        rows, n_matched = self.top_k(acc, reach, k, mask, count=count)
        return rows, acc.scores[rows], n_matched

    def _single_terms(self, units: Sequence[QueryUnit]) -> tuple[np.ndarray, np.ndarray] | None:
        """The term ids and multipliers of a query of single terms (the units :meth:`accumulate` adds, in its order),
        or None when a unit is a PSQ unit or has a weight below 0."""
        ids: list[int] = []
        mults: list[float] = []
        term_id = self.term_id
        for mapping, weight in units:
            if weight == 0 or not mapping:
                continue
            if len(mapping) != 1 or weight < 0:
                return None
            ((term, p),) = mapping.items()
            if p != 1.0:
                return None
            t = term_id.get(term)
            if t is not None:
                ids.append(t)
                mults.append(weight)
        return np.array(ids, dtype=np.int64), np.array(mults, dtype=np.float64)

    def accumulate(self, units: Sequence[QueryUnit], acc: kernels.ScoreAccumulator, *,
                   saturate: bool = False, scale_tf: bool = False) -> Reach:
        """Add the query's score of every row it reaches into ``acc`` (zeroed, or holding other units' scores);
        returns what its units reach (for :meth:`top_k`). ``saturate`` (BM25): a PSQ unit adds at most ``k1 + 1``
        times what a row of average length holding the unit's most probable translation once adds -- the ceiling a
        source term has over one occurrence of itself. Without it, a unit whose probability spreads over several
        common translations (``Verfahren`` -> method, process, procedure, technique) could add several times that
        to a row that repeats them, and a translated route outscore the own-language route on its own scale.
        ``scale_tf``: a PSQ unit's expected tf is divided by its most probable translation's probability, so that
        one occurrence of that translation counts as one occurrence of the source term and the unit saturates as
        an untranslated term does (BM25's own curve, the same ceiling).

        In one compiled call over every segment (:func:`service.retrieval.segment_kernels._accumulate`), unit after
        unit in the query's order: a single term's stored weights (a build) or its tf weighed (a generation's
        segments), a PSQ unit's expected tf through BM25 with the unit's idf."""
        reach = Reach()
        kinds: list[int] = []
        mults: list[float] = []
        idfs: list[float] = []
        scales: list[float] = []
        ceils: list[float] = []
        starts = [0]
        terms: list[int] = []
        probs: list[float] = []
        term_id, df, idf, max_weight = self.term_id, self.df, self.idf, self.max_weight
        bm25, k1 = self.scoring == "bm25", self.k1
        for mapping, weight in units:
            if weight == 0 or not mapping:
                continue
            if len(mapping) == 1:
                ((term, p),) = mapping.items()
                if p == 1.0:
                    t = term_id.get(term)
                    if t is not None:
                        kinds.append(0)
                        mults.append(float(weight))
                        idfs.append(float(idf[t]))
                        scales.append(1.0)
                        ceils.append(-1.0)
                        terms.append(t)
                        probs.append(1.0)
                        starts.append(len(terms))
                        reach.unit([t], float(max_weight[t]) * float(weight))
                    continue
            ids: list[int] = []
            df_e = 0.0
            for term, p in mapping.items():
                t = term_id.get(term)
                if t is None or p <= 0:
                    continue
                ids.append(t)
                probs.append(p)
                df_e += p * float(df[t])
            if not ids:
                continue
            unit_idf = self.idf_of(df_e)
            reach.unit(ids, float(weight) * (unit_idf * (k1 + 1.0)) if bm25 else None)
            best = max(mapping.values())
            kinds.append(1)
            mults.append(float(weight))
            idfs.append(unit_idf)
            scales.append(best if scale_tf else 1.0)
            ceils.append((k1 + 1.0) * best * (k1 + 1.0) / (best + k1) if bm25 and saturate else -1.0)
            terms += ids
            starts.append(len(terms))
        if kinds:
            seg = self.segments()
            acc.n, acc.tracking = sk._accumulate(
                acc.scores, acc.seen, acc.touched, acc.n, acc.tracking, acc.cap, acc.scratch, acc.row_scratch,
                seg.table.table, seg.loc, seg.norm, float(k1), bm25,
                np.array(kinds, dtype=np.int64), np.array(mults, dtype=np.float64), np.array(idfs, dtype=np.float64),
                np.array(scales, dtype=np.float64), np.array(ceils, dtype=np.float64),
                np.array(starts, dtype=np.int64), np.array(terms, dtype=np.int64), np.array(probs, dtype=np.float64))
        return reach

    def _maxscore(self, acc: kernels.ScoreAccumulator, k: int, mask: np.ndarray | None, ids: np.ndarray,
                  mults: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """MaxScore of a query of single terms (:func:`service.retrieval.maxscore.maxscore`), or None when it lists too
        many rows."""
        seg = self.segments()
        return maxscore.maxscore(acc, k, mask, seg.table, seg.loc, seg.norm, self.k1, self.scoring == "bm25",
                                 self.max_weight, self.idf, ids, mults)

    def top_k(self, acc: kernels.ScoreAccumulator, reach: Reach, k: int, mask: np.ndarray | None = None, *,
              count: bool = True) -> tuple[np.ndarray, int | None]:
        """The ``k`` best rows of a query accumulated in ``acc`` (:meth:`accumulate` returned ``reach``) that score
        non-zero and ``mask`` allows, best first, ties by lower row, and how many rows those are (``count``; else
        None: counting is a scan of every row the query reached, of every row once it reached many).

        Rows the accumulator lists are few: their scan. Else the rows of the query's units, segment by segment, the
        units that can add most first, until the units left cannot lift a row into the top k
        (:func:`service.retrieval.segment_kernels._top_k_bounded`): a query of common terms reaches most rows, and a
        scan of every row was most of its time."""
        if k <= 0:
            raise ValueError(f"k must be positive, got {k}")
        if acc.tracking or not reach.bounded:
            return acc.top_k(k, mask), (acc.matched(mask) if count else None)
        terms, starts, left = reach.by_bound()
        acc.unmark()
        seg = self.segments()
        vals, out = sk._top_k_bounded(acc.scores, acc.seen, seg.table.table, seg.loc, terms, starts, left, k,
                                      kernels._mask(mask), mask is not None)
        return kernels._best_first(vals, out), (acc.matched(mask) if count else None)

    def matched_terms(self, terms: Sequence[str], rows: np.ndarray) -> list[list[str]]:
        """For each row, the terms (of ``terms``, in order) that occur in it."""
        out: list[list[str]] = [[] for _ in range(len(rows))]
        if len(rows) == 0:
            return out
        term_id = self.term_id
        known = [t for t in dict.fromkeys(terms) if t in term_id]
        if not known:
            return out
        # one compiled binary search per (term, row) (service.retrieval.segment_kernels): a numpy searchsorted per
        # term cost microseconds each, and a translated query has hundreds of target terms
        seg = self.segments()
        found = sk._contains(seg.table.table, seg.loc, np.array([term_id[t] for t in known], dtype=np.int64),
                             np.asarray(rows, dtype=np.int64))
        at, which = np.nonzero(found)
        for i, j in zip(at.tolist(), which.tolist(), strict=True):
            out[i].append(known[j])
        return out


class SparseIndex(BaseSparseIndex):
    """A BM25/tf-idf index of one language, its postings in one set of arrays. Rows are the doc store rows."""

    def __init__(
        self,
        *,
        vocab: list[str],
        arrays: Mapping[str, np.ndarray],
        params: Mapping[str, Any],
    ) -> None:
        self.vocab = vocab
        # plain ndarray views of memory maps: np.memmap slicing costs several microseconds per call
        a = {name: np.asarray(arrays[name]).view(np.ndarray) for name in _ARRAYS}
        self.indptr: np.ndarray = a["indptr"]
        self.rows: np.ndarray = a["rows"]
        self.tf: np.ndarray = a["tf"]
        self.weights: np.ndarray = a["weights"]
        self.df: np.ndarray = a["df"]
        self.idf: np.ndarray = a["idf"]
        self.doc_len: np.ndarray = a["doc_len"]
        self.doc_norm: np.ndarray = a["doc_norm"]
        self.params = dict(params)
        self.scoring: str = params["scoring"]
        self.k1: float = float(params["k1"])
        self.b: float = float(params["b"])
        self.epsilon: float = float(params["epsilon"])
        self.n_rows: int = int(params["n_rows"])
        self.n_docs: int = int(params["n_docs"])
        self.avgdl: float = float(params["avgdl"])
        self.idf_floor: float = float(params["idf_floor"])
        self.own_terms: int = int(params.get("own_terms", len(vocab)))
        self._max_weight: np.ndarray | None = None
        self._nonnegative: bool | None = None
        self._segments: Segments | None = None

    @property
    def max_weight(self) -> np.ndarray:
        """Each term's largest posting weight (what the term can add to a row's score; :meth:`top_k`), computed
        once (one pass over the weights; at load for an index that is searched)."""
        if self._max_weight is None:
            self._max_weight = kernels.max_per_term(self.indptr, self.weights)
        return self._max_weight

    def own_df(self) -> np.ndarray:
        return np.diff(np.asarray(self.indptr[: self.own_terms + 1]))

    # ------------------------------------------------------------------ construction

    @classmethod
    def build(
        cls,
        doc_terms: Iterable[Sequence[str]],
        *,
        scoring: str = "bm25",
        k1: float = 1.2,
        b: float = 0.75,
        epsilon: float = 0.25,
    ) -> SparseIndex:
        """Index analysed documents (one term list per row)."""
        builder = SparseIndexBuilder(scoring=scoring, k1=k1, b=b, epsilon=epsilon)
        for terms in doc_terms:
            builder.add(terms)
        return builder.finish()

    @classmethod
    def _from_arrays(
        cls,
        *,
        vocab: list[str],
        indptr: np.ndarray,
        rows: np.ndarray,
        tf: np.ndarray,
        doc_len: np.ndarray,
        scoring: str,
        k1: float,
        b: float,
        epsilon: float,
        stats: CollectionStats | None = None,
        doc_norm: np.ndarray | None = None,
    ) -> SparseIndex:
        """The index of these postings, weighted with their own statistics or, given ``stats``, with those
        (which must cover these documents: the global statistics of a shard). ``doc_norm``: tf-idf's row norms when
        known (they depend on a row's own counts only)."""
        n_rows = len(doc_len)
        own_terms = len(vocab)
        if stats is None:
            df = np.diff(indptr).astype(np.int32)
            n_docs = int(np.count_nonzero(doc_len))
            total_len = int(doc_len.sum(dtype=np.int64))
        else:
            local = set(vocab)
            vocab = list(vocab) + [t for t in stats.df if t not in local]
            try:
                df = np.fromiter((stats.df[t] for t in vocab), dtype=np.int32, count=len(vocab))
            except KeyError as exc:
                raise ValueError(f"global statistics lack the term {exc.args[0]!r} of this index") from exc
            if (df[:own_terms] < np.diff(indptr)).any() or stats.n_docs < int(np.count_nonzero(doc_len)):
                raise ValueError("global statistics smaller than this index's own: not its collection's")
            indptr = np.concatenate([indptr, np.full(len(vocab) - own_terms, indptr[-1], dtype=np.int64)])
            n_docs, total_len = stats.n_docs, stats.total_len
        idf, idf_floor, avgdl, bm25_norm = weighting(df, doc_len, n_docs, total_len, scoring, k1, b, epsilon)
        if bm25_norm is not None:
            doc_norm = bm25_norm
        elif doc_norm is None:  # tf-idf: the L2 norm of each row's ln(1 + tf)
            sq = np.zeros(n_rows, dtype=np.float64)
            for lo in range(0, len(rows), _WEIGHT_CHUNK):
                hi = lo + _WEIGHT_CHUNK
                sq += np.bincount(rows[lo:hi], weights=np.log1p(tf[lo:hi].astype(np.float64)) ** 2, minlength=n_rows)
            doc_norm = np.sqrt(sq)
        weights = np.empty(len(rows), dtype=np.float64)
        # per-posting weights, column chunk by column chunk (bounded temporary memory)
        start_col = 0
        n_terms = len(vocab)
        while start_col < n_terms:
            end_col = int(np.searchsorted(indptr, indptr[start_col] + _WEIGHT_CHUNK, side="right"))
            end_col = min(max(end_col - 1, start_col + 1), n_terms)
            lo, hi = int(indptr[start_col]), int(indptr[end_col])
            cols = np.repeat(np.arange(start_col, end_col), np.diff(indptr[start_col : end_col + 1]))
            weights[lo:hi] = _term_weight(scoring, k1, tf[lo:hi].astype(np.float64), doc_norm[rows[lo:hi]], idf[cols])
            start_col = end_col
        params = {
            "format": SPARSE_FORMAT,
            "version": SPARSE_VERSION,
            "scoring": scoring,
            "k1": k1,
            "b": b,
            "epsilon": epsilon,
            "n_rows": n_rows,
            "n_docs": n_docs,
            "n_terms": n_terms,
            "nnz": int(len(rows)),
            "avgdl": avgdl,
            "idf_floor": idf_floor,
        }
        if stats is not None:
            params["own_terms"] = own_terms
            params["stats"] = "global"
        arrays = {
            "indptr": indptr,
            "rows": rows,
            "tf": tf,
            "weights": weights,
            "df": df,
            "idf": idf.astype(np.float64),
            "doc_len": doc_len.astype(np.int32),
            "doc_norm": doc_norm,
        }
        return cls(vocab=vocab, arrays=arrays, params=params)

    def reweighted(self, stats: CollectionStats) -> SparseIndex:
        """This index's postings weighted with ``stats`` (a shard's with the global statistics; see the module doc)."""
        own = self.own_terms
        return SparseIndex._from_arrays(vocab=self.vocab[:own], indptr=np.asarray(self.indptr[: own + 1]),
                                        rows=np.asarray(self.rows), tf=np.asarray(self.tf),
                                        doc_len=np.asarray(self.doc_len), scoring=self.scoring, k1=self.k1, b=self.b,
                                        epsilon=self.epsilon, stats=stats)

    @classmethod
    def join(cls, parts: Sequence[SparseIndex], deleted: Sequence[np.ndarray]) -> SparseIndex:
        """The index of the segments ``parts`` in turn (rows of ``parts[0]``, then ``parts[1]``, ...), with
        the local rows ``deleted[i]`` of each removed: their postings dropped, their length 0, so they count
        neither in ``N`` nor in ``avgdl``, and terms found only in them leave the vocabulary: one index, copied (a
        sharded index's global weighting; a live generation is searched in place instead,
        :class:`service.retrieval.segments.SparseGeneration`).

        Only raw term frequencies and lengths are read; ``idf``, the BM25 floor (mean idf over the
        vocabulary), ``avgdl`` and the per-posting weights are computed afresh by the same code as a build,
        so the scores equal those of one build of the live documents (up to the summation order of the
        floor's mean, ~1e-16 relative).
        """
        terms = SegmentTerms.of(parts, deleted)
        # Each segment's columns hold increasing rows, and segment i's rows all come before segment i + 1's, so a
        # joined column is the segments' columns one after the other: each posting is copied once to its place (no
        # sort).
        df = terms.df()
        joined_ptr = np.zeros(len(df) + 1, dtype=np.int64)
        np.cumsum(df, out=joined_ptr[1:])
        free = joined_ptr[:-1].copy()  # per joined column, where the next segment's postings go
        nnz = int(joined_ptr[-1])
        out_rows = np.empty(nnz, dtype=np.int32)
        out_tf = np.empty(nnz, dtype=np.int32)
        for i, part in enumerate(parts):
            kernels.scatter_columns(part.indptr, part.rows, part.tf, terms.deads[i], np.arange(len(part.vocab)),
                                    free[terms.maps[i]], terms.offsets[i], out_rows, out_tf)
            free[terms.maps[i]] += terms.lens[i]
        vocab, kept = terms.live_vocab(df)
        if len(kept) < len(df):  # terms of deleted documents only (empty columns: the postings keep their places)
            joined_ptr = np.concatenate([[0], np.cumsum(df[kept])]).astype(np.int64)
        first = parts[0]
        joined = cls._from_arrays(vocab=vocab, indptr=joined_ptr, rows=out_rows, tf=out_tf, doc_len=terms.doc_len,
                                  scoring=first.scoring, k1=first.k1, b=first.b, epsilon=first.epsilon)
        if len(kept) == len(df):
            joined.__dict__["term_id"] = terms.term_id  # the join's own, in column order (SparseIndex.term_id)
        return joined

    def restricted(self, allowed: np.ndarray) -> SparseIndex:
        """This index with only the postings of the rows ``allowed`` marks: their weights, tf and rows as they are,
        every statistic of the whole index (df, idf, lengths, vocabulary); a copy that shares everything but the
        postings (a watch's search of the documents an add brought: service/watch/evaluate.py)."""
        sub = copy.copy(self)
        pos = np.flatnonzero(allowed[self.rows])
        sub.indptr = np.searchsorted(pos, self.indptr).astype(np.int64)
        sub.rows, sub.tf, sub.weights = self.rows[pos], self.tf[pos], self.weights[pos]
        sub.params = {**self.params, "nnz": len(sub.rows)}
        sub._max_weight = None  # computed over the kept postings when a search needs it
        return sub


    # ------------------------------------------------------------------ persistence

    def save(self, directory: str | Path) -> None:
        """Write the plain ``.npy``/``.json`` files into ``directory`` (created if needed)."""
        if "stats" in self.params:
            raise ValueError("an index weighted with global statistics is not saved (save the shard's own index)")
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        for name in _ARRAYS:
            np.save(d / f"{name}.npy", np.ascontiguousarray(getattr(self, name)))
        (d / "vocab.json").write_text(json.dumps(self.vocab, ensure_ascii=False), encoding="utf-8")
        (d / "params.json").write_text(json.dumps(self.params, indent=1) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, directory: str | Path, *, mmap: bool = True, prefault: bool = True) -> SparseIndex:
        """Load a saved index (posting arrays memory-mapped unless ``mmap=False``; their pages read in at load
        unless ``prefault=False``: an index that is only read once, to be joined or counted, skips that)."""
        d = Path(directory)
        params = read_versioned(d / "params.json", SPARSE_FORMAT, SPARSE_VERSION, error=IndexFormatError,
                                fix="rebuild the index with `priorart build`")
        try:
            vocab = json.loads((d / "vocab.json").read_text(encoding="utf-8"))
            arrays = {n: np.load(d / f"{n}.npy", mmap_mode="r" if mmap else None) for n in _ARRAYS}
        except (OSError, ValueError) as exc:
            raise IndexFormatError(f"sparse index in {d} is unreadable: {exc}") from exc
        n_terms, nnz, n_rows = len(vocab), int(params["nnz"]), int(params["n_rows"])
        expect = {
            "indptr": n_terms + 1,
            "rows": nnz,
            "tf": nnz,
            "weights": nnz,
            "df": n_terms,
            "idf": n_terms,
            "doc_len": n_rows,
            "doc_norm": n_rows,
        }
        for name, size in expect.items():
            if arrays[name].shape != (size,):
                raise IndexFormatError(f"{d / (name + '.npy')}: shape {arrays[name].shape}, expected ({size},)")
        index = cls(vocab=vocab, arrays=arrays, params=params)
        if prefault:
            index.prefault(pages=mmap)
        return index

    def prefault(self, *, pages: bool = True) -> None:
        """Read the pages of a memory-mapped index in (``pages``: queries then find their postings mapped) and compute
        the terms' largest weights while at it."""
        if pages:
            _prefault(getattr(self, name) for name in _ARRAYS)
        self.max_weight  # noqa: B018 -- computed while the pages are being read in anyway

    # ------------------------------------------------------------------ scoring

    def postings(self, term: str) -> tuple[np.ndarray, np.ndarray]:
        """(rows, raw tf) of a term; empty arrays for an unknown term."""
        t = self.term_id.get(term)
        if t is None:
            return np.zeros(0, np.int32), np.zeros(0, np.int32)
        lo, hi = int(self.indptr[t]), int(self.indptr[t + 1])
        return self.rows[lo:hi], self.tf[lo:hi]

    def segments(self) -> Segments:
        """One segment: the postings with their stored weights (what a search adds), tf (a PSQ unit's expected tf),
        the rows' norms; each term its own column. Made at first use (a segment read only to be joined never needs
        it)."""
        if self._segments is None:
            table = sk.SegmentTable([self.rows], [self.tf], [np.asarray(self.indptr, dtype=np.int64)],
                                    [np.zeros(0, dtype=np.bool_)], [self.n_rows], weights=[self.weights])
            self._segments = Segments(table, _OWN_COLUMNS, readonly(np.asarray(self.doc_norm, dtype=np.float64)))
        return self._segments


_OWN_COLUMNS = readonly(np.zeros((1, 0), dtype=np.int32))  # (Segments.loc of one build: each term its own column)


def weighting(df: np.ndarray, doc_len: np.ndarray, n_docs: int, total_len: int, scoring: str, k1: float, b: float,
              epsilon: float) -> tuple[np.ndarray, float, float, np.ndarray | None]:
    """The collection's part of the weights (the one home of it: a build, a join, a shard's global weighting, a live
    generation's segments): per term its idf (BM25 after the floor, ``epsilon`` times the mean idf over ``df``'s
    terms), the floor, ``avgdl``, and BM25's per-row length norm ``k1 * (1 - b + b * len / avgdl)`` (None for tf-idf,
    whose norms are the rows' own)."""
    avgdl = float(total_len) / n_docs if n_docs else 0.0
    if scoring != "bm25":
        return (np.log(n_docs / df) if len(df) else np.zeros(0)), 0.0, avgdl, None
    raw = np.log(n_docs - df + 0.5) - np.log(df + 0.5) if len(df) else np.zeros(0)
    average_idf = float(raw.sum() / len(raw)) if len(raw) else 0.0
    idf_floor = epsilon * average_idf
    idf = np.where(raw < 0, idf_floor, raw)
    with np.errstate(divide="ignore", invalid="ignore"):
        doc_norm = k1 * (1 - b + b * doc_len / avgdl) if avgdl else np.zeros(len(doc_len))
    return idf, idf_floor, avgdl, doc_norm


def _prefault(arrays: Iterable[np.ndarray]) -> None:
    """Read one value of every page of memory-mapped arrays, so that queries find their postings mapped.

    A posting list's first query would otherwise fault its pages in, from the disk when the page cache does
    not hold them (an index opened without checksums, or after other work evicted it). Here the reads happen
    once at load, in order (readahead). The kernel may still drop clean file pages under memory pressure;
    load with ``mmap=False`` to hold them in memory.
    """
    with timed("page-in"):  # a phase of a server's start-up (service/startup.py)
        for a in arrays:
            if a.size:
                step = max(1, mmap.PAGESIZE // a.itemsize)
                np.add.reduce(np.asarray(a).view(np.ndarray)[::step], dtype=np.float64)


def _term_weight(scoring: str, k1: float, tf: np.ndarray, doc_norm: np.ndarray, idf: np.ndarray | float) -> np.ndarray:
    """Per-posting score; ``doc_norm`` is the BM25 length term or the tf-idf L2 norm."""
    if scoring == "bm25":
        return idf * (tf * (k1 + 1) / (tf + doc_norm))
    with np.errstate(divide="ignore", invalid="ignore"):
        w = idf * np.log1p(tf) / doc_norm
    return np.nan_to_num(w, nan=0.0, posinf=0.0, neginf=0.0)
