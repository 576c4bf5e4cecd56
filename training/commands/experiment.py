"""``priorart experiment ...``: experiments over the real data. ``xling``: German/French first claims of the
trilingual EP grants searched in an English-only index, with and without query translation."""

from __future__ import annotations

import json
from pathlib import Path

import typer

experiment_app = typer.Typer(help="Experiments over the real data (see training/experiments/).", no_args_is_help=True)


@experiment_app.command("xling")
def xling_command(
    data: Path = typer.Option(..., "--data", help="The shared data folder (with patents/ep and patents/us)."),
    folds: int = typer.Option(
        5,
        "--folds",
        help="Cross-fitting folds: the aligned-claims model translating a "
        "topic is trained without the grants of its fold.",
    ),
    out: Path | None = typer.Option(None, "--out", help="Folder for runs/xling-<row>.run, qrels.txt, xling.json."),
    depth: int = typer.Option(100, "--depth", help="Documents retrieved per topic."),
    max_query_terms: int | None = typer.Option(
        None, "--max-query-terms", help="Query reduction (first stage default 100; 0 keeps all terms)."
    ),
    lam: float = typer.Option(0.5, "--lambda", help="Weight of the aligned model in the 'both' row."),
    self_weight: float = typer.Option(
        0.1,
        "--self-weight",
        help="Self-translation probability for source terms "
        "that are English index terms too (cognates); 0 turns it off.",
    ),
    target_filter: bool = typer.Option(
        False,
        "--target-filter/--no-target-filter",
        help="Drop dictionary translations that do not occur in the English index.",
    ),
    max_alternatives: int = typer.Option(5, "--max-alternatives", help="Query-time pruning: translations per term."),
    cumulative: float = typer.Option(0.9, "--cumulative", help="Query-time pruning: probability mass kept."),
    function_words: bool = typer.Option(
        True,
        "--function-words/--no-function-words",
        help="Train the alignment model with stop words kept and drop rows that mostly align to them.",
    ),
    words_only: bool = typer.Option(
        False,
        "--words-only",
        help="Diagnostic: drop numbers, reference signs and codes "
        "from the topics (strings that match without translation).",
    ),
    reference_signs: bool = typer.Option(
        False,
        "--reference-signs/--no-reference-signs",
        help="Keep drawing reference signs like (12) in the topics (default: stripped, as a real query "
        "never shares them with the prior art; a grant and its own translation always do).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON instead of a table."),
    progress: bool | None = typer.Option(None, "--progress/--no-progress", help="Progress bars on stderr."),
) -> None:
    """Cross-lingual known-item search: de/fr first claims -> their grant in an English-only index.

    Rows: none (untranslated terms), dict (FreeDict), aligned (IBM-1 on aligned claims, k-fold
    cross-fitted), both (interpolated). Reports MRR, success@1, success@10, all and per language.
    """
    from training.experiments.xling import ExperimentError, XlingSettings, format_table, run_xling

    try:
        settings = XlingSettings(
            folds=folds,
            depth=depth,
            max_query_terms=max_query_terms,
            lam=lam,
            self_weight=self_weight,
            target_filter=target_filter,
            max_alternatives=max_alternatives,
            cumulative=cumulative,
            words_only=words_only,
            reference_signs=reference_signs,
            function_words=function_words,
        )
        result = run_xling(data, settings, out_dir=out, progress=progress)
    except (ExperimentError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    if as_json:
        typer.echo(json.dumps(result.to_dict(), indent=1, sort_keys=True))
        return
    typer.echo(format_table(result))
    if out is not None:
        typer.echo(f"runs, qrels and xling.json written to {out}")


def register(app: typer.Typer) -> None:
    """Add the ``experiment`` command group to the CLI."""
    app.add_typer(experiment_app, name="experiment")
