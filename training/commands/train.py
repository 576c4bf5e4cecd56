"""``priorart train CORPUS.jsonl -o MODELS_DIR``: word2vec, DeepWalk, rankers, dual encoder, ONNX export."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer


def train_command(
    corpus: Path = typer.Argument(..., help="Corpus JSONL (from `priorart ingest` or `priorart synth`); .gz is fine."),
    output: Path = typer.Option(
        ..., "-o", "--output", help="Models folder to write (created; an old models folder is replaced)."
    ),
    cpc: Path | None = typer.Option(
        None,
        "--cpc",
        help="CPC title list (cpc-titles-*.tsv.gz) for the DeepWalk "
        "graph; default: the shared data folder's when present, else the codes' "
        "syntactic tree.",
    ),
    epochs: int | None = typer.Option(
        None,
        "--epochs",
        min=1,
        help="Maximum epochs of the rankers and the dual encoder (early stopping on dev NDCG may stop sooner).",
    ),
    seed: int = typer.Option(13, "--seed", help="Seed of every random choice (split is fixed by hashing)."),
    device: str = typer.Option("auto", "--device", help="auto (CUDA when available), cpu or cuda."),
    threads: int = typer.Option(
        1, "--threads", min=1, help="torch CPU threads (1 is fastest when other jobs share the cores)."
    ),
    max_train_topics: int = typer.Option(5000, "--max-train-topics", min=1, help="Cap on training queries."),
    max_pool_docs: int = typer.Option(
        20000,
        "--max-pool-docs",
        min=10,
        help="Cap on the negative documents held for training (judged documents are always kept).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print meta.json's summary as JSON."),
    progress: bool | None = typer.Option(
        None, "--progress/--no-progress", help="Progress bars on stderr (default: on a TTY)."
    ),
) -> None:
    """Train every neural model on a corpus and write a self-describing models folder."""
    from service.corpus.jsonl import CorpusFormatError
    from training.models.train import TrainConfig, train_models

    try:
        cfg = TrainConfig(
            seed=seed,
            epochs=epochs,
            device=device,
            threads=threads,
            max_train_topics=max_train_topics,
            max_pool_docs=max_pool_docs,
            progress=sys.stderr.isatty() if progress is None else progress,
        )
        result = train_models(corpus, output, cpc=cpc, config=cfg)
    except (ValueError, FileNotFoundError, FileExistsError, RuntimeError, CorpusFormatError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    meta = result.meta
    summary = {
        "models_dir": str(result.out_dir),
        "device": meta["device"]["used"],
        "split": meta["split"],
        "data": meta["data"],
        "timings_s": meta["timings_s"],
        "dev_ndcg": {k: v.get("ndcg") for k, v in meta["dev"].items() if isinstance(v, dict) and "ndcg" in v},
        "baselines": meta["dev"]["baselines"],
        "deepwalk_siblings": meta["deepwalk"]["siblings"],
    }
    if as_json:
        typer.echo(json.dumps(summary, indent=1))
        return
    typer.echo(f"models written to {result.out_dir} on {summary['device']} in {meta['timings_s']['total']:.1f} s")
    typer.echo("  times: " + ", ".join(f"{k} {v:.1f}s" for k, v in meta["timings_s"].items()))
    typer.echo("  dev NDCG: " + ", ".join(f"{k} {v:.4f}" for k, v in summary["dev_ndcg"].items()))
    typer.echo("  baselines: " + ", ".join(f"{k} {v:.4f}" for k, v in summary["baselines"].items()))
    s = summary["deepwalk_siblings"]
    typer.echo(f"  DeepWalk: sibling cosine {s['sibling_mean']:.3f} vs unrelated {s['unrelated_mean']:.3f}")


def register(app: typer.Typer) -> None:
    """Add the ``train`` command to the CLI."""
    app.command("train")(train_command)
