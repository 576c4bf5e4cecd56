"""FastAPI application factory. Thin: routes delegate to the ``Engine`` loaded in the lifespan."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import anyio.to_thread
from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware
from fastapi.staticfiles import StaticFiles

from service import __version__, heap
from service.api.assets import STATIC_DIR
from service.api.deps import EngineHolder
from service.api.errors import install_error_handlers
from service.api.metrics import Metrics
from service.api.middleware import GuardMiddleware
from service.api.routes import admin, apidocs, documents, health, search, watches, workflow
from service.settings import Settings

if TYPE_CHECKING:
    from service.engine import Engine

log = logging.getLogger(__name__)


def create_app(settings: Settings | None = None, *,
               engine_loader: Callable[[Settings], Engine] | None = None) -> FastAPI:
    """Build the app. The index is loaded at startup (lifespan), never at import time.

    ``engine_loader``: how the engine is loaded at startup and on reload (default: the index folder, loaded in
    logged phases and warmed by a first query, ``service.startup.load_engine``; the Ray Serve ingress loads a
    sharded engine whose shards are deployments, service/serve_ray.py).
    """
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        from service.api.routes.admin import watch_generations
        from service.startup import load_engine  # heavy imports happen here, not at module import

        # the worker threads of /search and /passages (request_threads 0: they run in the loop) and of the other
        # plain endpoints (documents, claim charts, reports)
        anyio.to_thread.current_default_thread_limiter().total_tokens = max(1, settings.request_threads)
        started = time.perf_counter()
        engine = app.state.load_engine(settings) if engine_loader is not None else load_engine(
            settings.index_dir, settings)  # in phases, each logged, and warmed by a first query
        app.state.engines.swap(engine)
        heap.settle()  # the loaded index out of the collector's full passes (the p99 at depth 1000)
        app.state.metrics.index_docs.set(engine.num_docs)
        log.info("index %s (generation %d) loaded in %.1f s: %s", settings.index_dir, engine.generation,
                 time.perf_counter() - started, engine.describe())
        watcher = asyncio.create_task(watch_generations(app)) if settings.reload_interval_s > 0 else None
        watches.start_runner(app)  # the saved searches evaluated on each generation loaded, this one first
        yield
        if watcher is not None:
            watcher.cancel()
        watches.stop_runner(app)
        app.state.engines.swap(None)

    app = FastAPI(
        title="priorart",
        version=__version__,
        description="Cross-lingual patent prior-art search: BM25 + query translation, dense retrieval, "
        "neural reranking with text and classification embeddings, weighted fusion, passages.",
        lifespan=lifespan,
        docs_url=None,  # /docs with Swagger UI's files served here, not from a CDN (routes/apidocs.py)
        redoc_url=None,  # ReDoc loads from a CDN too: left out
    )
    app.state.settings = settings
    app.state.metrics = Metrics()
    app.state.engines = EngineHolder()
    app.state.load_engine = engine_loader
    install_error_handlers(app)
    if settings.cors_origins:
        app.add_middleware(CORSMiddleware, allow_origins=settings.cors_origins, allow_methods=["GET", "POST"],
                           allow_headers=["Content-Type", "X-API-Key"])

    app.add_middleware(GuardMiddleware, settings=settings, metrics=app.state.metrics)

    app.include_router(search.router)
    app.include_router(documents.router)
    app.include_router(health.router)
    app.include_router(admin.router)
    app.include_router(workflow.router)
    app.include_router(watches.router)
    apidocs.install(app)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    return app
