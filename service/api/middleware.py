"""Pure-ASGI guard: body size limit, API key, admin key, per-request time limit (reading the body included),
request metrics.

Pure ASGI (not ``BaseHTTPMiddleware``) keeps the per-request overhead small and lets the body limit
apply to chunked uploads too, not only to a declared ``Content-Length``. The keys are checked here, before
any route reads or parses a body: a request without the right key is a 401 (403 for the admin routes when no
admin key is configured), never a 422 about its body. Every key comparison is constant-time
(:func:`same_key`).
"""

from __future__ import annotations

import asyncio
import hmac
import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.api.errors import problem
from service.api.metrics import Metrics
from service.api.routes.search import INLINE_PATHS
from service.settings import Settings

OPEN_PATHS = ("/health", "/ready", "/metrics", "/docs", "/redoc", "/openapi.json", "/static", "/favicon")
ADMIN_PREFIX = "/admin"
ADMIN_OFF = ("admin routes are off: no admin key is configured (set PRIORART_ADMIN_KEY; the API key never opens "
             "them)")


def same_key(given: str | None, key: str) -> bool:
    """Whether a header value equals a configured key, in constant time (``hmac.compare_digest`` on the bytes
    the client sent: header values are decoded as latin-1)."""
    if given is None:
        return False
    return hmac.compare_digest(given.encode("latin-1", "replace"), key.encode("utf-8"))


def known_key(given: str | None, keys: list[str]) -> bool:
    """Whether a header value is one of ``keys``, every key compared in constant time."""
    found = False
    for key in keys:
        found |= same_key(given, key)
    return found


def is_admin_path(path: str) -> bool:
    return path == ADMIN_PREFIX or path.startswith(ADMIN_PREFIX + "/")


class _BodyTooLarge(Exception):
    pass


class _BodyTimeout(Exception):
    pass


class GuardMiddleware:
    def __init__(self, app: ASGIApp, settings: Settings, metrics: Metrics) -> None:
        self.app = app
        self.settings = settings
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        state: dict[str, Any] = {"status": 500, "started": False}
        limit = self.settings.max_body_bytes
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}

        timeout = self.settings.request_timeout_s
        deadline = asyncio.get_running_loop().time() + timeout

        def body_late() -> Any:
            return problem(408, "Request Timeout", f"request body not received within {timeout} s "
                           f"({received} bytes of {length or 'a chunked body'})", headers={"Connection": "close"})

        async def send_wrapper(message: Message) -> None:
            if state.get("too_large") or state.get("body_late"):  # the app answered a body it could not read: why
                if message["type"] == "http.response.start" and not state["started"]:
                    state["started"] = True
                    if state.get("too_large"):
                        state["status"] = 413
                        await problem(413, "Payload Too Large", f"request body over {limit} bytes")(scope, receive,
                                                                                                   send)
                    else:
                        state["status"] = 408
                        await body_late()(scope, receive, send)
                return
            if message["type"] == "http.response.start":
                state["status"] = message["status"]
                state["started"] = True
            await send(message)

        received = 0

        async def limited_receive() -> Message:
            """The body, within the request's time limit (a client that declares more than it sends, or sends it
            slowly, is answered 408 at the limit); after the body, receive as it is (a disconnect may come late)."""
            nonlocal received
            if state.get("body_done"):
                return await receive()
            if state.get("limited"):  # inside the request's own time limit: its expiry says 408 while reading
                state["reading"] = True
                message = await receive()
                state["reading"] = False
            else:
                try:
                    async with asyncio.timeout_at(deadline):
                        message = await receive()
                except TimeoutError:
                    state["body_late"] = True
                    raise _BodyTimeout from None
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    state["too_large"] = True
                    raise _BodyTooLarge
                if not message.get("more_body", False):
                    state["body_done"] = True
            return message

        async def reply(status: int, title: str, detail: str) -> None:
            if not state["started"]:
                await problem(status, title, detail)(scope, receive, send_wrapper)

        length = headers.get("content-length")
        path = scope["path"]
        keys = self.settings.api_keys
        try:
            if length is not None and (not length.isdigit() or int(length) > limit):
                await reply(413, "Payload Too Large", f"request body over {limit} bytes")
            elif is_admin_path(path):
                admin = self.settings.admin_key
                if not admin:
                    await reply(403, "Forbidden", ADMIN_OFF)
                elif not same_key(headers.get("x-api-key"), admin):
                    await reply(401, "Unauthorized", "missing or wrong X-API-Key header (the admin key)")
                else:  # the body within the time limit; the change itself runs to its end, so that its answer
                    # says what was committed (a time limit there would answer 504 for a batch that commits later)
                    await self.app(scope, limited_receive, send_wrapper)
            elif keys and path != "/" and not path.startswith(OPEN_PATHS) and not known_key(headers.get("x-api-key"),
                                                                                             keys):
                await reply(401, "Unauthorized", "missing or wrong X-API-Key header")
            elif self.settings.request_threads == 0 and path in INLINE_PATHS:
                # run in the event loop: a cancellation could only land in the middle of sending the answer;
                # the route checks its own time limit (service.api.routes.search._run)
                await self.app(scope, limited_receive, send_wrapper)
            else:
                state["limited"] = True
                async with asyncio.timeout_at(deadline):  # (wait_for made a task per request)
                    await self.app(scope, limited_receive, send_wrapper)
        except _BodyTooLarge:
            await reply(413, "Payload Too Large", f"request body over {limit} bytes")
        except _BodyTimeout:
            state["status"] = 408
            if not state["started"]:
                await body_late()(scope, receive, send_wrapper)
        except TimeoutError:
            if state.get("reading"):  # the limit came while the body was still on its way
                state["status"] = 408
                if not state["started"]:
                    await body_late()(scope, receive, send_wrapper)
                return
            await reply(504, "Gateway Timeout", f"request took over {self.settings.request_timeout_s} s")
        finally:
            route = scope.get("route")
            label = getattr(route, "path", "unmatched")
            self.metrics.requests.labels(scope["method"], label, str(state["status"])).inc()
            self.metrics.latency.labels(label).observe(time.perf_counter() - started)
