"""``priorart evaluate`` (topics through the first stage, then measures) and ``priorart evaluate-run``."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import typer

if TYPE_CHECKING:
    from service.evaluation.measures import EvalReport
    from service.evaluation.trec import Qrels, Run, Topic


class Searcher(Protocol):
    """What :func:`search_topics` needs: ``FirstStage.search`` (a result with ``hits``, or a hit list;
    each hit has ``doc_id`` and ``score``)."""

    def search(
        self,
        query: str,
        *,
        lang: str | None = ...,
        k: int = ...,
        codes: Sequence[str] = ...,
        before: date | None = ...,
        translate: bool = ...,
    ) -> Any: ...


def search_topics(
    searcher: Searcher,
    topics: Sequence[Topic],
    *,
    k: int = 1000,
    translate: bool = True,
    filter_codes: bool = False,
    progress: bool | None = None,
) -> Run:
    """Run every topic through ``searcher`` and collect a run (query id -> doc id -> score).

    ``filter_codes`` passes the topic's IPC/CPC codes as a classification filter; ``before`` is
    always passed when the topic has it. ``progress=None`` shows a bar only on a terminal.
    """
    from tqdm import tqdm

    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    run: dict[str, dict[str, float]] = {}
    bar = tqdm(topics, desc="topics", unit="q", file=sys.stderr, disable=None if progress is None else not progress)
    for topic in bar:
        try:
            result = searcher.search(
                topic.text,
                lang=topic.lang,
                k=k,
                codes=topic.codes if filter_codes else (),
                before=topic.before,
                translate=translate,
            )
        except ValueError as exc:
            raise ValueError(f"topic {topic.qid}: {exc}") from exc
        scores: dict[str, float] = {}
        for hit in getattr(result, "hits", result):
            doc_id = str(hit.doc_id)
            if doc_id not in scores:  # first (best) occurrence wins
                scores[doc_id] = float(hit.score)
        run[topic.qid] = scores
    return run


def _run_names(paths: Iterable[Path]) -> list[str]:
    paths = list(paths)
    names = [p.name for p in paths]
    if len(set(names)) < len(names):
        names = [str(p) for p in paths]
    return names


def _comparisons(
    report: EvalReport, others: Sequence[Path], qrels: Qrels, permutations: int, seed: int
) -> dict[str, dict[str, Any]]:
    from service.evaluation.measures import evaluate_run
    from service.evaluation.significance import compare_reports
    from service.evaluation.trec import read_run

    out: dict[str, dict[str, Any]] = {}
    for name, path in zip(_run_names(others), others, strict=True):
        other = evaluate_run(read_run(path), qrels)
        out[name] = {
            "measures": other.to_dict(),
            "p": compare_reports(report, other, permutations=permutations, seed=seed),
        }
    return out


def format_table(report: EvalReport, comparisons: dict[str, dict[str, Any]] | None = None, *, name: str = "run") -> str:
    """A plain-text table: one row per measure; with comparisons, each other run's value and p-value."""
    comparisons = comparisons or {}
    header = [f"{'measure':<12}", f"{name:>12}"]
    for other in comparisons:
        header += [f"{other[-20:]:>20}", f"{'p':>8}"]
    lines = ["  ".join(header)]
    counts = [f"{'queries':<12}", f"{report.queries:>12d}"]
    for cmp in comparisons.values():
        counts += [f"{cmp['measures']['queries']:>20d}", f"{'':>8}"]
    lines.append("  ".join(counts))
    for measure, value in report.aggregate.items():
        row = [f"{measure:<12}", f"{value:>12.4f}"]
        for cmp in comparisons.values():
            row += [f"{cmp['measures'][measure]:>20.4f}", f"{cmp['p'][measure]:>8.4f}"]
        lines.append("  ".join(row))
    return "\n".join(lines)


def _emit(
    report: EvalReport, comparisons: dict[str, dict[str, Any]], as_json: bool, extra: dict[str, Any], name: str = "run"
) -> None:
    if as_json:
        obj: dict[str, Any] = {**report.to_dict(), **extra}
        if comparisons:
            obj["compare"] = comparisons
        typer.echo(json.dumps(obj, sort_keys=False))
    else:
        typer.echo(format_table(report, comparisons, name=name))
        for key, value in extra.items():
            if value is not None:
                typer.echo(f"{key}: {value}")


def _fail(exc: Exception) -> typer.Exit:
    typer.echo(f"error: {exc}", err=True)
    return typer.Exit(code=2)


def register(app: typer.Typer) -> None:
    """Add ``evaluate`` and ``evaluate-run`` to the CLI."""

    @app.command("evaluate")
    def evaluate(
        index_dir: Path = typer.Argument(..., help="Index folder built by `priorart build`."),
        topics_path: Path = typer.Argument(..., metavar="TOPICS.jsonl", help="Topics (JSON lines)."),
        qrels_path: Path = typer.Argument(..., metavar="QRELS.txt", help="TREC qrels."),
        as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of a table."),
        run_path: Path | None = typer.Option(None, "--run", help="Write the TREC run file here."),
        k: int = typer.Option(1000, "--k", min=1, help="Documents retrieved per topic."),
        no_translate: bool = typer.Option(False, "--no-translate", help="Do not translate de/fr queries (PSQ)."),
        filter_codes: bool = typer.Option(
            False, "--filter-codes", help="Keep only documents sharing an IPC/CPC code with the topic."
        ),
        compare: list[Path] | None = typer.Option(
            None, "--compare", help="Other run file(s): paired randomisation p-value per measure."
        ),
        permutations: int = typer.Option(10_000, "--permutations", min=1, help="Randomisation test permutations."),
        seed: int = typer.Option(0, "--seed", help="Seed of the randomisation test."),
        progress: bool | None = typer.Option(
            None, "--progress/--no-progress", help="Progress bar on stderr (default: on a TTY)."
        ),
    ) -> None:
        """Run each topic through the first stage and evaluate (nDCG, MAP, MRR, P, recall, PRES, success)."""
        from service.evaluation.measures import evaluate_run
        from service.evaluation.trec import TrecFormatError, read_qrels, read_topics, write_run
        from service.retrieval.first_stage import FirstStage

        try:
            topics = read_topics(topics_path)
            qrels = read_qrels(qrels_path)
            if not topics:
                raise ValueError(f"{topics_path} holds no topics")
            stage = FirstStage.load(index_dir)
            run = search_topics(
                stage, topics, k=k, translate=not no_translate, filter_codes=filter_codes, progress=progress
            )
            if run_path is not None:
                write_run(run, run_path)
            report = evaluate_run(run, qrels)
            comparisons = _comparisons(report, compare or [], qrels, permutations, seed)
        except (TrecFormatError, ValueError, OSError) as exc:
            raise _fail(exc) from exc
        extra = {"run": str(run_path) if run_path else None, "k": k, "translate": not no_translate}
        _emit(report, comparisons, as_json, extra)

    @app.command("evaluate-run")
    def evaluate_run_file(
        run_path: Path = typer.Argument(..., metavar="RUN.trec", help="TREC run file."),
        qrels_path: Path = typer.Argument(..., metavar="QRELS.txt", help="TREC qrels."),
        as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of a table."),
        compare: list[Path] | None = typer.Option(
            None, "--compare", help="Other run file(s): paired randomisation p-value per measure."
        ),
        permutations: int = typer.Option(10_000, "--permutations", min=1, help="Randomisation test permutations."),
        seed: int = typer.Option(0, "--seed", help="Seed of the randomisation test."),
    ) -> None:
        """Evaluate an existing TREC run file against qrels (no index needed)."""
        from service.evaluation.measures import evaluate_run
        from service.evaluation.trec import TrecFormatError, read_qrels, read_run

        try:
            qrels = read_qrels(qrels_path)
            report = evaluate_run(read_run(run_path), qrels)
            comparisons = _comparisons(report, compare or [], qrels, permutations, seed)
        except (TrecFormatError, ValueError, OSError) as exc:
            raise _fail(exc) from exc
        _emit(report, comparisons, as_json, {"run": str(run_path)}, name=run_path.name)


__all__ = ["Searcher", "format_table", "register", "search_topics"]
