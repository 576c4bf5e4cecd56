"""``priorart evaluate`` (topics through the index's engine, then measures) and ``priorart evaluate-run``.

Topics are ranked by the very method ``/search`` ranks with (:meth:`service.pipeline.Pipeline.run`, through
:func:`training.runs.run_topics`). ``--system`` picks what is measured:

- ``search`` (default): what ``/search`` returns: the pipeline, then the first documents ordered by their evidence
  (the index's learned ranker, or the passage rule), so the figure is the one a user of the server gets;
- ``fusion``: the fused order alone (the index's fusion weights, no evidence step: ``evidence_docs: 0``);
- ``bm25``: the candidate set ranked by the BM25 component: the first stage's ranking for every
  document it returned (documents found only by the dense stage follow, BM25 score 0);
- ``dense``: ranked by the dense component (the dense search's top for a flat index);
- ``rerank``: plain reranking by the joint text+meta ranker (``rerank-text``, ``rerank-meta``: one ranker).

A component that does not apply to a topic (no codes, no encoder for its language) is left out, as in
the service; when nothing weighted applies, the topic is ranked by BM25 and the count is reported.
Runs are written with score ``k - rank`` so that trec_eval (which breaks ties by document id) sees
exactly the engine's order.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    from training.evaluation.measures import EvalReport
    from training.evaluation.trec import Qrels


def _run_names(paths: Iterable[Path]) -> list[str]:
    paths = list(paths)
    names = [p.name for p in paths]
    if len(set(names)) < len(names):
        names = [str(p) for p in paths]
    return names


def _comparisons(
    report: EvalReport, others: Sequence[Path], qrels: Qrels, permutations: int, seed: int
) -> dict[str, dict[str, Any]]:
    from training.evaluation.measures import evaluate_run
    from training.evaluation.significance import compare_reports
    from training.evaluation.trec import read_run

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


def _evidence(engine: Any) -> str:
    """What orders the first documents /search returns in ``engine``'s index."""
    if engine.evidence.ranker is not None:
        return f"the learned ranker of the first {engine.evidence.ranker.docs}"
    return f"the passage rule on the first {engine.settings.evidence_docs}"


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
        codes: bool = typer.Option(True, "--codes/--no-codes", help="Pass the topics' IPC/CPC codes with the query."),
        filter_codes: bool = typer.Option(
            False, "--filter-codes", help="Keep only documents sharing an IPC/CPC subclass with the topic."
        ),
        compare: list[Path] | None = typer.Option(
            None, "--compare", help="Other run file(s): paired randomisation p-value per measure."
        ),
        permutations: int = typer.Option(10_000, "--permutations", min=1, help="Randomisation test permutations."),
        seed: int = typer.Option(0, "--seed", help="Seed of the randomisation test."),
        progress: bool | None = typer.Option(
            None, "--progress/--no-progress", help="Progress bar on stderr (default: on a TTY)."
        ),
        system: str = typer.Option(
            "search", "--system", help="search (what /search returns: the fused order, then the evidence step), "
            "fusion (the fused order alone), bm25, dense, rerank, rerank-text, rerank-meta."
        ),
        depth: int = typer.Option(1000, "--depth", min=1, help="Candidate depth of the pipeline."),
        device: str = typer.Option("auto", "--device", help="auto, cpu or cuda (neural stages)."),
    ) -> None:
        """Rank each topic as /search does (or as --system says) and evaluate (nDCG, MAP, MRR, P, recall, PRES,
        success)."""
        from service.engine import Engine
        from service.index.folder import IndexFormatError
        from service.settings import Settings
        from training.evaluation.measures import evaluate_run
        from training.evaluation.trec import TrecFormatError, read_qrels, read_topics, write_run

        try:
            topics = read_topics(topics_path)
            qrels = read_qrels(qrels_path)
            if not topics:
                raise ValueError(f"{topics_path} holds no topics")
            engine = Engine.load(index_dir, settings=Settings(index_dir=index_dir, device=device))
            from training.runs import SEARCH, run_topics

            try:
                run, times, how = run_topics(engine, topics, system=system, k=k, depth=depth,
                                             translate=not no_translate, codes=codes, filter_codes=filter_codes,
                                             progress=progress)
            finally:
                engine.close()
            if run_path is not None:
                write_run(run, run_path)
            report = evaluate_run(run, qrels)
            comparisons = _comparisons(report, compare or [], qrels, permutations, seed)
        except (TrecFormatError, IndexFormatError, ValueError, OSError) as exc:
            raise _fail(exc) from exc
        extra = {"run": str(run_path) if run_path else None, "k": k, "translate": not no_translate,
                 "system": f"{system}: {' -> '.join(engine.pipeline.names)}"
                           f"{' -> evidence (' + _evidence(engine) + ')' if system == SEARCH else ''} "
                           f"on {engine.device}", "depth": depth,
                 "fused as": dict(how),
                 "stage_ms_mean": {name: round(sum(v) / len(v), 2) for name, v in times.items()}}
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
        passages: bool = typer.Option(False, "--passages", help="A passage run and passage qrels (ids DOC/...): "
                                      "report MAP(D) and PREC(D) inside the relevant documents."),
        retrieved_only: bool = typer.Option(False, "--retrieved-only", help="With --passages: average over the "
                                            "relevant documents that have retrieved passages only."),
    ) -> None:
        """Evaluate an existing TREC run file against qrels (no index needed)."""
        from training.evaluation.measures import evaluate_run
        from training.evaluation.trec import TrecFormatError, read_qrels, read_run

        if passages:
            from training.evaluation.passages import evaluate_passages, read_passage_qrels, read_passage_run

            try:
                prep = evaluate_passages(read_passage_run(run_path), read_passage_qrels(qrels_path),
                                         retrieved_only=retrieved_only)
            except (TrecFormatError, ValueError, OSError) as exc:
                raise _fail(exc) from exc
            if as_json:
                typer.echo(json.dumps({"run": str(run_path), **prep.to_dict()}, indent=1))
            else:
                typer.echo(f"{run_path.name}: {prep.queries} queries, MAP(D) {prep.aggregate['map(d)']:.4f}, "
                           f"PREC(D) {prep.aggregate['prec(d)']:.4f}")
            return
        try:
            qrels = read_qrels(qrels_path)
            report = evaluate_run(read_run(run_path), qrels)
            comparisons = _comparisons(report, compare or [], qrels, permutations, seed)
        except (TrecFormatError, ValueError, OSError) as exc:
            raise _fail(exc) from exc
        _emit(report, comparisons, as_json, {"run": str(run_path)}, name=run_path.name)


__all__ = ["format_table", "register"]
