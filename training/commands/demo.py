"""``priorart demo``: data -> (models) -> index (with its translation tables) -> serve, in one command.

Each step runs the same CLI verb a user would run (as a subprocess, so its own progress and summary
show), in a work folder that is reused: a step whose output already exists is skipped unless
``--fresh``. Without ``--data`` the corpus is synthetic (``priorart synth``); with ``--data`` it is
the real patent XML under ``DATA/patents`` (``priorart ingest``).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import typer


def _run(step: str, args: list[str]) -> None:
    typer.secho(f"\n== {step}: priorart {' '.join(args)}", bold=True, err=True)
    started = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "training.cli", *args], check=False)
    if res.returncode != 0:
        typer.echo(f"error: step '{step}' failed (exit {res.returncode})", err=True)
        raise typer.Exit(res.returncode)
    typer.echo(f"   {step} done in {time.perf_counter() - started:.1f} s", err=True)


def _synthetic_dev_task(corpus: Path, split_path: Path, out: Path, seed: int) -> tuple[Path, Path]:
    """Dev-split topics of the synthetic corpus (title+abstract or de/fr claim -> cited documents)."""
    from service.corpus.jsonl import read_corpus
    from service.evaluation.trec import Topic, write_qrels, write_topics
    from training.synth import synth_topics

    records = list(read_corpus(corpus))
    dev = set(json.loads(split_path.read_text(encoding="utf-8"))["dev"])
    topics, qrels = synth_topics(records, min(1500, len(records) // 2), seed=seed)
    chosen = [t for t in topics if t["source_id"] in dev]  # the rankers never trained on these queries
    out.mkdir(parents=True, exist_ok=True)
    write_topics([Topic.model_validate(t) for t in chosen], out / "topics.jsonl")
    write_qrels({t["qid"]: qrels[t["qid"]] for t in chosen}, out / "qrels.txt")
    typer.echo(f"   {len(chosen)} dev topics for the fusion weights -> {out}", err=True)
    return out / "topics.jsonl", out / "qrels.txt"


def demo_command(
    data: Path | None = typer.Option(None, "--data", help="Real data folder (with patents/ and cpc/), e.g. "
                                     "../shared/data. Default: synthetic patents."),
    n: int = typer.Option(5_000, "-n", "--n", help="Synthetic documents to generate (without --data)."),
    workdir: Path = typer.Option(Path("runs/demo"), "--workdir", help="Where corpus, models and index go."),
    train: bool = typer.Option(True, "--train/--no-train", help="Train the neural models (dense + rerank)."),
    max_train_topics: int = typer.Option(1000, "--max-train-topics", help="Cap on training topics (demo speed)."),
    epochs: int = typer.Option(3, "--epochs", help="Ranker / dual-encoder epochs (demo speed)."),
    serve: bool = typer.Option(True, "--serve/--no-serve", help="Serve the index when it is built."),
    host: str = typer.Option("127.0.0.1", "--host"),
    port: int = typer.Option(8000, "--port"),
    fresh: bool = typer.Option(False, "--fresh", help="Rebuild every step even if its output exists."),
    seed: int = typer.Option(0, "--seed"),
) -> None:
    """Build a demo index (synthetic or real data) and serve the API + web UI on localhost."""
    if fresh and workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    corpus = workdir / "corpus.jsonl"
    models = workdir / "models"
    index = workdir / "index"
    cpc: Path | None = None
    if data is not None:
        if not (data / "patents").is_dir():
            typer.echo(f"error: {data} has no patents/ folder (expected e.g. ../shared/data)", err=True)
            raise typer.Exit(2)
        cand = data / "cpc" / "cpc-titles-2025-05.tsv.gz"
        cpc = cand if cand.exists() else None
        if not corpus.exists():
            _run("ingest", ["ingest", str(data / "patents"), "-o", str(corpus)])
    else:
        cpc = workdir / "scheme.tsv.gz"  # the synthetic corpus' own classification (for DeepWalk)
        if not corpus.exists() or not cpc.exists():
            _run("synth", ["synth", "-n", str(n), "-o", str(corpus), "--seed", str(seed), "--scheme", str(cpc)])
    # `priorart build` trains the translation tables (every direction) and the compound splitter itself
    build_args = ["build", str(corpus), "-o", str(index), "--force"]
    if train:
        if not (models / "meta.json").exists():
            train_args = ["train", str(corpus), "-o", str(models), "--seed", str(seed),
                          "--max-train-topics", str(max_train_topics), "--epochs", str(epochs)]
            if cpc is not None:
                train_args += ["--cpc", str(cpc)]
            _run("train models", train_args)
        build_args += ["--models", str(models)]
    if not (index / "meta.json").exists() or fresh:
        _run("build index", build_args)
        if train and data is None:
            topics, qrels = _synthetic_dev_task(corpus, models / "split.json", workdir / "dev-task", seed)
            _run("learn fusion weights", ["fuse", str(index), "--topics", str(topics), "--qrels", str(qrels)])
    if serve:
        args = ["serve", str(index), "--host", host, "--port", str(port)]
        if cpc is not None:
            args += ["--cpc", str(cpc)]
        typer.secho(f"\nserving http://{host}:{port}/  (API docs at /docs; Ctrl-C stops)", bold=True, err=True)
        _run("serve", args)


def register(app: typer.Typer) -> None:
    """Add the ``demo`` command to the CLI."""
    app.command("demo")(demo_command)
