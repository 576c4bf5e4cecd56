"""Admin routes (protected by the admin key, compared in constant time; without a key they answer 403):

- ``POST /admin/reload``: load the index folder's newest generation and swap it in, or refuse and keep the old one;
- ``POST /admin/documents`` (JSON records) and ``DELETE /admin/documents/{id}``: the live index
  (:mod:`service.index.live`) over HTTP, each a new generation that this server then loads.

A server also loads a new generation by itself (:func:`watch_generations`, every ``reload_interval_s``).
Requests keep the engine they started with; the replaced engine is closed once they have finished.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import threading
from typing import Any

from fastapi import APIRouter, FastAPI, Header, HTTPException, Request

from service import heap
from service.api.deps import MetricsDep, SettingsDep
from service.corpus.record import PatentRecord
from service.settings import Settings

router = APIRouter(tags=["admin"])
log = logging.getLogger(__name__)
_reload_lock = threading.Lock()


def require_admin(settings: Settings, given: str | None) -> None:
    """403 when no admin key is configured, 401 for a missing or wrong key (constant-time comparison)."""
    key = settings.admin_key or settings.api_key
    if not key:
        raise HTTPException(403, "admin routes are disabled: set PRIORART_ADMIN_KEY (or PRIORART_API_KEY)")
    if given is None or not hmac.compare_digest(given.encode("utf-8"), key.encode("utf-8")):
        raise HTTPException(401, "missing or wrong X-API-Key header")


def reload_engine(app: FastAPI, *, only_if_newer: bool = False) -> dict[str, Any] | None:
    """Load the index folder at its newest generation and swap it in; raises on failure (old engine kept).

    ``only_if_newer``: do nothing (None) when the loaded engine already has the newest generation.
    """
    from service.engine import Engine
    from service.index.folder import current_generation

    settings: Settings = app.state.settings
    holder = app.state.engines
    metrics = app.state.metrics
    with _reload_lock:
        old = holder.engine
        if only_if_newer and old is not None and current_generation(settings.index_dir) == old.generation:
            return None
        try:
            loader = getattr(app.state, "load_engine", None)  # fully loaded and verified first
            new = loader(settings) if loader is not None else Engine.load(settings.index_dir, settings=settings)
        except Exception:
            metrics.reloads.labels("refused").inc()
            raise
        holder.swap(new)  # one reference swap: a request sees either the old or the new generation
        heap.settle()  # the new index out of the collector's full passes, as at startup
    metrics.reloads.labels("ok").inc()
    metrics.index_docs.set(new.num_docs)
    log.info("index %s generation %d loaded (was %s)", settings.index_dir, new.generation,
             old.generation if old else None)
    return {"previous": old.health()["index"] if old else None, "current": new.health()["index"]}


async def watch_generations(app: FastAPI) -> None:
    """Load each new generation of the index folder as it appears (a failed load is retried at the next one)."""
    from service.index.folder import current_generation

    settings: Settings = app.state.settings
    failed: int | None = None
    while True:
        await asyncio.sleep(settings.reload_interval_s)
        try:
            gen = current_generation(settings.index_dir)
            engine = app.state.engines.engine
            if engine is None or gen == engine.generation or gen == failed:
                continue
            await asyncio.to_thread(reload_engine, app, only_if_newer=True)
            failed = None
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - the old engine keeps serving; logged and retried
            failed = gen
            log.error("generation %s of %s not loaded, old one kept: %s", gen, settings.index_dir, exc)


@router.post("/admin/reload", summary="Reload the index folder (protected)")
def reload_index(request: Request, settings: SettingsDep, x_api_key: str | None = Header(None)) -> dict[str, Any]:
    require_admin(settings, x_api_key)
    try:
        done = reload_engine(request.app)
    except Exception as exc:  # noqa: BLE001 - any failure keeps the old index; the reason is reported
        log.error("reload of %s refused, old index kept: %s", settings.index_dir, exc)
        raise HTTPException(409, f"new index refused, old one kept: {exc}") from exc
    assert done is not None
    return {"reloaded": True, **done}


@router.post("/admin/documents", summary="Add or replace publications (protected; a new generation)")
def add_documents(records: list[PatentRecord], request: Request, settings: SettingsDep, metrics: MetricsDep,
                  x_api_key: str | None = Header(None)) -> dict[str, Any]:
    require_admin(settings, x_api_key)
    from service.index.live import LiveIndexError
    from service.index.live import add_documents as add

    try:
        report = add(settings.index_dir, records, device=settings.device, progress=False)
    except LiveIndexError as exc:
        raise HTTPException(422, str(exc)) from exc
    return _after_change(request, report.to_dict())


@router.delete("/admin/documents/{doc_id}", summary="Delete a publication (protected; a new generation)")
def delete_document(doc_id: str, request: Request, settings: SettingsDep,
                    x_api_key: str | None = Header(None)) -> dict[str, Any]:
    require_admin(settings, x_api_key)
    from service.index.live import LiveIndexError, delete_documents

    try:
        report = delete_documents(settings.index_dir, [doc_id])
    except LiveIndexError as exc:
        raise HTTPException(404, str(exc)) from exc
    return _after_change(request, report.to_dict())


def _after_change(request: Request, report: dict[str, Any]) -> dict[str, Any]:
    """Load the generation just written, so that the caller's next request sees it."""
    try:
        reload_engine(request.app, only_if_newer=True)
    except Exception as exc:  # noqa: BLE001 - committed on disk; this server keeps the old one for now
        log.error("generation %s written but not loaded: %s", report.get("generation"), exc)
        report["loaded"] = False
        report["load_error"] = str(exc)
        return report
    report["loaded"] = True
    return report
