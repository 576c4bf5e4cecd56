"""Ingestion on the real patent files in ../shared/data (EP publication server XML, USPTO weekly and older formats).

Field-level facts below were read from the XML files themselves.
"""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from service.corpus.jsonl import read_corpus
from service.corpus.record import PatentRecord
from training.commands import ingest as ingest_cmd
from training.ingest import IngestStats, iter_records, parse_ep, parse_us

pytestmark = pytest.mark.realdata

TRILINGUAL = ("en", "de", "fr")


@pytest.fixture(scope="module")
def ep_records(ep_dir: Path) -> dict[str, PatentRecord]:
    stats = IngestStats()
    records = {r.id: r for r in iter_records([ep_dir], stats)}
    assert not stats.skipped
    return records


@pytest.fixture(scope="module")
def us_weekly(us_dir: Path) -> tuple[list[PatentRecord], IngestStats]:
    stats = IngestStats()
    return list(iter_records([us_dir], stats)), stats


def _us_doc(records: list[PatentRecord], rid: str) -> PatentRecord:
    found = [r for r in records if r.id == rid]
    assert len(found) == 1, rid
    return found[0]


def _headings(rec: PatentRecord) -> list[str]:
    return [path[-1] for section in rec.description for path, _ in section.walk() if path]


# ----------------------------------------------------------------------------------------------------------------
# EP


def test_every_ep_file_parses_with_its_file_name_as_id(ep_dir: Path, ep_records: dict[str, PatentRecord]) -> None:
    stems = sorted(p.stem for p in ep_dir.glob("*.xml"))
    assert len(stems) == 58
    assert sorted(ep_records) == stems
    assert all(r.source == "ep" and r.country == "EP" for r in ep_records.values())


def test_trilingual_grants_have_aligned_claims(ep_records: dict[str, PatentRecord]) -> None:
    trilingual = [r for r in ep_records.values() if all(r.claims.get(lang) for lang in TRILINGUAL)]
    assert len(trilingual) == 25
    for rec in trilingual:
        assert rec.kind.startswith("B"), rec.id
        counts = {lang: len(rec.claims[lang]) for lang in TRILINGUAL}
        assert len(set(counts.values())) == 1, (rec.id, counts)
        for lang in TRILINGUAL:
            assert [c.num for c in rec.claims[lang]] == list(range(1, counts["en"] + 1)), (rec.id, lang)


def test_claim_refs_agree_across_languages(ep_records: dict[str, PatentRecord]) -> None:
    """The de/fr twins of an English claim refer to the same claims (two source typos aside)."""
    total = agree = 0
    for rec in ep_records.values():
        if not all(rec.claims.get(lang) for lang in TRILINGUAL):
            continue
        for en, de, fr in zip(rec.claims["en"], rec.claims["de"], rec.claims["fr"], strict=True):
            total += 1
            agree += en.refs == de.refs == fr.refs
    assert total == 313
    # EP0546210B2 claim 7 fr: "revendications précécentes" (typo); EP1442058B1 claim 3 fr: number missing
    assert agree == total - 2


def test_ep0640886b1_fields(ep_dir: Path) -> None:
    rec = parse_ep((ep_dir / "EP0640886B1.xml").read_bytes(), "EP0640886B1.xml")
    assert rec.id == "EP0640886B1" and rec.number == "0640886" and rec.kind == "B1"
    assert rec.doc_type == "grant" and rec.lang == "en"
    assert rec.publication_date == date(2006, 4, 26)
    assert rec.application_date == date(1994, 8, 29)
    assert rec.priority_dates == [date(1993, 8, 30)]
    assert rec.priority_ids == ["JP23589493"]
    assert rec.title == {
        "de": "Elektrophotografisches Gerät und Prozesseinheit",
        "en": "Electrophotographic apparatus and process cartridge",
        "fr": "Appareil électrophotographique et unité de traitement",
    }
    assert {lang: len(c) for lang, c in rec.claims.items()} == {"en": 10, "fr": 10, "de": 10}
    assert rec.ipc == ["G03G15/08", "G03G5/147"]
    assert rec.cpc == []
    assert _headings(rec)[:5] == [
        "Field of the Invention",
        "Related Background Art",
        "SUMMARY OF THE INVENTION",
        "BRIEF DESCRIPTION OF THE DRAWINGS",
        "DESCRIPTION OF THE PREFERRED EMBODIMENTS",
    ]
    assert rec.description[0].heading == "Field of the Invention"
    assert rec.description[0].paragraphs[0].startswith("This invention relates to an electrophotographic apparatus")
    claim4 = {lang: rec.claims[lang][3] for lang in TRILINGUAL}
    assert all(c.num == 4 and c.refs == [3] for c in claim4.values())
    # comment inside the French claim text and <br/> in the German one leave clean text
    assert claim4["fr"].text.startswith(
        "Appareil électrophotographique selon la revendication 3, caractérisé en ce que"
    )
    assert claim4["de"].text == (
        "Elektrophotographische Vorrichtung nach Anspruch 3, dadurch gekennzeichnet, dass "
        "die Ladungserzeugungsschicht ein Polyvinylacetal umfasst."
    )
    assert rec.claims["en"][0].refs == []
    assert "characterized in that said electrophotographic photosensitive member" in rec.claims["en"][0].text
    cited = [c.id for c in rec.citations]
    assert cited[:4] == ["EP0294097A", "EP0300426A", "EP0501497A", "GB2167199A"]
    assert len(rec.citations) == 6 and rec.citations[4].id is None  # B562: non-patent literature
    assert rec.applicants == ["CANON KABUSHIKI KAISHA"]
    assert rec.inventors[0] == "Yoshihara, Toshiyuki"


def test_ep2361995b2_dtd_1_5_fields(ep_records: dict[str, PatentRecord]) -> None:
    rec = ep_records["EP2361995B2"]
    assert rec.title == {"de": "PERLITSCHIENE", "en": "PEARLITE RAIL", "fr": "RAIL EN PERLITE"}
    assert {lang: len(c) for lang, c in rec.claims.items()} == {"en": 14, "de": 14, "fr": 14}
    assert rec.claims["en"][2].refs == [1, 2]  # "according to claim 1 or 2"
    assert rec.claims["fr"][2].refs == [1, 2]
    assert rec.ipc[:2] == ["C22C38/00", "C22C38/04"]
    assert rec.cpc[:3] == ["C21D9/04", "C21D2211/004", "C21D2211/009"]
    assert _headings(rec)[:4] == [
        "Technical Field", "Background Art", "[Patent Literature]", "Summary of the Invention"
    ]
    ids = {c.id for c in rec.citations}
    assert {"EP2071044A1", "JPS51002616B", "US6556945B1"} <= ids  # search report (B561) and reference list


def test_ep0000002a1_old_layout(ep_records: dict[str, PatentRecord]) -> None:
    """1978 application: no XML declaration, B511/B512 IPC with edition prefix, German only."""
    rec = ep_records["EP0000002A1"]
    assert rec.lang == "de" and rec.kind == "A1" and rec.doc_type == "application"
    assert rec.ipc == ["C07D307/12", "C07D407/12", "C07D307/42", "A01N43/08"]
    assert len(rec.claims["de"]) == 6 and set(rec.claims) == {"de"}
    assert rec.claims["de"][2].text.startswith("Herbizide Mittel")  # "3.)" numbering removed
    assert [c.refs for c in rec.claims["de"]] == [[], [], [1], [1], [1], [1]]
    assert rec.title["en"] == (
        "Tetrahydrofurane derivatives, processes for their preparation and their use as herbicides"
    )
    assert rec.applicants == ["BAYER AG"]


def test_ep_search_report_citation_categories(ep_records: dict[str, PatentRecord]) -> None:
    rec = ep_records["EP4114164A1"]
    cats = {c.id: c.category for c in rec.citations}
    assert cats["US2020068759A1"] == "X" and cats["EP3096596B1"] == "X"
    assert rec.ipc == ["H05K13/08"]  # the srep 'fields searched' H05K is not a classification of the document


def test_malformed_ep_files_are_repaired(ep_records: dict[str, PatentRecord]) -> None:
    """Four EP files hold a bare '&' or '<First Embodiment</heading>'; they are repaired, nothing is lost."""
    warned = sorted(r.id for r in ep_records.values() if r.warnings)
    assert warned == ["EP0560858A1", "EP1921219A1", "EP2055205A1", "EP3889521A1"]
    assert all(r.warnings[0].startswith("repaired ") for id_ in warned for r in [ep_records[id_]])
    headings = _headings(ep_records["EP3889521A1"])
    assert len(headings) == 19 and "<First Embodiment" in headings


def test_bibliographic_only_ep_records(ep_records: dict[str, PatentRecord]) -> None:
    rec = ep_records["EP1605745A1"]  # ep-bulletin DTD: title and IPC, no text
    assert rec.claims == {} and rec.description == []
    assert rec.title["en"] == "DEVICE FOR FILLING CARROTING HOLES IN A LAWN"
    assert rec.ipc == ["A01B45/00"]


# ----------------------------------------------------------------------------------------------------------------
# USPTO weekly files


def test_weekly_us_files_counts(us_dir: Path, us_weekly: tuple[list[PatentRecord], IngestStats]) -> None:
    records, stats = us_weekly
    assert len(records) == 421
    assert not stats.skipped
    assert stats.ignored == {"sequence-cwu": 5}
    by_file = stats.read_by_file
    design_file = str(us_dir / "ipg120327-designs-sample.xml")
    assert by_file[design_file] == 196
    assert sum(n for f, n in by_file.items() if f != design_file) == 225
    assert all(n == 25 for f, n in by_file.items() if f != design_file)
    assert len({r.id for r in records}) == 421
    assert {r.doc_type for r in records} == {"utility", "design", "plant", "sir"}


def test_us_weekly_utility_fields(us_weekly: tuple[list[PatentRecord], IngestStats]) -> None:
    rec = _us_doc(us_weekly[0], "US07473056B2")  # ipg090106
    assert rec.source == "us-ipg" and rec.doc_type == "utility"
    assert rec.title == {"en": "Spade bit"}
    assert len(rec.claims["en"]) == 11
    assert rec.claims["en"][0].text.startswith("A spade bit comprising: a shaft defining")
    assert rec.claims["en"][1].refs == [1]
    assert rec.ipc[0] == "B27G15/00"
    assert _headings(rec) == [
        "BACKGROUND",
        "SUMMARY OF PREFERRED EMBODIMENTS OF THE INVENTION",
        "BRIEF DESCRIPTION OF THE DRAWINGS",
        "DETAILED DESCRIPTION OF EMBODIMENTS OF THE INVENTION",
    ]
    assert len(rec.citations) == 96 and rec.citations[0].category == "other"
    assert rec.applicants == ["Irwin Industrial Tool Company"]
    assert rec.inventors[0] == "Durfee, Laverne"
    assert rec.publication_date == date(2009, 1, 6)


def test_us_2005_ipc7_codes(us_weekly: tuple[list[PatentRecord], IngestStats]) -> None:
    rec = _us_doc(us_weekly[0], "US06836899B1")  # ipg050104: <main-classification>A45F  504</main-classification>
    assert rec.ipc == ["A45F5/04"]
    assert all("/" in code for r in us_weekly[0] for code in r.ipc)


def test_us_design_fields(us_weekly: tuple[list[PatentRecord], IngestStats]) -> None:
    rec = _us_doc(us_weekly[0], "USD0656296S1")  # first of ipg120327-designs
    assert rec.doc_type == "design" and rec.kind == "S1" and rec.number == "D0656296"
    assert rec.title == {"en": "Ready to eat snack piece"}
    assert [c.text for c in rec.claims["en"]] == [
        "The ornamental design for a ready to eat snack piece, as shown and described."
    ]
    assert rec.ipc == [] and rec.cpc == []  # Locarno 0101 and US D 1128 are no IPC codes
    assert rec.application_date == date(2010, 12, 16)
    assert len(rec.citations) == 42
    assert rec.applicants == ["Frito-Lay North America, Inc."]
    assert rec.inventors[:2] == ["Cavin, Nicole", "Paruchuri, Divya"]
    assert rec.description[0].heading is None
    assert rec.description[0].paragraphs[0] == "FIG. 1 is a perspective view of the present invention;"


# ----------------------------------------------------------------------------------------------------------------
# USPTO older generations


def test_every_us_format_file_yields_a_record(us_formats_dir: Path) -> None:
    stats = IngestStats()
    records = list(iter_records([us_formats_dir], stats))
    files = sorted(us_formats_dir.glob("*.xml"))
    assert len(files) == 10
    assert not stats.skipped
    assert all(stats.read_by_file[str(f)] == 1 for f in files)
    by_id = {r.id: r for r in records}
    assert {f.stem[:10] for f in files} <= {rid[:10] for rid in by_id}
    assert dict(stats.read) == {"us-ipg": 6, "us-ipa": 2, "us-sgml": 1, "us-pap": 1}
    for rec in records:
        assert rec.title.get("en"), rec.id
        assert len(rec.claims.get("en", [])) > 0, rec.id
        assert rec.description, rec.id


def test_us_patdoc_2002_fields(us_formats_dir: Path) -> None:
    rec = parse_us((us_formats_dir / "US06336130.xml").read_bytes(), "US06336130.xml")
    assert rec.id == "US06336130B1" and rec.source == "us-sgml"
    assert rec.title == {"en": "Arrangement for improving availability of services in a communication system"}
    assert len(rec.claims["en"]) == 22
    claim2 = rec.claims["en"][1]
    assert claim2.refs == [1]
    assert claim2.text == (
        "The arrangement in claim 1, wherein the fixed network node agent is configured to perform a security function."
    )
    assert rec.ipc == ["G06F15/16", "G06F13/00"]  # B511 'G06F 1516', B512 'G06F 1300'; B521 US classes left out
    assert _headings(rec) == [
        "FIELD OF THE INVENTION", "BACKGROUND", "BRIEF DESCRIPTION OF THE DRAWINGS", "DETAILED DESCRIPTION"
    ]
    assert rec.priority_ids == ["NO971605"] and rec.priority_dates == [date(1997, 4, 8)]
    assert rec.citations[0].id == "US5825759A" and rec.citations[0].category == "examiner"
    assert any("Handegåard" in c.text for c in rec.citations)  # &aring; entity in an undeclared-entity document
    assert rec.inventors == ["Do, Thanh Van"]
    assert rec.applicants == ["Telefonaktiebolaget LM Ericsson (publ)"]


def test_us_pap_2001_fields(us_formats_dir: Path) -> None:
    rec = parse_us((us_formats_dir / "US20010000044A1.xml").read_bytes(), "US20010000044A1.xml")
    assert rec.id == "US20010000044A1" and rec.source == "us-pap"
    assert rec.publication_date == date(2001, 3, 15) and rec.application_date == date(1999, 6, 29)
    assert rec.ipc == ["G06F17/60"]
    assert len(rec.claims["en"]) == 21
    assert rec.claims["en"][1].text.startswith("The method of claim 1, further comprising")
    assert rec.claims["en"][19].refs == [19]
    assert _headings(rec)[:3] == ["Field OF Invention", "Background Of Invention", "Summary of Invention"]
    assert rec.description[0].paragraphs[0].startswith("The present invention relates generally")  # <number> dropped
    assert rec.inventors == ["Lin, Wayne W"]


# ----------------------------------------------------------------------------------------------------------------
# the command on everything


def test_ingest_command_on_all_real_data(shared_data: Path, tmp_path: Path) -> None:
    """Every document of the shared data: patents/ (EP, USPTO), marec/ (MAREC / CLEF-IP) and ops/ (OPS full text)."""
    app = typer.Typer()
    ingest_cmd.register(app)
    app.callback()(lambda: None)
    out = tmp_path / "corpus.jsonl"
    summary = tmp_path / "summary.json"
    roots = [shared_data / "patents", shared_data / "marec", shared_data / "ops"]
    result = CliRunner().invoke(app, ["ingest", *map(str, roots), "-o", str(out), "--json-summary", str(summary)])
    assert result.exit_code == 0, result.output
    data = json.loads(summary.read_text(encoding="utf-8"))
    folders = {Path(k).name: v for k, v in data["read_by_folder"].items()}
    assert folders["ep"] == {"ep": 58}
    assert folders["us"] == {"us-ipg": 421}
    assert sum(folders["us-formats"].values()) == 10
    assert folders["marec"] == {"marec": 170}
    assert folders["ops"] == {"ops": 70}
    assert data["skipped"] == []
    assert data["merged"] == {}  # no publication is in two of the folders
    assert data["unserved"] == {"claims/es": 10, "description/es": 10}
    assert "kept, not indexed (language not served): claims/es: 10, description/es: 10" in result.output
    assert "files with warnings" in result.output
    assert "wrote 729 records" in result.output
    records = list(read_corpus(out))
    assert len(records) == 489 + 170 + 70 == data["records"] == data["written"]
    trilingual = [r for r in records if all(r.claims.get(lang) for lang in TRILINGUAL)]
    assert len(trilingual) == 25 + 75
    assert all(len({len(r.claims[lang]) for lang in TRILINGUAL}) == 1 for r in trilingual)


def test_jsonl_round_trip_on_real_records(ep_dir: Path, us_formats_dir: Path, tmp_path: Path) -> None:
    from training.ingest import ingest

    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    stats1 = ingest([ep_dir, us_formats_dir], first)
    stats2 = ingest([first], second)
    assert stats1.records == stats2.records == 68
    assert stats2.read == {"jsonl": 68}
    assert list(read_corpus(first)) == list(read_corpus(second))
    assert first.read_bytes() == second.read_bytes()
