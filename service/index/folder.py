"""The index folder: the one place that knows its layout, its format tags and ``meta.json``.

Layout (every path below is relative to the folder; :class:`Layout` names each one)::

    meta.json              format + version, the build settings, every file with sha256 and size,
                           and one entry per component under ``components`` (each with its version)
    docs.jsonl             the records (doc store)      docs.offsets.npy  byte offset of each record, N+1
    doc_ids.json           row -> publication id        docs.dates.npy    publication day per row
    codes/<level>.*        IPC/CPC codes per level (filters)
    bm25/<lang>/           sparse index per indexed language (service/retrieval/sparse.py)
    translation/<s>-<t>.json  PSQ translation tables (service/text/translation.py): de-en, fr-en, en-de, en-fr
    analysis/compounds-<lang>.json  compound splitter word list (service/text/compounds.py; settings.analysis)
    models/                the ONNX models and vocabularies (service/retrieval/neural.py)
    dense/vectors.npy, dense/index.faiss     dual-encoder vectors + FAISS (service/retrieval/dense.py)
    rerank/<encoding>.npy  the rankers' document encodings (service/stages/rerank.py)
    ltr/                   word-pair and domain stores and models (service/stages/ltr.py)
    passages/              the passage index: every document's passage tree as arrays (service/passages/)
    fusion.json, fusion.png  the fusion weights of every method, the cross-validation report (service/fusion.py)
    generations/gen-NNNNNN.json  a live index's generations (``priorart add``/``delete``/``compact``): the
                           segments of the collection and the rows deleted in each, written last (fsynced, renamed)
    segments/seg-NNNNNN/   a segment: a self-contained folder of the same layout (its own meta.json) built by
                           ``priorart add`` for one batch (doc store, bm25, passages, dense/rerank vectors)
    .lock                  taken (flock) by the writers of generations

A sharded index (``priorart build --shards N``) is a folder whose ``meta.json`` has the format
``priorart-sharded-index`` (an older reader refuses it, naming that format) and lists its shards::

    meta.json              format priorart-sharded-index: the shards, the routing rule, the build settings
    shards/shard-NNN/      one index folder per shard (the layout above, its own generations and segments),
                           a ``shard`` component in its meta.json (its number, how many); the build's
                           translation tables, compound word lists and models are in every shard

:class:`ShardSet` opens every shard at its newest generation; :meth:`ShardSet.union` presents them as one
row space (the shards' rows in turn, each shard's segments in turn), which the doc store and the passage
index read like a live index's segments. A new record goes to the shard where its id is live, else to
``ShardSet.shard_for`` (a stable hash of its family key).

Generations. A folder that ``priorart build`` wrote is generation 0 with one segment, the folder itself.
The newest ``generations/gen-*.json`` names the segments in row order (``"."`` is the folder itself) and
the deleted rows of each; :meth:`IndexFolder.open` opens that generation (every segment's ``meta.json``
checked, its sha256 compared with the manifest's), and the loaders present the union of the segments as
one row space (rows of segment 1, then segment 2, ...; deleted rows stay as holes that no result,
filter or lookup returns).

:meth:`IndexFolder.open` reads ``meta.json`` once and checks the format, the version, the settings
and every file (size always, sha256 with ``verify=True``); every loader of the service then receives
the opened folder and reads its own component from it, so a folder is verified once per load.
Writers register what they add with :meth:`IndexFolder.register`, which checksums only the files
named as new or changed (a build adds parts one after another without re-hashing the folder each
time) and writes ``meta.json`` atomically, last.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import re
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from service import __version__
from service.filecache import verified
from service.phases import timed
from service.text.analysis import SUPPORTED_LANGS
from service.versioned import read_versioned, write_versioned

log = logging.getLogger(__name__)

INDEX_FORMAT = "priorart-index"
SHARDS_FORMAT = "priorart-sharded-index"
SHARDS_VERSION = 1
INDEX_VERSION = 2
"""Version 2: fusion weights of every method in one ``fusion.json`` at the top of the folder (version 1
kept them in ``models/fusion.json`` and ``ltr/combine.json``)."""

FIELDS = ("title", "abstract", "claims", "description")
SCORINGS = ("bm25", "tfidf")
_CHUNK = 1 << 20


class IndexFormatError(ValueError):
    """An index folder that cannot be used: missing/changed files, other format, bad settings."""


class ShardedIndexError(IndexFormatError):
    """A sharded index opened where one index folder was expected (open it with :class:`ShardSet`)."""


class Layout:
    """Relative paths of everything an index folder may hold."""

    META = "meta.json"
    DOCS = "docs.jsonl"
    OFFSETS = "docs.offsets.npy"
    HEADERS = "docs.headers.jsonl"  # each record without its texts: what a hit list shows
    HEADER_OFFSETS = "docs.headers.offsets.npy"
    IDS = "doc_ids.json"
    DATES = "docs.dates.npy"
    CODES = "codes"
    BM25 = "bm25"
    TRANSLATION = "translation"
    ANALYSIS = "analysis"
    MODELS = "models"
    ENCODER = "encoder"  # the pretrained multilingual encoder's graph and tokenizer (service/retrieval/pretrained.py)
    DENSE = "dense"
    DENSE_VECTORS = "dense/vectors.npy"
    DENSE_FAISS = "dense/index.faiss"
    RERANK = "rerank"
    LTR = "ltr"
    PASSAGES = "passages"
    FUSION = "fusion.json"
    FUSION_PLOT = "fusion.png"
    RANKER = "ranker"  # the learned ranker over the first documents' evidence (service/ranker.py)
    RANKER_META = "ranker/ranker.json"
    CODE_CLASSIFIER = "code_classifier"  # the CPC titles' profiles a query's codes are predicted from
    WORD_VECTORS = "word_vectors"  # word vectors of the index's terms: the ranker's kernel features read them
    CODE_VECTORS = "code_vectors"  # vectors of the index's classification codes: the code-embedding feature reads them
    GENERATIONS = "generations"
    SEGMENTS = "segments"
    LOCK = ".lock"
    ROOT_SEGMENT = "."  # the segment that is the folder itself (the build's documents)
    SHARDS = "shards"
    LIVE_ONLY = (GENERATIONS, SEGMENTS, LOCK)  # at the top of a folder; never part of its own meta.json

    @staticmethod
    def shard(number: int) -> str:
        return f"shards/shard-{number:03d}"

    @staticmethod
    def generation(number: int) -> str:
        return f"generations/gen-{number:06d}.json"

    @staticmethod
    def segment(number: int) -> str:
        return f"segments/seg-{number:06d}"

    @staticmethod
    def bm25(lang: str) -> str:
        return f"bm25/{lang}"

    @staticmethod
    def codes(level: str, part: str) -> str:
        """``part``: ``json`` (the code list), ``indptr.npy`` or ``rows.npy``."""
        return f"codes/{level}.{part}"

    @staticmethod
    def table(src: str, tgt: str) -> str:
        return f"translation/{src}-{tgt}.json"

    @staticmethod
    def compounds(lang: str) -> str:
        return f"analysis/compounds-{lang}.json"

    @staticmethod
    def rerank(encoding: str) -> str:
        return f"rerank/{encoding}.npy"


# ------------------------------------------------------------------------------------------ settings


def _is_number(x: object) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def _check_list(name: str, value: object, allowed: Sequence[str]) -> None:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise ValueError(f"setting {name!r} must be a non-empty list of strings, got {value!r}")
    bad = [v for v in value if v not in allowed]
    if bad:
        raise ValueError(f"setting {name!r} has unknown value(s) {bad}; valid: {', '.join(allowed)}")
    if len(set(value)) != len(value):
        raise ValueError(f"setting {name!r} lists a value twice: {value!r}")


BM25_BOUNDS: dict[str, tuple[float, float]] = {"k1": (0.0, 100.0), "b": (0.0, 1.0), "epsilon": (0.0, 1.0)}


def check_scoring(scoring: object, k1: object, b: object, epsilon: object) -> None:
    """The one check of the scoring and its parameters (the build settings, ``meta.json``, a sparse index builder):
    ``scoring`` one of :data:`SCORINGS`, each parameter a number within :data:`BM25_BOUNDS`. ``ValueError`` naming
    the one that is not."""
    if scoring not in SCORINGS:
        raise ValueError(f"unknown scoring {scoring!r}; valid: {', '.join(SCORINGS)}")
    for name, value in (("k1", k1), ("b", b), ("epsilon", epsilon)):
        lo, hi = BM25_BOUNDS[name]
        if not _is_number(value) or not lo <= value <= hi:  # type: ignore[operator]
            raise ValueError(f"{name} must be a number in [{lo:g}, {hi:g}], got {value!r}")


@dataclass(frozen=True)
class BuildSettings:
    """How an index was built: the fields and languages indexed, the scoring and its parameters, the text analysis
    beyond the default analyzers (compound splitting). Validated once, when made (``ValueError`` naming the
    setting); saved in ``meta.json`` (:meth:`to_dict`) and read back (:meth:`from_dict`). Every segment of an index
    holds the same ones."""

    fields: tuple[str, ...]
    index_langs: tuple[str, ...]
    scoring: str
    k1: float
    b: float
    epsilon: float
    analysis: dict[str, Any] | None = None  # service.text.compounds.check_analysis

    REQUIRED: ClassVar[tuple[str, ...]] = ("fields", "index_langs", "scoring", "k1", "b", "epsilon")
    OPTIONAL: ClassVar[tuple[str, ...]] = ("analysis",)

    def __post_init__(self) -> None:
        for name, allowed in (("fields", FIELDS), ("index_langs", SUPPORTED_LANGS)):
            value = getattr(self, name)
            _check_list(name, list(value) if isinstance(value, tuple) else value, allowed)
            object.__setattr__(self, name, tuple(value))
        try:
            check_scoring(self.scoring, self.k1, self.b, self.epsilon)
        except ValueError as exc:
            raise ValueError(f"setting: {exc}") from None
        if self.analysis is not None:
            from service.text.compounds import check_analysis

            object.__setattr__(self, "analysis", check_analysis(self.analysis))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BuildSettings:
        """The settings of a ``meta.json`` (or a build's options): every required key, no unknown one."""
        missing = [k for k in cls.REQUIRED if k not in data]
        if missing:
            raise ValueError(f"missing setting(s): {', '.join(missing)}")
        unknown = sorted(set(data) - set(cls.REQUIRED) - set(cls.OPTIONAL))
        if unknown:
            raise ValueError(f"unexpected setting(s): {', '.join(unknown)} (known: "
                             f"{', '.join(cls.REQUIRED + cls.OPTIONAL)})")
        return cls(**dict(data))

    def to_dict(self) -> dict[str, Any]:
        """As ``meta.json`` stores them (lists; no ``analysis`` key without compound splitting)."""
        out: dict[str, Any] = {"fields": list(self.fields), "index_langs": list(self.index_langs),
                               "scoring": self.scoring, "k1": self.k1, "b": self.b, "epsilon": self.epsilon}
        if self.analysis is not None:
            out["analysis"] = self.analysis
        return out


# ------------------------------------------------------------------------------------------ meta.json


def sha256_file(path: str | Path) -> str:
    """Hex sha256 of a file, read in chunks (index and models folders both checksum with it)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _now() -> str:
    """UTC now to the microsecond: a build's ``created`` is its identity for the watches (two rebuilds in one second
    are two builds)."""
    return datetime.now(UTC).isoformat(timespec="microseconds")


@dataclass(frozen=True)
class IndexMeta:
    """The parsed ``meta.json`` of an index folder."""

    path: Path
    version: int
    created: str
    priorart_version: str
    settings: BuildSettings
    files: dict[str, dict[str, Any]]
    components: dict[str, Any] = field(default_factory=dict)
    updated: str | None = None

    def body(self) -> dict[str, Any]:
        out: dict[str, Any] = {"created": self.created, "priorart_version": self.priorart_version,
                               "settings": self.settings.to_dict(), "files": self.files, "components": self.components}
        if self.updated:
            out["updated"] = self.updated
        return out


def _list_files(index_dir: Path) -> list[str]:
    out = []
    for p in sorted(index_dir.rglob("*")):
        if not p.is_file():
            continue
        rel = p.relative_to(index_dir).as_posix()
        if rel == Layout.META or rel.endswith(".tmp") or rel.split("/", 1)[0] in Layout.LIVE_ONLY:
            continue
        out.append(rel)
    return out


def _file_entry(path: Path) -> dict[str, Any]:
    return {"sha256": sha256_file(path), "bytes": path.stat().st_size}


def write_meta(
    index_dir: str | Path,
    settings: BuildSettings | Mapping[str, Any],
    components: Mapping[str, Any],
    *,
    created: str | None = None,
    known: Mapping[str, Mapping[str, Any]] | None = None,
) -> IndexMeta:
    """Write ``meta.json``: validated settings, sha256 + size of every file present, the components.

    ``known``: file entries already checksummed (by :meth:`IndexFolder.register`); reused for files
    whose size is unchanged, hashed afresh otherwise.
    """
    index_dir = Path(index_dir)
    if not index_dir.is_dir():
        raise IndexFormatError(f"index folder {index_dir} does not exist")
    try:
        clean = settings if isinstance(settings, BuildSettings) else BuildSettings.from_dict(settings)
    except ValueError as exc:
        raise IndexFormatError(f"{index_dir / Layout.META}: {exc}") from exc
    known = known or {}
    files: dict[str, dict[str, Any]] = {}
    for rel in _list_files(index_dir):
        path = index_dir / rel
        entry = known.get(rel)
        files[rel] = dict(entry) if entry and entry.get("bytes") == path.stat().st_size else _file_entry(path)
    meta = IndexMeta(path=index_dir, version=INDEX_VERSION, created=created or _now(), priorart_version=__version__,
                     settings=clean, files=files, components=json.loads(json.dumps(dict(components))),
                     updated=None if created is None else _now())
    write_versioned(index_dir / Layout.META, INDEX_FORMAT, INDEX_VERSION, meta.body())
    return meta


def _checksum(path: Path) -> str:
    with timed("checksums"):  # a phase of a server's start-up (service/startup.py)
        return sha256_file(path)


def load_meta(
    index_dir: str | Path,
    verify: bool = True,
    *,
    expected_settings: Mapping[str, Any] | None = None,
) -> IndexMeta:
    """Read and check ``meta.json``; raise :class:`IndexFormatError` naming the file and the problem.

    Checks format and version, the settings (and that they equal ``expected_settings`` where given),
    that every listed file exists with its size, and with ``verify=True`` its sha256 (reads every
    byte; ``verify=False`` checks presence and size only).
    """
    index_dir = Path(index_dir)
    meta_path = index_dir / Layout.META
    if not index_dir.is_dir():
        raise IndexFormatError(f"index folder {index_dir} does not exist")
    if not meta_path.is_file():
        raise IndexFormatError(
            f"{meta_path} is missing: not an index folder, or its build did not finish (rebuild with `priorart build`)"
        )
    if _meta_format(index_dir) == SHARDS_FORMAT:
        raise ShardedIndexError(f"{index_dir} is a sharded index ({meta_path} lists its shards under "
                                f"{Layout.SHARDS}/): open it as a whole with ShardSet.open (priorart serve and "
                                "priorart search do), or one shard folder by itself")
    data = read_versioned(meta_path, INDEX_FORMAT, INDEX_VERSION, error=IndexFormatError,
                          fix="rebuild the index with `priorart build`")
    for key in ("settings", "files", "components"):
        if not isinstance(data.get(key), dict):
            raise IndexFormatError(f"{meta_path}: {key!r} is missing or not an object")
    try:
        settings = BuildSettings.from_dict(data["settings"])
    except (ValueError, TypeError) as exc:
        raise IndexFormatError(f"{meta_path}: {exc}") from exc
    if expected_settings is not None:
        stored = settings.to_dict()
        for key, want in expected_settings.items():
            if stored.get(key) != want:
                raise IndexFormatError(f"{meta_path}: setting {key!r} is {stored.get(key)!r}, expected {want!r}")
    files: dict[str, dict[str, Any]] = data["files"]
    for rel, info in files.items():
        path = index_dir / rel
        if not isinstance(info, dict) or "sha256" not in info or "bytes" not in info:
            raise IndexFormatError(f"{meta_path}: entry for {rel!r} lacks sha256/bytes")
        if not path.is_file():
            raise IndexFormatError(f"{path} is listed in {Layout.META} but missing")
        size = path.stat().st_size
        if size != info["bytes"]:
            raise IndexFormatError(f"{path} has {size} bytes, {Layout.META} says {info['bytes']} (file changed)")
        if verify and not verified(path, info["sha256"], _checksum):
            raise IndexFormatError(f"{path}: sha256 checksum does not match {Layout.META} (file changed or corrupt)")
    return IndexMeta(path=index_dir, version=data["version"], created=str(data.get("created", "")),
                     priorart_version=str(data.get("priorart_version", "")), settings=settings, files=files,
                     components=data["components"], updated=data.get("updated"))


def update_meta(index_dir: str | Path, components: Mapping[str, Any], *, remove: Sequence[str] = ()) -> IndexMeta:
    """Add or replace components after writing new files into an existing index folder.

    The files already listed are verified first (so a broken folder is never re-blessed), then every
    file present is checksummed again. Inside a build, :meth:`IndexFolder.register` does the same with
    one hash per new file.
    """
    old = load_meta(index_dir, verify=True)
    merged = {k: v for k, v in old.components.items() if k not in remove}
    merged.update(components)
    return write_meta(index_dir, old.settings, merged, created=old.created)


# ------------------------------------------------------------------------------------------ generations

GENERATION_FORMAT = "priorart-generation"
GENERATION_VERSION = 1
_GEN_RE = re.compile(r"^gen-(\d{6})\.json$")


def generation_numbers(index_dir: str | Path) -> list[int]:
    """The generations written in a folder, oldest first (complete manifests only: they are renamed into place)."""
    d = Path(index_dir) / Layout.GENERATIONS
    if not d.is_dir():
        return []
    return sorted(int(m.group(1)) for p in d.iterdir() if (m := _GEN_RE.match(p.name)))


def current_generation(index_dir: str | Path) -> int:
    """The generation a reader opening the folder now gets (0: a folder as ``priorart build`` wrote it).

    For a sharded index: the sum of its shards' generations (it grows whenever any shard commits one)."""
    if is_sharded(index_dir):
        return sum(current_generation(Path(index_dir) / rel) for rel in _shard_dirs(index_dir))
    numbers = generation_numbers(index_dir)
    return numbers[-1] if numbers else 0


@dataclass(frozen=True)
class Segment:
    """One segment of an opened generation: its folder, its first global row, its deleted local rows."""

    dir: str  # relative to the index folder ("." for the folder itself)
    folder: IndexFolder
    start: int
    n_rows: int
    deleted: np.ndarray  # sorted int64 local rows deleted in this generation

    @property
    def n_live(self) -> int:
        return self.n_rows - len(self.deleted)

    def entry(self) -> dict[str, Any]:
        """The manifest entry of this segment (for the next generation's writer)."""
        return {"dir": self.dir, "n_docs": self.n_rows, "deleted": [int(r) for r in self.deleted],
                "meta_sha256": sha256_file(self.folder.root / Layout.META)}


def _rows_in_docstore(meta: IndexMeta, where: Path) -> int:
    comp = meta.components.get("docstore")
    if not isinstance(comp, dict) or not isinstance(comp.get("n_docs"), int):
        raise IndexFormatError(f"{where / Layout.META}: no docstore component with n_docs")
    return int(comp["n_docs"])


# ------------------------------------------------------------------------------------------ the folder


class IndexFolder:
    """An opened index folder: its ``meta.json`` (checked once) and the paths of its parts.

    ``IndexFolder.open(path)`` verifies (sha256 of every file unless ``verify=False``); loaders take
    the folder object and call :meth:`path` / :meth:`component`, never ``meta.json`` themselves.
    """

    layout = Layout

    def __init__(self, root: str | Path, meta: IndexMeta) -> None:
        self.root = Path(root)
        self.meta = meta
        self.generation = 0
        self.segments: list[Segment] = [
            Segment(Layout.ROOT_SEGMENT, self, 0, _rows_in_docstore(meta, self.root), np.zeros(0, np.int64))
        ] if "docstore" in meta.components else []

    @classmethod
    def open(cls, root: str | Path, *, verify: bool = True) -> IndexFolder:
        """Open the folder at its newest generation (a writer that removes old segments meanwhile: retried)."""
        for attempt in range(3):
            gen = current_generation(root)
            try:
                return cls._open_generation(root, gen, verify=verify)
            except IndexFormatError:
                if attempt == 2 or current_generation(root) == gen:
                    raise
                time.sleep(0.05)
        raise AssertionError("unreachable")

    @classmethod
    def at(cls, root: str | Path, generation: int, *, verify: bool = True) -> IndexFolder:
        """Open the folder at ``generation`` (one that is still on disk: a process that works beside the one that
        opened it, on the same documents)."""
        return cls._open_generation(root, generation, verify=verify)

    @classmethod
    def _open_generation(cls, root: str | Path, gen: int, *, verify: bool) -> IndexFolder:
        folder = cls(root, load_meta(root, verify=verify))
        if gen == 0:
            return folder
        path = folder.root / Layout.generation(gen)
        data = read_versioned(path, GENERATION_FORMAT, GENERATION_VERSION, error=IndexFormatError,
                              fix="the generation manifest is damaged: remove it to open the previous generation")
        segments: list[Segment] = []
        start = 0
        base = {k: v for k, v in folder.settings.to_dict().items() if k != "analysis"}
        for entry in data.get("segments", []):
            try:
                rel, n_docs = str(entry["dir"]), int(entry["n_docs"])
                deleted = np.asarray(sorted(int(r) for r in entry.get("deleted", [])), dtype=np.int64)
                want_sha = str(entry["meta_sha256"])
            except (KeyError, TypeError, ValueError) as exc:
                raise IndexFormatError(f"{path}: bad segment entry {entry!r} ({exc})") from exc
            if rel == Layout.ROOT_SEGMENT:
                seg_folder = folder
            else:
                seg_dir = folder.root / rel
                seg_folder = IndexFolder(seg_dir, load_meta(seg_dir, verify=verify, expected_settings=base))
                if seg_folder.settings.analysis not in (None, folder.settings.analysis):
                    raise IndexFormatError(f"{seg_dir}: analysed with other settings than the index ({path})")
                if sha256_file(seg_folder.root / Layout.META) != want_sha:
                    raise IndexFormatError(f"{seg_folder.root / Layout.META}: sha256 does not match {path} (changed)")
            if _rows_in_docstore(seg_folder.meta, seg_folder.root) != n_docs:
                raise IndexFormatError(f"{path}: segment {rel} holds {n_docs} documents, its meta.json says otherwise")
            if len(deleted) and (deleted[0] < 0 or deleted[-1] >= n_docs):
                raise IndexFormatError(f"{path}: segment {rel} deletes a row outside 0..{n_docs - 1}")
            segments.append(Segment(rel, seg_folder, start, n_docs, deleted))
            start += n_docs
        if not segments:
            raise IndexFormatError(f"{path}: a generation without segments")
        folder.generation = int(data.get("generation", gen))
        folder.segments = segments
        return folder

    # ---- generations -----------------------------------------------------------------------------
    @property
    def n_rows(self) -> int:
        """Rows of the generation (deleted rows included: they stay as holes)."""
        return sum(s.n_rows for s in self.segments)

    @property
    def n_live(self) -> int:
        return sum(s.n_live for s in self.segments)

    @property
    def live(self) -> np.ndarray | None:
        """Rows not deleted (bool per row), or None when no row of this generation is deleted."""
        if not any(len(s.deleted) for s in self.segments):
            return None
        mask = np.ones(self.n_rows, dtype=bool)
        for s in self.segments:
            mask[s.start + s.deleted] = False
        return mask

    @property
    def is_live(self) -> bool:
        """True when the loaders must join segments: anything but the build's own documents, all live."""
        if not self.segments:  # a folder written without a docstore component (tests, tools)
            return False
        only_root = len(self.segments) == 1 and self.segments[0].dir == Layout.ROOT_SEGMENT
        return not only_root or any(len(s.deleted) for s in self.segments)

    @property
    def one_build(self) -> IndexFolder | None:
        """The folder that holds this generation's files as one build writes them, or None when the loaders must
        join (or search in turn) several segments: the folder itself when it is not live; the segment's folder of a
        compacted generation (one segment written by ``compact``, nothing deleted), whose FAISS index, statistics and
        encodings are the generation's. The one rule every component loader follows."""
        if not self.is_live:
            return self
        if len(self.segments) == 1 and not len(self.segments[0].deleted):
            seg = self.segments[0].folder
            written = seg.components.get("segment")
            if seg is not self and isinstance(written, dict) and written.get("compacted"):
                return seg
        return None

    def write_generation(self, number: int, segments: Sequence[Mapping[str, Any]],
                         operation: Mapping[str, Any]) -> Path:
        """Write the manifest of generation ``number`` (fsynced, renamed into place: the commit point)."""
        gen_dir = self.root / Layout.GENERATIONS
        gen_dir.mkdir(exist_ok=True)
        body = {"generation": number, "created": _now(), "parent": self.generation,
                "segments": [dict(s) for s in segments], "operation": dict(operation)}
        return write_versioned(self.root / Layout.generation(number), GENERATION_FORMAT, GENERATION_VERSION, body,
                               durable=True)

    @contextmanager
    def writer_lock(self, *, wait: bool = True) -> Iterator[None]:
        """Exclusive lock of the writers of generations (add, delete, compact)."""
        fd = os.open(self.root / Layout.LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            except BlockingIOError as exc:
                raise IndexFormatError(f"{self.root}: another add/delete/compact is running") from exc
            yield
        finally:
            os.close(fd)

    def __repr__(self) -> str:
        return f"IndexFolder({str(self.root)!r}, components={sorted(self.meta.components)})"

    # ---- reading ---------------------------------------------------------------------------------
    def path(self, rel: str) -> Path:
        return self.root / rel

    @property
    def settings(self) -> BuildSettings:
        return self.meta.settings

    @property
    def components(self) -> dict[str, Any]:
        return self.meta.components

    def has(self, name: str) -> bool:
        return name in self.meta.components

    @property
    def pretrained_dense(self) -> bool:
        """Whether the index has the pretrained encoder's dense stage (its ``encoder/`` and the vectors in ``dense/``:
        every default build), which its searches and its live segments both use."""
        return self.has("encoder") and self.has("dense")

    def component(self, name: str, version: int | None = None, *, fix: str = "rebuild the index") -> dict[str, Any]:
        """The ``components`` entry ``name`` (its ``version`` checked when given)."""
        comp = self.meta.components.get(name)
        where = self.root / Layout.META
        if not isinstance(comp, dict):
            raise IndexFormatError(f"{where}: no {name!r} component; {fix}")
        if version is not None and comp.get("version") != version:
            raise IndexFormatError(f"{where}: {name} format version {comp.get('version')!r}, this priorart reads "
                                   f"{version}; {fix}")
        return comp

    def read_json(self, rel: str) -> Any:
        path = self.root / rel
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise IndexFormatError(f"{path}: unreadable ({exc})") from exc

    def ids_sha256(self) -> str:
        """Checksum of ``doc_ids.json`` (stores built for this index record it, to refuse another index)."""
        return str(self.meta.files[Layout.IDS]["sha256"])

    # ---- writing ---------------------------------------------------------------------------------
    def register(self, components: Mapping[str, Any], *, changed: Iterable[str] = (),
                 remove: Sequence[str] = ()) -> IndexFolder:
        """Add or replace components and write ``meta.json``.

        Files already listed keep their checksums unless named in ``changed`` (relative paths or
        folders), whose files are hashed afresh; files not yet listed are hashed. Returns the folder
        with the new meta.
        """
        prefixes = [c.rstrip("/") for c in changed]

        def stale(rel: str) -> bool:
            return any(rel == p or rel.startswith(p + "/") for p in prefixes)

        known = {rel: e for rel, e in self.meta.files.items() if not stale(rel)}
        merged = {k: v for k, v in self.meta.components.items() if k not in remove}
        merged.update(components)
        self.meta = write_meta(self.root, self.meta.settings, merged, created=self.meta.created, known=known)
        return self


class FolderPart:
    """What an index folder holds under one key of its ``meta.json``: a per-document component
    (:class:`service.index.components.Component`) or a part of the index as a whole
    (:class:`service.index.parts.IndexPart`). ``name`` is the key, ``version`` the format it writes."""

    name: ClassVar[str]

    @property
    def version(self) -> int:
        raise NotImplementedError

    def present(self, folder: IndexFolder) -> bool:
        return folder.has(self.name)

    def open(self, folder: IndexFolder, **options: Any) -> Any:
        """What the folder holds under ``name``, read."""
        raise NotImplementedError


# ------------------------------------------------------------------------------------------ shards


def _meta_format(index_dir: str | Path) -> object:
    """The ``format`` tag of a folder's ``meta.json`` (None when it is missing or unreadable)."""
    try:
        data = json.loads((Path(index_dir) / Layout.META).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data.get("format") if isinstance(data, dict) else None


def is_sharded(index_dir: str | Path) -> bool:
    """True for the root folder of a sharded index (``priorart build --shards N``)."""
    return _meta_format(index_dir) == SHARDS_FORMAT


def _read_shards_meta(root: Path) -> dict[str, Any]:
    data = read_versioned(root / Layout.META, SHARDS_FORMAT, SHARDS_VERSION, error=IndexFormatError,
                          fix="rebuild the index with `priorart build --shards N`")
    shards = data.get("shards")
    if not isinstance(shards, list) or not shards or not all(isinstance(x, str) for x in shards):
        raise IndexFormatError(f"{root / Layout.META}: 'shards' must be a non-empty list of shard folders")
    return data


def _shard_dirs(index_dir: str | Path) -> list[str]:
    return list(_read_shards_meta(Path(index_dir))["shards"])


def hash_unit(key: str) -> float:
    """A stable number in [0, 1) from a string (sha256): a family's shard, and its train/dev/test split."""
    return int(hashlib.sha256(key.encode("utf-8")).hexdigest()[:15], 16) / 16**15


def write_shards_meta(root: str | Path, n_shards: int, settings: BuildSettings,
                      extra: Mapping[str, Any] | None = None) -> Path:
    """Write the root ``meta.json`` of a sharded index (after every shard folder is complete)."""
    if n_shards < 1:
        raise ValueError(f"a sharded index needs at least 1 shard, got {n_shards}")
    body = {"created": _now(), "priorart_version": __version__, "settings": settings.to_dict(),
            "shards": [Layout.shard(i) for i in range(n_shards)],
            "routing": {"rule": "live id, else sha256(family key) * shards", "key": "family id, else country+number"},
            **dict(extra or {})}
    return write_versioned(Path(root) / Layout.META, SHARDS_FORMAT, SHARDS_VERSION, body)


@dataclass
class ShardSet:
    """An opened sharded index: one :class:`IndexFolder` per shard, each at its newest generation."""

    root: Path
    shards: list[IndexFolder]
    meta: dict[str, Any]

    @classmethod
    def open(cls, root: str | Path, *, verify: bool = True, verify_only: int | None = None) -> ShardSet:
        """Open every shard (its ``meta.json`` checked; with ``verify`` its files' sha256 too, or only those
        of shard ``verify_only``: a shard server checks its own files and reads the others' statistics)."""
        root = Path(root)
        data = _read_shards_meta(root)
        shards: list[IndexFolder] = []
        for i, rel in enumerate(data["shards"]):
            if rel != Layout.shard(i):
                raise IndexFormatError(f"{root / Layout.META}: shard {i} is {rel!r}, expected {Layout.shard(i)!r}")
            check = verify if verify_only is None else verify and i == verify_only
            folder = IndexFolder.open(root / rel, verify=check)
            comp = folder.components.get("shard")
            if not isinstance(comp, dict) or comp.get("index") != i or comp.get("of") != len(data["shards"]):
                raise IndexFormatError(f"{folder.root / Layout.META}: not shard {i} of {len(data['shards'])} "
                                       f"(its shard component: {comp!r})")
            if shards and folder.settings != shards[0].settings:
                raise IndexFormatError(f"{folder.root}: built with other settings than {shards[0].root}")
            shards.append(folder)
        return cls(root, shards, data)

    @property
    def n_shards(self) -> int:
        return len(self.shards)

    @property
    def generation(self) -> int:
        """The sum of the shards' generations (see :func:`current_generation`)."""
        return sum(f.generation for f in self.shards)

    @property
    def settings(self) -> BuildSettings:
        return self.shards[0].settings

    def starts(self) -> list[int]:
        """The first row of each shard in the union's row space."""
        out, start = [], 0
        for f in self.shards:
            out.append(start)
            start += f.n_rows
        return out

    def union(self) -> IndexFolder:
        """One folder over every shard's segments in turn (rows of shard 0, then shard 1, ...): the doc store
        and the passage index of the whole collection (their loaders join segments)."""
        first = self.shards[0]
        folder = IndexFolder(first.root, first.meta)
        folder.generation = self.generation
        segments: list[Segment] = []
        for i, f in enumerate(self.shards):
            base = segments[-1].start + segments[-1].n_rows if segments else 0
            for seg in f.segments:
                rel = Layout.shard(i) + ("" if seg.dir == Layout.ROOT_SEGMENT else "/" + seg.dir)
                segments.append(Segment(rel, seg.folder, base + seg.start, seg.n_rows, seg.deleted))
        folder.segments = segments
        return folder

    def shard_for(self, key: str) -> int:
        """The shard of a new family (``key``: family id, else country + number)."""
        return shard_for(key, self.n_shards)


def shard_for(key: str, n_shards: int) -> int:
    """The shard of a family key among ``n_shards``: ``floor(sha256 unit * n)``, stable across runs."""
    if n_shards < 1:
        raise ValueError(f"the number of shards must be >= 1, got {n_shards}")
    return min(int(hash_unit(key) * n_shards), n_shards - 1)


__all__ = ["BM25_BOUNDS", "FIELDS", "GENERATION_FORMAT", "GENERATION_VERSION", "INDEX_FORMAT", "INDEX_VERSION",
           "SCORINGS", "SHARDS_FORMAT", "BuildSettings", "FolderPart", "IndexFolder", "IndexFormatError", "IndexMeta",
           "Layout", "Segment", "ShardSet", "ShardedIndexError", "current_generation", "hash_unit", "is_sharded",
           "shard_for", "write_shards_meta", "check_scoring", "generation_numbers", "load_meta", "sha256_file",
           "update_meta", "write_meta"]
