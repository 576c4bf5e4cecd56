"""The syntax of IPC/CPC codes (service/codes.py) and that every side reads a record's codes in one order."""

from __future__ import annotations

from datetime import date

import pytest

from service.codes import (
    CODE_LEVELS,
    ClassificationError,
    check_level,
    code_fallbacks,
    codes_at,
    level_rank,
    looks_like_code_prefix,
    normalise_code,
    normalise_codes,
    parse_code,
    record_codes,
    syntactic_level,
    syntactic_parent,
    truncate_code,
)
from service.corpus.record import PatentRecord
from training.evaluation.trec import Topic


def _record(ipc: list[str], cpc: list[str]) -> PatentRecord:
    return PatentRecord(id="EP0000001B1", country="EP", number="0000001", kind="B1", source="t", ipc=ipc, cpc=cpc)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("B05B 7/ 00", "B05B7/00"),
        ("G03G  15/08        20060101AFI19941209BHEP", "G03G15/08"),
        ("H01F27/14", "H01F27/14"),
        ("h01f 027/14", "H01F27/14"),
        ("A61K 31/4709", "A61K31/4709"),
        ("H01F", "H01F"),
        ("not a code", None),
        ("", None),
    ],
)
def test_normalise_record_code(raw: str, expected: str | None) -> None:
    assert normalise_code(raw, coarsest="subclass") == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("H", "H"),
        (" y ", "Y"),
        ("H 01", "H01"),
        ("h01", "H01"),
        ("H01F", "H01F"),
        ("H 01 F", "H01F"),
        ("H01F 27/14", "H01F27/14"),
        ("H01F27/14", "H01F27/14"),
        ("B05B 7/ 00", "B05B7/00"),
        ("H01F 027/014", "H01F27/014"),  # main group loses its leading zeros, the subgroup keeps its digits
        ("H05H2007/127", "H05H2007/127"),
        ("F25B2313/0233 20130101 LA20200715BHEP", "F25B2313/0233"),
        ("H0", None),
        ("H01F27", None),
        ("I01F27/14", None),  # no section I
        ("H 0 1", None),
        ("H01 extra", None),
        ("H01F extra", None),
        ("", None),
    ],
)
def test_normalise_code_any_level(raw: str, expected: str | None) -> None:
    assert normalise_code(raw) == expected


def test_normalise_code_coarsest_level() -> None:
    assert normalise_code("H", coarsest="subclass") is None
    assert normalise_code("H 01", coarsest="subclass") is None
    assert normalise_code("H01F", coarsest="subclass") == "H01F"
    assert normalise_code("H01F", coarsest="main_group") is None
    assert normalise_code("H01F27/00", coarsest="subgroup") is None
    assert normalise_code("H01F27/14", coarsest="subgroup") == "H01F27/14"
    with pytest.raises(ClassificationError, match="unknown level"):
        normalise_code("H01F", coarsest="group")


def test_parse_code_raises_for_text_that_is_no_code() -> None:
    assert parse_code("h 01") == "H01"
    assert parse_code("H01F 27/14") == "H01F27/14"
    with pytest.raises(ClassificationError, match="not a classification code: 'hello'"):
        parse_code("hello")
    assert issubclass(ClassificationError, ValueError)


def test_normalise_codes_for_validators() -> None:
    assert normalise_codes(["H01F 27/14", "H01F27/14", "B05B 7/ 00", "H01F"]) == ["H01F27/14", "B05B7/00", "H01F"]
    assert normalise_codes([]) == []
    with pytest.raises(ValueError, match="not an IPC/CPC code: 'H01'"):
        normalise_codes(["H01F27/14", "H01"])
    assert normalise_codes(["H01", "h"], coarsest="section") == ["H01", "H"]


def test_levels() -> None:
    assert CODE_LEVELS == ("section", "class", "subclass", "main_group", "subgroup")
    assert [level_rank(lvl) for lvl in CODE_LEVELS] == [0, 1, 2, 3, 4]
    assert check_level("main_group") == "main_group"
    with pytest.raises(ClassificationError, match="subclass"):
        check_level("group")
    with pytest.raises(ClassificationError, match="unknown level"):
        level_rank("group")
    assert [syntactic_level(c) for c in ("H", "H01", "H01F", "H01F27/00", "H01F27/14", "H05H2007/127")] == [
        "section", "class", "subclass", "main_group", "subgroup", "subgroup",
    ]  # fmt: skip
    assert syntactic_level("H0") == ""


def test_parents_and_fallbacks() -> None:
    assert [syntactic_parent(c) for c in ("H01F27/14", "H01F27/00", "H01F", "H01", "H")] == [
        "H01F27/00", "H01F", "H01", "H", None,
    ]  # fmt: skip
    assert syntactic_parent("H05H2007/127") == "H05H2007/00"  # by shape; the CPC tree says H05H7/12
    assert code_fallbacks("H01F 27/14") == ["H01F27/14", "H01F27/00", "H01F", "H01", "H"]
    assert code_fallbacks("B05B 7/ 00") == ["B05B7/00", "B05B", "B05", "B"]
    assert code_fallbacks("h01") == ["H01", "H"]
    assert code_fallbacks("not a code") == []


def test_truncate_code() -> None:
    assert [truncate_code("H01F27/14", lvl) for lvl in CODE_LEVELS] == ["H", "H01", "H01F", "H01F27/00", "H01F27/14"]
    assert [truncate_code("B05B7/00", lvl) for lvl in CODE_LEVELS] == ["B", "B05", "B05B", "B05B7/00", "B05B7/00"]
    assert [truncate_code("H01F", lvl) for lvl in CODE_LEVELS] == ["H", "H01", "H01F", None, None]
    assert [truncate_code("H", lvl) for lvl in CODE_LEVELS] == ["H", None, None, None, None]
    with pytest.raises(ValueError, match="unknown level 'group'"):
        truncate_code("H01F27/14", "group")


def test_looks_like_code_prefix() -> None:
    assert all(looks_like_code_prefix(t) for t in ("H", "H0", "H01", "H01F", "H01F2", "H01F27/", "H01F27/14"))
    assert not any(looks_like_code_prefix(t) for t in ("", "OIL", "H01F27/14X", "1H", "H01F 27"))


def test_record_codes_cpc_first_without_duplicates() -> None:
    rec = _record(ipc=["H01F27/14", "A01B1/00"], cpc=["H01F27/16", "H01F27/14"])
    assert record_codes(rec) == ["H01F27/16", "H01F27/14", "A01B1/00"]
    assert record_codes(_record(ipc=[], cpc=[])) == []
    topic = Topic(qid="q", text="x", ipc=rec.ipc, cpc=rec.cpc, before=date(2000, 1, 1))
    assert topic.codes == record_codes(rec)


def test_codes_at_a_level() -> None:
    codes = ["H01F27/14", "H01F 27/16", "H01F", "B05B7/00", "nonsense", "H01F27/14"]
    assert codes_at(codes, "section") == ["H", "B"]
    assert codes_at(codes, "subclass") == ["H01F", "B05B"]
    assert codes_at(codes, "main_group") == ["H01F27/00", "B05B7/00"]
    assert codes_at(codes, "subgroup") == ["H01F27/14", "H01F27/16", "B05B7/00"]
    assert codes_at([], "class") == []
    with pytest.raises(ClassificationError, match="unknown level"):
        codes_at(codes, "group")


def test_every_query_side_reads_record_codes_in_the_models_order() -> None:
    """The domain features' query side and the models' inputs get a record's codes in one order."""
    from service.retrieval.domain import query_meta

    rec = _record(ipc=["A01B1/00", "H01F27/14"], cpc=["H01F27/16", "H01F27/14"])
    assert query_meta("a coil", "en", record=rec).codes == record_codes(rec) == ["H01F27/16", "H01F27/14", "A01B1/00"]
