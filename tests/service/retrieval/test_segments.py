"""A live generation's sparse index searched in place (service/retrieval/segments.py): every search gives the rows and
scores of the segments joined into one index (BM25 bit for bit), with deletions, PSQ units, MaxScore, the bounded top
k, masks and threads; the bounds hold; nothing is copied at open."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from service.retrieval.kernels import AccumulatorPool
from service.retrieval.segments import SparseGeneration
from service.retrieval.sparse import QueryUnit, SparseIndex


def _segments(scoring: str, seed: int = 11, n_docs: int = 400) -> tuple[list[SparseIndex], list[np.ndarray],
                                                                          list[list[str]], set[int]]:
    """A corpus of skewed term use (some terms in most rows, most in few) cut into four segments, rows deleted in
    three of them; a term found only in a deleted row."""
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(120)]
    p = 1.0 / np.arange(1, len(words) + 1) ** 1.1
    docs = [list(rng.choice(words, size=int(rng.integers(0, 30)), p=p / p.sum())) for _ in range(n_docs)]
    docs[250] = ["onlydeleted", "w2", "w2"]
    cuts = (0, 240, 244, 330, n_docs)
    gone = [np.array([3, 41, 100]), np.array([], dtype=np.int64), np.array([6, 0]), np.array([5])]
    parts = [SparseIndex.build(docs[a:b], scoring=scoring) for a, b in zip(cuts, cuts[1:], strict=False)]
    dead = {cuts[i] + int(r) for i, g in enumerate(gone) for r in g}
    assert 250 in dead
    return parts, gone, docs, dead


QUERIES: list[list[QueryUnit]] = [
    [({"w1": 1.0}, 1.0), ({"w5": 1.0}, 2.0), ({"w9": 1.0}, 1.0)],  # common terms: MaxScore skips
    [({"w40": 1.0}, 1.0), ({"w0": 1.0}, 1.0), ({"w1": 1.0}, 0.5), ({"w77": 1.0}, 3.0)],
    [({"w2": 0.6, "w3": 0.4}, 2.0), ({"w7": 1.0}, 1.0), ({"nowhere": 1.0}, 1.0), ({"w8": 0.5}, 1.5)],  # PSQ
    [({"w0": 0.5, "w1": 0.3, "w2": 0.2}, 1.0), ({"w60": 0.9, "unknown": 0.1}, 2.0), ({"w3": 1.0}, 0.0)],
    [({"onlydeleted": 1.0}, 1.0), ({"w119": 1.0}, 1.0)],
]


@pytest.mark.parametrize("scoring", ["bm25", "tfidf"])
def test_segments_searched_in_place_give_the_join(scoring: str) -> None:
    parts, gone, _docs, _dead = _segments(scoring)
    joined = SparseIndex.join(parts, gone)
    seg = SparseGeneration(parts, gone)
    exact = scoring == "bm25"  # tf-idf's row norms are summed in another order by the join (1e-16)

    def same(a: np.ndarray, b: np.ndarray) -> None:
        if exact:
            assert np.array_equal(a, b)
        else:
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=0)

    assert seg.vocab == joined.vocab and "onlydeleted" not in seg.term_id
    assert np.array_equal(seg.df, joined.df) and np.array_equal(seg.doc_len, joined.doc_len)
    assert (seg.n_docs, seg.avgdl, seg.idf_floor) == (joined.n_docs, joined.avgdl, joined.idf_floor)
    same(seg.idf, joined.idf)
    same(seg.doc_norm, joined.doc_norm)
    assert (seg.max_weight >= joined.max_weight).all()  # a bound, never below the largest weight
    assert seg.max_weight[seg.term_id["w0"]] <= joined.max_weight[joined.term_id["w0"]] * 1.5

    pool = AccumulatorPool(joined.n_rows)
    rng = np.random.default_rng(5)
    masks = [None, rng.random(joined.n_rows) < 0.5]
    for units in QUERIES:
        same(seg.score(units), joined.score(units))
        for mask in masks:
            for k in (1, 5, 40, 400):
                for count in (True, False):
                    for saturate, scale_tf in ((False, False), (True, False), (False, True)):
                        (a,), (b,) = pool.take(1), pool.take(1)
                        try:
                            got = seg.search(units, a, k, mask, count=count, saturate=saturate, scale_tf=scale_tf)
                            want = joined.search(units, b, k, mask, count=count, saturate=saturate,
                                                 scale_tf=scale_tf)
                        finally:
                            pool.give([a, b])
                        if exact:
                            assert got[0].tolist() == want[0].tolist(), (units, k, count)
                        else:  # rows may swap where two scores are within the norms' rounding
                            swapped = got[0] != want[0]
                            np.testing.assert_allclose(got[1][swapped], want[1][swapped], rtol=1e-12)
                        same(got[1], want[1])
                        assert got[2] == want[2]
    rows = np.arange(0, joined.n_rows, 7)
    terms = ["w12", "w13", "w1", "onlydeleted", "nowhere"]
    assert seg.matched_terms(terms, rows) == joined.matched_terms(terms, rows)
    for term in ("w0", "w11", "w2", "onlydeleted"):
        assert [a.tolist() for a in seg.postings(term)] == [a.tolist() for a in joined.postings(term)]


def test_the_top_k_is_bounded_across_segments_when_the_listing_stops() -> None:
    """A query of common terms reaches most rows, so the accumulator stops listing them and the top k is taken by the
    units' rows, segment by segment, with the units' bounds (the path a scan of every row would otherwise take)."""
    parts, gone, _docs, _dead = _segments("bm25", seed=3)
    joined, seg = SparseIndex.join(parts, gone), SparseGeneration(parts, gone)
    units = [({"w0": 1.0}, 1.0), ({"w1": 0.7, "w2": 0.3}, 1.0), ({"w50": 1.0}, 2.0)]
    pool = AccumulatorPool(joined.n_rows)
    (a,), (b,) = pool.take(1), pool.take(1)
    reach = seg.accumulate(units, a)
    joined.accumulate(units, b)
    assert not a.tracking and reach.bounded
    got, _ = seg.top_k(a, reach, 10)
    want, _ = joined.top_k(b, joined.accumulate(units, pool.take(1)[0]), 10)
    assert got.tolist() == want.tolist()
    assert np.array_equal(a.scores, b.scores)


@pytest.mark.parametrize("scoring", ["bm25", "tfidf"])
def test_segments_give_one_build_of_the_live_documents(scoring: str) -> None:
    """Against a fresh build of the live rows (deleted ones empty): the same ranking, scores within 1e-12."""
    parts, gone, docs, dead = _segments(scoring, seed=8)
    seg = SparseGeneration(parts, gone)
    fresh = SparseIndex.build([[] if i in dead else d for i, d in enumerate(docs)], scoring=scoring)
    pool = AccumulatorPool(fresh.n_rows)
    for units in QUERIES:
        for count in (True, False):
            (a,), (b,) = pool.take(1), pool.take(1)
            got = seg.search(units, a, 50, count=count)
            want = fresh.search(units, b, 50, count=count)
            pool.give([a, b])
            assert got[0].tolist() == want[0].tolist()
            np.testing.assert_allclose(got[1], want[1], rtol=1e-12)


def test_opening_copies_no_postings_and_threads_search_it_together() -> None:
    """The segments' posting arrays are the segment objects' own (mapped where they lie, nothing joined), and four
    threads searching at once get what one thread gets."""
    parts, gone, _docs, _dead = _segments("bm25", seed=2)
    seg = SparseGeneration(parts, gone)
    joined = SparseIndex.join(parts, gone)
    from service.retrieval.segment_kernels import ROWS, TF

    assert not hasattr(seg, "rows")  # no joined postings: the kernels read each segment's own arrays
    table = seg.segments().table.table
    assert [(int(r[ROWS]), int(r[TF])) for r in table] == [(p.rows.ctypes.data, p.tf.ctypes.data) for p in parts]

    def one(q: int) -> list[float]:
        units: list[QueryUnit] = [({f"w{(q * 7 + j) % 120}": 1.0}, 1.0) for j in range(4)]
        return seg.score(units).tolist()

    with ThreadPoolExecutor(4) as ex:
        got = list(ex.map(one, range(60)))
    for q, scores in enumerate(got):
        assert scores == joined.score([({f"w{(q * 7 + j) % 120}": 1.0}, 1.0) for j in range(4)]).tolist()


def test_a_watch_cut_of_segments_is_the_join_cut() -> None:
    """``restricted`` (a watch's search of the rows an add brought) reads only the segments holding allowed rows and
    gives the join's cut: the same postings, weights and scores."""
    parts, gone, _docs, _dead = _segments("bm25", seed=4)
    seg, joined = SparseGeneration(parts, gone), SparseIndex.join(parts, gone)
    allowed = np.zeros(joined.n_rows, dtype=np.bool_)
    allowed[[1, 5, 241, 243, 250, 336, 399]] = True  # rows of every segment, one of them deleted (250)
    cut_s, cut_j = seg.restricted(allowed), joined.restricted(allowed)
    assert np.array_equal(cut_s.indptr, cut_j.indptr) and np.array_equal(cut_s.rows, cut_j.rows)
    assert np.array_equal(cut_s.tf, cut_j.tf) and 250 not in set(cut_s.rows.tolist())
    assert np.array_equal(cut_s.weights, cut_j.weights)
    for units in QUERIES:
        assert np.array_equal(cut_s.score(units), cut_j.score(units))


def test_segments_scored_with_other_parameters_are_refused() -> None:
    from service.index.folder import IndexFormatError

    a, b = SparseIndex.build([["x"]]), SparseIndex.build([["y"]], k1=2.0)
    with pytest.raises(IndexFormatError, match="other parameters"):
        SparseGeneration([a, b], [np.zeros(0, dtype=np.int64)] * 2)
