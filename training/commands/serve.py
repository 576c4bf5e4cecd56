"""``priorart serve INDEX_DIR``: run the REST service (and the analyst UI at /) with uvicorn."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    from service.engine import Engine
    from service.settings import Settings

log = logging.getLogger(__name__)


def serve_command(
    index_dir: Path = typer.Argument(..., help="Index folder built by `priorart build`."),
    host: str = typer.Option("127.0.0.1", "--host", help="Interface to listen on."),
    port: int = typer.Option(8000, "--port", help="TCP port."),
    cpc: Path | None = typer.Option(None, "--cpc", help="CPC title list (tsv.gz) for code titles/autocomplete."),
    workers: int = typer.Option(1, "--workers", help="uvicorn worker processes."),
    api_key: str | None = typer.Option(None, "--api-key", envvar="PRIORART_API_KEY",
                                       help="Require this key in the X-API-Key header."),
    use_ray: bool = typer.Option(False, "--ray", help="A sharded index on Ray Serve: one deployment per shard and "
                                 "a fan-out ingress, on a local Ray (--ray-address for a cluster)."),
    ray_address: str | None = typer.Option(None, "--ray-address", help="The Ray cluster to serve on (e.g. auto); "
                                           "implies --ray."),
    shard_replicas: int = typer.Option(1, "--shard-replicas", min=1, help="With --ray: replicas per shard."),
    access_log: bool = typer.Option(False, "--access-log/--no-access-log", envvar="PRIORART_ACCESS_LOG",
                                    help="Log a line per request (off by default: /metrics counts every request and "
                                    "its latency; what the log costs was not separated from the noise, README)."),
) -> None:
    """Serve /search, /passages, /documents, /health, /ready, /metrics, /docs and the web UI.

    The connection limits (header and body timeouts, keep-alive, the connection cap) come from the settings
    (service/api/server.py). An index that cannot be loaded is one line on stderr and exit status 2.
    """
    from service.settings import Settings
    from service.startup import apply_kernel_cache

    if not (index_dir / "meta.json").exists():
        typer.echo(f"error: {index_dir} is not an index folder (no meta.json); build one with `priorart build`",
                   err=True)
        raise typer.Exit(2)
    given: dict[str, Any] = {"index_dir": index_dir}  # the options over the environment's PRIORART_* settings
    if cpc is not None:
        given["cpc_titles"] = cpc
    if api_key:
        given["api_key"] = api_key
    settings = Settings(**given)
    apply_kernel_cache(settings.kernel_cache)  # before numba is imported (service.api imports the kernels)
    if use_ray or ray_address:
        _serve_ray(settings, ray_address or "local", host, port, shard_replicas)
        return
    import uvicorn

    from service.api import create_app
    from service.api.server import run_workers, uvicorn_options

    _raise_open_files_limit()
    limits = uvicorn_options(settings)
    if workers > 1:  # each worker loads the index: check it here once, so that a bad one is one line, not N crashes
        _check_index(index_dir)
        run_workers(settings, workers, host=host, port=port, log_level="info", access_log=access_log,
                    log_config=_worker_log_config(settings.log_level), **limits)
    else:  # loaded before the server starts: a bad index is one line, not the traceback of a failed lifespan
        loader = _preloaded(index_dir, settings)
        uvicorn.run(create_app(settings, engine_loader=loader), host=host, port=port, log_level="info",
                    access_log=access_log, **limits)


def _worker_log_config(level: str) -> dict[str, object]:
    """uvicorn's logging configuration with this CLI's root handler, for worker processes (spawned: they start
    without the CLI's logging, and their start-up lines, service/startup.py, were lost)."""
    import copy

    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config["formatters"]["priorart"] = {"format": "%(asctime)s %(levelname)s [%(process)d] %(name)s: %(message)s"}
    config["handlers"]["priorart"] = {"formatter": "priorart", "class": "logging.StreamHandler",
                                      "stream": "ext://sys.stderr"}
    config["root"] = {"handlers": ["priorart"], "level": level.upper()}
    return config


def _load_error(index_dir: Path, exc: Exception) -> typer.Exit:
    typer.echo(f"error: the index {index_dir} cannot be loaded: {exc}", err=True)
    return typer.Exit(2)


def _check_index(index_dir: Path) -> None:
    """Open the index as the workers will (every checksum), or exit with one line."""
    from service.index.folder import IndexFolder, ShardSet, is_sharded

    try:
        if is_sharded(index_dir):
            ShardSet.open(index_dir, verify=True)
        else:
            IndexFolder.open(index_dir, verify=True)
    except (ValueError, OSError) as exc:  # IndexFormatError and the like: what is wrong with the folder
        raise _load_error(index_dir, exc) from None


def _preloaded(index_dir: Path, settings: Settings) -> Callable[[Settings], Engine]:
    """The engine loaded now, in phases logged one line each, and warmed by a first query (or exit with one line),
    handed to the app at its start; later loads (reloads, new generations) load the folder again."""
    from service.engine import Engine
    from service.startup import load_engine

    started = time.perf_counter()
    try:
        first: list[Engine] = [load_engine(index_dir, settings)]
    except (ValueError, OSError) as exc:
        raise _load_error(index_dir, exc) from None
    log.info("index %s loaded in %.1f s, before the server starts", index_dir, time.perf_counter() - started)

    def load(s: Settings) -> Engine:
        return first.pop() if first else Engine.load(s.index_dir, settings=s)

    return load


def _raise_open_files_limit() -> None:
    """The soft open-files limit up to the hard one: each connection is a file; the connection cap is lowered
    to what the limit leaves (service/api/server.py)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else 1 << 16
    if soft == resource.RLIM_INFINITY or soft >= target:
        return
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError) as exc:
        log.warning("open-files limit stays at %d (raising it to %d was refused: %s)", soft, target, exc)
        return
    log.info("open-files limit raised from %d to %d", soft, target)


def _serve_ray(settings: Settings, address: str, host: str, port: int, shard_replicas: int) -> None:
    from service.index.folder import is_sharded

    index_dir = settings.index_dir
    if not is_sharded(index_dir):
        typer.echo(f"error: {index_dir} is not a sharded index: --ray serves one built with "
                   "`priorart build --shards N`", err=True)
        raise typer.Exit(2)
    try:
        import ray
        from ray import serve

        from service.serve_ray import APP_NAME, application
    except ImportError as exc:
        typer.echo("error: --ray needs Ray: pip install -e '.[ray]'", err=True)
        raise typer.Exit(2) from exc
    ray.init(address=None if address == "local" else address)
    serve.start(http_options={"host": host, "port": port})
    serve.run(application(index_dir.resolve(), settings, shard_replicas=shard_replicas), name=APP_NAME,
              route_prefix="/", blocking=True)


def register(app: typer.Typer) -> None:
    """Add the ``serve`` command to the CLI."""
    app.command("serve")(serve_command)
