"""The query language (service/querylang): the grammar's operator table, its errors, and the word index's result sets
against the reference evaluator (tests/querylang_reference.py) on a corpus written for it."""

from __future__ import annotations

import json
from datetime import date
from typing import Any

import numpy as np
import pytest
from querylang_reference import Reference

from service.corpus.record import Claim, PatentRecord, Section
from service.querylang.evaluate import MAX_EXPANSION, Evaluator, QueryLanguageError, positive_words
from service.querylang.syntax import QuerySyntaxError, looks_like_query, parse
from service.querylang.words import WordSegment, write_words


def _rec(i: int, **kw: Any) -> PatentRecord:
    base: dict[str, Any] = {"id": f"EP{i:07d}A1", "country": "EP", "number": f"{i:07d}", "kind": "A1",
                            "source": "jsonl", "lang": "en"}
    base.update(kw)
    return PatentRecord(**base)


RECORDS = [
    _rec(1, title={"en": "Transformer tank with an expansion vessel", "de": "Transformatorkessel mit Ausdehnungsgefäß"},
         abstract={"en": "An expansion vessel is sealed by a gasket. The tank holds oil."},
         claims={"en": [Claim(num=1, text="A transformer tank comprising an expansion vessel and a seal."),
                        Claim(num=2, text="The tank of claim 1, wherein the seal is a gasket.", refs=[1])]},
         description=[Section(heading="Background", paragraphs=["Transformers are cooled by oil; the oil expands.",
                                                                "A conservator vessel takes the oil."])],
         cpc=["H01F27/12", "H01F27/14"], ipc=["H01F27/00"], applicants=["Siemens AG"], inventors=["Anna Müller"],
         publication_date=date(1999, 5, 17), application_date=date(1997, 3, 1), priority_dates=[date(1996, 3, 2)]),
    _rec(2, title={"en": "Sealing gasket for a vessel"}, kind="B1",
         claims={"en": [Claim(num=1, text="A gasket sealing a pressure vessel, the vessel being of steel.")]},
         cpc=["F16J15/10"], applicants=["ABB Ltd"], publication_date=date(2003, 1, 8),
         application_date=date(2001, 6, 1)),
    _rec(3, title={"fr": "Cuve de transformateur avec joint d'étanchéité"}, lang="fr", country="FR", number="0000003",
         id="FR0000003A1",
         claims={"fr": [Claim(num=1, text="Cuve de transformateur comprenant un joint; le joint est en caoutchouc.")]},
         cpc=["H01F27/02"], publication_date=date(2000, 12, 1)),
    _rec(4, title={"de": "Dichtung für einen Transformatorkessel"}, lang="de", country="DE", number="0000004",
         id="DE0000004A1", abstract={"de": "Eine Dichtung. Der Kessel ist aus Stahl."},
         cpc=["H02K5/00"], applicants=["Siemens Energy"], publication_date=date(2010, 2, 3)),
    _rec(5, title={"en": "Colour and color sensors"},
         claims={"en": [Claim(num=1, text="A colour sensor near a tank.")]}, publication_date=None),
]


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> tuple[Evaluator, Reference]:
    d = tmp_path_factory.mktemp("words")
    write_words(d, RECORDS)
    seg = WordSegment(d)
    ref = Reference(json.loads(r.model_dump_json()) for r in RECORDS)
    return Evaluator([(seg, 0)], len(RECORDS)), ref


def _ids(mask: np.ndarray) -> set[str]:
    return {RECORDS[i].id for i in np.flatnonzero(mask)}


# The operator table (docs/QUERY_LANGUAGE.md): each row, with the documents it must match.
TABLE = [
    ("transformer", {"EP0000001A1"}),
    ("tank AND gasket", {"EP0000001A1"}),
    ("tank and gasket", {"EP0000001A1"}),
    ("tank gasket", {"EP0000001A1"}),  # side by side: AND
    ("tank OR gasket", {"EP0000001A1", "EP0000002A1", "EP0000005A1"}),
    ("gasket NOT tank", {"EP0000002A1"}),
    ("NOT tank", {"EP0000002A1", "FR0000003A1", "DE0000004A1"}),
    ("(tank OR cuve) AND NOT joint", {"EP0000001A1", "EP0000005A1"}),
    ('"expansion vessel"', {"EP0000001A1"}),
    ('"vessel expansion"', set()),
    ("transform*", {"EP0000001A1", "FR0000003A1", "DE0000004A1"}),  # transformateur, Transformatorkessel
    ("colo?r", {"EP0000005A1"}),
    ("colo*r", {"EP0000005A1"}),
    ("cl=colo?r", {"EP0000005A1"}),  # ? is zero or one character: "colour" (one) ...
    ("cl=colou?r", {"EP0000005A1"}),  # ... and "colour" again (none)
    ("cl=col#r", set()),  # # is exactly one character: not "colour"
    ("ti=col#r", {"EP0000005A1"}),  # "color"
    ("seal NEAR/3 gasket", {"EP0000001A1"}),  # claim 2: "the seal is a gasket"
    ("gasket NEAR/3 seal", {"EP0000001A1"}),
    ("gasket ADJ/3 seal", set()),  # ordered: gasket comes after seal
    ("seal ADJ/3 gasket", {"EP0000001A1"}),
    ("seal prox/distance<=3 gasket", {"EP0000001A1"}),
    ("seal prox/distance<=3/ordered gasket", {"EP0000001A1"}),
    ("seal prox/distance<4 gasket", {"EP0000001A1"}),  # Espacenet's "<n": fewer than n words apart
    ("seal prox/distance<3 gasket", set()),
    ("transformer prox/ordered tank", {"EP0000001A1"}),  # order alone: within NEAR's default distance
    ("tank prox/ordered transformer", set()),
    ("tank NEAR/2 seal", set()),  # different claims are different paragraphs
    ("oil SENT expands", {"EP0000001A1"}),
    ("oil prox/unit=sentence conservator", {"EP0000001A1"}),
    ("vessel SENT gasket", {"EP0000001A1", "EP0000002A1"}),  # the abstract's first sentence; EP2's claim
    ("tank SENT oil", {"EP0000001A1"}),  # "The tank holds oil."
    ("expansion SENT oil", set()),  # the abstract's sentences are two
    ("tank PARA oil", {"EP0000001A1"}),  # the abstract
    ("transformer prox/unit=paragraph conservator", set()),
    ('"expansion vessel" NEAR/3 (seal* OR gasket)', {"EP0000001A1"}),
    ("ti=vessel", {"EP0000001A1", "EP0000002A1"}),
    ("ti=(transformer and tank)", {"EP0000001A1"}),
    ("ab=gasket", {"EP0000001A1"}),
    ("cl=gasket", {"EP0000001A1", "EP0000002A1"}),
    ("desc=conservator", {"EP0000001A1"}),
    ("txt=conservator", set()),  # txt: title, abstract and names (Espacenet's)
    ("txt=siemens", {"EP0000001A1", "DE0000004A1"}),
    ("ta=gasket", {"EP0000001A1", "EP0000002A1"}),  # title or abstract
    ("ia=müller", {"EP0000001A1"}),  # inventor or applicant
    ("ftxt=conservator", {"EP0000001A1"}),  # claims or description
    ("ftxt=steel", {"EP0000002A1"}),
    ("extftxt=conservator", {"EP0000001A1"}),  # every text field
    ("cl=H01F27", {"EP0000001A1", "FR0000003A1"}),  # a classification symbol: Espacenet's cl, CPC or IPC
    ("cl=(F16J OR H02K)", {"EP0000002A1", "DE0000004A1"}),
    ("pa=siemens", {"EP0000001A1", "DE0000004A1"}),
    ("in=müller", {"EP0000001A1"}),
    ("in=MÜLLER", {"EP0000001A1"}),
    ("pn=EP0000002", {"EP0000002A1"}),
    ("pn=FR", {"FR0000003A1"}),
    ("pc=DE", {"DE0000004A1"}),
    ("kind=B1", {"EP0000002A1"}),
    ("cpc=H01F27", {"EP0000001A1", "FR0000003A1"}),
    ("cpc=H01F27/12", {"EP0000001A1"}),
    ("cpc=H01F27/00", {"EP0000001A1", "FR0000003A1"}),
    ("cpc=H01F", {"EP0000001A1", "FR0000003A1"}),
    ("cpc=H", {"EP0000001A1", "FR0000003A1", "DE0000004A1"}),
    ("ipc=H01F27", {"EP0000001A1"}),
    ("cpc=(F16J OR H02K)", {"EP0000002A1", "DE0000004A1"}),
    ("cpc=H01F27 and not ab=cooling", {"EP0000001A1", "FR0000003A1"}),
    ("pd<2001", {"EP0000001A1", "FR0000003A1"}),
    ("pd<=2000", {"EP0000001A1", "FR0000003A1"}),
    ("pd>2000", {"EP0000002A1", "DE0000004A1"}),
    ("pd>=2000-12-01", {"FR0000003A1", "EP0000002A1", "DE0000004A1"}),
    ("pd=1999-05", {"EP0000001A1"}),
    ("pd=19990517", {"EP0000001A1"}),
    ("pd=17/05/1999", {"EP0000001A1"}),  # Espacenet's day first
    ("pd<01.12.2000", {"EP0000001A1"}),
    ('pd within "2000,2003"', {"FR0000003A1", "EP0000002A1"}),
    ("ad<1998", {"EP0000001A1"}),
    ("prd<1997", {"EP0000001A1"}),
    ("prd>1990", {"EP0000001A1"}),  # the others have no priority date
    ("ti=(transformer and tank) and cl=(expansion prox/distance<=5 vessel) and pd<2001 and pa=siemens",
     {"EP0000001A1"}),
    ('="Dichtung"', {"DE0000004A1"}),
    ('ti all "transformer tank"', {"EP0000001A1"}),  # Espacenet's relations: every word, one of them
    ('ti any "cuve sensors"', {"FR0000003A1", "EP0000005A1"}),
    ('cpc any "F16J H02K"', {"EP0000002A1", "DE0000004A1"}),
    ('ti all "tank gasket"', set()),
    ("x-ray", set()),
]


@pytest.mark.parametrize(("query", "expected"), TABLE, ids=[q for q, _ in TABLE])
def test_each_row_of_the_operator_table(index: tuple[Evaluator, Reference], query: str, expected: set[str]) -> None:
    ev, ref = index
    node = parse(query)
    got = _ids(ev.mask(node))
    assert got == expected, node.show()
    assert ref.ids(node) == got  # the reference evaluator agrees


def test_free_text_stays_free_text() -> None:
    for text in ("METHOD AND APPARATUS FOR CONTROLLING A VALVE", "What is claimed?", 'a "smart" card reader',
                 "A tank (10) comprising a vessel; and a seal (12)", "Verfahren und Vorrichtung", "the ratio in < 5",
                 # (claims of the real data that read as queries before the rule counted signs)
                 "a last part (Pn = P3) of the parameter values", "Erfahrungswerten (F*, VAC*, POS*) trainiert",
                 "PROCEDIMIENTO PARA LA OBTENCIÓN DE HUECOS, según reivindicación 1, caracterizado porque",
                 "A ripple control process according to one of claims 1 to 8 characterised in that a first ripple "
                 "control telegram (17) of the sequence comprises a serial number (N1), a last part (Pn = P3) of the "
                 "parameter values and a check sum, the carbon atom designated* constituting a center of chirality"):
        assert not looks_like_query(text), text
    for text in ("transformer AND tank", "seal NEAR/3 gasket", "ti=tank", "pd<2001 tank", "transform*", "colo?r",
                 "wo#en", '="Fach"', "seal prox/distance<=3 gasket", "TI=tank", "(tank OR vessel) AND seal",
                 'ti all "transformer tank"'):
        assert looks_like_query(text), text


@pytest.mark.parametrize(("query", "position", "says"), [
    ("ti=(tank and", 12, "unexpected the end of the query"),
    ("(tank OR seal", 13, "expected )"),
    ("tank AND AND seal", 9, "is an operator here"),
    ("pd<20x1", 0, "not a date"),
    ("cl<2001", 0, "only dates"),
    ("tank NEAR/0 seal", 0, "distance must be"),
    ("*", 0, "wildcard needs"),
    ("ti=", 3, "expected (, =, a \"phrase\", a word"),
])
def test_a_syntax_error_says_where_and_what_was_expected(query: str, position: int, says: str) -> None:
    with pytest.raises(QuerySyntaxError) as err:
        parse(query)
    assert err.value.position == position
    assert says in str(err.value)


def test_proximity_over_and_is_refused_and_a_wide_wildcard_is_told(index: tuple[Evaluator, Reference],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    ev, _ = index
    with pytest.raises(QueryLanguageError, match="proximity takes words"):
        ev.mask(parse("(tank AND seal) NEAR/3 gasket"))
    import service.querylang.evaluate as evaluate

    monkeypatch.setattr(evaluate, "MAX_EXPANSION", 3)
    with pytest.raises(QueryLanguageError, match="matches more than 3 words"):
        Evaluator(ev.segments, ev.n_rows).mask(parse("t*"))
    assert MAX_EXPANSION == 1000


def test_the_ranking_words_are_the_terms_not_negated() -> None:
    assert positive_words(parse("ti=(transformer and tank) and not cooling* and pd<2001 and cpc=H01F")) == \
        ["transformer", "tank"]
    assert positive_words(parse('"expansion vessel" NEAR/3 (seal* OR gasket)')) == \
        ["expansion", "vessel", "seal", "gasket"]


def test_translations_expand_a_word_into_the_other_languages(index: tuple[Evaluator, Reference]) -> None:
    """A German word matches the French and English documents through the tables (here a table of three entries),
    ``="..."`` does not translate, and a dropped translation is left out and said."""
    from service.text.analysis import get_analyzer
    from service.text.translation import TranslationTable

    ev, ref = index
    analyzers = {lang: get_analyzer(lang) for lang in ("en", "de", "fr")}
    stem = {lang: analyzers[lang] for lang in analyzers}
    de, en, fr = stem["de"]("Dichtung")[0], stem["en"]("gasket")[0], stem["fr"]("joint")[0]
    tables = {("de", "en"): TranslationTable({de: {en: 0.7, stem["en"]("seal")[0]: 0.3}}, src="de", tgt="en"),
              ("de", "fr"): TranslationTable({de: {fr: 1.0}}, src="de", tgt="fr")}
    crossed = Evaluator(ev.segments, ev.n_rows, analyzers=analyzers, tables=tables)
    got = _ids(crossed.mask(parse("Dichtung")))
    exp = next(iter(crossed.expansions.values()))
    # (every word of the index whose stem is a translation: seal, sealed, sealing)
    assert exp.translations == {"en": ["gasket", "seal", "sealed", "sealing"], "fr": ["joint"]}
    assert got == {"DE0000004A1", "EP0000001A1", "EP0000002A1", "FR0000003A1"}
    extra = {"dichtung": set(exp.all_words())}
    assert Reference((json.loads(r.model_dump_json()) for r in RECORDS), extra).ids(parse("Dichtung")) == got
    assert _ids(Evaluator(ev.segments, ev.n_rows, analyzers=analyzers, tables=tables)
                .mask(parse('="Dichtung"'))) == {"DE0000004A1"}
    dropping = Evaluator(ev.segments, ev.n_rows, analyzers=analyzers, tables=tables, drop=["joint"])
    assert _ids(dropping.mask(parse("Dichtung"))) == {"DE0000004A1", "EP0000001A1", "EP0000002A1"}
    assert next(iter(dropping.expansions.values())).dropped == ["joint"]
    assert ref is not None
