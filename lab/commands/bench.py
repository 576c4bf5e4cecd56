"""``priorart-lab bench ...``: benchmarks that print measured figures (the work is in :mod:`lab.benchmarks`)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from training.commands import exit_2_on

bench_app = typer.Typer(help="Benchmarks that print measured figures.", no_args_is_help=True)


def _emit(report: dict[str, Any], out: Path | None, as_json: bool, fmt: Callable[[dict[str, Any]], str]) -> None:
    """A bench's report: written with the commit and the command to ``out`` when given, then printed (JSON or
    ``fmt``'s text)."""
    from lab.experiments.output import command_line, write_result

    if out is not None:
        write_result(report, out, command=command_line())
    typer.echo(json.dumps(report, indent=1) if as_json else fmt(report))

@bench_app.command("first-stage")
def first_stage_command(
    sizes: str = typer.Option("10000,100000", "--sizes", help="Comma-separated corpus sizes."),
    queries: int = typer.Option(200, "--queries", help="Queries per size (texts of sampled documents)."),
    bm25_queries: int | None = typer.Option(
        None, "--bm25-queries", help="Queries timed on rank-bm25 (default: all up to 20k docs, 5 above)."
    ),
    peers: str = typer.Option(
        "rank-bm25,bm25s,bm25s-numba,pisa,pisa-core", "--peers",
        help="Engines timed beside ours on the same tokens (skipped with the reason when not installed).",
    ),
    k: int = typer.Option(10, "--k", help="Rows each engine returns per query (the pipeline's first stage: 1000)."),
    seed: int = typer.Option(13, "--seed"),
    query_text: str = typer.Option(
        "first-claim", "--query-text", help="Query from each sampled document: first-claim, abstract or claims."
    ),
    index_langs: str = typer.Option("en,de,fr", "--index-langs", help="Languages the timed build indexes."),
    work_dir: Path | None = typer.Option(None, "--work-dir", help="Where the temporary corpus/index go."),
    cache_dir: Path | None = typer.Option(
        None, "--cache-dir", help="Keep corpus, index and tokens per size here and reuse them on the next run."
    ),
    rounds: int = typer.Option(3, "--rounds", min=1, help="Warm rounds: each engine's queries in a block, per round."),
    as_json: bool = typer.Option(False, "--json", help="Print the figures as JSON."),
) -> None:
    """Index build docs/s and peak memory; first-stage p50/p99 against rank-bm25, bm25s and PISA on the same
    tokens, with top-10 overlap (engines interleaved query by query, and warm: each in a block)."""
    from lab.benchmarks.first_stage import QUERY_TEXTS, format_table, run_first_stage_bench
    from lab.benchmarks.peers import PEER_NAMES

    try:
        size_list = [int(s) for s in sizes.split(",") if s.strip()]
    except ValueError as exc:
        raise typer.BadParameter(f"--sizes must be integers, got {sizes!r}") from exc
    if not size_list or min(size_list) < 10 or queries < 1:
        raise typer.BadParameter("sizes must be >= 10 and --queries >= 1")
    if query_text not in QUERY_TEXTS:
        raise typer.BadParameter(f"--query-text must be one of {', '.join(QUERY_TEXTS)}, got {query_text!r}")
    peer_list = [p.strip() for p in peers.split(",") if p.strip()]
    unknown = [p for p in peer_list if p not in PEER_NAMES]
    if unknown:
        raise typer.BadParameter(f"unknown peer(s) {', '.join(unknown)}; valid: {', '.join(PEER_NAMES)}")
    if k < 10:
        raise typer.BadParameter(f"--k must be >= 10, got {k}")
    rows = []
    for n in size_list:
        timed = bm25_queries if bm25_queries is not None else (queries if n <= 20_000 else 5)
        rows += run_first_stage_bench(
            [n],
            queries,
            bm25_queries=timed,
            seed=seed,
            index_langs=index_langs,
            k=k,
            work_dir=work_dir,
            cache_dir=cache_dir,
            peers=peer_list,
            query_text=query_text,
            rounds=rounds,
        )
    typer.echo(json.dumps(rows, indent=1) if as_json else format_table(rows))


@bench_app.command("service")
def service_command(
    index_dir: Path = typer.Argument(..., help="Index folder (built with --models for the full pipeline)."),
    queries: int = typer.Option(200, "--queries", help="Queries to time (English first claims of the index)."),
    words: int = typer.Option(60, "--words", help="The first claims' first words taken as the query (0: the whole "
                              "claim)."),
    depth: int = typer.Option(1000, "--depth", help="Candidates per query (reranked when the index has models)."),
    http: bool = typer.Option(True, "--http/--no-http", help="Also time POST /search on a live priorart serve."),
    passages: bool = typer.Option(False, "--passages/--no-passages", help="Also time /passages (same queries)."),
    compare_no_dense: bool = typer.Option(False, "--compare-no-dense", help="Also time every query, interleaved, on "
                                          "the same index without its dense stage."),
    compare_fused: bool = typer.Option(False, "--compare-fused", help="Also time every query, interleaved, in the "
                                       "fused order (evidence_docs 0: without the evidence step)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Per-stage latency, end-to-end p50/p99 in-process and over HTTP, and the API overhead."""
    from lab.benchmarks.service import format_report, run_service_bench

    report = run_service_bench(index_dir, queries=queries, depth=depth, http=http, passages=passages,
                               compare_no_dense=compare_no_dense, compare_fused=compare_fused, words=words)
    typer.echo(json.dumps(report, indent=1) if as_json else format_report(report))


@bench_app.command("passages")
def passages_command(
    index_dir: Path = typer.Argument(..., help="Index folder built by `priorart build` (with its passage index)."),
    queries: int = typer.Option(100, "--queries", help="Queries to time (English first claims of the index)."),
    depth: int = typer.Option(1000, "--depth", help="Candidate documents whose passages are ranked."),
    k: int = typer.Option(10, "--k", help="Passages returned per query."),
    reference_queries: int = typer.Option(
        10, "--reference-queries", help="Queries also run through today's per-record implementation (slow)."
    ),
    variant: str = typer.Option("qsf_passage_propagate", "--variant", help="QSF variant."),
    seed: int = typer.Option(0, "--seed"),
    http: bool = typer.Option(True, "--http/--no-http", help="Also time POST /passages on a fresh priorart serve."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """/passages from a cold process: p50/p99 per stage, end to end and over HTTP; today's implementation on the
    same candidates in the same run (speed-up, identical hits)."""
    from lab.benchmarks.passages import format_report, run_passage_bench

    with exit_2_on(ValueError, RuntimeError):
        report = run_passage_bench(index_dir, queries=queries, depth=depth, k=k, reference_queries=reference_queries,
                                   variant=variant, seed=seed, http=http)
    typer.echo(json.dumps(report, indent=1) if as_json else format_report(report))


@bench_app.command("load")
def load_command(
    corpus: Path = typer.Argument(..., help="Corpus JSONL (e.g. `priorart ingest ../shared/data/patents`)."),
    baseline: str = typer.Option("f18968c^1", "--baseline", help="The commit to compare with (default: the code "
                                 "before the passage index, issue 14's 'today'); 'none': no other commit (with "
                                 "--compare-settings)."),
    compare_settings: str | None = typer.Option(
        None, "--compare-settings", help="A JSON object of /search fields, e.g. '{\"evidence_docs\": 0}': this code "
        "is also run with them in every /search body, in the same rounds (the default path against the setting)."),
    users: int = typer.Option(20, "--users", min=1, help="Locust users (no think time)."),
    seconds: int = typer.Option(30, "--seconds", min=1, help="Length of each run."),
    rounds: int = typer.Option(2, "--rounds", min=1, help="Runs per code, alternating."),
    work_dir: Path | None = typer.Option(None, "--work-dir", help="Keep the worktree, indexes and CSVs here (made "
                                         "with its parents where missing)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """The locust mix at capacity against this code and a baseline commit's, each its own build of the corpus, and
    (--compare-settings) this code with other /search settings, served one after the other: requests/s, failures,
    p50/p99, the throughput ratios; the report names what was compared."""
    from lab.benchmarks.load import format_report, make_work_dir, parse_settings, run_load_bench

    if not corpus.is_file():
        typer.echo(f"error: {corpus} is not a corpus file (JSONL); make one with `priorart ingest` or `priorart synth`",
                   err=True)
        raise typer.Exit(2)
    with exit_2_on(RuntimeError, ValueError):
        settings = parse_settings(compare_settings)
        other = None if baseline.strip().lower() == "none" else baseline
        if other is None and not settings:
            raise ValueError("--baseline none compares nothing without --compare-settings")
        if work_dir is not None:
            make_work_dir(work_dir)
        report = run_load_bench(corpus.resolve(), baseline=other, users=users, seconds=seconds, rounds=rounds,
                                work_dir=work_dir, settings=settings or None)
    typer.echo(json.dumps(report, indent=1) if as_json else format_report(report))


@bench_app.command("add")
def add_command(
    n_base: int = typer.Option(100_000, "--n-base", help="Synthetic documents in the index before the add."),
    n_add: int = typer.Option(10_000, "--n-add", help="Synthetic documents added."),
    segments: int = typer.Option(10, "--segments", help="Segments of the many-segment search timing."),
    queries: int = typer.Option(600, "--queries", help="Title queries timed (en/de/fr)."),
    rounds: int = typer.Option(3, "--rounds", min=1, help="Passes over the queries (each index timed per query)."),
    seed: int = typer.Option(0, "--seed"),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
    work_dir: Path | None = typer.Option(None, "--work", help="Build the indexes here and keep them (a later run with "
                                         "the same sizes times them again, with the first run's build figures)."),
    out: Path | None = typer.Option(None, "--out", "-o", help="Also write the result (JSON, with the commit and the "
                                    "command) here."),
) -> None:
    """Live index: time to add documents vs a full rebuild, search p50/p99 with many segments vs one."""
    from lab.benchmarks.live import format_report, run_add_bench

    report = run_add_bench(n_base, n_add, segments=segments, queries=queries, rounds=rounds, seed=seed,
                           work_dir=work_dir)
    _emit(report, out, as_json, format_report)


@bench_app.command("open")
def open_command(
    n_base: int = typer.Option(100_000, "--n-base", help="Synthetic documents in the index before the add."),
    share: float = typer.Option(0.01, "--share", min=0.0001, max=1.0, help="Share of n-base added (one add)."),
    rounds: int = typer.Option(3, "--rounds", min=1, help="Opens of each index, alternating, each a fresh process."),
    work_dir: Path | None = typer.Option(None, "--work", help="Build the indexes here and keep them (a later run "
                                         "with the same --n-base reuses them)."),
    index: Path | None = typer.Option(None, "--index", help="An existing index instead of the synthetic builds: "
                                      "--corpus is added to a hard-linked copy of it in --work, and it is the "
                                      "one-segment reference (an index too large to build twice)."),
    corpus: Path | None = typer.Option(None, "--corpus", help="Corpus JSONL added to --index."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
    out: Path | None = typer.Option(None, "--out", "-o", help="Also write the result (JSON, with the commit and the "
                                    "command) here."),
) -> None:
    """Live index: open a generation after a 1 % add against the compacted index (time, peak memory, bytes written
    at open), each in a fresh process."""
    from lab.benchmarks.live import format_open_report, run_open_bench

    if (index is None) != (corpus is None) or (index is not None and work_dir is None):
        raise typer.BadParameter("--index, --corpus and --work go together")
    with exit_2_on(RuntimeError):
        report = run_open_bench(n_base, share, rounds=rounds, work_dir=work_dir, index=index, corpus=corpus)
    _emit(report, out, as_json, format_open_report)


@bench_app.command("reload")
def reload_command(
    index: Path = typer.Argument(..., help="An index folder (copied as hard links into --work; left as it is)."),
    corpus: Path = typer.Argument(..., help="Corpus JSONL of the documents to add (e.g. 1 % of the index)."),
    work: Path = typer.Option(..., "--work", help="Where the linked copy of the index goes."),
    adds: int = typer.Option(2, "--adds", min=1, help="Adds the corpus is split into (the first reloads from the index "
                             "as given, the next from a generation of segments)."),
    queries: int = typer.Option(100, "--queries", min=1, help="First claims of the added documents searched."),
    interval: float = typer.Option(2.0, "--reload-interval", min=0.1, help="The server's reload_interval_s."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
    out: Path | None = typer.Option(None, "--out", "-o", help="Also write the result (JSON, with the commit and the "
                                    "command) here."),
) -> None:
    """Live index: time from `priorart add`'s commit to the first answer from the new generation in a running server,
    its memory, and /search latency before and after."""
    from lab.benchmarks.live import format_reload_report, run_reload_bench

    with exit_2_on(RuntimeError):
        report = run_reload_bench(index, corpus, work, adds=adds, queries=queries, reload_interval_s=interval)
    _emit(report, out, as_json, format_reload_report)


@bench_app.command("merges")
def merges_command(
    n_base: int = typer.Option(2_000, "--n-base", help="Synthetic documents in the index before the adds."),
    batch: int = typer.Option(25, "--batch", min=1, help="Documents per add."),
    adds: int = typer.Option(40, "--adds", min=1, help="Adds in turn."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
    out: Path | None = typer.Option(None, "--out", "-o", help="Also write the result (JSON, with the commit and the "
                                    "command) here."),
) -> None:
    """Live index: documents written over a run of adds with add's tiered merges against compacting everything
    past 10 segments (the rule before them)."""
    from lab.benchmarks.live import format_merge_report, run_merge_bench

    report = run_merge_bench(n_base, batch, adds)
    _emit(report, out, as_json, format_merge_report)


@bench_app.command("start")
def start_command(
    data: Path | None = typer.Option(None, "--data", help="Real data folder (its patents/ are ingested and built); "
                                     "default ../shared/data beside the repository when it exists."),
    sizes: str = typer.Option("100000", "--sizes", help="Synthetic index sizes (comma-separated; '' for none)."),
    index: list[Path] = typer.Option([], "--index", help="Another index folder to time (repeatable)."),
    cache_dir: Path = typer.Option(Path.home() / ".cache" / "priorart" / "bench-start", "--cache-dir",
                                   help="Keeps the fresh installation, its kernel cache, the corpora and indexes for "
                                   "the next run."),
    rounds: int = typer.Option(3, "--rounds", min=1, help="Cold and warm starts per index (alternating)."),
    before: bool = typer.Option(True, "--before/--no-before", help="Also one start without the kernel cache "
                                "(compiled at load, as before issue 35: 30-60 s)."),
    current_env: bool = typer.Option(False, "--current-env", help="Time this environment's priorart instead of a "
                                     "fresh install of the wheel with the service extra."),
    as_json: bool = typer.Option(False, "--json", help="Print every start as JSON."),
) -> None:
    """Cold and warm start of `priorart serve` (spawn to /ready 200) with its phases, on the real index and on
    synthetic ones, as the image installs it (docs/DEPLOYMENT.md, Start-up)."""
    import sys

    from lab.benchmarks.install import InstallError, fresh_install
    from lab.benchmarks.start import (
        as_json as starts_json,
    )
    from lab.benchmarks.start import (
        documents,
        fill_kernel_cache,
        format_table,
        load_average,
        real_index,
        run_start_bench,
        summary,
        synthetic_index,
    )

    def say(line: str) -> None:
        typer.echo(line, err=True)

    try:
        size_list = [int(s) for s in sizes.split(",") if s.strip()]
    except ValueError as exc:
        raise typer.BadParameter(f"--sizes must be integers, got {sizes!r}") from exc
    cache_dir = cache_dir.absolute()
    if data is None:
        default = Path(__file__).resolve().parents[2].parent / "shared" / "data"
        data = default if (default / "patents").is_dir() else None
    elif not (data / "patents").is_dir():
        raise typer.BadParameter(f"{data} has no patents/ folder")
    if current_env:
        python = Path(sys.executable)
        priorart, where = python.parent / "priorart", f"this environment ({sys.prefix})"
    else:
        say("installing the wheel with the service extra into a fresh environment (offline) ...")
        with exit_2_on(InstallError):
            inst = fresh_install(cache_dir / "install" / "venv", cache_dir / "install")
        python, priorart = inst.python, inst.priorart
        where = f"a fresh venv of {inst.wheel.name}[service] ({len(inst.packages)} distributions, no torch)"
    kernel_cache = cache_dir / ("kernel-cache-current" if current_env else "kernel-cache")
    say(f"kernel cache: {fill_kernel_cache(priorart, python, kernel_cache)}")
    indexes: list[tuple[str, Path]] = []
    if data is not None:
        idx = real_index(data, cache_dir, say)
        indexes.append((f"real data ({documents(idx)} documents)", idx))
    indexes += [(f"synthetic {n:,}", synthetic_index(n, cache_dir, say)) for n in size_list]
    indexes += [(str(p), p) for p in index]
    load_before = load_average()
    starts = run_start_bench(indexes, priorart, python, kernel_cache, rounds=rounds, before=before, log=say)
    if as_json:
        typer.echo(json.dumps(starts_json(starts), indent=1))
        return
    typer.echo(f"priorart serve, spawn to GET /ready 200: {where}; load average {load_before} before, "
               f"{load_average()} after; {os.cpu_count()} CPUs")
    typer.echo(format_table(summary(starts)))


@bench_app.command("demo")
def demo_command(
    args: list[str] = typer.Argument(None, help="Arguments for `priorart demo` (default: none, the README's run: 5,000 "
                                     "synthetic patents)."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show the demo's own output."),
    out: Path | None = typer.Option(None, "--out", "-o", help="Also write the report (JSON) there."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """The README's demo as a new machine runs it (empty caches), timed to its `ready` line, beside the time the
    README quotes (docs/RESULTS.md, The test suite and the demo)."""
    from lab.benchmarks.demo import demo_report, format_report

    report = demo_report(list(args or []), log=(lambda line: typer.echo(line, err=True)) if verbose else lambda _: None)
    _emit(report, out, as_json, format_report)
    if report["ready_s"] is None:
        raise typer.Exit(1)


@bench_app.command("dump")
def dump_command(
    index: Path = typer.Argument(..., help="Index folder built from the shared data (`priorart build`)."),
    data: Path = typer.Option(..., "--data", help="The shared data folder (the topics are read from it)."),
    out: Path = typer.Option(..., "--out", "-o", help="Where to write the dump (JSON)."),
    compare_to: Path | None = typer.Option(None, "--compare", help="A dump to compare with: prints the topics "
                                           "whose results differ; exit 1 when any does."),
    k: int = typer.Option(100, "--k", help="Documents per /search."),
) -> None:
    """The results of every real-data topic (/search top k, /passages of every 5th), to show that a change of the
    code changes no result (lab/benchmarks/dump.py)."""
    from lab.benchmarks.dump import compare, dump, read, write
    from training.ingest import MissingDataError, shared_records

    with exit_2_on(MissingDataError):
        records = shared_records(data)
    result = dump(index, records, k=k)
    write(result, out)
    typer.echo(f"{result['topics']} topics -> {out}")
    if compare_to is not None:
        diffs = compare(read(compare_to), result)
        for line in diffs[:50]:
            typer.echo(line)
        typer.echo(f"{len(diffs)} differences against {compare_to}" if diffs else f"identical to {compare_to}")
        if diffs:
            raise typer.Exit(1)


@bench_app.command("watch")
def watch_command(
    n_base: int = typer.Option(100_000, "--n-base", help="Synthetic documents in the index before the add."),
    n_add: int = typer.Option(1_000, "--n-add", help="Synthetic documents added (the week's publications)."),
    watches: int = typer.Option(10_000, "--watches", help="Watches saved before the add."),
    real_share: float = typer.Option(0.3, "--real-share", min=0.0, max=1.0, help="Share of real claims among them "
                                     "(at most the real data's claims of 15 words or more)."),
    data: Path | None = typer.Option(None, "--data", help="Real data folder (its claims are watched); default "
                                     "../shared/data beside the repository when it exists."),
    cache_dir: Path = typer.Option(Path.home() / ".cache" / "priorart" / "bench-watch", "--cache-dir",
                                   help="Keeps the synthetic corpus and index for the next run."),
    chunk: int | None = typer.Option(None, "--chunk", min=1, help="Watches sharing one cut of the index."),
    workers: int | None = typer.Option(None, "--workers", min=1, help="Watches evaluated at once (default: one per "
                                       "core, as `priorart add` evaluates them)."),
    verify: bool = typer.Option(True, "--verify/--no-verify", help="Run every watch's search again after the add "
                                "and compare its new top-k documents with its hits."),
    seed: int = typer.Option(0, "--seed"),
    database_url: str | None = typer.Option(None, "--database-url", help="An empty PostgreSQL database for the "
                                            "watches (default: SQLite in the work folder)."),
    out: Path | None = typer.Option(None, "--out", "-o", help="Also write the result (JSON, with the commit and the "
                                    "command) here."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Prior-art watches (issue 34): evaluation time (in all, per watch) and memory after a 1 % add."""
    from lab.benchmarks.watch import format_report, run_watch_bench

    if data is None:
        default = Path(__file__).resolve().parents[2].parent / "shared" / "data"
        data = default if default.is_dir() else None
    report = run_watch_bench(n_base=n_base, n_add=n_add, n_watches=watches, real_share=real_share, data=data,
                             cache_dir=cache_dir, seed=seed, verify=verify, chunk=chunk,
                             log=lambda line: typer.echo(line, err=True), database_url=database_url,
                             workers=workers)
    _emit(report, out, as_json, format_report)


@bench_app.command("querylang")
def querylang_command(
    index: Path = typer.Option(Path.home() / ".cache" / "priorart" / "bench-watch" / "synth-100000-1000-0" / "index",
                               "--index", help="The index to time (default: the 100k synthetic index "
                               "`priorart-lab bench watch` keeps; an index without words/ gets it written first)."),
    queries: int = typer.Option(200, "--queries", min=1, help="Boolean queries drawn from the index's documents."),
    rounds: int = typer.Option(3, "--rounds", min=1),
    seed: int = typer.Option(0, "--seed"),
    out: Path | None = typer.Option(None, "--out", "-o", help="Also write the result (JSON) here."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """The query language (issue 61): a Boolean filter of 3-5 terms plus its ranking against plain /search, and the
    word index's size (lab/benchmarks/querylang.py)."""
    from lab.benchmarks.querylang import format_report, run_querylang_bench

    report = run_querylang_bench(index, queries=queries, rounds=rounds, seed=seed,
                                 log=lambda line: typer.echo(line, err=True))
    _emit(report, out, as_json, format_report)


def register(app: typer.Typer) -> None:
    """Add the ``bench`` command group to the CLI."""
    app.add_typer(bench_app, name="bench")
