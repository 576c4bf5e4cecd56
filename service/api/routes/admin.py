"""POST /admin/reload: atomically swap in the index folder again, or refuse and keep the old one."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import APIRouter, Header, HTTPException, Request

from service.api.deps import MetricsDep, SettingsDep

router = APIRouter(tags=["admin"])
log = logging.getLogger(__name__)


@router.post("/admin/reload", summary="Reload the index folder (protected)")
def reload_index(
    request: Request, settings: SettingsDep, metrics: MetricsDep, x_api_key: str | None = Header(None)
) -> dict[str, Any]:
    key = settings.admin_key or settings.api_key
    if not key:
        raise HTTPException(403, "reload is disabled: set PRIORART_ADMIN_KEY (or PRIORART_API_KEY)")
    if x_api_key != key:
        raise HTTPException(401, "missing or wrong X-API-Key header")
    from service.engine import Engine

    old = request.app.state.engine
    try:
        new = Engine.load(settings.index_dir, settings=settings)  # fully loaded and verified first
    except Exception as exc:  # noqa: BLE001 - any failure keeps the old index; the reason is reported
        metrics.reloads.labels("refused").inc()
        log.error("reload of %s refused, old index kept: %s", settings.index_dir, exc)
        raise HTTPException(409, f"new index refused, old one kept: {exc}") from exc
    request.app.state.engine = new  # one reference assignment: requests see either old or new
    if old is not None:
        old.close()
    metrics.reloads.labels("ok").inc()
    metrics.index_docs.set(new.num_docs)
    return {"reloaded": True, "previous": old.health()["index"] if old else None, "current": new.health()["index"]}
