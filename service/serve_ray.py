"""The sharded index on Ray Serve: one deployment per shard and a fan-out ingress answering the same REST API.

``priorart serve INDEX --ray [--ray-address ADDRESS]`` (or a KubeRay ``RayService``, deploy/ray/rayservice.yaml, whose
``serveConfigV2`` imports :func:`build`) runs the application :func:`application` builds:

- ``shard-NNN`` (one deployment per shard, :class:`ShardServer`): opens the sharded index (its own shard's
  files checksummed), sums every shard's collection statistics and composes its shard's pipeline with them
  (:class:`service.shards.Shard`); ``features(query)`` answers the ingress. A new generation of the index
  (``priorart add``) is loaded by the next query that sees it;
- ``ingress`` (:func:`ingress_app`): the FastAPI app of ``priorart serve`` (service/api/), whose engine is
  ``Engine.sharded`` with one :func:`ray_submit` per shard instead of shards loaded in process: the query
  is resolved once against the whole collection's doc store, sent to every shard deployment, and the
  answers are merged (``service.shards.merge``) and fused, exactly as the embedded sharded engine does.

Faults: a shard replica that dies mid-query, or a shard that answers after ``PRIORART_SHARD_TIMEOUT_S``,
is left out of that answer (200, ``partial: true``, ``missing_shards``); Ray Serve starts a new replica and
the next queries reach it through the same handle, without a restart of the ingress.

This module is imported only where Ray is installed (``pip install -e '.[ray]'``); the embedded server
(``priorart serve`` without ``--ray``) never imports it.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ray import serve
from ray.exceptions import RayTaskError

from service import heap
from service.index.folder import ShardSet, current_generation
from service.pipeline import load_shard
from service.query import Query, QueryError
from service.settings import Settings
from service.shards import Shard, ShardHits, Submit, Waiter, shard_name

if TYPE_CHECKING:
    from fastapi import FastAPI

    from service.engine import Engine

log = logging.getLogger(__name__)

APP_NAME = "priorart"
INGRESS = "ingress"


class ShardServer:
    """A shard deployment's replica: one shard's pipeline with the global statistics."""

    def __init__(self, index_dir: str, number: int, settings: dict[str, Any]) -> None:
        self.index_dir = Path(index_dir)
        self.number = number
        self.settings = Settings(**settings)
        self._lock = threading.Lock()
        self.generation = -1
        self.shard: Shard | None = None
        self._load()

    def _load(self) -> None:
        if self.shard is None:  # as `priorart serve` does at start-up: no first query pays for the kernels
            from service.startup import warm_kernels

            warm_kernels()
        shards = ShardSet.open(self.index_dir, verify=True, verify_only=self.number)
        old, self.shard = self.shard, load_shard(shards, self.number, self.settings)
        self.generation = shards.generation
        if old is not None:
            old.close()
        heap.settle()  # the shard's index out of the collector's full passes, as `priorart serve` does
        log.info("%s of %s loaded at generation %d", shard_name(self.number), self.index_dir, self.generation)

    def features(self, query: Query) -> ShardHits:
        if current_generation(self.index_dir) != self.generation:
            with self._lock:
                if current_generation(self.index_dir) != self.generation:
                    self._load()
        assert self.shard is not None
        return self.shard.features(query)

    def check_health(self) -> None:
        """Ray Serve's health check: the shard is loaded."""
        if self.shard is None:
            raise RuntimeError(f"{shard_name(self.number)} is not loaded")


def ray_submit(handle: Any) -> Submit:
    """Send a shard deployment its query; the waiter gives its answer or raises (a bad query as QueryError)."""

    def submit(query: Query) -> Waiter:
        response = handle.features.remote(query)

        def wait(timeout: float) -> ShardHits:
            try:
                hits: ShardHits = response.result(timeout_s=max(timeout, 0.001))
                return hits
            except RayTaskError as exc:
                if isinstance(exc.cause, QueryError):
                    raise exc.cause from None
                raise
            except TimeoutError:
                response.cancel()
                raise

        return wait

    return submit


def _load_ray_engine(settings: Settings) -> Engine:
    from service.engine import Engine

    n = ShardSet.open(settings.index_dir, verify=False).n_shards
    handles = [serve.get_deployment_handle(shard_name(i), app_name=APP_NAME) for i in range(n)]
    return Engine.sharded(settings.index_dir, settings=settings, submit=[ray_submit(h) for h in handles])


INGRESS_THREADS = 40
"""Requests the ingress runs at once (a search there is a fan-out and a merge; the shards do the work)."""


def ingress_app(settings: dict[str, Any]) -> FastAPI:
    """The ingress replica's app (built in the replica): the REST API over the shard deployments."""
    from service.api import create_app

    # the ingress mostly waits on its shards (no GIL held): many requests at once, unlike one process searching
    return create_app(Settings(**{**settings, "request_threads": INGRESS_THREADS}), engine_loader=_load_ray_engine)


class Ingress:
    """The ingress deployment (its routes are the FastAPI app's); bound to the shard deployments so that
    they are part of the application."""

    def __init__(self, *shards: Any) -> None:
        self.shards = shards


def application(index_dir: str | Path, settings: Settings | None = None, *, shard_replicas: int = 1,
                ingress_replicas: int = 1, shard_cpus: float = 0.0, ingress_cpus: float = 0.0) -> Any:
    """The Ray Serve application of a sharded index: ``serve.run(application(...), name=APP_NAME)``."""
    index_dir = Path(index_dir)
    settings = (settings or Settings()).model_copy(update={"index_dir": index_dir})
    shards = ShardSet.open(index_dir, verify=False)
    plain = settings.model_dump(mode="json")
    shard_deployment: Any = serve.deployment(ShardServer)
    bound = [shard_deployment.options(name=shard_name(i), num_replicas=shard_replicas,
                                      ray_actor_options={"num_cpus": shard_cpus}).bind(str(index_dir), i, plain)
             for i in range(shards.n_shards)]
    def builder() -> FastAPI:  # a function (Serve calls it in the replica), not a partial (taken for an app)
        return ingress_app(plain)

    ingress = serve.deployment(name=INGRESS, num_replicas=ingress_replicas,
                               ray_actor_options={"num_cpus": ingress_cpus})(serve.ingress(builder)(Ingress))
    return ingress.bind(*bound)


def build(args: dict[str, Any]) -> Any:
    """Application builder for a Serve config (KubeRay ``serveConfigV2``: ``import_path: service.serve_ray:build``,
    ``args: {index_dir: /data/index, shard_replicas: 1}``); other settings come from ``PRIORART_*``."""
    return application(args["index_dir"], Settings(), shard_replicas=int(args.get("shard_replicas", 1)),
                       ingress_replicas=int(args.get("ingress_replicas", 1)),
                       shard_cpus=float(args.get("shard_cpus", 1.0)), ingress_cpus=float(args.get("ingress_cpus", 1.0)))


__all__ = ["APP_NAME", "Ingress", "ShardServer", "application", "build", "ingress_app", "ray_submit"]
