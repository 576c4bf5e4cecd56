"""``priorart search INDEX_DIR QUERY``: the service's search (the same engine and pipeline) from the command line."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from service.schema import SearchResponse


def _parse_date(value: str | None) -> date | None:
    if value is None:
        return None
    try:
        return date.fromisoformat(value)
    except ValueError as exc:
        raise typer.BadParameter(f"{value!r} is not a date (YYYY-MM-DD)", param_hint="--before") from exc


def search_command(
    index_dir: Path = typer.Argument(..., help="Index folder built by `priorart build`."),
    query: str = typer.Argument(..., help="Query text (claims, title, abstract) or a publication number."),
    lang: str = typer.Option("auto", "--lang", help="Query language en/de/fr, or auto (detected)."),
    syntax: str = typer.Option("auto", "--syntax", help="auto (the query language where the query looks like it: "
                               "ti=, NEAR/3, AND in capitals, transform*), query (always) or text (free text); "
                               "docs/QUERY_LANGUAGE.md."),
    drop: str = typer.Option("", "--drop", help="Query language: comma-separated translations to leave out."),
    every_date: bool = typer.Option(False, "--every-date", help="A publication number as the query: search every "
                                    "date (default: what was published before its priority date)."),
    k: int = typer.Option(10, "--k", min=1, help="Number of results."),
    depth: int | None = typer.Option(None, "--depth", min=1, help="Candidate depth (default: the settings')."),
    as_json: bool = typer.Option(False, "--json", help="Print the response as JSON (the body of POST /search)."),
    codes: str = typer.Option("", "--codes", help="Comma-separated IPC/CPC codes of the query."),
    code_level: str = typer.Option(
        "none", "--code-level", help="Keep only documents sharing a code at this level: section, class, subclass, "
        "main_group, subgroup (none: codes describe the query only)."
    ),
    before: str | None = typer.Option(None, "--before", help="Keep documents published before YYYY-MM-DD."),
    no_translate: bool = typer.Option(False, "--no-translate", help="Search untranslated terms (baseline)."),
    table: str | None = typer.Option(None, "--table", help="Translation table name (de-en) or JSON file."),
    max_query_terms: int | None = typer.Option(
        None, "--max-query-terms", help="Keep the top tf-idf terms (default 100; 0 = all)."
    ),
    query_doc_codes: bool = typer.Option(
        False, "--query-doc-codes", help="For a publication-number query, filter by its codes."
    ),
    weights: str | None = typer.Option(None, "--weights", help='Fusion weights as JSON, e.g. \'{"bm25": 1}\'.'),
    verify: bool = typer.Option(True, "--verify/--no-verify", help="Checksum the index files on load."),
    device: str = typer.Option("auto", "--device", help="auto, cpu or cuda (neural stages)."),
    repeat: int = typer.Option(0, "--repeat", min=0, help="Run the search this many more times and print its "
                               "latency (p50, p90 and each stage's p50, ms) on stderr."),
) -> None:
    """Search an index and print what ordered the results, then rank, id, score (the one the order follows) and
    title (or JSON)."""
    from pydantic import ValidationError

    from service.engine import Engine
    from service.index.folder import IndexFormatError
    from service.query import QueryError
    from service.schema import SearchRequest
    from service.settings import Settings

    code_list = [c for c in (x.strip() for x in codes.split(",")) if c]
    try:
        req = SearchRequest.model_validate({
            "query": query, "syntax": syntax, "priority_cutoff": not every_date,
            "drop_translations": [d for d in drop.split(",") if d.strip()],
            "lang": lang, "k": k, "depth": depth, "codes": code_list, "code_filter": code_level,
            "before": _parse_date(before), "translate": not no_translate, "explain": True,
            "weights": json.loads(weights) if weights else None})
        engine = Engine.load(index_dir, settings=Settings(index_dir=index_dir, device=device), verify=verify)

        def once() -> SearchResponse:
            q = engine.query(req)
            if table:
                q.translate = table
            q.max_query_terms = max_query_terms
            q.use_doc_codes = query_doc_codes
            return engine.run(q, explain=True)

        resp = once()
        if repeat:
            _latency([once() for _ in range(repeat)])
    except (IndexFormatError, QueryError, ValidationError, json.JSONDecodeError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    if as_json:
        typer.echo(resp.model_dump_json())
        return
    qi, f = resp.query, resp.fusion
    filters = {k: v for k, v in qi.filters.items() if k != "query"}
    read = qi.filters.get("query")
    if read:  # the query language: how the query was read, each term's expansion
        typer.echo(f"query: {read['parsed']}; {qi.filters.get('n_allowed', 0)} documents pass; ranked by "
                   f"{read['ranked_by']}")
        for t in read["terms"]:
            more = "; ".join(f"{lang}: {', '.join(ws[:8])}{' ...' if len(ws) > 8 else ''}"
                             for lang, ws in t["translations"].items())
            typer.echo(f"  {t['term']}: {t['documents']} documents; {', '.join(t['words'][:8])}"
                       + (f"; translated {more}" if more else ""))
    typer.echo(f"lang {qi.lang}{' (detected)' if qi.lang_detected else ''}; routes {', '.join(qi.routes) or 'none'}; "
               f"{len(qi.terms)} query terms; codes {', '.join(qi.codes) or 'none'}; filters {filters or 'none'}")
    typer.echo(f"ranking: {resp.ranking}")  # what ordered the results: ranked_by's words (service/notices.py)
    typer.echo(f"fusion: {f.method} over {', '.join(f'{c} {w:.2f}' for c, w in f.weights.items())} "
               f"({f.profile}; {f.source})")
    for c, fate in f.components.items():
        if fate != "applied":
            typer.echo(f"  {c}: {fate}")
    for note in resp.notices:
        typer.echo(f"note: {note}")
    if not resp.results:
        typer.echo("no results")
        return
    typer.echo(f"{'rank':>4}  {'id':<16} {'score':>7}  title")
    for i, hit in enumerate(resp.results, 1):
        typer.echo(f"{i:>4}  {hit.id:<16} {hit.score:>7.4f}  {(hit.title or '')[:80]}")


def _latency(runs: list[SearchResponse]) -> None:
    """The runs' latency on stderr: p50 and p90 of the engine's time, and each stage's p50 (ms)."""
    import numpy as np

    took = np.array([r.took_ms for r in runs])
    stages: dict[str, list[float]] = {}
    for r in runs:
        for st in r.stages:
            stages.setdefault(st.name, []).append(st.ms)
    per = ", ".join(f"{name} {np.median(ms):.1f}" for name, ms in stages.items())
    typer.echo(f"latency over {len(runs)} runs: p50 {np.median(took):.1f} ms, p90 {np.percentile(took, 90):.1f} ms; "
               f"stages p50: {per}", err=True)


def register(app: typer.Typer) -> None:
    """Add the ``search`` command to the CLI."""
    app.command("search")(search_command)
