"""``priorart search INDEX_DIR QUERY``: the sparse first stage from the command line."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import typer


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
    lang: str | None = typer.Option(None, "--lang", help="Query language en/de/fr (default: detected)."),
    k: int = typer.Option(10, "--k", help="Number of results."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object (hits + info)."),
    codes: str = typer.Option("", "--codes", help="Comma-separated IPC/CPC codes: keep documents sharing one."),
    code_level: str = typer.Option(
        "subclass", "--code-level", help="section, class, subclass, main_group or subgroup."
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
    verify: bool = typer.Option(True, "--verify/--no-verify", help="Checksum the index files on load."),
) -> None:
    """Search an index and print rank, id, score, title (or JSON)."""
    from service.index.store import IndexFormatError, UnknownDocumentError
    from service.retrieval.first_stage import FirstStage, QueryError

    translate: bool | str = False if no_translate else (table or True)
    code_list = [c for c in (x.strip() for x in codes.split(",")) if c]
    try:
        stage = FirstStage.load(index_dir, verify=verify)
        result = stage.search(
            query,
            lang=lang,
            k=k,
            codes=code_list,
            code_level=code_level,
            before=_parse_date(before),
            translate=translate,
            max_query_terms=max_query_terms,
            use_doc_codes=query_doc_codes,
        )
    except (IndexFormatError, QueryError, UnknownDocumentError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    if as_json:
        out = result.to_dict()
        for hit in out["hits"]:
            rec = stage.docs.get_row(hit["row"])
            hit["title"] = rec.title.get(result.info.lang) or next(iter(rec.title.values()), "")
        typer.echo(json.dumps(out, ensure_ascii=False))
        return
    info = result.info
    routes = ", ".join(f"{r.name}({r.n_matched})" for r in info.routes)
    typer.echo(
        f"lang {info.lang}{' (detected)' if info.lang_detected else ''}; routes {routes}; "
        f"{len(info.query_terms)} query terms; filters {info.filters or 'none'}"
    )
    for note in info.notes:
        typer.echo(f"note: {note}")
    if not result.hits:
        typer.echo("no results")
        return
    typer.echo(f"{'rank':>4}  {'id':<16} {'score':>9}  title")
    for hit in result.hits:
        rec = stage.docs.get_row(hit.row)
        title = rec.title.get(info.lang) or next(iter(rec.title.values()), "")
        typer.echo(f"{hit.rank:>4}  {hit.doc_id:<16} {hit.score:>9.4f}  {title[:80]}")


def register(app: typer.Typer) -> None:
    """Add the ``search`` command to the CLI."""
    app.command("search")(search_command)
