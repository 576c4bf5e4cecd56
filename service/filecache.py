"""Objects read from an index's files, shared while the file is unchanged.

A reload after ``priorart add`` opens a new generation whose index-wide files (the translation tables, the compound
word lists) are the ones the running engine already holds: the same path, inode, size and times. :func:`load_shared`
hands back the object already read from such a file instead of reading it again, so a reload no longer parses them
(about 1 s of every reload of the real-data index) nor holds a second copy beside the first while it swaps, and the
memory of the copies freed no longer fragments the heap (before, a process grew by about 4 MB per reload of the
real-data index's tables). An object is kept only while something holds it (weak references); a file that a writer
replaced (a new inode, size or time) is read again.

Only for objects that are read-only once loaded (``TranslationTable``, ``CompoundSplitter``, a segment's
``SparseIndex`` and doc-store table, a FAISS index searched on the CPU).

:func:`verified` does the same for the checksums of an index's files: a reload reads the bytes of the files it has not
verified yet (a new segment's), not those of every segment again.
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

_loaded: weakref.WeakValueDictionary[tuple[Hashable, ...], object] = weakref.WeakValueDictionary()
_lock = threading.Lock()


def file_identity(path: str | Path) -> tuple[Hashable, ...]:
    """What says that a file is still the one that was read: its absolute path, device, inode, size and times."""
    st = os.stat(path)
    return str(Path(path).absolute()), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def load_shared(path: str | Path, load: Callable[[Path], T], *key: Hashable) -> T:
    """``load(path)``, or the object that an earlier call with the same ``load``, ``key`` and unchanged file returned
    while something still holds it. ``key``: whatever else shapes the object (settings passed to ``load``)."""
    path = Path(path)
    ident = (getattr(load, "__qualname__", repr(load)), *key, *file_identity(path))
    with _lock:
        found = _loaded.get(ident)
    if found is not None:
        return found  # type: ignore[return-value]
    obj = load(path)  # outside the lock: two first loads of one file both read it, the first stored is kept
    with _lock:
        return _loaded.setdefault(ident, obj)  # type: ignore[return-value]


# ------------------------------------------------------------------------------------------ verified files

_SETTLED_NS = 2_000_000_000  # a file's times this much older than its check: no write can hide in the same tick
_VERIFIED_MAX = 100_000  # identities remembered (an index folder holds a few dozen files per segment)
_verified: dict[tuple[Hashable, ...], str] = {}


def verified(path: str | Path, sha256: str, check: Callable[[Path], str]) -> bool:
    """Whether the file at ``path`` has the checksum ``sha256``: ``check(path)`` (it reads every byte), unless this
    process has seen the same checksum of this very file before (same path, inode, size and times: a file written
    again, or replaced, is checked again). A reload of a live index after ``priorart add`` then reads the files of
    its new segment only, not those of every segment it had verified already.

    A file is remembered only when its times are older than the check by :data:`_SETTLED_NS` (as git's racily clean
    entries): a write within the same tick of the file system's clock would not change them. Checked once per
    process, not on every reload: a file that rots in place without a new time is found by the next process that
    opens it."""
    path = Path(path)
    ident = file_identity(path)
    with _lock:
        if _verified.get(ident) == sha256:
            return True
    started = time.time_ns()
    if check(path) != sha256:
        return False
    st = os.stat(path)
    if file_identity(path) == ident and max(st.st_mtime_ns, st.st_ctime_ns) < started - _SETTLED_NS:
        with _lock:
            if len(_verified) >= _VERIFIED_MAX:
                _verified.clear()
            _verified[ident] = sha256
    return True
