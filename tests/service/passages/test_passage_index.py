"""The build-time passage index: equal scores to the per-record reference, format, segments, old indexes."""

from __future__ import annotations

import json
import random
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from lab.benchmarks.passages_reference import PassageRanker, background_of, background_of_index
from service.corpus.jsonl import write_corpus
from service.corpus.record import Claim, PatentRecord, Section
from service.index.folder import IndexFormatError, load_meta, write_meta
from service.passages import VARIANTS, PassageIndex, PassageIndexError, PassageIndexMissingError
from service.passages import format as fmt
from service.passages.builder import (
    PassageIndexBuilder,
    PassageIndexBuildError,
    build_passage_index,
    compact,
    concat_passage_indexes,
)
from service.text.analysis import SUPPORTED_LANGS
from service.text.translation import TranslationTable

_WORDS = {
    "en": "valve spring seal pump steel rod housing lid hinge motor shaft gear wheel door glass",
    "de": "Ventil Feder Dichtung Pumpe Stahl Stange Gehäuse Deckel Scharnier Motor Welle Rad Tür Glas",
    "fr": "soupape ressort joint pompe acier tige boîtier couvercle charnière moteur arbre roue porte verre",
}
WORDS = {lang: words.split(" ") for lang, words in _WORDS.items()}
TABLES = {"de": TranslationTable({"ventil": {"valv": 0.7, "door": 0.3}, "fed": {"spring": 1.0}}, src="de"),
          "fr": TranslationTable({"soupap": {"valv": 1.0}}, src="fr")}


def _text(rng: random.Random, lang: str, n: int | None = None) -> str:
    n = n or rng.randint(1, 12)
    return " ".join(rng.choice([*WORDS[lang], "the", "and", "12", "H01F 27/14", "(4)"]) for _ in range(n))


def _section(rng: random.Random, lang: str, depth: int) -> Section:
    heading = rng.choice([None, None, _text(rng, lang, 2), "   ", "Background"])
    paras = [rng.choice([_text(rng, lang), _text(rng, lang), "  ", ""]) for _ in range(rng.randint(0, 4))]
    subs = [_section(rng, lang, depth + 1) for _ in range(rng.randint(0, 2 if depth < 3 else 0))]
    return Section(heading=heading, paragraphs=paras, sections=subs)


def random_record(rng: random.Random, i: int) -> PatentRecord:
    """Messy records: nested/headingless/blank sections, whitespace headings, blank abstracts, titles and
    claims, repeated claim numbers, claims in several languages, unset or unsupported record languages."""
    lang = rng.choice(["en", "en", "de", "fr", None, "ja"])
    dl = lang if lang in WORDS else "en"
    claims: dict[str, list[Claim]] = {}
    for cl in WORDS:
        if rng.random() < 0.5:
            claims[cl] = [Claim(num=rng.randint(1, 4), text=rng.choice([_text(rng, cl), " "]))
                          for _ in range(rng.randint(0, 5))]
    return PatentRecord(
        id=f"EP{i:07d}B1", country="EP", number=f"{i:07d}", kind="B1", source="synth", lang=lang,
        title={t: rng.choice([_text(rng, t, 3), "  "]) for t in WORDS if rng.random() < 0.6},
        abstract={t: rng.choice([_text(rng, t), " "]) for t in WORDS if rng.random() < 0.5},
        claims=claims, description=[_section(rng, dl, 0) for _ in range(rng.randint(0, 3))],
    )


def _same_run(a: list[tuple[str, str, float]], b: list[tuple[str, str, float]], tol: float = 1e-9) -> bool:
    """Equal runs up to the order of passages whose scores tie within ``tol``."""
    if len(a) != len(b) or any(abs(x[2] - y[2]) > tol for x, y in zip(a, b, strict=True)):
        return False
    last = a[-1][2] if a else 0.0
    return {x[1] for x in a if x[2] > last + tol} == {y[1] for y in b if y[2] > last + tol}


@pytest.mark.slow
def test_array_ranker_equals_the_per_record_reference_on_random_records() -> None:
    checked = 0
    for seed in range(60):
        rng = random.Random(seed)
        records = [random_record(rng, i) for i in range(rng.randint(1, 12))]
        index = PassageIndex.from_records(records)
        tables = TABLES if seed % 2 else None
        reference = PassageRanker(translations=tables, background=background_of(records))  # the index's collection
        order = rng.sample(range(len(records)), rng.randint(1, len(records)))
        excl = [rng.random() < 0.3 for _ in order]
        first = [rng.random() for _ in order]
        for lang in ("en", "de", "fr"):
            query = _text(rng, lang, rng.randint(1, 8))
            for variant in VARIANTS:
                sigma = rng.choice([0.5, 1.0, 2.0, 5.0])
                doc_score = rng.choice(["lm", "first_stage"])
                # the reference scores the records themselves: a document without claims is a copy without them
                cands = [(records[o].model_copy(update={"claims": {}}) if e else records[o], f)
                         for o, e, f in zip(order, excl, first, strict=True)]
                kwargs = {"variant": variant, "sigma": sigma, "doc_score": doc_score}
                try:
                    ref = reference.score(query, lang, cands, **kwargs)  # type: ignore[arg-type]
                except ValueError as exc:  # same error from both (a query of stop words only)
                    with pytest.raises(ValueError, match=re.escape(str(exc))):
                        index.score(query, lang, order, first, exclude_claims=excl, translations=tables,
                                    **kwargs)  # type: ignore[arg-type]
                    continue
                new = index.score(query, lang, order, first, exclude_claims=excl, translations=tables,
                                  **kwargs)  # type: ignore[arg-type]
                assert new.ids() == [(p.doc_id, p.passage_id) for t in ref.trees for p in t.passages]
                assert set(new.raw) == set(ref.raw)
                for key, want in ref.raw.items():
                    scale = float(np.max(np.abs(want))) if want.size else 0.0
                    assert np.allclose(new.raw[key], want, rtol=1e-9, atol=1e-12 * scale), (seed, lang, variant, key)
                for key in ("passage", "doc", "context", "first_stage"):
                    want, got = getattr(ref, key), getattr(new, key)
                    assert (want is None) == (got is None)
                    if want is not None:
                        assert np.allclose(got, want, rtol=0, atol=1e-9), (seed, lang, variant, key)
                for alpha, beta in ((0.3, 0.7), (1.0, 0.0), (0.0, 0.5)):
                    assert _same_run(new.run(alpha, beta, 7), ref.run(alpha, beta, 7)), (seed, lang, variant)
                checked += 1
    assert checked > 600


def test_large_vocabularies_use_a_bounded_term_lookup(monkeypatch: pytest.MonkeyPatch) -> None:
    from service.passages import ranker

    rng = random.Random(11)
    records = [random_record(rng, i) for i in range(10)]
    index = PassageIndex.from_records(records)
    query, rows = "valve spring seal pump steel housing", list(range(10))
    want = index.score(query, "en", rows, variant="qsf_passage_propagate")
    monkeypatch.setattr(ranker, "_QMAP_MAX_TERMS", 0)  # every vocabulary counts as large
    got = index.score(query, "en", rows, variant="qsf_passage_propagate")
    assert got.ids() == want.ids()
    for key in want.raw:
        assert np.array_equal(got.raw[key], want.raw[key]), key


def test_rank_hits_equal_the_reference_hits() -> None:
    rng = random.Random(5)
    records = [random_record(rng, i) for i in range(12)]
    index = PassageIndex.from_records(records)
    rows = list(range(12))
    first = [float(12 - i) for i in rows]
    reference = PassageRanker(translations=TABLES, background=background_of(records))
    for lang, query in (("en", "valve spring seal pump"), ("de", "Ventil Feder Dichtung"), ("fr", "soupape joint")):
        readable = {lang, "en"}
        docs = [(r, f) for r, f in zip(records, first, strict=True) if readable & set(r.languages)]
        want = reference.rank(query, lang, docs, k=15, langs=readable, alpha=0.4, beta=0.3)
        got = index.rank(query, lang, rows, first, translations=TABLES, k=15, langs=readable, alpha=0.4,
                         beta=0.3)
        assert got.skipped == len(records) - len(docs)
        assert _same_run([(h.doc_id, h.passage_id, h.score) for h in got.hits],
                         [(h.doc_id, h.passage_id, h.score) for h in want])
        by_id = {h.passage_id: h for h in want}
        for h in got.hits:
            ref = by_id.get(h.passage_id)
            if ref is None:
                continue
            assert (h.text, h.section_path, h.lang, h.highlights) == (ref.text, ref.section_path, ref.lang,
                                                                      ref.highlights)
            assert h.components == pytest.approx(ref.components, abs=1e-9)


def test_collection_statistics_count_every_text_of_every_language() -> None:
    # the passage LM's collection model: every title, heading, abstract, claim and paragraph, per language
    records = _records(20, seed=11)
    index = PassageIndex.from_records(records)
    want = background_of(records)  # counted from the records by the reference, analysed with the plain analyzers
    got = background_of_index(index)
    assert set(got) == set(want)
    for lang in want:
        assert got[lang].counts == want[lang].counts, lang
        assert int(index.lang_tokens[SUPPORTED_LANGS.index(lang)]) == want[lang].total
    assert all(int(index.lang_tokens[SUPPORTED_LANGS.index(lang)]) == 0 for lang in SUPPORTED_LANGS if lang not in want)


# ------------------------------------------------------------------------------------------- format


def _records(n: int, seed: int = 0) -> list[PatentRecord]:
    rng = random.Random(seed)
    return [random_record(rng, i) for i in range(n)]


@pytest.mark.slow
def test_index_folder_holds_a_registered_memory_mapped_passage_index(tmp_path: Path) -> None:
    from training.build import build_index

    corpus = tmp_path / "corpus.jsonl"
    records = _records(20)
    write_corpus(records, corpus)
    report = build_index(corpus, tmp_path / "idx", progress=False)
    meta = load_meta(tmp_path / "idx", verify=True)
    comp = meta.components["passages"]
    assert (comp["format"], comp["version"], comp["dir"]) == (fmt.PASSAGES_FORMAT, fmt.PASSAGES_VERSION, "passages")
    assert comp["n_docs"] == 20 and report.passages == comp
    assert comp["bytes"] == sum(info["bytes"] for rel, info in meta.files.items() if rel.startswith("passages/"))
    assert comp["bytes_per_doc"] == pytest.approx(comp["bytes"] / 20)
    assert {f"passages/{name}" for name in fmt.files()} <= set(meta.files)  # every file checksummed
    index = PassageIndex.load(tmp_path / "idx")
    assert isinstance(index.post_unit.base, np.memmap) or isinstance(index.post_unit, np.memmap)
    assert index.unit_tag.dtype == np.uint8 and index.post_count.dtype == np.uint8  # compact dtypes
    assert index.term_id.dtype == np.int32 and index.docs.dtype == np.int64
    assert [index.doc_id(i) for i in range(20)] == [r.id for r in records]
    # the same scores as an index built in memory from the records
    mem = PassageIndex.from_records(records)
    a = index.score("valve spring", "en", list(range(20)), variant="qsf_section_propagate")
    b = mem.score("valve spring", "en", list(range(20)), variant="qsf_section_propagate")
    assert a.ids() == b.ids() and np.array_equal(a.passage, b.passage) and np.array_equal(a.context, b.context)


def test_compact_picks_the_smallest_integer_dtype() -> None:
    assert compact(np.array([0, 255])).dtype == np.uint8
    assert compact(np.array([0, 256])).dtype == np.uint16
    assert compact(np.array([-1, 127])).dtype == np.int8
    assert compact(np.array([-1, 40_000])).dtype == np.int32
    assert compact(np.array([], dtype=np.int64)).dtype == np.uint8


def test_batches_concatenate_to_the_index_of_all_documents(tmp_path: Path) -> None:
    records = _records(15, seed=3)
    parts = []
    for i, (lo, hi) in enumerate(((0, 6), (6, 7), (7, 15))):
        builder = PassageIndexBuilder(tmp_path / f"part{i}")
        for rec in records[lo:hi]:
            builder.add(rec)
        builder.finish()
        parts.append(tmp_path / f"part{i}")
    whole = PassageIndexBuilder(tmp_path / "whole")
    for rec in records:
        whole.add(rec)
    info = whole.finish()
    joined = concat_passage_indexes(parts, tmp_path / "joined")
    same = [k for k in info if "bytes" not in k and k != "dir"]
    assert {k: joined[k] for k in same} == {k: info[k] for k in same}
    for name in fmt.files():
        a, b = tmp_path / "whole" / name, tmp_path / "joined" / name
        if name.endswith(".bin"):
            assert a.read_bytes() == b.read_bytes(), name
        else:
            x, y = np.load(a), np.load(b)
            assert np.array_equal(x, y), name  # values; dtypes may differ when a part is smaller
    with pytest.raises(PassageIndexBuildError, match="not empty"):
        concat_passage_indexes(parts, tmp_path / "joined")


def test_builder_refuses_a_non_empty_folder_and_a_second_finish(tmp_path: Path) -> None:
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "f").write_text("x")
    with pytest.raises(PassageIndexBuildError, match="not empty"):
        PassageIndexBuilder(tmp_path / "x")
    builder = PassageIndexBuilder(tmp_path / "y")
    builder.add(_records(1)[0])
    builder.finish()
    with pytest.raises(RuntimeError, match="finished"):
        builder.finish()
    with pytest.raises(RuntimeError, match="finished"):
        builder.add(_records(1)[0])


def _index_without_passages(tmp_path: Path) -> Path:
    from training.build import build_index

    corpus = tmp_path / "corpus.jsonl"
    write_corpus([PatentRecord(id="EP0000001B1", country="EP", number="0000001", kind="B1", source="synth",
                               lang="en", title={"en": "Valve"},
                               claims={"en": [Claim(num=1, text="A valve with a spring.")]},
                               description=[Section(paragraphs=["The valve has a spring."])])], corpus)
    idx = tmp_path / "idx"
    build_index(corpus, idx, progress=False)
    # the folder as a build before the passage index wrote it
    meta = json.loads((idx / "meta.json").read_text())
    shutil.rmtree(idx / fmt.PASSAGES_DIR)
    del meta["components"]["passages"]
    write_meta(idx, meta["settings"], meta["components"], created=meta["created"])
    return idx


@pytest.mark.slow
def test_an_index_built_before_passages_were_indexed_says_rebuild(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from service.api.app import create_app
    from service.engine import Engine
    from service.settings import Settings

    idx = _index_without_passages(tmp_path)
    with pytest.raises(PassageIndexMissingError, match="rebuild the index with `priorart build`"):
        PassageIndex.load(idx)
    engine = Engine.load(idx)  # search still works; the notice says what is missing
    assert any("no passage index" in n for n in engine.notices)
    with TestClient(create_app(Settings(index_dir=idx))) as client:
        assert client.post("/search", json={"query": "valve spring"}).status_code == 200
        r = client.post("/passages", json={"query": "valve spring"})
        assert r.status_code == 422 and "rebuild the index with `priorart build`" in r.json()["detail"]
        assert client.get("/health").json()["passages"] is None


@pytest.mark.slow
def test_unusable_passage_folders_are_refused_with_a_clear_message(tmp_path: Path) -> None:
    from training.build import build_index

    corpus = tmp_path / "corpus.jsonl"
    write_corpus(_records(4), corpus)
    idx = tmp_path / "idx"
    build_index(corpus, idx, progress=False)
    meta = json.loads((idx / "meta.json").read_text())
    meta["components"]["passages"]["version"] = 99
    write_meta(idx, meta["settings"], meta["components"], created=meta["created"])
    with pytest.raises(PassageIndexError, match="version 99.*rebuild"):
        PassageIndex.load(idx)
    meta["components"]["passages"]["version"] = fmt.PASSAGES_VERSION
    write_meta(idx, meta["settings"], meta["components"], created=meta["created"])
    np.save(idx / fmt.PASSAGES_DIR / fmt.UNIT_LEN, np.zeros(3, dtype=np.uint8))  # wrong length
    with pytest.raises(IndexFormatError, match="unit_len.npy has .* bytes, meta.json says"):
        PassageIndex.load(idx)  # meta.json's sizes catch a changed file first
    with pytest.raises(PassageIndexError, match="unit_len.npy: shape"):
        PassageIndex.open(idx / fmt.PASSAGES_DIR)
    (idx / fmt.PASSAGES_DIR / fmt.UNIT_LEN).unlink()
    with pytest.raises(PassageIndexError, match="unit_len.npy is unreadable"):
        PassageIndex.open(idx / fmt.PASSAGES_DIR)


@pytest.mark.slow
def test_build_passage_index_reads_the_doc_store_in_row_order(tmp_path: Path) -> None:
    from training.build import build_index

    corpus = tmp_path / "corpus.jsonl"
    records = _records(6, seed=9)
    write_corpus(records, corpus)
    idx = tmp_path / "idx"
    build_index(corpus, idx, progress=False)
    before = (idx / "passages" / fmt.TERM_ID).read_bytes()
    comp = build_passage_index(idx, progress=False)  # rebuilds the folder in place
    assert comp["n_docs"] == 6 and comp["seconds"] >= 0
    assert (idx / "passages" / fmt.TERM_ID).read_bytes() == before
