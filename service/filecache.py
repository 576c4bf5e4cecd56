"""Objects read from an index's files, shared while the file is unchanged.

A reload after ``priorart add`` opens a new generation whose index-wide files (the translation tables, the compound
word lists) are the ones the running engine already holds: the same path, inode, size and times. :func:`load_shared`
hands back the object already read from such a file instead of reading it again, so a reload no longer parses them
(about 1 s of every reload of the real-data index) nor holds a second copy beside the first while it swaps, and the
memory of the copies freed no longer fragments the heap (before, a process grew by about 4 MB per reload of the
real-data index's tables). An object is kept only while something holds it (weak references); a file that a writer
replaced (a new inode, size or time) is read again.

Only for objects that are read-only once loaded (``TranslationTable``, ``CompoundSplitter``).
"""

from __future__ import annotations

import os
import threading
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
