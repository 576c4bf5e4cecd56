"""POST /search and POST /passages."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, HTTPException

from service.api.deps import EngineDep, MetricsDep, SettingsDep
from service.api.metrics import Metrics
from service.api.schemas import PassageRequest, PassageResponse, SearchRequest, SearchResponse
from service.api.settings import Settings
from service.engine import QueryError

router = APIRouter(tags=["search"])


def _check_limits(req: SearchRequest, settings: Settings) -> None:
    if len(req.query) > settings.max_query_chars:
        raise HTTPException(422, f"query: {len(req.query)} characters, the limit is {settings.max_query_chars}")
    if req.k > settings.max_k:
        raise HTTPException(422, f"k: {req.k} is over the limit of {settings.max_k}")
    if req.depth is not None and req.depth > settings.max_depth:
        raise HTTPException(422, f"depth: {req.depth} is over the limit of {settings.max_depth}")


def _answer(run: Callable[[Any], dict[str, Any]], req: SearchRequest, settings: Settings,
            metrics: Metrics) -> dict[str, Any]:
    """Check limits, run the engine (its QueryError -> 422), record per-stage latency."""
    _check_limits(req, settings)
    try:
        result = run(req)
    except QueryError as exc:
        raise HTTPException(422, str(exc)) from exc
    for stage in result["stages"]:
        metrics.stage_latency.labels(stage["name"]).observe(stage["ms"] / 1000.0)
    return result


@router.post("/search", response_model=SearchResponse, summary="Rank prior-art documents for a query")
def search(req: SearchRequest, engine: EngineDep, settings: SettingsDep, metrics: MetricsDep) -> dict[str, Any]:
    """Query text (claims, title+abstract) or a publication number, in en/de/fr, with optional filters."""
    return _answer(engine.search, req, settings, metrics)


@router.post("/passages", response_model=PassageResponse, summary="Rank passages, scored in their document context")
def passages(req: PassageRequest, engine: EngineDep, settings: SettingsDep, metrics: MetricsDep) -> dict[str, Any]:
    """Structure-aware passage ranking (QSF variants of the passage-retrieval-in-context paper)."""
    return _answer(engine.passages, req, settings, metrics)
