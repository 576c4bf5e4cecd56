"""The guard middleware on its own: a request over the time limit answers 504 (a problem document), others pass."""

from __future__ import annotations

import asyncio

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from service.api.metrics import Metrics
from service.api.middleware import GuardMiddleware
from service.settings import Settings


async def _sleep(request: Request) -> JSONResponse:
    await asyncio.sleep(float(request.query_params["s"]))
    return JSONResponse({"slept": True})


def test_a_request_over_the_time_limit_is_a_504_problem_and_the_next_one_passes() -> None:
    app = Starlette(routes=[Route("/sleep", _sleep)])
    guarded = GuardMiddleware(app, settings=Settings(request_timeout_s=0.2), metrics=Metrics())
    with TestClient(guarded) as client:
        slow = client.get("/sleep", params={"s": "2"})
        assert slow.status_code == 504
        assert slow.headers["content-type"].startswith("application/problem+json")
        assert "over 0.2 s" in slow.json()["detail"]
        fast = client.get("/sleep", params={"s": "0"})
        assert fast.status_code == 200 and fast.json() == {"slept": True}


async def _echo(request: Request) -> JSONResponse:
    return JSONResponse({"bytes": len(await request.body())})


async def _call(app: object, path: str, chunks: list[bytes], *, declared: int) -> tuple[int, dict[str, str], bytes]:
    """One POST through the ASGI app whose client sends ``chunks`` and then nothing (a body declared longer than
    it sends); the status, headers and body of the answer."""
    sent: list[dict] = []
    queue = [{"type": "http.request", "body": c, "more_body": True} for c in chunks]

    async def receive() -> dict:
        if queue:
            return queue.pop(0)
        await asyncio.Event().wait()  # the client stalls: never returns
        raise AssertionError

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": path, "raw_path": path.encode(), "query_string": b"",
             "headers": [(b"content-type", b"application/json"), (b"content-length", str(declared).encode())],
             "http_version": "1.1", "scheme": "http", "server": ("t", 80), "client": ("c", 1), "root_path": ""}
    await asyncio.wait_for(app(scope, receive, send), timeout=10)  # type: ignore[operator]
    start = next(m for m in sent if m["type"] == "http.response.start")
    headers = {k.decode(): v.decode() for k, v in start["headers"]}
    return start["status"], headers, b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")


@pytest.mark.parametrize(("path", "threads"), [("/search", 0), ("/search", 2), ("/echo", 0), ("/admin/x", 0)])
def test_a_body_declared_longer_than_sent_is_a_408_at_the_time_limit(path: str, threads: int) -> None:
    """The per-request time limit covers reading the body: in the event loop (/search with request_threads 0),
    in the worker-thread branch, and on the admin routes (which have no limit once the body is read)."""
    app = Starlette(routes=[Route(path, _echo, methods=["POST"])])
    settings = Settings(request_timeout_s=0.3, request_threads=threads, admin_key="k")
    guarded = GuardMiddleware(app, settings=settings, metrics=Metrics())
    if path.startswith("/admin"):
        async def with_key(scope: dict, receive: object, send: object) -> None:
            scope["headers"].append((b"x-api-key", b"k"))
            await guarded(scope, receive, send)  # type: ignore[arg-type]
        target: object = with_key
    else:
        target = guarded
    status, headers, body = asyncio.run(_call(target, path, [b'{"query": "to'], declared=1000))
    assert status == 408, body
    assert headers["content-type"].startswith("application/problem+json") and headers["connection"] == "close"
    assert b"not received within 0.3 s" in body and b"13 bytes of 1000" in body


def test_a_complete_body_is_read_as_before() -> None:
    app = Starlette(routes=[Route("/echo", _echo, methods=["POST"])])
    guarded = GuardMiddleware(app, settings=Settings(request_timeout_s=0.3), metrics=Metrics())
    with TestClient(guarded) as client:
        r = client.post("/echo", content=b"x" * 5000)
        assert r.status_code == 200 and r.json() == {"bytes": 5000}
