"""The live index: publications added, replaced and deleted without a rebuild, in segments and generations.

``priorart add INDEX CORPUS`` writes the batch into a new segment (:meth:`Layout.segment`, a folder of the
index layout with its own ``meta.json``: doc store, BM25 postings per language as raw term frequencies and
lengths, passages, and with models in the index the dense and rerank vectors encoded by the installed
models), then commits a new generation (:meth:`IndexFolder.write_generation`: the manifest naming the
segments in row order and the rows deleted in each, fsynced and renamed into place, written last). A
publication id that is live already is replaced: its old row is deleted in the new generation.
``priorart delete INDEX ID...`` writes a generation with more deleted rows and no new segment.
``priorart compact INDEX`` writes the live documents into one segment again. ``add`` never rewrites the whole
index: after its commit it merges runs of small neighbouring segments by size tiers (:func:`merge_plan`, as
Lucene's log merge policy: :data:`MERGE_FACTOR` segments of one tier become one of the next), each merge a
generation of its own, so that a document is rewritten about once per tier it climbs and the build's own segment
stays untouched while the added ones are smaller. A crash at any point leaves the newest complete manifest, i.e.
the previous generation; unreferenced leftovers are removed by the next writer.

Readers (:meth:`IndexFolder.open`) join the segments into one row space and compute every collection
statistic (BM25 ``N``, ``df``, ``avgdl``, the idf floor, PSQ expected ``df``) over the live rows, so the
scores are those of one build of the live documents. Translation tables and the compound splitter's word
list belong to the build (the folder's top level): added documents are analysed with them, and the
models are not retrained.

What a segment holds is written by the index components (:mod:`service.index.components`, the registry
``priorart build`` and the shard builder write through too); this module is the one home of the live operations.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import logging
import os
import re
import shutil
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from service.corpus.record import PatentRecord, family_key
from service.index.components import WriteContext, merge_components, write_components
from service.index.folder import (
    BuildSettings,
    IndexFolder,
    IndexFormatError,
    Layout,
    ShardSet,
    current_generation,
    generation_numbers,
    is_sharded,
    load_meta,
    write_meta,
)
from service.index.store import DamagedRecordError, DocStore

log = logging.getLogger(__name__)

MAX_SEGMENTS = 10
"""``add`` merges its newest segments when a generation would still hold more than this after the tiered merges."""
MERGE_FACTOR = 4
"""``add`` merges a run of this many neighbouring segments of one size tier (live documents ``< MERGE_FACTOR ** (t +
1)``) into one (:func:`merge_plan`); 0 turns the tiered merges off (only :data:`MAX_SEGMENTS` bounds the count)."""
KEEP_GENERATIONS = 2
"""Manifests (and their segments) kept besides the newest, for readers still opening an older one."""


class LiveIndexError(ValueError):
    """An add/delete/compact that was not done: nothing was committed, the index is unchanged (the message says why).

    Never raised once the operation's generation is committed: a failure after the commit is an
    :class:`AfterCommitError`.
    """


class BatchError(LiveIndexError):
    """The batch itself is refused (no records, an id twice): nothing written."""


class NotInIndexError(LiveIndexError):
    """Ids to delete that are not live in the index: nothing deleted."""


class StorageError(LiveIndexError):
    """A write (or a read) of the index folder failed before the commit: the disk is full, or the device failed.

    Nothing was committed: the index is unchanged at ``generation``. ``disk_full``: no space (or quota) left,
    as opposed to an I/O error or a read-only file system.
    """

    def __init__(self, message: str, *, generation: int, disk_full: bool, reason: str = "") -> None:
        super().__init__(message)
        self.generation = generation
        self.disk_full = disk_full
        self.reason = reason or message  # what failed, without what it means for the index


@dataclass
class LiveReport:
    """What an add/delete/compact did."""

    index_dir: str
    generation: int
    previous: int
    added: int = 0
    replaced: int = 0
    deleted: int = 0
    segments: int = 0
    live_documents: int = 0
    seconds: float = 0.0
    compacted: bool = False  # every segment merged into one
    merges: int = 0  # segment merges committed (an add's tiered merges; 1 for a compaction)
    rolled_back: str | None = None  # a damaged newest generation set aside before this change (what and why)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class AfterCommitError(Exception):
    """The change was committed (``report.generation``: readers get it now), then a later step failed.

    ``step``: what failed (the compaction after an add, the fsync that makes the new manifest durable, the
    next shard of a sharded index); ``cause``: its error. Nothing of the committed change is undone.
    ``disk_full``: the step failed for lack of space.
    """

    def __init__(self, report: LiveReport, step: str, cause: BaseException) -> None:
        self.report = report
        self.step = step
        self.cause = cause
        if isinstance(cause, OSError):
            reason, self.disk_full = storage_failure(cause, Path(report.index_dir))
        else:
            if isinstance(cause, StorageError):
                reason = f"{cause.reason} (it wrote nothing)"
            elif isinstance(cause, LiveIndexError | AfterCommitError):
                reason = str(cause)
            else:
                reason = f"{type(cause).__name__}: {cause}"
            self.disk_full = bool(getattr(cause, "disk_full", False))
        super().__init__(f"committed at generation {report.generation}; {step} failed: {reason}")


_PARTIAL_WRITE = re.compile(r"\d+ requested and \d+ written")
LOW_SPACE_BYTES = 64 << 20
"""Free space under which a partial write is taken for a full disk."""


def storage_failure(exc: OSError, where: Path) -> tuple[str, bool]:
    """What a failed write says about the storage, in words, and whether the disk is full.

    ``ENOSPC``/``EDQUOT``: full. An ``OSError`` without an errno saying "N requested and M written" is numpy's
    partial write (``ndarray.tofile``): full when the device has under :data:`LOW_SPACE_BYTES` free.
    """
    free = _free_bytes(where)
    room = f"{free / 1e6:.1f} MB free on the device" if free is not None else "free space unknown"
    if exc.errno == errno.ENOSPC:
        return f"the disk is full (no space left on the device, {room}: {exc})", True
    if exc.errno == errno.EDQUOT:
        return f"the disk quota is exceeded ({room}: {exc})", True
    if exc.errno is None and _PARTIAL_WRITE.search(str(exc)):
        if free is None or free < LOW_SPACE_BYTES:
            return f"the disk is full (a partial write: {exc}; {room})", True
        return f"a partial write ({exc}) with {room}: the device failed", False
    if exc.errno == errno.EIO:
        return f"an I/O error on the device ({exc})", False
    if exc.errno == errno.EROFS:
        return f"the file system is read-only ({exc})", False
    return f"a file operation failed ({exc})", False


def _free_bytes(where: Path) -> int | None:
    for p in (where, *where.parents):
        try:
            return shutil.disk_usage(p).free
        except OSError:
            continue
    return None


# ------------------------------------------------------------------------------------------ segments


def _analyzers(folder: IndexFolder) -> dict[str, Callable[[str], list[str]]]:
    from service.index.parts import open_part
    from service.text.analysis import CachedAnalyzer, get_analyzer

    stored = open_part("analysis", folder)  # a segment is analysed with the index's word lists
    return {lang: CachedAnalyzer(stored.get(lang) or get_analyzer(lang)) for lang in folder.settings.index_langs}


def _write_context(folder: IndexFolder, *, device: str, progress: bool) -> WriteContext:
    """How a segment of ``folder`` is written: the index's settings and word lists, and its models when it has any
    (the segment's vectors stored without an index, in the index's metric)."""
    with_models = folder.has("models")
    pretrained = not with_models and folder.pretrained_dense
    return WriteContext(folder.settings, _analyzers(folder), progress=progress, device=device,
                        models=folder.path(Layout.MODELS) if with_models else None,
                        encoder=folder.path(Layout.ENCODER) if pretrained else None, dense_kind="vectors",
                        metric=folder.component("dense").get("metric") if with_models else None)


def _segment_settings(folder: IndexFolder) -> BuildSettings:
    """A segment's settings: the index's, without the analysis (the word lists stay at the top level)."""
    return dataclasses.replace(folder.settings, analysis=None)


def _write_segment(folder: IndexFolder, number: int, records: Sequence[PatentRecord], *, device: str,
                   progress: bool) -> Path:
    """Build a segment for ``records`` beside its final place and rename it in; returns its folder."""
    final = folder.root / Layout.segment(number)
    tmp = final.parent / f".{final.name}.building-{os.getpid()}"
    final.parent.mkdir(exist_ok=True)
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    try:
        components = write_components(tmp, records, _write_context(folder, device=device, progress=progress))
        components["segment"] = {"generation": number, "analysis": folder.settings.analysis}
        write_meta(tmp, _segment_settings(folder), components)
        if final.exists():  # a segment of this number from a crashed writer, never committed
            shutil.rmtree(final)
        os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def _cleanup(folder: IndexFolder) -> None:
    """Remove what no kept generation names: half-built segments, old manifests and their segments."""
    numbers = generation_numbers(folder.root)
    keep_numbers = numbers[-(KEEP_GENERATIONS + 1):]
    keep: set[str] = set()
    gen_dir = folder.root / Layout.GENERATIONS
    for n in numbers:
        if n not in keep_numbers:
            (folder.root / Layout.generation(n)).unlink(missing_ok=True)
    for n in keep_numbers:
        try:
            keep.update(s.dir for s in IndexFolder._open_generation(folder.root, n, verify=False).segments)
        except IndexFormatError:
            continue
    if gen_dir.is_dir():
        for p in gen_dir.iterdir():
            if p.name.endswith(".tmp"):
                p.unlink(missing_ok=True)
    seg_dir = folder.root / Layout.SEGMENTS
    if seg_dir.is_dir():
        for p in seg_dir.iterdir():
            rel = f"{Layout.SEGMENTS}/{p.name}"
            if rel not in keep:
                shutil.rmtree(p, ignore_errors=True)


_ANY_GENERATION = re.compile(r"^gen-(\d{6})\.json(?:\.damaged)?$")
DAMAGED_SUFFIX = ".damaged"
"""A damaged manifest that a writer set aside is renamed ``gen-NNNNNN.json.damaged`` (readers skip it)."""


@dataclass
class _Turn:
    """One writer's turn under the lock: the generation it starts from and the number it commits."""

    root: Path
    folder: IndexFolder | None = None
    number: int = 0
    rolled_back: str | None = None
    committed: bool = False


@contextmanager
def _writing(index_dir: str | Path) -> Iterator[_Turn]:
    """The writer lock, the newest good generation under it (a damaged newer one set aside) and the cleanup of
    what no kept generation names; an ``OSError`` before the commit becomes a :class:`StorageError` (the index
    unchanged), so that a full disk or a failing device is said as such whatever step it hits."""
    root = Path(index_dir)
    turn = _Turn(root)
    try:
        try:
            base = IndexFolder(root, load_meta(root, verify=False))  # the build's folder: the lock's home
        except IndexFormatError as exc:
            raise LiveIndexError(str(exc)) from exc
        with base.writer_lock():
            turn.folder, turn.rolled_back = _open_for_write(root)
            turn.number = _next_number(root)
            _cleanup(turn.folder)
            yield turn
    except OSError as exc:
        if turn.committed:  # (never: _commit returns a failure after its rename instead of raising it)
            raise
        gen = turn.folder.generation if turn.folder is not None else _generation_or_none(root)
        reason, full = storage_failure(exc, root)
        where = f"generation {gen}" if gen is not None else "its previous generation"
        raise StorageError(f"{reason}: nothing was committed; the index {root} is unchanged at {where}",
                           generation=gen if gen is not None else -1, disk_full=full, reason=reason) from exc


def _generation_or_none(root: Path) -> int | None:
    try:
        return current_generation(root)
    except OSError:
        return None


def _next_number(root: Path) -> int:
    """The number of the next generation: past every manifest, set-aside damaged ones included (a server that
    failed to load generation n skips n until a newer one appears)."""
    d = root / Layout.GENERATIONS
    if not d.is_dir():
        return 1
    return max((int(m.group(1)) for p in d.iterdir() if (m := _ANY_GENERATION.match(p.name))), default=0) + 1


def _open_for_write(root: Path) -> tuple[IndexFolder, str | None]:
    """The newest generation that opens, and what was rolled back to reach it (None: nothing)."""
    try:
        folder = IndexFolder.open(root, verify=False)
        rolled = None
    except IndexFormatError as exc:
        folder, message = _roll_back(root, exc)
        rolled = message or None
    if folder.has("ltr"):
        raise LiveIndexError(f"{folder.root} has learning-to-rank stores (ltr/) built for its documents: they do not "
                             "cover added ones; rebuild with `priorart build` instead")
    return folder, rolled


def _roll_back(root: Path, error: IndexFormatError) -> tuple[IndexFolder, str]:
    """The newest generation is damaged (its manifest, or a segment it names): set aside every newer manifest
    that does not open (renamed ``*.damaged``) and go on from the newest one that does, with a message."""
    damaged: list[tuple[int, IndexFormatError]] = []
    folder: IndexFolder | None = None
    for n in [*reversed(generation_numbers(root)), 0]:
        try:
            folder = IndexFolder._open_generation(root, n, verify=False)
            break
        except IndexFormatError as exc:
            damaged.append((n, exc))
    if folder is None:
        raise LiveIndexError(str(error)) from error  # the build's own folder is damaged: nothing to go back to
    if not damaged:  # it opens now (a reader's retry window): nothing to roll back
        return folder, ""
    for n, _ in damaged:
        manifest = root / Layout.generation(n)
        os.replace(manifest, manifest.with_name(manifest.name + DAMAGED_SUFFIX))
    numbers = ", ".join(str(n) for n, _ in reversed(damaged))
    message = (f"generation {numbers} of {root} {'is' if len(damaged) == 1 else 'are'} damaged ({damaged[0][1]}): "
               f"set aside as {Layout.GENERATIONS}/gen-NNNNNN.json{DAMAGED_SUFFIX}; rolled back to generation "
               f"{folder.generation}, the last good one, which this change starts from")
    log.warning("%s", message)
    return folder, message


def _commit(turn: _Turn, segments: list[dict[str, Any]], operation: dict[str, Any]) -> OSError | None:
    """Write the manifest of ``turn.number``: the commit point (fsynced, renamed into place, the folder fsynced).

    Raises an ``OSError`` of a step before the rename (nothing committed); returns that of a step after it (the
    rename done: committed, the folder's fsync failed), None when every step succeeded.
    """
    assert turn.folder is not None
    path = turn.root / Layout.generation(turn.number)
    try:
        turn.folder.write_generation(turn.number, segments, operation)
    except OSError as exc:
        if path.exists():  # renamed into place: readers get it now
            turn.committed = True
            return exc
        with contextlib.suppress(OSError):
            path.with_name(path.name + ".tmp").unlink(missing_ok=True)
        raise
    turn.committed = True
    return None


UNSYNCED_STEP = "the fsync that makes it durable (it is served now; a power loss before the next sync may undo it)"


# ------------------------------------------------------------------------------------------ operations


def add_documents(
    index_dir: str | Path,
    records: Iterable[PatentRecord],
    *,
    device: str = "auto",
    progress: bool | None = None,
    max_segments: int = MAX_SEGMENTS,
    merge_factor: int = MERGE_FACTOR,
) -> LiveReport:
    """Add a batch (a live id is replaced) as a new segment and commit a new generation.

    The records are read completely first (a corrupt record: the error, nothing written). Then merges small
    neighbouring segments, a generation per merge (:func:`merge_plan` with ``merge_factor`` and ``max_segments``).
    Raises :class:`LiveIndexError` when nothing was committed, :class:`AfterCommitError` when the batch was
    committed and a later step (a merge) failed.
    """
    t0 = time.perf_counter()
    show = sys.stderr.isatty() if progress is None else progress
    batch = list(records)  # a reading error happens here, before anything is written
    if not batch:
        raise BatchError("the batch holds no records: nothing to add")
    seen: set[str] = set()
    for rec in batch:
        if rec.id in seen:
            raise BatchError(f"publication {rec.id!r} appears twice in the batch; nothing added")
        seen.add(rec.id)
    if is_sharded(index_dir):
        return _add_sharded(Path(index_dir), batch, device=device, progress=show, max_segments=max_segments,
                            merge_factor=merge_factor)
    with _writing(index_dir) as turn:
        assert turn.folder is not None
        folder = turn.folder
        docs = DocStore.of_folder(folder)
        try:
            replaced = _live_rows(docs, [r.id for r in batch], missing_ok=True)
        finally:
            docs.close()
        seg = _write_segment(folder, turn.number, batch, device=device, progress=show)
        entries = _entries(folder, replaced)
        entries.append({"dir": Layout.segment(turn.number), "n_docs": len(batch), "deleted": [],
                        "meta_sha256": _sha(seg / Layout.META)})
        unsynced = _commit(turn, entries, {"kind": "add", "added": len(batch) - len(replaced),
                                           "replaced": len(replaced)})
    report = LiveReport(str(folder.root), turn.number, folder.generation, added=len(batch) - len(replaced),
                        replaced=len(replaced), segments=len(entries),
                        live_documents=folder.n_live - len(replaced) + len(batch), rolled_back=turn.rolled_back)
    if unsynced is not None:
        report.seconds = time.perf_counter() - t0
        raise AfterCommitError(report, UNSYNCED_STEP, unsynced)
    sizes = [entry["n_docs"] - len(entry["deleted"]) for entry in entries]
    if merge_plan(sizes, factor=merge_factor, max_segments=max_segments) is not None:
        for _ in range(len(entries)):  # each merge leaves fewer segments: a cascade ends within this many
            try:
                done = merge_segments(index_dir, factor=merge_factor, max_segments=max_segments, device=device,
                                      progress=show)
            except AfterCommitError as exc:  # the merge committed too; its fsync failed
                report.generation, report.segments = exc.report.generation, exc.report.segments
                report.merges += 1
                report.compacted = report.compacted or exc.report.compacted
                report.seconds = time.perf_counter() - t0
                raise AfterCommitError(report, f"the merge of segments after it committed, and {exc.step}",
                                       exc.cause) from exc
            except Exception as exc:  # noqa: BLE001 - the batch is committed: no failure now may read as a failed add
                report.seconds = time.perf_counter() - t0
                raise AfterCommitError(report, "the merge of segments after it (the batch stays committed, in "
                                       f"{report.segments} segments)", exc) from exc
            if done is None:
                break
            report.generation, report.segments = done.generation, done.segments
            report.merges += 1
            report.compacted = report.compacted or done.compacted
    report.seconds = time.perf_counter() - t0
    return report


def delete_documents(index_dir: str | Path, ids: Sequence[str], *, missing_ok: bool = False) -> LiveReport:
    """Delete publications (exact ids) in a new generation; unknown ids are an error unless ``missing_ok``."""
    t0 = time.perf_counter()
    if not ids:
        raise BatchError("no publication id to delete")
    if is_sharded(index_dir):
        return _delete_sharded(Path(index_dir), ids, missing_ok=missing_ok)
    with _writing(index_dir) as turn:
        assert turn.folder is not None
        folder = turn.folder
        docs = DocStore.of_folder(folder)
        try:
            rows = _live_rows(docs, list(ids), missing_ok=missing_ok)
        finally:
            docs.close()
        entries = _entries(folder, rows)
        unsynced = _commit(turn, entries, {"kind": "delete", "deleted": len(rows)})
    report = LiveReport(str(folder.root), turn.number, folder.generation, deleted=len(rows), segments=len(entries),
                        live_documents=folder.n_live - len(rows), seconds=time.perf_counter() - t0,
                        rolled_back=turn.rolled_back)
    if unsynced is not None:
        raise AfterCommitError(report, UNSYNCED_STEP, unsynced)
    return report


def compact(index_dir: str | Path, *, device: str = "auto", progress: bool | None = None) -> LiveReport:
    """Write the live documents of the newest generation into one segment (analysed again, vectors copied)."""
    show = sys.stderr.isatty() if progress is None else progress
    if is_sharded(index_dir):
        return _compact_sharded(Path(index_dir), device=device, progress=show)
    report = _merge(index_dir, lambda folder: (0, len(folder.segments)), device=device, progress=show)
    assert report is not None  # (the whole generation: always a run)
    return report


def merge_segments(index_dir: str | Path, *, factor: int = MERGE_FACTOR, max_segments: int = MAX_SEGMENTS,
                   device: str = "auto", progress: bool | None = None) -> LiveReport | None:
    """The next merge of :func:`merge_plan` on the newest generation, committed as a generation of its own; None
    when there is nothing to merge."""
    show = sys.stderr.isatty() if progress is None else progress
    return _merge(index_dir, lambda folder: merge_plan([seg.n_live for seg in folder.segments], factor=factor,
                                                       max_segments=max_segments), device=device, progress=show)


def _merge(index_dir: str | Path, pick: Callable[[IndexFolder], tuple[int, int] | None], *, device: str,
           progress: bool) -> LiveReport | None:
    """Write the live documents of the run of segments ``pick`` names (``(first, end)`` of the newest generation;
    None: nothing to do) into one segment in their row order, and commit the generation with it in their place.
    The whole generation is a compaction; a run without live documents is dropped from the generation."""
    t0 = time.perf_counter()
    with _writing(index_dir) as turn:
        assert turn.folder is not None
        folder = turn.folder
        run = pick(folder)
        if run is None:
            return None
        first, end = run
        whole = first == 0 and end == len(folder.segments)
        segs = folder.segments[first:end]
        docs = DocStore.of_folder(folder)
        span = np.arange(segs[0].start, segs[-1].start + segs[-1].n_rows, dtype=np.int64)
        rows = span if docs.live is None else span[docs.live[span]]
        entries = _entries(folder, [])
        number = turn.number
        operation: dict[str, Any] = ({"kind": "compact", "segments_before": len(folder.segments)} if whole else
                                     {"kind": "merge", "first": first, "segments": end - first})
        if not len(rows):
            docs.close()
            if whole:
                raise LiveIndexError(f"no live documents: nothing to compact; the index is unchanged at generation "
                                     f"{folder.generation}")
            if first == 0:  # the build's own segment stays the first of every generation
                return None
            merged: list[dict[str, Any]] = []
        else:
            final = folder.root / Layout.segment(number)
            tmp = final.parent / f".{final.name}.building-{os.getpid()}"
            try:
                final.parent.mkdir(exist_ok=True)
                shutil.rmtree(tmp, ignore_errors=True)
                tmp.mkdir()
                components = merge_components(folder, tmp, rows, docs,
                                              _write_context(folder, device=device, progress=progress))
                # compacted: rows rewritten from older segments (the watches take their provenance from the adds)
                components["segment"] = {"generation": number, "analysis": folder.settings.analysis,
                                         "compacted": True}
                write_meta(tmp, _segment_settings(folder), components)
                os.replace(tmp, final)
            except DamagedRecordError as exc:
                shutil.rmtree(tmp, ignore_errors=True)
                what = "compact" if whole else "merge segments"
                raise LiveIndexError(f"cannot {what}: {exc}; nothing was committed, the index is unchanged at "
                                     f"generation {folder.generation}") from exc
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
            finally:
                docs.close()
            merged = [{"dir": Layout.segment(number), "n_docs": len(rows), "deleted": [],
                       "meta_sha256": _sha(final / Layout.META)}]
        entries = entries[:first] + merged + entries[end:]
        unsynced = _commit(turn, entries, operation)
    report = LiveReport(str(folder.root), number, folder.generation, segments=len(entries),
                        live_documents=int(len(rows)) if whole else folder.n_live, seconds=time.perf_counter() - t0,
                        compacted=whole, merges=1, rolled_back=turn.rolled_back)
    if unsynced is not None:
        raise AfterCommitError(report, UNSYNCED_STEP, unsynced)
    return report


def _sha(path: Path) -> str:
    from service.index.folder import sha256_file

    return sha256_file(path)


def _live_rows(docs: DocStore, ids: Sequence[str], *, missing_ok: bool) -> list[int]:
    """Global rows of the live documents with these exact ids."""
    live: dict[str, int] = {}
    for row, pid in enumerate(docs.ids):
        if docs.live is None or docs.live[row]:
            live[pid] = row
    missing = [i for i in ids if i not in live]
    if missing and not missing_ok:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise NotInIndexError(f"not in the index: {shown}; nothing deleted")
    return sorted({live[i] for i in ids if i in live})


def _entries(folder: IndexFolder, extra_deleted: Sequence[int]) -> list[dict[str, Any]]:
    """The manifest entries of the folder's segments with ``extra_deleted`` (global rows) deleted too."""
    out = []
    extra = np.asarray(extra_deleted, dtype=np.int64)
    for seg in folder.segments:
        entry = seg.entry()
        mine = extra[(extra >= seg.start) & (extra < seg.start + seg.n_rows)] - seg.start
        if len(mine):
            entry["deleted"] = sorted(set(entry["deleted"]) | {int(r) for r in mine.tolist()})
        out.append(entry)
    return out


def _tier(n: int, factor: int) -> int:
    """``floor(log_factor(n))``, 0 for 0 or 1 document."""
    t = 0
    while n >= factor:
        n //= factor
        t += 1
    return t


def merge_plan(sizes: Sequence[int], *, factor: int = MERGE_FACTOR,
               max_segments: int = MAX_SEGMENTS) -> tuple[int, int] | None:
    """The run of neighbouring segments ``add`` merges next, ``(first, end)`` (None: nothing to merge), from each
    segment's live documents in row order.

    A segment of ``n`` live documents is in tier ``floor(log_factor(n))``. For the lowest tier ``t`` that has one,
    the newest run of at least ``factor`` neighbouring segments all in tier ``t`` or below, none of them more than
    half of the run, is merged whole: the merged segment lands in a higher tier, so calling again cascades, a
    document is rewritten only into a segment at least twice its segment's size (about once per tier), and a
    segment larger than the others together (the build's) is left alone. Neighbours only, so the rows keep their
    order. With no such run and more than ``max_segments`` segments, the neighbours of the smallest total (the
    newest among equals) are merged down to ``max_segments``. ``factor`` 0 (or 1): no tiered merges.
    """
    sizes = [max(int(x), 0) for x in sizes]
    n = len(sizes)
    if factor >= 2 and n >= factor:
        tiers = [_tier(x, factor) for x in sizes]
        for t in sorted(set(tiers)):
            end = n
            while end > 0:
                while end > 0 and tiers[end - 1] > t:
                    end -= 1
                first = end
                while first > 0 and tiers[first - 1] <= t:
                    first -= 1
                run = sizes[first:end]
                if end - first >= factor and 2 * max(run) <= sum(run):
                    return first, end
                end = first
    bound = max(max_segments, 1)
    if n > bound:
        width = n - bound + 1
        totals = [sum(sizes[i:i + width]) for i in range(n - width + 1)]
        first = min(range(len(totals)), key=lambda i: (totals[i], -i))
        return first, first + width
    return None


# ------------------------------------------------------------------------------------------ shards


def _open_shards(index_dir: str | Path) -> ShardSet:
    try:
        return ShardSet.open(index_dir, verify=False)
    except IndexFormatError as exc:
        raise LiveIndexError(str(exc)) from exc


def _live_shard_of(shards: ShardSet) -> dict[str, int]:
    """Publication id -> the shard where it is live."""
    out: dict[str, int] = {}
    for i, f in enumerate(shards.shards):
        docs = DocStore.of_folder(f)
        try:
            for row, pid in enumerate(docs.ids):
                if docs.live is None or docs.live[row]:
                    out[pid] = i
        finally:
            docs.close()
    return out


def _after_shards(root: Path, report: LiveReport, t0: float) -> LiveReport:
    """Fill ``report`` with the shards' state once every shard committed (a read; its failure is after the commit)."""
    try:
        after = _open_shards(root)
    except Exception as exc:  # noqa: BLE001 - every shard committed: a failed read must not read as a failed change
        report.seconds = time.perf_counter() - t0
        raise AfterCommitError(report, "reading the shards back", exc) from exc
    report.generation, report.live_documents = after.generation, sum(f.n_live for f in after.shards)
    report.segments = sum(len(f.segments) for f in after.shards)
    report.seconds = time.perf_counter() - t0
    return report


def _shard_failed(root: Path, report: LiveReport, shard: int, n_shards: int, exc: Exception, done: list[int],
                  t0: float) -> Exception:
    """The error to raise when shard ``shard`` fails: as it is when no shard committed before it (nothing changed),
    else an :class:`AfterCommitError` (the shards in ``done`` committed)."""
    if isinstance(exc, AfterCommitError):
        done = [*done, shard]
        step, cause = f"in shard {shard} of {n_shards}, {exc.step}", exc.cause
    else:
        if not done:
            return exc
        step, cause = f"shard {shard} of {n_shards} (unchanged; shards {', '.join(map(str, done))} committed)", exc
    report.generation = current_generation(root)
    report.seconds = time.perf_counter() - t0
    return AfterCommitError(report, step, cause)


def _add_sharded(root: Path, batch: list[PatentRecord], *, device: str, progress: bool,
                 max_segments: int, merge_factor: int) -> LiveReport:
    """A batch into a sharded index: a record whose id is live in a shard replaces it there, a new one goes to
    the shard of its family key; one add (one generation) per shard that receives records."""
    t0 = time.perf_counter()
    shards = _open_shards(root)
    live = _live_shard_of(shards)
    parts: dict[int, list[PatentRecord]] = {}
    for rec in batch:
        parts.setdefault(live.get(rec.id, shards.shard_for(family_key(rec))), []).append(rec)
    report = LiveReport(str(root), shards.generation, shards.generation)
    done: list[int] = []
    for i in sorted(parts):
        try:
            part = add_documents(shards.shards[i].root, parts[i], device=device, progress=progress,
                                 max_segments=max_segments, merge_factor=merge_factor)
        except Exception as exc:
            raise _shard_failed(root, report, i, shards.n_shards, exc, done, t0) from exc
        done.append(i)
        report.added += part.added
        report.replaced += part.replaced
        report.compacted = report.compacted or part.compacted
        report.merges += part.merges
        report.rolled_back = "; ".join(filter(None, [report.rolled_back, part.rolled_back])) or None
    return _after_shards(root, report, t0)


def _delete_sharded(root: Path, ids: Sequence[str], *, missing_ok: bool) -> LiveReport:
    t0 = time.perf_counter()
    shards = _open_shards(root)
    live = _live_shard_of(shards)
    missing = [i for i in ids if i not in live]
    if missing and not missing_ok:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise NotInIndexError(f"not in the index: {shown}; nothing deleted")
    report = LiveReport(str(root), shards.generation, shards.generation)
    done: list[int] = []
    for shard in sorted({live[i] for i in ids if i in live}):
        try:
            part = delete_documents(shards.shards[shard].root, [i for i in ids if live.get(i) == shard])
        except Exception as exc:
            raise _shard_failed(root, report, shard, shards.n_shards, exc, done, t0) from exc
        done.append(shard)
        report.deleted += part.deleted
        report.rolled_back = "; ".join(filter(None, [report.rolled_back, part.rolled_back])) or None
    return _after_shards(root, report, t0)


def _compact_sharded(root: Path, *, device: str, progress: bool) -> LiveReport:
    t0 = time.perf_counter()
    shards = _open_shards(root)
    report = LiveReport(str(root), shards.generation, shards.generation, compacted=True)
    done: list[int] = []
    for i, f in enumerate(shards.shards):
        try:
            part = compact(f.root, device=device, progress=progress)
        except Exception as exc:
            raise _shard_failed(root, report, i, shards.n_shards, exc, done, t0) from exc
        done.append(i)
        report.rolled_back = "; ".join(filter(None, [report.rolled_back, part.rolled_back])) or None
    return _after_shards(root, report, t0)


__all__ = ["MAX_SEGMENTS", "MERGE_FACTOR", "AfterCommitError", "BatchError", "LiveIndexError",
           "LiveReport", "NotInIndexError", "StorageError", "add_documents", "compact", "delete_documents",
           "merge_plan", "merge_segments", "storage_failure"]
