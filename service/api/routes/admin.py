"""Admin routes, behind the admin key (``PRIORART_ADMIN_KEY``; the API key never opens them). The key is checked by
the guard middleware before a body is read (none configured: 403; missing or wrong: 401), and here again:

- ``POST /admin/reload``: load the index folder's newest generation and swap it in, or refuse and keep the old one;
- ``POST /admin/documents`` (JSON records) and ``DELETE /admin/documents/{id}``: the live index
  (:mod:`service.index.live`) over HTTP, each a new generation that this server then loads.

What a change did is said as it is: 200 with the report; nothing committed: a problem document with
``committed: false`` and the generation the index stays at (507 the disk is full, 503 another storage failure,
404 an unknown id, 422 a refused batch, 409 an index that cannot be changed); committed and a later step failed
(a merge of segments after an add): 207 with the report, ``committed: true`` and the failure. Replies name no path on
the server's disk.

A server also loads a new generation by itself (:func:`watch_generations`, every ``reload_interval_s``).
Requests keep the engine they started with; the replaced engine is closed once they have finished.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, FastAPI, Header, HTTPException, Request
from fastapi.responses import JSONResponse

from service import heap
from service.api.deps import MetricsDep, SettingsDep
from service.api.errors import TITLES, problem, public
from service.api.middleware import ADMIN_OFF, same_key
from service.corpus.record import PatentRecord
from service.settings import Settings

if TYPE_CHECKING:
    from service.index.live import AfterCommitError, LiveIndexError

router = APIRouter(tags=["admin"])
log = logging.getLogger(__name__)
_reload_lock = threading.Lock()


def require_admin(settings: Settings, given: str | None) -> None:
    """403 when no admin key is configured (the API key is no admin key), 401 for a missing or wrong key
    (constant-time comparison)."""
    if not settings.admin_key:
        raise HTTPException(403, ADMIN_OFF)
    if not same_key(given, settings.admin_key):
        raise HTTPException(401, "missing or wrong X-API-Key header (the admin key)")


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
        from service.api.routes.health import public_health

        previous = public_health(old, settings.index_dir)["index"] if old else None  # read before it is released
        holder.swap(new)  # one reference swap: a request sees either the old or the new generation
        was = old.generation if old else None
        del old  # released here (or by the last request that holds it): settle then frees its cycles
        heap.settle()  # the new index out of the collector's full passes, as at startup
    from service.api.routes.watches import notify_runner

    notify_runner(app)  # the watches evaluated against the generation loaded
    metrics.reloads.labels("ok").inc()
    metrics.index_docs.set(new.num_docs)
    log.info("index %s generation %d loaded (was %s)", settings.index_dir, new.generation, was)
    return {"previous": previous, "current": public_health(new, settings.index_dir)["index"]}


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


@router.post("/admin/reload", summary="Reload the index folder (admin key)")
def reload_index(request: Request, settings: SettingsDep, x_api_key: str | None = Header(None)) -> dict[str, Any]:
    require_admin(settings, x_api_key)
    try:
        done = reload_engine(request.app)
    except Exception as exc:  # noqa: BLE001 - any failure keeps the old index; the reason is reported
        log.error("reload of %s refused, old index kept: %s", settings.index_dir, exc)
        raise HTTPException(409, public(f"new index refused, old one kept: {exc}", settings.index_dir)) from exc
    assert done is not None
    return public({"reloaded": True, **done}, settings.index_dir)


@router.post("/admin/documents", summary="Add or replace publications (admin key; a new generation)",
             response_model=None,
             responses={207: {"description": "committed; a later step (a merge of segments) failed"}})
def add_documents(records: list[PatentRecord], request: Request, settings: SettingsDep, metrics: MetricsDep,
                  x_api_key: str | None = Header(None)) -> dict[str, Any] | JSONResponse:
    require_admin(settings, x_api_key)
    from service.index.live import AfterCommitError, LiveIndexError
    from service.index.live import add_documents as add

    try:
        report = add(settings.index_dir, records, device=settings.device, progress=False)
    except AfterCommitError as exc:
        return _committed_then_failed(request, settings, exc)
    except LiveIndexError as exc:
        return _not_committed(settings, exc)
    return _after_change(request, settings, report.to_dict())


@router.delete("/admin/documents/{doc_id}", summary="Delete a publication (admin key; a new generation)",
               response_model=None, responses={207: {"description": "committed; a later step failed"}})
def delete_document(doc_id: str, request: Request, settings: SettingsDep,
                    x_api_key: str | None = Header(None)) -> dict[str, Any] | JSONResponse:
    require_admin(settings, x_api_key)
    from service.index.live import AfterCommitError, LiveIndexError, delete_documents

    try:
        report = delete_documents(settings.index_dir, [doc_id])
    except AfterCommitError as exc:
        return _committed_then_failed(request, settings, exc)
    except LiveIndexError as exc:
        return _not_committed(settings, exc)
    return _after_change(request, settings, report.to_dict())


def _not_committed(settings: Settings, exc: LiveIndexError) -> JSONResponse:
    """Nothing was committed: the status says why (507 the disk is full, 503 another storage failure, 404 unknown
    ids, 422 a refused batch, 409 an index that cannot be changed)."""
    from service.index.folder import current_generation
    from service.index.live import BatchError, NotInIndexError, StorageError

    if isinstance(exc, StorageError):
        status = 507 if exc.disk_full else 503
        generation: int | None = exc.generation
    else:
        status = 404 if isinstance(exc, NotInIndexError) else 422 if isinstance(exc, BatchError) else 409
        try:
            generation = current_generation(settings.index_dir)
        except OSError:
            generation = None
    log.log(logging.ERROR if status >= 500 else logging.INFO, "index change not committed (%d): %s", status, exc)
    return problem(status, TITLES[status], public(str(exc), settings.index_dir), committed=False,
                   generation=generation, disk_full=bool(getattr(exc, "disk_full", False)))


def _committed_then_failed(request: Request, settings: Settings, exc: AfterCommitError) -> JSONResponse:
    """Committed, then a later step failed: 207 with the report of what was committed and the failure."""
    log.error("index change committed, a later step failed: %s", exc)
    body = _after_change(request, settings, exc.report.to_dict())
    body.update(committed=True, error=public(str(exc), settings.index_dir), failed_step=public(exc.step,
                settings.index_dir), disk_full=exc.disk_full)
    return JSONResponse(body, status_code=207)


def _after_change(request: Request, settings: Settings, report: dict[str, Any]) -> dict[str, Any]:
    """Load the generation just written, so that the caller's next request sees it; the reply without disk paths."""
    report.pop("index_dir", None)
    report["committed"] = True
    try:
        reload_engine(request.app, only_if_newer=True)
    except Exception as exc:  # noqa: BLE001 - committed on disk; this server keeps the old one for now
        log.error("generation %s written but not loaded: %s", report.get("generation"), exc)
        report["loaded"] = False
        report["load_error"] = str(exc)
        return public(report, settings.index_dir)
    report["loaded"] = True
    return public(report, settings.index_dir)
