"""The live index tells failures truthfully (issue 29): a write that fails at any step of add, delete and compact
(an injected ENOSPC or EIO, from the test) is reported as "unchanged" only when nothing was committed, and as
"committed at generation N" when the generation was committed before the failure (the compaction after an add,
the fsync after the rename). A damaged newest generation is rolled back by the next writer.

The fault injector below wraps the file operations that write (``open`` for writing and the writes, flushes and
closes of those files, ``os.open`` with a write flag, ``os.fsync``, ``os.replace``/``os.rename``, ``os.mkdir`` of a
new folder) and makes the n-th of them fail, and, with ``persist``, every one after it (a disk that stays full).
"""

from __future__ import annotations

import builtins
import errno
import io
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from index_copy import copy_index

import service.index.folder as folder_module
from service.corpus.jsonl import read_corpus, write_corpus
from service.corpus.record import PatentRecord
from service.index.folder import IndexFolder, Layout, current_generation
from service.index.live import (
    AfterCommitError,
    LiveIndexError,
    StorageError,
    add_documents,
    compact,
    delete_documents,
)
from service.index.store import DocStore
from training.build import build_index

REPO = Path(__file__).resolve().parents[3]
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


@dataclass
class Faults:
    """Counts write-side file operations; the ``fail_at``-th (1-based) raises ``OSError(code)``, and with
    ``persist`` every later one too. ``fail_at`` None: count only."""

    fail_at: int | None = None
    code: int = errno.ENOSPC
    persist: bool = True
    count: int = 0
    steps: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)

    def step(self, what: str) -> None:
        self.count += 1
        self.steps.append(what)
        if self.fail_at is not None and (self.count == self.fail_at or (self.persist and self.count > self.fail_at)):
            self.failed.append(what)
            raise OSError(self.code, f"{os.strerror(self.code)} (injected at step {self.count}: {what})")


class _File:
    """A file opened for writing whose write, flush and close go through :meth:`Faults.step` (consecutive
    writes to one file are one step: the injector fails the first write of a run, as a full disk would)."""

    def __init__(self, raw: Any, faults: Faults, name: str) -> None:
        self._raw, self._faults, self._name, self._writing = raw, faults, name, False

    def write(self, data: Any) -> int:
        if not self._writing:
            self._faults.step(f"write {self._name}")
            self._writing = True
        return int(self._raw.write(data))

    def flush(self) -> None:
        self._writing = False
        self._faults.step(f"flush {self._name}")
        self._raw.flush()

    def close(self) -> None:
        if self._raw.closed:
            return
        self._writing = False
        self._raw.close()  # the descriptor is released whatever the step says
        self._faults.step(f"close {self._name}")

    def __enter__(self) -> _File:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._raw)


@contextmanager
def inject(monkeypatch: pytest.MonkeyPatch, faults: Faults) -> Iterator[Faults]:
    real_open, real_os_open = builtins.open, os.open
    real_fsync, real_replace, real_rename, real_mkdir = os.fsync, os.replace, os.rename, os.mkdir

    def fake_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if not any(c in mode for c in "wax+") or isinstance(file, int):
            return real_open(file, mode, *args, **kwargs)
        name = Path(str(file)).name
        faults.step(f"open {name}")
        return _File(real_open(file, mode, *args, **kwargs), faults, name)

    def fake_os_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if flags & _WRITE_FLAGS:
            faults.step(f"os.open {Path(str(path)).name}")
        return real_os_open(path, flags, *args, **kwargs)

    def fake_fsync(fd: Any) -> None:
        faults.step("fsync")
        real_fsync(fd)

    def fake_replace(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
        faults.step(f"rename {Path(str(dst)).name}")
        real_replace(src, dst, *args, **kwargs)

    def fake_rename(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
        faults.step(f"rename {Path(str(dst)).name}")
        real_rename(src, dst, *args, **kwargs)

    def fake_mkdir(path: Any, *args: Any, **kwargs: Any) -> None:
        if not os.path.exists(path):  # mkdir of an existing folder fails with EEXIST before it needs space
            faults.step(f"mkdir {Path(str(path)).name}")
        real_mkdir(path, *args, **kwargs)

    with monkeypatch.context() as m:
        m.setattr(builtins, "open", fake_open)
        m.setattr(io, "open", fake_open)
        m.setattr(os, "open", fake_os_open)
        m.setattr(os, "fsync", fake_fsync)
        m.setattr(os, "replace", fake_replace)
        m.setattr(os, "rename", fake_rename)
        m.setattr(os, "mkdir", fake_mkdir)
        yield faults


# ------------------------------------------------------------------------------------------ the sweep


def _synth(path: Path, n: int, seed: int = 0) -> list[PatentRecord]:
    """``n`` synthetic records, each cut to its first description section and two claims per language: a write
    meets the same files and steps whatever the text's length, and each of the sweeps' hundreds of trials indexes
    less text."""
    from training.synth import SynthConfig, write_synthetic

    write_synthetic(path, SynthConfig(n=n, seed=seed), progress=False)
    return [r.model_copy(update={"description": r.description[:1],
                                 "claims": {lang: claims[:2] for lang, claims in r.claims.items()}})
            for r in read_corpus(path)]


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[PatentRecord]]:
    """A small index (20 synthetic documents, English) with one added segment of 5 (generation 1); 7 more records."""
    d = tmp_path_factory.mktemp("live-failures")
    records = _synth(d / "all.jsonl", 32, seed=29)
    idx = d / "base"
    build_index(records[:20], idx, index_langs="en", translation=False, compounds="", progress=False)
    add_documents(idx, records[20:25], progress=False)
    return idx, records


_ENCODER_SUMS: dict[tuple[int, int, int, int], str] = {}
_folder_checksum = folder_module._checksum  # the folder's own (:func:`_state` puts the one below in its place)


def _checksum_encoder_once(path: Path) -> str:
    """The folder's checksum of ``path``, the pretrained encoder's files once per inode, size and modification time:
    each trial's copy hard-links the base index's (tests/index_copy.py; no write touches them), which moves their
    ctime, so the process' memory of the files it verified (service/filecache.py) read their 130 MB again for every
    trial: 108 of the add sweep's seconds were 42 without it (alone, quiet). Every other file is read every trial."""
    if Layout.ENCODER not in path.parts:
        return _folder_checksum(path)
    st = os.stat(path)
    key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    if key not in _ENCODER_SUMS:
        _ENCODER_SUMS[key] = _folder_checksum(path)
    return _ENCODER_SUMS[key]


def _state(idx: Path) -> tuple[int, list[str]]:
    """(generation, live ids) of the folder as a reader opens it now, every checksum verified (the encoder's
    files as :func:`_checksum_encoder_once` says)."""
    with pytest.MonkeyPatch.context() as m:
        m.setattr(folder_module, "_checksum", _checksum_encoder_once)
        folder = IndexFolder.open(idx, verify=True)
    docs = DocStore.of_folder(folder)
    try:
        return folder.generation, sorted(pid for r, pid in enumerate(docs.ids) if docs.live is None or docs.live[r])
    finally:
        docs.close()


@dataclass
class Sweep:
    steps: int = 0
    outcomes: dict[str, int] = field(default_factory=lambda: {"unchanged": 0, "committed": 0, "done": 0})
    wrong: list[str] = field(default_factory=list)


def _sweep(base_idx: Path, tmp: Path, op: Callable[[Path], Any], expected: Callable[[list[str]], list[str]],
           monkeypatch: pytest.MonkeyPatch, *, code: int = errno.ENOSPC, persist: bool = True) -> Sweep:
    """Run ``op`` once per write step with that step failing (and, ``persist``, every later one); check each
    report against the folder as a reader opens it (every checksum verified).

    A trial that left the folder unchanged hands it to the next trial (a fresh copy of the base otherwise); the
    injector checks that each trial meets the same steps as the dry run up to the one it fails.
    """
    dry = tmp / "dry"
    copy_index(base_idx, dry)
    with inject(monkeypatch, Faults()) as counted:
        op(dry)
    out = Sweep(steps=counted.count)
    assert out.steps > 5, counted.steps
    gen0, ids0 = _state(base_idx)
    idx: Path | None = None
    for k in range(1, out.steps + 1):
        if idx is None:
            idx = tmp / f"trial-{k}"
            copy_index(base_idx, idx)
        faults = Faults(fail_at=k, code=code, persist=persist)
        said: str
        claimed_gen: int | None = None
        try:
            with inject(monkeypatch, faults):
                report = op(idx)
            said, claimed_gen = "done", report.generation
        except AfterCommitError as exc:
            said, claimed_gen = "committed", exc.report.generation
            assert f"committed at generation {claimed_gen}" in str(exc)
        except StorageError as exc:
            said = "unchanged"
            assert exc.generation == gen0 and f"unchanged at generation {gen0}" in str(exc), str(exc)
            if code == errno.ENOSPC:
                assert exc.disk_full and "the disk is full" in str(exc), str(exc)
            else:
                assert not exc.disk_full and "I/O error" in str(exc), str(exc)
        assert faults.steps[:k] == counted.steps[:k], f"trial {k} met other steps than the dry run"
        gen, ids = _state(idx)  # the folder opens, every checksum verified, whatever failed
        out.outcomes[said] += 1
        step = faults.failed[0] if faults.failed else "(no step failed)"
        if said == "unchanged" and (gen, ids) != (gen0, ids0):
            out.wrong.append(f"step {k} ({step}): said unchanged at {gen0}, the folder is at generation {gen}")
        if said in ("committed", "done") and (gen, ids) != (claimed_gen, expected(ids0)):
            out.wrong.append(f"step {k} ({step}): said {said} at {claimed_gen}, the folder is at generation {gen} "
                             f"with {len(ids)} live documents")
        if (gen, ids) != (gen0, ids0):
            shutil.rmtree(idx)  # changed: the next trial starts from a fresh copy (hundreds of trials: keep the disk)
            idx = None
    return out


def _print(name: str, sweep: Sweep) -> None:
    print(f"\n{name}: {sweep.steps} write steps, each failed in turn: {sweep.outcomes['unchanged']} reported "
          f"unchanged, {sweep.outcomes['committed']} committed at generation N with a later step failed, "
          f"{sweep.outcomes['done']} done (a step whose failure is absorbed); wrong reports: {len(sweep.wrong)}")


@pytest.mark.slow
def test_add_then_compaction_every_step_fails_in_turn(base: tuple[Path, list[PatentRecord]], tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """``add`` with ``max_segments`` 1: a segment, the commit, then the merge of the 3 segments into one; the disk full
    from step k on, for every k. A failure in the compaction (after the commit) must say committed, never
    unchanged (the bug of issue 29: "unchanged at generation 1" while generation 1 served the new documents)."""
    idx, records = base
    batch = records[25:30]
    new = {r.id for r in batch}
    sweep = _sweep(idx, tmp_path, lambda p: add_documents(p, batch, progress=False, max_segments=1),
                   lambda ids: sorted(set(ids) | new), monkeypatch)
    _print("add + compaction, ENOSPC from step k on", sweep)
    assert not sweep.wrong, "\n".join(sweep.wrong)
    assert sweep.outcomes["unchanged"] >= 50 and sweep.outcomes["committed"] >= 50


@pytest.mark.slow
def test_compact_every_step_fails_once_with_eio(base: tuple[Path, list[PatentRecord]], tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """One I/O error at step k (the device fails once), for every k: unchanged before the rename, committed
    (not durable) at the fsync after it."""
    idx, _ = base
    sweep = _sweep(idx, tmp_path, lambda p: compact(p, progress=False), lambda ids: ids, monkeypatch,
                   code=errno.EIO, persist=False)
    _print("compact, one EIO at step k", sweep)
    assert not sweep.wrong, "\n".join(sweep.wrong)
    assert sweep.outcomes["unchanged"] >= 50 and sweep.outcomes["committed"] >= 1


@pytest.mark.parametrize(("code", "persist"), [(errno.ENOSPC, True), (errno.EIO, False)], ids=["enospc", "eio"])
def test_delete_every_step_fails_in_turn(base: tuple[Path, list[PatentRecord]], tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch, code: int, persist: bool) -> None:
    idx, records = base
    gone = {records[3].id, records[22].id}
    sweep = _sweep(idx, tmp_path, lambda p: delete_documents(p, sorted(gone)),
                   lambda ids: sorted(set(ids) - gone), monkeypatch, code=code, persist=persist)
    _print(f"delete, {errno.errorcode[code]} at step k", sweep)
    assert not sweep.wrong, "\n".join(sweep.wrong)
    assert sweep.outcomes["unchanged"] >= 3 and sweep.outcomes["committed"] >= 1


# ------------------------------------------------------------------------------------------ the CLI


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "training.cli", *args], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})}, timeout=300)


_FAIL_COMPACTION = """
import errno, sys
import service.index.live as live
def full(*a, **k):
    raise OSError(errno.ENOSPC, "No space left on device")
def merge_segments(*a, **k):
    live.write_meta = full  # the merge's first write of its meta.json: the disk is full from there on
    return real(*a, **k)
real = live.merge_segments
live.merge_segments = merge_segments
from training.cli import main
sys.argv = ["priorart", *sys.argv[1:]]
main()
"""


@pytest.mark.slow
def test_cli_add_whose_compaction_fails_says_committed_with_its_own_exit_code(
        base: tuple[Path, list[PatentRecord]], tmp_path: Path) -> None:
    """The issue's case: ``priorart add IDX new.jsonl --max-segments 1`` on a disk that fills during the
    compaction (the merge of every segment) after it: exit 3 and "committed at generation N", the report of the add
    on stdout; the documents live."""
    idx0, records = base
    idx = tmp_path / "idx"
    copy_index(idx0, idx)
    batch = tmp_path / "new.jsonl"
    write_corpus(records[30:32], batch)
    gen0 = current_generation(idx)
    script = tmp_path / "run.py"
    script.write_text(_FAIL_COMPACTION)
    done = subprocess.run([sys.executable, str(script), "add", str(idx), str(batch), "--max-segments", "1",
                           "--no-progress"], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 3, done.stderr
    assert f"committed at generation {gen0 + 1}" in done.stderr and "the merge of segments" in done.stderr
    assert "the disk is full" in done.stderr and "unchanged at" not in done.stderr, done.stderr
    assert f"generation {gen0} -> {gen0 + 1}, 2 added" in done.stdout
    gen, ids = _state(idx)
    assert gen == gen0 + 1 and {r.id for r in records[30:32]} <= set(ids)


_PARTIAL_WRITE = """
import sys, shutil, collections
import numpy as np
real_save = np.save
def partial(file, arr, *a, **k):
    raise OSError(f"{np.asarray(arr).nbytes} requested and 0 written")
np.save = partial
free = int(sys.argv.pop(1))
Usage = collections.namedtuple("Usage", "total used free")
shutil.disk_usage = lambda p: Usage(10**9, 10**9 - free, free)
from training.cli import main
sys.argv = ["priorart", *sys.argv[1:]]
main()
"""


@pytest.mark.slow
@pytest.mark.parametrize(("free", "says"), [(4096, "the disk is full"), (10**9, "the device failed")])
def test_cli_partial_write_message_says_the_disk_is_full(base: tuple[Path, list[PatentRecord]], tmp_path: Path,
                                                          free: int, says: str) -> None:
    """numpy's partial write is an OSError without errno ("N requested and 0 written"): with the device nearly
    full the message says the disk is full; with room left, that the device failed. Exit 2, unchanged."""
    idx0, records = base
    idx = tmp_path / "idx"
    copy_index(idx0, idx)
    batch = tmp_path / "new.jsonl"
    write_corpus(records[30:32], batch)
    script = tmp_path / "run.py"
    script.write_text(_PARTIAL_WRITE)
    gen0 = current_generation(idx)
    done = subprocess.run([sys.executable, str(script), str(free), "add", str(idx), str(batch), "--no-progress"],
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=300)
    assert done.returncode == 2, done.stderr
    assert says in done.stderr and "requested and 0 written" in done.stderr
    assert f"unchanged at generation {gen0}" in done.stderr
    assert current_generation(idx) == gen0


def test_cli_delete_of_unknown_id_and_exit_codes(base: tuple[Path, list[PatentRecord]], tmp_path: Path) -> None:
    idx0, _ = base
    idx = tmp_path / "idx"
    copy_index(idx0, idx)
    done = _cli("delete", str(idx), "EP9999999A1")
    assert done.returncode == 2 and "not in the index" in done.stderr and "unchanged" in done.stderr


# ------------------------------------------------------------------------------------------ rollback


def test_a_damaged_newest_generation_is_rolled_back_by_the_next_writer(
        base: tuple[Path, list[PatentRecord]], tmp_path: Path) -> None:
    """A torn manifest (or one naming a changed segment) at the top: the next add sets it aside and goes on from
    the last good generation, with a message; the new generation is numbered past the damaged one."""
    idx0, records = base
    idx = tmp_path / "idx"
    copy_index(idx0, idx)
    good = current_generation(idx)
    add_documents(idx, records[25:27], progress=False)
    top = idx / Layout.generation(good + 1)
    top.write_text(top.read_text()[:40])  # torn
    with pytest.raises(Exception, match="damaged"):
        IndexFolder.open(idx)
    report = add_documents(idx, records[30:32], progress=False)
    assert report.rolled_back and f"rolled back to generation {good}" in report.rolled_back
    assert report.previous == good and report.generation == good + 2
    assert top.with_name(top.name + ".damaged").exists() and not top.exists()
    gen, ids = _state(idx)
    assert gen == good + 2 and {r.id for r in records[30:32]} <= set(ids)
    assert not {r.id for r in records[25:27]} & set(ids)  # the damaged generation's batch is not there
    # the CLI prints the message; a delete rolls back a damaged segment's generation the same way
    add_documents(idx, records[25:27], progress=False)
    seg_meta = idx / Layout.segment(good + 3) / Layout.META
    data = json.loads(seg_meta.read_text())
    data["created"] = "changed"
    seg_meta.write_text(json.dumps(data))
    done = _cli("delete", str(idx), records[0].id)
    assert done.returncode == 0, done.stderr
    assert "warning: generation" in done.stderr and f"rolled back to generation {good + 2}" in done.stderr
    assert f"generation {good + 2} -> {good + 4}" in done.stdout


def test_a_damaged_build_is_not_rolled_back(base: tuple[Path, list[PatentRecord]], tmp_path: Path) -> None:
    idx0, records = base
    idx = tmp_path / "idx"
    copy_index(idx0, idx)
    (idx / Layout.META).write_text("{")
    with pytest.raises(LiveIndexError, match="meta.json"):
        add_documents(idx, records[30:32], progress=False)
