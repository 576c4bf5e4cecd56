"""POST /search and POST /passages."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import anyio.to_thread
from fastapi import APIRouter, HTTPException, Response

from service.api.deps import EngineDep, MetricsDep, SettingsDep
from service.api.errors import problem
from service.api.metrics import Metrics
from service.query import QueryError
from service.schema import PassageRequest, PassageResponse, SearchRequest, SearchResponse
from service.settings import Settings

router = APIRouter(tags=["search"])
Req = TypeVar("Req", bound=SearchRequest)
Resp = TypeVar("Resp", SearchResponse, PassageResponse)


def _check_limits(req: SearchRequest, settings: Settings) -> None:
    limits = settings.limits
    if len(req.query) > limits.max_query_chars:
        raise HTTPException(422, f"query: {len(req.query)} characters, the limit is {limits.max_query_chars}")
    if req.k > limits.max_k:
        raise HTTPException(422, f"k: {req.k} is over the limit of {limits.max_k}")
    if req.depth is not None and req.depth > limits.max_depth:
        raise HTTPException(422, f"depth: {req.depth} is over the limit of {limits.max_depth}")


def _answer(run: Callable[[Req], Resp], req: Req, settings: Settings, metrics: Metrics) -> Response:
    """Check limits, run the engine (its QueryError -> 422), record per-stage latency; the JSON of the engine's
    typed response as it is (the route's response_model documents it: FastAPI would validate the built model again,
    in one more thread hand-off, and serialise it in two passes)."""
    _check_limits(req, settings)
    try:
        result = run(req)
    except QueryError as exc:
        if exc.extra:  # (a syntax error: where, and what was expected there)
            return problem(422, "Unprocessable Content", str(exc), **exc.extra)
        raise HTTPException(422, str(exc)) from exc
    for stage in result.stages:
        metrics.stage_latency.labels(stage.name).observe(stage.ms / 1000.0)
    return Response(result.model_dump_json(), media_type="application/json")


INLINE_PATHS = ("/search", "/passages")  # run in the event loop when request_threads is 0


async def _run(run: Callable[[Req], Resp], req: Req, settings: Settings, metrics: Metrics) -> Response:
    """:func:`_answer` in the event loop (``request_threads`` 0) or in a worker thread (``request_threads``).

    In the loop nothing can interrupt the engine, so the time limit is checked when it returns (the guard middleware
    leaves these routes to it): an answer over the limit is a 504, as a worker thread's would have been, only late.
    """
    if settings.request_threads > 0:
        return await anyio.to_thread.run_sync(_answer, run, req, settings, metrics)
    started = time.perf_counter()
    response = _answer(run, req, settings, metrics)
    if time.perf_counter() - started > settings.request_timeout_s:
        raise HTTPException(504, f"request took over {settings.request_timeout_s} s")
    return response


@router.post("/search", response_model=SearchResponse, summary="Rank prior-art documents for a query")
async def search(req: SearchRequest, engine: EngineDep, settings: SettingsDep, metrics: MetricsDep) -> Response:
    """Query text (claims, title+abstract) or a publication number, in en/de/fr, with optional filters."""
    return await _run(engine.search, req, settings, metrics)


@router.post("/passages", response_model=PassageResponse, summary="Rank passages, scored in their document context")
async def passages(req: PassageRequest, engine: EngineDep, settings: SettingsDep, metrics: MetricsDep) -> Response:
    """Structure-aware passage ranking (QSF variants of the passage-retrieval-in-context paper)."""
    return await _run(engine.passages, req, settings, metrics)
