"""``priorart bench first-stage``: index build speed/memory and query speed against rank-bm25.

For each corpus size the same synthetic corpus is indexed by ``priorart build`` (in a child process,
so its peak RSS is the build's own) and by ``rank_bm25.BM25Okapi`` over the identical English token
lists. Queries (the English first claim of sampled documents, all terms kept) run through
``FirstStage.search`` and through ``BM25Okapi.get_scores`` + sort; both timings include query
analysis. rank-bm25 is slow at large sizes: only ``--bm25-queries`` queries are timed there and the
per-query time is extrapolated (the table says how many were timed). Each timed query also checks
that both systems return the same top 10 (ids equal up to ties, scores within 1e-6).
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer

bench_app = typer.Typer(help="Benchmarks that print measured figures.", no_args_is_help=True)

_BUILD_SCRIPT = """
import json, sys
from training.build import build_index
r = build_index(sys.argv[1], sys.argv[2], index_langs=sys.argv[3], k1=float(sys.argv[4]), b=float(sys.argv[5]),
                overwrite=True, progress=False)
print(json.dumps(r.to_dict()))
"""


def _records(n: int, seed: int) -> Iterator[Any]:
    from training.synth import generate

    return generate(n, seed)


QUERY_TEXTS = ("first-claim", "abstract", "claims")


def _query_text(rec: Any, kind: str) -> str:
    if kind == "first-claim":
        return str(rec.claims["en"][0].text) if rec.claims.get("en") else ""
    if kind == "abstract":
        return str(rec.abstract.get("en", ""))
    return str(rec.claims_text("en"))


def _top10_identical(ours: list[tuple[int, float]], ref_scores: Any, tol: float = 1e-6) -> bool:
    """Same top-10 up to ties: equal score profiles, and every returned row has the reference score."""
    import numpy as np

    k = min(10, len(ours))
    ref_top = np.sort(ref_scores)[::-1][:10]
    ref_top = ref_top[ref_top > 0] if len(ours) < 10 else ref_top
    if len(ref_top) != k:
        return False
    mine = np.array([s for _, s in ours[:k]])
    if not np.allclose(mine, ref_top[:k], rtol=0, atol=tol):
        return False
    return all(abs(ref_scores[r] - s) <= tol for r, s in ours[:k])


def run_first_stage_bench(
    sizes: list[int],
    n_queries: int,
    *,
    bm25_queries: int | None = None,
    seed: int = 13,
    index_langs: str = "en,de,fr",
    k1: float = 1.2,
    b: float = 0.75,
    work_dir: Path | None = None,
    progress: bool = True,
    query_text: str = "first-claim",
) -> list[dict[str, Any]]:
    """Run the benchmark; returns one dict of measured figures per size."""
    if query_text not in QUERY_TEXTS:
        raise ValueError(f"unknown query text {query_text!r}; valid: {', '.join(QUERY_TEXTS)}")
    import numpy as np
    from rank_bm25 import BM25Okapi

    from service.corpus.jsonl import read_corpus, write_corpus
    from service.retrieval.first_stage import FirstStage
    from service.text.analysis import get_analyzer

    results = []
    analyzer = get_analyzer("en")
    with tempfile.TemporaryDirectory(prefix="priorart-bench-", dir=work_dir) as tmp:
        for n in sizes:
            corpus = Path(tmp) / f"corpus-{n}.jsonl"
            index_dir = Path(tmp) / f"index-{n}"
            t = time.perf_counter()
            write_corpus(_records(n, seed), corpus)
            gen_s = time.perf_counter() - t
            if progress:
                typer.echo(f"[{n}] corpus generated in {gen_s:.1f} s; building index ...", err=True)
            proc = subprocess.run(
                [sys.executable, "-c", _BUILD_SCRIPT, str(corpus), str(index_dir), index_langs, str(k1), str(b)],
                capture_output=True,
                text=True,
                check=False,
            )
            if proc.returncode != 0:
                raise RuntimeError(f"index build failed for n={n}:\n{proc.stderr[-2000:]}")
            build = json.loads(proc.stdout.strip().splitlines()[-1])

            stage = FirstStage.load(index_dir, verify=True)
            fields = tuple(stage.meta.settings["fields"])
            # the same token lists for rank-bm25 (documents with English text only, as in our N)
            t = time.perf_counter()
            rows: list[int] = []
            tokens: list[list[str]] = []
            queries: list[str] = []
            german: list[str] = []
            for row, rec in enumerate(read_corpus(corpus)):
                if "en" in rec.languages:
                    terms = analyzer(rec.text("en", fields))
                    if terms:
                        rows.append(row)
                        tokens.append(terms)
                text = _query_text(rec, query_text)
                if text:
                    queries.append(text)
                if rec.claims.get("de"):
                    german.append(str(rec.claims["de"][0].text))
            analyse_s = time.perf_counter() - t
            rng = random.Random(seed)
            queries = rng.sample(queries, min(n_queries, len(queries)))
            german = rng.sample(german, min(n_queries, len(german)))
            if not queries:
                raise RuntimeError("the synthetic corpus has no English claims to use as queries")
            if progress:
                typer.echo(f"[{n}] rank-bm25 indexing {len(tokens)} token lists ...", err=True)
            t = time.perf_counter()
            ref = BM25Okapi(tokens, k1=k1, b=b)
            ref_build_s = time.perf_counter() - t
            del tokens

            # first stage: all queries, after one warm-up (page cache, analyzer memo); the English index alone
            # (translate=False: one route, raw BM25 scores) is what rank-bm25 computes
            stage.search(queries[0], lang="en", k=10, max_query_terms=0, translate=False)
            ours: list[list[tuple[int, float]]] = []
            t, c = time.perf_counter(), time.process_time()
            for q in queries:
                res = stage.search(q, lang="en", k=10, max_query_terms=0, translate=False)
                ours.append([(h.row, h.score) for h in res.hits])
            fs_s = (time.perf_counter() - t) / len(queries)
            fs_cpu_s = (time.process_time() - c) / len(queries)
            t = time.perf_counter()
            for q in queries:
                stage.search(q, lang="en", k=10, translate=False)
            fs_reduced_s = (time.perf_counter() - t) / len(queries)
            # the product path: query reduction and every route (en, and en->de / en->fr by PSQ when the index
            # has those tables), and German first claims (de, de->en, de->fr)
            xling = _time_routes(stage, queries, german)

            n_ref = len(queries) if bm25_queries is None else max(1, min(bm25_queries, len(queries)))
            row_of = np.asarray(rows)
            identical = 0
            t_ref = c_ref = 0.0
            for i in range(n_ref):
                t, c = time.perf_counter(), time.process_time()
                scores = ref.get_scores(analyzer(queries[i]))
                np.argsort(scores)[::-1][:10]
                t_ref += time.perf_counter() - t
                c_ref += time.process_time() - c
                full = np.zeros(len(stage.docs))
                full[row_of] = scores
                identical += _top10_identical(ours[i], full)
            ref_s = t_ref / n_ref
            results.append(
                {
                    "n_docs": n,
                    "build_docs_per_s": build["docs_per_s"],
                    "build_s": build["seconds"],
                    "build_cpu_s": build["cpu_s"],
                    "build_docs_per_cpu_s": n / build["cpu_s"],
                    "build_peak_rss_mb": build["peak_rss_mb"],
                    "index_mb": build["index_bytes"] / 2**20,
                    "n_queries": len(queries),
                    "query_text": query_text,
                    "mean_query_terms": float(np.mean([len(set(analyzer(q))) for q in queries])),
                    "first_stage_ms": fs_s * 1000,
                    "first_stage_cpu_ms": fs_cpu_s * 1000,
                    "first_stage_qps": 1 / fs_s,
                    "first_stage_reduced_ms": fs_reduced_s * 1000,
                    **xling,
                    "rank_bm25_build_s": ref_build_s,
                    "rank_bm25_ms": ref_s * 1000,
                    "rank_bm25_cpu_ms": c_ref / n_ref * 1000,
                    "rank_bm25_qps": 1 / ref_s,
                    "rank_bm25_timed_queries": n_ref,
                    "speedup": ref_s / fs_s,
                    "speedup_cpu": (c_ref / n_ref) / fs_cpu_s,
                    "top10_identical": identical,
                    "top10_checked": n_ref,
                    "generate_s": gen_s,
                    "analyse_s": analyse_s,
                }
            )
            del ref, stage
            if progress:
                typer.echo(f"[{n}] done", err=True)
    return results


def _time_routes(stage: Any, english: list[str], german: list[str]) -> dict[str, Any]:
    """ms/query of English and German queries through every route the index has (the default search)."""
    out: dict[str, Any] = {"translation_tables": sorted(f"{s}-{t}" for s, t in stage.pair_tables)}
    for name, lang, texts in (("en", "en", english), ("de", "de", german)):
        if not texts:
            continue
        stage.search(texts[0], lang=lang, k=10)
        t = time.perf_counter()
        for q in texts:
            res = stage.search(q, lang=lang, k=10)
        out[f"routes_{name}_ms"] = (time.perf_counter() - t) / len(texts) * 1000
        out[f"routes_{name}"] = [r.name for r in res.info.routes]
    return out


def format_table(rows: list[dict[str, Any]]) -> str:
    """The benchmark figures as a plain-text table."""
    head = (
        f"{'docs':>8} {'build doc/s':>11} {'doc/cpu-s':>9} {'peak MiB':>9} {'index MiB':>9} "
        f"{'FS ms/q':>8} {'FS q/s':>8} {'bm25 ms/q':>10} {'timed':>6} {'speedup':>8} {'cpu-speedup':>11} "
        f"{'top10 same':>10}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r['n_docs']:>8} {r['build_docs_per_s']:>11.0f} {r['build_docs_per_cpu_s']:>9.0f} "
            f"{r['build_peak_rss_mb']:>9.0f} {r['index_mb']:>9.1f} {r['first_stage_ms']:>8.2f} "
            f"{r['first_stage_qps']:>8.1f} {r['rank_bm25_ms']:>10.1f} {r['rank_bm25_timed_queries']:>6} "
            f"{r['speedup']:>7.0f}x {r['speedup_cpu']:>10.0f}x {r['top10_identical']:>4}/{r['top10_checked']:<5}"
        )
    for r in rows:
        for name in ("en", "de"):
            if f"routes_{name}_ms" in r:
                lines.append(
                    f"{r['n_docs']:>8} docs, {name} queries through routes {'+'.join(r[f'routes_{name}'])}: "
                    f"{r[f'routes_{name}_ms']:.2f} ms/query (default search: query reduction, every route)"
                )
    lines.append(
        "FS = FirstStage.search (analysis + scoring + top-10 + explanations) in the English index alone "
        "(translate=False), all query terms kept; bm25 = "
        "rank_bm25.BM25Okapi.get_scores + sort over the same token lists, per-query time averaged over the "
        "'timed' queries (the rest extrapolated). Wall-clock figures; cpu-speedup uses process CPU time. "
        f"Queries: {rows[0]['query_text'] if rows else ''} of sampled documents, mean "
        f"{sum(r['mean_query_terms'] for r in rows) / max(1, len(rows)):.1f} distinct terms."
    )
    return "\n".join(lines)


@bench_app.command("first-stage")
def first_stage_command(
    sizes: str = typer.Option("10000,100000", "--sizes", help="Comma-separated corpus sizes."),
    queries: int = typer.Option(50, "--queries", help="Queries per size (texts of sampled documents)."),
    bm25_queries: int | None = typer.Option(
        None, "--bm25-queries", help="Queries timed on rank-bm25 (default: all up to 20k docs, 5 above)."
    ),
    seed: int = typer.Option(13, "--seed"),
    query_text: str = typer.Option(
        "first-claim", "--query-text", help="Query from each sampled document: first-claim, abstract or claims."
    ),
    index_langs: str = typer.Option("en,de,fr", "--index-langs", help="Languages the timed build indexes."),
    work_dir: Path | None = typer.Option(None, "--work-dir", help="Where the temporary corpus/index go."),
    as_json: bool = typer.Option(False, "--json", help="Print the figures as JSON."),
) -> None:
    """Index build docs/s and peak memory, first-stage vs rank-bm25 query speed, identical top-10."""
    try:
        size_list = [int(s) for s in sizes.split(",") if s.strip()]
    except ValueError as exc:
        raise typer.BadParameter(f"--sizes must be integers, got {sizes!r}") from exc
    if not size_list or min(size_list) < 10 or queries < 1:
        raise typer.BadParameter("sizes must be >= 10 and --queries >= 1")
    if query_text not in QUERY_TEXTS:
        raise typer.BadParameter(f"--query-text must be one of {', '.join(QUERY_TEXTS)}, got {query_text!r}")
    rows = []
    for n in size_list:
        timed = bm25_queries if bm25_queries is not None else (queries if n <= 20_000 else 5)
        rows += run_first_stage_bench(
            [n],
            queries,
            bm25_queries=timed,
            seed=seed,
            index_langs=index_langs,
            work_dir=work_dir,
            query_text=query_text,
        )
    typer.echo(json.dumps(rows, indent=1) if as_json else format_table(rows))


@bench_app.command("service")
def service_command(
    index_dir: Path = typer.Argument(..., help="Index folder (built with --models for the full pipeline)."),
    queries: int = typer.Option(200, "--queries", help="Queries to time (English first claims of the index)."),
    depth: int = typer.Option(1000, "--depth", help="Candidates per query (reranked when the index has models)."),
    http: bool = typer.Option(True, "--http/--no-http", help="Also time POST /search on a live priorart serve."),
    passages: bool = typer.Option(False, "--passages/--no-passages", help="Also time /passages (same queries)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Per-stage latency, end-to-end p50/p99 in-process and over HTTP, and the API overhead."""
    from training.benchmarks.service import format_report, run_service_bench

    report = run_service_bench(index_dir, queries=queries, depth=depth, http=http, passages=passages)
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
    from training.benchmarks.passages import format_report, run_passage_bench

    try:
        report = run_passage_bench(index_dir, queries=queries, depth=depth, k=k, reference_queries=reference_queries,
                                   variant=variant, seed=seed, http=http)
    except (ValueError, RuntimeError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    typer.echo(json.dumps(report, indent=1) if as_json else format_report(report))


@bench_app.command("add")
def add_command(
    n_base: int = typer.Option(100_000, "--n-base", help="Synthetic documents in the index before the add."),
    n_add: int = typer.Option(10_000, "--n-add", help="Synthetic documents added."),
    segments: int = typer.Option(10, "--segments", help="Segments of the many-segment search timing."),
    queries: int = typer.Option(200, "--queries", help="Title queries timed (en/de/fr)."),
    rounds: int = typer.Option(3, "--rounds", min=1, help="Passes over the queries (each index timed per query)."),
    seed: int = typer.Option(0, "--seed"),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Live index: time to add documents vs a full rebuild, search p50/p99 with many segments vs one."""
    from training.benchmarks.live import format_report, run_add_bench

    report = run_add_bench(n_base, n_add, segments=segments, queries=queries, rounds=rounds, seed=seed)
    typer.echo(json.dumps(report, indent=1) if as_json else format_report(report))


def register(app: typer.Typer) -> None:
    """Add the ``bench`` command group to the CLI."""
    app.add_typer(bench_app, name="bench")
