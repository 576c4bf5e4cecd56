"""``priorart build CORPUS.jsonl -o INDEX_DIR [--models MODELS_DIR]``: corpus -> index folder (doc store, BM25
per language; with ``--models`` also dense vectors + FAISS, rerank encodings and learned fusion weights), and
``priorart fuse INDEX_DIR``: (re)learn the fusion weights of an index built with ``--models``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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
        None, "--translation", help="Reuse the <src>-<tgt>.json translation tables (PSQ) of this folder instead of "
        "building them (e.g. `priorart translate-train` output or another index's translation/)."
    ),
    build_translation: bool = typer.Option(
        True, "--build-translation/--no-translation", help="Build translation tables of every direction into an "
        "indexed language from the corpus' aligned claims and the --lexicons (default), or none."
    ),
    compounds: str = typer.Option(
        "de", "--compounds", help="Languages whose compounds are split into known parts (de, fr; '' for none)."
    ),
    lexicons: str = typer.Option(
        "freedict", "--lexicons", help="Dictionaries merged into the translation tables: freedict, ding (Debian "
        "trans-de-en: de<->en only) or both, comma-separated; '' for none (docs/RESULTS.md: Translation coverage)."
    ),
    splitter_lexicons: str = typer.Option(
        "freedict", "--splitter-lexicons", help="Dictionaries whose headwords the compound splitter knows (freedict, "
        "ding; '' for the corpus' words only)."
    ),
    force: bool = typer.Option(False, "--force", help="Replace an existing index folder."),
    as_json: bool = typer.Option(False, "--json", help="Print the build report as one JSON object."),
    progress: bool | None = typer.Option(
        None, "--progress/--no-progress", help="Progress bar on stderr (default: on a TTY)."
    ),
    models: Path | None = typer.Option(
        None, "--models", help="Models folder from `priorart train`: adds the dense and rerank stages (every document "
        "encoded once) and learns fusion weights on the dev split."
    ),
    dense: bool = typer.Option(
        True, "--dense/--no-dense", help="The dense stage: every document encoded by the pretrained multilingual "
        "encoder (multilingual-e5-small, int8 ONNX; converted once per machine), searched beside BM25 and fused with "
        "it. --no-dense: BM25 alone."
    ),
    dense_index: str = typer.Option(
        "auto", "--dense-index", help="FAISS index of the dense stage: auto (flat up to 20,000 documents, hnsw "
        "above), flat (exact), hnsw or ivf (approximate)."
    ),
    device: str = typer.Option("auto", "--device", help="Where the document encoders run: auto (CUDA when present), "
                               "cpu or cuda; the report says which ran."),
    fuse: bool = typer.Option(
        True, "--fuse/--no-fuse", help="With --models: learn fusion weights on the dev split (see `priorart fuse`)."
    ),
    fuse_task: str = typer.Option(
        "auto", "--fuse-task", help="Dev topics for fusion: auto (the tasks this index suits), xling or known-item."
    ),
    ranker: str = typer.Option(
        "default", "--ranker", help="The learned ranker of /search's first documents: default (the project's, "
        "chosen held out by `priorart-lab experiment ranking`), a ranker folder, or none (ordered by their best "
        "passage)."
    ),
    cpc: str = typer.Option(
        "auto", "--cpc", help="CPC title list (cpc-titles-*.tsv.gz, or `priorart synth --scheme`'s) whose titles "
        "classify a query without codes (the code classifier): auto (PRIORART_CPC_TITLES, else the shared data "
        "folder's), a path, or none. Used where it knows most of the corpus' subclasses."
    ),
    doc_maps: str = typer.Option(
        "default", "--doc-maps", help="The dense stage's document maps fine-tuned on patents (German and French "
        "documents' vectors moved toward queries in the other languages): default (the project's, chosen held out by "
        "`priorart-lab experiment adapter`), a maps file, or none (the frozen encoder)."
    ),
    like: Path | None = typer.Option(
        None, "--like", help="Build with every learned part of an existing index (live, sharded or built at once) "
        "instead of learning them: its settings, compound lists, translation tables, word vectors, code classifier, "
        "ranker, fusion weights and encoder maps, so that a live index can be compared with a rebuild of its "
        "documents (the options those parts replace are ignored).", exists=True, file_okay=False,
    ),
    shards: int | None = typer.Option(
        None, "--shards", help="Split the index into N shards by document (family), searched together with the "
        "global statistics (docs/ARCHITECTURE.md, Shards)."
    ),
    use_ray: bool = typer.Option(
        False, "--ray", help="With --shards: build the shards as Ray tasks; without: encode the documents of the dense "
        "stage as a Ray Data job (a local Ray; --ray-address for a cluster, which must see the output folder)."
    ),
    ray_address: str | None = typer.Option(
        None, "--ray-address", help="The Ray cluster to build on (e.g. auto or ray://host:10001); "
        "implies --ray."
    ),
) -> None:
    """Index a corpus: doc store, one sparse index per language, translation tables of every direction and
    compound splitting (cross-lingual search needs no other step), meta.json last."""
    from service.corpus.jsonl import CorpusFormatError
    from service.index.folder import IndexFormatError
    from training.build import BuildError, build_index

    ray = (ray_address or "local") if use_ray or ray_address else None  # None: no Ray; "local" or an address
    if shards is not None and like is not None:
        typer.echo("error: --like builds one index; a sharded build learns its parts once for every shard", err=True)
        raise typer.Exit(2)
    if shards is not None:
        _build_sharded(corpus, output, shards, ray, index_langs=index_langs, fields=fields, scoring=scoring, k1=k1,
                       b=b, translation_dir=translation, translation=build_translation, compounds=compounds,
                       lexicons=lexicons, splitter_lexicons=splitter_lexicons,
                       overwrite=force, progress=progress, models_dir=models, dense=dense, dense_index=dense_index,
                       device=device,
                       ranker=ranker, cpc=None if cpc == "none" else cpc, doc_maps=doc_maps, as_json=as_json)
        return
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
            translation=build_translation,
            compounds=compounds,
            lexicons=lexicons,
            splitter_lexicons=splitter_lexicons,
            overwrite=force,
            progress=progress,
            models_dir=models,
            dense=dense,
            dense_index=dense_index,
            device=device,
            ray=ray,
            fuse=fuse,
            fuse_task=fuse_task,
            ranker=ranker,
            cpc=None if cpc == "none" else cpc,
            doc_maps=doc_maps,
            like=like,
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
    _echo_translation(report.translation, report.translation_report)
    if report.dense:
        d = report.dense
        typer.echo(f"  dense: {d['n_docs']} documents encoded by the pretrained encoder on {d['device']} "
                   f"({d['precision']}, first {d['document_tokens']} tokens of title + abstract + first claim) at "
                   f"{d['docs_per_s']} docs/s, FAISS {d['kind']}")
    if report.passages:
        p = report.passages
        typer.echo(f"  passages: {p['n_passages']} passages of {p['n_docs']} documents in {p['seconds']:.1f} s "
                   f"({p['cpu_s']:.1f} CPU s), "
                   f"{p['bytes'] / 2**20:.1f} MiB on disk ({p['bytes_per_doc'] / 1024:.1f} KiB per document, "
                   f"{p['scoring_bytes_per_doc'] / 1024:.1f} KiB of it read by scoring, memory-mapped)")
    if report.ranker:
        r = report.ranker
        typer.echo(f"  ranker: the first {r['docs']} documents of /search ordered by a learned ranker ({r['kind']}, "
                   f"{r['source']})")
    if report.code_classifier:
        typer.echo(f"  codes: {report.code_classifier}")
    if report.models:
        m = report.models
        sec = m["seconds"]
        typer.echo(
            f"  models: {m['documents']} documents encoded in {sec['encode']:.1f} s ({m['docs_per_s_encode']:.0f} "
            f"docs/s, {m['onnx_providers'][0]}), {m['dense']['kind']} FAISS index ({m['dense']['metric']}, "
            f"{m['dense']['dim']} d) in {sec['faiss']:.1f} s, total {sec['total']:.1f} s"
        )
    if report.fusion:
        _echo_fusion(report.fusion)


def _build_sharded(corpus: Path, output: Path, shards: int, ray: str | None, *, as_json: bool,
                   **options: Any) -> None:
    from service.corpus.jsonl import CorpusFormatError
    from service.index.folder import IndexFormatError
    from training.build import BuildError, build_sharded_index

    try:
        if ray is not None:
            try:
                import ray as _ray  # noqa: F401
            except ImportError as exc:
                raise BuildError("--ray needs Ray: pip install -e '.[ray]'") from exc
        report = build_sharded_index(corpus, output, shards=shards, use_ray=ray is not None,
                                     ray_address=None if ray in (None, "local") else ray, **options)
    except (BuildError, CorpusFormatError, IndexFormatError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    if as_json:
        typer.echo(json.dumps(report.to_dict(), indent=1))
        return
    typer.echo(f"indexed {report.n_docs} documents into {report.n_shards} shards in {report.seconds:.1f} s "
               f"(first pass {report.first_pass_s:.1f} s, shards {report.shards_s:.1f} s on {report.engine}) "
               f"-> {report.index_dir}")
    for i, (n, rep) in enumerate(zip(report.shard_docs, report.shards, strict=True)):
        typer.echo(f"  shard-{i:03d}: {n} documents, {rep['seconds']:.1f} s, {rep['index_bytes'] / 2**20:.1f} MiB")
    _echo_translation(report.translation, report.translation_report)


def _echo_translation(files: list[str], info: dict[str, Any]) -> None:
    mode = info.get("mode", "off")
    if mode == "off":
        typer.echo("  translation: none (--no-translation): queries reach documents in their own language only")
    elif mode == "reused":
        typer.echo(f"  translation: reused from {info.get('from')}: {', '.join(files) or 'no table'}")
    else:
        used = list(dict.fromkeys(name for names in info.get("lexicons", {}).values() for name in names))
        typer.echo(f"  translation: built from {info.get('aligned_documents', 0)} multilingual records' aligned "
                   f"claims + lexicons: {', '.join(used) or 'none'}")
        for name, d in info.get("directions", {}).items():
            if "composed" in d:
                typer.echo(f"    {name}: through English ({name[:2]}-en + en-{name[3:]}, composed at query time)")
            else:
                sources = " + ".join(d.get("sources", []))
                typer.echo(f"    {name}: {d.get('source_terms', 0)} source terms from {sources}")
    for lang, c in info.get("compounds", {}).items():
        lexicons = ", ".join(x for x in c.get("sources", []) if x != "corpus") or "none"
        typer.echo(f"  compounds ({lang}): split into parts known from {c['corpus_words']} corpus words and "
                   f"{c['dictionary_words']} dictionary words (lexicons: {lexicons})")
    for w in info.get("warnings", []):
        typer.echo(f"  warning: {w}")


def _echo_fusion(summary: dict[str, Any]) -> None:
    if "skipped" in summary:
        typer.echo(f"  fusion: BM25 only; no weights learned ({summary['skipped']})")
        return
    typer.echo(f"  fusion: {summary['dev_topics']} dev topic profiles {summary['tasks']}, {summary['folds']}-fold "
               f"cross-validation, {summary['seconds']:.1f} s (nDCG of each component alone; fused = held-out folds)")
    for line in summary["table"].splitlines():
        typer.echo(f"    {line}")
    for profile, p in summary["profiles"].items():
        state = "learned weights installed" if p["installed"] else "BM25 only"
        typer.echo(f"    queries {'with' if profile == 'codes' else 'without'} codes: {state} ({p['reason']})")


def fuse_command(
    index_dir: Path = typer.Argument(..., help="Index folder built with --models."),
    depths: str = typer.Option("40,200,400,1000", "--depths", help="Candidate depths to learn weights for."),
    task: str = typer.Option("auto", "--task", help="Dev topics: auto, xling or known-item (see training/fusion.py)."),
    topics: Path | None = typer.Option(None, "--topics", help="Dev topics (JSON lines) instead of a task."),
    qrels: Path | None = typer.Option(None, "--qrels", help="Qrels of --topics."),
    folds: int = typer.Option(5, "--folds", min=2, help="Cross-validation folds (by source publication)."),
    device: str = typer.Option("auto", "--device", help="auto, cpu or cuda."),
    plot: bool = typer.Option(True, "--plot/--no-plot", help="Write INDEX/fusion.png (dev nDCG vs depth)."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    progress: bool | None = typer.Option(None, "--progress/--no-progress", help="Progress bars on stderr."),
) -> None:
    """Learn fusion weights on dev topics, leak-free and cross-validated; install them only where they beat BM25."""
    import sys

    from service.index.folder import IndexFormatError, Layout
    from training.evaluation.trec import TrecFormatError, read_qrels, read_topics
    from training.fusion import FusionError, format_cells, learn_fusion, parse_depths

    try:
        if (topics is None) != (qrels is None):
            raise FusionError("--topics and --qrels go together")
        result = learn_fusion(
            index_dir,
            depths=parse_depths(depths),
            tasks=task,
            topics=read_topics(topics) if topics else None,
            qrels=read_qrels(qrels) if qrels else None,
            folds=folds,
            device=device,
            progress=sys.stderr.isatty() if progress is None else progress,
            plot=plot,
        )
    except (FusionError, IndexFormatError, TrecFormatError, OSError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    summary = {**result.summary(), "table": format_cells(result.cells)}
    if as_json:
        typer.echo(json.dumps({**summary, "fusion_json": str(index_dir / Layout.FUSION),
                               "plot": str(result.plot) if result.plot else None}, indent=1))
        return
    typer.echo(f"fusion weights -> {index_dir / Layout.FUSION}" + (f", plot {result.plot}" if result.plot else ""))
    _echo_fusion(summary)


def install_ranker_command(
    index_dir: Path = typer.Argument(..., help="An index folder already built (plain, live or sharded)."),
    ranker: str = typer.Option("default", "--ranker", help="default (the project's, the one `priorart build` "
                               "installs) or a ranker folder written by `priorart-lab experiment ranking "
                               "--ranker-out`."),
) -> None:
    """Install the learned ranker of /search's first documents into an index built without it (before one was
    written, or with --ranker none), every shard of a sharded one, without a rebuild. A running server uses it from
    its next load (POST /admin/reload); PRIORART_EVIDENCE_BY=passage keeps the passage rule."""
    from service.index.folder import IndexFormatError
    from training.ranker import install_into

    try:
        entries = install_into(index_dir, ranker)
    except (IndexFormatError, OSError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    e = entries[0]
    typer.echo(f"ranker ({e['kind']}, the first {e['docs']} documents of /search, from {e['source']}) installed into "
               f"{index_dir}" + (f" ({len(entries)} shards)" if len(entries) > 1 else ""))
    for i, entry in enumerate(entries):
        if "word_vectors" in entry:
            typer.echo(f"warning: {'shard ' + str(i) + ': ' if len(entries) > 1 else ''}no word vectors for its "
                       f"kernel features: {entry['word_vectors']}", err=True)


def register(app: typer.Typer) -> None:
    """Add the ``build``, ``fuse`` and ``install-ranker`` commands to the CLI."""
    app.command("build")(build_command)
    app.command("fuse")(fuse_command)
    app.command("install-ranker")(install_ranker_command)
