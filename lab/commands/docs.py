"""``priorart-lab docs results``: docs/RESULTS.md's and the README's measured tables rendered again from the result
files in docs/results/ (lab/docs_results.py); ``--check`` only says which document is out of date."""

from __future__ import annotations

from pathlib import Path

import typer

docs_app = typer.Typer(help="The documentation's generated parts.", no_args_is_help=True)


@docs_app.command("results")
def results_command(
    check: bool = typer.Option(False, "--check", help="Change nothing; exit 1 when a document differs from the "
                               "rendering of its result files."),
    results_dir: Path | None = typer.Option(None, "--results", help="Folder of the result files (default: "
                                            "docs/results/ of this checkout)."),
) -> None:
    """Render every ``<!-- BEGIN results NAME -->`` table of docs/RESULTS.md and README.md from docs/results/."""
    from lab.docs_results import DOCUMENTS, RESULTS_DIR, ResultsError, update

    try:
        stale = update(DOCUMENTS, results_dir or RESULTS_DIR, check=check)
    except (ResultsError, OSError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    for doc in stale:
        typer.echo(f"{doc}: {'out of date' if check else 'updated'}")
    if check and stale:
        typer.echo("run `priorart-lab docs results` to render them from docs/results/", err=True)
        raise typer.Exit(1)
    if not stale:
        typer.echo("every table is the rendering of its result file")


def register(app: typer.Typer) -> None:
    """Add the ``docs`` command group to the CLI."""
    app.add_typer(docs_app, name="docs")
