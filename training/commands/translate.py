"""``priorart translate`` (show how a de/fr term or text is translated) and ``priorart translate-train``
(build the ``<src>-en.json`` PSQ tables from aligned EP claims and the FreeDict lexicons)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    from service.text.translation import TranslationTable

log = logging.getLogger(__name__)


def read_id_file(path: Path) -> list[str]:
    """Publication ids, one per line (``#`` comments, blank lines ignored; topic suffixes ``-de``/``-fr`` dropped)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise typer.BadParameter(f"cannot read id file {path}: {exc}") from exc
    ids: list[str] = []
    for line in text.splitlines():
        item = line.split("#", 1)[0].strip()
        if not item:
            continue
        item = item.split()[0]
        for suffix in ("-de", "-fr", "-en"):
            item = item.removesuffix(suffix)
        ids.append(item)
    return list(dict.fromkeys(ids))


def _load_table(table: Path | None, lang: str, terms: list[str], progress: bool | None) -> tuple[TranslationTable, str]:
    from service.text.translation import TranslationTable, table_path

    if table is not None:
        path = table_path(table, lang)
        return TranslationTable.load(path), str(path)
    from training.translation.freedict import LexiconNotFoundError, lexicon_table
    from training.translation.tables import prune

    typer.echo(
        f"(no --table: using the FreeDict {lang}-en lexicon directly; build tables with `priorart translate-train`)",
        err=True,
    )
    try:
        entries = lexicon_table(lang, only=set(terms), progress=progress)
    except LexiconNotFoundError as exc:
        raise typer.BadParameter(f"{exc}; or pass --table") from exc
    return TranslationTable(prune(entries), src=lang, sources=["freedict"]), "FreeDict lexicon (read now)"


def translate_command(
    text: str = typer.Argument(..., help="A source-language word or text, e.g. 'Fach' or a whole claim."),
    lang: str = typer.Option(..., "--lang", "-l", help="Source language: de or fr."),
    table: Path | None = typer.Option(
        None,
        "--table",
        "-t",
        help="Translation table JSON, a folder with "
        "<lang>-en.json (translate-train output) or an index folder. Default: the "
        "FreeDict lexicon, read now.",
    ),
    show_all: bool = typer.Option(
        False, "--all", help="Show every stored translation, not only those kept at query time."
    ),
    max_alternatives: int = typer.Option(5, "--max-alternatives", help="Query-time pruning: at most this many."),
    cumulative: float = typer.Option(0.9, "--cumulative", help="Query-time pruning: stop at this probability mass."),
    min_prob: float = typer.Option(0.01, "--min-prob", help="Query-time pruning: drop translations below this."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
    progress: bool | None = typer.Option(None, "--progress/--no-progress", help="Progress bar on stderr."),
) -> None:
    """Show the source analysis of TEXT and the weighted English index terms each term translates to."""
    from service.text.analysis import SUPPORTED_LANGS, get_analyzer, tokenize
    from service.text.translation import TranslationTable

    if lang not in SUPPORTED_LANGS or lang == "en":
        typer.echo(f"error: --lang must be de or fr (got {lang!r})", err=True)
        raise typer.Exit(2)
    analyzer = get_analyzer(lang)
    terms = list(dict.fromkeys(analyzer(text)))
    try:
        loaded, where = _load_table(table, lang, terms, progress)
        tab = TranslationTable(
            loaded.entries,
            src=loaded.src,
            tgt=loaded.tgt,
            sources=loaded.sources,
            max_alternatives=max_alternatives,
            cumulative=cumulative,
            min_prob=min_prob,
        )
    except (FileNotFoundError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    if tab.src != lang:
        typer.echo(f"error: table {where} translates {tab.src}->{tab.tgt}, not {lang}", err=True)
        raise typer.Exit(2)
    rows: list[dict[str, Any]] = []
    for term in terms:
        kept = tab.translate_term(term)
        rows.append(
            {
                "term": term,
                "in_table": term in tab,
                "translations": sorted(kept.items(), key=lambda kv: (-kv[1], kv[0])),
                "stored": tab.lookup(term) if show_all else None,
            }
        )
    if as_json:
        typer.echo(
            json.dumps(
                {"lang": lang, "table": where, "sources": tab.sources, "tokens": tokenize(text), "terms": rows},
                ensure_ascii=False,
                indent=1,
            )
        )
        return
    typer.echo(
        f"table: {where} ({tab.src}->{tab.tgt}, {len(tab)} source terms, sources: {', '.join(tab.sources) or '?'})"
    )
    typer.echo(f"analysis ({lang}): {' '.join(tokenize(text))}  ->  {' '.join(terms) or '(no index terms)'}")
    width = max((len(r["term"]) for r in rows), default=0)
    for r in rows:
        if not r["in_table"]:
            typer.echo(f"  {r['term']:<{width}} -> {r['term']} 1.000  (no entry: passed through)")
            continue
        alts = ", ".join(f"{t} {p:.3f}" for t, p in r["translations"])
        typer.echo(f"  {r['term']:<{width}} -> {alts}")
        if show_all:
            typer.echo(f"  {'':<{width}}    stored: " + ", ".join(f"{t} {p:.3f}" for t, p in r["stored"]))


def translate_train_command(
    corpus: list[Path] = typer.Argument(..., help="Corpus JSONL (priorart ingest) or EP XML files/folders."),
    output: Path = typer.Option(
        ...,
        "-o",
        "--output",
        help="Folder to write <src>-en.json and translation-meta.json (pass it to `priorart build --translation`).",
    ),
    langs: str = typer.Option("de,fr", "--langs", help="Source languages (comma-separated)."),
    exclude_ids: Path | None = typer.Option(
        None,
        "--exclude-ids",
        help="File of publication ids (one per line) whose "
        "claims the aligned model must not see, e.g. evaluation topics.",
    ),
    use_dict: bool = typer.Option(True, "--dict/--no-dict", help="Use the FreeDict lexicons."),
    use_aligned: bool = typer.Option(True, "--aligned/--no-aligned", help="Use the IBM-1 model on aligned claims."),
    lam: float = typer.Option(0.5, "--lambda", help="Weight of the aligned model where both resources know a term."),
    aligned_prior: float = typer.Option(
        5.0, "--aligned-prior", help="Scale --lambda by n / (n + this) for a term the aligned model saw n times "
        "(0: --lambda for every term)."),
    iterations: int = typer.Option(10, "--iterations", help="EM iterations of IBM model 1."),
    symmetric: bool = typer.Option(
        True, "--symmetric/--no-symmetric", help="Combine with the reverse alignment model (cuts rare-word garbage)."
    ),
    self_weight: float = typer.Option(
        0.1,
        "--self-weight",
        help="Self-translation probability for source terms that are English index terms of the corpus too (cognates).",
    ),
    min_prob: float = typer.Option(0.005, "--min-prob", help="Storage pruning: drop translations below this."),
    max_per_term: int = typer.Option(20, "--max-per-term", help="Storage pruning: keep at most this many."),
    dictd_dir: Path = typer.Option(Path("/usr/share/dictd"), "--dictd-dir", help="Where the FreeDict dictd files are."),
    as_json: bool = typer.Option(False, "--json", help="Print the metadata as JSON."),
    progress: bool | None = typer.Option(None, "--progress/--no-progress", help="Progress bars on stderr."),
) -> None:
    """Train the de/fr -> en translation tables (aligned EP claims + FreeDict) into OUTPUT."""
    from training.ingest import IngestInputError, iter_records
    from training.translation.tables import TableSettings, build_tables, write_tables

    excluded = read_id_file(exclude_ids) if exclude_ids else []
    try:
        settings = TableSettings(
            langs=tuple(x.strip() for x in langs.split(",") if x.strip()),
            use_aligned=use_aligned,
            use_dict=use_dict,
            lam=lam,
            aligned_prior=aligned_prior,
            iterations=iterations,
            symmetric=symmetric,
            self_weight=self_weight,
            min_prob=min_prob,
            max_per_term=max_per_term,
        )
        tables, meta = build_tables(
            iter_records(corpus, progress=progress),
            settings,
            exclude_ids=excluded,
            dictd_dir=dictd_dir,
            progress=progress,
        )
    except (IngestInputError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    meta["corpus"] = [str(p) for p in corpus]
    written = write_tables(output, tables, meta)
    if as_json:
        typer.echo(json.dumps(meta, ensure_ascii=False, indent=1))
        return
    for lang, info in meta["languages"].items():  # type: ignore[attr-defined]
        aligned = info.get("aligned", {})
        typer.echo(
            f"{lang}-en: {info['source_terms']} source terms, {info['pairs']} pairs from "
            f"{' + '.join(info['sources'])}"
            + (
                f" (aligned: {aligned['sentence_pairs']} sentence pairs of {aligned['documents']} documents)"
                if aligned
                else ""
            )
        )
    if excluded:
        typer.echo(f"excluded {len(excluded)} ids from the aligned model")
    for path in written:
        typer.echo(f"  wrote {path}")


def register(app: typer.Typer) -> None:
    """Add ``translate`` and ``translate-train`` to the CLI."""
    app.command("translate")(translate_command)
    app.command("translate-train")(translate_train_command)
