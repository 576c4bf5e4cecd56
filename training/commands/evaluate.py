"""``priorart evaluate`` (topics through the index's pipeline, then measures) and ``priorart evaluate-run``.

``--system`` picks what answers the topics (all through :class:`service.engine.Engine`'s stage objects):

- ``fusion`` (default): the index's full pipeline, as the service runs it: BM25 -> dense -> rerank ->
  weighted fusion with the learned weights when the index was built with ``--models``; an index without
  models is BM25 alone (its first stage, same ranking; the run keeps raw BM25 scores);
- ``bm25``: the first stage alone;
- ``dense``: the dense stage alone (FAISS top depth under the same filters);
- ``rerank``: BM25 + dense candidates ordered by the joint text+meta ranker alone (plain reranking;
  ``--rerank stacked|text`` for the other rankers).

Pipeline runs are written with score ``depth - rank`` so that trec_eval (which breaks ties by document
id) sees exactly the pipeline's order.
"""

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


SYSTEMS = ("fusion", "bm25", "dense", "rerank")
RERANK_SCORES = ("joint", "stacked", "text")


def system_pipeline(engine: Any, system: str, rerank: str = "joint") -> Any:
    """The :class:`service.pipeline.Pipeline` of ``system`` composed from a loaded Engine's stages."""
    from service.pipeline import FusionStep, Pipeline
    from service.retrieval.model_stages import RerankStep

    if system not in SYSTEMS:
        raise ValueError(f"unknown system {system!r}; choose from {', '.join(SYSTEMS)}")
    if rerank not in RERANK_SCORES:
        raise ValueError(f"unknown rerank score {rerank!r}; choose from {', '.join(RERANK_SCORES)}")
    if system == "fusion":
        return engine.pipeline
    stages = {s.name: s for s in engine.pipeline.stages}
    first = stages["bm25"]
    if system == "bm25":
        return Pipeline([first, FusionStep({"bm25": 1.0}, "bm25 only")])
    if "dense" not in stages:
        raise ValueError(f"system {system!r} needs the dense stage: build the index with --models")
    if system == "dense":
        return Pipeline([first, stages["dense"].with_only(True), FusionStep({"dense": 1.0}, "dense only")])
    if "rerank" not in stages:
        raise ValueError("system 'rerank' needs the rerank stage: build the index with --models")
    step = stages["rerank"]
    mode, use_meta = {"joint": ("joint", True), "stacked": ("stacked", True), "text": ("stacked", False)}[rerank]
    rr = RerankStep(step.models, step.encodings, mode=mode, use_meta=use_meta)
    weights = {"text": 1.0} if rerank != "stacked" else dict(zip(("text", "meta"), step.models.stacked_weights,
                                                                   strict=True))
    if not any(w > 0 for w in weights.values()):
        weights = {"text": 1.0}
    return Pipeline([first, stages["dense"], rr, FusionStep(weights, f"plain rerank ({rerank})")])


def search_topics_pipeline(
    pipeline: Any,
    topics: Sequence[Topic],
    *,
    k: int = 1000,
    depth: int = 1000,
    translate: bool = True,
    filter_codes: bool = False,
    progress: bool | None = None,
) -> tuple[Run, dict[str, list[float]]]:
    """Run every topic through a pipeline; returns the run (score ``k - rank``) and each stage's times (ms)."""
    from tqdm import tqdm

    from service.pipeline import Query

    if k < 1 or depth < 1:
        raise ValueError(f"k and depth must be >= 1, got k={k}, depth={depth}")
    run: dict[str, dict[str, float]] = {}
    times: dict[str, list[float]] = {}
    docs = pipeline.stages[0].fs.docs
    bar = tqdm(topics, desc="topics", unit="q", file=sys.stderr, disable=None if progress is None else not progress)
    for topic in bar:
        query = Query(text=topic.text, lang=topic.lang, codes=topic.codes,
                      code_level="subclass" if filter_codes and topic.codes else None, before=topic.before,
                      k=k, depth=max(depth, k), translate=translate)
        try:
            cands, trace = pipeline.run(query)
        except ValueError as exc:
            raise ValueError(f"topic {topic.qid}: {exc}") from exc
        n = len(cands.rows)
        run[topic.qid] = {docs.ids[int(r)]: float(n - i) for i, r in enumerate(cands.rows)}
        for t in trace:
            times.setdefault(t["name"], []).append(float(t["ms"]))
    return run, times


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
        system: str = typer.Option(
            "fusion", "--system", help="fusion (the index's full pipeline), bm25, dense or rerank (see module doc)."
        ),
        depth: int = typer.Option(1000, "--depth", min=1, max=1000, help="Candidate depth of the pipeline."),
        rerank: str = typer.Option("joint", "--rerank", help="Ranker of --system rerank: joint, stacked or text."),
        device: str = typer.Option("auto", "--device", help="auto, cpu or cuda (neural stages)."),
    ) -> None:
        """Run each topic through the index's pipeline and evaluate (nDCG, MAP, MRR, P, recall, PRES, success)."""
        from service.evaluation.measures import evaluate_run
        from service.evaluation.trec import TrecFormatError, read_qrels, read_topics, write_run

        stage_ms: dict[str, float] | None = None
        try:
            if system not in SYSTEMS:
                raise ValueError(f"unknown --system {system!r}; choose from {', '.join(SYSTEMS)}")
            topics = read_topics(topics_path)
            qrels = read_qrels(qrels_path)
            if not topics:
                raise ValueError(f"{topics_path} holds no topics")
            has_models = (index_dir / "models" / "meta.json").is_file()
            if system == "bm25" or (system == "fusion" and not has_models):
                from service.retrieval.first_stage import FirstStage

                stage = FirstStage.load(index_dir)
                run = search_topics(
                    stage, topics, k=k, translate=not no_translate, filter_codes=filter_codes, progress=progress
                )
                used = "bm25 (first stage)"
            else:
                from service.api.settings import Settings
                from service.engine import Engine

                engine = Engine.load(index_dir, settings=Settings(index_dir=index_dir, device=device))
                pipeline = system_pipeline(engine, system, rerank)
                run, times = search_topics_pipeline(
                    pipeline, topics, k=k, depth=depth, translate=not no_translate, filter_codes=filter_codes,
                    progress=progress,
                )
                stage_ms = {name: round(sum(v) / len(v), 2) for name, v in times.items()}
                used = f"{system}: {' -> '.join(pipeline.names)} on {engine.device}"
            if run_path is not None:
                write_run(run, run_path)
            report = evaluate_run(run, qrels)
            comparisons = _comparisons(report, compare or [], qrels, permutations, seed)
        except (TrecFormatError, ValueError, OSError) as exc:
            raise _fail(exc) from exc
        extra = {"run": str(run_path) if run_path else None, "k": k, "translate": not no_translate,
                 "system": used, "depth": depth if used != "bm25 (first stage)" else None,
                 "stage_ms_mean": stage_ms}
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
        from service.evaluation.measures import evaluate_run
        from service.evaluation.trec import TrecFormatError, read_qrels, read_run

        if passages:
            from service.evaluation.passages import evaluate_passages, read_passage_qrels, read_passage_run

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


__all__ = ["Searcher", "format_table", "register", "search_topics", "search_topics_pipeline", "system_pipeline"]
