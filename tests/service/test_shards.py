"""Shards with global statistics (issue 15): a sharded index searches exactly like the unsharded one."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from index_copy import copy_index
from suite_corpus import suite_records, write_suite_corpus

from service.candidates import best_first
from service.corpus.jsonl import read_corpus, write_corpus
from service.corpus.record import PatentRecord
from service.engine import Engine
from service.index.folder import (
    INDEX_FORMAT,
    INDEX_VERSION,
    IndexFolder,
    IndexFormatError,
    Layout,
    ShardedIndexError,
    ShardSet,
    current_generation,
)
from service.index.live import add_documents, delete_documents
from service.query import Query
from service.retrieval.sparse import CollectionStats, SparseIndex
from service.schema import SearchRequest
from service.settings import Settings
from service.shards import ShardFanOut, ShardHits, merge
from service.versioned import read_versioned
from training.build import BuildError, build_index, build_sharded_index

TOL = 1e-9


# ------------------------------------------------------------------------------------------ unit


def test_ties_are_ordered_by_document_id_whatever_the_rows() -> None:
    """Issue 60: two identical documents tied at the learned ranker's cut-off; one index put one of them in its window,
    the shards (rows numbered per shard) the other. Tied scores go by document id, the whole run across the cut-off."""
    scores = np.array([0.5, 0.9, 0.9, 0.1, 0.9 + 1e-15, 0.3])
    names = ["f", "e", "c", "a", "d", "b"]  # the candidates' documents
    for rows in (np.arange(6), np.array([3, 0, 5, 4, 1, 2])):  # any numbering of the same documents
        ids = [""] * 6
        for name, row in zip(names, rows, strict=True):
            ids[int(row)] = name
        assert [names[i] for i in best_first(scores, rows, ids, 6)] == ["c", "d", "e", "f", "b", "a"]
        assert [names[i] for i in best_first(scores, rows, ids, 2)] == ["c", "d"]  # the run cut at 2, ordered whole
    untied = np.array([0.4, 0.5, 0.3])
    assert best_first(untied, np.arange(3), ["z", "y", "x"], 2).tolist() == [1, 0]
    assert best_first(scores[:0], np.arange(0), [], 3).tolist() == []


def test_global_statistics_weight_a_shard_as_the_whole_collection() -> None:
    rng = np.random.default_rng(3)
    words = [f"w{i}" for i in range(300)]
    docs = [[words[int(j)] for j in rng.zipf(1.3, size=int(rng.integers(0, 40))) % 300] for _ in range(240)]
    units = [({"w1": 1.0}, 2.0), ({"w7": 0.5, "w40": 0.3, "w299": 0.2}, 1.0), ({"w3": 1.0}, 1.0)]
    for scoring in ("bm25", "tfidf"):
        full = SparseIndex.build(docs, scoring=scoring)
        parts = [SparseIndex.build([d for i, d in enumerate(docs) if i % 3 == s], scoring=scoring) for s in range(3)]
        stats = sum((CollectionStats.of(p) for p in parts), CollectionStats())
        assert stats.n_docs == full.n_docs and len(stats.df) == len(full.vocab)
        for s, part in enumerate(parts):
            shard = part.reweighted(stats)
            assert (shard.n_docs, shard.avgdl) == (full.n_docs, full.avgdl)
            assert shard.idf_floor == pytest.approx(full.idf_floor, rel=1e-12)
            assert set(shard.vocab) == set(full.vocab)  # global vocabulary: PSQ expected df, reference scores
            for mapping, _ in units:
                assert shard.unit_idf(mapping) == pytest.approx(full.unit_idf(mapping), rel=1e-12)
            rows = [i for i in range(len(docs)) if i % 3 == s]
            np.testing.assert_allclose(shard.score(units), full.score(units)[rows], rtol=TOL, atol=1e-12)
            assert CollectionStats.of(shard).df == CollectionStats.of(part).df  # its own counts, not the global


def test_merge_keeps_the_global_top_depth_and_zeroes_bm25_of_dense_only_rows() -> None:
    def part(shard: int, bm25: list[float], dense: list[float], first: list[bool]) -> ShardHits:
        n = len(bm25)
        return ShardHits(shard, 10, 0, np.arange(n), {"bm25": np.array(bm25), "dense": np.array(dense)},
                         np.array(first), np.array([True] * n))

    a = part(0, [5.0, 3.0, 1.0], [0.1, 0.2, 0.9], [True, True, True])
    b = part(1, [4.0, 2.0, 7.0], [0.3, 0.8, 0.0], [True, True, False])
    out = merge([a, b], [0, 10], depth=2)
    # first stage: 5.0 (row 0), 4.0 (row 10); dense top 2: 0.9 (row 2), 0.8 (row 11)
    assert out.rows.tolist() == [0, 10, 2, 11]
    assert out.scores["bm25"].tolist() == [5.0, 4.0, 0.0, 0.0]
    assert out.in_first.tolist() == [True, True, False, False]
    assert out.in_dense.tolist() == [False, False, True, True]


@pytest.mark.slow
def test_a_shard_that_fails_or_times_out_gives_a_partial_answer(shard_pair: tuple[Path, Path]) -> None:
    _, sharded = shard_pair
    engine = Engine.load(sharded, settings=Settings(index_dir=sharded))
    fan = engine.pipeline.generator
    assert isinstance(fan, ShardFanOut)

    def dead(_query: Query):  # noqa: ANN202
        raise ConnectionError("shard-001 is gone")

    def slow(query: Query):  # noqa: ANN202
        def wait(timeout: float) -> ShardHits:
            raise TimeoutError(f"no answer within {timeout:.1f} s")
        return wait

    rec = engine.docs.get_row(0)
    lang = rec.languages[0]
    # the fused order (passage evidence orders the first 10 of whatever the shards answered)
    # (BM25 alone: with two components, the min-max scales over fewer candidates would change the fused order)
    req = SearchRequest(query=rec.text(lang, ("title", "abstract"))[:400], lang=lang, k=50, evidence_docs=0,
                        weights={"bm25": 1.0})
    full = engine.search(req)
    assert len(full.results) == 50
    saved = list(fan.submit)
    fan.submit[1], fan.submit[2] = dead, slow
    try:
        res = engine.search(req)
    finally:
        fan.submit[:] = saved
    assert res.partial and res.missing_shards == ["shard-001", "shard-002"]
    assert any("partial results" in n and "shard-001" in n for n in res.notices)
    shard0 = {engine.docs.ids[r] for r in range(fan.starts[0], fan.starts[0] + fan.sizes[0])}
    assert res.results and {h.id for h in res.results} <= shard0
    mine = [h.id for h in full.results if h.id in shard0]  # shard 0's hits keep their order (BM25 alone)
    assert [h.id for h in res.results][: len(mine)] == mine
    again = engine.search(req)
    assert not again.partial and [h.id for h in again.results] == [h.id for h in full.results]
    engine.close()


# ------------------------------------------------------------------------------------------ synthetic


def _synth(path: Path, n: int, seed: int) -> list[PatentRecord]:
    from training.synth import generate

    records = list(generate(n, seed))
    write_corpus(records, path)
    return records


@pytest.fixture(scope="module")
def shard_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The same synthetic corpus built unsharded and with --shards 3 (compounds; the unsharded build trains the
    translation tables of every direction, the sharded one reuses them: the tests compare searches, not two
    trainings of the same tables). 27-35 s: the tests that use it are marked slow."""
    d = tmp_path_factory.mktemp("shards")
    write_suite_corpus(d / "corpus.jsonl", 360)  # (the suite's collection: tests/suite_corpus.py)
    build_index(d / "corpus.jsonl", d / "full", progress=False)
    build_sharded_index(d / "corpus.jsonl", d / "sharded", shards=3, translation_dir=d / "full" / "translation",
                        progress=False)
    return d / "full", d / "sharded"


def _queries(records: list[PatentRecord]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for lang in ("en", "de", "fr"):
        with_claims = [r for r in records if r.claims.get(lang)]
        for rec in with_claims[:: max(1, len(with_claims) // 3)][:3]:
            out.append((" ".join(c.text for c in rec.claims[lang][:2])[:1200], lang))
        titled = [r for r in records if lang in r.title]
        out.append((titled[len(titled) // 2].title[lang], lang))
    return out


def _assert_same(a: Engine, b: Engine, queries: list[tuple[str, str]], k: int = 100, **req: object) -> int:
    """Top ``k`` of both engines: ids equal (an exact tie may swap), raw BM25 and fused scores within 1e-9."""
    compared = 0
    for text, lang in queries:
        out = []
        for engine in (a, b):
            query = engine.query(SearchRequest(query=text, lang=lang, k=k, **req))  # type: ignore[arg-type]
            cands, _ = engine.pipeline.run(query)
            assert cands.fused is not None and not cands.missing_shards
            out.append(([engine.docs.ids[r] for r in cands.rows.tolist()], cands.scores["bm25"], cands.fused))
        (ia, ba, fa), (ib, bb, fb) = out
        assert len(ia) == len(ib), f"{lang} {text[:50]!r}: {len(ia)} vs {len(ib)} hits"
        np.testing.assert_allclose(bb, ba, rtol=TOL, atol=1e-12, err_msg=f"{lang} {text[:50]!r}: bm25")
        np.testing.assert_allclose(fb, fa, rtol=TOL, atol=1e-12, err_msg=f"{lang} {text[:50]!r}: fused")
        _assert_same_but_ties(ia, ib, fa, f"{lang} {text[:50]!r}")
        compared += len(ia)
    return compared


def _assert_same_but_ties(ia: list[str], ib: list[str], scores: np.ndarray | list[float], what: str) -> None:
    """Only exact ties may order documents differently (rows are numbered per shard): equal sets per run of tied
    ``scores``, except the run at the cut-off, whose members beyond k may differ."""
    start = 0
    for i in range(1, len(ia) + 1):
        if i == len(ia) or abs(scores[i] - scores[start]) > TOL * max(1.0, abs(scores[start])):
            if i < len(ia):
                assert set(ia[start:i]) == set(ib[start:i]), f"{what}: ranks {start}..{i - 1}"
            start = i


def _assert_same_search(a: Engine, b: Engine, queries: list[tuple[str, str]], k: int = 100) -> int:
    """``/search`` of both engines on the default path (the evidence step: the learned ranker or the passage rule):
    the same scores, and the same ids in the same order but for exact ties (issue 60: the ranker's features were
    shard 0's)."""
    compared = 0
    for text, lang in queries:
        ra, rb = (e.search(SearchRequest(query=text, lang=lang, k=k)) for e in (a, b))
        assert ra.ranked_by == rb.ranked_by and len(ra.results) == len(rb.results)
        sa, sb = [h.score for h in ra.results], [h.score for h in rb.results]
        np.testing.assert_allclose(sb, sa, rtol=TOL, atol=1e-12, err_msg=f"{lang} {text[:50]!r}: /search scores")
        _assert_same_but_ties([h.id for h in ra.results], [h.id for h in rb.results], sa, f"{lang} {text[:50]!r}")
        theirs = {h.id: h for h in rb.results}
        for mine in ra.results:  # what each result shows: the matched words (the shards send theirs), route, codes
            other = theirs.get(mine.id)
            if other is not None:
                skip = {"score", "components"}
                assert mine.model_dump(exclude=skip) == other.model_dump(exclude=skip), f"{lang} {text[:50]!r}"
                assert mine.components == pytest.approx(other.components, rel=TOL, abs=1e-12)
        compared += len(sa)
    return compared


@pytest.mark.slow
def test_sharded_build_searches_exactly_like_one_index(shard_pair: tuple[Path, Path]) -> None:
    full, sharded = shard_pair
    shards = ShardSet.open(sharded)
    assert shards.n_shards == 3 and all(f.has("translation") for f in shards.shards)
    assert [f.components["shard"] for f in shards.shards] == [{"index": i, "of": 3} for i in range(3)]
    a = Engine.load(full, settings=Settings(index_dir=full))
    b = Engine.load(sharded, settings=Settings(index_dir=sharded))
    assert a.num_docs == b.num_docs == 360
    records = list(read_corpus(full / Layout.DOCS))
    queries = _queries(records)
    compared = _assert_same(a, b, queries)
    # filters and a publication-number query (its text, its codes, itself excluded) resolve once for all shards
    compared += _assert_same(a, b, [(records[17].id, "en"), (records[200].id, "de")])
    compared += _assert_same(a, b, queries[:2], codes=list(records[3].cpc[:1]), code_filter="subclass")
    compared += _assert_same(a, b, queries[4:5], before=records[100].publication_date)
    routes = b.search(SearchRequest(query=queries[0][0], lang="en", k=5)).query.routes
    assert routes == ["en", "de:psq", "fr:psq"]
    print(f"\nsynthetic, 3 shards vs one index: {compared} hits equal (ids, bm25, fused)")
    doc = b.document(records[42].id)
    assert doc is not None and doc.id == records[42].id
    a.close()
    b.close()


@pytest.mark.slow
def test_live_add_and_delete_route_to_one_shard_and_stay_exact(shard_pair: tuple[Path, Path],
                                                              tmp_path: Path) -> None:

    full0, sharded0 = shard_pair
    full, sharded = tmp_path / "full", tmp_path / "sharded"
    copy_index(full0, full)
    copy_index(sharded0, sharded)
    old = list(read_corpus(full / Layout.DOCS))
    new = suite_records(420)[360:]
    replaced = old[7].model_copy(update={"abstract": {"en": "A replaced abstract about a brushless motor."}})
    batch = [*new, replaced]
    gen0 = current_generation(sharded)
    report = add_documents(sharded, batch, progress=False)
    add_documents(full, batch, progress=False)
    assert (report.added, report.replaced) == (len(new), 1)
    shards = ShardSet.open(sharded)
    owner = next(i for i, f in enumerate(shards.shards) if old[7].id in json.loads((f.root / Layout.IDS).read_text()))
    assert len(shards.shards[owner].segments) == 2  # the replace went to the shard that held the id
    assert current_generation(sharded) > gen0
    delete_documents(sharded, [old[30].id])
    delete_documents(full, [old[30].id])
    a = Engine.load(full, settings=Settings(index_dir=full))
    b = Engine.load(sharded, settings=Settings(index_dir=sharded))
    assert a.num_docs == b.num_docs == 420 - 1
    assert b.document(old[30].id) is None
    assert b.document(old[7].id).abstract["en"].startswith("A replaced")  # type: ignore[union-attr]
    _assert_same(a, b, _queries(new)[:6])
    a.close()
    b.close()


@pytest.mark.slow
def test_bad_shard_options_and_old_readers_get_clear_errors(shard_pair: tuple[Path, Path], tmp_path: Path) -> None:
    _, sharded = shard_pair
    with pytest.raises(BuildError, match="--shards must be at least 1, got 0"):
        build_sharded_index(tmp_path / "none.jsonl", tmp_path / "x", shards=0)
    tiny = tmp_path / "tiny.jsonl"
    _synth(tiny, 4, seed=1)
    with pytest.raises(BuildError, match="would hold no document"):
        build_sharded_index(tiny, tmp_path / "y", shards=40, translation=False, progress=False)
    # a reader of one index folder (this code's, and an older priorart's meta.json check) refuses by name
    with pytest.raises(ShardedIndexError, match="is a sharded index"):
        IndexFolder.open(sharded)
    with pytest.raises(IndexFormatError, match="format 'priorart-sharded-index', expected 'priorart-index'"):
        read_versioned(sharded / Layout.META, INDEX_FORMAT, INDEX_VERSION, error=IndexFormatError)
    # a shard whose meta.json claims another place is refused
    bad = tmp_path / "bad"

    copy_index(sharded, bad)
    meta = json.loads((bad / Layout.META).read_text())
    meta["shards"] = meta["shards"][:2]
    (bad / Layout.META).write_text(json.dumps(meta))
    with pytest.raises(IndexFormatError, match="not shard 0 of 2"):
        ShardSet.open(bad, verify=False)


# ------------------------------------------------------------------------------------------ real data


@pytest.mark.realdata
@pytest.mark.slow
def test_real_corpus_in_three_shards_equals_one_index(real_corpus: Path, real_index: Path,
                                                      real_translation: Path, tmp_path: Path) -> None:
    sharded = tmp_path / "sharded"
    report = build_sharded_index(real_corpus, sharded, shards=3, translation_dir=real_translation, progress=False)
    assert report.n_docs == len(list(read_corpus(real_corpus)))
    a = Engine.load(real_index, settings=Settings(index_dir=real_index))
    b = Engine.load(sharded, settings=Settings(index_dir=sharded))
    records = list(read_corpus(real_corpus))
    compared = _assert_same(a, b, _queries(records))
    assert a.evidence.ranker is not None and b.evidence.ranker is not None
    assert b.evidence.kernels is not None and b.evidence.code_classifier is not None
    shown = _assert_same_search(a, b, _queries(records))
    print(f"\nreal data, 3 shards ({report.shard_docs}) vs one index: {compared} hits equal in the fused order, "
          f"{shown} on the default path")
    # the query language (issue 61 item 3): each shard's word index, read as one row space, matches what one index's
    # matches (translations through a shard's tables: the same), and a Boolean /search ranks as one index's
    from querylang_reference import generate

    from service.query import resolve

    boolean = generate([json.loads(r.model_dump_json()) for r in records], 80, seed=4)
    for text in boolean:
        sets = []
        for e in (a, b):
            r = resolve(e.query(SearchRequest(query=text, syntax="query")), e.docs, e.resources)
            assert r.mask is not None
            sets.append({e.docs.ids[i] for i in np.flatnonzero(r.mask)})
        assert sets[0] == sets[1], text
    for text in boolean[:10]:
        got = [[h.id for h in e.search(SearchRequest(query=text, k=10)).results] for e in (a, b)]
        assert got[0] == got[1], text
    a.close()
    b.close()
