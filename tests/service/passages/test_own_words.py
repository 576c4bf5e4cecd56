"""A passage that says the query word for word ranks first, whatever the translation adds (issue 57, item 2): the
rule's pieces (:func:`service.passages.lm.holds_in_order`, :func:`service.passages.ranker.holds_all_terms`), the rule
on a tiny index (``PassageScores.top``), and the issue's German claim on the real data."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from service.corpus.record import Claim, PatentRecord, Section
from service.passages import PassageIndex
from service.passages.lm import holds_in_order
from service.passages.ranker import holds_all_terms
from service.text.translation import TranslationTable


def _rec(doc_id: str, lang: str, claims: list[str], paragraphs: list[str]) -> PatentRecord:
    return PatentRecord(id=doc_id, country=doc_id[:2], number=doc_id[2:-2], kind=doc_id[-2:], source="synth",
                        lang=lang, claims={lang: [Claim(num=i + 1, text=t) for i, t in enumerate(claims)]},
                        description=[Section(heading="Text", paragraphs=paragraphs)])


# a German claim that holds the query's words among many others, and an English paragraph that renders each of them,
# one by all of its alternatives: measured against their ideal texts, the English paragraph scores higher
GERMAN = _rec("EP0000001B1", "de", ["Hochspannungsanordnung mit einem Transformator (3) und einem Gefäß (4), "
                                    "einem Gehäuse, einem Rahmen, einer Leitung, einem Schalter und einer Klemme."],
              ["Das Gehäuse ist aus Stahl."])
ENGLISH = _rec("EP0000002B1", "en", ["A switchgear with a breaker."],
               ["The transformer sits in a vessel, a container or a tank.", "The breaker opens."])
TABLE = TranslationTable({"transformator": {"transform": 1.0}, "gefass": {"vessel": 0.4, "contain": 0.3, "tank": 0.3},
                          "pump": {"pump": 1.0}}, src="de")
CLAIM, PARAGRAPH = "EP0000001B1/claims/1", "EP0000002B1/d/1/p1"


def test_holds_in_order_reads_the_query_word_for_word_reference_signs_aside() -> None:
    text = ["devic", "compris", "element", "(3)", "charg", "unit", "(6)", "and", "drum"]
    assert holds_in_order(text, ["element", "charg", "unit"])  # the claim's reference sign between the words
    assert holds_in_order(text, ["element", "(4)", "charg"])  # the query's own signs do not count either
    assert holds_in_order(text, ["drum"]) and holds_in_order(text, text)
    assert not holds_in_order(text, ["charg", "element"])  # another order
    assert not holds_in_order(text, ["element", "unit"])  # a word between them
    assert not holds_in_order(text, ["unit", "drum", "roller"])  # past the end
    assert not holds_in_order(text, []) and not holds_in_order(text, ["(3)"])  # nothing to say


def test_holds_all_terms_needs_every_own_term_as_often_as_the_query_has_it() -> None:
    # query terms 0, 1 in the query's language (the query has term 1 twice), term 2 a translation
    own = np.array([True, True, False])
    ideal = np.array([1.0, 2.0, 1.0])
    rows = np.array([0, 0, 1, 1, 2, 2, 3, 3])  # (text, term, count) entries
    q = np.array([0, 1, 0, 1, 0, 2, 0, 1])
    counts = np.array([1.0, 2.0, 3.0, 1.0, 1.0, 5.0, 1.0, 3.0])
    got = holds_all_terms(rows, q, counts, own, ideal, 5, 2)
    assert got.tolist() == [True, False, False, True, False]  # 1: term 1 once; 2: a translation is not own; 4: none
    assert not holds_all_terms(rows, q, counts, own, ideal, 5, 3).any()  # a query term no text has: none holds them all
    assert not holds_all_terms(rows[:0], q[:0], counts[:0], own, ideal, 2, 0).any()


def test_a_translated_passage_that_scores_higher_does_not_bury_the_querys_own_words() -> None:
    index = PassageIndex.from_records([GERMAN, ENGLISH])
    ranking = index.rank("Transformator Gefäß", "de", [0, 1], [1.0, 1.0], translations={"de": TABLE}, k=10)
    hits = {h.passage_id: h for h in ranking.hits}
    assert hits[PARAGRAPH].score > hits[CLAIM].score  # what buried the claim: the English paragraph scores higher
    assert ranking.hits[0].passage_id == CLAIM and ranking.hits[0].components["own_words"] == 1.0
    assert ranking.hits[1].passage_id == PARAGRAPH and "own_words" not in ranking.hits[1].components
    # a document's evidence stays its best score (the order of /search does not change)
    assert ranking.best is not None and ranking.best.tolist() == pytest.approx(
        [2.0 + hits[CLAIM].score, 2.0 + hits[PARAGRAPH].score])
    # each candidate alone (a claim chart's cells): the same rule
    alone = index.rank("Transformator Gefäß", "de", [0, 1], translations={"de": TABLE}, k=1, alone=True)
    assert [h.passage_id for h in alone.hits] == [CLAIM, PARAGRAPH]


@pytest.mark.parametrize("query", ["Transformator Gefäß Pumpe", "Transformator Transformator Gefäß",
                                   "Gefäß Transformator"])
def test_a_passage_that_does_not_say_the_query_word_for_word_ranks_by_its_score(query: str) -> None:
    # a word the claim lacks, a word the query has twice and the claim once, the words in another order: the claim
    # does not say the query word for word
    index = PassageIndex.from_records([GERMAN, ENGLISH])
    hits = index.rank(query, "de", [0, 1], [1.0, 1.0], translations={"de": TABLE}, k=10).hits
    assert hits[0].passage_id == PARAGRAPH
    assert all("own_words" not in h.components for h in hits)


# --------------------------------------------------------------------------------------------- real data

ISSUE_QUERY = ("Elektrophotographische Vorrichtung, umfassend: ein elektrophotographisches photoempfindliches "
               "Element, eine aufladende Einrichtung")


def test_the_german_claim_ranks_first_among_translated_passages_on_the_real_data(real_index: Path) -> None:
    """Issue 57, item 2: the beginning of EP0640886B1's German claim 1, word for word, put that claim 455th among
    1,000 passages (first with ``translate: false``), the whole claim 8th."""
    from service.engine import Engine
    from service.schema import PassageRequest
    from service.settings import Settings

    engine = Engine.load(real_index, settings=Settings(index_dir=real_index))
    record = engine.document("EP0640886B1")
    assert record is not None and record.claims.get("de")
    whole = record.claims["de"][0].text
    assert whole.startswith("Elektrophotographische Vorrichtung, umfassend")
    for query in (ISSUE_QUERY, whole):
        res = engine.passages(PassageRequest(query=query, lang="de", k=1000))
        ranked = [h.passage_id for h in res.results]
        assert ranked[0] == "EP0640886B1/claims/1", (query[:40], ranked.index("EP0640886B1/claims/1") + 1)
        assert res.results[0].components["own_words"] == 1.0
        assert "en" in {h.lang for h in res.results}  # the translation still adds English passages
        alone = engine.passages(PassageRequest(query=query, lang="de", k=1000, translate=False))
        assert alone.results[0].passage_id == "EP0640886B1/claims/1"  # as without the translation
