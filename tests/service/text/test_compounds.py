"""Compound splitting: the splitter's rules, its word-list file, the analyzer's terms, index analysis settings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from service.index.folder import BuildSettings, IndexFormatError
from service.retrieval.resources import Route
from service.text.analysis import Analyzer, normalise, stopwords
from service.text.compounds import ANALYSIS_VERSION, CompoundSplitter, check_analysis, load_analyzers
from service.text.translation import TranslationTable

CORPUS = {
    "hoch": 30,
    "spannung": 12,
    "anordnung": 20,
    "ausdehnung": 3,
    "gefäss": 4,
    "transformator": 9,
    "kessel": 2,
    "kühlmittel": 5,
    "behälter": 7,
    "befestigung": 6,
    "mittel": 15,
    "schwimm": 2,
    "enden": 3,
    "kombination": 4,
    "umlenkrolle": 13,
}
DICTIONARY = {"hochspannung", "kombi", "nation", "kombination", "ente", "lade", "zustand", "rolle", "kühlen"}


@pytest.fixture(scope="module")
def splitter() -> CompoundSplitter:
    return CompoundSplitter(CORPUS, DICTIONARY, lang="de", stop=stopwords("de"))


def test_domain_compounds_split_into_known_parts(splitter: CompoundSplitter) -> None:
    # unknown to the dictionary: split whenever it segments; parts of parts follow their part
    assert splitter.split("hochspannungsanordnung") == ("hochspannung", "hoch", "spannung", "anordnung")
    assert splitter.split(normalise("ausdehnungsgefäß")) == ("ausdehnung", "gefäss")  # linker -s-, ß folded
    assert splitter.split("transformatorkessel") == ("transformator", "kessel")
    assert splitter.split("befestigungsmittels") == ()  # last part must be known as it stands ("mittels" is not)
    assert splitter.split("befestigungsmittel") == ("befestigung", "mittel")


def test_false_splits_are_avoided(splitter: CompoundSplitter) -> None:
    assert splitter.split("kombination") == ()  # a dictionary word whose parts are rarer than itself
    assert splitter.split("schwimmenden") == ()  # "enden" as the last part is an inflection ending
    assert splitter.split("entladezustand") == ()  # "ente" (short, dictionary only) is no part
    assert splitter.split("umlenkrolle") == ()  # "umlenk" is known only as the verb "umlenken", not in the list
    assert splitter.split("unterbindung") == ()  # a stop word is never a part
    assert splitter.split("kühlbehälter") == ("kühlen", "behälter")  # a verb stem restored with -en


def test_fewest_parts_win_and_dictionary_words_split_only_by_frequency() -> None:
    sp = CompoundSplitter({"metall": 2, "met": 50, "all": 50, "manschette": 3}, {"metall"}, lang="de", min_part=3)
    # 2 parts beat met+all+manschette; then the part itself is split again by its own rule (Koehn & Knight for a
    # dictionary word: when the parts' geometric mean beats its own count)
    assert sp.split("metallmanschette") == ("metall", "met", "all", "manschette")
    assert sp.split("metall") == ("met", "all")
    sp2 = CompoundSplitter({"metall": 100, "met": 50, "all": 50}, {"metall"}, lang="de", min_part=3)
    assert sp2.split("metall") == ()


def test_word_list_round_trip_and_bad_files(splitter: CompoundSplitter, tmp_path: Path) -> None:
    path = tmp_path / "compounds-de.json"
    splitter.save(path)
    back = CompoundSplitter.load(path)
    assert back.split("hochspannungsanordnung") == splitter.split("hochspannungsanordnung")
    assert back.settings() == splitter.settings()
    assert "dictionary_stems" in json.loads(path.read_text())  # version 2: the stems are stored, not made at load
    # a version 1 file (no stems) is still read, its stems made at load: the same splitter
    old = {k: v for k, v in json.loads(path.read_text()).items() if k != "dictionary_stems"} | {"version": 1}
    (tmp_path / "v1.json").write_text(json.dumps(old))
    v1 = CompoundSplitter.load(tmp_path / "v1.json")
    assert v1.split("hochspannungsanordnung") == back.split("hochspannungsanordnung")
    assert v1._dict_stems == back._dict_stems
    (tmp_path / "v2-no-stems.json").write_text(json.dumps(old | {"version": 2}))
    with pytest.raises(ValueError, match="dictionary_stems"):
        CompoundSplitter.load(tmp_path / "v2-no-stems.json")
    (tmp_path / "bad.json").write_text(json.dumps({"format": "other"}))
    with pytest.raises(ValueError, match="not a priorart-compounds v1-v2 file"):
        CompoundSplitter.load(tmp_path / "bad.json")
    with pytest.raises(ValueError, match="cannot read compound word list"):
        CompoundSplitter.load(tmp_path / "missing.json")


def test_analyzer_keeps_the_word_and_adds_its_parts(splitter: CompoundSplitter) -> None:
    plain, split = Analyzer("de"), Analyzer("de", splitter=splitter)
    text = "Hochspannungsanordnung mit einem Ausdehnungsgefäß"
    assert plain(text) == ["hochspannungsanordn", "ausdehnungsgefass"]
    assert split(text) == ["hochspannungsanordn", "hochspann", "hoch", "spannung", "anordn",
                           "ausdehnungsgefass", "ausdehn", "gefass"]
    assert split.groups(text) == [
        ("hochspannungsanordn", ("hochspann", "hoch", "spannung", "anordn")),
        ("ausdehnungsgefass", ("ausdehn", "gefass")),
    ]
    with pytest.raises(ValueError, match="cannot analyse en text"):
        Analyzer("en", splitter=splitter)


def test_psq_units_translate_known_compounds_whole_and_unknown_ones_by_parts(splitter: CompoundSplitter) -> None:
    split = Analyzer("de", splitter=splitter)
    groups = split.groups("Hochspannungsanordnung Ausdehnungsgefäß")
    counts = {t: 1 for w, p in groups for t in (w, *p)}
    table = TranslationTable(
        {"ausdehnungsgefass": {"expans": 1.0}, "hoch": {"high": 1.0}, "spannung": {"voltag": 1.0}}, src="de"
    )
    route = Route("en:psq", "en", "psq", table)
    units = {next(iter(m)): w for m, w in route.units(counts, groups)}
    # hochspannungsanordnung is not in the table: its 4 parts share its weight; the known compound stands alone
    assert units == pytest.approx({"hochspann": 0.25, "high": 0.25, "voltag": 0.25, "anordn": 0.25, "expans": 1.0})
    whole_only = {next(iter(m)): w for m, w in route.units(counts, groups, parts=False)}
    assert whole_only == {"hochspannungsanordn": 1.0, "expans": 1.0}


def test_index_analysis_settings_are_checked(splitter: CompoundSplitter, tmp_path: Path) -> None:
    splitter.save(tmp_path / "analysis" / "compounds-de.json")
    good = {"version": ANALYSIS_VERSION, "compounds": {"de": {"file": "analysis/compounds-de.json"}}}
    assert check_analysis(good) == good
    analyzers = load_analyzers(tmp_path, good)
    assert analyzers["de"].splitter is not None and analyzers["de"].splitter.split("transformatorkessel")
    with pytest.raises(ValueError, match="rebuild the index"):
        check_analysis({"version": 99})
    with pytest.raises(ValueError, match="valid: de, fr"):
        check_analysis({"version": ANALYSIS_VERSION, "compounds": {"it": {"file": "x"}}})
    settings = {"fields": ["claims"], "index_langs": ["de"], "scoring": "bm25", "k1": 1.2, "b": 0.75, "epsilon": 0.25}
    assert BuildSettings.from_dict({**settings, "analysis": good}).analysis == good
    with pytest.raises(ValueError, match="version 2"):
        BuildSettings.from_dict({**settings, "analysis": {"version": 2}})


def test_an_index_analysed_by_another_version_is_refused(tmp_path: Path) -> None:
    from service.index.folder import write_meta
    from service.retrieval.first_stage import FirstStage

    (tmp_path / "docs.jsonl").write_text("")
    with pytest.raises(IndexFormatError, match="analysis"):
        write_meta(tmp_path, {"fields": ["claims"], "index_langs": ["de"], "scoring": "bm25", "k1": 1.2, "b": 0.75,
                              "epsilon": 0.25, "analysis": {"version": 0}}, {})
    with pytest.raises(IndexFormatError):
        FirstStage.load(tmp_path)
