"""First stage: routes (mono / PSQ / raw), combination, reduction, filters, patent-number queries."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import date
from pathlib import Path

import numpy as np
import pytest

from service.corpus.record import Claim, PatentRecord
from service.index.folder import write_meta
from service.index.store import DocStoreWriter
from service.query import Query, resolve
from service.retrieval.first_stage import FirstStage, QueryError, reduce_terms
from service.retrieval.sparse import SparseIndexBuilder, monolingual_units
from service.text.analysis import get_analyzer
from service.text.translation import TranslationTable

FIELDS = ("title", "abstract", "claims")


def make_index(
    path: Path,
    records: Iterable[PatentRecord],
    langs: Sequence[str] = ("en", "de"),
    tables: Sequence[TranslationTable] = (),
) -> Path:
    """A minimal index folder, written the way ``priorart build`` lays it out."""
    builders = {lang: SparseIndexBuilder() for lang in langs}
    with DocStoreWriter(path) as store:
        for rec in records:
            store.add(rec)
            for lang in langs:
                text = rec.text(lang, FIELDS) if lang in rec.languages else ""
                builders[lang].add(get_analyzer(lang)(text))
    for lang, b in builders.items():
        b.finish().save(path / "bm25" / lang)
    entries = []
    for t in tables:
        t.save(path / "translation" / f"{t.src}-en.json")
        entries.append({"src": t.src, "tgt": "en", "file": f"translation/{t.src}-en.json"})
    settings = {
        "fields": list(FIELDS),
        "index_langs": list(langs),
        "scoring": "bm25",
        "k1": 1.2,
        "b": 0.75,
        "epsilon": 0.25,
    }
    write_meta(path, settings, {"bm25": {}, "translation": entries})
    return path


def _rec(pid: str, day: date, ipc: list[str], en: str, de: str | None = None) -> PatentRecord:
    claims = {"en": [Claim(num=1, text=en)]}
    title = {"en": en.split(" with ")[0]}
    if de:
        claims["de"] = [Claim(num=1, text=de)]
        title["de"] = de.split(" mit ")[0]
    return PatentRecord(
        id=pid,
        country=pid[:2],
        number=pid[2:-2],
        kind=pid[-2:],
        source="synth",
        lang="en",
        publication_date=day,
        title=title,
        claims=claims,
        ipc=ipc,
    )


RECORDS = [
    _rec(
        "EP0000001B1",
        date(1995, 1, 10),
        ["H01F27/24"],
        "A transformer with a laminated iron core and a copper winding around the core",
        "Transformator mit einem laminierten Eisenkern und einer Kupferwicklung um den Kern",
    ),
    _rec("US05000002A", date(1999, 6, 1), ["B05B1/34"], "A spray nozzle with a swirl chamber for atomising liquid"),
    _rec("US05000003A", date(2001, 2, 2), ["F04B53/10"], "A pump with a check valve for a liquid and a piston"),
    _rec(
        "EP0000004A1",
        date(2003, 3, 3),
        ["H02K3/24"],
        "An electric motor with a rotor and a copper stator winding",
        "Elektromotor mit einem Rotor und einer Statorwicklung aus Kupfer",
    ),
    _rec("US05000005A", date(2005, 5, 5), ["E05C19/00"], "A latch with a spring for a housing door"),
    _rec(
        "EP0000006B1",
        date(2006, 6, 6),
        ["F16K1/42"],
        "A valve seat with a sealing ring",
        "Ventilsitz mit einem Dichtring",
    ),
]


def _de(word: str) -> str:
    (term,) = get_analyzer("de")(word)
    return term


def _en(word: str) -> str:
    (term,) = get_analyzer("en")(word)
    return term


def de_table() -> TranslationTable:
    pairs = {
        "Rückschlagventil": {"check": 0.5, "valve": 0.5},
        "Flüssigkeit": {"liquid": 0.8, "fluid": 0.2},
        "Kolben": {"piston": 1.0},
        "Wicklung": {"winding": 1.0},
    }
    return TranslationTable({_de(d): {_en(e): p for e, p in alts.items()} for d, alts in pairs.items()}, src="de")


@pytest.fixture(scope="module")
def stage(tmp_path_factory: pytest.TempPathFactory) -> FirstStage:
    return FirstStage.load(make_index(tmp_path_factory.mktemp("fs") / "idx", RECORDS, tables=[de_table()]))


def test_monolingual_search_is_plain_bm25(stage: FirstStage) -> None:
    res = stage.search("copper winding", lang="en", k=3)
    assert {h.doc_id for h in res.hits[:2]} == {"EP0000001B1", "EP0000004A1"}
    raw = stage.indexes["en"].score(monolingual_units(get_analyzer("en")("copper winding")))
    for h in res.hits:
        assert h.score == pytest.approx(raw[h.row], abs=1e-12)
        assert set(h.matched_terms) <= {"copper", "wind"} and h.matched_terms
        assert h.route_scores == {"en": pytest.approx(raw[h.row])}
    assert [h.rank for h in res.hits] == list(range(1, len(res.hits) + 1))
    assert res.info.lang == "en" and not res.info.lang_detected and res.info.combine == "raw"
    assert [r.name for r in res.info.routes] == ["en"] and res.info.translation is None


@pytest.mark.parametrize(("text", "lang"), [("copper winding", "en"), ("Rückschlagventil Flüssigkeit Kolben", "de")])
def test_unexplained_query_has_the_same_hits_without_matched_terms(stage: FirstStage, text: str, lang: str) -> None:
    """``Query.explain`` False (/passages, /search without explain): the matched terms are not computed, nothing
    else changes (one route and several)."""
    runs = []
    for explain in (True, False):
        q = Query(text=text, lang=lang, k=5, depth=5, explain=explain)
        resolve(q, stage.docs)
        runs.append(stage.run(q))
    told, silent = runs
    assert [(h.row, h.score, h.route, h.route_scores) for h in told.hits] == \
        [(h.row, h.score, h.route, h.route_scores) for h in silent.hits]
    assert any(h.matched_terms for h in told.hits) and not any(h.matched_terms for h in silent.hits)


@pytest.mark.parametrize(("text", "lang"), [("copper winding spray pump latch rotor valve coil", "en"),
                                            ("Rückschlagventil Flüssigkeit Kolben Pumpe Ventil Spule", "de")])
def test_matched_terms_are_looked_up_for_the_rows_asked_for(stage: FirstStage, text: str, lang: str) -> None:
    """The first stage looks up no matched terms: it says what each route searched (``route_terms``), and the
    terms of any rows are looked up in the index's resources, in any order (one route and several)."""
    q = Query(text=text, lang=lang, k=8, depth=8)
    resolve(q, stage.docs)
    res = stage.run(q)
    assert len(res.hits) >= 3 and all(h.matched_terms for h in res.hits)
    assert [lang_ for lang_, _ in res.route_terms] == [r.index_lang for r in res.info.routes]
    later = res.terms_of([h.row for h in reversed(res.hits)])
    assert later[::-1] == [h.matched_terms for h in res.hits]
    assert stage.resources.matched_terms(res.route_terms, [res.hits[0].row]) == [res.hits[0].matched_terms]


def test_german_query_reaches_english_only_documents_by_psq(stage: FirstStage) -> None:
    res = stage.search("Rückschlagventil Flüssigkeit Kolben", lang="de", k=5)
    assert res.hits[0].doc_id == "US05000003A"
    assert [r.name for r in res.info.routes] == ["de", "en:psq"] and res.info.translation == "de-en"
    # several routes: each score is divided by the route's reference score (the query's best translation)
    psq = res.info.routes[1]
    assert res.info.combine == "aligned" and res.hits[0].route == "en:psq"
    assert res.hits[0].score == pytest.approx(res.hits[0].route_scores["en:psq"] / psq.norm)
    assert res.hits[0].score > 0
    assert {"check", "valv", "liquid", "piston"} >= set(res.hits[0].matched_terms) >= {"piston"}
    # no translation: the raw German terms find nothing in English text
    base = stage.search("Rückschlagventil Flüssigkeit Kolben", lang="de", k=5, translate=False)
    assert [r.name for r in base.info.routes] == ["de", "en:raw"] and base.info.translation is None
    assert "US05000003A" not in [h.doc_id for h in base.hits]


def test_language_detection_and_table_by_name_or_path(stage: FirstStage, tmp_path: Path) -> None:
    res = stage.search("Ein Kolben mit einem Rückschlagventil für die Flüssigkeit", k=3)
    assert res.info.lang == "de" and res.info.lang_detected
    by_name = stage.search("Kolben", lang="de", translate="de-en")
    path = tmp_path / "t.json"
    de_table().save(path)
    by_path = stage.search("Kolben", lang="de", translate=str(path))
    assert by_name.hits[0].doc_id == by_path.hits[0].doc_id == "US05000003A"
    assert by_path.info.translation == str(path)
    with pytest.raises(QueryError, match="neither a table"):
        stage.search("Kolben", lang="de", translate="xx-en")


def test_german_document_found_in_both_routes(stage: FirstStage) -> None:
    res = stage.search("Transformator Kupferwicklung Wicklung", lang="de", k=5)
    assert res.hits[0].doc_id == "EP0000001B1"
    assert set(res.hits[0].route_scores) == {"de", "en:psq"}


def test_untranslatable_language_falls_back_to_raw_terms(tmp_path: Path) -> None:
    st = FirstStage.load(make_index(tmp_path / "en-only", RECORDS, langs=("en",)))
    res = st.search("Kolben Pumpe", lang="de")
    assert [r.name for r in res.info.routes] == ["en:raw"]
    assert res.info.notes and "no de-en translation table" in res.info.notes[0]
    assert res.hits[0].doc_id == "US05000003A"  # 'pump' is the same stem in both languages


def test_routes_made_once_per_language_give_every_query_its_notes(tmp_path: Path) -> None:
    """The routes of a language and translate=True/False are made once: each later query still gets the notes (a
    list of its own), and the routes equal freshly made ones for every language and setting."""
    st = FirstStage.load(make_index(tmp_path / "en-only", RECORDS, langs=("en",)))
    first, second = (st.search("Kolben Pumpe", lang="de") for _ in range(2))
    assert first.info.notes == second.info.notes and "no de-en translation table" in first.info.notes[0]
    first.info.notes.append("changed by the caller")
    assert st.search("Kolben Pumpe", lang="de").info.notes == second.info.notes
    for lang in ("en", "de", "fr"):
        for translate in (True, False):
            made: list[str] = []
            fresh = st.resources._make_routes(lang, translate, made)
            for _ in range(2):
                notes: list[str] = []
                assert st.resources.routes(lang, translate, notes) == fresh and notes == made


def test_patent_number_query_uses_the_document_and_excludes_it(stage: FirstStage) -> None:
    res = stage.search("ep 0000001 b1", k=4, priority_cutoff=False)  # (its neighbours are later: every date)
    assert res.info.query_doc == "EP0000001B1" and res.info.filters["exclude"] == "EP0000001B1"
    ids = [h.doc_id for h in res.hits]
    assert "EP0000001B1" not in ids and ids[0] == "EP0000004A1"  # shares copper winding
    prior = stage.search("ep 0000001 b1", k=4)  # by default: what was published before its priority date
    assert prior.info.filters["before_from"] in ("priority date", "filing date", "publication date")
    cut = date.fromisoformat(prior.info.filters["before"])
    assert all(stage.docs.get_row(stage.docs.row(h.doc_id)).publication_date < cut for h in prior.hits)
    coded = stage.search("EP0000001B1", use_doc_codes=True, code_level="section", priority_cutoff=False)
    assert coded.info.filters["codes"] == ["H"] and {h.doc_id for h in coded.hits} == {"EP0000004A1"}
    de = stage.search("EP0000001B1", lang="de")
    assert de.info.lang == "de"
    with pytest.raises(QueryError, match="EP0999999B1.*search with text"):
        stage.search("EP0999999B1")
    with pytest.raises(QueryError, match="publication number"):
        stage.search("copper", query_form="claims")


def test_query_forms_of_the_paper(stage: FirstStage) -> None:
    res = stage.search("US05000003A", query_form="claims")
    assert res.info.n_terms_before_reduction <= 100


def test_filters(stage: FirstStage) -> None:
    q = "copper winding core spray pump latch"
    by_code = stage.search(q, lang="en", codes=["H01F27/99"], code_level="subclass")
    assert {h.doc_id for h in by_code.hits} == {"EP0000001B1"}
    assert by_code.info.filters == {"codes": ["H01F"], "code_level": "subclass", "n_allowed": 1}
    by_section = stage.search(q, lang="en", codes=["H"], code_level="section")
    assert {h.doc_id for h in by_section.hits} == {"EP0000001B1", "EP0000004A1"}
    by_date = stage.search(q, lang="en", before=date(2001, 2, 2), k=10)
    assert {h.doc_id for h in by_date.hits} == {"EP0000001B1", "US05000002A"}
    assert by_date.info.filters["before"] == "2001-02-02"
    with pytest.raises(QueryError, match="coarser"):
        stage.search(q, codes=["H01F"], code_level="main_group")
    with pytest.raises(QueryError, match="code level"):
        stage.search(q, codes=["H01F"], code_level="group")


def test_query_reduction_keeps_highest_tfidf_terms(stage: FirstStage) -> None:
    res = stage.search("copper copper winding latch", lang="en", max_query_terms=2)
    assert res.info.n_terms_before_reduction == 3 and len(res.info.query_terms) == 2
    assert "latch" in res.info.query_terms  # df 1 beats wind (df 2)
    full = stage.search("copper copper winding latch", lang="en", max_query_terms=0)
    assert len(full.info.query_terms) == 3
    assert reduce_terms({"a": 1, "b": 3, "c": 1}, {"a": 2.0, "b": 1.0, "c": 2.0}, 2) == {"b": 3, "a": 1}


def test_bad_queries(stage: FirstStage) -> None:
    with pytest.raises(QueryError, match="empty"):
        stage.search("   ")
    res = stage.search("the and of", lang="en")
    assert res.hits == [] and any("no index terms" in note for note in res.info.notes)
    with pytest.raises(QueryError, match="unsupported language"):
        stage.search("x", lang="it")
    assert len(stage.search("copper", depth=5000).hits) <= len(stage.docs)  # the depth limit is a setting's
    with pytest.raises(QueryError, match=">= 1"):
        stage.search("copper", k=0)


def test_one_route_search_equals_the_masked_top_k_of_its_scores(stage: FirstStage) -> None:
    """The one-route path (the accumulator's top k over the rows the query reached) gives what masks over the dense
    scores give: every matched and allowed row, best first, ties by row, raw scores, n_matched and max_score."""
    queries = ["copper winding core spray pump latch", "coil", "the and of", "Rückschlagventil Kolben"]
    for text in queries:
        for filters in ({}, {"codes": ["H"], "code_level": "section"}, {"before": date(2001, 2, 2)}):
            q = Query(text=text, lang="en", k=3, depth=50, translate=False, max_query_terms=0, **filters)
            resolve(q, stage.docs)
            res = stage.run(q)
            raw = stage.indexes["en"].score(monolingual_units(get_analyzer("en")(text)))
            allowed = (raw != 0) if q.r.mask is None else (raw != 0) & q.r.mask
            rows = np.flatnonzero(allowed)
            want = rows[np.lexsort((rows, -raw[rows]))]
            assert [h.row for h in res.hits] == want.tolist()
            assert [h.score for h in res.hits] == raw[want].tolist()  # exactly
            assert all(h.route_scores == {"en": h.score} and h.route == "en" for h in res.hits)
            (info,) = res.info.routes
            assert info.n_matched == len(rows)
            assert info.max_score == (float(raw[rows].max()) if len(rows) else 0.0)


@pytest.mark.parametrize("combine", ["reference", "weight", "max", "aligned"])
def test_routes_merged_from_accumulators_equal_the_dense_merge(stage: FirstStage, combine: str,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Several routes (a German query: de and en:psq): the hits, their merged scores (bit for bit), per-route raw
    scores, winning routes and route statistics equal a merge of every route's dense score array."""
    from collections import Counter

    from service.retrieval.first_stage import attainable_score, ceiling_slope, reference_score

    monkeypatch.setattr(stage, "combine", combine)
    n = len(stage.docs)
    bent = 0  # translated routes whose ceiling was brought down
    for text in ("Rückschlagventil Kolben Flüssigkeit", "Kupferwicklung Wicklung Rotor", "Ventilsitz Dichtring"):
        for filters in ({}, {"codes": ["F"], "code_level": "section"}, {"before": date(2004, 1, 1)}):
            q = Query(text=text, lang="de", k=2, depth=6, max_query_terms=0, **filters)
            resolve(q, stage.docs)
            res = stage.run(q)
            routes = stage.resources.routes("de", True, [])
            assert [r.name for r in res.info.routes] == [r.name for r in routes] == ["de", "en:psq"]
            counts = dict(Counter(stage.analyzer("de")(text)))
            final, winner, candidate = np.zeros(n), np.full(n, -1), np.zeros(n, dtype=bool)
            per_route = []
            for i, (route, info) in enumerate(zip(routes, res.info.routes, strict=True)):
                units = route.units(counts)
                index = stage.indexes[route.index_lang]
                dense = index.score(units)
                allowed = dense != 0 if q.r.mask is None else (dense != 0) & q.r.mask
                best = float(dense[allowed].max()) if allowed.any() else 0.0
                norm = {"reference": reference_score, "weight": attainable_score,
                        "aligned": reference_score}[combine](index, units) if combine != "max" else best
                slope = ceiling_slope(index, units, norm, stage.knee) if combine == "aligned" else 1.0
                assert (info.n_matched, info.max_score, info.norm, info.slope) == (int(allowed.sum()), best, norm,
                                                                                     slope)
                # the own route's ceiling is k1 + 1 already; a translated route's is brought down to it
                assert slope == 1.0 if route.kind == "mono" else 0.0 < slope <= 1.0
                bent += slope < 1.0
                per_route.append((route.name, dense, allowed))
                if norm > 0 and allowed.any():
                    rr = np.flatnonzero(allowed)
                    normed = dense[rr] / norm
                    knee = stage.knee
                    normed = np.where(normed > knee, knee + (normed - knee) * slope, normed) if slope != 1.0 else normed
                    better = normed > final[rr]
                    final[rr[better]], winner[rr[better]] = normed[better], i
                    candidate |= allowed
            cand = np.flatnonzero(candidate)
            want = cand[np.lexsort((cand, -final[cand]))][:6]
            assert res.rows.tolist() == want.tolist()
            assert res.scores.tolist() == final[want].tolist()  # exactly
            assert res.winner.tolist() == winner[want].tolist()
            for name, dense, allowed in per_route:
                np.testing.assert_array_equal(res.route_scores[name], np.where(allowed[want], dense[want], np.nan))
    assert (bent > 0) == (combine == "aligned")


def test_depth_returns_more_candidates_than_k(stage: FirstStage) -> None:
    res = stage.search("copper spray pump latch rotor", lang="en", k=2, depth=5)
    assert len(res.hits) == 5
    d = res.to_dict()
    assert d["hits"][0]["doc_id"] == res.hits[0].doc_id and d["info"]["lang"] == "en"


@pytest.mark.realdata
def test_real_trilingual_claims_find_their_document(ep_dir: Path, tmp_path: Path) -> None:
    ingest = pytest.importorskip("training.ingest")
    records = list(ingest.iter_records([ep_dir]))
    trilingual = [r for r in records if all(r.claims.get(lang) for lang in ("en", "de", "fr"))]
    assert len(trilingual) >= 20
    st = FirstStage.load(make_index(tmp_path / "ep", records, langs=("en", "de", "fr")))
    for rec in trilingual:
        for lang in ("de", "fr", "en"):
            res = st.search(rec.claims_text(lang), lang=lang, k=3)
            assert res.hits[0].doc_id == rec.id, (rec.id, lang)
        by_number = st.search(rec.id, k=5, lang="en")
        assert rec.id not in [h.doc_id for h in by_number.hits]


def test_ids_of_unknown_offices_are_numbers_only_when_present(tmp_path: Path) -> None:
    recs = [RECORDS[0], _rec("XS00000042A1", date(2010, 1, 1), ["H01F27/24"], "A copper winding on a core")]
    st = FirstStage.load(make_index(tmp_path / "xs", recs, langs=("en",)))
    res = st.search("xs 00000042 a1")
    assert res.info.query_doc == "XS00000042A1" and [h.doc_id for h in res.hits] == ["EP0000001B1"]
    text = st.search("XS00000099A1", lang="en")  # not an office we know, not in the index: plain text
    assert text.info.query_doc is None and text.hits == []


def test_missing_table_is_reported_when_the_language_has_its_own_index(tmp_path: Path) -> None:
    st = FirstStage.load(make_index(tmp_path / "no-table", RECORDS, langs=("en", "de")))
    res = st.search("Kolben Pumpe", lang="de")
    assert [r.name for r in res.info.routes] == ["de"]
    assert "English documents were not searched" in res.info.notes[0]


def test_pseudo_feedback_is_feedback_from_the_top_documents(stage: FirstStage) -> None:
    """``pseudo_feedback=N``: the search again with its own top N documents marked relevant (every route expanded), the
    same rows and scores as an explicit mark of those documents; N = 0 is the plain search."""
    from service.retrieval.feedback import Feedback

    for text, lang in (("copper spray pump latch rotor", "en"), ("Kupferwicklung Wicklung Rotor", "de")):
        plain = stage.search(text, lang=lang, k=5, explain=False)
        assert len(plain.rows) >= 2
        top = [int(r) for r in plain.rows[:2]]
        prf = stage.search(text, lang=lang, k=5, explain=False, pseudo_feedback=2)
        q = Query(text=text, lang=lang, k=5, depth=5, explain=False, feedback=Feedback(relevant=top))
        resolve(q, stage.docs)
        marked = stage.run(q)
        assert prf.rows.tolist() == marked.rows.tolist() and prf.scores.tolist() == marked.scores.tolist()
        assert q.feedback is not None and any(q.feedback.added.values())  # terms were added
        assert prf.scores.tolist() != plain.scores.tolist()
        same = stage.search(text, lang=lang, k=5, explain=False, pseudo_feedback=0)
        assert same.rows.tolist() == plain.rows.tolist() and same.scores.tolist() == plain.scores.tolist()
