"""Translation resources: IBM model 1 EM, the FreeDict dictd reader, merged tables, the CLI commands."""

from __future__ import annotations

import gzip
import json
import logging
from pathlib import Path

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from service.corpus.jsonl import write_corpus
from service.corpus.record import Claim, PatentRecord
from service.text.translation import TranslationTable
from training.commands import translate as translate_cmd
from training.translation.freedict import (
    DictEntry,
    LexiconNotFoundError,
    decode_b64_number,
    lexicon_paths,
    lexicon_table,
    load_lexicon,
    parse_entry,
    read_dictd,
)
from training.translation.ibm1 import aligned_pairs, symmetrise, train_aligned_table, train_ibm1
from training.translation.tables import (
    TableSettings,
    add_self_translation,
    build_tables,
    merge,
    prune,
    restrict_targets,
    write_tables,
)

TOY = [
    (["das", "haus"], ["the", "house"]),
    (["das", "buch"], ["the", "book"]),
    (["ein", "buch"], ["a", "book"]),
    (["ein", "kleines", "haus"], ["a", "small", "house"]),
    (["das", "kleine", "buch"], ["the", "small", "book"]),
]


# ----------------------------------------------------------------------------- IBM model 1


def test_ibm1_recovers_the_obvious_pairs() -> None:
    table = train_ibm1(TOY, iterations=10, progress=False).table()
    assert table["haus"]["house"] > 0.5
    assert table["buch"]["book"] > 0.5
    assert max(table["das"], key=table["das"].__getitem__) == "the"
    assert max(table["ein"], key=table["ein"].__getitem__) == "a"


def test_ibm1_rows_are_distributions_and_em_does_not_decrease_likelihood() -> None:
    model = train_ibm1(TOY, iterations=8, progress=False)
    for row in model.table().values():
        assert sum(row.values()) == pytest.approx(1.0)
    # the NULL row is a distribution too
    null = model.prob[model.pair_src == 0]
    assert null.sum() == pytest.approx(1.0)
    ll = model.log_likelihood
    assert len(ll) == 8 and all(b >= a - 1e-9 for a, b in zip(ll, ll[1:], strict=False))
    assert ll[-1] > ll[0]


def test_ibm1_is_deterministic() -> None:
    a = train_ibm1(TOY, iterations=5, progress=False)
    b = train_ibm1(TOY, iterations=5, progress=False)
    assert a.src_vocab == b.src_vocab and a.tgt_vocab == b.tgt_vocab
    assert np.array_equal(a.prob, b.prob)
    assert a.table() == b.table()


def test_ibm1_rejects_empty_input() -> None:
    with pytest.raises(ValueError, match="no sentence pairs"):
        train_ibm1([([], ["x"])])
    with pytest.raises(ValueError, match="iterations"):
        train_ibm1(TOY, iterations=0)


def test_symmetrise_drops_pairs_the_reverse_model_does_not_know() -> None:
    fwd = {"haus": {"house": 0.6, "the": 0.4}}
    rev = {"house": {"haus": 0.9}, "the": {"das": 1.0}}
    assert symmetrise(fwd, rev) == {"haus": {"house": 1.0}}
    # nothing in common: keep the forward row
    assert symmetrise({"x": {"y": 1.0}}, {}) == {"x": {"y": 1.0}}


def _record(rid: str, de: list[str], en: list[str], title: tuple[str, str] | None = None) -> PatentRecord:
    return PatentRecord(
        id=rid,
        country="EP",
        number=rid[2:-2],
        kind=rid[-2:],
        source="ep",
        title={"de": title[0], "en": title[1]} if title else {},
        claims={
            "de": [Claim(num=i + 1, text=t) for i, t in enumerate(de)],
            "en": [Claim(num=i + 1, text=t) for i, t in enumerate(en)],
        },
    )


RECORDS = [
    _record(
        "EP0000001B1",
        ["Ein Gehäuse (4) mit einer Welle (5).", "Gehäuse nach Anspruch 1 aus Stahl."],
        ["A housing (4) with a shaft (5).", "Housing according to claim 1 made of steel."],
        ("Gehäuse", "Housing"),
    ),
    _record(
        "EP0000002B1",
        ["Eine Welle aus Stahl.", "Welle mit einer Schicht."],
        ["A shaft made of steel.", "Shaft with a layer."],
    ),
    _record("EP0000003B1", ["Eine Schicht aus Kunststoff auf einem Gehäuse."], ["A layer of plastic on a housing."]),
    _record("EP0000004B1", ["Kunststoff und Stahl."], ["Plastic and steel."]),
]


def test_aligned_pairs_pairs_claims_by_number_and_honours_exclusions() -> None:
    pairs, used = aligned_pairs(RECORDS, "de")
    assert used == ["EP0000001B1", "EP0000002B1", "EP0000003B1", "EP0000004B1"]
    assert len(pairs) == 7  # 6 claims + 1 title
    assert pairs[0] == (["gehaus", "well"], ["hous", "shaft"])  # reference signs dropped
    pairs, used = aligned_pairs(RECORDS, "de", exclude_ids={"EP0000001B1"}, titles=False)
    assert "EP0000001B1" not in used and len(pairs) == 4
    with pytest.raises(ValueError, match="both 'en'"):
        aligned_pairs(RECORDS, "en")


def test_train_aligned_table_on_analysed_claims() -> None:
    table, summary = train_aligned_table(RECORDS, "de", iterations=10, progress=False)
    for src, tgt in [
        ("gehaus", "hous"),
        ("well", "shaft"),
        ("stahl", "steel"),
        ("schicht", "layer"),
        ("kunststoff", "plastic"),
    ]:
        assert max(table[src], key=table[src].__getitem__) == tgt, (src, table[src])
    assert summary["sentence_pairs"] == 7 and summary["documents"] == 4
    with pytest.raises(ValueError, match="no de-en aligned claims"):
        train_aligned_table(RECORDS, "de", exclude_ids={r.id for r in RECORDS})


def test_function_words_let_words_without_content_translation_drop_out() -> None:
    records = [
        _record(
            "EP0000011B1",
            ["Welle, worin Stahl.", "Gehäuse, worin Kunststoff."],
            ["Shaft wherein steel.", "Housing wherein plastic."],
        ),
        _record(
            "EP0000012B1",
            ["Welle aus Kunststoff.", "Gehäuse aus Stahl, worin Welle."],
            ["Shaft of plastic.", "Housing of steel wherein shaft."],
        ),
    ]
    plain, _ = train_aligned_table(records, "de", function_words=False, progress=False)
    assert "worin" in plain  # forced onto content words: "wherein" is an English stop word
    table, summary = train_aligned_table(records, "de", function_words=True, progress=False)
    assert "worin" not in table and summary["dropped_as_function_words"] >= 1
    assert max(table["well"], key=table["well"].__getitem__) == "shaft"


# ----------------------------------------------------------------------------- FreeDict

GEHAEUSE = (
    "Gehäuse /ɡəhˈɔøzə/ <neut, n, sg>\n"
    "case <n>, casing box <n>, housing <n>, chassis <n>, cladding <n>\n"
    '      "Gehäuse für den Außenbereich"  - outdoor housing\n'
    "   Synonym: {Umhüllung}\n\n"
    " see: {Gehäuse}, {Umhüllungen}, {Metallgehäuse}, {robustes Gehäuse}\n\n"
)


def test_decode_b64_number() -> None:
    assert decode_b64_number("A") == 0
    assert decode_b64_number("B") == 1
    assert decode_b64_number("BA") == 64
    assert decode_b64_number("3lBC") == 55 * 64**3 + 37 * 64**2 + 1 * 64 + 2
    with pytest.raises(ValueError, match="base64"):
        decode_b64_number("a-b")


def test_parse_entry_strips_grammar_examples_and_references() -> None:
    entry = parse_entry(GEHAEUSE)
    assert entry == DictEntry("Gehäuse", (("case", "casing box", "housing", "chassis", "cladding"),))
    tagged = parse_entry("Welle /vˈɛlə/ ([+ gen]) <fem, n, sg>\n [techn.] shaft <n> [fig.]\n see: {Wellen}\n\n")
    assert tagged == DictEntry("Welle", (("shaft",),))
    numbered = parse_entry("abaissement /abɛsəmɑ̃/ <n, masc>\n1. abasement\n2. decrease, lowering\n")
    assert numbered == DictEntry("abaissement", (("abasement",), ("decrease", "lowering")))
    assert parse_entry("") is None
    assert parse_entry("Wort /vɔɾt/\n") is None


# a WikDict entry of freedict-fra-deu as published: numbered senses, source-language definitions between them, a
# stray sense number after a translation ("Baum 2.") and senses with no translation (" 3.")
ARBRE = ("arbre /aʁbʁ/ <n, masc>\n1. Welle\nAxe de rotation\n2. Baum 2.\nGrand végétal\n 3.\n"
         "(Informatique) Structure de données\n 4.\nTige ou pièce cylindrique en rotation\n")


def test_glossed_entries_keep_translations_and_drop_definitions() -> None:
    assert parse_entry(ARBRE, glossed=True) == DictEntry("arbre", (("Welle",), ("Baum",)))
    unnumbered = "Dichtung /ˈdɪçtʊŋ/ <n, fem>\ngarniture, joint\n(Maschinen-)Element zum Abdichten\n"
    assert parse_entry(unnumbered, glossed=True) == DictEntry("Dichtung", (("garniture", "joint"),))
    # read as an older FreeDict entry, the definitions would be translations
    assert ("Grand végétal",) in parse_entry(ARBRE).senses  # type: ignore[union-attr]


def _write_dictd(folder: Path, name: str, entries: list[str], *, compress: bool = True) -> None:
    body = b""
    lines = []
    b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

    def enc(n: int) -> str:
        out = ""
        while True:
            out = b64[n % 64] + out
            n //= 64
            if n == 0:
                return out

    info = b"00-database-info\nA test lexicon\n"
    lines.append(f"00databaseinfo\t{enc(0)}\t{enc(len(info))}")
    body += info
    for text in entries:
        data = text.encode("utf-8")
        head = text.split(" ", 1)[0].lower()
        lines.append(f"{head}\t{enc(len(body))}\t{enc(len(data))}")
        body += data
    (folder / f"{name}.index").write_text("\n".join(lines) + "\n", encoding="utf-8")
    if compress:
        with gzip.open(folder / f"{name}.dict.dz", "wb") as fh:
            fh.write(body)
    else:
        (folder / f"{name}.dict").write_bytes(body)


def test_lexicon_table_from_a_small_dictd_file(tmp_path: Path) -> None:
    _write_dictd(
        tmp_path,
        "freedict-deu-eng",
        [
            GEHAEUSE,
            "Gehäuse /ɡəhˈɔøzə/ <neut, n, sg>\nhousing <n>, enclosure <n>\n",
            "Drehmoment /dɾˌeːmoːmˈɛnt/ <neut, n, sg>\nturning moment <n>, torque <n>\n",
            "Hanggleiten /x/ <neut, n, sg>\n [sport] air surfing <n>, slope soaring <n>\n",
            "zur Schau stellen /x/ <v>\nexhibit sth. <v>\n",
            "…fach /fˈax/\n…fold\n",
            "befestigen /x/ <v>\nhitch sth. <v>, stick sb./sth. <v>\n",
        ],
    )
    table = lexicon_table("de", dictd_dir=tmp_path, progress=False)
    # two senses: {case, casing-box->dropped (multi-word, sense has single words), hous, chassi, clad}, {hous, enclosur}
    assert table["gehaus"]["hous"] == pytest.approx((1 / 4 + 1 / 2) / 2)
    assert "box" not in table["gehaus"]
    assert table["drehmoment"] == {"torqu": 1.0}  # single-word translation preferred
    assert table["hanggleit"] == {"surf": 0.5, "soar": 0.5}  # only multi-word: their heads
    assert table["befest"] == {"hitch": 0.5, "stick": 0.5}  # sth./sb. placeholders removed
    assert "schau" not in table and "fach" not in table  # phrases and affixes skipped
    for row in table.values():
        assert sum(row.values()) == pytest.approx(1.0)


def test_uncompressed_dict_is_read_too(tmp_path: Path) -> None:
    _write_dictd(tmp_path, "freedict-fra-eng", ["roue /ʀu/ <n, fem>\nwheel\n"], compress=False)
    assert lexicon_paths("fr", tmp_path)[1].name == "freedict-fra-eng.dict"
    assert lexicon_table("fr", dictd_dir=tmp_path, progress=False) == {"rou": {"wheel": 1.0}}


def test_missing_lexicon_warns_and_returns_none(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        assert load_lexicon("de", dictd_dir=tmp_path) is None
    assert "install dict-freedict-deu-eng (scripts/setup.sh)" in caplog.text
    assert "using aligned-claims-only translation" in caplog.text
    with pytest.raises(LexiconNotFoundError):
        lexicon_table("de", dictd_dir=tmp_path)
    with pytest.raises(ValueError, match="no FreeDict lexicon configured for 'es'"):
        lexicon_paths("es")


REAL_DE_INDEX = Path("/usr/share/dictd/freedict-deu-eng.index")
REAL_FR_INDEX = Path("/usr/share/dictd/freedict-fra-eng.index")
REAL_FR_DE_INDEX = Path("/usr/share/dictd/freedict-fra-deu.index")


@pytest.mark.skipif(
    not REAL_DE_INDEX.exists(), reason=f"{REAL_DE_INDEX} absent: install dict-freedict-deu-eng (scripts/setup.sh)"
)
def test_real_german_lexicon_entries() -> None:
    index, data = lexicon_paths("de")
    senses: dict[str, set[str]] = {"Gehäuse": set(), "Fach": set(), "Welle": set()}
    for head, text in read_dictd(index, data):
        if head in ("gehäuse", "fach", "welle"):
            entry = parse_entry(text)
            if entry is not None and entry.headword in senses:
                senses[entry.headword].update(t for sense in entry.senses for t in sense)
    assert {"housing", "casing", "case", "enclosure"} <= senses["Gehäuse"]
    assert {"compartment", "subject", "pocket"} <= senses["Fach"]
    assert {"shaft", "wave", "axle"} <= senses["Welle"]


@pytest.mark.skipif(
    not REAL_FR_INDEX.exists(), reason=f"{REAL_FR_INDEX} absent: install dict-freedict-fra-eng (scripts/setup.sh)"
)
def test_real_french_lexicon_table() -> None:
    table = lexicon_table("fr", progress=False)
    assert len(table) > 5000
    assert set(table["moteur"]) == {"engin", "motor"}
    assert table["rou"] == {"wheel": 1.0}


def test_headwords_and_their_stems_are_read_back_from_the_disk_cache(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Every build with compound splitting needs the lexicon's headwords and their stems (seconds for the 520k
    German lines): the next process reads both from the cache, and a replaced lexicon is read again."""
    import Stemmer

    from training.translation.compounds import dictionary_stems
    from training.translation.freedict import _headwords, freedict_headwords

    monkeypatch.setenv("PRIORART_CACHE_DIR", str(tmp_path / "cache"))
    _write_dictd(tmp_path, "freedict-deu-eng", ["Gehäuse /x/\nhousing\n", "Ventile /x/\nvalves\n", "ab /x/\noff\n"])
    _headwords.cache_clear()  # a new process
    words = freedict_headwords("de", tmp_path)
    assert words == {"gehäuse", "ventile"}  # normalised, at least 4 letters
    (cached,) = (tmp_path / "cache" / "lexicons").glob("freedict-deu-eng-headwords-*.json")
    cached.write_text(json.dumps(["gehäuse", "sentinel"]))  # what a later process reads, if it reads the cache
    _headwords.cache_clear()
    assert freedict_headwords("de", tmp_path) == {"gehäuse", "sentinel"}
    _write_dictd(tmp_path, "freedict-deu-eng", ["Gehäuse /x/\nhousing\n", "Kolben /x/\npiston\n"])  # replaced
    _headwords.cache_clear()
    assert freedict_headwords("de", tmp_path) == {"gehäuse", "kolben"}

    stems = dictionary_stems(words, "de")
    assert stems == sorted(set(Stemmer.Stemmer("german").stemWords(sorted(words))))
    (cached,) = (tmp_path / "cache" / "lexicons").glob("stems-de-*.json")
    cached.write_text(json.dumps(["sentinel"]))
    assert dictionary_stems(words, "de") == ["sentinel"] and dictionary_stems({"kolben"}, "de") == ["kolb"]


@pytest.mark.skipif(
    not REAL_FR_DE_INDEX.exists(),
    reason=f"{REAL_FR_DE_INDEX} absent: install dict-freedict-fra-deu (scripts/setup.sh)",
)
def test_real_french_german_lexicon_table() -> None:
    table = lexicon_table("fr", tgt="de", progress=False)
    assert len(table) > 20000
    assert table["soupap"] == {"ventil": 1.0} and table["arbre"] == {"well": 0.5, "baum": 0.5}
    numbers = sum(t.isdigit() for row in table.values() for t in row)  # sense numbers taken for words: thousands
    assert numbers < 20  # what is left are chemical names ("2,4,6-Trinitrotoluol")


# ----------------------------------------------------------------------------- merged tables


def test_merge_interpolates_where_both_know_a_term() -> None:
    aligned = {"gehaus": {"hous": 1.0}, "stahl": {"steel": 1.0}}
    dictionary = {"gehaus": {"hous": 0.5, "case": 0.5}, "fach": {"compart": 1.0}}
    merged = merge(aligned, dictionary, lam=0.6)
    assert merged["gehaus"] == pytest.approx({"hous": 0.6 + 0.4 * 0.5, "case": 0.4 * 0.5})
    assert merged["stahl"] == {"steel": 1.0} and merged["fach"] == {"compart": 1.0}
    assert merge(None, dictionary) == dictionary


def test_merge_weighs_the_aligned_row_by_how_often_the_model_saw_the_term() -> None:
    # one claim about a grass-gathering machine taught the aligned model junk for "machin"; "gehaus" it saw 45 times
    aligned = {"machin": {"grass": 0.5, "machin": 0.5}, "gehaus": {"hous": 1.0}}
    dictionary = {"machin": {"machin": 0.5, "engin": 0.5}, "gehaus": {"hous": 0.5, "case": 0.5}}
    merged = merge(aligned, dictionary, lam=0.5, counts={"machin": 1, "gehaus": 45}, prior=5.0)
    w_one, w_many = 0.5 * 1 / 6, 0.5 * 45 / 50
    assert merged["machin"] == pytest.approx({"grass": w_one * 0.5, "machin": w_one * 0.5 + (1 - w_one) * 0.5,
                                              "engin": (1 - w_one) * 0.5})
    assert merged["gehaus"] == pytest.approx({"hous": w_many + (1 - w_many) * 0.5, "case": (1 - w_many) * 0.5})
    # prior 0: the plain interpolation; a prior without counts is refused
    assert merge(aligned, dictionary, lam=0.5, counts={"machin": 1}, prior=0.0) == merge(aligned, dictionary, lam=0.5)
    with pytest.raises(ValueError, match="term counts"):
        merge(aligned, dictionary, prior=5.0)


def test_prune_keeps_top_terms_and_renormalises() -> None:
    row = {"a": 0.5, "b": 0.3, "c": 0.15, "d": 0.05}
    assert prune({"x": row}, min_prob=0.1, max_per_term=10)["x"] == pytest.approx(
        {"a": 0.5 / 0.95, "b": 0.3 / 0.95, "c": 0.15 / 0.95}
    )
    assert list(prune({"x": row}, min_prob=0.0, max_per_term=2)["x"]) == ["a", "b"]
    # a row whose every translation is below min_prob keeps its best one
    assert prune({"x": {"a": 0.001, "b": 0.0005}}, min_prob=0.01)["x"] == {"a": 1.0}
    # a row of one translation (most dictionary rows) is that translation; one of probability 0 is dropped
    assert prune({"x": {"a": 0.003}, "y": {"b": 0.0}}, min_prob=0.01) == {"x": {"a": 1.0}}


def test_self_translation_and_target_restriction() -> None:
    entries = {"motor": {"engin": 0.6, "forc": 0.4}, "fach": {"compart": 1.0}}
    out = add_self_translation(entries, {"motor", "engin"}, 0.2)
    assert out["motor"] == pytest.approx({"engin": 0.48, "forc": 0.32, "motor": 0.2})
    assert out["fach"] == {"compart": 1.0}
    assert restrict_targets(entries, {"engin", "compart"}) == {"motor": {"engin": 1.0}, "fach": {"compart": 1.0}}
    assert restrict_targets(entries, set())["motor"] == entries["motor"]  # nothing left: keep the row


def test_build_tables_without_dictionary_and_round_trip(tmp_path: Path) -> None:
    settings = TableSettings(langs=("de",), use_dict=False, min_prob=0.01, self_weight=0.0)
    tables, meta = build_tables(RECORDS, settings, exclude_ids={"EP0000004B1"}, progress=False)
    table = tables["de"]
    assert table.sources == ["aligned-claims"]
    assert max(table.entries["gehaus"], key=table.entries["gehaus"].__getitem__) == "hous"
    assert meta["excluded_ids"] == ["EP0000004B1"]
    # the excluded grant's claims were not aligned (build_direction also raises if they were)
    _, with_all = build_tables(RECORDS, settings, progress=False)
    assert (meta["languages"]["de"]["aligned"]["sentence_pairs"]  # type: ignore[index]
            < with_all["languages"]["de"]["aligned"]["sentence_pairs"])  # type: ignore[index]
    paths = write_tables(tmp_path, tables, meta)
    assert [p.name for p in paths] == ["de-en.json", "translation-meta.json"]
    loaded = TranslationTable.load(tmp_path / "de-en.json")
    assert loaded.entries == table.entries and loaded.sources == table.sources
    saved_meta = json.loads((tmp_path / "translation-meta.json").read_text(encoding="utf-8"))
    assert saved_meta["settings"]["use_dict"] is False


def test_build_tables_merges_dictionary_and_marks_self_translation(tmp_path: Path) -> None:
    _write_dictd(tmp_path, "freedict-deu-eng", [GEHAEUSE, "Stahl /x/ <masc>\nsteel <n>\n"])
    settings = TableSettings(langs=("de",), self_weight=0.1, lam=0.5)
    tables, meta = build_tables(RECORDS, settings, dictd_dir=tmp_path, target_vocab={"hous", "stahl"}, progress=False)
    table = tables["de"]
    assert table.sources == ["aligned-claims", "freedict", "self"]
    assert "case" in table.entries["gehaus"] and "hous" in table.entries["gehaus"]
    assert table.entries["stahl"]["stahl"] == pytest.approx(0.1)  # 'stahl' is in the target vocabulary


def test_build_tables_weighs_each_aligned_row_by_how_often_the_model_saw_its_term(tmp_path: Path) -> None:
    _write_dictd(tmp_path, "freedict-deu-eng", [GEHAEUSE])
    aligned, summary = train_aligned_table(RECORDS, "de", progress=False)
    n = summary["source_counts"]["gehaus"]
    assert n >= 1 and "case" not in aligned["gehaus"]  # 'case' comes from the dictionary alone
    rows, metas = {}, {}
    for prior in (0.0, 5.0):
        settings = TableSettings(langs=("de",), self_weight=0.0, lam=0.5, aligned_prior=prior, min_prob=0.0)
        tables, metas[prior] = build_tables(RECORDS, settings, dictd_dir=tmp_path, progress=False)
        rows[prior] = tables["de"].entries["gehaus"]
    assert metas[5.0]["settings"]["aligned_prior"] == 5.0  # type: ignore[index]
    # the dictionary's share of the row: 1 - lam without the prior, 1 - lam * n / (n + 5) with it
    assert rows[5.0]["case"] / rows[0.0]["case"] == pytest.approx((1 - 0.5 * n / (n + 5)) / 0.5)


def test_table_settings_validation() -> None:
    with pytest.raises(ValueError, match="both the aligned-claims model and the dictionary are switched off"):
        TableSettings(use_aligned=False, use_dict=False)
    with pytest.raises(ValueError, match="unsupported source language"):
        TableSettings(langs=("es",))
    with pytest.raises(ValueError, match="lam must be in"):
        TableSettings(lam=1.5)
    with pytest.raises(ValueError, match="aligned_prior must be >= 0"):
        TableSettings(aligned_prior=-1.0)


def test_no_resource_at_all_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no translation resource for de-en"):
        build_tables(RECORDS, TableSettings(langs=("de",), use_aligned=False), dictd_dir=tmp_path, progress=False)


# ----------------------------------------------------------------------------- CLI


@pytest.fixture()
def app() -> typer.Typer:
    app = typer.Typer()
    translate_cmd.register(app)
    return app


def test_translate_train_and_translate_commands(app: typer.Typer, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    write_corpus(RECORDS, corpus)
    ids = tmp_path / "ids.txt"
    ids.write_text("# topics\nEP0000004B1-de\n\n", encoding="utf-8")
    runner = CliRunner()
    out = tmp_path / "tables"
    res = runner.invoke(
        app,
        [
            "translate-train",
            str(corpus),
            "-o",
            str(out),
            "--langs",
            "de",
            "--no-dict",
            "--exclude-ids",
            str(ids),
            "--no-progress",
        ],
    )
    assert res.exit_code == 0, res.output
    assert (out / "de-en.json").is_file() and (out / "fr-en.json").exists() is False
    meta = json.loads((out / "translation-meta.json").read_text(encoding="utf-8"))
    assert meta["excluded_ids"] == ["EP0000004B1"]

    res = runner.invoke(app, ["translate", "Gehäuse aus Stahl (4)", "--lang", "de", "--table", str(out), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    by_term = {row["term"]: row for row in doc["terms"]}
    assert by_term["gehaus"]["translations"][0][0] == "hous"
    assert by_term["(4)"]["in_table"] is False and by_term["(4)"]["translations"] == [["(4)", 1.0]]

    res = runner.invoke(app, ["translate", "Gehäuse", "--lang", "de", "--table", str(out)])
    assert res.exit_code == 0 and "gehaus -> hous" in res.stdout

    res = runner.invoke(app, ["translate", "Gehäuse", "--lang", "es", "--table", str(out)])
    assert res.exit_code == 2
    res = runner.invoke(app, ["translate", "maison", "--lang", "fr", "--table", str(out)])
    assert res.exit_code == 2 and "no fr-en translation table" in res.output
