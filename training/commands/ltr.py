"""Learning to rank and system combination: ``priorart train-ltr``, ``priorart orthogonality`` and
``priorart-lab experiment ltr`` (added to the ``experiment`` group)."""

from __future__ import annotations

import json
from pathlib import Path

import typer


def train_ltr_command(
    corpus: Path = typer.Argument(..., help="Corpus JSONL (the one the index and the neural models were built from)."),
    models: Path = typer.Option(..., "--models", help="Models folder: its split.json is reused when present; "
                                "the LTR models are written to MODELS_DIR/ltr/."),
    index: Path = typer.Option(..., "--index", help="Index folder: dev candidate lists come from its pipeline; "
                               "the document-side stores are built for its rows."),
    install: bool = typer.Option(False, "--install", help="Also copy MODELS_DIR/ltr to INDEX_DIR/ltr and register "
                                 "it in the index's meta.json (the service loads it from there)."),
    depth: int = typer.Option(100, "--depth", min=1, max=1000, help="First-stage candidates per dev topic."),
    query_meta: str = typer.Option("codes", "--query-meta", help="Query metadata the domain model is trained "
                                   "with, comma-separated among codes, applicants, inventors, citations, date, "
                                   "own_id ('' for text only). Beyond codes these identify the query's own "
                                   "publication in self-retrieval pairs."),
    l1: str = typer.Option("3e-4,1e-3", "--l1", help="l1 grid of the word-pair model (chosen on dev NDCG)."),
    epochs: int = typer.Option(12, "--epochs", min=1, help="Maximum epochs of the word-pair model."),
    neural: bool = typer.Option(True, "--neural/--no-neural", help="Use MODELS_DIR's neural models in LinLearn "
                                "when present."),
    seed: int = typer.Option(13, "--seed", help="Seed of every random choice."),
    as_json: bool = typer.Option(False, "--json", help="Print the ltr meta.json summary as JSON."),
) -> None:
    """Train the word-pair and domain models and the Borda / LinLearn weights into MODELS_DIR/ltr/."""
    from service.corpus.jsonl import CorpusFormatError
    from service.index.folder import IndexFormatError
    from training.ltr.data import LtrConfig
    from training.ltr.train import TrainLtrConfig, train_ltr
    from training.ltr.wordpair import WordPairConfig

    try:
        grid = tuple(float(x) for x in l1.split(",") if x.strip())
        meta_fields = tuple(x.strip() for x in query_meta.split(",") if x.strip())
        cfg = TrainLtrConfig(ltr=LtrConfig(seed=seed, query_meta=meta_fields),
                             wordpair=WordPairConfig(l1_grid=grid, epochs=epochs, seed=seed),
                             depth=depth, neural=neural)
        result = train_ltr(corpus, models, index, cfg, install=install)
    except (ValueError, FileNotFoundError, CorpusFormatError, IndexFormatError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    meta = result.meta
    comb = meta["dev"]["combination"]
    summary = {"ltr_dir": str(result.out_dir), "timings_s": meta["timings_s"],
               "dev": {"wordpair_ndcg": meta["dev"]["wordpair"]["ndcg"], "domain_ndcg": meta["dev"]["domain"]["ndcg"],
                       "combination": comb}, "notes": result.notes}
    if as_json:
        typer.echo(json.dumps(summary, indent=1))
        return
    typer.echo(f"ltr models written to {result.out_dir} in {meta['timings_s']['total']:.1f} s"
               + (f" and installed in {index / 'ltr'}" if install else ""))
    typer.echo(f"  word-pair: l1 {meta['dev']['wordpair']['l1']:g}, {meta['dev']['wordpair']['nnz']} non-zero weights, "
               f"dev NDCG {meta['dev']['wordpair']['ndcg']:.4f}; domain dev NDCG {meta['dev']['domain']['ndcg']:.4f}")
    if comb:
        typer.echo(f"  dev lists: {comb['topics']} topic profiles {comb['tasks']}; MAP single: "
                   + ", ".join(f"{k} {v:.4f}" for k, v in comb["map_single"].items()))
        for method in ("borda", "linlearn"):
            c = comb[method]
            typer.echo(f"  {method}: {'installable' if c['installable'] else 'not installable'} ({c['reason']}); "
                       + ", ".join(f"{k} {v:.2f}" for k, v in c["weights"].items()))
    for note in result.notes:
        typer.echo(f"  note: {note}")


def orthogonality_command(
    runs: list[Path] = typer.Argument(..., help="TREC run files (system name = file stem); at least two."),
    qrels: Path = typer.Option(..., "--qrels", help="Qrels file (qid 0 docid rel)."),
    out: Path | None = typer.Option(None, "-o", "--out", help="Folder for orthogonality.{md,csv,json,png}."),
    mode: str = typer.Option("auto", "--mode", help="auto | per-query | pooled: data points of the correlations "
                             "(per-query needs >= --min-points relevant documents retrieved by both)."),
    depth: int = typer.Option(1000, "--depth", min=1, help="Retrieved = within each run's first DEPTH documents."),
    k: int = typer.Option(100, "--k", min=1, help="Jaccard of the relevant documents in each top K."),
    min_points: int = typer.Option(3, "--min-points", min=2, help="Per-query mode: relevant documents needed."),
    kappa: float = typer.Option(0.5, "--kappa", min=0.0, max=1.0, help="Borda weight of the first run of a pair."),
) -> None:
    """Pearson / Kendall / Jaccard orthogonality and Borda combination of every pair of runs."""
    from training.evaluation.trec import TrecFormatError, read_qrels, read_run
    from training.ltr.orthogonality import markdown_table, orthogonality, write_report

    try:
        if len(runs) < 2:
            raise ValueError("give at least two run files")
        stems = [p.stem for p in runs]
        if len(set(stems)) != len(stems):
            raise ValueError(f"run file names must differ (system name = file stem): {stems}")
        report = orthogonality({p.stem: read_run(p) for p in runs}, read_qrels(qrels), mode=mode, depth=depth, k=k,
                               min_points=min_points, kappa=kappa)
    except (ValueError, OSError, TrecFormatError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    typer.echo(markdown_table(report), nl=False)
    if out is not None:
        paths = write_report(report, out)
        typer.echo("written: " + ", ".join(str(p) for p in paths.values()))


def register(app: typer.Typer) -> None:
    """Add ``train-ltr`` and ``orthogonality`` (the experiment over them: ``priorart-lab experiment ltr``,
    lab/commands/ltr.py)."""
    app.command("train-ltr")(train_ltr_command)
    app.command("orthogonality")(orthogonality_command)
