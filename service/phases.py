"""The start-up's phases, timed from where the work is done (see :mod:`service.startup`).

:func:`timed` counts a block's time to a phase of the start-up under way in this context, and costs nothing
outside one (a build, a reload, a test): the index's checksums (``service/index/folder.py``) and the page-in of
its postings (``service/retrieval/sparse.py``) report themselves this way. A context variable, not a global: two
loads at once (a reload beside a start) keep their own times.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass
class StartupTimes:
    """Seconds per phase of one start-up (the blocks of a phase add up)."""

    seconds: dict[str, float] = field(default_factory=dict)

    def add(self, phase: str, seconds: float) -> None:
        self.seconds[phase] = self.seconds.get(phase, 0.0) + seconds


_current: contextvars.ContextVar[StartupTimes | None] = contextvars.ContextVar("priorart_startup", default=None)


@contextmanager
def measuring(times: StartupTimes) -> Iterator[StartupTimes]:
    """Blocks :func:`timed` inside this one (same thread or task) count to ``times``."""
    token = _current.set(times)
    try:
        yield times
    finally:
        _current.reset(token)


@contextmanager
def timed(phase: str) -> Iterator[None]:
    """Count the time of the block to ``phase`` of the start-up under way in this context (none: nothing)."""
    times = _current.get()
    if times is None:
        yield
        return
    started = time.perf_counter()
    try:
        yield
    finally:
        times.add(phase, time.perf_counter() - started)
