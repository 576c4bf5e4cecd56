"""A record with text in a language the index does not serve (Spanish claims and description, as MAREC's WO
publications have) is kept whole in the corpus and the doc store, and left out of every index part: nothing is
indexed under a wrong language and nothing fails."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from service.corpus.record import Claim, PatentRecord, Section
from service.passages.tree import KIND_DESCRIPTION, layout

SPANISH = PatentRecord(
    id="WO2006000598A1",
    country="WO",
    number="2006000598",
    kind="A1",
    source="marec",
    publication_date=date(2006, 1, 5),
    lang="es",
    claims={"es": [Claim(num=1, text="Sistema para protección de alimentos mediante un gas inerte."),
                   Claim(num=2, text="Sistema según la reivindicación 1, caracterizado porque el gas es argón.",
                         refs=[1])]},
    description=[Section(heading="Sector de la técnica", paragraphs=["La invención protege alimentos con argón."])],
)


def _english(i: int, text: str) -> PatentRecord:
    return PatentRecord(id=f"EP{i:07d}B1", country="EP", number=f"{i:07d}", kind="B1", source="synth", lang="en",
                        title={"en": text[:30]}, claims={"en": [Claim(num=1, text=text)]},
                        description=[Section(paragraphs=[text])], ipc=["B65D81/20"])


def test_layout_leaves_an_unserved_description_out() -> None:
    lay = layout(SPANISH)
    assert lay.langs_mask == 0 and lay.claims_mask == 0 and lay.abstract_mask == 0
    assert not [u for u in lay.units if u.kind == KIND_DESCRIPTION]  # not indexed as English
    english = layout(_english(1, "A container with an inert gas layer over the food."))
    assert [u.kind for u in english.units].count(KIND_DESCRIPTION) == 1
    # the reference implementation the passage index is checked against agrees
    from lab.benchmarks.passages_reference import build_tree

    assert build_tree(SPANISH, "en").passages == []
    assert [p.kind for p in build_tree(_english(1, "A container."), "en").passages].count("description") == 1


@pytest.mark.slow
def test_index_builds_and_searches_with_a_spanish_record(tmp_path: Path) -> None:
    from service.engine import Engine
    from service.query import QueryError
    from service.schema import SearchRequest
    from service.settings import Settings
    from training.build import build_index

    records = [SPANISH] + [_english(i, text) for i, text in enumerate([
        "A container with an inert gas layer over the food to stop oxidation.",
        "A bottle stopper with a pump that removes air from the bottle.",
        "A vacuum sealing machine for food bags with a heated bar.",
    ], 1)]
    idx = tmp_path / "index"
    build_index(records, idx, translation=False, compounds="", progress=False, ranker="none", cpc=None)
    engine = Engine.load(idx, settings=Settings(index_dir=idx))
    try:
        stored = engine.docs.get_row(engine.docs.row("WO2006000598A1"))
        assert stored.claims["es"] == SPANISH.claims["es"]  # kept whole in the doc store
        res = engine.search(SearchRequest(query="argón alimentos sistema reivindicación", lang="en", k=10,
                                          weights={"bm25": 1.0}))
        assert "WO2006000598A1" not in [h.id for h in res.results]  # its Spanish words are in no word index
        # (the dense stage's multilingual vectors do reach it: its Spanish title, abstract and first claim)
        res = engine.search(SearchRequest(query="argón alimentos sistema reivindicación", lang="en", k=10))
        assert "WO2006000598A1" in [h.id for h in res.results]
        res = engine.search(SearchRequest(query="inert gas layer over food", lang="en", k=10))
        assert res.results and res.results[0].id == "EP0000001B1"
        # its number as the query: no served language to search with, said as a query error (not a crash)
        with pytest.raises(QueryError, match="no title, abstract or claims in en, de, fr"):
            engine.search(SearchRequest(query="WO2006000598A1", k=5))
    finally:
        engine.close()
