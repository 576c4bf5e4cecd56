"""TranslationTable: query-time pruning, pass-through, JSON round trip, table lookup in folders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from service.text.translation import TranslationTable, table_path

ENTRIES = {
    "gehaus": {"hous": 0.5, "case": 0.2, "box": 0.15, "enclosur": 0.1, "shell": 0.05},
    "schicht": {"layer": 0.95, "coat": 0.05},
    "fach": {"compart": 0.3, "bay": 0.3, "subject": 0.2, "pocket": 0.2},
}


def test_translate_term_keeps_mass_up_to_cumulative_and_renormalises() -> None:
    table = TranslationTable(ENTRIES, src="de", cumulative=0.8, max_alternatives=5, min_prob=0.0)
    out = table.translate_term("gehaus")
    assert list(out) == ["hous", "case", "box"]  # 0.5 + 0.2 + 0.15 = 0.85 >= 0.8
    assert sum(out.values()) == pytest.approx(1.0)
    assert out["hous"] == pytest.approx(0.5 / 0.85)


def test_translate_term_max_alternatives_and_min_prob() -> None:
    assert list(TranslationTable(ENTRIES, src="de", max_alternatives=2, cumulative=1.0).translate_term("gehaus")) == [
        "hous",
        "case",
    ]
    # min_prob drops coat (0.05 < 0.1) but always keeps the best translation
    assert TranslationTable(ENTRIES, src="de", min_prob=0.1, cumulative=1.0).translate_term("schicht") == {"layer": 1.0}
    # ties are broken by the term, so pruning is deterministic
    assert list(TranslationTable(ENTRIES, src="de", max_alternatives=1).translate_term("fach")) == ["bay"]


def test_unknown_terms_pass_through() -> None:
    table = TranslationTable(ENTRIES, src="de")
    assert table.translate_term("h01f27/14") == {"h01f27/14": 1.0}
    assert table.translate_terms(["so2", "schicht"])[0] == {"so2": 1.0}
    assert "so2" not in table and "schicht" in table and len(table) == 3


def test_save_load_round_trip(tmp_path: Path) -> None:
    table = TranslationTable(ENTRIES, src="de", sources=["freedict", "aligned-claims"])
    path = tmp_path / "sub" / "de-en.json"
    table.save(path)
    loaded = TranslationTable.load(path, max_alternatives=2)
    assert loaded.entries == table.entries
    assert (loaded.src, loaded.tgt, loaded.sources) == ("de", "en", ["freedict", "aligned-claims"])
    assert loaded.max_alternatives == 2
    assert loaded.lookup("gehaus") == table.lookup("gehaus")


def test_load_rejects_other_files(tmp_path: Path) -> None:
    bad = tmp_path / "x.json"
    bad.write_text(json.dumps({"format": "something-else", "version": 1}), encoding="utf-8")
    with pytest.raises(ValueError, match="is not a priorart-translation-table"):
        TranslationTable.load(bad)
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(ValueError, match="cannot read translation table"):
        TranslationTable.load(bad)
    doc = TranslationTable(ENTRIES, src="de").to_json()
    doc["entries"] = {"gehaus": ["hous"]}
    bad.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(ValueError, match="'entries' must map"):
        TranslationTable.load(bad)


def test_bad_pruning_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="max_alternatives=0"):
        TranslationTable(ENTRIES, src="de", max_alternatives=0)
    with pytest.raises(ValueError, match="cumulative=1.5"):
        TranslationTable(ENTRIES, src="de", cumulative=1.5)


def test_table_path_finds_tables_in_folders(tmp_path: Path) -> None:
    table = TranslationTable(ENTRIES, src="de")
    table.save(tmp_path / "tables" / "de-en.json")
    table.save(tmp_path / "index" / "translation" / "de-en.json")
    assert table_path(tmp_path / "tables", "de") == tmp_path / "tables" / "de-en.json"
    assert table_path(tmp_path / "index", "de") == tmp_path / "index" / "translation" / "de-en.json"
    assert table_path(tmp_path / "tables" / "de-en.json", "fr") == tmp_path / "tables" / "de-en.json"
    with pytest.raises(FileNotFoundError, match="no fr-en translation table"):
        table_path(tmp_path / "tables", "fr")
