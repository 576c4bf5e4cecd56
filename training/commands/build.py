"""``priorart build CORPUS.jsonl -o INDEX_DIR``: corpus -> index folder (doc store, BM25 per language)."""

from __future__ import annotations

import json
from pathlib import Path

import typer


def build_command(
    corpus: Path = typer.Argument(..., help="Corpus JSONL (from `priorart ingest` or `priorart synth`); .gz is fine."),
    output: Path = typer.Option(..., "-o", "--output", help="Index folder to create."),
    index_langs: str = typer.Option(
        "en,de,fr", "--index-langs", help="Languages to index (each document in every language it has text in)."
    ),
    fields: str = typer.Option("title,abstract,claims,description", "--fields", help="Record fields to index."),
    scoring: str = typer.Option(
        "bm25", "--scoring", help="bm25 (rank-bm25 BM25Okapi formula) or tfidf (SMART lnc.ntn)."
    ),
    k1: float = typer.Option(1.2, "--k1", help="BM25 term-frequency saturation."),
    b: float = typer.Option(0.75, "--b", help="BM25 length normalisation (0..1)."),
    translation: Path | None = typer.Option(
        None, "--translation", help="Folder with <src>-en.json translation tables (PSQ) to include."
    ),
    force: bool = typer.Option(False, "--force", help="Replace an existing index folder."),
    as_json: bool = typer.Option(False, "--json", help="Print the build report as one JSON object."),
    progress: bool | None = typer.Option(
        None, "--progress/--no-progress", help="Progress bar on stderr (default: on a TTY)."
    ),
) -> None:
    """Index a corpus: doc store, one sparse index per language, translation tables, meta.json last."""
    from service.corpus.jsonl import CorpusFormatError
    from service.index.store import IndexFormatError
    from training.build import BuildError, build_index

    try:
        report = build_index(
            corpus,
            output,
            index_langs=index_langs,
            fields=fields,
            scoring=scoring,
            k1=k1,
            b=b,
            translation_dir=translation,
            overwrite=force,
            progress=progress,
        )
    except (BuildError, CorpusFormatError, IndexFormatError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    if as_json:
        typer.echo(json.dumps(report.to_dict(), indent=1))
        return
    typer.echo(
        f"indexed {report.n_docs} documents in {report.seconds:.1f} s ({report.docs_per_s:.0f} docs/s), "
        f"peak RSS {report.peak_rss_mb:.0f} MiB, index {report.index_bytes / 2**20:.1f} MiB "
        f"-> {report.index_dir}"
    )
    for lang, info in report.langs.items():
        typer.echo(f"  bm25/{lang}: {info['n_docs']} documents, {info['n_terms']} terms, {info['nnz']} postings")
    for t in report.translation:
        typer.echo(f"  {t}")


def register(app: typer.Typer) -> None:
    """Add the ``build`` command to the CLI."""
    app.command("build")(build_command)
