"""The loaded index out of the garbage collector's full passes.

CPython's cyclic collector runs a full (generation 2) pass now and then, triggered by the objects a
request allocates, and a full pass walks *every* tracked object of the process: the imports and the
loaded index (vocabularies, document ids, translation tables, the pipeline). A search at the default
depth allocates enough objects to trigger such passes, which then land on a few queries' latency
(figures: docs/RESULTS.md, "Speed").

:func:`settle` freezes what is alive once the index is loaded (``gc.freeze``: the permanent
generation, which no collection walks), so a full pass only walks what requests allocated since.
Frozen objects are still freed by reference counting when released (a replaced engine after a reload); the
cycles among them are freed at the next :func:`settle`, which unfreezes before it collects (a replaced engine's
cycles would otherwise stay frozen for good). It then hands the freed heap back to the system
(``malloc_trim`` on glibc), so a server's memory after many reloads stays near its memory after one.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import logging

log = logging.getLogger(__name__)


def settle() -> None:
    """Collect what is garbage (a replaced engine's cycles included), give the freed heap back, then freeze every
    object alive now; call once an index is loaded (startup) and once a replaced one is released (reload)."""
    gc.unfreeze()
    gc.collect()
    trim()
    gc.freeze()


def trim() -> None:
    """Return the C heap's free memory to the system (glibc ``malloc_trim``); nothing elsewhere."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: the allocator keeps what it freed
        log.debug("malloc_trim not available: the freed heap stays with the allocator")
