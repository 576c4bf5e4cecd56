"""``priorart serve INDEX_DIR``: run the REST service (and the analyst UI at /) with uvicorn."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import typer

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
    """Serve /search, /passages, /documents, /health, /ready, /metrics, /docs and the web UI."""
    import uvicorn

    from service.api import create_app
    from service.settings import Settings

    if not (index_dir / "meta.json").exists():
        typer.echo(f"error: {index_dir} is not an index folder (no meta.json); build one with `priorart build`",
                   err=True)
        raise typer.Exit(2)
    os.environ["PRIORART_INDEX_DIR"] = str(index_dir)
    if cpc is not None:
        os.environ["PRIORART_CPC_TITLES"] = str(cpc)
    if api_key:
        os.environ["PRIORART_API_KEY"] = api_key
    if use_ray or ray_address:
        _serve_ray(index_dir, ray_address or "local", host, port, shard_replicas)
        return
    if workers > 1:
        uvicorn.run("service.api.main:app", host=host, port=port, workers=workers, log_level="info",
                    access_log=access_log)
    else:
        uvicorn.run(create_app(Settings()), host=host, port=port, log_level="info", access_log=access_log)


def _serve_ray(index_dir: Path, address: str, host: str, port: int, shard_replicas: int) -> None:
    from service.index.folder import is_sharded
    from service.settings import Settings

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
    serve.run(application(index_dir.resolve(), Settings(), shard_replicas=shard_replicas), name=APP_NAME,
              route_prefix="/", blocking=True)


def register(app: typer.Typer) -> None:
    """Add the ``serve`` command to the CLI."""
    app.command("serve")(serve_command)
