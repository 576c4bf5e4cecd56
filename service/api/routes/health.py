"""/ (the UI), /health, /ready, /metrics."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, JSONResponse, Response

from service.api.assets import STATIC_DIR
from service.api.deps import MetricsDep

router = APIRouter(tags=["operations"])


@router.get("/", include_in_schema=False)
def ui(request: Request) -> FileResponse:
    return FileResponse(STATIC_DIR / "index.html")


@router.get("/health", summary="Liveness plus index/model versions and devices")
def health(request: Request) -> Any:
    engine = request.app.state.engines.engine
    if engine is None:
        return JSONResponse({"status": "starting"}, status_code=503)
    return {"status": "ok", **engine.health()}


@router.get("/ready", summary="Readiness: 200 once the index is loaded")
def ready(request: Request) -> JSONResponse:
    ok = request.app.state.engines.engine is not None
    return JSONResponse({"ready": ok}, status_code=200 if ok else 503)


@router.get("/metrics", summary="Prometheus metrics")
def metrics(m: MetricsDep) -> Response:
    return Response(m.render(), media_type="text/plain; version=0.0.4; charset=utf-8")
