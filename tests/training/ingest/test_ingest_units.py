"""Unit tests of the ingest readers on tiny hand-written documents (no real data needed)."""

from __future__ import annotations

import gzip
import json
import logging
import tracemalloc
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from service.corpus.jsonl import read_corpus, write_corpus
from service.corpus.record import Claim, PatentRecord, Section
from training.commands import ingest as ingest_cmd
from training.ingest import (
    DocumentError,
    IngestInputError,
    IngestStats,
    ingest,
    iter_records,
    normalise_ipc,
    parse_claim_refs,
    parse_ep,
    parse_us,
)
from training.ingest.biblio import citation_id
from training.ingest.codes import split_ipc_list
from training.ingest.description import description_tree
from training.ingest.files import split_documents
from training.ingest.xmltext import parse_xml, text_of


def us_doc(number: str = "07000001", kind: str = "B2", *, body: str = "", claims: str | None = None) -> str:
    """A minimal but complete us-patent-grant document (v4.2 layout)."""
    claims = claims if claims is not None else (
        '<claim id="CLM-00001" num="00001"><claim-text>1. A widget comprising a frame.</claim-text></claim>'
        '<claim id="CLM-00002" num="00002"><claim-text>2. The widget of '
        '<claim-ref idref="CLM-00001">claim 1</claim-ref>, wherein the frame is steel.</claim-text></claim>'
    )
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE us-patent-grant SYSTEM "us-patent-grant-v42-2006-08-23.dtd" [ ]>
<us-patent-grant lang="EN" dtd-version="v4.2 2006-08-23" country="US" date-publ="20090106">
<us-bibliographic-data-grant>
<publication-reference><document-id><country>US</country><doc-number>{number}</doc-number><kind>{kind}</kind>
<date>20090106</date></document-id></publication-reference>
<application-reference appl-type="utility"><document-id><country>US</country><doc-number>11111111</doc-number>
<date>20070315</date></document-id></application-reference>
<classifications-ipcr><classification-ipcr><section>B</section><class>27</class><subclass>G</subclass>
<main-group>15</main-group><subgroup>00</subgroup></classification-ipcr></classifications-ipcr>
<classification-national><country>US</country><main-classification>408225</main-classification></classification-national>
<invention-title id="t1">Widget &amp; frame</invention-title>
<references-cited><citation><patcit num="00001"><document-id><country>US</country><doc-number>1701273</doc-number>
<kind>A</kind><name>Pipp</name><date>19290200</date></document-id></patcit>
<category>cited by examiner</category></citation>
<citation><nplcit num="00002"><othercit>Smith, Widgets, 1990</othercit></nplcit>
<category>cited by applicant</category></citation>
</references-cited>
<parties><applicants><applicant sequence="001" app-type="applicant-inventor"><addressbook><last-name>Doe</last-name>
<first-name>Jane</first-name></addressbook></applicant></applicants></parties>
<assignees><assignee><addressbook><orgname>Acme Corp.</orgname></addressbook></assignee></assignees>
</us-bibliographic-data-grant>
<abstract id="abstract"><p id="p-0001" num="0000">A widget.</p></abstract>
<description id="description">
<p id="p-0002" num="0001">Lead paragraph.</p>
<heading id="h-0001" level="1">BACKGROUND</heading>
<p id="p-0003" num="0002">Widgets are old{body}.</p>
</description>
<claims id="claims">{claims}</claims>
</us-patent-grant>
"""


# ----------------------------------------------------------------------------------------------------------------
# claim references


@pytest.mark.parametrize(
    ("text", "num", "refs"),
    [
        ("An apparatus according to claim 1, wherein", 2, [1]),
        ("A method as claimed in claims 1 to 3, wherein", 5, [1, 2, 3]),
        ("The device of any one of claims 1-4 wherein", 6, [1, 2, 3, 4]),
        ("The device of any one of claims 1 – 3", 6, [1, 2, 3]),
        ("according to claim 1 or 2", 3, [1, 2]),
        ("according to claims 1, 2, 5 and 7", 8, [1, 2, 5, 7]),
        ("according to claim 1 or claim 3", 4, [1, 3]),
        ("Vorrichtung nach Anspruch 1, dadurch gekennzeichnet", 2, [1]),
        ("Verfahren nach einem der Ansprüche 1 bis 4", 5, [1, 2, 3, 4]),
        ("nach Anspruch 1 oder 2", 3, [1, 2]),
        ("nach einem der vorhergehenden Ansprüche", 4, [1, 2, 3]),
        ("Dispositif selon la revendication 1 ou 2", 3, [1, 2]),
        ("selon l'une quelconque des revendications 1 à 3", 4, [1, 2, 3]),
        ("selon l'une quelconque des revendications précédentes", 3, [1, 2]),
        ("The widget of any preceding claim", 3, [1, 2]),
        ("An apparatus comprising a frame (1) and 2 legs", 3, []),
        ("A method as claimed in claim 5", 3, []),  # forward references are not kept
        ("The method of claim 2 wherein", 2, []),  # nor a claim's own number
    ],
)
def test_parse_claim_refs(text: str, num: int, refs: list[int]) -> None:
    assert parse_claim_refs(text, num) == refs


def test_parse_claim_refs_without_own_number() -> None:
    assert parse_claim_refs("according to claims 2 to 4") == [2, 3, 4]
    assert parse_claim_refs("claimed subject-matter of 3 parts") == []


# ----------------------------------------------------------------------------------------------------------------
# classification codes and citation ids


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        ("B05B 7/ 00", "B05B7/00"),
        ("G03G  15/08        20060101AFI19941209BHEP        ", "G03G15/08"),
        ("F25B2313/0233 20130101 LA20200715BHEP ", "F25B2313/0233"),
        ("2C 07D 307/12 A", "C07D307/12"),  # old EP B511 with IPC edition prefix
        (" 7A 01B  45/00   A", "A01B45/00"),
        ("// A01N43/08", "A01N43/08"),
        ("A45F  504", "A45F5/04"),  # USPTO IPC-7 fixed width
        ("A43B 1314", "A43B13/14"),
        ("G06F 1516", "G06F15/16"),
        ("G06F017/60", "G06F17/60"),
        ("H01F 027/14", "H01F27/14"),
        ("H05K", "H05K"),
        ("D 6495", None),  # US national (design) class
        ("705/26", None),
        ("", None),
    ],
)
def test_normalise_ipc(raw: str, code: str | None) -> None:
    assert normalise_ipc(raw) == code


def test_split_ipc_list_carries_the_subclass() -> None:
    assert split_ipc_list("C07D 307/12, 405/12; A01N 43/08") == ["C07D307/12", "C07D405/12", "A01N43/08"]


@pytest.mark.parametrize(
    ("text", "cid"),
    [
        ("EP-A- 0 294 097", "EP0294097A"),
        ("US-B1- 6 556 945", "US6556945B1"),
        ("JP-A- H08 246 101", "JPH08246101A"),
        ("DE-A1- 2 148 722", "DE2148722A1"),
        ("PATENT ABSTRACTS OF JAPAN vol. 016, no. 555", None),
    ],
)
def test_citation_id(text: str, cid: str | None) -> None:
    assert citation_id(text) == cid


# ----------------------------------------------------------------------------------------------------------------
# text and description


def test_text_of_handles_entities_math_tables_and_breaks() -> None:
    xml = (
        b'<?xml version="1.0"?>\n<!DOCTYPE p SYSTEM "x.dtd">\n'
        b"<p>Handeg&aring;ard said &ldquo;hi&rdquo;<br/>next   line"
        b"<maths><math><mi>x</mi><mo>=</mo><mn>2</mn></math></maths>"
        b"<tables><table><row><entry>a</entry><entry>b</entry></row></table></tables>"
        b'<img file="x.tif"/><sub>2</sub>O</p>'
    )
    root, warnings = parse_xml(xml)
    assert warnings == []
    assert text_of(root) == "Handegåard said \u201chi\u201d next line x = 2 a b 2O"


def test_description_tree_nests_by_heading_level() -> None:
    root, _ = parse_xml(
        b'<description><p>intro</p><heading level="1">A</heading><p>a1</p>'
        b'<heading level="2">A.1</heading><p>a11</p><heading level="1">B</heading><p>b1</p></description>'
    )
    tree = description_tree(root)
    assert tree == [
        Section(heading=None, paragraphs=["intro"]),
        Section(heading="A", paragraphs=["a1"], sections=[Section(heading="A.1", paragraphs=["a11"])]),
        Section(heading="B", paragraphs=["b1"]),
    ]


def test_parse_us_minimal_document() -> None:
    rec = parse_us(us_doc().encode(), "t.xml")
    assert rec.id == "US07000001B2" and rec.source == "us-ipg" and rec.doc_type == "utility"
    assert rec.title == {"en": "Widget & frame"}
    assert rec.claims["en"] == [
        Claim(num=1, text="A widget comprising a frame.", refs=[]),
        Claim(num=2, text="The widget of claim 1, wherein the frame is steel.", refs=[1]),
    ]
    assert rec.ipc == ["B27G15/00"]  # the national class 408225 stays out
    assert [(c.id, c.category) for c in rec.citations] == [("US1701273A", "examiner"), (None, "applicant")]
    assert rec.applicants == ["Acme Corp."] and rec.inventors == ["Doe, Jane"]
    assert [s.heading for s in rec.description] == [None, "BACKGROUND"]


def test_parse_ep_rejects_other_roots_and_missing_numbers() -> None:
    with pytest.raises(DocumentError, match="not an EP publication"):
        parse_ep(us_doc().encode(), "x.xml")
    with pytest.raises(DocumentError, match="no publication number"):
        parse_ep(b'<ep-patent-document country="EP" kind="A1"><SDOBI/></ep-patent-document>', "x.xml")
    with pytest.raises(DocumentError, match="no publication number"):
        parse_us(us_doc(number="").encode(), "x.xml")


# ----------------------------------------------------------------------------------------------------------------
# files: splitting, broken documents, formats


def test_broken_concatenated_file_keeps_the_good_documents(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    good1, good2 = us_doc("07000001"), us_doc("07000003")
    truncated = us_doc("07000002")[:900]  # cut inside the bibliographic data
    path = tmp_path / "ipg-broken.xml"
    path.write_text(good1 + truncated + "\n" + good2, encoding="utf-8")
    stats = IngestStats()
    with caplog.at_level(logging.WARNING, logger="training.ingest"):
        records = list(iter_records([path], stats))
    assert [r.id for r in records] == ["US07000001B2", "US07000003B2"]
    assert len(stats.skipped) == 1
    skip = stats.skipped[0]
    assert skip.file == str(path) and skip.index == 2 and skip.doc_id == "US07000002B2"
    assert skip.reason.startswith("truncated document")
    assert any("ipg-broken.xml #2 (US07000002B2)" in m for m in caplog.messages)


def test_bare_ampersand_and_stray_lt_are_repaired(tmp_path: Path) -> None:
    doc = us_doc(body=" by Smith & Wesson").replace(">BACKGROUND<", "><BACKGROUND<")  # both seen in EP files
    path = tmp_path / "one.xml"
    path.write_text(doc, encoding="utf-8")
    stats = IngestStats()
    (rec,) = list(iter_records([path], stats))
    assert rec.warnings == [rec.warnings[0]] and rec.warnings[0].startswith("repaired 2 unescaped")
    assert stats.warnings == {str(path): [f"US07000001B2: {rec.warnings[0]}"]}
    assert rec.description[1].heading == "<BACKGROUND"
    assert rec.description[1].paragraphs == ["Widgets are old by Smith & Wesson."]


def test_other_malformed_documents_are_recovered_with_a_warning() -> None:
    doc = us_doc(body="<b>bold</i>")  # mismatched tag: only the recovering parser reads it
    rec = parse_us(doc.encode(), "x.xml")
    assert len(rec.warnings) == 1 and "lenient parser" in rec.warnings[0]
    assert rec.id == "US07000001B2" and len(rec.claims["en"]) == 2


def test_missing_id_is_skipped_with_reason(tmp_path: Path) -> None:
    path = tmp_path / "two.xml"
    path.write_text(us_doc(number="") + us_doc("07000009"), encoding="utf-8")
    stats = IngestStats()
    assert [r.id for r in iter_records([path], stats)] == ["US07000009B2"]
    assert stats.skipped[0].index == 1 and "no publication number" in stats.skipped[0].reason


def test_split_documents_counts_lines_and_indices(tmp_path: Path) -> None:
    path = tmp_path / "c.xml"
    path.write_text(us_doc("1") + us_doc("2") + "\n\n", encoding="utf-8")
    with open(path, "rb") as fh:
        docs = list(split_documents(fh))
    assert [d.index for d in docs] == [1, 2]
    assert docs[0].line == 1 and docs[1].line == us_doc("1").count("\n") + 1
    assert docs[1].data.startswith(b"<?xml")


def test_split_documents_without_declarations(tmp_path: Path) -> None:
    """2001-2004 application files: documents may start at <!DOCTYPE without an XML declaration."""
    body = us_doc("1").split("\n", 1)[1]  # drop the declaration line
    path = tmp_path / "pap.xml"
    path.write_text(body + body.replace("<doc-number>1<", "<doc-number>2<"), encoding="utf-8")
    with open(path, "rb") as fh:
        docs = list(split_documents(fh))
    assert len(docs) == 2 and all(d.data.startswith(b"<!DOCTYPE") for d in docs)
    assert [r.id for r in iter_records([path])] == ["US1B2", "US2B2"]


def test_gzip_input_and_directory_walk(tmp_path: Path) -> None:
    sub = tmp_path / "b" / "deeper"
    sub.mkdir(parents=True)
    with gzip.open(sub / "week.xml.gz", "wt", encoding="utf-8") as fh:
        fh.write(us_doc("07000002") + us_doc("07000003"))
    (tmp_path / "a.xml").write_text(us_doc("07000001"), encoding="utf-8")
    (tmp_path / "notes.md").write_text("# not walked", encoding="utf-8")
    ids = [r.id for r in iter_records([tmp_path])]
    assert ids == ["US07000001B2", "US07000002B2", "US07000003B2"]


def test_unrecognised_file_is_reported_and_missing_path_raises(tmp_path: Path) -> None:
    odd = tmp_path / "odd.xml"
    odd.write_text("<?xml version='1.0'?><html><body/></html>", encoding="utf-8")
    stats = IngestStats()
    assert list(iter_records([odd], stats)) == []
    assert stats.skipped[0].reason == "unrecognised format: root element <html>"
    with pytest.raises(IngestInputError, match="does not exist"):
        list(iter_records([tmp_path / "nope"]))


def test_jsonl_round_trip(tmp_path: Path) -> None:
    src = tmp_path / "src.xml"
    src.write_text(us_doc("07000001") + us_doc("07000002"), encoding="utf-8")
    first = tmp_path / "first.jsonl"
    second = tmp_path / "second.jsonl.gz"
    ingest([src], first)
    stats = ingest([first], second)
    assert stats.read == {"jsonl": 2}
    assert list(read_corpus(first)) == list(read_corpus(second))
    # a hand-written record with every field survives unchanged
    rec = PatentRecord(
        id="EP1B1", country="EP", number="1", kind="B1", source="synth", title={"de": "T"},
        claims={"de": [Claim(num=1, text="x"), Claim(num=2, text="y", refs=[1])]}, ipc=["B05B 7/ 00"],
        description=[Section(heading="H", paragraphs=["p"], sections=[Section(heading="S")])], warnings=["w"],
    )
    write_corpus([rec], tmp_path / "one.jsonl")
    assert list(iter_records([tmp_path / "one.jsonl"])) == [rec]


def test_bad_jsonl_line_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    good = PatentRecord(id="US1A", country="US", number="1", kind="A", source="synth")
    path.write_text(good.model_dump_json() + "\n" + '{"id": 3}\n', encoding="utf-8")
    stats = IngestStats()
    assert list(iter_records([path], stats)) == [good]
    assert stats.skipped[0].index == 2 and stats.skipped[0].reason.startswith("invalid record")


def _peak_while_iterating(path: Path) -> tuple[int, int]:
    count = 0
    tracemalloc.start()
    try:
        for _ in iter_records([path]):
            count += 1
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return count, peak


@pytest.mark.slow
def test_streaming_memory_does_not_grow_with_file_size(tmp_path: Path) -> None:
    doc = us_doc(body=" and new" * 150)  # about 3 kB per document
    small, big = tmp_path / "small.xml", tmp_path / "big.xml"
    small.write_text(doc * 50, encoding="utf-8")
    with open(big, "w", encoding="utf-8") as fh:
        for _ in range(2000):
            fh.write(doc)
    size = big.stat().st_size
    assert size > 5_000_000
    _peak_while_iterating(small)  # warm-up: imports and caches are not what we measure
    n_small, peak_small = _peak_while_iterating(small)
    n_big, peak_big = _peak_while_iterating(big)
    assert (n_small, n_big) == (50, 2000)
    assert peak_big < size / 20, f"peak {peak_big} bytes for a {size}-byte file"
    assert peak_big < 2 * peak_small + 100_000, (peak_small, peak_big)


# ----------------------------------------------------------------------------------------------------------------
# the command


def _app() -> typer.Typer:
    app = typer.Typer()
    ingest_cmd.register(app)
    app.callback()(lambda: None)
    return app


def test_command_writes_corpus_and_summary(tmp_path: Path) -> None:
    src = tmp_path / "in.xml"
    src.write_text(us_doc("07000001") + us_doc("07000002")[:700] + "\n" + us_doc("07000003"), encoding="utf-8")
    out, summary = tmp_path / "out.jsonl", tmp_path / "s.json"
    result = CliRunner().invoke(_app(), ["ingest", str(src), "-o", str(out), "--json-summary", str(summary)])
    assert result.exit_code == 0, result.output
    assert "us-ipg" in result.output and "skipped: 1" in result.output
    data = json.loads(summary.read_text(encoding="utf-8"))
    assert data["records"] == 2 and data["read"] == {"us-ipg": 2} and len(data["skipped"]) == 1
    assert data["claim_langs"] == {"en": 2}
    assert [r.id for r in read_corpus(out)] == ["US07000001B2", "US07000003B2"]


def test_command_fails_only_when_nothing_usable(tmp_path: Path) -> None:
    src = tmp_path / "bad.xml"
    src.write_text(us_doc()[:500], encoding="utf-8")
    result = CliRunner().invoke(_app(), ["ingest", str(src), "-o", str(tmp_path / "o.jsonl")])
    assert result.exit_code == 1
    result = CliRunner().invoke(_app(), ["ingest", str(tmp_path / "missing"), "-o", str(tmp_path / "o.jsonl")])
    assert result.exit_code == 2
