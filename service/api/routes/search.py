"""POST /search and POST /passages."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException

from service.api.deps import EngineDep, MetricsDep, SettingsDep
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


def _observe(metrics: Any, result: dict[str, Any]) -> None:
    for stage in result["stages"]:
        metrics.stage_latency.labels(stage["name"]).observe(stage["ms"] / 1000.0)


@router.post("/search", response_model=SearchResponse, summary="Rank prior-art documents for a query")
def search(req: SearchRequest, engine: EngineDep, settings: SettingsDep, metrics: MetricsDep) -> dict[str, Any]:
    """Query text (claims, title+abstract) or a publication number, in en/de/fr, with optional filters."""
    _check_limits(req, settings)
    try:
        result = engine.search(req)
    except QueryError as exc:
        raise HTTPException(422, str(exc)) from exc
    _observe(metrics, result)
    return result


@router.post("/passages", response_model=PassageResponse, summary="Rank passages, scored in their document context")
def passages(req: PassageRequest, engine: EngineDep, settings: SettingsDep, metrics: MetricsDep) -> dict[str, Any]:
    """Structure-aware passage ranking (QSF variants of the passage-retrieval-in-context paper)."""
    _check_limits(req, settings)
    try:
        result = engine.passages(req)
    except QueryError as exc:
        raise HTTPException(422, str(exc)) from exc
    _observe(metrics, result)
    return result
