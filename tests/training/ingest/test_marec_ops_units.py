"""Unit tests of the MAREC and OPS readers, the merge of one publication from two sources, unserved languages and
the directory walk, on small hand-written documents (no real data needed)."""

from __future__ import annotations

import gzip
import os
from datetime import date
from pathlib import Path

import pytest

from service.corpus.jsonl import read_corpus
from service.corpus.record import Claim, PatentRecord, Section
from training.ingest import (
    IngestStats,
    collect_files,
    ingest,
    iter_records,
    merge_all,
    merge_records,
    parse_marec,
    parse_ops,
    publication_key,
    unserved_texts,
)
from training.ingest.claims import spanish_claim_refs, split_numbered_claims
from training.ingest.codes import ecla_to_cpc
from training.ingest.description import tree_from_blocks


def marec_doc(ucid: str = "EP-1000001-B1", *, lang: str = "EN", claims: str | None = None, extra: str = "") -> str:
    """A minimal MAREC patent-document (the layout of the CLEF-IP collection)."""
    country, number, kind = ucid.split("-")
    claims = claims if claims is not None else (
        '<claims lang="EN"><claim num="xx"><claim-text>A widget comprising a frame.</claim-text></claim>'
        '<claim num="xx"><claim-text>A widget according to claim 1, wherein the frame is steel.</claim-text></claim>'
        '</claims><claims lang="DE"><claim num="xx"><claim-text>Ein Gerät mit einem Rahmen.</claim-text></claim>'
        '<claim num="xx"><claim-text>Gerät nach Anspruch 1, wobei der Rahmen aus Stahl ist.</claim-text></claim>'
        "</claims>"
    )
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<patent-document ucid="{ucid}" country="{country}" doc-number="{number}" kind="{kind}" date="20050622" lang="{lang}"
 family-id="123"><bibliographic-data>
<publication-reference ucid="{ucid}"><document-id><country>{country}</country><doc-number>{number}</doc-number>
<kind>{kind}</kind><date>20050622</date></document-id></publication-reference>
<application-reference><document-id><country>{country}</country><doc-number>01300267</doc-number><kind>A</kind>
<date>20010112</date></document-id></application-reference>
<priority-claims><priority-claim><document-id><country>JP</country><doc-number>2000005637</doc-number><kind>A</kind>
<date>20000114</date></document-id></priority-claim></priority-claims>
<technical-data><classifications-ipcr>
<classification-ipcr>B60C  15/00        20060101A I20051008RMEP</classification-ipcr></classifications-ipcr>
<classification-ecla><classification-symbol scheme="EC">B60C15/00D2</classification-symbol>
<classification-symbol scheme="EC">C08L  23/08A1+B2A</classification-symbol>
<classification-symbol scheme="ICO">K61B17:32A4</classification-symbol></classification-ecla>
<invention-title lang="EN">Widget</invention-title><invention-title lang="DE">Gerät</invention-title>
<citations><patent-citations><patcit ucid="EP-0426559-A1"><document-id><country>EP</country>
<doc-number>0426559</doc-number><kind>A1</kind></document-id><sources><source category="X" name="SEA"/></sources>
</patcit></patent-citations></citations></technical-data>
<parties><applicants><applicant format="epo"><addressbook><name>ACME CORP</name></addressbook></applicant>
<applicant format="intermediate"><addressbook><name>ACME CORPORATION</name></addressbook></applicant></applicants>
<inventors><inventor format="epo"><addressbook><name>DOE JANE</name></addressbook></inventor>
<inventor format="original"><addressbook><last-name>Doe</last-name><first-name>Jane</first-name></addressbook>
</inventor></inventors><assignees><assignee format="original"><addressbook><last-name>Acme Corporation</last-name>
</addressbook></assignee></assignees></parties></bibliographic-data>
<abstract lang="EN"><p>A widget with a frame. &lt;IMAGE&gt;</p></abstract>
<description lang="{lang}"><heading>Field</heading><p num="0001">The invention relates to widgets.</p></description>
{claims}{extra}</patent-document>"""


OCR_CLAIMS = (
    '<claims id="claims" lang="ES"><claim id="clm-0001" num="0001"><claim-text> REIVINDICACIONES</claim-text>'
    "<claim-text>1.- Sistema para protección de alimentos, caracterizado porque se incorpora un gas.</claim-text>"
    "<claim-text>2.- Sistema de acuerdo con la primera reivindicación, caracterizado porque el gas es argón. "
    "3.- Sistema de acuerdo con las reivindicaciones primera y segunda, caracterizado por una capa de 2.5 mm."
    "</claim-text></claim></claims>"
)


def ops_doc(country: str = "WO", number: str = "0100832", kind: str = "A1", paragraphs: str | None = None) -> str:
    """A minimal OPS fulltext-document (text only), with the prolog processing instructions OPS sends."""
    paragraphs = paragraphs if paragraphs is not None else (
        "<p>\nField of Invention\n</p><p>[0001]    The present invention relates to widgets. </p>"
        "<p>Background</p><p>[0002] Widgets are known.</p><p>[0003] They rust.</p>"
    )
    return (
        '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<?xml-stylesheet type="text/xsl" href="a.xsl"?>\n'
        '<?oxygen NVDLSchema="annotation.nvdl"?>\n'
        '<fulltext-document system="ops.epo.org" fulltext-format="text-only" xmlns="http://www.epo.org/fulltext">'
        '<bibliographic-data><publication-reference data-format="docdb"><document-id>'
        f"<country>{country}</country><doc-number>{number}</doc-number><kind>{kind}</kind></document-id>"
        f'</publication-reference></bibliographic-data><description lang="EN">{paragraphs}</description>'
        "</fulltext-document>\n"
    )


# ----------------------------------------------------------------------------------------------------------------
# MAREC


def test_parse_marec_minimal_grant() -> None:
    rec = parse_marec(marec_doc().encode(), "x.xml")
    assert (rec.id, rec.source, rec.doc_type, rec.lang) == ("EP1000001B1", "marec", "grant", "en")
    assert rec.publication_date == date(2005, 6, 22) and rec.application_date == date(2001, 1, 12)
    assert rec.priority_ids == ["JP2000005637"] and rec.priority_dates == [date(2000, 1, 14)]
    assert rec.title == {"en": "Widget", "de": "Gerät"} and rec.abstract == {"en": "A widget with a frame."}
    assert [c.num for c in rec.claims["de"]] == [1, 2] and rec.claims["de"][1].refs == [1]
    assert rec.claims["en"][1] == Claim(num=2, text="A widget according to claim 1, wherein the frame is steel.",
                                        refs=[1])
    assert rec.ipc == ["B60C15/00"]
    assert rec.ecla == ["B60C15/00D2", "C08L23/08A1+B2A", "K61B17:32A4"]
    assert rec.cpc == ["B60C15/00", "C08L23/08"]
    assert rec.citations[0].id == "EP0426559A1" and rec.citations[0].category == "X"
    assert rec.applicants == ["ACME CORPORATION"]  # intermediate rendering; the assignee repeats it (case aside)
    assert rec.inventors == ["Doe, Jane"] and rec.family_id == "123"
    assert rec.description == [Section(heading="Field", paragraphs=["The invention relates to widgets."])]


def test_marec_ocr_claims_are_split_and_spanish_is_kept() -> None:
    xml = marec_doc("WO-2006000598-A1", lang="ES", claims=OCR_CLAIMS)
    rec = parse_marec(xml.encode(), "x.xml")
    assert rec.lang == "es" and rec.doc_type == "application"
    assert [(c.num, c.refs) for c in rec.claims["es"]] == [(1, []), (2, [1]), (3, [1, 2])]
    assert rec.claims["es"][2].text.endswith("una capa de 2.5 mm.")  # '2.5' starts no claim
    assert unserved_texts(rec) == ["claims/es", "description/es"]


def test_marec_without_bibliographic_data() -> None:
    xml = ('<patent-document id="WO2006000598A1" file="WO2006000598NWA1.xml" country="WO" docnumber="2006000598" '
           'kind="A1" date-published="20060105" lang="ES"><description id="desc" lang="ES"><p>Texto.</p>'
           f"</description>{OCR_CLAIMS}</patent-document>")
    rec = parse_marec(xml.encode(), "x.xml")
    assert rec.id == "WO2006000598A1" and rec.publication_date == date(2006, 1, 5) and rec.title == {}


@pytest.mark.parametrize(
    ("pieces", "expected"),
    [
        (["CLAIMS", "1. A pump.", "2. The pump of claim 1."], [(1, "A pump."), (2, "The pump of claim 1.")]),
        (["What is claimed is: .1. A pump. 2) A valve."], [(1, "A pump."), (2, "A valve.")]),
        (["AMENDED CLAIMS [received 17 February 1995 ( 17.02.95) ] 1. A pump according to claim 1."],
         [(1, "A pump according to claim 1.")]),
        (["1. A pump as in claim 3. 3. A valve."], [(1, "A pump as in claim 3. 3. A valve.")]),  # 3 is not next
        (["A pump without numbers."], None),
    ],
)
def test_split_numbered_claims(pieces: list[str], expected: list[tuple[int, str]] | None) -> None:
    assert split_numbered_claims(pieces) == expected


@pytest.mark.parametrize(
    ("text", "num", "refs"),
    [
        ("Sistema según la reivindicación 2 o 3, caracterizado", 5, [2, 3]),
        ("de acuerdo con las reivindicaciones 1 a 3", 5, [1, 2, 3]),
        ("de acuerdo con las reivindicaciones primera a tercera", 5, [1, 2, 3]),
        ("de acuerdo con la primera reivindicación", 2, [1]),
        ("según la reivindicación 4", 3, []),  # a claim refers back only
    ],
)
def test_spanish_claim_refs(text: str, num: int, refs: list[int]) -> None:
    assert spanish_claim_refs(text, num) == refs


@pytest.mark.parametrize(
    ("symbol", "code"),
    [
        ("B60C15/00D2", "B60C15/00"),
        ("A61K31/135+M", "A61K31/135"),
        ("C08L  23/08A1+B2A", "C08L23/08"),
        ("H01L21/762D8B", "H01L21/762"),
        ("K61B17:32A4", None),  # ICO indexing code
        ("Y01N6:00", None),
    ],
)
def test_ecla_to_cpc(symbol: str, code: str | None) -> None:
    assert ecla_to_cpc(symbol) == code


# ----------------------------------------------------------------------------------------------------------------
# OPS


def test_parse_ops_headings_and_numbers() -> None:
    rec = parse_ops(ops_doc().encode(), "x.xml")
    assert (rec.id, rec.source, rec.lang, rec.doc_type) == ("WO0100832A1", "ops", "en", "application")
    assert rec.description == [
        Section(heading="Field of Invention", paragraphs=["The present invention relates to widgets."]),
        Section(heading="Background", paragraphs=["Widgets are known.", "They rust."]),
    ]


def test_tree_from_blocks_without_numbers_takes_capitals_as_headings() -> None:
    tree = tree_from_blocks([(False, "Title of the thing"), (False, "BACKGROUND OF THE INVENTION"),
                             (False, "Widgets are known."), (False, "Short line")])
    assert tree == [Section(heading=None, paragraphs=["Title of the thing"]),
                    Section(heading="BACKGROUND OF THE INVENTION", paragraphs=["Widgets are known.", "Short line"])]


def test_ops_and_marec_are_sniffed_and_prolog_instructions_do_not_split(tmp_path: Path) -> None:
    (tmp_path / "a.xml").write_text(marec_doc(), encoding="utf-8")
    (tmp_path / "b.xml").write_text(ops_doc(), encoding="utf-8")
    stats = IngestStats()
    ids = [r.id for r in iter_records([tmp_path], stats)]
    assert ids == ["EP1000001B1", "WO0100832A1"]
    assert not stats.skipped and stats.files_by_format == {"marec": 1, "ops": 1}


# ----------------------------------------------------------------------------------------------------------------
# one publication from two sources


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("EP0640886B1", "EP 640886 B1"),
        ("WO0100832A1", "WO2001000832A1"),
        ("WO02102829A2", "WO2002102829A2"),
        ("WO9510060A1", "WO1995010060A1"),
        ("US2004248206A1", "US20040248206A1"),
        ("US7910347B1", "US07910347B1"),
    ],
)
def test_publication_key_meets_spellings(a: str, b: str) -> None:
    assert publication_key(a) == publication_key(b)


def test_publication_key_keeps_kinds_apart() -> None:
    assert publication_key("EP1000001A1") != publication_key("EP1000001B1")
    assert publication_key("US7910347B1") != publication_key("US2007910347A1")


def _rec(source: str, **kw: object) -> PatentRecord:
    base: dict[str, object] = {"id": "EP1000001B1", "country": "EP", "number": "1000001", "kind": "B1",
                               "source": source}
    base.update(kw)
    return PatentRecord.model_validate(base)


def test_merge_records_field_by_field() -> None:
    ops = _rec("ops", id="EP1000001B1", lang="en", description=[Section(paragraphs=["OPS text."])])
    marec = _rec("marec", lang="de", publication_date=date(2005, 6, 22), title={"de": "Gerät", "en": "Widget M"},
                 claims={"de": [Claim(num=1, text="Ein Gerät.")], "en": [Claim(num=1, text="A widget (MAREC).")]},
                 description=[Section(paragraphs=["Beschreibung."])], ipc=["B60C15/00"], ecla=["B60C15/00D2"],
                 cpc=["B60C15/00"], applicants=["ACME CORPORATION"], warnings=["w1"])
    ep = _rec("ep", lang="en", publication_date=date(2005, 6, 23), title={"en": "Widget"},
              claims={"en": [Claim(num=1, text="A widget.")]}, ipc=["B60C9/02", "B60C15/00"],
              applicants=["Acme Corp"])
    rec = merge_records([ops, marec, ep])
    assert rec.source == "ep" and rec.id == "EP1000001B1"
    assert rec.title == {"en": "Widget", "de": "Gerät"}
    assert rec.claims["en"][0].text == "A widget." and rec.claims["de"][0].text == "Ein Gerät."
    assert rec.description_text() == "Beschreibung." and rec.lang == "de"  # together, from the best with one
    assert rec.ipc == ["B60C9/02", "B60C15/00"] and rec.cpc == ["B60C15/00"] and rec.ecla == ["B60C15/00D2"]
    assert rec.applicants == ["Acme Corp"]
    assert rec.publication_date == date(2005, 6, 23)
    assert any(w.startswith("merge: publication_date 2005-06-23 from ep kept; marec 2005-06-22") for w in rec.warnings)
    assert "marec: w1" in rec.warnings
    assert rec.provenance == {
        "id": "ep", "country": "ep", "number": "ep", "kind": "ep", "publication_date": "ep",
        "title.en": "ep", "title.de": "marec", "claims.en": "ep", "claims.de": "marec",
        "description": "marec", "lang": "marec", "ipc": "ep", "cpc": "marec", "ecla": "marec",
        "applicants": "ep",
    }


def test_merge_all_keeps_order_and_names_the_merged() -> None:
    a = _rec("marec", id="WO2001000832A1", country="WO", number="2001000832", kind="A1", title={"en": "T"})
    b = _rec("ep", id="EP1000002A1", number="1000002", kind="A1")
    c = _rec("ops", id="WO0100832A1", country="WO", number="0100832", kind="A1",
             description=[Section(paragraphs=["Text."])], lang="en")
    records, merged = merge_all([a, b, c])
    assert [r.id for r in records] == ["WO2001000832A1", "EP1000002A1"]
    assert merged == {"WO2001000832A1": ["marec", "ops"]}
    assert records[0].provenance["description"] == "ops" and records[0].provenance["title.en"] == "marec"


@pytest.mark.parametrize("name", ["corpus.jsonl", "corpus.jsonl.gz"])
def test_ingest_merges_a_publication_read_twice(tmp_path: Path, name: str) -> None:
    src = tmp_path / "in"
    src.mkdir()
    (src / "1.xml").write_text(ops_doc(number="0100832"), encoding="utf-8")
    (src / "2.xml").write_text(marec_doc("EP-1000003-A1"), encoding="utf-8")
    (src / "3.xml").write_text(marec_doc("WO-2001000832-A1"), encoding="utf-8")
    out = tmp_path / name
    stats = ingest([src], out)
    assert stats.records == 3 and stats.written == 2
    assert stats.merged == {"WO2001000832A1": ["ops", "marec"]}
    records = list(read_corpus(out))
    assert [r.id for r in records] == ["WO2001000832A1", "EP1000003A1"]  # at the place of the first one
    assert records[0].source == "marec" and records[0].provenance["description"] == "marec"
    assert records[1].provenance == {}  # read once: no provenance
    assert not list(tmp_path.glob(".*merging*"))
    if name.endswith(".gz"):
        with gzip.open(out, "rt", encoding="utf-8") as fh:
            assert len(fh.read().splitlines()) == 2
    assert "merged into one record: 1 (records written: 2)" in stats.format_table()


def test_ingest_without_repeats_writes_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import training.ingest.pipeline as pipeline

    def fail(*args: object) -> None:
        raise AssertionError("no second pass without repeated ids")

    monkeypatch.setattr(pipeline, "merge_corpus_file", fail)
    (tmp_path / "a.xml").write_text(marec_doc(), encoding="utf-8")
    stats = ingest([tmp_path / "a.xml"], tmp_path / "c.jsonl")
    assert stats.written == stats.records == 1 and stats.merged == {}


# ----------------------------------------------------------------------------------------------------------------
# the directory walk


def test_collect_files_follows_symlinked_folders_once(tmp_path: Path) -> None:
    data = tmp_path / "elsewhere" / "marec"
    data.mkdir(parents=True)
    (data / "a.xml").write_text(marec_doc(), encoding="utf-8")
    root = tmp_path / "root"
    root.mkdir()
    (root / "linked").symlink_to(data, target_is_directory=True)
    (root / "again").symlink_to(data, target_is_directory=True)
    (data / "loop").symlink_to(root, target_is_directory=True)  # a link back up: walked once, no endless loop
    files = collect_files([root])
    assert [f.resolve() for f in files] == [(data / "a.xml").resolve()]
    assert [r.id for r in iter_records([root])] == ["EP1000001B1"]
    assert os.path.islink(root / "linked")
