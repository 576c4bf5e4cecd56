from datetime import date

import pytest
from pydantic import ValidationError

from service.corpus.jsonl import CorpusFormatError, read_corpus, write_corpus
from service.corpus.record import Claim, PatentRecord, Section


def _record() -> PatentRecord:
    return PatentRecord(
        id="EP0640886B1",
        country="EP",
        number="0640886",
        kind="B1",
        source="ep",
        publication_date=date(2006, 4, 26),
        lang="en",
        title={"en": "Electrophotographic apparatus", "de": "Elektrophotografisches Gerät"},
        claims={"en": [Claim(num=1, text="An apparatus."), Claim(num=2, text="The apparatus of claim 1.", refs=[1])]},
        description=[Section(heading="Field", paragraphs=["p1"], sections=[Section(heading="Sub", paragraphs=["p2"])])],
        ipc=["G03G  15/08", "G03G 15/08", "G03G 5/147"],
    )


def test_codes_are_normalised_and_deduplicated() -> None:
    assert _record().ipc == ["G03G15/08", "G03G5/147"]


def test_bad_code_is_rejected_with_the_code_in_the_message() -> None:
    with pytest.raises(ValidationError, match="not an IPC/CPC code"):
        PatentRecord(id="X1A", country="X", number="1", kind="A", source="t", ipc=["bogus"])


def test_languages_and_text_helpers() -> None:
    rec = _record()
    assert rec.languages == ["en", "de"]
    assert "p2" in rec.description_text() and "Sub" in rec.description_text()
    assert rec.text("de") == "Elektrophotografisches Gerät"
    paths = [p for p, _ in rec.description[0].walk()]
    assert paths == [("Field",), ("Field", "Sub")]


def test_jsonl_round_trip(tmp_path) -> None:
    rec = _record()
    for name in ("c.jsonl", "c.jsonl.gz"):
        path = tmp_path / name
        assert write_corpus([rec, rec], path) == 2
        assert list(read_corpus(path)) == [rec, rec]


def test_jsonl_bad_line_names_file_and_line(tmp_path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(_record().model_dump_json() + "\n{\"id\": 3}\n", encoding="utf-8")
    with pytest.raises(CorpusFormatError, match=r"bad.jsonl:2"):
        list(read_corpus(path))
    assert len(list(read_corpus(path, strict=False))) == 1
