"""The parts of an index as a whole (the index-level half of the component registry, service/index/components.py).

The translation tables, the compound word lists, the fusion weights, the learned ranker, the word vectors its kernel
features read, the code classifier and the code vectors are learned once from the whole corpus by the training package's
steps and shared by every segment of the index (a segment is analysed with the index's word lists). Each is one class
with its ``name`` (its key in ``meta.json``) and format ``version``: ``write(out, value)`` writes what a training step
learned at the top of a folder and returns its ``meta.json`` entry, ``open(folder)`` reads it back (a file's object is
reused while the file is unchanged: service/filecache.py), ``copy(src, out)`` gives another folder of the same index (a
shard) the same part. They are never merged: a merge or a compaction writes segments, and the index-level files stay at
the top of the folder. This module sits in the index layer, below the first stage and the fusion that open them.

Adding an index-level part is one class here and its line in :data:`INDEX_PARTS`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from service.code_classifier import CodeClassifier
from service.code_vectors import CodeVectors
from service.filecache import load_shared
from service.index.folder import FolderPart, IndexFolder, IndexFormatError, Layout
from service.text.analysis import Analyzer
from service.text.compounds import ANALYSIS_VERSION, CompoundSplitter, load_analyzers
from service.text.translation import TABLE_VERSION, TranslationTable
from service.text.word_vectors import WordVectors
from service.versioned import read_versioned, write_versioned

FUSION_FORMAT = "priorart-fusion"
FUSION_VERSION = 2
"""``fusion.json``: the fusion weights of every method (:class:`service.fusion.FusionModel` reads the body)."""


class IndexPart(FolderPart):
    """One part of the index as a whole (see the module doc)."""

    def write(self, out: Path, value: Any) -> Any:
        """Write ``value`` (what a training step learned) into the folder ``out``; its ``meta.json`` entry."""
        raise NotImplementedError

    def copy(self, src: IndexFolder, out: Path) -> Any:
        """The same part in another folder of the index (a shard): its entry there."""
        return self.write(out, self.open(src))


class TranslationPart(IndexPart):
    """The PSQ translation tables of every direction, one ``translation/<src>-<tgt>.json`` each
    (:class:`service.text.translation.TranslationTable`); ``meta.json`` lists them under ``translation``."""

    name = "translation"

    @property
    def version(self) -> int:
        return TABLE_VERSION

    def write(self, out: Path, value: Any) -> list[dict[str, Any]]:
        tables: list[TranslationTable] = sorted(value, key=lambda t: (t.src, t.tgt))
        entries = []
        for table in tables:
            table.save(out / Layout.table(table.src, table.tgt))
            entries.append({"src": table.src, "tgt": table.tgt, "file": Layout.table(table.src, table.tgt),
                            "entries": len(table), "sources": table.sources})
        return entries

    def open(self, folder: IndexFolder, **options: Any) -> list[TranslationTable]:
        """The tables (each file read once while it is unchanged: a reload reuses them, service/filecache.py)."""
        tables = []
        for entry in folder.components.get(self.name, []):
            try:
                tables.append(load_shared(folder.path(entry["file"]), TranslationTable.load))
            except (KeyError, TypeError, ValueError) as exc:
                raise IndexFormatError(f"{folder.path(Layout.META)}: bad translation entry {entry!r}: {exc}") from exc
        return tables


class AnalysisPart(IndexPart):
    """The compound splitters' word lists, one ``analysis/compounds-<lang>.json`` each; recorded in ``meta.json``
    ``settings.analysis`` (they change how the index's text was analysed, so they are part of its settings)."""

    name = "analysis"

    @property
    def version(self) -> int:
        return ANALYSIS_VERSION

    def present(self, folder: IndexFolder) -> bool:
        return bool(folder.settings.analysis)

    def write(self, out: Path, value: Any) -> dict[str, Any] | None:
        """``value``: ``{lang: CompoundSplitter}``; returns ``settings.analysis`` (None without splitters)."""
        splitters: Mapping[str, CompoundSplitter] = value
        if not splitters:
            return None
        compounds = {}
        for lang, splitter in sorted(splitters.items()):
            rel = Layout.compounds(lang)
            splitter.save(out / rel)
            compounds[lang] = {"file": rel, **splitter.settings(), "sources": splitter.sources}
        return {"version": ANALYSIS_VERSION, "compounds": compounds}

    def open(self, folder: IndexFolder, **options: Any) -> dict[str, Analyzer]:
        """The analyzers of the languages with a splitter (the others analyse with the default)."""
        try:
            return load_analyzers(folder.root, folder.settings.analysis)
        except ValueError as exc:
            raise IndexFormatError(f"{folder.path(Layout.META)}: settings.analysis: {exc}") from exc

    def copy(self, src: IndexFolder, out: Path) -> dict[str, Any] | None:
        return self.write(out, {lang: a.splitter for lang, a in self.open(src).items()
                                if isinstance(a.splitter, CompoundSplitter)})


class FusionPart(IndexPart):
    """The fusion weights of every method (``fusion.json``, format ``priorart-fusion``): written by ``priorart fuse``
    and ``train-ltr --install``; :meth:`service.fusion.FusionModel.of_folder` builds the model from the body."""

    name = "fusion"

    @property
    def version(self) -> int:
        return FUSION_VERSION

    def write(self, out: Path, value: Any) -> dict[str, Any]:
        """``value``: the file's body (``FusionModel.to_json()``); the entry's ``version`` and ``file``."""
        write_versioned(out / Layout.FUSION, FUSION_FORMAT, FUSION_VERSION, value)
        return {"version": FUSION_VERSION, "file": Layout.FUSION}

    def open(self, folder: IndexFolder, **options: Any) -> dict[str, Any] | None:
        """The body of ``fusion.json`` (None when the index has none); ``options['error']``: the exception class
        for an unreadable file (``IndexFormatError`` by default)."""
        if not self.present(folder):
            return None
        return read_versioned(folder.path(Layout.FUSION), FUSION_FORMAT, FUSION_VERSION,
                              error=options.get("error", IndexFormatError), fix="relearn it with `priorart fuse INDEX`")

    def copy(self, src: IndexFolder, out: Path) -> dict[str, Any] | None:
        body = self.open(src)
        return None if body is None else {**src.components[self.name], **self.write(out, body)}


RANKER_FORMAT = "priorart-ranker"
RANKER_VERSION = 1
"""``ranker/ranker.json``: the learned ranker's kind, features, the first documents it orders, its model (trees) or
the file of it (ONNX), and the report of the experiment that installed it."""


class RankerPart(IndexPart):
    """The learned ranker over the first documents' evidence (``ranker/``: ``ranker.json``, and ``model.onnx`` for a
    network): installed by ``priorart build --ranker`` (default: the project's, written by ``priorart-lab experiment
    ranking --ranker-out`` where it won held out);
    :meth:`service.ranker.RankerModel.of_part` builds the model from what :meth:`open` returns."""

    name = "ranker"

    @property
    def version(self) -> int:
        return RANKER_VERSION

    def write(self, out: Path, value: Any) -> dict[str, Any]:
        """``value``: ``{"body": the ranker.json body, "files": {name: bytes}}`` (the ONNX graph of a network)."""
        body: Mapping[str, Any] = value["body"]
        files: Mapping[str, bytes] = value.get("files", {})
        folder = out / Layout.RANKER
        folder.mkdir(parents=True, exist_ok=True)
        for name, data in files.items():
            (folder / name).write_bytes(data)
        write_versioned(out / Layout.RANKER_META, RANKER_FORMAT, RANKER_VERSION, body)
        return {"version": RANKER_VERSION, "file": Layout.RANKER_META, "kind": body.get("kind"),
                "docs": body.get("docs"), "files": [f"{Layout.RANKER}/{name}" for name in sorted(files)]}

    def open(self, folder: IndexFolder, **options: Any) -> tuple[dict[str, Any], Path] | None:
        """The ``ranker.json`` body and the folder of its files (None when the index has no ranker)."""
        if not self.present(folder):
            return None
        body = read_versioned(folder.path(Layout.RANKER_META), RANKER_FORMAT, RANKER_VERSION, error=IndexFormatError,
                              fix="install it again (priorart install-ranker INDEX)")
        return dict(body), folder.path(Layout.RANKER)

    def copy(self, src: IndexFolder, out: Path) -> dict[str, Any] | None:
        got = self.open(src)
        if got is None:
            return None
        body, where = got
        return self.write(out, {"body": body, "files": {p.name: p.read_bytes() for p in sorted(where.iterdir())
                                                        if p.name != Path(Layout.RANKER_META).name}})


class SavedPart(IndexPart):
    """A part that is one object saved in a folder of its own at the top of the index (``kind.save(dir)``,
    ``kind.load(dir)``): its ``meta.json`` entry names the folder and the format version, and what :meth:`describe`
    says of it; :meth:`open` gives None where the index has none, and refuses another version or an unreadable folder,
    saying what writes it again (``again``)."""

    kind: ClassVar[Any]  # the class saved (its save(dir) and classmethod load(dir))
    directory: ClassVar[str]  # its folder (a Layout name)
    format_version: ClassVar[int]
    what: ClassVar[str]  # what it is, in the messages
    again: ClassVar[str]  # what writes it again

    @property
    def version(self) -> int:
        return self.format_version

    def describe(self, value: Any) -> dict[str, Any]:
        """What the ``meta.json`` entry says of ``value`` besides its folder and version."""
        raise NotImplementedError

    def write(self, out: Path, value: Any) -> dict[str, Any]:
        value.save(out / self.directory)
        return {"version": self.format_version, "dir": self.directory, **self.describe(value)}

    def open(self, folder: IndexFolder, **options: Any) -> Any:
        """The object (None when the index has none)."""
        if not self.present(folder):
            return None
        entry = folder.components[self.name]
        if entry.get("version") != self.format_version:
            raise IndexFormatError(f"{folder.path(Layout.META)}: {self.what} of version {entry.get('version')}, "
                                   f"this code reads {self.format_version}; {self.again}")
        try:
            return self.kind.load(folder.path(entry["dir"]))
        except (KeyError, OSError, ValueError) as exc:
            raise IndexFormatError(f"{folder.path(self.directory)}: {exc}; {self.again}") from exc


class WordVectorsPart(SavedPart):
    """Word vectors of the index's own terms (``word_vectors/``, :class:`service.text.word_vectors.WordVectors`),
    trained on its passages where a ranker that reads the kernel features is installed (service/kernel_pooling.py;
    :func:`training.word_vectors.train_word_vectors`). Terms of documents added later have none: they match exactly
    only."""

    name = "word_vectors"
    kind, directory, format_version = WordVectors, Layout.WORD_VECTORS, 1
    what, again = "word vectors", "install the ranker again (priorart install-ranker INDEX)"

    def describe(self, value: WordVectors) -> dict[str, Any]:
        return {"terms": len(value), "dim": value.dim}


class CodeClassifierPart(SavedPart):
    """The code classifier (``code_classifier/``, :class:`service.code_classifier.CodeClassifier`): BM25
    profiles of the CPC titles' subclasses and main groups over the English analysis, written by the build where it
    had a CPC title list that knows the corpus' codes (:func:`training.code_classifier.index_classifier`)."""

    name = "code_classifier"
    kind, directory, format_version = CodeClassifier, Layout.CODE_CLASSIFIER, 1
    what, again = "a code classifier", "build the index again"

    def describe(self, value: CodeClassifier) -> dict[str, Any]:
        return {"terms": len(value.terms), "codes": {level: len(codes) for level, (codes, _) in value.levels.items()}}


class CodeVectorsPart(SavedPart):
    """Vectors of the index's classification codes (``code_vectors/``, :class:`service.code_vectors.CodeVectors`),
    learned by DeepWalk over their tree where a ranker that reads the code-embedding feature is installed
    (:func:`training.code_vectors.train_code_vectors`)."""

    name = "code_vectors"
    kind, directory, format_version = CodeVectors, Layout.CODE_VECTORS, 1
    what, again = "code vectors", "install the ranker again (priorart install-ranker INDEX)"

    def describe(self, value: CodeVectors) -> dict[str, Any]:
        return {"codes": len(value), "dim": value.dim}


INDEX_PARTS: dict[str, IndexPart] = {p.name: p for p in (TranslationPart(), AnalysisPart(), FusionPart(),
                                                         RankerPart(), WordVectorsPart(), CodeClassifierPart(),
                                                         CodeVectorsPart())}
"""Every part of the index as a whole (see the module doc)."""


def write_part(name: str, out: Path, value: Any) -> Any:
    """Write the index-level part ``name`` (what a training step learned) into ``out``; its ``meta.json`` entry."""
    return INDEX_PARTS[name].write(out, value)


def open_part(name: str, folder: IndexFolder, **options: Any) -> Any:
    """The index-level part ``name`` of an opened folder (:meth:`IndexPart.open`)."""
    return INDEX_PARTS[name].open(folder, **options)


def copy_part(name: str, src: IndexFolder, out: Path) -> Any:
    """The index-level part ``name`` of ``src`` written into ``out`` (another folder of the same index)."""
    return INDEX_PARTS[name].copy(src, out)


__all__ = ["FUSION_FORMAT", "FUSION_VERSION", "INDEX_PARTS", "RANKER_FORMAT",
           "RANKER_VERSION", "AnalysisPart", "CodeClassifierPart", "FusionPart", "IndexPart", "RankerPart",
           "CodeVectorsPart", "SavedPart", "TranslationPart", "WordVectorsPart", "copy_part", "open_part", "write_part"]
