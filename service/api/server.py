"""The HTTP server's connection limits: uvicorn's HTTP protocol with the timeouts and the cap it lacks.

uvicorn (0.54) closes an idle keep-alive connection after ``timeout_keep_alive``, but it has no time limit for a
connection that never sends a request (its keep-alive timer is armed after an answer only) nor for headers that
come byte by byte (each byte cancels that timer), and its ``limit_concurrency`` counts open connections, so that
silent connections up to the limit make it answer 503 to every real request (uvicorn issues #157 and #160). A
server whose open-files limit is taken by such connections stops accepting anything. :class:`ConnectionGuard`
adds, per server process:

- a header timeout: a request's complete headers within ``header_timeout_s`` of the connection's opening or of
  its previous answer, else the connection is closed (with a 408 when part of a request had come);
- a header size limit: ``max_header_bytes`` of request line and headers (431 past it);
- a connection cap: past ``max_connections`` open connections (lowered to what the open-files limit leaves), the
  connection idle longest (no request in flight, nothing waiting to be read) is closed to make room; with none
  idle, the new connection is answered 503 and closed.

The body's time limit is the request's (``request_timeout_s``, :mod:`service.api.middleware`: 408). The closed
connections are counted and logged, at most one line per :data:`LOG_EVERY_S`. :func:`uvicorn_options` gives the
keyword arguments for ``uvicorn.run``/``uvicorn.Config`` (a picklable protocol factory: ``--workers`` works);
:func:`run_workers` serves with worker processes whose app is made from the settings given (:class:`WorkerConfig`).
"""

from __future__ import annotations

import asyncio
import functools
import heapq
import json
import logging
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import uvicorn

from service.settings import Settings

log = logging.getLogger(__name__)

LOG_EVERY_S = 10.0
FD_MARGIN = 64
"""Open files kept free besides the index's (twice: a reload opens the new generation beside the old one)."""
MIN_CONNECTIONS = 16
PEEK_CANDIDATES = 64
"""Idle connections looked at per eviction (oldest first) for one with nothing waiting to be read."""


@dataclass(frozen=True)
class ConnectionLimits:
    header_timeout_s: float
    keep_alive_s: float
    max_connections: int
    max_header_bytes: int

    @classmethod
    def of(cls, settings: Settings) -> ConnectionLimits:
        return cls(settings.header_timeout_s, settings.keep_alive_s, settings.max_connections,
                   settings.max_header_bytes)


def open_files() -> int | None:
    """Files this process holds open (Linux: /proc/self/fd), None when unknown."""
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return None


def connection_cap(wanted: int) -> tuple[int, str]:
    """The cap in force: ``wanted``, lowered to what the open-files limit leaves, and a line saying why."""
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    used = open_files()
    if soft == resource.RLIM_INFINITY or used is None:
        return wanted, f"at most {wanted} open connections (max_connections)"
    room = max(MIN_CONNECTIONS, soft - 2 * used - FD_MARGIN)
    if room >= wanted:
        return wanted, f"at most {wanted} open connections (max_connections; open-files limit {soft}, {used} open)"
    return room, (f"at most {room} open connections: the open-files limit {soft} (ulimit -n) leaves no more beside "
                  f"the {used} files open now (twice, for a reload) and {FD_MARGIN} spare; max_connections is {wanted}")


class ConnectionGuard:
    """The limits of one server process, the cap in force (set at its first connection, when the index is
    open) and the counts of the connections it closed."""

    def __init__(self, limits: ConnectionLimits) -> None:
        self.limits = limits
        self._cap: int | None = None
        self.closed = {"idle, to make room": 0, "refused (503), none idle": 0,
                       "headers not received in time": 0, "headers too large (431)": 0}
        self._logged = {k: 0 for k in self.closed}
        self._last_log = 0.0

    def __getstate__(self) -> dict[str, Any]:  # a worker process starts with its own counts and cap
        return {"limits": self.limits}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["limits"])  # type: ignore[misc]

    @property
    def cap(self) -> int:
        if self._cap is None:
            self._cap, why = connection_cap(self.limits.max_connections)
            log.info("connections: %s; request headers within %.1f s, at most %d bytes; keep-alive %.1f s", why,
                     self.limits.header_timeout_s, self.limits.max_header_bytes, self.limits.keep_alive_s)
        return self._cap

    def count(self, what: str) -> None:
        self.closed[what] += 1
        now = time.monotonic()
        if now - self._last_log >= LOG_EVERY_S:
            news = {k: v - self._logged[k] for k, v in self.closed.items() if v > self._logged[k]}
            self._logged = dict(self.closed)
            self._last_log = now
            log.warning("connections closed since the last line (cap %d): %s", self.cap,
                        ", ".join(f"{n} {k}" for k, n in news.items()))


def _problem_bytes(status: int, reason: str, detail: str) -> bytes:
    body = json.dumps({"type": "about:blank", "title": reason, "status": status, "detail": detail}).encode()
    head = (f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/problem+json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n").encode("ascii")
    return head + body


class GuardedProtocol(asyncio.Protocol):
    """The guard over one of uvicorn's HTTP protocol classes (a mixin: see :func:`protocol_class`)."""

    # set by uvicorn's protocol classes (declared for the type checker)
    transport: Any
    cycle: Any
    connections: Any
    loop: asyncio.AbstractEventLoop

    def __init__(self, *args: Any, guard: ConnectionGuard, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.guard = guard
        self._timer: asyncio.TimerHandle | None = None
        self._idle_since = 0.0
        self._pending = 0  # bytes of a request whose headers are not complete yet

    def in_flight(self) -> bool:
        """A request whose headers were complete and whose answer is not sent yet."""
        return self.cycle is not None and not self.cycle.response_complete

    # -- timers -------------------------------------------------------------------------------------------
    def _arm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._idle_since = self.loop.time()
        self._pending = 0
        self._timer = self.loop.call_later(self.guard.limits.header_timeout_s, self._headers_late)

    def _headers_late(self) -> None:
        self._timer = None
        if self.transport.is_closing() or self.in_flight():  # a request in flight: the middleware's limits
            return
        self.guard.count("headers not received in time")
        if self._pending:
            self._close_with(408, "Request Timeout",
                             f"request headers not received within {self.guard.limits.header_timeout_s} s")
        else:
            self.transport.close()

    def _close_with(self, status: int, reason: str, detail: str) -> None:
        self.transport.write(_problem_bytes(status, reason, detail))
        self.transport.close()

    # -- protocol -----------------------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._arm()
        self._keep_under_cap()

    def data_received(self, data: bytes) -> None:
        waiting = not self.in_flight()
        if waiting:
            self._pending += len(data)
        super().data_received(data)
        if not waiting or self.transport.is_closing():
            return
        if self.in_flight():  # the headers are complete
            self._pending = 0
        elif self._pending > self.guard.limits.max_header_bytes:
            self.guard.count("headers too large (431)")
            self._close_with(431, "Request Header Fields Too Large",
                             f"request line and headers over {self.guard.limits.max_header_bytes} bytes")

    def on_response_complete(self) -> None:
        super().on_response_complete()  # type: ignore[misc]
        if not self.transport.is_closing() and not self.in_flight():
            self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        super().connection_lost(exc)

    # -- the cap ------------------------------------------------------------------------------------------
    def _keep_under_cap(self) -> None:
        if len(self.connections) <= self.guard.cap:
            return
        open_now = [c for c in self.connections if not c.transport.is_closing()]
        if len(open_now) <= self.guard.cap:
            return
        idle = (c for c in open_now if c is not self and isinstance(c, GuardedProtocol) and not c.in_flight())
        for victim in heapq.nsmallest(PEEK_CANDIDATES, idle, key=lambda c: c._idle_since):
            if not victim.has_unread_data():
                self.guard.count("idle, to make room")
                victim.transport.close()
                return
        self.guard.count("refused (503), none idle")
        self._close_with(503, "Service Unavailable", f"over {self.guard.cap} open connections, none idle")

    def has_unread_data(self) -> bool:
        """Whether the client sent bytes this server has not read yet (a request on its way: not evicted)."""
        sock = self.transport.get_extra_info("socket")
        if sock is None:
            return False
        try:
            with socket.socket(fileno=os.dup(sock.fileno())) as peek:
                return bool(peek.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT))
        except OSError:  # nothing to read (EAGAIN), or no descriptor to spare: idle as far as we know
            return False


def protocol_class(http: str = "auto") -> type[GuardedProtocol]:
    """uvicorn's HTTP protocol (``auto``: httptools when installed, else h11) with :class:`GuardedProtocol`."""
    if http in ("auto", "httptools"):
        try:
            return _httptools()
        except ImportError:
            if http == "httptools":
                raise
    return _h11()


@functools.cache
def _httptools() -> type[GuardedProtocol]:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    return cast(type[GuardedProtocol], type("GuardedHttpToolsProtocol", (GuardedProtocol, HttpToolsProtocol),
                                            {"__module__": __name__}))


@functools.cache
def _h11() -> type[GuardedProtocol]:
    from uvicorn.protocols.http.h11_impl import H11Protocol

    return cast(type[GuardedProtocol], type("GuardedH11Protocol", (GuardedProtocol, H11Protocol),
                                            {"__module__": __name__}))


def _make(http: str, guard: ConnectionGuard, **kwargs: Any) -> asyncio.Protocol:
    return protocol_class(http)(guard=guard, **kwargs)


def uvicorn_options(settings: Settings, *, http: str = "auto") -> dict[str, Any]:
    """Keyword arguments for ``uvicorn.run`` / ``uvicorn.Config``: the guarded protocol (a picklable factory),
    the keep-alive timeout, h11's header size limit, and no WebSocket upgrades (the API has none)."""
    factory: Callable[..., asyncio.Protocol] = functools.partial(_make, http, ConnectionGuard(
        ConnectionLimits.of(settings)))
    return {"http": factory, "ws": "none", "timeout_keep_alive": settings.keep_alive_s,
            "h11_max_incomplete_event_size": settings.max_header_bytes}


class WorkerConfig(uvicorn.Config):
    """uvicorn's configuration of a server with worker processes that build the app from ``settings``.

    uvicorn starts each worker with the configuration pickled to it, and loads the app in the worker; with an import
    string the app would be made there from the environment. This configuration carries the settings themselves and
    makes the app from them (``create_app(settings)``), so ``priorart serve --workers N`` hands its settings to the
    workers as it hands them to one server, without writing them into the environment."""

    def __init__(self, settings: Settings, **options: Any) -> None:
        super().__init__("service.api:create_app", factory=True, **options)
        self.settings = settings

    def load_app(self) -> Callable[[], Any]:
        from service.api import create_app

        return functools.partial(create_app, self.settings)


def run_workers(settings: Settings, workers: int, **options: Any) -> None:
    """Serve with ``workers`` processes (uvicorn's supervisor), each with an app made from ``settings``."""
    from uvicorn.supervisors import Multiprocess

    config = WorkerConfig(settings, workers=workers, **options)
    Multiprocess(config, sockets=[config.bind_socket()]).run()
