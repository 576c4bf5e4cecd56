"""``priorart build`` / ``search``: folder layout, options, errors, CLI, real data."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from service.corpus.jsonl import write_corpus
from service.corpus.record import Claim, PatentRecord
from service.index.folder import IndexFormatError, load_meta
from service.retrieval.first_stage import FirstStage
from service.text.analysis import get_analyzer
from service.text.translation import TranslationTable
from training.build import BuildError, build_index
from training.commands import build, search


def _rec(i: int, en: str, de: str | None = None, ipc: str = "H01F27/14") -> PatentRecord:
    claims = {"en": [Claim(num=1, text=en)]}
    if de:
        claims["de"] = [Claim(num=1, text=de)]
    return PatentRecord(
        id=f"EP{i:07d}B1",
        country="EP",
        number=f"{i:07d}",
        kind="B1",
        source="synth",
        lang="en",
        publication_date=date(2000, 1, i + 1),
        title={"en": en[:30]},
        claims=claims,
        ipc=[ipc],
    )


RECORDS = [
    _rec(1, "A transformer with a laminated core and a copper winding", "Transformator mit Kern und Wicklung"),
    _rec(2, "A spray nozzle with a swirl chamber", ipc="B05B1/34"),
    _rec(3, "A pump with a check valve for liquid", ipc="F04B53/10"),
    _rec(4, "A latch with a spring for a housing", "Riegel mit Feder", ipc="E05C19/00"),
]


@pytest.fixture()
def corpus(tmp_path: Path) -> Path:
    """Each test that builds from it is marked slow (a default build with translation tables: 5-26 s)."""
    path = tmp_path / "corpus.jsonl"
    write_corpus(RECORDS, path)
    return path


@pytest.mark.slow
def test_build_writes_the_documented_layout(corpus: Path, tmp_path: Path) -> None:
    report = build_index(
        corpus, tmp_path / "idx", index_langs="en,de", fields="title,claims", scoring="tfidf", k1=1.0, b=0.5
    )
    d = tmp_path / "idx"
    for rel in (
        "meta.json",
        "docs.jsonl",
        "docs.offsets.npy",
        "doc_ids.json",
        "bm25/en/params.json",
        "bm25/de/weights.npy",
        "codes/subclass.json",
        "analysis/compounds-de.json",
        "translation/de-en.json",
        "translation/en-de.json",
        "translation/fr-en.json",
    ):
        assert (d / rel).is_file(), rel
    meta = load_meta(d)
    stored = meta.settings.to_dict()
    analysis = stored.pop("analysis")
    assert stored == {
        "fields": ["title", "claims"],
        "index_langs": ["en", "de"],
        "scoring": "tfidf",
        "k1": 1.0,
        "b": 0.5,
        "epsilon": 0.25,
    }
    assert analysis["compounds"]["de"]["file"] == "analysis/compounds-de.json"
    # tables of every direction into an indexed language; fr -> de its own and through English (fr-en + en-de, mixed
    # at query time); fr -> de has no aligned claims here, so its own table needs FreeDict's fra-deu (scripts/setup.sh)
    own = Path("/usr/share/dictd/freedict-fra-deu.index").exists()
    pairs = {(t["src"], t["tgt"]) for t in meta.components["translation"]}
    assert pairs == {("de", "en"), ("fr", "en"), ("en", "de"), *([("fr", "de")] if own else [])}
    assert report.translation_report["mode"] == "built"
    fr_de = report.translation_report["directions"]["fr-de"]
    assert fr_de["mixed"] == "half and half with fr-en + en-de" if own else fr_de["sources"] == ["pivot:en"]
    assert meta.components["bm25"]["de"]["n_docs"] == 2 and meta.components["docstore"]["n_docs"] == 4
    assert report.n_docs == 4 and report.docs_per_s > 0 and report.peak_rss_mb > 0
    assert not list(tmp_path.glob(".idx.building-*"))
    stage = FirstStage.load(d)
    assert stage.pair_tables[("fr", "de")].sources[-1] == "pivot:en" and stage.pair_tables[("fr", "de")].hops == 2
    assert stage.indexes["en"].scoring == "tfidf"
    assert stage.search("copper winding", lang="en").hits[0].doc_id == "EP0000001B1"


@pytest.mark.slow
def test_build_refuses_bad_input(corpus: Path, tmp_path: Path) -> None:
    with pytest.raises(BuildError, match="does not exist"):
        build_index(tmp_path / "nope.jsonl", tmp_path / "x")
    with pytest.raises(BuildError, match="index language"):
        build_index(corpus, tmp_path / "x", index_langs="en,it")
    with pytest.raises(BuildError, match="field"):
        build_index(corpus, tmp_path / "x", fields="title,drawings")
    with pytest.raises(BuildError, match="scoring"):
        build_index(corpus, tmp_path / "x", scoring="bm99")
    with pytest.raises(BuildError, match=r"\bb must be a number in \[0, 1\], got 2.0"):
        build_index(corpus, tmp_path / "x", b=2.0)
    other = tmp_path / "notindex"
    other.mkdir()
    (other / "precious.txt").write_text("keep me")
    with pytest.raises(BuildError, match="refusing"):
        build_index(corpus, other, overwrite=True)
    assert (other / "precious.txt").read_text() == "keep me"
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(BuildError, match="no records"):
        build_index(empty, tmp_path / "y")
    assert not (tmp_path / "y").exists()


@pytest.mark.slow
def test_rebuild_needs_force(corpus: Path, tmp_path: Path) -> None:
    build_index(corpus, tmp_path / "idx", index_langs="en")
    with pytest.raises(BuildError, match="--force"):
        build_index(corpus, tmp_path / "idx")
    build_index(corpus, tmp_path / "idx", index_langs="en,de", overwrite=True)
    assert load_meta(tmp_path / "idx").settings.index_langs == ("en", "de")


@pytest.mark.slow
def test_build_copies_translation_tables(corpus: Path, tmp_path: Path) -> None:
    tables = tmp_path / "tables"
    de, en = get_analyzer("de"), get_analyzer("en")
    TranslationTable({de("Ventil")[0]: {en("valve")[0]: 1.0}}, src="de").save(tables / "de-en.json")
    build_index(corpus, tmp_path / "idx", index_langs="en", translation_dir=tables)
    meta = load_meta(tmp_path / "idx")
    assert meta.components["translation"][0]["file"] == "translation/de-en.json"
    res = FirstStage.load(tmp_path / "idx").search("Ventil", lang="de")
    assert res.info.translation == "de-en" and res.hits[0].doc_id == "EP0000003B1"
    with pytest.raises(BuildError, match="no <src>-<tgt>.json"):
        build_index(corpus, tmp_path / "idx2", translation_dir=tmp_path)


def _app() -> typer.Typer:
    app = typer.Typer()
    for module in (build, search):
        module.register(app)
    return app


@pytest.mark.slow
def test_cli_build_and_search(corpus: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    idx = tmp_path / "idx"
    res = runner.invoke(_app(), ["build", str(corpus), "-o", str(idx), "--index-langs", "en,de"])
    assert res.exit_code == 0, res.output
    assert "indexed 4 documents" in res.output
    res = runner.invoke(_app(), ["search", str(idx), "check valve pump", "--k", "2"])
    assert res.exit_code == 0, res.output
    assert "EP0000003B1" in res.output and "rank" in res.output
    res = runner.invoke(_app(), ["search", str(idx), "check valve pump", "--json", "--before", "2000-01-05"])
    data = json.loads(res.output)  # the body of POST /search
    assert data["results"][0]["id"] == "EP0000003B1" and data["query"]["filters"]["before"] == "2000-01-05"
    assert data["results"][0]["title"] and data["fusion"]["weights"] == {"bm25": 0.5, "dense": 0.5}  # the default
    assert "dense: 4 documents encoded by the pretrained encoder" in runner.invoke(
        _app(), ["build", str(corpus), "-o", str(idx), "--force"]).output
    res = runner.invoke(_app(), ["build", str(corpus), "-o", str(idx), "--force", "--no-dense"])
    assert res.exit_code == 0 and "dense:" not in res.output
    res = runner.invoke(_app(), ["search", str(idx), "check valve pump", "--json"])
    assert json.loads(res.output)["fusion"]["weights"] == {"bm25": 1.0}  # --no-dense: BM25 alone
    res = runner.invoke(_app(), ["search", str(idx), "EP0000009B1"])
    assert res.exit_code == 2 and "not in this index" in res.output
    res = runner.invoke(_app(), ["search", str(idx), "pump", "--codes", "F04B", "--code-level", "subclass"])
    assert res.exit_code == 0 and "EP0000003B1" in res.output
    res = runner.invoke(_app(), ["build", str(corpus), "-o", str(idx)])
    assert res.exit_code == 2 and "--force" in res.output


@pytest.mark.slow
def test_cli_build_like_takes_every_learned_part_of_the_other_index(corpus: Path, tmp_path: Path) -> None:
    """Issue 60 item 2: `priorart build --like INDEX` learns nothing of its own: the settings, tables, word lists,
    ranker, fusion and encoder maps are the other index's (files byte for byte), even where its options differ."""
    runner = CliRunner()
    first, again = tmp_path / "first", tmp_path / "again"
    res = runner.invoke(_app(), ["build", str(corpus), "-o", str(first), "--index-langs", "en,de", "--k1", "1.5"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(_app(), ["build", str(corpus), "-o", str(again), "--like", str(first),
                                 "--k1", "0.9", "--no-translation", "--doc-maps", "none"])
    assert res.exit_code == 0, res.output
    a, b = load_meta(first), load_meta(again)
    assert a.settings == b.settings and b.settings.k1 == 1.5 and b.settings.index_langs == ("en", "de")
    for part in ("translation", "ranker", "fusion", "encoder"):
        assert part in b.components, part
    same = [rel for rel in a.files if rel.split("/")[0] in ("translation", "ranker", "analysis", "encoder")
            or rel == "fusion.json"]
    same.remove("encoder/meta.json")  # (it says where the maps were copied from)
    assert "encoder/doc_maps.npz" in same and all(a.files[rel] == b.files[rel] for rel in same)  # meta.json's sha256
    res = runner.invoke(_app(), ["build", str(corpus), "-o", str(tmp_path / "x"), "--like", str(first), "--shards",
                                 "2"])
    assert res.exit_code == 2 and "--like builds one index" in res.output
    res = runner.invoke(_app(), ["build", str(corpus), "-o", str(tmp_path / "x"), "--like", str(tmp_path)])
    assert res.exit_code == 2 and "--like" in res.output


@pytest.mark.slow
def test_cli_search_refuses_a_tampered_index(corpus: Path, tmp_path: Path) -> None:
    idx = tmp_path / "idx"
    build_index(corpus, idx, index_langs="en")
    (idx / "doc_ids.json").write_text('["EP0000001B1", "EP0000002B1", "EP0000003B1", "EP0000004B9"]')
    res = CliRunner().invoke(_app(), ["search", str(idx), "pump"])
    assert res.exit_code == 2 and "doc_ids.json" in res.output
    with pytest.raises(IndexFormatError):
        FirstStage.load(idx)


@pytest.mark.realdata
def test_build_real_patents(real_corpus: Path, real_plain_index: Path) -> None:
    """The shared data's patents ingested and built (the run's one default build of them, tests/conftest.py)."""
    n = len(real_corpus.read_text(encoding="utf-8").splitlines())
    report = json.loads((real_plain_index.parent / "report.json").read_text(encoding="utf-8"))
    assert report["n_docs"] == n > 400
    assert report["langs"]["en"]["n_docs"] > 400 and report["langs"]["de"]["n_docs"] >= 25
    stage = FirstStage.load(real_plain_index)
    res = stage.search("EP0640886B1", k=10, priority_cutoff=False)  # (every date: its prior art is one document)
    assert len(res.hits) == 10 and "EP0640886B1" not in [h.doc_id for h in res.hits]
    rec = stage.docs.get("EP0640886B1")
    assert rec.id == "EP0640886B1" and rec.claims


def test_cached_analyzer_equals_analyzer() -> None:
    from training.build import CachedAnalyzer

    texts = [
        "A transformer (4) with H01F 27/14 and SO2 at 1.5 mm, 0,25 %; the the Gerät's Geraet",
        "Vorrichtung nach Anspruch 1, wobei die Flüssigkeit (12a) ... B05B 7/ 00",
        "",
        "   ",
        "x y 3 3d",
    ]
    for lang in ("en", "de", "fr"):
        plain = get_analyzer(lang)
        cached = CachedAnalyzer(plain, max_memo=5)  # tiny memo: exercises the overflow path too
        for text in texts * 2:
            assert cached(text) == plain(text)


@pytest.mark.realdata
def test_cached_analyzer_equals_analyzer_on_real_patents(ep_dir: Path) -> None:
    from training.build import CachedAnalyzer

    ingest = pytest.importorskip("training.ingest")
    cached = {lang: CachedAnalyzer(get_analyzer(lang)) for lang in ("en", "de", "fr")}
    n = 0
    for rec in ingest.iter_records([ep_dir]):
        for lang in rec.languages:
            text = rec.text(lang)
            assert cached[lang](text) == get_analyzer(lang)(text), (rec.id, lang)
            n += 1
    assert n > 100


def test_ray_options_parse_without_an_address(tmp_path: Path) -> None:
    """``--ray`` alone is a flag (a local Ray) and ``--ray-address`` names a cluster; a typer option with an
    optional value does not exist (``--ray`` alone was "requires an argument"). Both fail here on the input, not
    on the command line, before any Ray starts."""
    runner = CliRunner()
    missing = tmp_path / "none.jsonl"
    for extra in (["--ray"], ["--ray-address", "auto"]):
        res = runner.invoke(_app(), ["build", str(missing), "-o", str(tmp_path / "idx"), "--shards", "2", *extra])
        assert res.exit_code == 2 and "does not exist" in res.output, res.output
    # without --shards, --ray encodes the dense stage on Ray Data (tests/service/stages/test_dense_pretrained.py):
    # the same one-line refusal of the input
    res = runner.invoke(_app(), ["build", str(missing), "-o", str(tmp_path / "idx"), "--ray"])
    assert res.exit_code == 2 and "does not exist" in res.output, res.output
