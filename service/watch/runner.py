"""A server's evaluation of the watches: in a thread of its own, each time the server loads a generation (at start,
on a reload, after ``POST /admin/documents``), against the engine it then answers with.

The engine is held for the evaluation (``acquire``/``release``: the server's engine holder), so a reload meanwhile
closes the old engine only after it; the next generation is evaluated next. Another process evaluating (``priorart
add``, ``priorart watch run``) is waited for: the store's lock takes one at a time, and a generation already
evaluated leaves nothing to do.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from service.watch.store import WatchStore

if TYPE_CHECKING:
    from service.engine import Engine
    from service.watch.evaluate import EvaluationReport

log = logging.getLogger(__name__)


class WatchRunner:
    """Evaluates the watches of the state folder ``root`` when :meth:`notify` is called."""

    def __init__(self, root: Path, acquire: Callable[[], Engine | None], release: Callable[[Engine], None], *,
                 url: str | None = None, backoff_s: float | None = None, allow: str | None = None) -> None:
        self.root = root
        self.allow = allow  # PRIORART_WEBHOOK_ALLOW (None: the settings' from the environment)
        self.url = url  # the PostgreSQL database of the watches (None: SQLite in root)
        self.backoff_s = backoff_s  # the webhooks' first retry wait (None: service/watch/webhooks.py's)
        self._acquire = acquire
        self._release = release
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._idle = threading.Event()
        self._idle.set()
        self._thread: threading.Thread | None = None
        self.last: EvaluationReport | None = None
        self.last_error: str | None = None

    def start(self) -> None:
        """Start the thread and evaluate the generation loaded now (a server started after an add)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="watch-evaluation", daemon=True)
            self._thread.start()
        self.notify()

    def notify(self) -> None:
        """A generation was loaded: evaluate it (once the evaluation in progress, if any, has ended)."""
        self._idle.clear()
        self._wake.set()

    def stop(self, timeout: float = 10.0) -> None:
        """End the thread: an evaluation in progress ends after its current watch, its finished batch kept."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until no evaluation is running or asked for (tests); False on timeout."""
        return self._idle.wait(timeout)

    def _loop(self) -> None:
        import time

        from service.watch.evaluate import evaluate
        from service.watch.webhooks import BACKOFF_S, deliver

        due: float | None = None  # when a webhook delivery is to be tried again
        while not self._stop.is_set():
            # woken by a new generation, or when a retry is due (a receiver that failed): deliver, evaluate nothing
            self._wake.wait(None if due is None else max(0.0, due - time.time()))
            self._wake.clear()
            if self._stop.is_set():
                break
            store = WatchStore(self.root, self.url)
            try:
                present = store.exists
            except Exception:  # noqa: BLE001 - a database unreachable now (PostgreSQL): tried again at the next wake
                log.exception("watches: their database cannot be reached; tried again later")
                present, due = False, time.time() + (self.backoff_s or BACKOFF_S)
            engine = self._acquire() if present else None
            if engine is not None:
                try:
                    self.last = evaluate(engine, store, stop=self._stop.is_set)
                    self.last_error = None
                except Exception as exc:  # noqa: BLE001 - the server keeps serving; the next generation retries
                    self.last_error = f"{type(exc).__name__}: {exc}"
                    log.exception("watch evaluation at generation %d failed (retried at the next one)",
                                  engine.generation)
                finally:
                    self._release(engine)
            if present:
                try:  # each evaluation's new hits to the watches' webhooks (and the retries that are due)
                    due = deliver(store, backoff_s=self.backoff_s or BACKOFF_S, allow=self.allow).next_due
                except Exception:  # noqa: BLE001 - a database that fails now is tried again at the next wake
                    log.exception("watch webhook delivery failed")
                    due = time.time() + (self.backoff_s or BACKOFF_S)
            if not self._wake.is_set():
                self._idle.set()


__all__ = ["WatchRunner"]
