"""Pure-ASGI guard: body size limit, API key, per-request time limit, request metrics.

Pure ASGI (not ``BaseHTTPMiddleware``) keeps the per-request overhead small and lets the body limit
apply to chunked uploads too, not only to a declared ``Content-Length``.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.api.errors import problem
from service.api.metrics import Metrics
from service.api.routes.search import INLINE_PATHS
from service.settings import Settings

OPEN_PATHS = ("/health", "/ready", "/metrics", "/docs", "/redoc", "/openapi.json", "/static", "/favicon", "/admin")


class _BodyTooLarge(Exception):
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

        async def send_wrapper(message: Message) -> None:
            if state.get("too_large"):  # the app answered a body it could not read: say why instead
                if message["type"] == "http.response.start" and not state["started"]:
                    state["started"] = True
                    state["status"] = 413
                    await problem(413, "Payload Too Large", f"request body over {limit} bytes")(scope, receive, send)
                return
            if message["type"] == "http.response.start":
                state["status"] = message["status"]
                state["started"] = True
            await send(message)

        received = 0

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    state["too_large"] = True
                    raise _BodyTooLarge
            return message

        async def reply(status: int, title: str, detail: str) -> None:
            if not state["started"]:
                await problem(status, title, detail)(scope, receive, send_wrapper)

        length = headers.get("content-length")
        path = scope["path"]
        key = self.settings.api_key
        try:
            if length is not None and (not length.isdigit() or int(length) > limit):
                await reply(413, "Payload Too Large", f"request body over {limit} bytes")
            elif key and path != "/" and not path.startswith(OPEN_PATHS) and headers.get("x-api-key") != key:
                await reply(401, "Unauthorized", "missing or wrong X-API-Key header")
            elif self.settings.request_threads == 0 and path in INLINE_PATHS:
                # run in the event loop: a cancellation could only land in the middle of sending the answer;
                # the route checks its own time limit (service.api.routes.search._run)
                await self.app(scope, limited_receive, send_wrapper)
            else:
                async with asyncio.timeout(self.settings.request_timeout_s):  # (wait_for made a task per request)
                    await self.app(scope, limited_receive, send_wrapper)
        except _BodyTooLarge:
            await reply(413, "Payload Too Large", f"request body over {limit} bytes")
        except TimeoutError:
            await reply(504, "Gateway Timeout", f"request took over {self.settings.request_timeout_s} s")
        finally:
            route = scope.get("route")
            label = getattr(route, "path", "unmatched")
            self.metrics.requests.labels(scope["method"], label, str(state["status"])).inc()
            self.metrics.latency.labels(label).observe(time.perf_counter() - started)
