"""/ (the UI) and /favicon.ico, /health, /ready, /metrics; each answers HEAD too (probes and load balancers send it)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, JSONResponse, Response

from service.api.assets import STATIC_DIR
from service.api.deps import MetricsDep
from service.api.errors import public

if TYPE_CHECKING:
    from service.engine import Engine

router = APIRouter(tags=["operations"])


def public_health(engine: Engine, index_dir: Any) -> dict[str, Any]:
    """``engine.health()`` as a public reply: without the index folder's path (or any other path on disk)."""
    info = engine.health()
    info["index"] = {k: v for k, v in info["index"].items() if k != "path"}
    return public(info, index_dir)


@router.get("/", include_in_schema=False)
def ui(request: Request) -> FileResponse:
    return FileResponse(STATIC_DIR / "index.html")


@router.get("/favicon.ico", include_in_schema=False)
def favicon(request: Request) -> FileResponse:
    """The UI's icon (its pages link it; a browser that asks for /favicon.ico anyway gets it too, not a 404)."""
    return FileResponse(STATIC_DIR / "favicon.svg", media_type="image/svg+xml")


@router.get("/health", summary="Liveness plus index/model versions and devices")
def health(request: Request) -> Any:
    engine = request.app.state.engines.engine
    if engine is None:
        return JSONResponse({"status": "starting"}, status_code=503)
    return {"status": "ok", **public_health(engine, request.app.state.settings.index_dir)}


@router.get("/ready", summary="Readiness: 200 once the index is loaded and a first query has run")
def ready(request: Request) -> JSONResponse:
    """The engine is set once it is loaded with its kernels and a first query has run (``service.startup``): a
    client's first query then finds nothing left to compile or read in. (``priorart serve`` loads it before the
    server listens: until then a probe's connection is refused.)"""
    ok = request.app.state.engines.engine is not None
    return JSONResponse({"ready": ok}, status_code=200 if ok else 503)


@router.get("/metrics", summary="Prometheus metrics")
def metrics(m: MetricsDep) -> Response:
    return Response(m.render(), media_type="text/plain; version=0.0.4; charset=utf-8")


for _path, _endpoint in (("/", ui), ("/health", health), ("/ready", ready), ("/metrics", metrics)):
    router.add_api_route(_path, _endpoint, methods=["HEAD"], include_in_schema=False)
