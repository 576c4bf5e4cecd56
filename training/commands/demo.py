"""``priorart demo``: data -> (models) -> index (with its translation tables) -> serve, in one command.

Each step runs the same CLI verb a user would run (as a subprocess, so its own progress and summary
show). Without ``--data`` the corpus is synthetic (``priorart synth``); with ``--data`` it is the real
patent XML under ``DATA/patents``, ``DATA/marec`` and ``DATA/ops`` (``priorart ingest``; those present).

Work folders. Each data source has its own (``runs/demo/synthetic``, ``runs/demo/real``; ``--workdir``
for another), and ``demo.json`` in it records the inputs of each step's output (the data source: the
synthetic size and seed, or the data folder's path and a fingerprint of its files; the training caps;
the models the index was built with). A later run reuses an output only when its inputs are the same,
says so, and rebuilds it (and what depends on it) otherwise; ``--fresh`` rebuilds everything.

Models. The neural models are not trained unless ``--train``: on the synthetic data no combination with
them beat BM25 on held-out topics (README, "Quick start"), and the real data has no leak-free dev topics to
learn one (``priorart build --models`` says so), so the fusion ranks by BM25 alone and the minutes of
training change no ranking. The demo says so in one line.

Stopping. The server runs as a child process in its own session: SIGTERM, SIGINT (Ctrl-C) or SIGHUP to
the demo is passed on to it, and the child is ended with the demo if the demo is killed (Linux). A
server stopped by a signal is "stopped", not a failed step. "serving http://..." is printed once the
server's ``/ready`` answers.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import FrameType
from typing import Any

import typer

DEMO_ROOT = Path("runs/demo")
INPUTS_FILE = "demo.json"
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
NO_TRAIN_LINE = ("models: not trained (--train to train them): {why}; the dense stage is the pretrained multilingual "
                 "encoder's, fused with word match (BM25)")
NO_TRAIN_WHY = {
    "synthetic": "weighed against BM25 on held-out synthetic topics, no combination with the models beat it",
    "real": "the real data has no leak-free dev topics to learn how to combine the models with BM25",
}


def default_workdir(data: Path | None) -> Path:
    """The work folder of a data source: ``runs/demo/synthetic`` or ``runs/demo/real``."""
    return DEMO_ROOT / ("synthetic" if data is None else "real")


def data_folders(data: Path) -> list[Path]:
    """The document folders of the real data folder ``data`` that the demo ingests, those present: the offices' XML,
    MAREC / CLEF-IP and EPO OPS full texts (``training.ingest.pipeline.SHARED_FOLDERS["all"]``)."""
    from training.ingest.pipeline import SHARED_FOLDERS

    return [data / name for name in SHARED_FOLDERS["all"] if (data / name).is_dir()]


def data_fingerprint(data: Path) -> dict[str, Any]:
    """The real data folder as the demo's corpus depends on it: its path and its document files (names, sizes,
    modification times; the files are not read)."""
    files = sorted(p for folder in data_folders(data) for p in folder.rglob("*") if p.is_file())
    h = hashlib.sha256()
    total = 0
    for p in files:
        st = p.stat()
        total += st.st_size
        h.update(f"{p.relative_to(data)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return {"source": "data", "path": str(data.resolve()), "files": len(files), "bytes": total,
            "sha256": h.hexdigest()[:16]}


def _describe(inputs: dict[str, Any]) -> str:
    if inputs.get("source") == "synthetic":
        return f"synthetic, {inputs['n']} documents, seed {inputs['seed']}"
    if inputs.get("source") == "data":
        return f"{inputs['path']}, {inputs['files']} files"
    corpus = _describe(inputs.get("corpus") or {})
    if "models" in inputs:  # the index
        return f"{corpus}, {'with models' if inputs['models'] else 'no models'}"
    return f"{corpus}, {inputs.get('epochs')} epochs, at most {inputs.get('max_train_topics')} training topics"


class Steps:
    """The inputs each output of a work folder was made from (``demo.json``), and whether it can be reused."""

    def __init__(self, workdir: Path) -> None:
        self.path = workdir / INPUTS_FILE
        try:
            self.made: dict[str, Any] = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            self.made = {}

    def reuse(self, name: str, output: Path, inputs: dict[str, Any], *, marker: str | None = None) -> bool:
        """Whether ``output`` (a folder: its file ``marker``) exists and was made from ``inputs`` (said either way,
        when it exists). When not, the record is dropped until :meth:`done`: a step that fails half-way leaves an
        output nothing reuses."""
        before = self.made.get(name)
        exists = (output / marker if marker else output).exists()
        if exists and before == inputs:
            typer.echo(f"   {name}: reusing {output} ({_describe(inputs)})", err=True)
            return True
        if exists:
            why = "made by an earlier demo that did not record its inputs" if before is None else (
                f"made from other inputs ({_describe(before)}; now {_describe(inputs)})")
            typer.echo(f"   {name}: {output} was {why}: rebuilding it", err=True)
        if self.made.pop(name, None) is not None:
            self._save()
        return False

    def done(self, name: str, inputs: dict[str, Any]) -> None:
        self.made[name] = inputs
        self._save()

    def _save(self) -> None:
        self.path.write_text(json.dumps(self.made, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """The child gets SIGTERM when the demo dies, even by SIGKILL (Linux prctl PR_SET_PDEATHSIG)."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, int(signal.SIGTERM))


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1.0) as resp:
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _warm_kernels_beside() -> subprocess.Popen[bytes]:
    """The server's compiled kernels put into numba's cache by a process of their own at the lowest priority, while
    the demo makes its corpus and index: the server then reads them instead of compiling them before it answers
    (issue 57: the first serve compiled 59 of 61 variants, 20 s; where they are cached already this takes about a
    second)."""
    return subprocess.Popen([sys.executable, "-c", "import os; os.nice(19); from service.startup import warm_kernels; "
                             "warm_kernels()"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            preexec_fn=_die_with_parent)


READY_LINE = "   ready {seconds:.0f} s after the demo started"
"""Said once the server answers: the time a user waits (tests/test_readme.py holds the README's figure to it)."""


def _run(step: str, args: list[str], *, ready_url: str | None = None, serving: str = "",
         began: float | None = None) -> None:
    """Run ``priorart ARGS`` as a child in its own session; a stop signal to the demo is passed on to it. With
    ``ready_url`` (the server): ``serving`` is printed when that URL answers (with :data:`READY_LINE`, counted from
    ``began``), and a stop by a signal is not an error."""
    typer.secho(f"\n== {step}: priorart {' '.join(args)}", bold=True, err=True)
    started = time.perf_counter()
    received: list[int] = []
    proc = subprocess.Popen([sys.executable, "-m", "training.cli", *args], start_new_session=True,
                            preexec_fn=_die_with_parent)

    def forward(signum: int, _frame: FrameType | None) -> None:
        received.append(signum)
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM if signum == signal.SIGHUP else signum)

    previous = {s: signal.signal(s, forward) for s in STOP_SIGNALS}
    try:
        if ready_url is not None:
            while proc.poll() is None and not received:
                if _ready(ready_url):
                    typer.secho(serving, bold=True, err=True)
                    if began is not None:
                        typer.echo(READY_LINE.format(seconds=time.perf_counter() - began), err=True)
                    break
                time.sleep(0.2)
        rc = proc.wait()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        if proc.poll() is None:  # an exception here: the child does not outlive the demo
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
    by_signal = -rc in {int(s) for s in STOP_SIGNALS}
    if received or by_signal:
        name = signal.Signals(received[0] if received else -rc).name
        if ready_url is not None:
            typer.echo(f"   server stopped ({name})", err=True)
            return
        typer.echo(f"   {step} stopped ({name})", err=True)
        raise typer.Exit(128 + int(received[0] if received else -rc))
    if rc != 0:
        typer.echo(f"error: step '{step}' failed (exit {rc})", err=True)
        raise typer.Exit(rc)
    typer.echo(f"   {step} done in {time.perf_counter() - started:.1f} s", err=True)


def _synthetic_dev_task(corpus: Path, split_path: Path, out: Path, seed: int) -> tuple[Path, Path]:
    """Dev-split topics of the synthetic corpus (title+abstract or de/fr claim -> cited documents)."""
    from service.corpus.jsonl import read_corpus
    from training.evaluation.trec import Topic, write_qrels, write_topics
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
    workdir: Path | None = typer.Option(None, "--workdir", help="Where corpus, models and index go (default: "
                                        "runs/demo/synthetic, or runs/demo/real with --data)."),
    train: bool = typer.Option(False, "--train/--no-train", help="Train the neural models (dense + rerank); off by "
                               "default: on the demo's data they do not beat BM25, which then ranks alone."),
    max_train_topics: int = typer.Option(1000, "--max-train-topics", help="Cap on training topics (demo speed)."),
    epochs: int = typer.Option(3, "--epochs", help="Ranker / dual-encoder epochs (demo speed)."),
    serve: bool = typer.Option(True, "--serve/--no-serve", help="Serve the index when it is built."),
    host: str = typer.Option("127.0.0.1", "--host"),
    port: int = typer.Option(8000, "--port"),
    fresh: bool = typer.Option(False, "--fresh", help="Rebuild every step even if its output exists."),
    seed: int = typer.Option(0, "--seed"),
) -> None:
    """Build a demo index (synthetic or real data) and serve the API + web UI on localhost."""
    began = time.perf_counter()
    kernels = _warm_kernels_beside() if serve else None
    workdir = workdir if workdir is not None else default_workdir(data)
    if fresh and workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    typer.echo(f"work folder {workdir} ({'synthetic data' if data is None else f'data from {data}'})", err=True)
    steps = Steps(workdir)
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
        source = data_fingerprint(data)
        if not steps.reuse("corpus", corpus, source):
            _run("ingest", ["ingest", *(str(p) for p in data_folders(data)), "-o", str(corpus)])
            steps.done("corpus", source)
    else:
        cpc = workdir / "scheme.tsv.gz"  # the synthetic corpus' own classification (for DeepWalk)
        source = {"source": "synthetic", "n": n, "seed": seed}
        if not steps.reuse("corpus", corpus, source) or not cpc.exists():
            _run("synth", ["synth", "-n", str(n), "-o", str(corpus), "--seed", str(seed), "--scheme", str(cpc)])
            steps.done("corpus", source)
    # `priorart build` trains the translation tables (every direction) and the compound splitter itself
    build_args = ["build", str(corpus), "-o", str(index), "--force", "--cpc", str(cpc) if cpc is not None else "none"]
    trained: dict[str, Any] | None = None
    if train:
        trained = {"corpus": source, "seed": seed, "max_train_topics": max_train_topics, "epochs": epochs,
                   "cpc": str(cpc) if cpc is not None else None}
        if not steps.reuse("models", models, trained, marker="meta.json"):
            train_args = ["train", str(corpus), "-o", str(models), "--seed", str(seed),
                          "--max-train-topics", str(max_train_topics), "--epochs", str(epochs)]
            if cpc is not None:
                train_args += ["--cpc", str(cpc)]
            _run("train models", train_args)
            steps.done("models", trained)
        build_args += ["--models", str(models)]
    else:
        typer.echo("   " + NO_TRAIN_LINE.format(why=NO_TRAIN_WHY["synthetic" if data is None else "real"]), err=True)
    built = {"corpus": source, "models": trained, "dense": "pretrained" if not train else "trained"}
    if not steps.reuse("index", index, built, marker="meta.json"):
        _run("build index", build_args)
        if train and data is None:
            topics, qrels = _synthetic_dev_task(corpus, models / "split.json", workdir / "dev-task", seed)
            _run("learn fusion weights", ["fuse", str(index), "--topics", str(topics), "--qrels", str(qrels)])
        steps.done("index", built)
    if serve:
        if kernels is not None and kernels.wait() != 0:
            typer.echo("   kernels: compiling them beside the build failed; the server compiles them", err=True)
        args = ["serve", str(index), "--host", host, "--port", str(port)]
        if cpc is not None:
            args += ["--cpc", str(cpc)]
        probe = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
        _run("serve", args, ready_url=f"http://{probe}:{port}/ready",
             serving=f"\nserving http://{host}:{port}/  (API docs at /docs; Ctrl-C stops)", began=began)


def register(app: typer.Typer) -> None:
    """Add the ``demo`` command to the CLI."""
    app.command("demo")(demo_command)
