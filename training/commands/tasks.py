"""``priorart task known-item|xling CORPUS.jsonl -o DIR``: evaluation tasks (topics.jsonl + qrels.txt)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from service.corpus.record import PatentRecord
    from training.tasks import Task

task_app = typer.Typer(
    name="task",
    help="Build evaluation tasks (topics.jsonl + qrels.txt) from a corpus.",
    no_args_is_help=True,
)

_PROGRESS = typer.Option(None, "--progress/--no-progress", help="Progress bar on stderr (default: on a TTY).")


def _records(corpus: Path, progress: bool | None) -> Iterator[PatentRecord]:
    from tqdm import tqdm

    from service.corpus.jsonl import read_corpus

    if not corpus.is_file():
        raise FileNotFoundError(f"no such corpus file: {corpus}")
    yield from tqdm(
        read_corpus(corpus),
        desc="records",
        unit="rec",
        file=sys.stderr,
        disable=None if progress is None else not progress,
    )


def _finish(build: str, corpus: Path, out: Path, progress: bool | None, **kwargs: int) -> None:
    from service.corpus.jsonl import CorpusFormatError
    from training.tasks import known_item_task, xling_task

    try:
        records = _records(corpus, progress)
        task: Task = known_item_task(records, **kwargs) if build == "known-item" else xling_task(records)
        task.write(out)
    except (CorpusFormatError, ValueError, OSError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    typer.echo(
        f"{task.name}: wrote {len(task.topics)} topics and {sum(len(q) for q in task.qrels.values())} "
        f"judgments to {out}"
    )


@task_app.command("known-item")
def known_item(
    corpus: Path = typer.Argument(..., metavar="CORPUS.jsonl", help="Corpus JSONL (from `priorart ingest`)."),
    out: Path = typer.Option(..., "-o", "--output", help="Folder for topics.jsonl, qrels.txt, task.json."),
    n: int = typer.Option(200, "--n", min=1, help="Topics to sample (all eligible grants if fewer)."),
    seed: int = typer.Option(0, "--seed", help="Sampling seed."),
    progress: bool | None = _PROGRESS,
) -> None:
    """Title + abstract of US utility grants as queries; the grant itself is relevant.

    Search an index of claims and description only: `priorart build ... --fields claims,description`.
    """
    _finish("known-item", corpus, out, progress, n=n, seed=seed)


@task_app.command("xling")
def xling(
    corpus: Path = typer.Argument(..., metavar="CORPUS.jsonl", help="Corpus JSONL (from `priorart ingest`)."),
    out: Path = typer.Option(..., "-o", "--output", help="Folder for topics.jsonl, qrels.txt, task.json."),
    progress: bool | None = _PROGRESS,
) -> None:
    """German and French first claims of trilingual EP grants as queries; the grant itself is relevant."""
    _finish("xling", corpus, out, progress)


def register(app: typer.Typer) -> None:
    """Add the ``task`` command group to the CLI."""
    app.add_typer(task_app, name="task")
