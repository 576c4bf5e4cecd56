"""The MAREC / CLEF-IP and OPS full-text readers on every file of ../shared/data/marec and ../shared/data/ops.

Field-level facts below were read from the XML files themselves. The shared data holds no publication twice
(checked with :func:`training.ingest.merge.publication_key` over the ids of patents/, marec/ and ops/), so the
merge tests at the end pair a real file with a hand-written second source of the same publication.
"""

from __future__ import annotations

import re
from collections import Counter
from datetime import date
from pathlib import Path

import pytest

from service.corpus.jsonl import read_corpus
from service.corpus.record import PatentRecord
from training.ingest import IngestStats, ingest, iter_records, publication_key, shared_records

pytestmark = pytest.mark.realdata

TRILINGUAL = ("en", "de", "fr")


@pytest.fixture(scope="module")
def marec_dir(shared_data: Path) -> Path:
    path = shared_data / "marec"
    if not path.is_dir():
        pytest.skip(f"no MAREC folder at {path}")
    return path


@pytest.fixture(scope="module")
def ops_dir(shared_data: Path) -> Path:
    path = shared_data / "ops"
    if not path.is_dir():
        pytest.skip(f"no OPS folder at {path}")
    return path


@pytest.fixture(scope="module")
def marec(marec_dir: Path) -> tuple[dict[str, PatentRecord], IngestStats]:
    stats = IngestStats()
    records = list(iter_records([marec_dir], stats))
    by_id = {r.id: r for r in records}
    assert len(by_id) == len(records)
    return by_id, stats


@pytest.fixture(scope="module")
def ops(ops_dir: Path) -> tuple[dict[str, PatentRecord], IngestStats]:
    stats = IngestStats()
    records = list(iter_records([ops_dir], stats))
    by_id = {r.id: r for r in records}
    assert len(by_id) == len(records)
    return by_id, stats


def _headings(rec: PatentRecord) -> list[str]:
    return [path[-1] for section in rec.description for path, _ in section.walk() if path]


# ----------------------------------------------------------------------------------------------------------------
# MAREC


def test_every_marec_file_gives_one_record_with_its_id(
    marec_dir: Path, marec: tuple[dict[str, PatentRecord], IngestStats]
) -> None:
    records, stats = marec
    files = sorted(marec_dir.glob("*.xml"))
    assert len(files) == 170 and stats.files == 170
    assert not stats.skipped and stats.files_by_format == {"marec": 170}
    assert all(stats.read_by_file[str(f)] == 1 for f in files)
    # file names: EP-1116605-B1.xml (ucid), WO2006000598NWA1.xml (OCR layout: 'NW' before the kind)
    expected = sorted(re.sub(r"NW(?=A\d$)", "", f.stem.replace("-", "")) for f in files)
    assert sorted(records) == expected
    assert Counter(r.country for r in records.values()) == {"EP": 84, "US": 38, "WO": 48}
    assert all(r.source == "marec" and r.publication_date for r in records.values())


def test_marec_grants_have_three_aligned_claim_languages(marec: tuple[dict[str, PatentRecord], IngestStats]) -> None:
    records = marec[0]
    grants = [r for r in records.values() if r.kind == "B1"]
    assert len(grants) == 75
    total = agree = 0
    for rec in grants:
        assert set(rec.claims) == set(TRILINGUAL), rec.id
        n = len(rec.claims["en"])
        for lang in TRILINGUAL:  # claim num="xx": numbered by their order
            assert [c.num for c in rec.claims[lang]] == list(range(1, n + 1)), (rec.id, lang)
        for en, de, fr in zip(rec.claims["en"], rec.claims["de"], rec.claims["fr"], strict=True):
            total += 1
            agree += en.refs == de.refs == fr.refs
    assert total == 941
    # the rest: translations that differ ("claims 1 to 14" vs "revendications 1 à 10") or refs in words
    assert agree >= 920
    assert Counter(r.lang for r in grants) == {"en": 42, "de": 24, "fr": 9}
    assert all(r.doc_type == "grant" and set(r.title) == set(TRILINGUAL) for r in grants)


def test_marec_ep_grant_fields(marec: tuple[dict[str, PatentRecord], IngestStats]) -> None:
    rec = marec[0]["EP1116605B1"]
    assert (rec.country, rec.number, rec.kind, rec.lang) == ("EP", "1116605", "B1", "en")
    assert rec.publication_date == date(2005, 6, 22) and rec.application_date == date(2001, 1, 12)
    assert rec.priority_ids == ["JP2000005637", "JP2000005638"] and rec.priority_dates == [date(2000, 1, 14)]
    assert rec.title["de"] == "Luftreifen mit verbesserter Haltbarkeit der Wülste"
    assert rec.title["en"] == "Pneumatic tire, having improved bead portion durability"
    assert rec.ipc == ["B60C15/00", "B60C15/06"]
    assert rec.ecla == ["B60C15/00D2", "B60C15/06"] and rec.cpc == ["B60C15/00", "B60C15/06"]
    assert rec.applicants == ["BRIDGESTONE CORPORATION"]  # the intermediate rendering, not EPO's 'BRIDGESTONE CORP'
    assert rec.inventors == ["KATO, HIROYUKI", "KIMURA, TAKAHIRO"]
    assert [len(rec.claims[lang]) for lang in TRILINGUAL] == [3, 3, 3]
    assert rec.claims["de"][1].text.startswith("Luftreifen nach Anspruch 1, dadurch gekennzeichnet")
    assert [c.refs for c in rec.claims["fr"]] == [[], [1], [2]]
    assert rec.abstract["en"].endswith("said normal line (n).")  # the '<IMAGE>' placeholder removed
    assert rec.description[0].paragraphs[0].startswith("This invention relates to pneumatic tires")


def test_marec_ep_application_citations(marec: tuple[dict[str, PatentRecord], IngestStats]) -> None:
    rec = marec[0]["EP1510162A2"]
    cats = {c.id: c.category for c in rec.citations}
    assert cats == {"DE8807534U1": "applicant", "EP0480857A2": "A", "EP1026978A1": "E", "GB2230409A": "X",
                    "US4959517A": "X"}
    assert rec.doc_type == "application" and set(rec.claims) == {"en"} and len(rec.claims["en"]) == 19
    assert rec.claims["en"][2].refs == [1, 2]  # "A method according to Claim 1 or 2"


def test_marec_us_application_fields(marec: tuple[dict[str, PatentRecord], IngestStats]) -> None:
    rec = marec[0]["US20030000393A1"]
    assert rec.doc_type == "utility" and rec.family_id == "8846250"
    assert rec.title == {"en": "Unit for making beverages by brewing and machine incorporating same"}
    assert rec.priority_ids == ["FR0000880", "FR0003734"]
    assert rec.ipc[:2] == ["A47J31/24", "A47J31/36"] and "A23F3/00" in rec.ipc  # IPC-R, then IPC 7
    assert rec.ecla == ["A47J31/36A2B"] and rec.cpc == ["A47J31/36"]
    assert rec.inventors == ["Levi, Jean-Pierre", "Levi, Mario"]  # the 'original' rendering
    claims = rec.claims["en"]
    assert len(claims) == 17 and claims[0].text.startswith("Unit for the brewing of beverages")  # '1.' removed
    assert claims[1].refs == [1]  # <claim-ref idref="US-20030000393-A1-CLM-00001">
    first = rec.description[0].paragraphs[0]
    assert first == "The present invention concerns a unit for making beverages by brewing of a dose of product " \
        "to be brewed."  # '[0001]' removed


def test_marec_wo_ocr_claims_are_split(marec: tuple[dict[str, PatentRecord], IngestStats]) -> None:
    rec = marec[0]["WO1995010060A1"]  # one <claim> of 'CLAIMS', '1. Near-field ...', ... '14. ...'
    claims = rec.claims["en"]
    assert [c.num for c in claims] == list(range(1, 15))
    assert claims[0].text.startswith("Near-field optical microscope comprising:")
    assert claims[5].text.startswith("Microscope in accordance with claim 1")  # claim 6 shared a line with 5
    assert claims[4].text.endswith("towards the light detecting means.")
    assert rec.title == {"en": "NEAR-FIELD OPTICAL MICROSCOPE", "fr": "MICROSCOPE OPTIQUE EN CHAMP PROCHE"}
    assert rec.priority_ids == ["EP9302713"] and rec.family_id == "8165773"
    assert {c.id for c in rec.citations if c.id} == {"EP0426559A1", "EP0426571A1", "FR2685789A1", "JP5203879A"}
    assert "Y01N10/00" in rec.ecla and "Y01N10/00" not in rec.cpc  # ICO indexing codes are no CPC codes
    assert _headings(rec)[:2] == ["DESCRIPTION", "BACKGROUND OF THE INVENTION"]  # capitalised lines
    wo = [r for r in marec[0].values() if r.country == "WO"]
    split = [r for r in wo if r.claims and len(next(iter(r.claims.values()))) > 1]
    assert len(split) >= 40  # OCR defeats a few ('1 A process', 'Claim 1 A process', 'I a .- Válvula')


def test_marec_preformatted_description(marec: tuple[dict[str, PatentRecord], IngestStats]) -> None:
    rec = marec[0]["WO2008070014A2"]  # the description is one <pre> block
    assert _headings(rec)[:3] == ["BIARYL KETONE-SUBSTITUTED PIPERIDINES", "CROSS-REFERENCE TO RELATED APPLICATIONS",
                                  "FIELD OF THE INVENTION"]
    assert len(rec.claims["en"]) == 71
    assert all("<EMI" not in c.text for c in rec.claims["en"])  # formula placeholders removed


def test_marec_spanish_text_is_kept_and_reported(marec: tuple[dict[str, PatentRecord], IngestStats]) -> None:
    records, stats = marec
    rec = records["WO2006000598A1"]  # OCR layout, no bibliographic data
    assert rec.lang == "es" and rec.publication_date == date(2006, 1, 5)
    assert [c.num for c in rec.claims["es"]] == [1, 2, 3, 4]
    assert rec.claims["es"][0].text.startswith("Sistema para protección de alimentos o bebidas en envases abiertos")
    # "de acuerdo con las reivindicaciones primera a tercera"
    assert [c.refs for c in rec.claims["es"]] == [[], [1], [1, 2], [1, 2, 3]]
    assert rec.description_text().startswith("SISTEMA. PARA PROTECCIÓN DE ALIMENTOS")
    spanish = sorted(r.id for r in records.values() if "es" in r.claims)
    assert len(spanish) == 10 and all(r.startswith("WO") for r in spanish)
    assert stats.unserved == {"claims/es": 10, "description/es": 10}
    assert stats.claim_langs["es"] == 10


# ----------------------------------------------------------------------------------------------------------------
# OPS


def test_every_ops_file_gives_one_record(ops_dir: Path, ops: tuple[dict[str, PatentRecord], IngestStats]) -> None:
    records, stats = ops
    files = sorted(ops_dir.glob("*.xml"))
    assert len(files) == 70 and not stats.skipped and stats.files_by_format == {"ops": 70}
    assert all(stats.read_by_file[str(f)] == 1 for f in files)
    assert len(records) == 70  # one id each (the fixture checks they are unique)
    for f in files:  # EP1063298.xml holds EP1063298A2: the file name may lack the kind
        assert sum(rid.startswith(f.stem) for rid in records) >= 1, f.name
    assert Counter(r.country for r in records.values()) == {"EP": 14, "US": 6, "WO": 50}
    for rec in records.values():
        assert rec.source == "ops" and rec.lang == "en" and rec.claims == {}, rec.id
        assert len(rec.description_text()) > 1000, rec.id


def test_ops_fields(ops: tuple[dict[str, PatentRecord], IngestStats]) -> None:
    rec = ops[0]["EP1063298A2"]
    assert rec.doc_type == "application"
    assert _headings(rec)[:5] == ["Field of Invention", "Background of Invention", "Summary of Invention",
                                  "Brief Description of Drawings", "Detailed Description of Invention"]
    assert rec.description[0].paragraphs[0].startswith(
        "The present invention relates to an animal model of the amyloidosis")  # '[0001]' removed
    assert "WO0100832A1" in ops[0] and publication_key("WO0100832A1") == "WO2001000832A1"


# ----------------------------------------------------------------------------------------------------------------
# everything, and the same publication from two sources


def test_shared_records_all_folders(shared_data: Path) -> None:
    stats = IngestStats()
    records = shared_records(shared_data, folders="all", stats=stats)
    assert len(records) == 489 + 170 + 70 and not stats.skipped and stats.merged == {}
    assert Counter(r.source for r in records)["marec"] == 170
    assert len(shared_records(shared_data)) == 58 + 421  # the default: what the experiments read


def _ep_bibliographic(number: str, kind: str, titles: dict[str, str], ipcr: str, cited: str) -> str:
    """A bibliographic-only EPO publication-server document (the ep-bulletin layout of patents/ep)."""
    b540 = "".join(f"<B541>{lang}</B541><B542>{text}</B542>" for lang, text in titles.items())
    return (
        f'<?xml version="1.0" encoding="UTF-8"?><ep-patent-document lang="en" country="EP" doc-number="{number}" '
        f'kind="{kind}" date-publ="20050622"><SDOBI lang="en"><B100><B110>{number}</B110><B130>{kind}</B130>'
        f"<B140><date>20050622</date></B140><B190>EP</B190></B100><B200><B220><date>20010112</date></B220>"
        f"<B260>en</B260></B200><B500><B510EP><classification-ipcr><text>{ipcr}</text></classification-ipcr>"
        f"</B510EP><B540>{b540}</B540><B560><B561><text>{cited}</text></B561></B560></B500>"
        f"<B700><B730><B731><snm>Bridgestone Corporation</snm></B731></B730></B700></SDOBI></ep-patent-document>"
    )


def test_ep_grant_from_epo_xml_and_marec_is_one_record(marec_dir: Path, tmp_path: Path) -> None:
    """The real MAREC EP-1116605-B1 beside an EPO publication-server file of the same grant: one record."""
    epo = tmp_path / "ep" / "EP1116605B1.xml"
    epo.parent.mkdir()
    epo.write_text(_ep_bibliographic("1116605", "B1", {"en": "PNEUMATIC TIRE"}, "B60C 9/02 20060101ALI20051008",
                                     "EP-A- 0 997 325"), encoding="utf-8")
    out = tmp_path / "corpus.jsonl"
    stats = ingest([epo, marec_dir / "EP-1116605-B1.xml"], out)
    assert stats.records == 2 and stats.written == 1 and stats.merged == {"EP1116605B1": ["ep", "marec"]}
    (rec,) = read_corpus(out)
    assert rec.id == "EP1116605B1" and rec.source == "ep"
    assert rec.title["en"] == "PNEUMATIC TIRE" and rec.title["de"].startswith("Luftreifen")
    assert {lang: len(c) for lang, c in rec.claims.items()} == {"de": 3, "en": 3, "fr": 3}
    assert rec.ipc == ["B60C9/02", "B60C15/00", "B60C15/06"] and rec.ecla == ["B60C15/00D2", "B60C15/06"]
    assert [c.id for c in rec.citations] == ["EP0997325A"]
    assert rec.applicants == ["Bridgestone Corporation"]  # the whole list from the better-ranked source
    assert rec.inventors == ["KATO, HIROYUKI", "KIMURA, TAKAHIRO"]
    assert rec.provenance["title.en"] == "ep" and rec.provenance["title.de"] == "marec"
    assert rec.provenance["claims.de"] == "marec" and rec.provenance["description"] == "marec"
    assert rec.provenance["ipc"] == "ep+marec" and rec.provenance["citations"] == "ep"
    assert rec.provenance["priority_ids"] == "marec" and rec.priority_ids == ["JP2000005637", "JP2000005638"]


def test_priorart_add_of_a_folder_with_one_publication_in_two_files_adds_one_merged_record(
        marec_dir: Path, tmp_path: Path) -> None:
    """``priorart add INDEX FOLDER`` where the folder holds the EPO file and the MAREC file of one grant: one record
    added, merged as ``priorart ingest`` merges them, and said (it failed before: the publication came twice in the
    batch, nothing added)."""
    import shutil

    from typer.testing import CliRunner

    from service.index.folder import IndexFolder
    from service.index.store import DocStore
    from training.build import build_index
    from training.cli import app
    from training.synth import generate

    index = tmp_path / "index"
    build_index(list(generate(12, seed=4)), index, translation=False, compounds="", progress=False)
    week = tmp_path / "week"
    (week / "ep").mkdir(parents=True)
    epo = _ep_bibliographic("1116605", "B1", {"en": "PNEUMATIC TIRE"}, "B60C 9/02 20060101ALI20051008",
                            "EP-A- 0 997 325")
    (week / "ep" / "EP1116605B1.xml").write_text(epo, encoding="utf-8")
    (week / "marec").mkdir()
    shutil.copy(marec_dir / "EP-1116605-B1.xml", week / "marec")
    res = CliRunner().invoke(app, ["add", str(index), str(week), "--json", "--no-progress", "--no-watches"])
    assert res.exit_code == 0, res.output
    assert "EP1116605B1: in 2 files (ep, marec), merged into one record" in res.stderr
    docs = DocStore.of_folder(IndexFolder.open(index))
    try:
        assert len(docs) == 13
        rec = docs.get("EP1116605B1")
        assert rec.title["en"] == "PNEUMATIC TIRE" and rec.title["de"].startswith("Luftreifen")
        assert {lang: len(c) for lang, c in rec.claims.items()} == {"de": 3, "en": 3, "fr": 3}
    finally:
        docs.close()


def test_ops_full_text_joins_a_bibliographic_ep_record(ep_dir: Path, tmp_path: Path) -> None:
    """The real EP1605745A1 (ep-bulletin: title and IPC, no text) and an OPS full text of it: one record."""
    ops_file = tmp_path / "EP1605745.xml"
    ops_file.write_text(
        '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<?xml-stylesheet type="text/xsl" href="a.xsl"?>\n'
        '<fulltext-document system="ops.epo.org" fulltext-format="text-only" xmlns="http://www.epo.org/fulltext">'
        "<bibliographic-data><publication-reference data-format=\"docdb\"><document-id><country>EP</country>"
        "<doc-number>1605745</doc-number><kind>A1</kind></document-id></publication-reference></bibliographic-data>"
        '<description lang="FR"><p>Domaine technique</p><p>[0001] La présente invention concerne un dispositif '
        "pour le remplissage des trous de carottage.</p><p>[0002] Le dispositif comprend une trémie.</p>"
        "</description></fulltext-document>",
        encoding="utf-8",
    )
    stats = IngestStats()
    records = [r for r in iter_records([ep_dir / "EP1605745A1.xml", ops_file], stats)]
    assert [r.source for r in records] == ["ep", "ops"] and not stats.skipped
    from training.ingest import merge_all

    (rec,), merged = merge_all(records)
    assert merged == {"EP1605745A1": ["ep", "ops"]}
    assert rec.title["en"] == "DEVICE FOR FILLING CARROTING HOLES IN A LAWN" and rec.ipc == ["A01B45/00"]
    assert rec.lang == "fr" and rec.description[0].heading == "Domaine technique"
    assert rec.description[0].paragraphs == [
        "La présente invention concerne un dispositif pour le remplissage des trous de carottage.",
        "Le dispositif comprend une trémie.",
    ]
    assert rec.provenance["description"] == "ops" and rec.provenance["title.en"] == "ep"
    assert rec.provenance["ipc"] == "ep" and rec.provenance["lang"] == "ops"
