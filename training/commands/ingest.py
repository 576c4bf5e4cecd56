"""``priorart ingest PATH... -o CORPUS.jsonl``: patent XML (EP, USPTO all generations, MAREC, OPS) or JSONL -> corpus
JSONL."""

from __future__ import annotations

import json
from pathlib import Path

import typer


def ingest_command(
    paths: list[Path] = typer.Argument(
        ..., help="Files or directories (walked recursively) of EP/USPTO/MAREC/OPS XML or JSONL; .gz is fine."
    ),
    output: Path = typer.Option(..., "-o", "--output", help="Corpus JSONL to write (.gz compresses)."),
    json_summary: Path | None = typer.Option(None, "--json-summary", help="Also write the summary as JSON here."),
    progress: bool | None = typer.Option(
        None, "--progress/--no-progress", help="Progress bar on stderr (default: on a TTY)."
    ),
) -> None:
    """Read patent publications and write one normalised record per line, streaming (one record per publication:
    the same publication read from several sources is merged)."""
    from training.ingest import IngestInputError, IngestStats, ingest

    stats = IngestStats()
    try:
        ingest(paths, output, progress=progress, stats=stats)
    except IngestInputError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    typer.echo(stats.format_table())
    typer.echo(f"wrote {stats.written} records to {output}")
    if json_summary is not None:
        json_summary.parent.mkdir(parents=True, exist_ok=True)
        json_summary.write_text(json.dumps(stats.to_dict(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    if stats.records == 0:
        typer.echo("error: no usable record was read", err=True)
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add the ``ingest`` command to the CLI."""
    app.command("ingest")(ingest_command)
