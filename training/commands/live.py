"""``priorart add INDEX CORPUS``, ``priorart delete INDEX ID...``, ``priorart compact INDEX``: the live index
(service/index/live.py): publications added, replaced and withdrawn without a rebuild.

Exit status: 0 done; :data:`EXIT_UNCHANGED` (2) nothing was committed, the index is unchanged (the message says
why: a bad batch, unknown ids, a full disk...); :data:`EXIT_AFTER_COMMIT` (3) the change was committed (the
report is printed) and a step after it failed (a merge of segments after an add, the fsync of the manifest).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import typer

if TYPE_CHECKING:
    from service.corpus.record import PatentRecord
    from service.index.live import AfterCommitError, LiveReport

EXIT_UNCHANGED = 2
EXIT_AFTER_COMMIT = 3


def _records(corpus: Path) -> Iterable[PatentRecord]:
    """A corpus JSONL (.gz), or a folder / file of publication XML through the ingest readers, a publication found in
    several of its files (an office's XML and its MAREC or OPS full text) merged into one record as ``priorart ingest``
    merges them (:func:`training.ingest.merge.merge_all`; said on stderr)."""
    from service.corpus.jsonl import read_corpus

    name = corpus.name.lower()
    if corpus.is_file() and (name.endswith(".jsonl") or name.endswith(".jsonl.gz") or name.endswith(".json")):
        return read_corpus(corpus)
    if not corpus.exists():
        raise FileNotFoundError(f"{corpus} does not exist")
    from training.ingest import iter_records
    from training.ingest.merge import merge_all

    records, merged = merge_all(iter_records([corpus]))  # (a week's batch: held in memory, as the add holds it)
    for key, sources in merged.items():
        typer.echo(f"{key}: in {len(sources)} files ({', '.join(sources)}), merged into one record", err=True)
    return records


def _print(report: LiveReport, as_json: bool) -> None:
    if report.rolled_back:
        typer.echo(f"warning: {report.rolled_back}", err=True)
    if as_json:
        typer.echo(json.dumps(report.to_dict(), indent=1))
        return
    parts = [f"generation {report.previous} -> {report.generation}"]
    if report.added or report.replaced:
        parts.append(f"{report.added} added, {report.replaced} replaced")
    if report.deleted:
        parts.append(f"{report.deleted} deleted")
    merged = (" after compaction" if report.compacted else
              f" after {report.merges} merge{'s' if report.merges > 1 else ''}" if report.merges else "")
    parts.append(f"{report.segments} segment(s){merged}")
    parts.append(f"{report.live_documents} live documents, {report.seconds:.1f} s")
    typer.echo(", ".join(parts))


def _unchanged(exc: Exception) -> NoReturn:
    """Nothing was committed: the error, and that the index is unchanged (exit 2)."""
    text = str(exc)
    typer.echo(f"error: {text}" + ("" if "unchanged" in text else " (nothing was committed: the index is unchanged)"),
               err=True)
    raise typer.Exit(EXIT_UNCHANGED) from exc


def _committed(exc: AfterCommitError, as_json: bool) -> NoReturn:
    """Committed, then a later step failed: the report of what was committed, then the error (exit 3)."""
    _print(exc.report, as_json)
    typer.echo(f"error: {exc}", err=True)
    raise typer.Exit(EXIT_AFTER_COMMIT) from exc


def add_command(
    index: Path = typer.Argument(..., help="Index folder built by `priorart build`."),
    corpus: Path = typer.Argument(..., help="Records to add: corpus JSONL (.gz), or a folder of publication XML "
                                  "(EP, US, MAREC, OPS: a publication in several files becomes one record)."),
    device: str = typer.Option("auto", "--device", help="Where the document encoders run (index with models)."),
    max_segments: int = typer.Option(10, "--max-segments", min=1, help="Merge the newest segments when a "
                                     "generation would still hold more after the tiered merges."),
    merge_factor: int = typer.Option(4, "--merge-factor", min=0, help="Merge this many neighbouring "
                                     "segments of one size tier into one after the add (0: only --max-segments)."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as one JSON object."),
    progress: bool | None = typer.Option(None, "--progress/--no-progress", help="Progress bars on stderr."),
    watches: bool = typer.Option(True, "--watches/--no-watches", help="Evaluate the saved searches (priorart watch) "
                                 "against the new documents once the batch is committed."),
) -> None:
    """Add publications to an index as a new segment (an id already in the index is replaced)."""
    from service.corpus.jsonl import CorpusFormatError
    from service.index.live import AfterCommitError, LiveIndexError, add_documents
    from training.ingest.errors import DocumentError

    try:
        report = add_documents(index, _records(corpus), device=device, progress=progress, max_segments=max_segments,
                               merge_factor=merge_factor)
    except AfterCommitError as exc:
        _committed(exc, as_json)
    except (LiveIndexError, CorpusFormatError, DocumentError, FileNotFoundError) as exc:
        _unchanged(exc)
    _print(report, as_json)
    if watches:
        _evaluate_watches(index, as_json)


def _evaluate_watches(index: Path, as_json: bool) -> None:
    """The saved searches evaluated against the committed batch (training/commands/watch.py); a failure is said, with
    exit 3: the batch stays committed, and ``priorart watch run`` (or a server) evaluates them later."""
    from training.commands.watch import evaluate_watches

    try:
        done = evaluate_watches(index)
    except Exception as exc:  # noqa: BLE001 - committed: no failure now may read as a failed add
        typer.echo(f"error: the batch is committed; the watches were not evaluated ({type(exc).__name__}: {exc}); "
                   "`priorart watch run` evaluates them", err=True)
        raise typer.Exit(EXIT_AFTER_COMMIT) from exc
    if done is not None:
        typer.echo(done.line(), err=as_json)


def delete_command(
    index: Path = typer.Argument(..., help="Index folder."),
    ids: list[str] = typer.Argument(..., help="Publication ids to delete (exact, e.g. EP1234567B1)."),
    missing_ok: bool = typer.Option(False, "--missing-ok", help="Ignore ids that are not in the index."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as one JSON object."),
) -> None:
    """Withdraw publications: they disappear from every result, filter and /documents."""
    from service.index.live import AfterCommitError, LiveIndexError, delete_documents

    try:
        report = delete_documents(index, ids, missing_ok=missing_ok)
    except AfterCommitError as exc:
        _committed(exc, as_json)
    except LiveIndexError as exc:
        _unchanged(exc)
    _print(report, as_json)


def compact_command(
    index: Path = typer.Argument(..., help="Index folder."),
    device: str = typer.Option("auto", "--device", help="Unused for now (vectors are copied, not encoded)."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as one JSON object."),
    progress: bool | None = typer.Option(None, "--progress/--no-progress", help="Progress bars on stderr."),
) -> None:
    """Merge the segments of an index into one (deleted documents dropped)."""
    from service.index.live import AfterCommitError, LiveIndexError, compact

    try:
        report = compact(index, device=device, progress=progress)
    except AfterCommitError as exc:
        _committed(exc, as_json)
    except LiveIndexError as exc:
        _unchanged(exc)
    _print(report, as_json)


def register(app: typer.Typer) -> None:
    """Add the ``add``, ``delete`` and ``compact`` commands to the CLI."""
    app.command("add")(add_command)
    app.command("delete")(delete_command)
    app.command("compact")(compact_command)
