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
    if workers > 1:
        uvicorn.run("service.api.main:app", host=host, port=port, workers=workers, log_level="info")
    else:
        uvicorn.run(create_app(Settings()), host=host, port=port, log_level="info")


def register(app: typer.Typer) -> None:
    """Add the ``serve`` command to the CLI."""
    app.command("serve")(serve_command)
