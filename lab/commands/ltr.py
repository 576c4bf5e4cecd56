"""``priorart-lab experiment ltr`` and ``ltr-bench``: the learning-to-rank experiment (lab/experiments/ltr.py) and
the query-time cost of its stages."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer


def experiment_ltr_command(
    data: Path = typer.Option(..., "--data", help="The shared data folder (with patents/ep and patents/us)."),
    out: Path | None = typer.Option(None, "--out", help="Folder for runs/, qrels.txt, ltr.json, ltr.md, "
                                    "orthogonality/."),
    task: str = typer.Option("xling", "--task", help="xling (de/fr first claims -> grant) or known-item."),
    folds: int = typer.Option(5, "--folds", min=3, help="Cross-fitting folds (test, dev = next fold, train)."),
    protocol: str = typer.Option("folds", "--protocol", help="folds (k-fold cross-fitting over the task's "
                                 "documents) or fixed (the fixed train/dev/test split)."),
    models: Path | None = typer.Option(None, "--models", help="Neural models folder (priorart train): adds dense, "
                                       "text and meta; uses its split.json (protocol fixed)."),
    topic_codes: bool = typer.Option(False, "--topic-codes/--no-topic-codes", help="Give the domain model the "
                                     "topic's IPC/CPC codes (in a known-item task: the target's own codes)."),
    known_item_n: int = typer.Option(200, "--known-item-n", min=1, help="Known-item topics to sample."),
    l1: str = typer.Option("3e-4,1e-3", "--l1", help="l1 grid of the word-pair model."),
    epochs: int = typer.Option(12, "--epochs", min=1, help="Maximum epochs of the word-pair model."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    progress: bool | None = typer.Option(None, "--progress/--no-progress", help="Progress bars on stderr."),
) -> None:
    """Single systems, every pairwise Borda and LinLearn on a real task, k-fold cross-fitted."""
    from lab.experiments import ExperimentError
    from lab.experiments.ltr import LtrExperimentSettings, format_report, run_ltr_experiment
    from training.ltr.wordpair import WordPairConfig

    try:
        grid = tuple(float(x) for x in l1.split(",") if x.strip())
        settings = LtrExperimentSettings(task=task, folds=folds, protocol=protocol,
                                         models_dir=str(models) if models else None,
                                         topic_codes=topic_codes, known_item_n=known_item_n,
                                         wordpair=WordPairConfig(l1_grid=grid, epochs=epochs))
        result = run_ltr_experiment(data, settings, out_dir=out, progress=progress)
    except (ExperimentError, ValueError, FileNotFoundError, RuntimeError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    if as_json:
        typer.echo(json.dumps(result.to_dict(), indent=1, sort_keys=True))
        return
    sys.stdout.write(format_report(result))
    if out is not None:
        typer.echo(f"runs, qrels, ltr.json, ltr.md and orthogonality/ written to {out}")


def bench_ltr_command(
    docs: int = typer.Option(5000, "--docs", min=10, help="Synthetic documents in the stores."),
    candidates: int = typer.Option(1000, "--candidates", min=1, help="Candidates scored per query."),
    repeats: int = typer.Option(20, "--repeats", min=1, help="Queries timed."),
    corpus: Path | None = typer.Option(None, "--corpus", help="Use this corpus JSONL instead of synthetic patents "
                                       "(rows drawn with replacement when it is smaller than --candidates)."),
) -> None:
    """Query-time cost of the word-pair and domain stages (ms per query, median), on synthetic patents."""
    from lab.experiments.ltr import bench_scoring

    typer.echo(json.dumps(bench_scoring(docs, candidates, repeats, corpus=corpus), indent=1))


def register(app: typer.Typer) -> None:
    """Add ``ltr`` and ``ltr-bench`` to the ``experiment`` group."""
    from lab.commands.experiment import experiment_app

    experiment_app.command("ltr")(experiment_ltr_command)
    experiment_app.command("ltr-bench")(bench_ltr_command)
