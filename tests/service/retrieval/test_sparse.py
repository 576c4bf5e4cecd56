"""Sparse scorer: rank-bm25 parity (tiny and real corpora), tf-idf, PSQ, persistence, top-k."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from rank_bm25 import BM25Okapi

from service.index.folder import IndexFormatError
from service.retrieval.kernels import AccumulatorPool, ScoreAccumulator
from service.retrieval.sparse import SparseIndex, monolingual_units
from service.text.analysis import Analyzer
from service.text.translation import TranslationTable

DOCS = [
    ["coil", "core", "transformer", "winding", "coil"],
    ["pump", "valve", "fluid", "valve"],
    ["coil", "spring", "valve"],
    ["transformer", "core", "lamination", "core", "core"],
    ["fluid", "nozzle", "spray"],
    ["spring", "latch", "housing", "housing"],
]


def test_bm25_matches_rank_bm25_on_tiny_corpus() -> None:
    idx = SparseIndex.build(DOCS, k1=1.5, b=0.75)
    ref = BM25Okapi(DOCS, k1=1.5, b=0.75)
    for query in (["coil"], ["core", "core", "valve"], ["valve", "fluid", "unknownterm"], ["housing", "spring"]):
        np.testing.assert_allclose(idx.score(monolingual_units(query)), ref.get_scores(query), rtol=0, atol=1e-12)


def test_negative_idf_gets_the_epsilon_floor() -> None:
    docs = [["a", "b"], ["a", "c"], ["a", "d"], ["e"]]  # 'a' in 3 of 4 docs -> negative raw idf
    idx = SparseIndex.build(docs, k1=1.2, b=0.75, epsilon=0.25)
    raw = {t: math.log(4 - df + 0.5) - math.log(df + 0.5) for t, df in {"a": 3, "b": 1, "c": 1, "d": 1, "e": 1}.items()}
    floor = 0.25 * sum(raw.values()) / len(raw)
    assert idx.idf[idx.term_id["a"]] == pytest.approx(floor)
    assert idx.idf[idx.term_id["b"]] == pytest.approx(raw["b"])
    ref = BM25Okapi(docs, k1=1.2, b=0.75, epsilon=0.25)
    np.testing.assert_allclose(idx.score(monolingual_units(["a", "e"])), ref.get_scores(["a", "e"]), atol=1e-12)


def test_empty_and_unknown_queries_score_zero() -> None:
    idx = SparseIndex.build(DOCS)
    assert not idx.score([]).any()
    assert not idx.score(monolingual_units(["nothere", "neither"])).any()
    acc = ScoreAccumulator(idx.n_rows)
    idx.accumulate(monolingual_units(["nothere"]), acc)
    assert acc.n == 0 and len(acc.top_k(5)) == 0 and acc.matched() == 0 and acc.matched_max() == (0, 0.0)


def test_empty_rows_do_not_count_in_n_or_avgdl() -> None:
    with_empty = SparseIndex.build([DOCS[0], [], DOCS[1], []])
    plain = SparseIndex.build([DOCS[0], DOCS[1]])
    assert with_empty.n_rows == 4 and with_empty.n_docs == 2
    assert with_empty.avgdl == plain.avgdl
    q = monolingual_units(["coil", "valve"])
    np.testing.assert_allclose(with_empty.score(q)[[0, 2]], plain.score(q))
    assert with_empty.score(q)[[1, 3]].tolist() == [0.0, 0.0]


def test_tfidf_formula_and_sanity() -> None:
    idx = SparseIndex.build(DOCS, scoring="tfidf")
    n = len(DOCS)
    # hand computation for the query "coil core" on document 0
    tf0 = {"coil": 2, "core": 1, "transformer": 1, "winding": 1}
    norm0 = math.sqrt(sum(math.log1p(v) ** 2 for v in tf0.values()))
    idf = {"coil": math.log(n / 2), "core": math.log(n / 2)}
    want0 = (idf["coil"] * math.log1p(2) + idf["core"] * math.log1p(1)) / norm0
    scores = idx.score(monolingual_units(["coil", "core"]))
    assert scores[0] == pytest.approx(want0)
    # a rarer term weighs more than a common one at equal tf
    s_rare = idx.score(monolingual_units(["lamination"]))[3]
    s_common = idx.score(monolingual_units(["transformer"]))[3]
    assert s_rare > s_common > 0
    # a term in every document has idf 0
    everywhere = SparseIndex.build([["x", "a"], ["x", "b"]], scoring="tfidf")
    assert not everywhere.score(monolingual_units(["x"])).any()


def test_psq_single_alternative_equals_monolingual() -> None:
    idx = SparseIndex.build(DOCS)
    mono = idx.score(monolingual_units(["valve", "core", "core"]))
    table = TranslationTable({"ventil": {"valve": 1.0}, "kern": {"core": 1.0}}, src="de")
    units = [(table.translate_term(t), c) for t, c in (("ventil", 1.0), ("kern", 2.0))]
    np.testing.assert_allclose(idx.score(units), mono, atol=1e-12)
    # the general PSQ path (an extra alternative that is not in the vocabulary) gives the same
    general = [({"valve": 1.0, "notinvocab": 0.5}, 1.0), ({"core": 1.0, "alsonot": 0.2}, 2.0)]
    np.testing.assert_allclose(idx.score(general), mono, atol=1e-12)


@pytest.mark.parametrize("scoring", ["bm25", "tfidf"])
def test_psq_expected_tf_and_df_against_hand_computation(scoring: str) -> None:
    k1, b = 1.2, 0.75
    idx = SparseIndex.build(DOCS, scoring=scoring, k1=k1, b=b)
    unit = {"coil": 0.7, "core": 0.3}
    got = idx.score([(unit, 2.0)])
    n = len(DOCS)
    df = {"coil": 2, "core": 2}
    df_e = 0.7 * df["coil"] + 0.3 * df["core"]
    lens = [len(d) for d in DOCS]
    avgdl = sum(lens) / n
    for row, doc in enumerate(DOCS):
        tf_e = 0.7 * doc.count("coil") + 0.3 * doc.count("core")
        if scoring == "bm25":
            idf = math.log(n - df_e + 0.5) - math.log(df_e + 0.5)
            want = 2.0 * idf * tf_e * (k1 + 1) / (tf_e + k1 * (1 - b + b * lens[row] / avgdl)) if tf_e else 0.0
        else:
            idf = math.log(n / df_e)
            counts = {t: doc.count(t) for t in set(doc)}
            norm = math.sqrt(sum(math.log1p(c) ** 2 for c in counts.values()))
            want = 2.0 * idf * math.log1p(tf_e) / norm
        assert got[row] == pytest.approx(want, abs=1e-12), row
    assert idx.expected_df(unit) == pytest.approx(df_e)


def test_save_load_roundtrip_and_mmap(tmp_path: Path) -> None:
    idx = SparseIndex.build(DOCS, scoring="bm25", k1=1.1, b=0.6)
    idx.save(tmp_path / "bm25")
    loaded = SparseIndex.load(tmp_path / "bm25", mmap=True)
    assert loaded.vocab == idx.vocab and loaded.k1 == 1.1 and loaded.b == 0.6
    assert not list(tmp_path.glob("bm25/*.pkl"))
    q = [({"coil": 0.5, "valve": 0.5}, 1.0), ({"core": 1.0}, 3.0)]
    np.testing.assert_array_equal(loaded.score(q), idx.score(q))
    rows, tf = loaded.postings("core")
    assert rows.tolist() == [0, 3] and tf.tolist() == [1, 3]


def test_load_refuses_broken_folders(tmp_path: Path) -> None:
    SparseIndex.build(DOCS).save(tmp_path / "a")
    params = json.loads((tmp_path / "a" / "params.json").read_text())
    params["version"] = 99
    (tmp_path / "a" / "params.json").write_text(json.dumps(params))
    with pytest.raises(IndexFormatError, match="params.json"):
        SparseIndex.load(tmp_path / "a")
    SparseIndex.build(DOCS).save(tmp_path / "b")
    np.save(tmp_path / "b" / "weights.npy", np.zeros(3))
    with pytest.raises(IndexFormatError, match="weights.npy"):
        SparseIndex.load(tmp_path / "b")


def test_bad_parameters_are_refused() -> None:
    with pytest.raises(ValueError, match="bm25, tfidf"):
        SparseIndex.build(DOCS, scoring="bm42")
    with pytest.raises(ValueError, match="b must be"):
        SparseIndex.build(DOCS, b=1.5)


def _brute_top(scores: np.ndarray, allowed: np.ndarray, k: int) -> np.ndarray:
    cand = np.flatnonzero(allowed)
    return cand[np.lexsort((cand, -scores[cand]))][:k]


def test_accumulator_top_k_orders_by_score_then_row_and_respects_mask() -> None:
    acc = ScoreAccumulator(6)
    acc.add_values(np.array([5, 3, 1, 2, 0]), np.array([2.0, 3.0, 3.0, 2.0, 1.0]))
    assert acc.top_k(3).tolist() == [1, 3, 2]
    assert acc.top_k(10).tolist() == [1, 3, 2, 5, 0] and acc.matched() == 5  # row 4 was never reached
    mask = np.array([True, False, True, True, True, False])
    assert acc.top_k(2, mask).tolist() == [3, 2] and acc.matched(mask) == 3
    assert acc.matched_max(mask) == (3, 3.0)
    acc.reset()
    assert acc.n == 0 and not acc.scores.any() and not acc.seen.any()


def test_accumulator_equals_the_dense_sums_and_brute_force_top_k() -> None:
    """Postings added in any order, some values 0 or negative (an idf floor below zero), ties, masks, few rows reached
    (listed) or many (scanned): the scores are np.add.at's bit for bit, the top k and counts are brute force's, and
    a reset leaves zeros."""
    rng = np.random.default_rng(11)
    n = 5000
    acc = ScoreAccumulator(n)
    modes = set()
    for trial in range(80):
        want = np.zeros(n)
        added: set[int] = set()
        for _ in range(int(rng.integers(0, 6))):
            size = int(rng.choice([1, 30, 200, 2000, 5000]))
            rows = np.sort(rng.choice(n, size=size, replace=False)).astype(np.int32)
            weights = rng.random(size)
            if trial % 3 == 0:
                weights = np.round(weights * 4)  # many ties, zeros
            if trial % 5 == 0:
                weights[rng.random(size) < 0.3] *= -1
            mult = float(rng.choice([1.0, 2.0, 0.5]))
            values = weights if mult == 1.0 else weights * mult
            acc.add_values(rows, values)
            np.add.at(want, rows, values)
            added.update(rows.tolist())
        modes.add(acc.tracking)
        np.testing.assert_array_equal(acc.scores, want)
        if acc.tracking:
            assert sorted(acc.rows.tolist()) == sorted(added)  # each reached row listed once
        mask = rng.random(n) < float(rng.choice([0.05, 0.5, 0.95])) if trial % 2 else None
        allowed = want != 0 if mask is None else (want != 0) & mask
        for k in (1, 10, 1000):
            np.testing.assert_array_equal(acc.top_k(k, mask), _brute_top(want, allowed, k))
        assert acc.matched(mask) == int(allowed.sum())
        assert acc.matched_max(mask) == (int(allowed.sum()), float(want[allowed].max()) if allowed.any() else 0.0)
        acc.reset()
        assert acc.n == 0 and acc.tracking and not acc.scores.any() and not acc.seen.any()
    assert modes == {True, False}  # both the listed and the scanned accumulator were checked


@pytest.mark.parametrize("scoring", ["bm25", "tfidf"])
def test_one_route_top_k_by_the_units_bounds_equals_brute_force(scoring: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """SparseIndex.top_k: rows of common-term queries (most rows reached) enumerated by their units, the units that
    can add most first, stopping at the bound: the same rows as a brute-force sort of the dense scores, and the
    count of the matched rows; also with PSQ units, repeated terms and masks."""
    rng = np.random.default_rng(2)
    vocab = [f"t{i}" for i in range(60)]
    p = 1.0 / np.arange(1, len(vocab) + 1) ** 0.9  # Zipfian: a few terms in most documents
    docs = [list(rng.choice(vocab, size=int(rng.integers(0, 25)), p=p / p.sum())) for _ in range(3000)]
    idx = SparseIndex.build(docs, scoring=scoring)
    from service.retrieval import segment_kernels

    calls = {"bounded": 0}
    bounded = segment_kernels._top_k_bounded

    def counting(*args: object) -> object:
        calls["bounded"] += 1
        return bounded(*args)

    monkeypatch.setattr(segment_kernels, "_top_k_bounded", counting)
    acc = ScoreAccumulator(idx.n_rows)
    for trial in range(60):
        terms = list(rng.choice(vocab[:30], size=int(rng.integers(1, 9)), p=p[:30] / p[:30].sum()))
        units = monolingual_units(terms)
        if trial % 3 == 0:
            units.append(({"t40": 0.6, "t2": 0.3, "nothere": 0.1}, 2.0))
        mask = rng.random(idx.n_rows) < 0.6 if trial % 2 else None
        dense = idx.score(units)
        allowed = dense != 0 if mask is None else (dense != 0) & mask
        for k in (1, 10, 100):
            reach = idx.accumulate(units, acc)
            np.testing.assert_array_equal(acc.scores, dense)
            rows, matched = idx.top_k(acc, reach, k, mask)
            np.testing.assert_array_equal(rows, _brute_top(dense, allowed, k))
            assert matched == int(allowed.sum())
            acc.reset()
            reach = idx.accumulate(units, acc)  # the same rows without the count (None: not counted)
            rows, matched = idx.top_k(acc, reach, k, mask, count=False)
            np.testing.assert_array_equal(rows, _brute_top(dense, allowed, k))
            assert matched is None
            acc.reset()
    # most of these queries reach most rows: the units' bounds were used (not for tf-idf's PSQ units: no bound)
    assert calls["bounded"] > (200 if scoring == "bm25" else 160)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_maxscore_search_equals_the_full_accumulation_bit_for_bit(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """SparseIndex.search without a count (MaxScore: the long lists of common terms only looked up for the rows that
    can still reach the top k) gives the rows and scores of the full accumulation exactly, for rare and common terms,
    repeated terms, ties, masks and k up to the MaxScore limit (a query whose rare terms already reach more than a
    quarter of the rows is accumulated whole: both paths are taken here)."""
    from service.retrieval import maxscore

    rng = np.random.default_rng(seed)
    vocab = [f"t{i}" for i in range(400)]
    p = 1.0 / np.arange(1, len(vocab) + 1) ** 1.1
    docs = [list(rng.choice(vocab, size=int(rng.integers(0, 40)), p=p / p.sum())) for _ in range(4000)]
    docs[7] = docs[8] = ["t300", "t301"]  # exact ties
    idx = SparseIndex.build(docs)
    used = {"maxscore": 0, "whole": 0}
    original = maxscore.maxscore

    def counting(*args: object) -> object:
        out = original(*args)  # type: ignore[arg-type]
        used["maxscore" if out is not None else "whole"] += 1
        return out

    monkeypatch.setattr(maxscore, "maxscore", counting)
    acc = ScoreAccumulator(idx.n_rows)
    for trial in range(120):
        n_terms = int(rng.integers(1, 12))
        terms = list(rng.choice(vocab, size=n_terms, p=p / p.sum())) + list(rng.choice(vocab[100:], size=2))
        if trial % 10 == 0:
            terms = ["t300", "t301"]
        units = monolingual_units(terms)
        mask = rng.random(idx.n_rows) < 0.5 if trial % 3 == 0 else None
        k = int(rng.choice([1, 3, 10, 50, 100]))
        want_rows, want_scores, n_matched = idx.search(units, acc, k, mask, count=True)
        acc.reset()
        before = used["maxscore"]
        rows, scores, none = idx.search(units, acc, k, mask, count=False)
        assert none is None  # not counted, whichever path
        if used["maxscore"] > before:  # MaxScore leaves the accumulator zeroed
            assert acc.n == 0 and not acc.scores.any() and not acc.seen.any() and not acc.partial.any()
        acc.reset()
        np.testing.assert_array_equal(rows, want_rows)
        assert scores.tolist() == want_scores.tolist()  # bit for bit
        dense = idx.score(units)
        allowed = dense != 0 if mask is None else (dense != 0) & mask
        np.testing.assert_array_equal(rows, _brute_top(dense, allowed, k))
    assert used["maxscore"] > 30 and used["whole"] > 5, used  # both paths taken, often


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_maxscore_float32_partial_scores_never_cut_a_row_of_the_top_k(seed: int) -> None:
    """MaxScore decides on float32 partial scores: rows whose float64 scores differ far below float32's resolution
    (one part in 1e12), weights below the floor it adds (1e-35; 1e-46, which float32 rounds to 0) and units
    that add 0 everywhere still give exactly the top k of the float64 accumulation, scores bit for bit."""
    from service.retrieval import kernels, maxscore

    rng = np.random.default_rng(seed)
    n_rows, n_terms = 8000, 24
    rows_l, weights_l = [], []
    for t in range(n_terms):
        rows_t = np.sort(rng.choice(n_rows, size=int(rng.integers(10, 500)), replace=False)).astype(np.int32)
        base = rng.choice([0.0, 1e-46, 1e-35, 0.7, 1.3, 2.9]) if t % 3 == 0 else float(rng.uniform(0.5, 3.0))
        weights_l.append(base * (1.0 + rng.integers(0, 4, size=len(rows_t)) * 1e-12))  # float32 cannot tell apart
        rows_l.append(rows_t)
    indptr = np.concatenate([[0], np.cumsum([len(r) for r in rows_l])]).astype(np.int64)
    rows, weights = np.concatenate(rows_l), np.concatenate(weights_l)
    max_weight = kernels.max_per_term(indptr, weights)
    from service.retrieval.segment_kernels import SegmentTable

    # one segment of stored weights, each term its own column (as SparseIndex.segments gives them)
    table = SegmentTable([rows], [np.zeros(len(rows), dtype=np.int32)], [indptr], [np.zeros(0, dtype=np.bool_)],
                         [n_rows], weights=[weights])
    loc, no_norm = np.zeros((1, 0), dtype=np.int32), np.zeros(1)
    acc = ScoreAccumulator(n_rows)
    searched = 0
    for trial in range(60):
        ids = rng.choice(n_terms, size=int(rng.integers(1, 10)), replace=False).astype(np.int64)
        mults = rng.choice([1.0, 1.0, 2.0, 0.5], size=len(ids))
        mask = rng.random(n_rows) < 0.7 if trial % 4 == 0 else None
        k = int(rng.choice([1, 5, 10, 40]))
        dense = np.zeros(n_rows)
        for t, mu in zip(ids.tolist(), mults.tolist(), strict=True):  # the query's order, as the accumulator adds
            lo, hi = indptr[t], indptr[t + 1]
            dense[rows[lo:hi]] += weights[lo:hi] if mu == 1.0 else weights[lo:hi] * mu
        allowed = dense != 0 if mask is None else (dense != 0) & mask
        found = maxscore.maxscore(acc, k, mask, table, loc, no_norm, 1.2, False, max_weight, max_weight, ids, mults)
        if found is None:  # (its rare terms reach more than a quarter of the rows: accumulated whole instead)
            assert acc.n == 0 and not acc.partial.any()
            continue
        searched += 1
        want = _brute_top(dense, allowed, k)
        np.testing.assert_array_equal(found[0], want)
        assert found[1].tolist() == dense[want].tolist()  # bit for bit
        assert acc.n == 0 and not acc.partial.any()
    assert searched > 40


def test_accumulator_merge_equals_the_dense_merge_of_routes() -> None:
    """Routes merged on one scale: each row's best score/norm over the routes that matched it (first route wins a
    tie), the route that gave it, and every matched row a candidate even where its merged score stays at 0."""
    rng = np.random.default_rng(5)
    n = 3000
    for trial in range(30):
        routes = [ScoreAccumulator(n) for _ in range(3)]
        merged = ScoreAccumulator(n)
        dense = []
        for acc in routes:
            rows = np.sort(rng.choice(n, size=int(rng.integers(0, 1500)), replace=False))
            values = np.round(rng.random(len(rows)) * 3) - (1.0 if trial % 4 == 0 else 0.0)
            acc.add_values(rows, values)
            d = np.zeros(n)
            d[rows] = values
            dense.append(d)
        mask = rng.random(n) < 0.7 if trial % 2 else None
        norms = [float(x) for x in rng.choice([0.5, 1.0, 2.0], size=3)]
        final, winner, any_allowed = np.zeros(n), np.full(n, -1), np.zeros(n, dtype=bool)
        for i, (acc, d) in enumerate(zip(routes, dense, strict=True)):
            merged.merge(acc, mask, norms[i], i)
            allowed = (d != 0) if mask is None else (d != 0) & mask
            rr = np.flatnonzero(allowed)
            normed = d[rr] / norms[i]
            better = normed > final[rr]
            final[rr[better]] = normed[better]
            winner[rr[better]] = i
            any_allowed |= allowed
        np.testing.assert_array_equal(merged.scores, final)
        assert merged.winner is not None
        np.testing.assert_array_equal(merged.winner[any_allowed], winner[any_allowed])
        np.testing.assert_array_equal(merged.top_k(200, nonzero=False), _brute_top(final, any_allowed, 200))
        merged.reset()
        assert not merged.scores.any() and (merged.winner == -1).all() and not merged.seen.any()


def test_pool_lends_zeroed_accumulators_and_keeps_them() -> None:
    pool = AccumulatorPool(10)
    a, b = pool.take(2)
    a.add_values(np.array([1, 4]), np.array([1.0, 2.0]))
    b.add_values(np.array([3]), np.array([5.0]))
    pool.give([a, b])
    again = pool.take(3)
    assert {id(x) for x in again[:2]} == {id(a), id(b)}  # reused, not made anew
    assert all(x.n == 0 and not x.scores.any() and x.tracking for x in again)
    again[2].add_values(np.arange(10), np.ones(10))  # past the listing cap: zeroed whole when given back
    assert not again[2].tracking
    pool.give(again)
    assert all(x.n == 0 and not x.scores.any() and not x.seen.any() for x in pool.take(3))


def test_matched_terms() -> None:
    idx = SparseIndex.build(DOCS)
    got = idx.matched_terms(["valve", "coil", "nothere"], np.array([2, 1, 4]))
    assert got == [["valve", "coil"], ["valve"], []]


@pytest.mark.realdata
def test_parity_with_rank_bm25_on_real_patents(ep_dir: Path, us_dir: Path) -> None:
    ingest = pytest.importorskip("training.ingest")
    analyzer = Analyzer("en")
    docs: list[list[str]] = []
    queries: list[list[str]] = []
    for rec in ingest.iter_records([ep_dir, us_dir]):
        terms = analyzer(rec.text("en"))
        if not terms:
            continue
        docs.append(terms)
        if rec.title.get("en") and len(queries) < 25:
            queries.append(analyzer(rec.title["en"]))
        if rec.claims.get("en") and len(queries) < 60 and len(docs) % 3 == 0:
            queries.append(analyzer(rec.claims["en"][0].text))
    queries = [q for q in queries if q]
    assert len(docs) > 300 and len(queries) >= 30
    k1, b = 1.2, 0.75
    idx = SparseIndex.build(docs, k1=k1, b=b)
    ref = BM25Okapi(docs, k1=k1, b=b)
    acc = ScoreAccumulator(idx.n_rows)  # what a search adds into, kept between the queries
    for q in queries:
        want = ref.get_scores(q)
        got = idx.score(monolingual_units(q))
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
        idx.accumulate(monolingual_units(q), acc)
        np.testing.assert_array_equal(acc.scores, got)
        n = min(10, int((want != 0).sum()))
        mine = acc.top_k(10)
        acc.reset()
        assert len(mine) == n
        ref_top = np.sort(want)[::-1][:n]
        np.testing.assert_allclose(got[mine], ref_top, rtol=0, atol=1e-6)
        np.testing.assert_allclose(want[mine], got[mine], rtol=0, atol=1e-6)
        # identical ids, except rows tied with the 10th score may be swapped
        theirs = set(np.argsort(want)[::-1][:n].tolist())
        differ = set(mine.tolist()) ^ theirs
        assert all(abs(want[r] - ref_top[-1]) <= 1e-6 for r in differ), q


def test_matched_terms_for_a_few_and_for_many_rows() -> None:
    rng = np.random.default_rng(3)
    vocab = [f"t{i}" for i in range(30)]
    docs = [list(rng.choice(vocab, size=int(rng.integers(0, 12)))) for _ in range(300)]
    idx = SparseIndex.build(docs)
    terms = ["t3", "t0", "nothere", "t3", "t17", "t29"]
    for rows in (np.array([5, 0, 299, 17]), rng.permutation(300)[:200]):
        got = idx.matched_terms(terms, rows)
        assert got == [[t for t in dict.fromkeys(terms) if t in docs[r]] for r in rows.tolist()]


def test_score_of_repeated_terms_is_unchanged() -> None:
    """Counts of 1 add the stored weights as they are; the sum equals the per-posting formula."""
    idx = SparseIndex.build(DOCS, k1=1.2, b=0.75)
    q = ["coil", "valve", "coil", "core", "spring"]
    got = idx.score(monolingual_units(q))
    want = np.zeros(len(DOCS))
    for term, count in {"coil": 2, "valve": 1, "core": 1, "spring": 1}.items():
        rows, tf = idx.postings(term)
        t = idx.term_id[term]
        w = idx.idf[t] * (tf * (idx.k1 + 1) / (tf + idx.doc_norm[rows]))
        np.add.at(want, rows, w * count)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(got, BM25Okapi(DOCS, k1=1.2, b=0.75).get_scores(q), rtol=0, atol=1e-9)


def test_compiled_additions_keep_the_order_of_the_units() -> None:
    """Runs of single-term units go to the compiled loop between PSQ units: the sums are numpy's, bit for bit."""
    idx = SparseIndex.build(DOCS)
    units = [({"coil": 1.0}, 2.0), ({"valve": 0.5, "fluid": 0.5}, 1.0), ({"core": 1.0}, 1.0), ({"spring": 1.0}, 3.0)]
    want = np.zeros(len(DOCS))
    for mapping, weight in units:
        if len(mapping) == 1:
            t = idx.term_id[next(iter(mapping))]
            lo, hi = idx.indptr[t], idx.indptr[t + 1]
            w = idx.weights[lo:hi]
            np.add.at(want, idx.rows[lo:hi], w if weight == 1 else w * weight)
        else:
            want += idx.score([(mapping, weight)])  # a PSQ unit alone, added into zeros: exact
    np.testing.assert_array_equal(idx.score(units), want)


def test_saturated_psq_units_stop_at_k1_plus_one_best_occurrences() -> None:
    # a unit spread over four translations: a row that repeats all of them would add several times what a row
    # holding the best translation once adds; saturated, at most (k1 + 1) times that (a source term's ceiling)
    docs = [["method", "process", "procedure", "technique"] * 6, ["method", "valve"], ["valve", "spring"],
            ["pump"], ["nozzle"], ["latch"]]
    idx = SparseIndex.build(docs)
    unit = [({"method": 0.4, "process": 0.2, "procedure": 0.2, "technique": 0.2}, 1.0)]
    plain, sat = ScoreAccumulator(len(docs)), ScoreAccumulator(len(docs))
    idx.accumulate(unit, plain)
    idx.accumulate(unit, sat, saturate=True)
    idf = idx.unit_idf(unit[0][0])
    k1, best = idx.k1, 0.4
    ceiling = idf * (k1 + 1) * best * (k1 + 1) / (best + k1)
    assert plain.scores[0] > ceiling  # the repeating row, unsaturated, passes the ceiling ...
    assert sat.scores[0] == pytest.approx(ceiling)  # ... and stops at it
    assert sat.scores[1] == pytest.approx(plain.scores[1])  # one best translation: below the ceiling, unchanged
    assert not sat.scores[2:].any()


def test_scaled_psq_units_count_the_best_translation_as_one_occurrence() -> None:
    # scaled: the expected tf over the best translation's probability, so that one occurrence of it is tf 1 and the
    # unit follows BM25's own curve to the same ceiling as an untranslated term (idf * (k1 + 1))
    docs = [["method", "process", "procedure", "technique"] * 6, ["method", "valve"], ["process", "spring"],
            ["pump"], ["nozzle"], ["latch"]]
    idx = SparseIndex.build(docs)
    mapping = {"method": 0.4, "process": 0.2, "procedure": 0.2, "technique": 0.2}
    scaled = ScoreAccumulator(len(docs))
    idx.accumulate([(mapping, 1.0)], scaled, scale_tf=True)
    idf, k1 = idx.unit_idf(mapping), idx.k1
    for row, tf in ((1, 1.0), (2, 0.5), (0, 6 * (0.4 + 0.2 * 3) / 0.4)):  # method once; process once; all 6 times
        assert scaled.scores[row] == pytest.approx(idf * tf * (k1 + 1) / (tf + idx.doc_norm[row]))
    assert scaled.scores[0] < idf * (k1 + 1)  # the ceiling an untranslated term has
    assert not scaled.scores[3:].any()


def test_psq_units_are_independent_and_additive() -> None:
    idx = SparseIndex.build(DOCS)
    u1, u2 = {"coil": 0.6, "core": 0.4}, {"valve": 0.5, "fluid": 0.3, "coil": 0.2}
    both = idx.score([(u1, 1.0), (u2, 2.0)])
    np.testing.assert_allclose(both, idx.score([(u1, 1.0)]) + idx.score([(u2, 2.0)]), atol=1e-12)


@pytest.mark.parametrize("scoring", ["bm25", "tfidf"])
def test_chunked_weight_precomputation_matches(scoring: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import service.retrieval.sparse as sparse_mod

    whole = SparseIndex.build(DOCS, scoring=scoring)
    monkeypatch.setattr(sparse_mod, "_WEIGHT_CHUNK", 3)  # many steps, some columns longer than a step
    chunked = SparseIndex.build(DOCS, scoring=scoring)
    np.testing.assert_array_equal(chunked.weights, whole.weights)
    np.testing.assert_allclose(chunked.doc_norm, whole.doc_norm, rtol=1e-12)


def test_matched_terms_of_a_shard_skip_the_collection_terms_it_lacks() -> None:
    """A shard weighted with the global statistics holds every collection term, some with empty postings."""
    from service.retrieval.sparse import CollectionStats

    mine, other = [["coil", "valve"], ["valve"]], [["spring", "coil"]]
    stats = CollectionStats.of(SparseIndex.build(mine)) + CollectionStats.of(SparseIndex.build(other))
    shard = SparseIndex.build(mine).reweighted(stats)
    assert "spring" in shard.vocab  # the other shard's term, no postings here
    rows = np.array([1, 0])
    assert shard.matched_terms(["spring", "valve", "coil"], rows) == [["valve"], ["valve", "coil"]]
    many = np.arange(2).repeat(40)  # the path for more than a top 10
    assert shard.matched_terms(["spring", "coil"], many)[:2] == [["coil"], ["coil"]]


@pytest.mark.parametrize("scoring", ["bm25", "tfidf"])
def test_join_of_segments_with_deletions_equals_one_build_of_the_live_rows(scoring: str) -> None:
    """``SparseIndex.join`` (segments one after the other, deleted rows dropped) holds exactly the arrays of one build
    of the live rows in the same order (deleted rows kept as empty rows), so every weight is that build's; a term of
    deleted rows only leaves the vocabulary."""
    rng = np.random.default_rng(7)
    words = [f"w{i}" for i in range(60)]
    docs = [list(rng.choice(words, size=int(rng.integers(0, 12)))) for _ in range(90)]
    docs[40] = ["onlydeleted", "w1"]  # its one new term goes with it
    cuts, gone = (0, 50, 52, 90), [np.array([40, 3]), np.array([], dtype=np.int64), np.array([0, 37])]
    parts = [SparseIndex.build(docs[a:b], scoring=scoring) for a, b in zip(cuts, cuts[1:], strict=False)]
    joined = SparseIndex.join(parts, gone)
    dead = {cuts[i] + int(r) for i, g in enumerate(gone) for r in g}
    want = SparseIndex.build([[] if i in dead else d for i, d in enumerate(docs)], scoring=scoring)
    assert "onlydeleted" not in joined.term_id and joined.n_rows == 90
    order = [joined.term_id[t] for t in want.vocab]  # the build numbers terms by first use, row after row
    assert sorted(want.vocab) == sorted(joined.vocab)
    for t, j in zip(want.vocab, order, strict=True):
        i = want.term_id[t]
        a, b = slice(want.indptr[i], want.indptr[i + 1]), slice(joined.indptr[j], joined.indptr[j + 1])
        assert np.array_equal(want.rows[a], joined.rows[b]) and np.array_equal(want.tf[a], joined.tf[b]), t
        np.testing.assert_allclose(joined.weights[b], want.weights[a], rtol=1e-12)
    assert np.array_equal(joined.doc_len, want.doc_len)
    np.testing.assert_allclose(joined.doc_norm, want.doc_norm, rtol=1e-12)
    units = [({"w1": 1.0}, 1.0), ({"w2": 0.6, "w3": 0.4}, 2.0)]
    pool = AccumulatorPool(joined.n_rows)
    (acc_a,), (acc_b,) = pool.take(1), pool.take(1)
    joined.accumulate(units, acc_a)
    want.accumulate(units, acc_b)
    np.testing.assert_allclose(acc_a.scores, acc_b.scores, rtol=1e-12)
