"""``priorart warmup --kernel-cache DIR``: the service's kernels compiled into a kernel cache (at the image's build).

numba compiles the first stage's and the passage ranker's loops at their first use (30-40 s from nothing, issue 35)
and caches them on disk. This command fills a cache folder with every variant a server uses: it loads a small
synthetic index (built in a temporary folder: no data is needed) as ``priorart serve`` does, which compiles the
kernels' warm-up variants and runs a first search and passage search per language, and writes ``kernel-cache.json``
(for which numba, Python, machine, CPU and package folder it holds code). ``priorart serve`` with
``PRIORART_KERNEL_CACHE=DIR`` then reads the kernels from it, read-only as it is (``service/startup.py``).

The CPU: ``generic`` (default) is the x86-64 baseline, which every x86-64 host runs, so that a cache made on the build
host is valid on any node; ``x86-64-v2``/``-v3``/``-v4`` are the later levels (a host without them compiles at
load, with a warning); ``host`` is numba's default (this CPU's own name and features: other CPUs compile at load).
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from service.startup import KernelReport

log = logging.getLogger(__name__)

CPUS = ("generic", "x86-64-v2", "x86-64-v3", "x86-64-v4", "host")


def warmup_command(
    kernel_cache: Path = typer.Option(..., "--kernel-cache", envvar="PRIORART_KERNEL_CACHE",
                                      help="Folder to fill (created; what it holds already is kept and added to)."),
    cpu: str = typer.Option("generic", "--cpu", help=f"CPU the kernels are compiled for: {', '.join(CPUS)}."),
    index: Path | None = typer.Option(None, "--index", help="Warm against this index folder instead of a small "
                                      "synthetic one built for the purpose."),
    docs: int = typer.Option(150, "--docs", min=10, help="Documents of the synthetic index."),
) -> None:
    """Compile the kernels into a kernel cache for `priorart serve` (PRIORART_KERNEL_CACHE)."""
    from service.startup import KERNEL_MODULES, cpu_flags, runs_here

    if cpu not in CPUS:
        raise typer.BadParameter(f"--cpu must be one of {', '.join(CPUS)}, got {cpu!r}")
    if "numba" in sys.modules or any(m in sys.modules for m in KERNEL_MODULES):
        typer.echo("error: numba was imported before the cache folder could be set; run `priorart warmup` in a "
                   "process of its own", err=True)
        raise typer.Exit(2)
    import platform

    why = runs_here(cpu, platform.machine(), cpu_flags())
    if why:  # the warm-up runs what it compiles
        typer.echo(f"error: this host cannot run the kernels: {why}", err=True)
        raise typer.Exit(2)
    kernel_cache = kernel_cache.absolute()
    kernel_cache.mkdir(parents=True, exist_ok=True)
    os.environ["NUMBA_CACHE_DIR"] = str(kernel_cache)
    for key in ("NUMBA_CPU_NAME", "NUMBA_CPU_FEATURES"):
        os.environ.pop(key, None)
    if cpu != "host":
        os.environ["NUMBA_CPU_NAME"], os.environ["NUMBA_CPU_FEATURES"] = cpu, ""
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="priorart-warmup-") as tmp:
        folder = index if index is not None else _synthetic_index(Path(tmp), docs)
        report = _warm(folder)
    from service.startup import write_manifest

    manifest = write_manifest(kernel_cache, report.variants, report.functions)
    typer.echo(f"kernel cache {kernel_cache}: {report.variants} variants of {report.functions} functions for CPU "
               f"{manifest['cpu_name']} (numba {manifest['numba']}, Python {manifest['python']}, "
               f"{manifest['machine']}); {report.compiled} compiled now, {report.loaded} were there; "
               f"{time.perf_counter() - started:.1f} s")


def _synthetic_index(tmp: Path, docs: int) -> Path:
    """A small trilingual index with translation tables from the corpus' aligned claims (no lexicon needed)."""
    from training.build import build_index
    from training.synth import generate

    out = tmp / "index"
    build_index(list(generate(docs, seed=0)), out, lexicons="", splitter_lexicons="", progress=False)
    return out


def _warm(folder: Path) -> KernelReport:
    from service.settings import Settings
    from service.startup import load_engine, warm_kernels

    engine = load_engine(folder, Settings(index_dir=folder), at_start=False)  # the kernels, a first query per language
    engine.close()
    return warm_kernels()  # the counts of this process (once warm, a no-op)


def register(app: typer.Typer) -> None:
    """Add the ``warmup`` command to the CLI."""
    app.command("warmup")(warmup_command)
