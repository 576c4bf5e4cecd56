"""Index folder: ``meta.json`` writer and verifying loader, and the doc store.

``meta.json`` makes an index folder self-describing::

    {"format": "priorart-index", "version": 1, "created": "...", "priorart_version": "0.1.0",
     "settings": {"fields": [...], "index_langs": [...], "scoring": "bm25", "k1": 1.2, "b": 0.75,
                  "epsilon": 0.25},
     "files": {"docs.jsonl": {"sha256": "...", "bytes": 123}, ...},
     "components": {"docstore": {...}, "bm25": {...}, "translation": [...], ...}}

``settings`` are the build parameters the sparse stage depends on and are validated strictly (an
unknown key or a bad value refuses to load). Stages added later (models, dense vectors) describe
themselves under ``components`` and call :func:`update_meta` after writing their files, which
re-checksums every file in the folder.

Doc store files (rows are the internal document numbers shared by every stage):

- ``docs.jsonl``: one record per line (the corpus schema), ``docs.offsets.npy``: int64 byte offsets,
  ``N + 1`` entries (the last one is the file size), so row ``i`` is ``[off[i], off[i+1])``.
- ``doc_ids.json``: row -> publication id.
- ``docs.dates.npy``: int32 publication date as days since 1970-01-01 (``MISSING_DATE`` if unknown).
- ``codes/<level>.json`` + ``codes/<level>.indptr.npy`` + ``codes/<level>.rows.npy``: per
  classification level an inverted list code -> sorted rows, built from the union of the IPC and CPC
  codes truncated by syntax (``H01F27/14`` -> ``H01F27/00`` at main group, ``H01F`` at subclass), so
  a filter costs one lookup per query code.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from array import array
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

from service import __version__
from service.corpus.record import LANGS, PatentRecord, normalise_class_code

log = logging.getLogger(__name__)

INDEX_FORMAT = "priorart-index"
INDEX_VERSION = 1
META_FILE = "meta.json"

FIELDS = ("title", "abstract", "claims", "description")
SCORINGS = ("bm25", "tfidf")
CODE_LEVELS = ("section", "class", "subclass", "main_group", "subgroup")

DOCS_FILE = "docs.jsonl"
OFFSETS_FILE = "docs.offsets.npy"
IDS_FILE = "doc_ids.json"
DATES_FILE = "docs.dates.npy"
CODES_DIR = "codes"

EPOCH = date(1970, 1, 1)
MISSING_DATE = int(np.iinfo(np.int32).min)

_CHUNK = 1 << 20


class IndexFormatError(ValueError):
    """An index folder that cannot be used: missing/changed files, other format, bad settings."""


class UnknownDocumentError(KeyError):
    """A publication id that is not in the doc store (or matches several documents)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


# --------------------------------------------------------------------------------------- meta.json


@dataclass(frozen=True)
class IndexMeta:
    """The parsed ``meta.json`` of an index folder."""

    path: Path
    version: int
    created: str
    priorart_version: str
    settings: dict[str, Any]
    files: dict[str, dict[str, Any]]
    components: dict[str, Any] = field(default_factory=dict)
    updated: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "format": INDEX_FORMAT,
            "version": self.version,
            "created": self.created,
            "priorart_version": self.priorart_version,
            "settings": self.settings,
            "files": self.files,
            "components": self.components,
        }
        if self.updated:
            out["updated"] = self.updated
        return out


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


def validate_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Check the build settings (required keys, valid values, no unknown key); returns a plain dict.

    Raises ``ValueError`` naming the offending setting.
    """
    required = ("fields", "index_langs", "scoring", "k1", "b", "epsilon")
    optional = ("analysis",)  # text analysis beyond the default analyzers (compound splitting)
    missing = [k for k in required if k not in settings]
    if missing:
        raise ValueError(f"missing setting(s): {', '.join(missing)}")
    unknown = sorted(set(settings) - set(required) - set(optional))
    if unknown:
        raise ValueError(f"unexpected setting(s): {', '.join(unknown)} (known: {', '.join(required + optional)})")
    _check_list("fields", settings["fields"], FIELDS)
    _check_list("index_langs", settings["index_langs"], LANGS)
    if settings["scoring"] not in SCORINGS:
        raise ValueError(f"setting 'scoring' is {settings['scoring']!r}; valid: {', '.join(SCORINGS)}")
    k1, b, eps = settings["k1"], settings["b"], settings["epsilon"]
    if not _is_number(k1) or not 0 <= k1 <= 100:
        raise ValueError(f"setting 'k1' must be a number in [0, 100], got {k1!r}")
    if not _is_number(b) or not 0 <= b <= 1:
        raise ValueError(f"setting 'b' must be a number in [0, 1], got {b!r}")
    if not _is_number(eps) or not 0 <= eps <= 1:
        raise ValueError(f"setting 'epsilon' must be a number in [0, 1], got {eps!r}")
    out = {k: (list(settings[k]) if isinstance(settings[k], list) else settings[k]) for k in required}
    if "analysis" in settings:
        from service.text.compounds import check_analysis

        out["analysis"] = check_analysis(settings["analysis"])
    return out


def sha256_file(path: str | Path) -> str:
    """Hex sha256 of a file, read in chunks (index and models folders both checksum with it)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _list_files(index_dir: Path) -> list[str]:
    out = []
    for p in sorted(index_dir.rglob("*")):
        if not p.is_file():
            continue
        rel = p.relative_to(index_dir).as_posix()
        if rel == META_FILE or rel.endswith(".tmp"):
            continue
        out.append(rel)
    return out


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _write_json_atomic(path: Path, data: object) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, ensure_ascii=False, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def write_meta(
    index_dir: str | Path,
    settings: Mapping[str, Any],
    components: Mapping[str, Any],
    *,
    created: str | None = None,
) -> IndexMeta:
    """Write ``meta.json`` (last step of a build): validated settings, sha256 + size of every file present."""
    index_dir = Path(index_dir)
    if not index_dir.is_dir():
        raise IndexFormatError(f"index folder {index_dir} does not exist")
    try:
        clean = validate_settings(settings)
    except ValueError as exc:
        raise IndexFormatError(f"{index_dir / META_FILE}: {exc}") from exc
    files = {
        rel: {"sha256": sha256_file(index_dir / rel), "bytes": (index_dir / rel).stat().st_size}
        for rel in _list_files(index_dir)
    }
    meta = IndexMeta(
        path=index_dir,
        version=INDEX_VERSION,
        created=created or _now(),
        priorart_version=__version__,
        settings=clean,
        files=files,
        components=json.loads(json.dumps(dict(components))),  # plain JSON types only
        updated=None if created is None else _now(),
    )
    _write_json_atomic(index_dir / META_FILE, meta.to_json())
    return meta


def update_meta(
    index_dir: str | Path,
    components: Mapping[str, Any],
    *,
    remove: Sequence[str] = (),
) -> IndexMeta:
    """Add or replace components after writing new files into an existing index folder.

    The files already listed are verified first (so a broken folder is never re-blessed), then
    every file present is checksummed again. ``remove`` drops components by name.
    """
    old = load_meta(index_dir, verify=True)
    merged = {k: v for k, v in old.components.items() if k not in remove}
    merged.update(components)
    return write_meta(index_dir, old.settings, merged, created=old.created)


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
    meta_path = index_dir / META_FILE
    if not index_dir.is_dir():
        raise IndexFormatError(f"index folder {index_dir} does not exist")
    if not meta_path.is_file():
        raise IndexFormatError(
            f"{meta_path} is missing: not an index folder, or its build did not finish (rebuild with `priorart build`)"
        )
    try:
        data = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise IndexFormatError(f"{meta_path} is not readable JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise IndexFormatError(f"{meta_path} is not a JSON object")
    if data.get("format") != INDEX_FORMAT:
        raise IndexFormatError(f"{meta_path}: format is {data.get('format')!r}, expected {INDEX_FORMAT!r}")
    if data.get("version") != INDEX_VERSION:
        raise IndexFormatError(
            f"{meta_path}: index format version {data.get('version')!r}, this priorart reads version "
            f"{INDEX_VERSION}; rebuild the index with `priorart build`"
        )
    for key in ("settings", "files", "components"):
        if not isinstance(data.get(key), dict):
            raise IndexFormatError(f"{meta_path}: {key!r} is missing or not an object")
    try:
        settings = validate_settings(data["settings"])
    except ValueError as exc:
        raise IndexFormatError(f"{meta_path}: {exc}") from exc
    if expected_settings is not None:
        for key, want in expected_settings.items():
            if settings.get(key) != want:
                raise IndexFormatError(f"{meta_path}: setting {key!r} is {settings.get(key)!r}, expected {want!r}")
    files: dict[str, dict[str, Any]] = data["files"]
    for rel, info in files.items():
        path = index_dir / rel
        if not isinstance(info, dict) or "sha256" not in info or "bytes" not in info:
            raise IndexFormatError(f"{meta_path}: entry for {rel!r} lacks sha256/bytes")
        if not path.is_file():
            raise IndexFormatError(f"{path} is listed in {META_FILE} but missing")
        size = path.stat().st_size
        if size != info["bytes"]:
            raise IndexFormatError(f"{path} has {size} bytes, {META_FILE} says {info['bytes']} (file changed)")
        if verify and sha256_file(path) != info["sha256"]:
            raise IndexFormatError(f"{path}: sha256 checksum does not match {META_FILE} (file changed or corrupt)")
    return IndexMeta(
        path=index_dir,
        version=data["version"],
        created=str(data.get("created", "")),
        priorart_version=str(data.get("priorart_version", "")),
        settings=settings,
        files=files,
        components=data["components"],
        updated=data.get("updated"),
    )


# ------------------------------------------------------------------------------- ids and codes

_ID_SEP_RE = re.compile(r"[\s\-.,/]+")
_ID_RE = re.compile(r"^([A-Z]{2})([A-Z]{0,2})(\d+)([A-Z]\d?)?$")
# patent offices whose numbers we recognise as a "patent number query"
_OFFICES_TEXT = (
    "EP WO US DE FR GB JP CN KR CH AT BE NL IT ES SE DK FI NO PL CZ RU CA AU BR IN MX TW IL ZA NZ SG HK "
    "IE PT GR HU RO SK SI LU EA AP OA"
)
OFFICES = frozenset(_OFFICES_TEXT.split(" "))


def normalise_pub_id(text: str) -> str:
    """``'ep 0640886 b1'`` -> ``'EP0640886B1'`` (uppercase, spaces/dashes/dots removed)."""
    return _ID_SEP_RE.sub("", text.strip().upper())


def _id_keys(norm: str) -> tuple[str, str] | None:
    """(id without leading zeros in the number, same without kind) or None when not id-shaped."""
    m = _ID_RE.match(norm)
    if not m:
        return None
    country, prefix, digits, kind = m.groups()
    base = f"{country}{prefix}{digits.lstrip('0') or '0'}"
    return base + (kind or ""), base


def id_shaped(text: str) -> bool:
    """True for text shaped like a publication number: country letters + at least 4 digits (+ kind)."""
    if len(text) > 40:
        return False
    m = _ID_RE.match(normalise_pub_id(text))
    return bool(m and len(m.group(3)) >= 4)


def looks_like_pub_id(text: str) -> bool:
    """True for text shaped like a publication number of a known office (``EP0640886B1``, ``US 7,861,316``)."""
    return id_shaped(text) and normalise_pub_id(text)[:2] in OFFICES


def truncate_code(code: str, level: str) -> str | None:
    """Truncate a normalised code by syntax; ``None`` when the code is coarser than ``level``.

    ``H01F27/14``: section ``H``, class ``H01``, subclass ``H01F``, main_group ``H01F27/00``,
    subgroup ``H01F27/14``.
    """
    if level not in CODE_LEVELS:
        raise ValueError(f"unknown classification level {level!r}; valid: {', '.join(CODE_LEVELS)}")
    if level == "section":
        return code[:1] if code else None
    if level == "class":
        return code[:3] if len(code) >= 3 else None
    if level == "subclass":
        return code[:4] if len(code) >= 4 else None
    if "/" not in code:
        return None
    if level == "main_group":
        return code.split("/", 1)[0] + "/00"
    return code


_SECTION_RE = re.compile(r"^[A-HY]$")
_CLASS_RE = re.compile(r"^[A-HY]\d{2}$")


def normalise_query_code(raw: str) -> str:
    """Normalise a code given by a user (section ``H`` .. subgroup ``H01F 27/14``); ``ValueError`` if invalid."""
    text = raw.strip().upper().replace(" ", "")
    if _SECTION_RE.match(text) or _CLASS_RE.match(text):
        return text
    norm = normalise_class_code(raw)
    if norm is None:
        raise ValueError(f"not a classification code: {raw!r} (expected e.g. H, H01, H01F, H01F27/14)")
    return norm


def _record_codes(rec: PatentRecord) -> list[str]:
    seen: dict[str, None] = {}
    for c in (*rec.ipc, *rec.cpc):
        seen.setdefault(c, None)
    return list(seen)


# ---------------------------------------------------------------------------------- doc store


class DocStoreWriter:
    """Streams records into the doc store files of an index folder (use as a context manager)."""

    def __init__(self, index_dir: str | Path) -> None:
        self.index_dir = Path(index_dir)
        self.index_dir.mkdir(parents=True, exist_ok=True)
        self._fh = open(self.index_dir / DOCS_FILE, "wb")  # noqa: SIM115 - closed in close()
        self._offsets = array("q", [0])
        self._ids: list[str] = []
        self._seen: set[str] = set()
        self._dates = array("i")
        self._code_vocab: dict[str, dict[str, int]] = {lvl: {} for lvl in CODE_LEVELS}
        self._code_rows: dict[str, array[int]] = {lvl: array("i") for lvl in CODE_LEVELS}
        self._code_ids: dict[str, array[int]] = {lvl: array("i") for lvl in CODE_LEVELS}
        self._closed = False

    def __len__(self) -> int:
        return len(self._ids)

    def add(self, record: PatentRecord) -> int:
        """Append one record; returns its row. Duplicate publication ids are refused."""
        if record.id in self._seen:
            raise ValueError(f"duplicate publication id {record.id!r} in the corpus")
        row = len(self._ids)
        line = record.model_dump_json(exclude_defaults=True).encode("utf-8") + b"\n"
        self._fh.write(line)
        self._offsets.append(self._offsets[-1] + len(line))
        self._ids.append(record.id)
        self._seen.add(record.id)
        d = record.publication_date
        self._dates.append((d - EPOCH).days if d else MISSING_DATE)
        codes = _record_codes(record)
        for lvl in CODE_LEVELS:
            vocab = self._code_vocab[lvl]
            done: set[str] = set()
            for c in codes:
                t = truncate_code(c, lvl)
                if t is None or t in done:
                    continue
                done.add(t)
                self._code_rows[lvl].append(row)
                self._code_ids[lvl].append(vocab.setdefault(t, len(vocab)))
        return row

    def close(self) -> dict[str, Any]:
        """Write the arrays; returns the ``docstore`` component description for ``meta.json``."""
        if self._closed:
            raise RuntimeError("DocStoreWriter already closed")
        self._closed = True
        self._fh.close()
        d = self.index_dir
        np.save(d / OFFSETS_FILE, np.frombuffer(self._offsets, dtype=np.int64))
        (d / IDS_FILE).write_text(json.dumps(self._ids), encoding="utf-8")
        np.save(d / DATES_FILE, np.frombuffer(self._dates, dtype=np.int32) if self._dates else np.zeros(0, np.int32))
        (d / CODES_DIR).mkdir(exist_ok=True)
        for lvl in CODE_LEVELS:
            vocab = self._code_vocab[lvl]
            codes = sorted(vocab)
            remap = np.zeros(len(vocab), dtype=np.int32)
            for new, c in enumerate(codes):
                remap[vocab[c]] = new
            ids = (
                remap[np.frombuffer(self._code_ids[lvl], dtype=np.int32)]
                if self._code_ids[lvl]
                else np.zeros(0, np.int32)
            )
            rows = (
                np.frombuffer(self._code_rows[lvl], dtype=np.int32) if self._code_rows[lvl] else np.zeros(0, np.int32)
            )
            order = np.argsort(ids, kind="stable")  # rows were appended in increasing order
            indptr = np.zeros(len(codes) + 1, dtype=np.int64)
            np.cumsum(np.bincount(ids, minlength=len(codes)), out=indptr[1:])
            (d / CODES_DIR / f"{lvl}.json").write_text(json.dumps(codes), encoding="utf-8")
            np.save(d / CODES_DIR / f"{lvl}.indptr.npy", indptr)
            np.save(d / CODES_DIR / f"{lvl}.rows.npy", rows[order].astype(np.int32))
        dated = sum(1 for x in self._dates if x != MISSING_DATE)
        return {
            "n_docs": len(self._ids),
            "with_date": dated,
            "code_levels": list(CODE_LEVELS),
            "n_codes": {lvl: len(self._code_vocab[lvl]) for lvl in CODE_LEVELS},
        }

    def __enter__(self) -> DocStoreWriter:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if not self._closed:
            if exc_type is None:
                self.close()
            else:
                self._closed = True
                self._fh.close()


class DocStore:
    """Random access to the records of an index by row or publication id, plus filter arrays."""

    def __init__(self, index_dir: str | Path) -> None:
        self._docs_fd = -1
        d = Path(index_dir)
        self.index_dir = d
        try:
            self.offsets: np.ndarray = np.load(d / OFFSETS_FILE)
            self.ids: list[str] = json.loads((d / IDS_FILE).read_text(encoding="utf-8"))
            self.dates: np.ndarray = np.load(d / DATES_FILE)
            self._codes: dict[str, tuple[dict[str, int], np.ndarray, np.ndarray]] = {}
            for lvl in CODE_LEVELS:
                vocab = json.loads((d / CODES_DIR / f"{lvl}.json").read_text(encoding="utf-8"))
                indptr = np.load(d / CODES_DIR / f"{lvl}.indptr.npy")
                rows = np.load(d / CODES_DIR / f"{lvl}.rows.npy")
                self._codes[lvl] = ({c: i for i, c in enumerate(vocab)}, indptr, rows)
        except (OSError, ValueError) as exc:
            raise IndexFormatError(f"doc store in {d} is unreadable: {exc}") from exc
        try:
            self._docs_fd = os.open(d / DOCS_FILE, os.O_RDONLY)
        except OSError as exc:
            raise IndexFormatError(f"doc store in {d} is unreadable: {exc}") from exc
        n = len(self.ids)
        if len(self.offsets) != n + 1 or len(self.dates) != n:
            raise IndexFormatError(
                f"doc store in {d} is inconsistent: {n} ids, {len(self.offsets)} offsets, {len(self.dates)} dates"
            )
        self._row: dict[str, int] = {}
        self._loose: dict[str, int] = {}
        self._nokind: dict[str, list[int]] = {}
        for row, pid in enumerate(self.ids):
            self._row[pid] = row
            keys = _id_keys(normalise_pub_id(pid))
            if keys:
                self._loose.setdefault(keys[0], row)
                self._nokind.setdefault(keys[1], []).append(row)

    @classmethod
    def load(cls, index_dir: str | Path) -> DocStore:
        return cls(index_dir)

    def __len__(self) -> int:
        return len(self.ids)

    def find(self, doc_id: str) -> int | None:
        """Row of a publication id, tolerant to case, spaces, leading zeros and a missing kind code.

        Returns ``None`` when absent; raises :class:`UnknownDocumentError` when a kind-less number
        matches several publications.
        """
        row = self._row.get(doc_id)
        if row is not None:
            return row
        norm = normalise_pub_id(doc_id)
        row = self._row.get(norm)
        if row is not None:
            return row
        keys = _id_keys(norm)
        if keys is None:
            return None
        row = self._loose.get(keys[0])
        if row is not None:
            return row
        if keys[0] == keys[1]:  # no kind code given
            rows = self._nokind.get(keys[1], [])
            if len(rows) == 1:
                return rows[0]
            if len(rows) > 1:
                cands = ", ".join(self.ids[r] for r in rows)
                raise UnknownDocumentError(f"{doc_id!r} matches several publications ({cands}); add the kind code")
        return None

    def row(self, doc_id: str) -> int:
        """Like :meth:`find` but raises :class:`UnknownDocumentError` when absent."""
        row = self.find(doc_id)
        if row is None:
            raise UnknownDocumentError(f"publication {doc_id!r} is not in this index ({len(self)} documents)")
        return row

    def get_row(self, row: int) -> PatentRecord:
        """The record stored at a row."""
        if not 0 <= row < len(self.ids):
            raise IndexError(f"row {row} out of range (0..{len(self.ids) - 1})")
        start, end = int(self.offsets[row]), int(self.offsets[row + 1])
        # one descriptor opened at load and read with pread: thread-safe, and a folder swapped or
        # deleted under a running service keeps serving the records it was loaded with
        data = os.pread(self._docs_fd, end - start, start)
        return PatentRecord.model_validate_json(data)

    def close(self) -> None:
        """Release the records file (also done when the store is garbage-collected)."""
        if self._docs_fd >= 0:
            os.close(self._docs_fd)
            self._docs_fd = -1

    def __del__(self) -> None:
        self.close()

    def get(self, doc_id: str) -> PatentRecord:
        """The record of a publication id (tolerant lookup, see :meth:`find`)."""
        return self.get_row(self.row(doc_id))

    def date_mask(self, before: date) -> np.ndarray:
        """Rows published strictly before ``before`` (unknown dates are excluded)."""
        limit = (before - EPOCH).days
        return (self.dates != MISSING_DATE) & (self.dates < limit)

    def code_mask(self, codes: Iterable[str], level: str = "subclass") -> np.ndarray:
        """Rows sharing at least one code with ``codes`` after truncating both to ``level``.

        Raises ``ValueError`` for an invalid code or one coarser than ``level``.
        """
        if level not in CODE_LEVELS:
            raise ValueError(f"unknown classification level {level!r}; valid: {', '.join(CODE_LEVELS)}")
        vocab, indptr, rows = self._codes[level]
        mask = np.zeros(len(self.ids), dtype=bool)
        for raw in codes:
            code = normalise_query_code(raw)
            t = truncate_code(code, level)
            if t is None:
                raise ValueError(
                    f"code {raw!r} is coarser than the filter level {level!r}; give a longer code or a coarser level"
                )
            i = vocab.get(t)
            if i is not None:
                mask[rows[indptr[i] : indptr[i + 1]]] = True
        return mask

    def code_vocabulary(self, level: str) -> list[str]:
        """All codes present in the index at ``level`` (sorted)."""
        if level not in CODE_LEVELS:
            raise ValueError(f"unknown classification level {level!r}; valid: {', '.join(CODE_LEVELS)}")
        vocab = self._codes[level][0]
        return sorted(vocab, key=vocab.__getitem__)

    def query_codes(self, codes: Iterable[str], level: str) -> list[str]:
        """The given codes normalised and truncated to ``level`` (for reporting), duplicates removed."""
        out: list[str] = []
        for raw in codes:
            t = truncate_code(normalise_query_code(raw), level)
            if t is not None and t not in out:
                out.append(t)
        return out
