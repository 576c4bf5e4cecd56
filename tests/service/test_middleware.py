"""The guard middleware on its own: a request over the time limit answers 504 (a problem document), others pass."""

from __future__ import annotations

import asyncio

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
