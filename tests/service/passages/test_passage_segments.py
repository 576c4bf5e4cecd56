"""The passage indexes of a live generation searched in place (issue 32, item 2): each segment mapped where it lies,
nothing joined or copied at open, open segments reused by the next generation, and the same passages as the
segments joined into one folder (and, without deletions, as one build of the collection)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from index_copy import copy_index

from service.corpus.jsonl import read_corpus
from service.corpus.record import PatentRecord
from service.engine import Engine
from service.index.folder import IndexFolder, Layout
from service.index.live import add_documents, compact, delete_documents
from service.passages import PassageIndex
from service.passages.builder import concat_passage_indexes
from service.passages.segments import PassageGeneration
from service.schema import PassageRequest
from service.settings import Settings
from service.text.compounds import load_analyzers
from training.build import build_index

QUERIES = [("de", 0), ("fr", 1), ("en", 2), ("en", 5), ("de", 7)]


def _records(path: Path, n: int) -> list[PatentRecord]:
    from training.synth import SynthConfig, write_synthetic

    write_synthetic(path, SynthConfig(n=n, seed=5), progress=False)
    return [r.model_copy(update={"description": r.description[:3]}) for r in read_corpus(path)]


@pytest.fixture(scope="module")
def indexes(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[PatentRecord]]:
    """A generation of three segments (a build of 60 and two adds, never merged) and one build of the same 90."""
    d = tmp_path_factory.mktemp("passage-segments")
    records = _records(d / "all.jsonl", 90)
    live, full = d / "live", d / "full"
    build_index(records[:60], live, progress=False)
    add_documents(live, records[60:75], progress=False, merge_factor=0)
    add_documents(live, records[75:], progress=False, merge_factor=0)
    folder = IndexFolder.open(live, verify=False)  # the same tables and word lists as the generation's
    splitters = {lang: a.splitter for lang, a in load_analyzers(live, folder.settings.analysis).items()}
    build_index(records, full, translation_dir=live / Layout.TRANSLATION, splitters=splitters, progress=False)
    return live, full, records


def _query(rec: PatentRecord, lang: str) -> str:
    claims = rec.claims.get(lang) or next(iter(rec.claims.values()))
    return claims[0].text[:400]


def _passages(engine: Engine, text: str, lang: str) -> list[tuple[str, float, list[tuple[int, int]]]]:
    res = engine.passages(PassageRequest.model_validate({"query": text, "lang": lang, "k": 50}))
    return [(h.passage_id, h.score, h.highlights) for h in res.results]


def test_a_live_generation_ranks_the_passages_of_one_build(indexes: tuple[Path, Path, list[PatentRecord]]) -> None:
    live, full, records = indexes
    e_live = Engine.load(live, settings=Settings(index_dir=live))
    e_full = Engine.load(full, settings=Settings(index_dir=full))
    assert len(e_live.folder.segments) == 3
    passages = e_live.evidence.passage_index()
    assert isinstance(passages, PassageGeneration) and len(passages.parts) == 3
    compared = 0
    for lang, i in QUERIES:
        for rec in (records[i], records[70 + i], records[80 + i]):  # a document of each segment
            text = _query(rec, lang)
            a, b = _passages(e_live, text, lang), _passages(e_full, text, lang)
            assert [x[0] for x in a] == [x[0] for x in b], f"{lang} query {text[:60]!r}"
            for (_, sa, ha), (_, sb, hb) in zip(a, b, strict=True):
                assert sa == pytest.approx(sb, rel=1e-9, abs=1e-12) and ha == hb
            compared += len(a)
    assert compared > 200
    # a claim chart's cells (each document's passages among its own) and passages of given documents
    ids = [records[3].id, records[72].id, records[85].id]
    for engine in (e_live, e_full):
        assert all(engine.document(x) is not None for x in ids)
    got = e_live.evidence.passages_of(_query(records[85], "en"), "en", [e_live.docs.row(x) for x in ids], 5)
    want = e_full.evidence.passages_of(_query(records[85], "en"), "en", [e_full.docs.row(x) for x in ids], 5)
    assert [(h.passage_id, round(h.score, 12)) for h in got] == [(h.passage_id, round(h.score, 12)) for h in want]


def test_segments_equal_their_join_with_deletes_and_replacements(
        indexes: tuple[Path, Path, list[PatentRecord]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:

    src, _, records = indexes
    live = tmp_path / "live"
    copy_index(src, live)
    replaced = records[62].model_copy(update={"title": {"en": "A replaced title about a valve spring"}})
    add_documents(live, [replaced, *records[:2]], progress=False, merge_factor=0)  # two replace the build's rows
    delete_documents(live, [records[10].id, records[80].id])
    folder = IndexFolder.open(live, verify=False)
    assert len(folder.segments) == 4
    seg = PassageIndex.load(folder)
    assert isinstance(seg, PassageGeneration)
    # the segments joined into one folder, its deleted rows (holes in the row space) left out of the collection model
    joined = PassageGeneration([PassageIndex.open(tmp_path / "joined", info=concat_passage_indexes(
        [s.folder.path(Layout.PASSAGES) for s in folder.segments], tmp_path / "joined"))],
        deleted=[np.concatenate([s.start + s.deleted for s in folder.segments])])
    engine = Engine.load(live, settings=Settings(index_dir=live))
    reached: set[int] = set()  # the segments the candidates came from
    for lang, i in QUERIES:
        text = _query(records[i + 30], lang)
        images, words = engine.evidence.passage_query(text, lang)
        query = engine.query(PassageRequest.model_validate({"query": text, "lang": lang}), depth=100)
        query.k = query.depth  # every candidate, as /passages ranks them
        cands = engine.pipeline.run(query)[0]
        rows, scores = np.asarray(cands.rows), np.asarray(cands.fused)
        assert rows.size >= 3
        reached.update(seg.locate(rows)[0].tolist())
        for kwargs in ({}, {"variant": "qsf_section", "langs": set(images)}, {"alone": True, "k": 3}):
            a = seg.rank(images, lang, rows, scores, words=words, analyzers=engine.resources.analyzers, **kwargs)
            b = joined.rank(images, lang, rows, scores, words=words, analyzers=engine.resources.analyzers, **kwargs)
            assert [(h.passage_id, h.section_path, h.title, h.text, h.highlights) for h in a.hits] == \
                   [(h.passage_id, h.section_path, h.title, h.text, h.highlights) for h in b.hits]
            np.testing.assert_allclose([h.score for h in a.hits], [h.score for h in b.hits], rtol=1e-9, atol=1e-12)
            assert (a.documents, a.skipped) == (b.documents, b.skipped)
        sa, sb = seg.score(images, lang, rows, scores), joined.score(images, lang, rows, scores)
        assert sa.ids() == sb.ids()
        np.testing.assert_allclose(sa.raw["passage_title"], sb.raw["passage_title"], rtol=1e-9)
    assert reached == {0, 1, 2, 3}
    # the query terms' ids and counts are remembered (the ranks above compared with the join used them): the same
    # query again looks nothing up in the segments' vocabularies
    looked: list[str] = []
    for part in seg.parts:
        def counted(lang: str, term: str, real: Any = part.vocab.lookup) -> int:
            looked.append(term)
            return int(real(lang, term))

        monkeypatch.setattr(part.vocab, "lookup", counted)
    again = seg.rank(images, lang, rows, scores, words=words, analyzers=engine.resources.analyzers)
    want = joined.rank(images, lang, rows, scores, words=words, analyzers=engine.resources.analyzers)
    assert looked == [] and [h.passage_id for h in again.hits] == [h.passage_id for h in want.hits]
    with pytest.raises(ValueError, match="appears twice"):
        seg.rank(images, lang, [1, 1], None)
    with pytest.raises(ValueError, match="is not in the passage index"):
        seg.rank(images, lang, [seg.n_docs], None)


def test_deleted_rows_leave_the_collection_model(indexes: tuple[Path, Path, list[PatentRecord]]) -> None:
    """What a segment's rows add to its collection statistics: all of them, exactly its vocab_cf and lang_tokens; a
    generation without some rows ranks as one build without them (test_live: a live index after deletes and
    replacements gives /search and /passages of one build)."""
    from service.passages.segments import deleted_counts

    live, _, _ = indexes
    part = PassageIndex.open(IndexFolder.open(live, verify=False).segments[0].folder.path(Layout.PASSAGES))
    ids, counts, tokens = deleted_counts(part, np.arange(part.n_docs))
    cf = np.asarray(part.vocab_cf, dtype=np.int64)
    assert np.array_equal(ids, np.flatnonzero(cf)) and np.array_equal(counts, cf[ids])
    assert np.array_equal(tokens, np.asarray(part.lang_tokens, dtype=np.int64))
    some = np.arange(0, part.n_docs, 7)
    a_ids, a_counts, a_tokens = deleted_counts(part, some)
    b_ids, b_counts, b_tokens = deleted_counts(part, np.setdiff1d(np.arange(part.n_docs), some))
    both = np.zeros(cf.size, dtype=np.int64)
    np.add.at(both, a_ids, a_counts)
    np.add.at(both, b_ids, b_counts)
    assert np.array_equal(both, cf) and np.array_equal(a_tokens + b_tokens, tokens)
    assert deleted_counts(part, np.zeros(0, dtype=np.int64))[0].size == 0
    assert np.array_equal(PassageGeneration([part]).lang_tokens, part.lang_tokens)  # nothing deleted
    assert np.array_equal(PassageGeneration([part], deleted=[np.arange(part.n_docs)]).lang_tokens, [0, 0, 0])


def test_open_copies_nothing_and_reuses_open_segments(indexes: tuple[Path, Path, list[PatentRecord]],
                                                      monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:

    live, _, records = indexes
    one = tmp_path / "compacted"
    copy_index(live, one)
    compact(one, progress=False)

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("opening a generation must not write a joined copy")

    monkeypatch.setattr(tempfile, "mkdtemp", refuse)
    monkeypatch.setattr("service.passages.builder.concat_passage_indexes", refuse)
    folder = IndexFolder.open(live, verify=False)
    first = PassageIndex.load(folder)
    assert isinstance(first, PassageGeneration)
    for part, s in zip(first.parts, folder.segments, strict=True):
        assert part.folder.resolve() == s.folder.path(Layout.PASSAGES).resolve()
        assert isinstance(part.post_unit.base, np.memmap) or isinstance(part.post_unit, np.memmap)
    again = PassageIndex.load(IndexFolder.open(live, verify=False))
    assert all(a is b for a, b in zip(first.parts, again.parts, strict=True))  # the next generation maps nothing anew
    assert first.n_docs == 90 and first.describe()["segments"] == 3 and first.describe()["n_docs"] == 90
    # a compacted generation: its one segment's passage index is the generation's, mapped as a build's is
    folder = IndexFolder.open(one, verify=False)
    single = PassageIndex.load(folder)
    assert len(folder.segments) == 1 and type(single) is PassageIndex
    assert single.folder.resolve() == folder.segments[0].folder.path(Layout.PASSAGES).resolve()
    assert [single.doc_id(i) for i in range(single.n_docs)] == [r.id for r in records]
