"""Watches (issue 34): the evaluation against new generations is exact (the hits are what re-running each watch's
search before and after shows as new in its top k), the bound it proves "no hit" with scores rows as a search
does, deleted documents drop out, evaluations are idempotent, the state folder stays outside the index."""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from index_copy import copy_index

from service.corpus.record import PatentRecord
from service.engine import Engine
from service.index.live import add_documents, compact, delete_documents
from service.query import QueryError
from service.settings import Settings
from service.watch import evaluate as evaluation
from service.watch.evaluate import evaluate, restricted_first_stage, save_watch
from service.watch.models import WatchRequest
from service.watch.store import StateError, WatchStore, owner_of, state_dir

pytestmark = pytest.mark.slow  # a 700-document index with live generations, built for the module (19 s)

N_BASE = 700


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[PatentRecord]]:
    """A synthetic index of 700 documents (translation tables and compound splitting, as `priorart build` makes
    them) without the dense stage (``--no-dense``: the bound of the fast path applies to a first stage that ranks
    alone; the default build's watches: :func:`test_the_default_build_s_watches_search_in_full`), and 140 more
    documents to add."""
    from suite_corpus import suite_records

    from training.build import build_index

    d = tmp_path_factory.mktemp("watch")
    records = suite_records(N_BASE + 140)  # (the suite's collection: tests/suite_corpus.py)
    build_index(records[:N_BASE], d / "index", progress=False, dense=False)
    return d / "index", records


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest) -> str | None:
    """The watches' database, each in turn: SQLite in the state folder (None) and a new database on the test
    worker's PostgreSQL server (issue 62: the same tests on both)."""
    return request.getfixturevalue("postgres_db") if request.param == "postgresql" else None


def _copy(built: tuple[Path, list[PatentRecord]], tmp_path: Path, url: str | None = None) -> tuple[Path, WatchStore]:
    idx = tmp_path / "index"
    copy_index(built[0], idx)
    return idx, WatchStore.open(state_dir(idx), create=True, url=url)


def _load(idx: Path, evidence_by: str = "auto") -> Engine:
    return Engine.load(idx, settings=Settings(index_dir=idx, evidence_by=evidence_by), verify=False)


def _requests(records: list[PatentRecord], rng: random.Random, n: int) -> list[WatchRequest]:
    """Claims in en/de/fr (of base and of added documents: some are hits of their own), a few with a code filter, a
    date filter, a publication number, untranslated, k from 1 to 30."""
    out: list[WatchRequest] = []
    with_lang = {lang: [r for r in records if r.claims.get(lang)] for lang in ("en", "de", "fr")}
    for i in range(n):
        lang = ("en", "de", "fr")[i % 3]
        rec = rng.choice(with_lang[lang])
        text = " ".join(c.text for c in rec.claims[lang][:2])[:1500]
        extra: dict = {}
        if i % 7 == 3 and rec.cpc:
            extra = {"codes": [rec.cpc[0]], "code_filter": "subclass"}
        elif i % 11 == 5:
            extra = {"before": "2015-01-01"}
        elif i % 13 == 6:
            extra = {"translate": False}
        out.append(WatchRequest(query=text, lang=lang, k=rng.choice([1, 5, 10, 10, 20, 30]), **extra))
    base_ids = [r.id for r in records[:N_BASE]]
    out.append(WatchRequest(query=rng.choice(base_ids), k=10, name="a publication number"))
    return out


def _top(engine: Engine, req: WatchRequest) -> list[str]:
    return [h.id for h in engine.search(req.search_request()).results]


def _expected(engine: Engine, watches: dict[str, WatchRequest], new: set[str]) -> dict[str, list[tuple[int, str]]]:
    """Per watch: the (rank, id) of the new documents in its top k, by re-running its search."""
    return {wid: [(i, d) for i, d in enumerate(_top(engine, req), 1) if d in new] for wid, req in watches.items()}


def _got(store: WatchStore, generation: int) -> dict[str, list[tuple[int, str]]]:
    out: dict[str, list[tuple[int, str]]] = {}
    for w in store.watches(None):
        out[w.id] = sorted((h.rank, h.doc_id) for h in store.hits(None, w.id) or [] if h.generation == generation)
    return out


def test_restricted_rows_score_as_in_a_search(built: tuple[Path, list[PatentRecord]]) -> None:
    """The first stage over the postings of some rows gives each of those rows the score a search gives it, bit for
    bit (one route, translated routes merged, filters): what the bound relies on."""
    idx, records = built
    engine = _load(idx)
    fs = evaluation.ranking_first_stage(engine)
    assert fs is not None
    rng = np.random.default_rng(3)
    allowed = np.zeros(len(engine.docs.ids), dtype=bool)
    allowed[rng.choice(len(allowed), size=120, replace=False)] = True
    cut = restricted_first_stage(fs, allowed)
    compared = 0
    for req in _requests(records, random.Random(5), 24):
        full = engine.query(req.search_request())
        full.explain = False
        full.depth = full.k = len(allowed)
        from service.query import resolve

        resolve(full, engine.docs)
        everything = fs.run(full)
        part = engine.query(req.search_request())
        part.explain = False
        part.k = part.depth = req.k
        resolve(part, engine.docs)
        found = cut.run(part)
        want = [(float(s), int(r)) for r, s in zip(everything.rows.tolist(), everything.scores.tolist(), strict=True)
                if allowed[r]][: req.k]
        assert [(float(s), int(r)) for r, s in zip(found.rows.tolist(), found.scores.tolist(), strict=True)] == want
        compared += len(want)
    assert compared > 100


@pytest.mark.parametrize("evidence_by", ["auto", "passage"])
def test_hits_equal_what_rerunning_each_search_shows_as_new(built: tuple[Path, list[PatentRecord]],
                                                             tmp_path: Path, evidence_by: str,
                                                             database: str | None) -> None:
    """Three generations: an add, an add with a replaced publication and an add that compacts; every watch's hits at
    each generation are the new documents in its top k, as re-running its search shows, ranks included; with the
    learned ranker (the index's, ``auto``) and with the passage rule. Many watches are settled by the bound, without
    a search: most with the rule (it reaches the first 10 of the fused order), fewer with the ranker (its 20). The
    first and the last generations are evaluated in 3 threads (as a writer on a 3-core machine does), the second in
    one."""
    idx, records = built
    idx, store = _copy(built, tmp_path, database)
    rng = random.Random(11)
    engine = _load(idx, evidence_by)
    reqs = _requests(records, rng, 90)
    watches = {save_watch(engine, store, "", r).id: r for r in reqs}
    before = {wid: _top(engine, r) for wid, r in watches.items()}
    engine.close()
    batches = [records[N_BASE : N_BASE + 60], records[N_BASE + 60 : N_BASE + 100] + [records[3]],
               records[N_BASE + 100 :]]
    replaced = records[3].model_copy(update={"abstract": {"en": "A replaced abstract: " + " ".join(
        c.text for c in records[N_BASE + 5].claims.get("en", [])[:1])}})
    batches[1][-1] = replaced
    totals = {"hits": 0, "bound": 0, "searched": 0}
    for gen, batch in enumerate(batches, 1):
        add_documents(idx, batch, progress=False, max_segments=2)  # the second add (a replace) merges the added two
        engine = _load(idx, evidence_by)
        assert engine.evidence.ranker is not None and engine.settings.evidence_by == evidence_by
        assert engine.generation >= gen
        report = evaluate(engine, store, workers=3 if gen != 2 else 1)  # (90 watches: threads)
        assert report.watches == len(watches) and report.errors == 0 and report.bound == "first stage"
        expected = _expected(engine, watches, {r.id for r in batch})
        got = _got(store, engine.generation)
        assert got == expected, f"generation {engine.generation}"
        if gen == 1:  # before the add, none of its documents was in the index, so none in any top k
            assert all(not set(before[w]) & {r.id for r in batch} for w in watches)
        totals["hits"] += report.hits
        totals["bound"] += report.by_bound
        totals["searched"] += report.searched
        # idempotent: a second evaluation at the same generation does nothing
        again = evaluate(engine, store)
        assert again.watches == 0 and _got(store, engine.generation) == got
        engine.close()
    print(f"\nwatches: {len(watches)} x 3 generations, {totals['hits']} hits, all equal to re-running the searches; "
          f"{totals['bound']} settled by the bound, {totals['searched']} searched")
    assert totals["hits"] >= 20 and totals["bound"] > (totals["searched"] if evidence_by == "passage" else 50)
    hits = [h for w in watches for h in store.hits(None, w) or []]
    assert all(h.passage is not None and h.passage.doc_id == h.doc_id for h in hits)


def test_a_new_document_that_passage_evidence_lifts_into_the_top_k_is_a_hit(built: tuple[Path, list[PatentRecord]],
                                                                            tmp_path: Path) -> None:
    """/search orders its first 20 by the learned ranker (the index's), so a new document at fused rank 2..20 can be a
    k = 1 watch's first result: the bound covers the first 20 (EvidenceStep.reach; 10 with the passage rule), not k, and
    such a document is a hit."""
    idx, records = built
    idx, store = _copy(built, tmp_path)
    engine = _load(idx)
    added = records[N_BASE : N_BASE + 60]
    reqs = [WatchRequest(query=c.text[:1500], lang="en", k=1) for r in added for c in r.claims.get("en", [])[1:3]]
    watches = {save_watch(engine, store, "", r).id: r for r in reqs}
    engine.close()
    add_documents(idx, added, progress=False)
    engine = _load(idx)
    assert engine.evidence.ranker is not None and engine.evidence.reach(1) == engine.evidence.ranker.docs == 20
    rule = _load(idx, "passage")
    assert rule.evidence.reach(1) == engine.settings.evidence_docs == 10
    rule.close()
    report = evaluate(engine, store)
    assert report.bound == "first stage"  # (each query an added document's claim: a new one is in nearly every 20)
    expected = _expected(engine, watches, {r.id for r in added})
    assert _got(store, engine.generation) == expected
    lifted = [wid for wid, req in watches.items()
              if expected[wid] and _fused_rank(engine, req, expected[wid][0][1]) > 1]
    assert lifted, "no watch's hit was lifted by the ranker: the test does not test the reach"
    engine.close()


def _fused_rank(engine: Engine, req: WatchRequest, doc_id: str) -> int:
    fused = [h.id for h in engine.search(req.search_request().model_copy(update={"k": engine.evidence.reach(1),
                                                                             "evidence_docs": 0})).results]
    return fused.index(doc_id) + 1 if doc_id in fused else 0


def test_the_fused_order_bound_gives_the_same_hits(built: tuple[Path, list[PatentRecord]], tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A pipeline the first-stage bound does not apply to (models, learning to rank) takes the fused-order bound (the
    pipeline without the evidence step): the same hits as re-running every search, some watches settled without one,
    and with that bound proving nothing (every watch searched) the same hits again."""
    idx, records = built
    idx, store = _copy(built, tmp_path)
    engine = _load(idx)
    watches = {save_watch(engine, store, "", r).id: r for r in _requests(records, random.Random(2), 30)}
    engine.close()
    add_documents(idx, records[N_BASE : N_BASE + 20], progress=False)
    engine = _load(idx)
    monkeypatch.setattr(evaluation, "ranking_first_stage", lambda engine: None)
    report = evaluate(engine, store)
    assert report.bound == "fused order" and report.by_bound > 0 and report.by_bound + report.searched == len(watches)
    assert _got(store, engine.generation) == _expected(engine, watches, {r.id for r in records[N_BASE : N_BASE + 20]})
    engine.close()
    add_documents(idx, records[N_BASE + 20 :], progress=False)
    engine = _load(idx)
    monkeypatch.setattr(evaluation.Evaluator, "_settled", staticmethod(lambda rows, is_new: False))
    report = evaluate(engine, store)
    assert report.searched == len(watches) and report.by_bound == 0
    assert _got(store, engine.generation) == _expected(engine, watches, {r.id for r in records[N_BASE + 20 :]})
    engine.close()


def test_a_writer_s_worker_processes_evaluate_the_engine_s_generation(built: tuple[Path, list[PatentRecord]],
                                                                     tmp_path: Path) -> None:
    """A writer's evaluation in worker processes (``priorart add`` with 1,000 watches or more per core): each loads
    the index at the engine's generation, not the newest one (here an add committed after the engine was loaded), and
    the hits are those of re-running every search at that generation, as in this process."""
    idx, records = built
    idx, store = _copy(built, tmp_path)
    engine = _load(idx)
    watches = {save_watch(engine, store, "", r).id: r for r in _requests(records, random.Random(3), 40)}
    engine.close()
    add_documents(idx, records[N_BASE : N_BASE + 40], progress=False)
    engine = _load(idx)
    add_documents(idx, records[N_BASE + 40 : N_BASE + 80], progress=False)  # newer: the workers must not read it
    report = evaluate(engine, store, workers=2, processes=True)
    assert report.workers == "2 processes" and report.watches == len(watches) and report.errors == 0
    assert report.by_bound > 0 and report.by_bound + report.searched == len(watches)
    assert _got(store, engine.generation) == _expected(engine, watches, {r.id for r in records[N_BASE : N_BASE + 40]})
    engine.close()


def test_deleted_documents_drop_out_and_replaced_ones_are_new(built: tuple[Path, list[PatentRecord]],
                                                             tmp_path: Path, database: str | None) -> None:
    idx, records = built
    idx, store = _copy(built, tmp_path, database)
    engine = _load(idx)
    added = records[N_BASE : N_BASE + 20]
    # each watch is an added document's own claim: it ranks first once added
    reqs = [WatchRequest(query=" ".join(c.text for c in r.claims["en"][:2]), lang="en", k=5) for r in added
            if r.claims.get("en")][:6]
    watches = [save_watch(engine, store, "", r) for r in reqs]
    engine.close()
    add_documents(idx, added, progress=False)
    evaluate(_load(idx), store)
    hit_ids = {h.doc_id for w in watches for h in store.hits(None, w.id) or []}
    assert len(hit_ids) >= 5
    gone = sorted(hit_ids)[:2]
    delete_documents(idx, gone)
    engine = _load(idx)
    report = evaluate(engine, store)
    assert report.nothing_new == len(watches)  # a deletion brings nothing new
    left = {h.doc_id for w in watches for h in store.hits(None, w.id) or []}
    assert left == hit_ids - set(gone)
    # a replaced publication (same id, new text) is new again; the compaction after it keeps that
    target = next(r for r in added if r.id not in gone and r.id in hit_ids)
    w_target = next(w for w in watches if w.request.query.startswith(target.claims["en"][0].text[:40]))
    changed = target.model_copy(update={"title": {"en": "Replacement " + target.title.get("en", "")}})
    add_documents(idx, [changed], progress=False)
    compact(idx, progress=False)
    engine = _load(idx)
    evaluate(engine, store)
    newest = [h for h in store.hits(None, w_target.id) or [] if h.generation == engine.generation]
    assert [h.doc_id for h in newest] == [target.id] and newest[0].rank == 1 and newest[0].title.startswith(
        "Replacement")


def test_save_refuses_a_query_that_cannot_run(built: tuple[Path, list[PatentRecord]], tmp_path: Path) -> None:
    idx, store = _copy(built, tmp_path)
    engine = _load(idx)
    with pytest.raises(QueryError, match="no index terms"):
        save_watch(engine, store, "", WatchRequest(query="the of and", lang="en"))
    with pytest.raises(QueryError):
        save_watch(engine, store, "", WatchRequest(query="EP9999999A1"))
    assert store.watches(None) == []


def test_state_folder_outside_the_index_and_owners(built: tuple[Path, list[PatentRecord]], tmp_path: Path,
                                                   database: str | None) -> None:
    idx = built[0]
    assert state_dir(idx) == idx.with_name(idx.name + ".state")
    for inside in (idx / "state", idx):
        with pytest.raises(StateError, match="inside the index folder"):
            state_dir(idx, inside)
    assert owner_of(None) == owner_of("") == ""
    assert owner_of("key-a") != owner_of("key-b") and "key-a" not in owner_of("key-a")
    store = WatchStore.open(tmp_path / "s", create=True, url=database)
    a, b = owner_of("key-a"), owner_of("key-b")
    w = store.add(a, WatchRequest(query="rotor blade"), 0)
    assert store.get(b, w.id) is None and not store.delete(b, w.id)
    assert store.hits(b, w.id) is None and store.watches(b) == []
    assert store.get(None, w.id) == store.get(a, w.id) == w and store.watches(a) == [w]
    with pytest.raises(StateError, match="save one first"):
        WatchStore.open(tmp_path / "none")


def test_watch_ids_never_read_as_a_command_line_option(tmp_path: Path) -> None:
    """A watch id is passed on the command line (`priorart watch hits INDEX ID`): it never begins with '-' (one id in
    64 did, and the CLI took it for an option)."""
    store = WatchStore.open(tmp_path / "state", create=True)
    request = WatchRequest(query="a rotor blade with a cooling channel", lang="en")
    ids = [store.add("owner", request, 0).id for _ in range(300)]
    assert len(set(ids)) == 300 and not any(i.startswith("-") for i in ids)
    assert all(re.fullmatch(r"[0-9a-f]+", i) for i in ids)


def _count_encodings(encoder: Any) -> list[str]:
    """The kinds ("query", "passage") of the encoder's runs from now on."""
    encoded: list[str] = []
    real = encoder.encode

    def counted(texts: Any, kind: str = "query", **kw: Any) -> Any:
        encoded.append(kind)
        return real(texts, kind, **kw)

    encoder.encode = counted
    return encoded


def test_the_default_build_s_watches_take_the_fused_order_bound(built: tuple[Path, list[PatentRecord]],
                                                                tmp_path: Path) -> None:
    """With the dense stage (the default build) the first-stage bound does not apply (a new document's cosine is not
    bounded by its first-stage score): the fused-order bound settles the watches whose pipeline, without the evidence
    step, puts no new document among its first 20 (their query vectors remembered when saved, never encoded again),
    the others are searched, and every watch's hits are the new documents of its top k, as re-running its search
    shows. Evaluated in 2 threads, as ``priorart add`` on the 2-core machine."""
    from training.build import build_index

    base, records = built
    idx = tmp_path / "index"
    # the default build, its translation tables those the module's build trained from the same documents
    build_index(records[:N_BASE], idx, progress=False, translation_dir=base / "translation")
    store = WatchStore.open(state_dir(idx), create=True)
    engine = _load(idx, "auto")
    assert "dense" in engine.pipeline.names
    watches = {save_watch(engine, store, "", r).id: r for r in _requests(records, random.Random(5), 30)}
    engine.close()
    batch = records[N_BASE : N_BASE + 40]
    add_documents(idx, batch, progress=False)
    engine = _load(idx, "auto")
    encoder = next(s.encoder for s in engine.pipeline.stages if s.name == "dense")
    encoded = _count_encodings(encoder)
    report = evaluate(engine, store, workers=2)  # (30 watches: threads)
    assert "query" not in encoded, len(encoded)  # every query's vector remembered since the watch was saved
    assert report.watches == len(watches) and report.errors == 0 and report.bound == "fused order"
    assert report.by_bound > 0 and report.by_bound + report.searched == len(watches)
    assert _got(store, engine.generation) == _expected(engine, watches, {r.id for r in batch})
    engine.close()
