"""The index components' registry (issue 32 item 1): a new kind of per-document component is one class and its line
in ``COMPONENTS``; the build, ``add``, the merges and compaction write it, the engine's loader opens it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import service.index.components as components
from service.corpus.jsonl import read_corpus
from service.corpus.record import PatentRecord
from service.index.components import (
    COMPONENTS,
    Component,
    ComponentWriter,
    WriteContext,
    open_component,
)
from service.index.folder import IndexFolder, Layout
from service.index.live import add_documents, compact, delete_documents
from service.index.store import DocStore
from training.build import build_index


class TitleLengths(Component):
    """A toy component: the length of each document's title, one int32 per row (``titlelen.npy``)."""

    name = "titlelen"

    @property
    def version(self) -> int:
        return 1

    def writer(self, out: Path, ctx: WriteContext) -> ComponentWriter:
        return _TitleWriter(out)

    def open(self, folder: IndexFolder, **options: Any) -> np.ndarray:
        whole = folder.one_build
        if whole is not None:
            return np.load(whole.path("titlelen.npy"))
        return np.concatenate([np.load(s.folder.path("titlelen.npy")) for s in folder.segments])


class _TitleWriter:
    def __init__(self, out: Path) -> None:
        self.out, self.lengths = out, []  # type: ignore[var-annotated]

    def add(self, record: PatentRecord) -> None:
        self.lengths.append(len(record.title))

    def finish(self) -> dict[str, Any]:
        np.save(self.out / "titlelen.npy", np.asarray(self.lengths, dtype=np.int32))
        return {"version": 1, "file": "titlelen.npy", "n_docs": len(self.lengths)}

    def abort(self) -> None:
        pass


def _expected(folder: IndexFolder) -> np.ndarray:
    docs = DocStore.of_folder(folder)
    try:
        return np.asarray([len(docs.get_row(r).title) for r in range(folder.n_rows)], dtype=np.int32)
    finally:
        docs.close()


@pytest.mark.slow
def test_a_new_component_is_one_class_and_the_registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from training.synth import SynthConfig, write_synthetic

    monkeypatch.setitem(components.COMPONENTS, "titlelen", TitleLengths())
    write_synthetic(tmp_path / "all.jsonl", SynthConfig(n=190, seed=4), progress=False)
    records = list(read_corpus(tmp_path / "all.jsonl"))
    idx = tmp_path / "index"
    build_index(records[:120], idx, translation=False, compounds="", progress=False)
    folder = IndexFolder.open(idx)  # the build wrote it, registered it and checksummed its file
    assert folder.component("titlelen") == {"version": 1, "file": "titlelen.npy", "n_docs": 120}
    assert "titlelen.npy" in folder.meta.files
    assert np.array_equal(open_component("titlelen", folder), _expected(folder))

    for i in range(5):  # five adds of 10 with merges of 2 neighbours: segments written and merged
        add_documents(idx, records[120 + 10 * i: 130 + 10 * i], progress=False, merge_factor=2)
        folder = IndexFolder.open(idx)
        for seg in folder.segments:
            entry = seg.folder.component("titlelen")
            assert entry["n_docs"] == seg.n_rows
        assert np.array_equal(open_component("titlelen", folder), _expected(folder))
    manifests = sorted((idx / Layout.GENERATIONS).glob("gen-*.json"))
    ops = [json.loads(p.read_text())["operation"]["kind"] for p in manifests]
    assert "merge" in ops, ops  # a merge wrote the component from its rows' records

    delete_documents(idx, [records[3].id, records[125].id])
    compact(idx, progress=False)
    folder = IndexFolder.open(idx)
    assert len(folder.segments) == 1 and folder.n_rows == 168
    got = open_component("titlelen", folder)
    assert np.array_equal(got, _expected(folder))
    live_titles = [len(r.title) for r in records[:170] if r.id not in {records[3].id, records[125].id}]
    assert sorted(got.tolist()) == sorted(live_titles)


def test_registry_names_the_build_s_components_with_their_versions(tmp_path: Path) -> None:
    from training.synth import SynthConfig, write_synthetic

    write_synthetic(tmp_path / "all.jsonl", SynthConfig(n=40, seed=2), progress=False)
    build_index(tmp_path / "all.jsonl", tmp_path / "index", translation=False, compounds="", progress=False)
    folder = IndexFolder.open(tmp_path / "index")
    written = [name for name, c in COMPONENTS.items() if c.present(folder)]
    assert written == ["docstore", "bm25", "words", "passages", "dense"]  # no models: the pretrained encoder's vectors
    assert folder.component("passages")["version"] == COMPONENTS["passages"].version
    sparse = open_component("bm25", folder)
    assert set(sparse) == set(folder.settings.index_langs)
    assert all(index.n_docs <= 40 for index in sparse.values())
    docs = open_component("docstore", folder)
    assert len(docs) == 40
    docs.close()
    with pytest.raises(NotImplementedError):
        Component().version  # noqa: B018  (the contract: every component says its format version)


def test_a_failed_write_leaves_no_open_file(tmp_path: Path) -> None:
    """A writer that fails aborts every writer (the doc store's files closed), and nothing is returned."""
    from service.index.folder import FIELDS, BuildSettings

    class Boom(RuntimeError):
        pass

    def records() -> Any:
        from training.synth import SynthConfig, write_synthetic

        write_synthetic(tmp_path / "all.jsonl", SynthConfig(n=5, seed=1), progress=False)
        yield from read_corpus(tmp_path / "all.jsonl")
        raise Boom("the corpus broke")

    out = tmp_path / "out"
    out.mkdir()
    settings = BuildSettings(fields=FIELDS, index_langs=("en", "de", "fr"), scoring="bm25", k1=1.2, b=0.75,
                             epsilon=0.25)
    ctx = WriteContext(settings, {lang: str.split for lang in settings.index_langs})
    with pytest.raises(Boom):
        components.write_components(out, records(), ctx)
    assert not (out / Layout.OFFSETS).exists()  # the arrays are written at finish only


@pytest.mark.slow
def test_the_index_level_parts_are_written_opened_shared_and_copied_through_the_registry(tmp_path: Path) -> None:
    """The translation tables, the compound word lists, the fusion weights, the learned ranker and its word vectors
    (service/index/parts.py): the build writes them through the registry and the loaders open them through it; a
    segment holds none of them (it shares the index's: a reload after an add reuses the same objects); a compaction
    keeps them; ``copy_part`` gives another folder the same parts (a shard)."""
    from service.fusion import FusionModel
    from service.index.parts import INDEX_PARTS, copy_part, open_part, write_part
    from service.text.translation import TABLE_VERSION, TranslationTable
    from training.synth import SynthConfig, write_synthetic

    write_synthetic(tmp_path / "all.jsonl", SynthConfig(n=160, seed=6), progress=False)
    records = list(read_corpus(tmp_path / "all.jsonl"))
    idx = tmp_path / "index"
    build_index(records[:140], idx, progress=False)
    folder = IndexFolder.open(idx)
    # no models; the dense stage's fusion weights, the project's ranker (training/rankers/default, priorart build's
    # default) and the word vectors its kernel features read
    assert [n for n, p in INDEX_PARTS.items() if p.present(folder)] == ["translation", "analysis", "fusion", "ranker",
                                                                        "word_vectors"]
    vectors = open_part("word_vectors", folder)
    assert vectors is not None and folder.components["word_vectors"]["terms"] == len(vectors) > 0
    tables = open_part("translation", folder)
    assert tables and INDEX_PARTS["translation"].version == TABLE_VERSION
    entries = folder.components["translation"]
    assert [(t.src, t.tgt) for t in tables] == [(e["src"], e["tgt"]) for e in entries]
    for t, e in zip(tables, entries, strict=True):
        assert e["entries"] == len(t) and TranslationTable.load(folder.path(e["file"])).entries == t.entries
    analyzers = open_part("analysis", folder)
    assert set(analyzers) == set(folder.settings.analysis["compounds"]) and "de" in analyzers

    add_documents(idx, records[140:], progress=False)
    gen = IndexFolder.open(idx)
    seg = gen.segments[-1].folder
    assert not seg.path(Layout.TRANSLATION).exists() and not seg.path(Layout.ANALYSIS).exists()
    assert all(a is b for a, b in zip(open_part("translation", gen), tables, strict=True))  # the same objects
    assert open_part("analysis", gen)["de"].splitter is analyzers["de"].splitter
    compact(idx, progress=False)
    compacted = IndexFolder.open(idx)
    assert [(t.src, t.tgt) for t in open_part("translation", compacted)] == [(t.src, t.tgt) for t in tables]
    assert open_part("word_vectors", compacted).keys == vectors.keys  # kept, not trained again

    other = tmp_path / "shard"
    other.mkdir()
    copied = copy_part("translation", folder, other)
    assert [(e["src"], e["tgt"], e["entries"]) for e in copied] == [(e["src"], e["tgt"], e["entries"])
                                                                    for e in entries]
    assert copy_part("analysis", folder, other) == folder.settings.analysis
    assert copy_part("fusion", folder, other) == {"version": INDEX_PARTS["fusion"].version, "file": Layout.FUSION}
    assert (other / Layout.FUSION).read_bytes() == folder.path(Layout.FUSION).read_bytes()  # the dense stage's weights
    ranker_body, _ = open_part("ranker", folder)
    assert copy_part("ranker", folder, other)["kind"] == ranker_body["kind"]
    assert (other / Layout.RANKER_META).read_bytes() == folder.path(Layout.RANKER_META).read_bytes()
    assert copy_part("word_vectors", folder, other)["terms"] == len(vectors)

    body = FusionModel.bm25_only("a test's reason").to_json()
    assert write_part("fusion", idx, body) == {"version": INDEX_PARTS["fusion"].version, "file": Layout.FUSION}
    compacted.register({"fusion": {"version": INDEX_PARTS["fusion"].version, "file": Layout.FUSION}},
                       changed=[Layout.FUSION])
    reopened = IndexFolder.open(idx)
    assert open_part("fusion", reopened)["sources"] == {"linear": "a test's reason"}
    assert FusionModel.of_folder(reopened).sources == {"linear": "a test's reason"}


class _Folder:
    """What a part reads of an index folder: its ``meta.json`` entries and its paths."""

    def __init__(self, root: Path, components: dict[str, Any]) -> None:
        self.root, self.components = root, components

    def has(self, name: str) -> bool:
        return name in self.components

    def path(self, rel: str) -> Path:
        return self.root / rel


def test_a_saved_part_writes_its_folder_and_refuses_another_version_or_an_unreadable_one(tmp_path: Path) -> None:
    """The parts that are one saved object (word vectors, code vectors, the code classifier: SavedPart): the entry
    names the folder and the version; another version, or a folder that cannot be read, is refused saying what writes
    it again; an index without the part opens to None."""
    from service.code_vectors import CodeVectors
    from service.index.folder import IndexFormatError
    from service.index.parts import INDEX_PARTS, SavedPart
    from service.text.word_vectors import WordVectors

    saved = {n: p for n, p in INDEX_PARTS.items() if isinstance(p, SavedPart)}
    assert sorted(saved) == ["code_classifier", "code_vectors", "word_vectors"]
    assert len({p.directory for p in saved.values()}) == 3
    values = {"word_vectors": (WordVectors(["de\0rad", "en\0wheel"], np.eye(2)), {"terms": 2, "dim": 2}),
              "code_vectors": (CodeVectors(["B60B", "B60B1/00"], np.eye(2)), {"codes": 2, "dim": 2})}
    for name, (value, described) in values.items():
        part = saved[name]
        entry = part.write(tmp_path, value)
        assert entry == {"version": part.version, "dir": part.directory, **described}
        got = part.open(_Folder(tmp_path, {name: entry}))  # type: ignore[arg-type]
        assert isinstance(got, type(value)) and np.array_equal(got.vectors, value.vectors)
        assert part.open(_Folder(tmp_path, {})) is None  # type: ignore[arg-type]
        with pytest.raises(IndexFormatError, match=f"of version {part.version + 1}, this code reads {part.version}; "
                                                   "install the ranker again"):
            part.open(_Folder(tmp_path, {name: {**entry, "version": part.version + 1}}))  # type: ignore[arg-type]
        with pytest.raises(IndexFormatError, match=f"{part.directory}.*install the ranker again"):
            part.open(_Folder(tmp_path, {name: {**entry, "dir": "nowhere"}}))  # type: ignore[arg-type]
