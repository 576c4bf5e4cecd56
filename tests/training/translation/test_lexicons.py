"""Lexicon sources: the Ding (``trans-de-en``) parser and tables, the registry that combines it with FreeDict,
the splitter's dictionary words and the build's lexicon choice and report."""

from __future__ import annotations

import logging
from datetime import date
from pathlib import Path

import pytest

from service.corpus.record import Claim, PatentRecord
from service.text.analysis import get_analyzer
from training.translation.compounds import splitter_from_counts
from training.translation.dictionary import LexiconNotFoundError
from training.translation.ding import (
    DingEntry,
    cached_ding_table,
    ding_entries_table,
    ding_headwords,
    ding_table,
    parse_line,
)
from training.translation.index_step import TranslationBuildError, TranslationOptions, build_index_tables
from training.translation.lexicons import combine, dictionary_headwords, load_lexicon, parse_lexicons

DING = """\
# Version :: devel 2023-01-30
# Copyright (c) :: Frank Richter <frank.richter.tu-chemnitz.de>,
Gehäuse {n}; Umhüllung {f} [techn.] | Gehäuse {pl}; Umhüllungen {pl} | Metallgehäuse {n} | robustes Gehäuse :: \
case; casing box; housing; chassis; cladding | cases; casing boxes; housings; chassis; claddings | metal casing | \
strong housing
Gehäuse {n}; Kasten {m} | Gehäuse {pl}; Kästen {pl} :: cabinet | cabinets
Antiblockiersystem {n} /ABS/ [auto] :: anti-lock braking system /ABS/
drehen {vt} | drehend | etw. um … Grad drehen [math.] :: to turn | turning | to turn sth. by … degree
Drehmoment… :: torsional; torquing {adj}
Armenrecht {n} [jur.] ~Prozesskostenhilfe :: in forma pauperis /IFP/ ~legal aid
Kolben {m} | Kolben {pl} :: piston | pistons | flasks
"""

en, de = get_analyzer("en"), get_analyzer("de")


def E(word: str) -> str:  # noqa: N802 - the English index term of a word
    return en(word)[0]


def D(word: str) -> str:  # noqa: N802 - the German index term of a word
    return de(word)[0]


@pytest.fixture()
def trans_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "trans"
    folder.mkdir()
    (folder / "de-en").write_text(DING, encoding="utf-8")
    return folder


@pytest.fixture(autouse=True)
def _private_cache(own_cache: Path) -> None:
    """Each test's lexicons parsed into a cache of its own (tests/conftest.py ``own_cache``)."""


# ----------------------------------------------------------------------------- Ding format


def test_parse_line_aligns_subentries_and_strips_marks() -> None:
    lines = DING.splitlines()
    assert parse_line(lines[0]) is None and parse_line("") is None  # comments, blank lines
    entry = parse_line(lines[2])
    assert entry == DingEntry((
        (("Gehäuse", "Umhüllung"), ("case", "casing box", "housing", "chassis", "cladding")),
        (("Gehäuse", "Umhüllungen"), ("cases", "casing boxes", "housings", "chassis", "claddings")),
        (("Metallgehäuse",), ("metal casing",)),
        (("robustes Gehäuse",), ("strong housing",)),
    ))
    assert list(entry.side("en"))[2] == (("metal casing",), ("Metallgehäuse",))
    # abbreviations /ABS/ and see-also references ~Wort go; "er/sie" style slashes inside words stay
    assert parse_line(lines[4]) == DingEntry(((("Antiblockiersystem",), ("anti-lock braking system",)),))
    assert parse_line(lines[7]) == DingEntry(((("Armenrecht",), ("in forma pauperis",)),))
    assert parse_line("er/sie dreht :: he/she turns") == DingEntry(((("er/sie dreht",), ("he/she turns",)),))
    assert parse_line(lines[8]) is None  # 2 German sub-entries, 3 English ones: cannot be aligned
    assert parse_line("Wort ohne Übersetzung") is None


def test_ding_table_german_to_english() -> None:
    table = ding_entries_table(DING.splitlines(), "de", "en")
    # line 1 is one sense of "Gehäuse" (singular and plural sub-entries share it): case, housing, chassis,
    # cladding (the multi-word "casing box" is dropped: the sense has single words); line 2 a second: cabinet
    one = 0.5 / 4
    assert table[D("Gehäuse")] == pytest.approx(
        {E("case"): one, E("housing"): one, E("chassis"): one, E("cladding"): one, E("cabinet"): 0.5})
    assert table[D("Umhüllung")] == pytest.approx({E(w): 0.25 for w in ("case", "housing", "chassis", "cladding")})
    assert table[D("Metallgehäuse")] == {E("casing"): 1.0}  # only a multi-word translation: its head
    assert table[D("Antiblockiersystem")] == {E("system"): 1.0}
    assert table[D("drehen")] == {E("turn"): 1.0}  # "to turn", "turning": one sense, one term
    assert D("robustes") not in table and D("Drehmoment") not in table  # phrases and affixes are no headwords
    assert D("Kolben") not in table  # its line cannot be aligned
    for row in table.values():
        assert sum(row.values()) == pytest.approx(1.0)
    only = ding_entries_table(DING.splitlines(), "de", "en", only={D("Kasten")})
    assert only == {D("Kasten"): {E("cabinet"): 1.0}}


def test_ding_table_english_to_german_reads_the_lines_the_other_way() -> None:
    table = ding_entries_table(DING.splitlines(), "en", "de")
    assert table[E("housing")] == pytest.approx({D("Gehäuse"): 0.5, D("Umhüllung"): 0.5})
    assert table[E("cabinet")] == pytest.approx({D("Gehäuse"): 0.5, D("Kasten"): 0.5})
    # "to turn" ("to" is a stop word) and "turning" are both "turn": one sense, the terms of both sub-entries
    assert table[E("turn")] == pytest.approx({D("drehen"): 0.5, D("drehend"): 0.5})
    assert all(D("Metallgehäuse") not in row for row in table.values())  # "metal casing": a phrase
    assert E("system") not in table
    with pytest.raises(ValueError, match="no fr-en direction; choose one of de-en, en-de"):
        ding_entries_table([], "fr", "en")


def test_ding_file_missing_raises_and_cache_is_used(trans_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(LexiconNotFoundError, match="install trans-de-en"):
        ding_table("de", trans_dir=tmp_path / "nowhere")
    first = cached_ding_table("de", trans_dir=trans_dir)
    assert first == ding_table("de", trans_dir=trans_dir, progress=False)
    assert [p.name.startswith("ding-de-en-") for p in (tmp_path / "cache" / "lexicons").iterdir()] == [True]
    assert cached_ding_table("de", trans_dir=trans_dir) == first  # read back from the cache


def test_ding_headwords_are_single_words_of_one_side(trans_dir: Path) -> None:
    words = ding_headwords("de", trans_dir)
    assert {"gehäuse", "umhüllung", "umhüllungen", "metallgehäuse", "kasten", "antiblockiersystem"} <= words
    assert "robustes gehäuse" not in words and "drehmoment…" not in words and "case" not in words
    assert "housing" in ding_headwords("en", trans_dir)


# ----------------------------------------------------------------------------- registry and combination


def test_combine_averages_rows_where_several_tables_know_a_term() -> None:
    a = {"gehaus": {"hous": 1.0}, "stahl": {"steel": 1.0}}
    b = {"gehaus": {"hous": 0.5, "case": 0.5}, "fach": {"compart": 1.0}}
    out = combine([a, b])
    assert out["gehaus"] == pytest.approx({"hous": 0.75, "case": 0.25})
    assert out["stahl"] == {"steel": 1.0} and out["fach"] == {"compart": 1.0}
    assert combine([a]) == a and combine([]) == {}


def test_pivot_composes_the_english_german_lexicon_with_the_german_french_one(tmp_path: Path) -> None:
    """The ``pivot`` source: en -> de -> fr (p(f|e) = sum_d p(d|e) p(f|d)); a German word the second leg does not
    know is dropped (never passed through as a French term); a missing leg is a warning naming both packages."""
    from training.translation.lexicons import compose

    en_de = {"tank": {"behalt": 0.5, "wann": 0.5}, "screw": {"schraub": 1.0}, "rare": {"selt": 1.0}}
    de_fr = {"behalt": {"reservoir": 0.6, "cuv": 0.4}, "wann": {"bac": 1.0}, "schraub": {"vis": 1.0}}
    out = compose(en_de, de_fr, src="en", tgt="fr")
    assert out == {"tank": pytest.approx({"reservoir": 0.3, "cuv": 0.2, "bac": 0.5}), "screw": {"vis": 1.0}}
    assert "rare" not in out  # "selt" is no French word
    none = load_lexicon("en", "fr", dirs={"freedict": tmp_path / "none"})  # the pivot reads FreeDict's folder
    assert none.entries is None and none.warnings[1] == (
        "FreeDict through German en-fr lexicon not installed (dict-freedict-eng-deu and dict-freedict-deu-fra, "
        "scripts/setup.sh)")
    assert load_lexicon("fr", "en", ("pivot",)).sources == []  # French -> English: FreeDict's own only


@pytest.mark.slow  # parses FreeDict's en-de lexicon (188k entries) when the cache is cold
@pytest.mark.skipif(not Path("/usr/share/dictd/freedict-deu-fra.index").is_file(),
                    reason="FreeDict's en-de / de-fr lexicons absent (scripts/setup.sh)")
def test_the_default_english_french_table_adds_the_pivot_to_freedicts_own() -> None:
    own, both = load_lexicon("en", "fr", ("freedict",)), load_lexicon("en", "fr")
    assert both.sources == ["freedict", "pivot"] and own.entries is not None and both.entries is not None
    assert len(both.entries) > 3 * len(own.entries)  # 6k rows of FreeDict's own en-fr lexicon, 31k with the pivot
    assert {"reservoir", "cuv"} & set(both.entries[E("tank")]) and "transform" in both.entries[E("transformer")]


def test_parse_lexicons_validates_names() -> None:
    assert parse_lexicons("freedict, ding") == ("freedict", "ding")
    assert parse_lexicons("") == () and parse_lexicons(["ding", "ding"]) == ("ding",)
    with pytest.raises(ValueError, match="unknown lexicon.*wiktionary.*choose from freedict, ding"):
        parse_lexicons("freedict,wiktionary")
    with pytest.raises(TranslationBuildError, match="unknown lexicon"):
        TranslationOptions(lexicons=("babel",))


def test_load_lexicon_uses_what_is_installed_and_warns_about_the_rest(trans_dir: Path, tmp_path: Path) -> None:
    dirs = {"freedict": tmp_path / "no-dictd", "ding": trans_dir}
    lex = load_lexicon("de", "en", ("freedict", "ding"), dirs=dirs)
    assert lex.sources == ["ding"] and lex.entries == ding_table("de", trans_dir=trans_dir, progress=False)
    assert lex.warnings == ["FreeDict de-en lexicon not installed (dict-freedict-deu-eng, scripts/setup.sh)"]
    fr = load_lexicon("fr", "en", ("freedict", "ding"), dirs=dirs)  # Ding has no French: no warning for it
    assert fr.entries is None and fr.sources == []
    assert fr.warnings == ["FreeDict fr-en lexicon not installed (dict-freedict-fra-eng, scripts/setup.sh)"]
    none = load_lexicon("de", "en", ("freedict",), dirs={"freedict": tmp_path / "no-dictd"})
    assert none.entries is None and none.sources == [] and len(none.warnings) == 1
    assert lex.restricted({D("Kasten")}).entries == {D("Kasten"): {E("cabinet"): 1.0}}


def test_splitter_knows_ding_headwords_when_asked(trans_dir: Path, tmp_path: Path,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    from collections import Counter

    dirs = {"freedict": tmp_path / "no-dictd", "ding": trans_dir}
    counts = Counter({"metall": 3, "gehäuse": 2})
    with caplog.at_level(logging.WARNING):
        splitter = splitter_from_counts(counts, "de", lexicons=("freedict", "ding"), dirs=dirs)
    assert splitter.sources == ["corpus", "ding"]
    assert splitter.in_dictionary("antiblockiersystem") and splitter.in_dictionary("umhüllung")
    assert "FreeDict de headwords not installed (dict-freedict-deu-eng" in caplog.text
    words, used, warnings = dictionary_headwords("fr", ("ding",), dirs=dirs)
    assert (words, used, warnings) == (set(), [], [])  # Ding has no French


# ----------------------------------------------------------------------------- the build's tables


def _rec(i: int, claims: dict[str, str]) -> PatentRecord:
    return PatentRecord(
        id=f"EP{i:07d}B1", country="EP", number=f"{i:07d}", kind="B1", source="synth", lang="en",
        publication_date=date(2000, 1, i), title={k: v.split(",")[0] for k, v in claims.items()},
        claims={k: [Claim(num=1, text=v)] for k, v in claims.items()},
    )


RECORDS = [
    _rec(1, {"en": "A housing with a piston", "de": "Gehäuse mit einem Kolben"}),
    _rec(2, {"en": "A cabinet with a door", "de": "Kasten mit einer Tür"}),
]


def test_build_tables_report_the_lexicons_of_each_direction(trans_dir: Path, tmp_path: Path) -> None:
    options = TranslationOptions(lexicons=("freedict", "ding"),
                                 lexicon_dirs={"freedict": tmp_path / "no-dictd", "ding": trans_dir})
    vocabs = {"en": {E("housing"), E("cabinet"), E("piston")}}
    entries, report = build_index_tables(tmp_path / "idx", RECORDS, ["en", "de"], vocabs, options, progress=False)
    # fr-de: its own table (no lexicon here, and no aligned French-German claims) and the composition through en
    assert report["lexicons"] == {"de-en": ["ding"], "fr-en": [], "en-de": ["ding"], "fr-de": []}
    sources = {(e["src"], e["tgt"]): e["sources"] for e in entries}
    assert sources[("de", "en")][:2] == ["aligned-claims", "ding"]
    assert report["directions"]["de-en"]["dictionary"]["lexicons"] == ["ding"]
    assert any(w.startswith("FreeDict de-en lexicon not installed") and w.endswith("de-en translates with ding")
               for w in report["warnings"])
    assert any(w.startswith("FreeDict fr-en lexicon not installed") and "aligned claims only" in w
               for w in report["warnings"])


REAL_DING = Path("/usr/share/trans/de-en")


@pytest.mark.slow
@pytest.mark.skipif(not REAL_DING.is_file(), reason=f"{REAL_DING} absent: install trans-de-en (scripts/setup.sh)")
def test_real_ding_file() -> None:
    lines = REAL_DING.read_text(encoding="utf-8").splitlines()
    entries = [ln for ln in lines if ln.strip() and not ln.startswith("#")]
    assert len(entries) > 150_000
    sample = entries[::5]  # every 5th entry
    assert sum(parse_line(ln) is not None for ln in sample) > 0.99 * len(sample)  # sub-entries align
    # a term's translations come from the lines that hold it: the tables are built from those lines (a table of all
    # lines restricted to the same terms is the same, 25 s more)
    words = ("Gehäuse", "Ausdehnungsgefäß", "Drehmoment", "Transformator")
    terms = {D(w) for w in words}
    table = ding_entries_table([ln for ln in lines if any(w.lower() in ln.lower() for w in words)], "de", "en",
                               only=terms)
    assert {E("housing"), E("case")} <= set(table[D("Gehäuse")])
    assert {E("vessel"), E("tank")} <= set(table[D("Ausdehnungsgefäß")])
    assert E("torque") in table[D("Drehmoment")] and table[D("Transformator")] == {E("transformer"): 1.0}
    back = ding_entries_table([ln for ln in lines if "hous" in ln.lower()], "en", "de", only={E("housing")})
    assert D("Gehäuse") in back[E("housing")]


def test_build_cli_chooses_lexicons_and_prints_them(trans_dir: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:

    import dataclasses

    from typer.testing import CliRunner

    from service.corpus.jsonl import write_corpus
    from training.build import BuildError, build_index
    from training.cli import app
    from training.translation import lexicons

    for name, folder in (("freedict", tmp_path / "no-dictd"), ("ding", trans_dir)):  # independent of what is installed
        monkeypatch.setitem(lexicons.SOURCES, name, dataclasses.replace(lexicons.SOURCES[name], default_dir=folder))
    corpus = tmp_path / "corpus.jsonl"
    write_corpus(RECORDS, corpus)
    res = CliRunner().invoke(app, ["build", str(corpus), "-o", str(tmp_path / "i"), "--index-langs", "en",
                                   "--lexicons", "freedict,ding", "--splitter-lexicons", "ding", "--no-progress"])
    assert res.exit_code == 0, res.output
    assert "aligned claims + lexicons: ding" in res.output
    assert "de-en: " in res.output and "from aligned-claims + ding" in res.output
    assert "dictionary words (lexicons: ding)" in res.output
    assert "warning: FreeDict de-en lexicon not installed (dict-freedict-deu-eng" in res.output  # a warning only
    with pytest.raises(BuildError, match="unknown lexicon"):
        build_index(corpus, tmp_path / "x", lexicons="freedict,babel", progress=False)


# ----------------------------------------------------------------------------- kept in the process

def test_a_process_reads_a_lexicon_once_while_its_cache_file_is_unchanged(trans_dir: Path, tmp_path: Path) -> None:
    """Within ``keeping`` (the test run's, tests/conftest.py), the second build of a process neither parses, combines
    nor prunes its lexicons again (the same objects), and a changed cache file or a changed dictionary is read again."""
    from training.translation.dictionary import kept
    from training.translation.tables import prune

    assert kept()
    dirs = {"ding": trans_dir}
    first = load_lexicon("de", "en", ("ding",), dirs=dirs)
    assert load_lexicon("de", "en", ("ding",), dirs=dirs) is first
    rows = first.pruned(0.005, 20)
    assert first.pruned(0.005, 20) is rows and rows == prune(first.entries or {}, min_prob=0.005, max_per_term=20)
    assert list(rows) == sorted(rows)  # (in term order: a build merges the aligned terms' rows into it)
    assert first.pruned(0.3, 1) == prune(first.entries or {}, min_prob=0.3, max_per_term=1)
    # the cache file changed on disk (another process wrote it): read again
    (cache,) = (tmp_path / "cache" / "lexicons").glob("ding-de-en-*.json")
    cache.write_text('{"kolb": {"flask": 1.0}}', encoding="utf-8")
    changed = load_lexicon("de", "en", ("ding",), dirs=dirs)
    assert changed is not first and changed.entries == {"kolb": {"flask": 1.0}}
    # the dictionary changed (a new package): a new cache key, parsed again
    (trans_dir / "de-en").write_text(DING.replace("Kolben {m} | Kolben {pl} :: piston | pistons | flasks\n", ""),
                                     encoding="utf-8")
    again = load_lexicon("de", "en", ("ding",), dirs=dirs)
    assert again.entries is not None and D("Kolben") not in again.entries and D("Kasten") in again.entries


def test_the_kept_pruned_rows_make_the_table_that_merging_and_pruning_everything_makes() -> None:
    """A table's rows: the aligned terms' merged and pruned for the build, the others taken from the lexicon pruned
    once (``Lexicon.pruned``); the same rows, in the same order, as pruning the merge of the whole dictionary, with
    terms only one resource knows, empty rows, rows that prune drops (no probability) and rows cut to the limit."""
    import random

    from training.translation.tables import TableSettings, _merged_and_pruned, merge, prune

    rng = random.Random(4)
    words = [f"w{i:03d}" for i in range(300)]

    def row() -> dict[str, float]:
        n = rng.choice([0, 1, 1, 2, 3, 30])
        return {rng.choice(words): rng.choice([0.0, 0.001, rng.random()]) for _ in range(n)}

    dictionary = {w: row() for w in rng.sample(words, 200)}
    aligned = {w: row() for w in rng.sample(words, 80)}
    counts = {w: rng.randrange(0, 9) for w in aligned}
    for settings in (TableSettings(), TableSettings(min_prob=0.2, max_per_term=2, aligned_prior=0.0, lam=0.7)):
        pruning = {"min_prob": settings.min_prob, "max_per_term": settings.max_per_term}
        expected = prune(merge(aligned, dictionary, lam=settings.lam, counts=counts, prior=settings.aligned_prior),
                         **pruning)
        kept = prune(dict(sorted(dictionary.items())), **pruning)
        for pruned in (kept, None):
            got = _merged_and_pruned(aligned, dictionary, settings, counts, pruned)
            assert list(got.items()) == list(expected.items())
        assert _merged_and_pruned(aligned, None, settings, counts, None) == prune(
            merge(aligned, None, lam=settings.lam, counts=counts, prior=settings.aligned_prior), **pruning)


def test_outside_keeping_nothing_is_kept_and_the_last_block_to_close_forgets(trans_dir: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A process that builds once (``priorart build``) keeps no lexicon: each load reads, combines and prunes anew;
    within ``keeping`` they are kept, and the last block to close empties the memory."""
    from training.translation import dictionary, lexicons

    monkeypatch.setattr(dictionary, "_keeping", 0)  # (as outside the test run's block)
    dirs = {"ding": trans_dir}
    before = (len(dictionary._kept), len(lexicons._loaded))  # (what the run's block kept before this test)
    first = load_lexicon("de", "en", ("ding",), dirs=dirs)
    second = load_lexicon("de", "en", ("ding",), dirs=dirs)
    assert second is not first and second.entries == first.entries
    assert (len(dictionary._kept), len(lexicons._loaded)) == before
    with dictionary.keeping():
        with dictionary.keeping():
            kept = load_lexicon("de", "en", ("ding",), dirs=dirs)
        assert load_lexicon("de", "en", ("ding",), dirs=dirs) is kept  # (an inner block's close forgets nothing)
        assert dictionary._kept and lexicons._loaded
    assert not dictionary._kept and not lexicons._loaded
    assert load_lexicon("de", "en", ("ding",), dirs=dirs) is not kept
