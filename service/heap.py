"""The loaded index out of the garbage collector's full passes (issue 15: the first stage's p99).

CPython's cyclic collector runs a full (generation 2) pass now and then, triggered by the objects a
request allocates, and a full pass walks *every* tracked object of the process. In a server that is
the imports (FastAPI, pydantic, numpy, ...) and the loaded index (vocabularies, document ids,
translation tables, the pipeline): on the 100k synthetic index one full pass took 95-135 ms on the
2-core machine. A search at the default depth of 1000 allocates a few thousand objects (hits, their
term lists, candidates), enough for one full pass every 20-70 queries: those queries were the p99
(engine p99 127-134 ms against a p50 of 15-26 ms, ``Engine.search`` over 200 first claims).

:func:`settle` freezes what is alive once the index is loaded (``gc.freeze``: the permanent
generation, which no collection walks), so a full pass only walks what requests allocated since: about
1 ms, and the p99 is the slow queries' own time again (26-31 ms in the same measurement). Frozen objects
are still freed by reference counting when released (a replaced engine after a reload); only objects in
reference cycles among them stay (about 30 of an engine's 120,000).
"""

from __future__ import annotations

import gc


def settle() -> None:
    """Collect once, then freeze every object alive now; call after an index is loaded (startup, reload)."""
    gc.collect()
    gc.freeze()
