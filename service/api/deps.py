"""Typed dependencies for the routes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Annotated

from fastapi import Depends, HTTPException, Request

from service.api.metrics import Metrics
from service.settings import Settings

if TYPE_CHECKING:
    from service.engine import Engine


class EngineHolder:
    """The engine a server answers with, swapped whole when a new generation is loaded.

    A request takes the current engine with :meth:`acquire` and keeps it to the end (one generation per
    request); :meth:`swap` installs a new one, and the engine it replaces is closed once the last request
    that holds it has finished.
    """

    def __init__(self, engine: Engine | None = None) -> None:
        import threading

        self._lock = threading.Lock()
        self._engine = engine
        self._users: dict[int, int] = {}
        self._retired: dict[int, Engine] = {}

    @property
    def engine(self) -> Engine | None:
        return self._engine

    def acquire(self) -> Engine | None:
        with self._lock:
            engine = self._engine
            if engine is not None:
                self._users[id(engine)] = self._users.get(id(engine), 0) + 1
            return engine

    def release(self, engine: Engine) -> None:
        with self._lock:
            left = self._users.get(id(engine), 0) - 1
            if left > 0:
                self._users[id(engine)] = left
                return
            self._users.pop(id(engine), None)
            retired = self._retired.pop(id(engine), None)
        if retired is not None:
            retired.close()

    def swap(self, new: Engine | None) -> Engine | None:
        """Install ``new``; the old engine is closed now if idle, else by the release of its last request."""
        with self._lock:
            old, self._engine = self._engine, new
            if old is None or old is new:
                return old
            busy = self._users.get(id(old), 0) > 0
            if busy:
                self._retired[id(old)] = old
        if not busy:
            old.close()
        return old

    def in_flight(self) -> int:
        with self._lock:
            return sum(self._users.values())


# The dependencies are coroutines: FastAPI runs a plain function (and enters and leaves a plain generator) in its
# thread pool, one hand-off each, and with ``request_threads`` 1 each waited for the one thread the endpoint uses.
# They only take a lock for a moment or read app.state.


async def get_engine(request: Request) -> AsyncIterator[Engine]:
    """The current engine, held for the whole request (an engine replaced meanwhile is closed after it)."""
    holder = request.app.state.engines
    engine = holder.acquire()
    if engine is None:
        raise HTTPException(503, "index not loaded yet")
    try:
        yield engine
    finally:
        holder.release(engine)


async def get_settings(request: Request) -> Settings:
    return request.app.state.settings


async def get_metrics(request: Request) -> Metrics:
    return request.app.state.metrics


EngineDep = Annotated["Engine", Depends(get_engine)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
MetricsDep = Annotated[Metrics, Depends(get_metrics)]
