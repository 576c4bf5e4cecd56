"""Passages across languages on tiny built indexes: in every direction, a claim's twin in another language is the
first passage, its words are highlighted with the query words they render, and own-language passages that share
a word or two with the query stay below it. The real-data figures come from ``priorart-lab experiment xling-passages``
(docs/results/xling-passages.json, rendered in docs/RESULTS.md)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from service.corpus.record import Claim, PatentRecord, Section
from service.engine import Engine
from service.schema import ClaimChartRequest, PassageRequest
from service.settings import Settings
from service.text.analysis import SUPPORTED_LANGS, get_analyzer
from service.text.translation import TranslationTable
from service.workflow.chart import claim_chart
from training.build import build_index

# one invention in three languages: the claim and a paragraph
TWIN = {
    "en": ("A high voltage arrangement comprising a sealed compartment, a transformer and an expansion vessel.",
           "The expansion vessel takes up the oil of the transformer when it heats."),
    "de": ("Hochspannungsanordnung mit einem abgedichteten Fach, einem Transformator und einem Ausdehnungsgefäß.",
           "Das Ausdehnungsgefäß nimmt das Öl des Transformators auf, wenn es sich erwärmt."),
    "fr": ("Agencement haute tension comprenant un compartiment étanche, un transformateur et un vase d'expansion.",
           "Le vase d'expansion reçoit l'huile du transformateur lorsqu'il chauffe."),
}
# documents in each language that share a word or two with the invention, and nothing else
DISTRACTORS = {
    "en": ["FIG. 2 is a top plan view thereof.", "A steel rail with a compartment for cables and a high head."],
    "de": ["Eine Schiene aus Stahl mit einem Fach für Kabel.", "Die Anordnung der Räder ist hoch."],
    "fr": ["Un rail en acier avec un compartiment pour câbles.", "Un agencement de roues sur un rail."],
}
# word pairs of the tables (every direction through its own words; de<->fr is composed through English)
PAIRS = {
    ("de", "en"): [("Hochspannung", "voltage"), ("Anordnung", "arrangement"), ("abgedichtet", "sealed"),
                   ("Fach", "compartment"), ("Transformator", "transformer"), ("Ausdehnungsgefäß", "vessel"),
                   ("Ausdehnung", "expansion"), ("Gefäß", "vessel"), ("Öl", "oil"), ("Schiene", "rail"),
                   ("Stahl", "steel"), ("Kabel", "cable"), ("hoch", "high"), ("Räder", "wheels")],
    ("fr", "en"): [("agencement", "arrangement"), ("haute", "high"), ("tension", "voltage"),
                   ("compartiment", "compartment"), ("étanche", "sealed"), ("transformateur", "transformer"),
                   ("vase", "vessel"), ("expansion", "expansion"), ("huile", "oil"), ("rail", "rail"),
                   ("acier", "steel"), ("câbles", "cable"), ("roues", "wheels")],
}
LANG_NAMES = ("en", "de", "fr")


def _term(lang: str, word: str) -> str:
    terms = get_analyzer(lang)(word)
    assert len(terms) == 1, (lang, word, terms)
    return terms[0]


def _tables(folder: Path) -> Path:
    """de-en, fr-en and their inverses, one translation per word (p = 1), as `priorart translate-train` writes."""
    entries: dict[tuple[str, str], dict[str, dict[str, float]]] = {}
    for (src, tgt), pairs in PAIRS.items():
        for a, b in pairs:
            entries.setdefault((src, tgt), {})[_term(src, a)] = {_term(tgt, b): 1.0}
            entries.setdefault((tgt, src), {}).setdefault(_term(tgt, b), {})[_term(src, a)] = 1.0
    for (src, tgt), rows in entries.items():
        norm = {s: {t: p / sum(ts.values()) for t, p in ts.items()} for s, ts in rows.items()}
        TranslationTable(norm, src=src, tgt=tgt).save(folder / f"{src}-{tgt}.json")
    return folder


def _record(doc_id: str, lang: str, claim: str, paragraphs: list[str]) -> PatentRecord:
    return PatentRecord(id=doc_id, country=doc_id[:2], number=doc_id[2:-2], kind=doc_id[-2:], source="synth",
                        lang=lang, claims={lang: [Claim(num=1, text=claim)]},
                        description=[Section(heading="Description", paragraphs=paragraphs)])


def _corpus(target: str) -> list[PatentRecord]:
    """The invention only in ``target``; distractors in every language."""
    claim, paragraph = TWIN[target]
    out = [_record("EP0000100B1", target, claim, [paragraph, "Other parts are known from the prior art."])]
    n = 200
    for lang in LANG_NAMES:
        for text in DISTRACTORS[lang]:
            n += 1
            out.append(_record(f"EP{n:07d}A1", lang, text, [text]))
    return out


@pytest.fixture(scope="module")
def engines(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Engine]:
    root = tmp_path_factory.mktemp("xling-passages")
    tables = _tables(root / "tables")
    out = {}
    for target in LANG_NAMES:
        idx = root / f"index-{target}"
        build_index(_corpus(target), idx, translation_dir=tables, compounds=(), progress=False)
        out[target] = Engine.load(idx, settings=Settings(index_dir=idx))
    return out


@pytest.mark.parametrize(("src", "tgt"), [("de", "en"), ("fr", "en"), ("en", "de"), ("en", "fr"), ("de", "fr"),
                                          ("fr", "de")])
def test_the_twin_claim_comes_first_in_every_direction(engines: dict[str, Engine], src: str, tgt: str) -> None:
    engine = engines[tgt]
    res = engine.passages(PassageRequest(query=TWIN[src][0], lang=src, k=10))
    top = res.results[0]
    assert (top.passage_id, top.lang) == ("EP0000100B1/claims/1", tgt), [(h.passage_id, h.score) for h in res.results]
    # the twin's other passage comes next: the invention's passages before any distractor
    assert {h.doc_id for h in res.results[:2]} == {"EP0000100B1"}
    # its words are highlighted, each with the query words it renders
    assert top.matches and all(m.translated for m in top.matches)
    query_words = {w for m in top.matches for w in m.query_words}
    assert query_words and all(w in TWIN[src][0] for w in query_words)
    for m in top.matches:
        assert (m.start, m.end) in top.highlights
    # own-language distractors may share a word with the query, but rank below the twin
    assert all(h.score <= top.score for h in res.results)


def test_a_passage_without_any_query_term_is_never_above_one_with(engines: dict[str, Engine]) -> None:
    res = engines["en"].passages(PassageRequest(query=TWIN["de"][0], lang="de", k=50))
    with_terms = [bool(h.matches) for h in res.results]
    assert with_terms == sorted(with_terms, reverse=True)
    assert all(h.score == 0.0 for h in res.results if not h.matches)


def test_english_query_reaches_german_and_french_only_passages(engines: dict[str, Engine]) -> None:
    for tgt in ("de", "fr"):
        res = engines[tgt].passages(PassageRequest(query=TWIN["en"][0], lang="en", k=5))
        assert res.results[0].doc_id == "EP0000100B1" and res.results[0].lang == tgt
        assert not any("have no text in" in n for n in res.notices)


def test_passage_queries_use_the_index_compound_analysis(tmp_path: Path) -> None:
    # a German index split into parts: the query's compound meets a text that has only its part
    from service.text.analysis import stopwords
    from service.text.compounds import CompoundSplitter

    records = [_record("EP0000300B1", "de", "Ein Gefäß aus Glas.", ["Das Gefäß ist dicht."])] + [
        _record(f"EP000030{i}B1", "de", f"Ein {w} aus Holz.", [f"Das {w} ist rund."])
        for i, w in enumerate(("Rad", "Brett", "Fenster", "Dach"), start=1)]  # (BM25 needs a few documents)
    # the words as the analyzer sees them (case-folded: ß -> ss)
    splitter = CompoundSplitter({"ausdehnung": 5, "gefäss": 5, "glas": 3}, {"ausdehnung", "gefäss"}, lang="de",
                                stop=stopwords("de"))
    assert splitter.split("ausdehnungsgefäss") == ("ausdehnung", "gefäss")
    build_index(records, tmp_path / "idx", index_langs="de", translation=False, splitters={"de": splitter},
                progress=False)
    engine = Engine.load(tmp_path / "idx", settings=Settings(index_dir=tmp_path / "idx"))
    res = engine.passages(PassageRequest(query="Ausdehnungsgefäß", lang="de", k=3))
    assert res.results[0].doc_id == "EP0000300B1"
    assert [res.results[0].text[m.start:m.end] for m in res.results[0].matches] == ["Gefäß"]


def test_a_german_claim_charted_against_an_english_document(engines: dict[str, Engine]) -> None:
    chart = claim_chart(engines["en"], ClaimChartRequest(claim_text="1. " + TWIN["de"][0], lang="de",
                                                        documents=["EP0000100B1", "EP0000201A1"]))
    cells = {(c.element, c.doc_id): c for c in chart.cells}
    twin = [c for (_, doc), c in cells.items() if doc == "EP0000100B1"]
    assert twin and all(c.lang == "en" and c.passage_id and c.passage_id.startswith("EP0000100B1/") for c in twin)
    assert any(c.status == "disclosed" for c in twin)
    assert all(m.translated and m.query_words for c in twin for m in c.matches)
    by_doc = {d.id: d for d in chart.documents}
    assert by_doc["EP0000100B1"].disclosed > by_doc["EP0000201A1"].disclosed
    # a cell does not depend on the other documents charted
    alone = claim_chart(engines["en"], ClaimChartRequest(claim_text="1. " + TWIN["de"][0], lang="de",
                                                        documents=["EP0000100B1"]))
    assert [(c.element, c.passage_id, c.status) for c in alone.cells] == \
        [(c.element, c.passage_id, c.status) for c in twin]


def test_rho_is_the_query_languages_default_unless_the_request_sets_it(engines: dict[str, Engine]) -> None:
    """``rho`` (the share of its ideal a translated text must reach to stand level with an own-language text at its
    ideal): the query language's default (service/passages/lm.py DEFAULT_RHO), reported in the trace; a request's
    value replaces it and moves the translated passages' scores, never the order of the query language's own."""
    from service.passages.lm import DEFAULT_RHO
    from service.passages.tree import LANG_CODE

    engine = engines["de"]
    for lang, rho in (("en", None), ("de", None), ("en", 1.0), ("en", 0.3)):
        res = engine.passages(PassageRequest(query=TWIN[lang][0], lang=lang, k=10, rho=rho, explain=True))
        detail = next(s.detail for s in res.stages if s.name == "passages")
        assert detail["rho"] == (DEFAULT_RHO[lang] if rho is None else rho)
    # the ranker's raw scores (before min-max): a German text, reached through en->de, rises as rho falls; the
    # English query's own language is measured as before
    images, _ = engine.evidence.passage_query(TWIN["en"][0], "en")
    index, rows = engine.evidence.passage_index(), list(range(len(engine.docs)))
    raw = {rho: index.score(images, "en", rows, rho=rho) for rho in (1.0, 0.3)}
    de = raw[1.0].lang == LANG_CODE["de"]
    assert de.any() and (~de).any()
    assert np.all(raw[0.3].raw["passage_title"][de] > raw[1.0].raw["passage_title"][de])
    with pytest.raises(ValidationError):
        PassageRequest(query="x", lang="en", rho=0)
    with pytest.raises(ValidationError):
        PassageRequest(query="x", lang="en", rho=1.5)


def test_a_translated_text_counts_each_rendering_at_most_as_often_as_the_query_asks(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """A German text reached through en->de: a paragraph that repeats `Transformator` three times gains no more than
    one that holds it once (the English query says `transformer` once); both have six words, so they score the
    same. The query language's own text keeps the Dirichlet gain of repetition: under a German query the repeating
    paragraph is above."""
    root = tmp_path_factory.mktemp("xling-cap")
    repeated = "Transformator Transformator Transformator Stahl Kabel Räder."
    once = "Transformator Schiene Stahl Kabel Räder Öl."
    records = [*_corpus("de"), _record("EP0000300A1", "de", "Eine Schiene aus Stahl.", [repeated, once])]
    idx = root / "index"
    build_index(records, idx, translation_dir=_tables(root / "tables"), compounds=(), progress=False)
    engine = Engine.load(idx, settings=Settings(index_dir=idx))
    index, rows = engine.evidence.passage_index(), list(range(len(engine.docs)))
    for lang, query in (("en", TWIN["en"][0]), ("de", TWIN["de"][0])):
        images, _ = engine.evidence.passage_query(query, lang)
        scores = index.score(images, lang, rows)
        by_id = {scores.passage_id(i): i for i in range(len(scores))}
        a, b = (scores.raw["passage"][by_id[f"EP0000300A1/d/1/p{p}"]] for p in (1, 2))
        if lang == "en":
            assert images["de"].need[_term("de", "Transformator")] == 1.0
            assert a == pytest.approx(b, rel=1e-12), (a, b)
        else:
            assert a > b * 1.01, (a, b)
    engine.close()


def test_a_language_reached_through_two_tables_is_measured_against_rho_squared(engines: dict[str, Engine]) -> None:
    """de <-> fr is composed through English: its image says two hops, and its texts are measured against rho^2 of
    their ideal (each table renders only part of what it is given), English text against rho, the query's own
    language against its whole ideal."""
    import dataclasses

    engine = engines["fr"]
    images, _ = engine.evidence.passage_query(TWIN["de"][0], "de")
    assert {lang: image.hops for lang, image in images.items()} == {"de": 0, "en": 1, "fr": 2}
    index, rows = engine.evidence.passage_index(), list(range(len(engine.docs)))
    two = {"de": images["de"], "fr": images["fr"]}
    one = {"de": images["de"], "fr": dataclasses.replace(images["fr"], hops=1)}
    squared = index.score(two, "de", rows, rho=0.5).raw["passage"]
    np.testing.assert_allclose(squared, index.score(one, "de", rows, rho=0.25).raw["passage"], rtol=1e-12)
    assert not np.allclose(squared, index.score(one, "de", rows, rho=0.5).raw["passage"])


def test_a_translated_passage_weighs_its_document_by_its_languages_beta(engines: dict[str, Engine]) -> None:
    """A passage in the query's language combines its document score and its context by ``beta``; a passage reached
    through a translation by ``beta_translated`` of its language (service/passages/lm.py DEFAULT_BETA_TRANSLATED
    unless the request sets one value for all), reported in the trace."""
    from service.passages.lm import DEFAULT_BETA_TRANSLATED, betas_of
    from service.passages.tree import LANG_CODE

    engine = engines["en"]
    images, _ = engine.evidence.passage_query(TWIN["de"][0], "de")
    index, rows = engine.evidence.passage_index(), list(range(len(engine.docs)))
    sc = index.score(images, "de", rows)
    assert sc.context is not None
    de, en = sc.lang == LANG_CODE["de"], sc.lang == LANG_CODE["en"]
    assert de.any() and en.any()
    for beta, translated in ((0.5, None), (0.2, 0.9), (1.0, 0.0)):
        got = sc.combine(0.5, beta, translated)
        b_en = DEFAULT_BETA_TRANSLATED["en"] if translated is None else translated
        for mask, b in ((de, beta), (en, b_en)):
            want = 0.5 * sc.passage + 0.5 * (b * sc.doc + (1 - b) * sc.context)
            np.testing.assert_allclose(got[mask], np.where(sc.matched, want, 0.0)[mask], rtol=1e-12)
    assert dict(zip(SUPPORTED_LANGS, betas_of(0.3, None, "en"), strict=True)) == {
        "en": 0.3, "de": DEFAULT_BETA_TRANSLATED["de"], "fr": DEFAULT_BETA_TRANSLATED["fr"]}
    assert dict(zip(SUPPORTED_LANGS, betas_of(0.4, {"fr": 0.1}, "de"), strict=True)) == {
        "de": 0.4, "en": DEFAULT_BETA_TRANSLATED["en"], "fr": 0.1}
    with pytest.raises(ValueError, match="beta of fr passages"):
        betas_of(0.5, {"fr": 2.0}, "en")
    assert DEFAULT_BETA_TRANSLATED["en"] != 0.5  # the check above tells the two apart
    for req_value in (None, 0.3):
        res = engine.passages(PassageRequest(query=TWIN["de"][0], lang="de", k=10, beta_translated=req_value,
                                             explain=True))
        detail = next(s.detail for s in res.stages if s.name == "passages")
        want = {pl: DEFAULT_BETA_TRANSLATED[pl] if req_value is None else req_value for pl in ("en", "fr")}
        assert detail["beta_translated"] == want and detail["beta"] == 0.5
    with pytest.raises(ValidationError):
        PassageRequest(query="x", lang="en", beta_translated=1.5)
