"""Watches: saved searches evaluated on each new generation of the index (service/watch/).

- ``POST /watches`` (201): save a search (its query runs once now: a query that cannot run is a 422);
- ``GET /watches``, ``GET /watches/{id}``, ``DELETE /watches/{id}`` (204);
- ``GET /watches/{id}/hits?since=GENERATION``: the new documents found after that generation, with their passages;
- ``GET /watches/{id}/feed``: the hits as an Atom feed.

With API keys (``PRIORART_API_KEY``, several separated by commas), each key sees only its own watches: another
key's watch is a 404, as one that does not exist. The watches live in the state folder (``PRIORART_STATE_DIR``,
default beside the index folder); one that cannot be used is a 503 that says why, without server paths.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, FastAPI, HTTPException, Query, Request, Response

from service.api.deps import EngineDep, SettingsDep
from service.api.errors import public
from service.query import QueryError
from service.settings import Settings
from service.watch.feed import MEDIA_TYPE, atom_feed
from service.watch.models import Delivery, Watch, WatchHits, WatchRequest
from service.watch.store import StateError, WatchStore, owner_of, state_dir
from service.watch.webhooks import WebhookRefusedError

if TYPE_CHECKING:
    from service.watch.runner import WatchRunner

router = APIRouter(tags=["watches"])
log = logging.getLogger(__name__)
_NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"description": "no watch of this id for this API key"}}


def _store(settings: Settings, *, create: bool = False) -> WatchStore:
    try:
        return WatchStore.of(settings.index_dir, settings, create=create)
    except StateError as exc:
        raise HTTPException(503, public(f"watches unavailable: {exc}", settings.index_dir)) from exc


def _owner(request: Request, settings: Settings) -> str:
    """The caller's owner: its API key's (the guard middleware checked it), ``""`` on a server without keys."""
    return owner_of(request.headers.get("x-api-key")) if settings.api_keys else ""


def _watch(store: WatchStore, owner: str, watch_id: str) -> Watch:
    watch = store.get(owner, watch_id) if store.exists else None
    if watch is None:
        raise HTTPException(404, f"no watch {watch_id!r}")
    return watch


def start_runner(app: FastAPI) -> None:
    """Start the server's evaluation of the watches (service/watch/runner.py) on the engine holder; a state folder
    that cannot be used is logged, and the server serves without it."""
    from service.watch.runner import WatchRunner

    settings: Settings = app.state.settings
    try:
        root = state_dir(settings.index_dir, settings.state_dir)
    except StateError as exc:
        log.error("watches are not evaluated: %s", exc)
        return
    holder = app.state.engines
    runner = WatchRunner(root, holder.acquire, holder.release, url=settings.database_url,
                         backoff_s=settings.webhook_backoff_s, allow=settings.webhook_allow)
    app.state.watch_runner = runner
    runner.start()


def notify_runner(app: FastAPI) -> None:
    """A generation was loaded: evaluate the watches against it."""
    runner: WatchRunner | None = getattr(app.state, "watch_runner", None)
    if runner is not None:
        runner.notify()


def stop_runner(app: FastAPI) -> None:
    runner: WatchRunner | None = getattr(app.state, "watch_runner", None)
    if runner is not None:
        runner.stop()


@router.post("/watches", response_model=Watch, status_code=201, summary="Save a search as a watch")
def create_watch(req: WatchRequest, request: Request, engine: EngineDep, settings: SettingsDep) -> Watch:
    """A new document that ranks in this search's top k, in any later generation of the index, becomes a hit."""
    from service.watch.evaluate import save_watch

    if len(req.query) > settings.limits.max_query_chars:
        raise HTTPException(422, f"query: {len(req.query)} characters, the limit is {settings.limits.max_query_chars}")
    store = _store(settings, create=True)
    try:
        return save_watch(engine, store, _owner(request, settings), req)
    except (QueryError, WebhookRefusedError) as exc:
        raise HTTPException(422, str(exc)) from exc
    except StateError as exc:
        raise HTTPException(503, public(f"watches unavailable: {exc}", settings.index_dir)) from exc


@router.get("/watches", response_model=list[Watch], summary="The caller's watches")
def list_watches(request: Request, settings: SettingsDep) -> list[Watch]:
    store = _store(settings)
    return store.watches(_owner(request, settings)) if store.exists else []


@router.get("/watches/{watch_id}", response_model=Watch, responses=_NOT_FOUND, summary="One watch")
def get_watch(watch_id: str, request: Request, settings: SettingsDep) -> Watch:
    return _watch(_store(settings), _owner(request, settings), watch_id)


@router.delete("/watches/{watch_id}", status_code=204, responses=_NOT_FOUND,
               summary="Delete a watch with its hits")
def delete_watch(watch_id: str, request: Request, settings: SettingsDep) -> Response:
    store = _store(settings)
    if not (store.exists and store.delete(_owner(request, settings), watch_id)):
        raise HTTPException(404, f"no watch {watch_id!r}")
    return Response(status_code=204)


@router.get("/watches/{watch_id}/deliveries", response_model=list[Delivery], responses=_NOT_FOUND,
            summary="The watch's webhook deliveries, newest first")
def watch_deliveries(watch_id: str, request: Request, settings: SettingsDep) -> list[Delivery]:
    """Each evaluation that found hits queues one POST to the watch's webhook, retried until the receiver answers 2xx:
    when it was queued, how many attempts, the last status or error, when it is tried again."""
    store = _store(settings)
    found = store.deliveries(_owner(request, settings), watch_id) if store.exists else None
    if found is None:
        raise HTTPException(404, f"no watch {watch_id!r}")
    return found


@router.get("/watches/{watch_id}/hits", response_model=WatchHits, responses=_NOT_FOUND,
            summary="New documents in the watch's top k, with their best passage")
def watch_hits(watch_id: str, request: Request, settings: SettingsDep,
               since: int | None = Query(None, ge=0, description="only hits of generations after this one")
               ) -> WatchHits:
    store = _store(settings)
    owner = _owner(request, settings)
    watch = _watch(store, owner, watch_id)
    return WatchHits(watch=watch, since=since, hits=store.hits(owner, watch_id, since) or [])


@router.get("/watches/{watch_id}/feed", responses={200: {"content": {MEDIA_TYPE: {}}}, **_NOT_FOUND},
            summary="The watch's hits as an Atom feed")
def watch_feed(watch_id: str, request: Request, settings: SettingsDep) -> Response:
    store = _store(settings)
    owner = _owner(request, settings)
    watch = _watch(store, owner, watch_id)
    body = atom_feed(watch, store.hits(owner, watch_id) or [], str(request.base_url))
    return Response(body, media_type=MEDIA_TYPE)
