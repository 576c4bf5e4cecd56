"""The loaded index out of the garbage collector's full passes.

CPython's cyclic collector runs a full (generation 2) pass now and then, triggered by the objects a
request allocates, and a full pass walks *every* tracked object of the process: the imports and the
loaded index (vocabularies, document ids, translation tables, the pipeline). A search at the default
depth allocates enough objects to trigger such passes, which then land on a few queries' latency
(figures: docs/RESULTS.md, "Speed").

:func:`settle` freezes what is alive once the index is loaded (``gc.freeze``: the permanent
generation, which no collection walks), so a full pass only walks what requests allocated since.
Frozen objects are still freed by reference counting when released (a replaced engine after a reload);
only objects in reference cycles among them stay (a few dozen per engine).
"""

from __future__ import annotations

import gc


def settle() -> None:
    """Collect once, then freeze every object alive now; call after an index is loaded (startup, reload)."""
    gc.collect()
    gc.freeze()
