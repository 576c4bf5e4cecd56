"""The cross-lingual part of ``priorart build``: directions, pivot composition, build options and report,
routes of every direction, the route merge, compound analysis in the build."""

from __future__ import annotations

import json
import logging
from datetime import date
from pathlib import Path

import pytest
from typer.testing import CliRunner

from service.corpus.jsonl import write_corpus
from service.corpus.record import Claim, PatentRecord
from service.index.folder import load_meta
from service.retrieval.first_stage import FirstStage, attainable_score, reference_score
from service.text.analysis import Analyzer, get_analyzer
from service.text.translation import MixedTable, PivotTable, TranslationTable
from training.build import BuildError, CachedAnalyzer, build_index
from training.translation.compounds import build_splitter
from training.translation.index_step import AlignedCollector, count_words, needed_directions


def _rec(i: int, claims: dict[str, str], lang: str = "en") -> PatentRecord:
    return PatentRecord(
        id=f"EP{i:07d}B1", country="EP", number=f"{i:07d}", kind="B1", source="synth", lang=lang,
        publication_date=date(2000, 1, i), title={k: v.split(",")[0] for k, v in claims.items()},
        claims={k: [Claim(num=1, text=v)] for k, v in claims.items()}, ipc=["H01F27/14"],
    )


TRI = {
    "en": "A transformer with a core, a winding and an expansion vessel for the oil",
    "de": "Transformator mit einem Kern, einer Wicklung und einem Ausdehnungsgefäß für das Öl",
    "fr": "Transformateur avec un noyau, un enroulement et un vase d'expansion pour l'huile",
}
RECORDS = [
    _rec(1, TRI),
    _rec(2, {"en": "A pump with a check valve and a piston for a liquid",
             "de": "Pumpe mit einem Rückschlagventil und einem Kolben für eine Flüssigkeit",
             "fr": "Pompe avec un clapet anti-retour et un piston pour un liquide"}),
    _rec(3, {"de": "Kühlmittelbehälter mit einem Deckel und einem Ventil"}, lang="de"),  # German only
    _rec(4, {"fr": "Transformateur sec avec un noyau et un enroulement en cuivre"}, lang="fr"),  # French only
    _rec(5, {"en": "A spray nozzle with a swirl chamber"}),
]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("xl") / "corpus.jsonl"
    write_corpus(RECORDS, path)
    return path


@pytest.fixture(scope="module")
def index(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A default build, every direction's tables trained (12 s): the tests that use it are marked slow."""
    out = tmp_path_factory.mktemp("xl-index") / "idx"
    build_index(corpus, out, progress=False)
    return out


def test_directions_into_every_indexed_language() -> None:
    direct, pivots = needed_directions(["en", "de", "fr"])
    assert set(direct) == {("de", "en"), ("fr", "en"), ("en", "de"), ("en", "fr"), ("de", "fr"), ("fr", "de")}
    assert set(pivots) == {("de", "fr"), ("fr", "de")}  # trained, and composed through English as well
    direct, pivots = needed_directions(["fr"])  # de -> fr: its own table and the legs de -> en -> fr
    assert set(direct) == {("en", "fr"), ("de", "fr"), ("de", "en")} and pivots == [("de", "fr")]
    assert needed_directions(["en"]) == ([("de", "en"), ("fr", "en")], [])


def test_mixed_table_mixes_a_direct_table_with_the_composition_through_english() -> None:
    de_en = TranslationTable({"kolben": {"piston": 0.75, "flask": 0.25}}, src="de")
    en_fr = TranslationTable({"piston": {"piston": 1.0}, "flask": {"flacon": 1.0}}, src="en", tgt="fr")
    direct = TranslationTable({"kolben": {"piston": 1.0}, "gehause": {"boitier": 0.8, "carter": 0.2}}, src="de",
                              tgt="fr")
    mixed = MixedTable(direct, PivotTable(de_en, en_fr), 0.5)
    assert (mixed.src, mixed.tgt, mixed.hops) == ("de", "fr", 2)  # passages measure it as text two tables away
    assert dict(mixed.lookup("kolben")) == pytest.approx({"piston": 0.875, "flacon": 0.125})
    # a term only one table knows keeps that table's translations; one neither knows passes through
    assert mixed.translate_term("gehause") == pytest.approx({"boitier": 0.8, "carter": 0.2})
    assert mixed.translate_term("(12)") == {"(12)": 1.0} and "gehause" in mixed and "(12)" not in mixed
    with pytest.raises(ValueError, match="cannot mix"):
        MixedTable(direct, de_en)
    with pytest.raises(TypeError):
        mixed.to_json()


def test_pivot_table_composes_two_tables_at_query_time() -> None:
    de_en = TranslationTable({"kolben": {"piston": 0.75, "flask": 0.25}, "zahl": {"seven": 1.0}}, src="de")
    en_fr = TranslationTable({"piston": {"piston": 1.0}, "flask": {"flacon": 0.6, "ballon": 0.4}}, src="en", tgt="fr")
    de_fr = PivotTable(de_en, en_fr)
    assert (de_fr.src, de_fr.tgt, de_fr.sources) == ("de", "fr", ["pivot:en"])
    assert dict(de_fr.lookup("kolben")) == pytest.approx({"piston": 0.75, "flacon": 0.15, "ballon": 0.1})
    assert de_fr.translate_term("zahl") == {"seven": 1.0}  # a pivot term without a row passes through
    assert de_fr.translate_term("(12)") == {"(12)": 1.0} and "kolben" in de_fr and "zahl" in de_fr
    with pytest.raises(ValueError, match="cannot compose"):
        PivotTable(en_fr, de_en)


@pytest.mark.slow
def test_default_build_makes_every_direction_and_reports_it(index: Path) -> None:
    meta = load_meta(index)
    pairs = {(t["src"], t["tgt"]): t for t in meta.components["translation"]}
    assert set(pairs) == {("de", "en"), ("fr", "en"), ("en", "de"), ("en", "fr"), ("de", "fr"), ("fr", "de")}
    assert "aligned-claims" in pairs[("en", "de")]["sources"] and "freedict" in pairs[("de", "en")]["sources"]
    assert "aligned-claims" in pairs[("de", "fr")]["sources"]
    stage = FirstStage.load(index)  # de <-> fr: its own table mixed with the composition through English
    table = stage.pair_tables[("de", "fr")]
    assert isinstance(table, MixedTable) and isinstance(table.b, PivotTable) and set(stage.pair_tables) == set(pairs)
    assert meta.settings.analysis["compounds"]["de"]["file"] == "analysis/compounds-de.json"


@pytest.mark.slow
def test_a_reload_reuses_the_tables_and_compound_lists_it_holds(index: Path) -> None:
    """A second load of the folder (a reload after ``priorart add``) shares the translation tables and compound
    splitters of the engine still loaded (service/filecache.py); a table a writer replaced is read again."""
    import shutil

    first = FirstStage.load(index)
    again = FirstStage.load(index)
    assert again.pair_tables[("de", "en")] is first.pair_tables[("de", "en")]
    assert again.analyzer("de").splitter is first.analyzer("de").splitter is not None
    table = index / next(t["file"] for t in load_meta(index).components["translation"] if t["src"] == "de")
    tmp = table.with_suffix(".new")
    shutil.copyfile(table, tmp)
    tmp.replace(table)  # the same content in a new file (a writer's replace): read again, not taken for the old one
    other = FirstStage.load(index)
    assert other.pair_tables[("de", "en")] is not first.pair_tables[("de", "en")]
    assert other.pair_tables[("de", "en")].entries == first.pair_tables[("de", "en")].entries


@pytest.mark.slow
def test_english_query_reaches_german_and_french_only_documents(index: Path) -> None:
    stage = FirstStage.load(index)
    res = stage.search("coolant tank with a lid and a valve", lang="en", k=5)
    assert [r.name for r in res.info.routes] == ["en", "de:psq", "fr:psq"]
    assert {r.table for r in res.info.routes if r.table} == {"en-de", "en-fr"}
    assert res.hits[0].doc_id == "EP0000003B1" and res.hits[0].route == "de:psq"
    res = stage.search("transformer with a core and a winding", lang="en", k=5)
    by_id = {h.doc_id: h for h in res.hits}
    assert by_id["EP0000001B1"].route in ("en", "de:psq", "fr:psq") and by_id["EP0000004B1"].route == "fr:psq"
    for h in res.hits:  # one scale: the fraction of the query's reference score in the winning route
        assert h.score > 0 and h.route in h.route_scores


@pytest.mark.slow
def test_german_query_reaches_french_only_documents_through_its_table_and_english(index: Path) -> None:
    stage = FirstStage.load(index)
    res = stage.search("Transformator mit Kern und Wicklung", lang="de", k=5)
    assert {r.name: r.table for r in res.info.routes} == {"de": None, "en:psq": "de-en", "fr:psq": "de-fr + via en"}
    assert res.hits[0].doc_id == "EP0000001B1"
    fr_hit = next(h for h in res.hits if h.doc_id == "EP0000004B1")
    assert fr_hit.route == "fr:psq"


def test_route_merge_scales() -> None:
    from service.retrieval.sparse import SparseIndex

    idx = SparseIndex.build([["valv", "pump"], ["valv"], ["nozzl"], ["pump", "pump"], ["seal"], ["ring"], ["cap"]])
    mono = [({"valv": 1.0}, 1.0), ({"pump": 1.0}, 1.0)]
    spread = [({"valv": 0.5, "nozzl": 0.5}, 1.0), ({"pump": 1.0}, 1.0)]
    idf_valv, idf_pump = idx.unit_idf({"valv": 1.0}), idx.unit_idf({"pump": 1.0})
    assert attainable_score(idx, mono) == pytest.approx((idx.k1 + 1) * (idf_valv + idf_pump))
    # the reference is a document holding each unit's best translation once: spread translations lower it
    assert reference_score(idx, spread) < reference_score(idx, mono)
    missing = [({"zzz": 1.0}, 1.0)]  # a unit that matches nothing counts as a miss with a rare term's idf
    assert reference_score(idx, missing) == pytest.approx(idx.idf_of(1.0))


@pytest.mark.slow
def test_no_translation_and_reused_tables(corpus: Path, tmp_path: Path) -> None:
    report = build_index(corpus, tmp_path / "plain", translation=False, compounds="", progress=False)
    assert report.translation == [] and report.translation_report["mode"] == "off"
    meta = load_meta(tmp_path / "plain")
    assert meta.settings.analysis is None and meta.components["translation"] == []
    res = FirstStage.load(tmp_path / "plain").search("coolant tank", lang="en")
    assert [r.name for r in res.info.routes] == ["en"] and any("en-de" in n for n in res.info.notes)
    tables = tmp_path / "tables"
    de, en = get_analyzer("de"), get_analyzer("en")
    TranslationTable({en("lid")[0]: {de("Deckel")[0]: 1.0}}, src="en", tgt="de").save(tables / "en-de.json")
    TranslationTable({en("lid")[0]: {"x": 1.0}}, src="en", tgt="it").save(tables / "en-it.json")
    with pytest.raises(BuildError, match="expected two different languages"):
        build_index(corpus, tmp_path / "bad", translation_dir=tables, progress=False)
    (tables / "en-it.json").unlink()
    report = build_index(corpus, tmp_path / "reused", index_langs="en,de", translation_dir=tables, progress=False)
    assert report.translation == ["translation/en-de.json"] and report.translation_report["mode"] == "reused"
    hit = FirstStage.load(tmp_path / "reused").search("lid", lang="en").hits[0]
    assert hit.doc_id == "EP0000003B1" and hit.route == "de:psq"
    with pytest.raises(BuildError, match="compound language"):
        build_index(corpus, tmp_path / "x", compounds="it", progress=False)


def test_missing_lexicons_fall_back_to_aligned_claims_with_a_warning(
    corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, own_cache: Path
) -> None:
    import dataclasses

    from training.translation import lexicons
    from training.translation.dictionary import LexiconNotFoundError

    def absent(*args: object) -> dict[str, dict[str, float]]:
        raise LexiconNotFoundError("not installed")

    for name in ("freedict", "pivot"):  # the pivot composes FreeDict's files: absent with them
        monkeypatch.setitem(lexicons.SOURCES, name, dataclasses.replace(lexicons.SOURCES[name], table=absent))
    with caplog.at_level(logging.WARNING):
        report = build_index(corpus, tmp_path / "idx", compounds="", progress=False)
    warnings = report.translation_report["warnings"]
    assert any("FreeDict de-en lexicon not installed" in w and "aligned claims only" in w for w in warnings)
    assert report.translation_report["directions"]["en-de"]["sources"][0] == "aligned-claims"
    assert "freedict" not in report.translation_report["directions"]["en-de"]["sources"]


@pytest.mark.slow
def test_cli_build_prints_what_was_used(corpus: Path, tmp_path: Path) -> None:
    from training.cli import app

    res = CliRunner().invoke(app, ["build", str(corpus), "-o", str(tmp_path / "i"), "--no-progress"])
    assert res.exit_code == 0, res.output
    assert "translation: built from" in res.output and "en-de:" in res.output and "de-fr: " in res.output
    assert "compounds (de)" in res.output
    res = CliRunner().invoke(app, ["build", str(corpus), "-o", str(tmp_path / "j"), "--no-translation",
                                   "--compounds", "", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["translation_report"]["mode"] == "off"


def test_word_counts_from_json_lines_equal_those_from_records(corpus: Path) -> None:
    from_file = count_words(corpus, ["de", "fr"])
    from_records = count_words(RECORDS, ["de", "fr"])
    assert from_file == from_records and from_file["de"]["kolben"] == 2  # title and claim
    held = count_words(corpus, ["de"], exclude_ids={"EP0000002B1"})
    assert held["de"]["kolben"] == 1 and held["de"]["transformator"] == 2  # its title still counts, not its claim


def test_aligned_collector_keeps_multilingual_records_up_to_its_cap() -> None:
    col = AlignedCollector(cap=1, seed=0)
    for rec in RECORDS:
        col.add(rec)
    assert col.seen == 2 and len(col.records) == 1 and col.records[0].description == []


def test_cached_analyzer_with_a_splitter_equals_the_analyzer() -> None:
    analyzer = Analyzer("de", splitter=build_splitter(RECORDS, "de", use_dict=False))
    cached = CachedAnalyzer(analyzer)
    for rec in RECORDS:
        text = rec.text("de")
        assert cached(text) == analyzer(text)
        assert cached(text) == analyzer(text)  # second time from the memo
