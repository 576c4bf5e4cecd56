"""The doc store of an index folder: records by row or publication id, dates and codes for filters.

Files (names in :class:`service.index.folder.Layout`; rows are the internal document numbers shared
by every stage):

- ``docs.jsonl``: one record per line (the corpus schema), ``docs.offsets.npy``: int64 byte offsets,
  ``N + 1`` entries (the last one is the file size), so row ``i`` is ``[off[i], off[i+1])``.
- ``docs.headers.jsonl`` + ``docs.headers.offsets.npy``: the same records without their texts
  (:data:`HEAVY_FIELDS`), what a hit list shows, so a search does not parse whole documents.
- ``doc_ids.json``: row -> publication id.
- ``docs.dates.npy``: int32 publication date as days since 1970-01-01 (``MISSING_DATE`` if unknown).
- ``codes/<level>.json`` + ``codes/<level>.indptr.npy`` + ``codes/<level>.rows.npy``: per
  classification level an inverted list code -> sorted rows, built from the union of the IPC and CPC
  codes truncated by syntax (``H01F27/14`` -> ``H01F27/00`` at main group, ``H01F`` at subclass;
  :mod:`service.codes`), so a filter costs one lookup per query code.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from array import array
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from datetime import date
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

from service.codes import CODE_LEVELS, check_level, codes_at, parse_code, record_codes, truncate_code
from service.corpus.ids import id_keys, normalise_pub_id
from service.corpus.record import PatentRecord
from service.filecache import file_identity, load_shared
from service.index.folder import IndexFolder, IndexFormatError, Layout

log = logging.getLogger(__name__)

EPOCH = date(1970, 1, 1)
MISSING_DATE = int(np.iinfo(np.int32).min)
HEAVY_FIELDS = ("abstract", "claims", "description", "citations")
"""Fields :meth:`DocStore.header_row` leaves out (empty in the header record)."""
HEADER_CACHE_ROWS = 8192  # parsed header records kept per doc store (a few KiB each)


class DamagedRecordError(IndexFormatError):
    """A stored record that cannot be read back (a damaged ``docs.jsonl`` / ``docs.headers.jsonl`` or offsets).

    ``doc_id``: the publication of the row; ``segment``: its segment relative to the index folder (``"."``: the
    build's own); ``file``: the file read. The message names all three, and no path on disk.
    """

    def __init__(self, doc_id: str, row: int, segment: str, file: str, cause: BaseException) -> None:
        self.doc_id, self.row, self.segment, self.file = doc_id, row, segment, file
        super().__init__(f"the stored record of {doc_id} is damaged ({file} of segment {segment!r}, row {row}: "
                         f"{type(cause).__name__})")


class UnknownDocumentError(KeyError):
    """A publication id that is not in the doc store (or matches several documents)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


def _relative(seg_dir: Path, root: Path) -> str:
    try:
        return str(seg_dir.relative_to(root))
    except ValueError:
        return seg_dir.name


# ------------------------------------------------------------------------------- ids and codes

# ---------------------------------------------------------------------------------- doc store


class DocStoreWriter:
    """Streams records into the doc store files of an index folder (use as a context manager)."""

    def __init__(self, index_dir: str | Path) -> None:
        self.index_dir = Path(index_dir)
        self.index_dir.mkdir(parents=True, exist_ok=True)
        self._fh = open(self.index_dir / Layout.DOCS, "wb")  # noqa: SIM115 - closed in close()
        self._headers = open(self.index_dir / Layout.HEADERS, "wb")  # noqa: SIM115 - closed in close()
        self._offsets = array("q", [0])
        self._header_offsets = array("q", [0])
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
        header = record.model_dump_json(exclude_defaults=True, exclude=set(HEAVY_FIELDS)).encode("utf-8") + b"\n"
        self._headers.write(header)
        self._header_offsets.append(self._header_offsets[-1] + len(header))
        self._ids.append(record.id)
        self._seen.add(record.id)
        d = record.publication_date
        self._dates.append((d - EPOCH).days if d else MISSING_DATE)
        codes = record_codes(record)
        for lvl in CODE_LEVELS:
            vocab = self._code_vocab[lvl]
            for t in codes_at(codes, lvl):
                self._code_rows[lvl].append(row)
                self._code_ids[lvl].append(vocab.setdefault(t, len(vocab)))
        return row

    def close(self) -> dict[str, Any]:
        """Write the arrays; returns the ``docstore`` component description for ``meta.json``."""
        if self._closed:
            raise RuntimeError("DocStoreWriter already closed")
        self._closed = True
        self._fh.close()
        self._headers.close()
        d = self.index_dir
        np.save(d / Layout.OFFSETS, np.frombuffer(self._offsets, dtype=np.int64))
        np.save(d / Layout.HEADER_OFFSETS, np.frombuffer(self._header_offsets, dtype=np.int64))
        (d / Layout.IDS).write_text(json.dumps(self._ids), encoding="utf-8")
        np.save(d / Layout.DATES, np.frombuffer(self._dates, dtype=np.int32) if self._dates else np.zeros(0, np.int32))
        (d / Layout.CODES).mkdir(exist_ok=True)
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
            (d / Layout.codes(lvl, "json")).write_text(json.dumps(codes), encoding="utf-8")
            np.save(d / Layout.codes(lvl, "indptr.npy"), indptr)
            np.save(d / Layout.codes(lvl, "rows.npy"), rows[order].astype(np.int32))
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
                self.abort()

    def abort(self) -> None:
        """Close the files without writing the arrays (a write that failed: the folder is removed)."""
        if not self._closed:
            self._closed = True
            self._fh.close()
            self._headers.close()


class _Keys:
    """Rows by key, in row order: ``first`` the first row of every key, ``more`` every row of the keys that have
    several (few)."""

    __slots__ = ("first", "more")

    def __init__(self, keys: Iterable[str | None]) -> None:
        self.first: dict[str, int] = {}
        self.more: dict[str, list[int]] = {}
        first, more = self.first, self.more
        for row, key in enumerate(keys):
            if key is None:
                continue
            if key in first:
                more.setdefault(key, [first[key]]).append(row)
            else:
                first[key] = row

    def rows(self, key: str) -> list[int]:
        rows = self.more.get(key)
        if rows is not None:
            return rows
        row = self.first.get(key)
        return [] if row is None else [row]


class _SegmentTable:
    """What a doc store reads of one segment's files, read-only once read: offsets, ids, dates, codes and the id
    lookups (exact, and by :func:`service.corpus.ids.id_keys`). Shared by the doc stores of one process while the
    segment's files are unchanged (:func:`service.filecache.load_shared`): a reload after ``priorart add`` reads the
    new segment's, not every segment's again (the id keys of a 1M-document segment are seconds of Python)."""

    def __init__(self, seg_dir: Path) -> None:
        self.offsets = np.load(seg_dir / Layout.OFFSETS)
        self.ids: list[str] = json.loads((seg_dir / Layout.IDS).read_text(encoding="utf-8"))
        self.dates = np.load(seg_dir / Layout.DATES)
        self.codes: dict[str, tuple[dict[str, int], np.ndarray, np.ndarray]] = {}
        for lvl in CODE_LEVELS:
            vocab = json.loads((seg_dir / Layout.codes(lvl, "json")).read_text(encoding="utf-8"))
            indptr = np.load(seg_dir / Layout.codes(lvl, "indptr.npy"))
            rows = np.load(seg_dir / Layout.codes(lvl, "rows.npy"))
            self.codes[lvl] = ({c: i for i, c in enumerate(vocab)}, indptr, rows)
        self.header_offsets: np.ndarray | None = None
        if (seg_dir / Layout.HEADERS).exists():
            self.header_offsets = np.load(seg_dir / Layout.HEADER_OFFSETS)
        else:  # built before headers were stored: header_row parses whole records
            log.warning("%s has no %s (built by an older priorart): hit lists read whole records; "
                        "rebuild the index for faster searches", seg_dir, Layout.HEADERS)
        n = len(self.ids)
        if len(self.offsets) != n + 1 or len(self.dates) != n:
            raise IndexFormatError(f"doc store in {seg_dir} is inconsistent: {n} ids, {len(self.offsets)} offsets, "
                                   f"{len(self.dates)} dates")
        keys = [id_keys(normalise_pub_id(pid)) for pid in self.ids]
        self.exact = _Keys(self.ids)
        self.loose = _Keys(k[0] if k else None for k in keys)
        self.nokind = _Keys(k[1] if k else None for k in keys)

    @classmethod
    def of(cls, seg_dir: Path) -> _SegmentTable:
        headers = seg_dir / Layout.HEADER_OFFSETS
        return load_shared(seg_dir / Layout.IDS, lambda p: cls(p.parent), *file_identity(seg_dir / Layout.OFFSETS),
                           *(file_identity(headers) if headers.exists() else ("no headers",)))


class DocStore:
    """Random access to the records of an index by row or publication id, plus filter arrays.

    A live index (several segments, deleted rows: :class:`service.index.folder.Segment`) is one row
    space: the rows of each segment in turn. Deleted rows stay as holes: their records are still
    readable by row, but :meth:`find` never returns them and the filter masks exclude them; ``live``
    is the mask of the rows that are not deleted (None when none is).
    """

    def __init__(self, index_dir: str | Path, *, segments: Sequence[tuple[Path, np.ndarray]] | None = None) -> None:
        self._fds: list[int] = []
        self._header_fds: list[int | None] = []
        # parsed header records of recently shown rows (read-only for callers): the same documents recur in hit
        # lists, and parsing a header (pydantic, codes normalised) was the largest part of a /search's hit list
        self._header_cache: OrderedDict[int, PatentRecord] = OrderedDict()
        self._header_lock = threading.Lock()
        d = Path(index_dir)
        self.index_dir = d
        parts = list(segments) if segments is not None else [(d, np.zeros(0, np.int64))]
        self._segment_names = [_relative(seg_dir, d) for seg_dir, _ in parts]
        self._tables: list[_SegmentTable] = []
        starts = [0]
        ids: list[str] = []
        deleted_rows: list[np.ndarray] = []
        for seg_dir, deleted in parts:
            try:
                table = _SegmentTable.of(seg_dir)
                self._fds.append(os.open(seg_dir / Layout.DOCS, os.O_RDONLY))
                self._header_fds.append(os.open(seg_dir / Layout.HEADERS, os.O_RDONLY)
                                        if table.header_offsets is not None else None)
            except IndexFormatError:
                self.close()
                raise
            except (OSError, ValueError) as exc:
                self.close()
                raise IndexFormatError(f"doc store in {seg_dir} is unreadable: {exc}") from exc
            self._tables.append(table)
            deleted_rows.append(np.asarray(deleted, dtype=np.int64) + starts[-1])
            ids.extend(table.ids)
            starts.append(starts[-1] + len(table.ids))
        self._starts = np.asarray(starts, dtype=np.int64)
        self.segment_dirs: list[Path] = [Path(seg_dir) for seg_dir, _ in parts]
        self.segment_starts: list[int] = starts[:-1]  # each segment's first row
        self._offsets = [t.offsets for t in self._tables]
        self._header_offsets = [t.header_offsets for t in self._tables]
        self._codes_parts = [t.codes for t in self._tables]
        self.ids: list[str] = ids
        self.offsets: np.ndarray = self._offsets[0] if len(parts) == 1 else np.zeros(0, np.int64)
        self.dates: np.ndarray = (self._tables[0].dates if len(parts) == 1 else
                                  np.concatenate([t.dates for t in self._tables]))
        gone = np.concatenate(deleted_rows) if deleted_rows else np.zeros(0, np.int64)
        self.live: np.ndarray | None = None
        if len(gone):
            self.live = np.ones(len(ids), dtype=bool)
            self.live[gone] = False
        self._codes = self._codes_parts[0]

    @classmethod
    def of_folder(cls, folder: IndexFolder) -> DocStore:
        """The doc store of an opened index folder at its generation (every segment, deletions applied)."""
        if not folder.is_live:
            return cls(folder.root)
        return cls(folder.root, segments=[(s.folder.root, s.deleted) for s in folder.segments])

    @property
    def n_live(self) -> int:
        """Documents not deleted."""
        return len(self.ids) if self.live is None else int(self.live.sum())

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
        row = self._exact(doc_id)
        if row is not None:
            return row
        norm = normalise_pub_id(doc_id)
        row = self._exact(norm)
        if row is not None:
            return row
        keys = id_keys(norm)
        if keys is None:
            return None
        row = next(self._live_rows("loose", keys[0]), None)
        if row is not None:
            return row
        if keys[0] == keys[1]:  # no kind code given
            rows = list(self._live_rows("nokind", keys[1]))
            if len(rows) == 1:
                return rows[0]
            if len(rows) > 1:
                cands = ", ".join(self.ids[r] for r in rows)
                raise UnknownDocumentError(f"{doc_id!r} matches several publications ({cands}); add the kind code")
        return None

    def _live_rows(self, kind: str, key: str) -> Iterator[int]:
        """The live rows under ``key`` in a segment table's ``kind`` of id keys, in row order."""
        live = self.live
        for table, start in zip(self._tables, self._starts.tolist(), strict=False):
            for local in getattr(table, kind).rows(key):
                if live is None or live[start + local]:
                    yield start + local

    def _exact(self, pid: str) -> int | None:
        """The last live row stored under exactly this publication id."""
        found = None
        for row in self._live_rows("exact", pid):
            found = row
        return found

    def row(self, doc_id: str) -> int:
        """Like :meth:`find` but raises :class:`UnknownDocumentError` when absent."""
        row = self.find(doc_id)
        if row is None:
            raise UnknownDocumentError(f"publication {doc_id!r} is not in this index ({self.n_live} live documents)")
        return row

    def _locate(self, row: int) -> tuple[int, int]:
        """(segment, row within it)."""
        if not 0 <= row < len(self.ids):
            raise IndexError(f"row {row} out of range (0..{len(self.ids) - 1})")
        seg = int(np.searchsorted(self._starts, row, side="right")) - 1 if len(self._fds) > 1 else 0
        return seg, row - int(self._starts[seg])

    def get_row(self, row: int) -> PatentRecord:
        """The record stored at a row."""
        seg, local = self._locate(row)
        offsets = self._offsets[seg]
        # one descriptor per segment opened at load and read with pread: thread-safe, and a folder swapped
        # or deleted under a running service keeps serving the records it was loaded with
        try:
            start, end = int(offsets[local]), int(offsets[local + 1])
            return PatentRecord.model_validate_json(os.pread(self._fds[seg], end - start, start))
        except (ValueError, OSError) as exc:  # a damaged record (invalid JSON, a bad offset) or an unreadable file
            raise self._damaged(row, seg, Layout.DOCS, exc) from exc

    def header_row(self, row: int) -> PatentRecord:
        """The record at a row without its texts (``HEAVY_FIELDS`` left out): what a hit list shows (id, titles,
        codes, dates, family keys), read from ``docs.headers.jsonl``; the last ``HEADER_CACHE_ROWS`` are kept
        parsed (the caller must not change the record). A real patent's record is tens of kilobytes of text,
        which a hit list does not need."""
        with self._header_lock:
            rec = self._header_cache.get(row)
            if rec is not None:
                self._header_cache.move_to_end(row)
                return rec
        seg, local = self._locate(row)
        offsets, fd = self._header_offsets[seg], self._header_fds[seg]
        if offsets is None or fd is None:  # an index built before headers were stored: the whole record
            return self.get_row(row)
        try:
            start, end = int(offsets[local]), int(offsets[local + 1])
            rec = PatentRecord.model_validate_json(os.pread(fd, end - start, start))
        except (ValueError, OSError) as exc:
            raise self._damaged(row, seg, Layout.HEADERS, exc) from exc
        with self._header_lock:
            self._header_cache[row] = rec
            while len(self._header_cache) > HEADER_CACHE_ROWS:
                self._header_cache.popitem(last=False)
        return rec

    def _damaged(self, row: int, seg: int, file: str, exc: BaseException) -> DamagedRecordError:
        err = DamagedRecordError(self.ids[row], row, self._segment_names[seg], file, exc)
        log.error("%s (%s): %s", err, self.index_dir, exc)
        return err

    def close(self) -> None:
        """Release the records files (also done when the store is garbage-collected)."""
        fds, self._fds = getattr(self, "_fds", []), []
        headers, self._header_fds = getattr(self, "_header_fds", []), []
        for fd in [*fds, *headers]:
            if fd is not None:
                os.close(fd)

    def __del__(self) -> None:
        self.close()

    def get(self, doc_id: str) -> PatentRecord:
        """The record of a publication id (tolerant lookup, see :meth:`find`)."""
        return self.get_row(self.row(doc_id))

    def date_mask(self, before: date) -> np.ndarray:
        """Rows published strictly before ``before`` (unknown dates are excluded)."""
        limit = (before - EPOCH).days
        mask = (self.dates != MISSING_DATE) & (self.dates < limit)
        return mask if self.live is None else mask & self.live

    def code_mask(self, codes: Iterable[str], level: str = "subclass") -> np.ndarray:
        """Rows sharing at least one code with ``codes`` after truncating both to ``level``.

        Raises ``ValueError`` for an invalid code or one coarser than ``level``.
        """
        level = check_level(level)
        mask = np.zeros(len(self.ids), dtype=bool)
        for raw in codes:
            t = truncate_code(parse_code(raw), level)
            if t is None:
                raise ValueError(
                    f"code {raw!r} is coarser than the filter level {level!r}; give a longer code or a coarser level"
                )
            for part, start in zip(self._codes_parts, self._starts.tolist(), strict=False):
                vocab, indptr, rows = part[level]
                i = vocab.get(t)
                if i is not None:
                    mask[rows[indptr[i] : indptr[i + 1]] + start] = True
        return mask if self.live is None else mask & self.live

    def code_vocabulary(self, level: str) -> list[str]:
        """All codes present in the index at ``level`` (sorted)."""
        level = check_level(level)
        if len(self._codes_parts) == 1:
            vocab = self._codes[level][0]
            return sorted(vocab, key=vocab.__getitem__)
        return sorted(set().union(*(part[level][0] for part in self._codes_parts)))

    def query_codes(self, codes: Iterable[str], level: str) -> list[str]:
        """The given codes normalised and truncated to ``level`` (for reporting), duplicates removed."""
        return codes_at([parse_code(raw) for raw in codes], level)
