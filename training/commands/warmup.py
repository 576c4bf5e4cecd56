"""``priorart warmup --kernel-cache DIR``: the service's kernels compiled into a kernel cache (at the image's build).

numba compiles the first stage's and the passage ranker's loops at their first use (30-40 s from nothing, issue 35)
and caches them on disk. This command fills a cache folder with every variant a server uses: it loads a small
synthetic index (built in a temporary folder: no data is needed) as ``priorart serve`` does, which compiles the
kernels' warm-up variants and runs a first search and passage search per language, and writes ``kernel-cache.json``
(for which numba, Python, machine, CPU and package folder it holds code). ``priorart serve`` with
``PRIORART_KERNEL_CACHE=DIR`` then reads the kernels from it, read-only as it is (``service/startup.py``).

The CPU: numba keys compiled code by the CPU it was compiled for (by default the host's own name and features, so a
cache made on the build host misses on any other CPU). ``--cpu`` names x86-64 levels instead, best first: the last
(``generic``, the baseline every x86-64 CPU runs) is compiled by the warm-up itself, which runs it; the others
(``x86-64-v4``: AVX-512) are compiled from the signatures it recorded, in a process each, without running them, so
the build host need not have those instructions. ``priorart serve`` picks the first level its CPU runs. ``host``
alone: numba's default (this CPU only; other CPUs compile at load, with a warning).
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

CPUS = ("x86-64-v4", "x86-64-v3", "x86-64-v2", "generic", "host")
DEFAULT_CPUS = "x86-64-v4,generic"
"""AVX-512 hosts run the x86-64-v4 code (as fast as code compiled for the host itself, /search p50 ~12 % below the
generic code's on the 100k index; x86-64-v3 measured no faster than generic), every other x86-64 host the generic
code (docs/DEPLOYMENT.md, Start-up)."""


def warmup_command(
    kernel_cache: Path = typer.Option(..., "--kernel-cache", envvar="PRIORART_KERNEL_CACHE",
                                      help="Folder to fill (created; what it holds already is kept and added to)."),
    cpu: str = typer.Option(DEFAULT_CPUS, "--cpu", help="CPU levels the kernels are compiled for, best first "
                            f"(comma-separated: {', '.join(CPUS)}; host alone). The last is run here (this host "
                            "must run it), the others are compiled from its signatures without running."),
    index: Path | None = typer.Option(None, "--index", help="Warm against this index folder instead of a small "
                                      "synthetic one built for the purpose."),
    docs: int = typer.Option(150, "--docs", min=10, help="Documents of the synthetic index."),
) -> None:
    """Compile the kernels into a kernel cache for `priorart serve` (PRIORART_KERNEL_CACHE)."""
    import platform

    from service.startup import KERNEL_MODULES, cpu_flags, runs_here

    cpus = list(dict.fromkeys(c.strip() for c in cpu.split(",") if c.strip()))
    bad = [c for c in cpus if c not in CPUS]
    if bad or not cpus or ("host" in cpus and len(cpus) > 1):
        raise typer.BadParameter(f"--cpu takes levels of {', '.join(CPUS[:-1])}, best first, or host alone; "
                                 f"got {cpu!r}")
    if "numba" in sys.modules or any(m in sys.modules for m in KERNEL_MODULES):
        typer.echo("error: numba was imported before the cache folder could be set; run `priorart warmup` in a "
                   "process of its own", err=True)
        raise typer.Exit(2)
    if platform.machine() not in ("x86_64", "AMD64") and any(c.startswith("x86-64") for c in cpus):
        typer.echo(f"error: x86-64 levels on a {platform.machine()} machine: use --cpu generic (or host)", err=True)
        raise typer.Exit(2)
    run_cpu = cpus[-1]
    why = runs_here(run_cpu, platform.machine(), cpu_flags())
    if why:  # the warm-up runs what it compiles for the last level
        typer.echo(f"error: this host cannot run the kernels it compiles for {run_cpu} ({why}): end --cpu with a "
                   "level it runs (generic)", err=True)
        raise typer.Exit(2)
    kernel_cache = kernel_cache.absolute()
    kernel_cache.mkdir(parents=True, exist_ok=True)
    env = _numba_env(kernel_cache, run_cpu)
    os.environ.update(env)
    for key in ("NUMBA_CPU_NAME", "NUMBA_CPU_FEATURES"):
        if key not in env:
            os.environ.pop(key, None)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="priorart-warmup-") as tmp:
        folder = index if index is not None else _synthetic_index(Path(tmp), docs)
        report = _warm(folder)
        lines = [f"{run_cpu}: {report.compiled} compiled now, {report.loaded} were there (run here)"]
        if len(cpus) > 1:
            from service.startup import record_signatures

            signatures = Path(tmp) / "signatures.pickle"
            record_signatures(signatures)
            lines += [_compile_for(kernel_cache, other, signatures) for other in cpus[:-1]]
    from service.startup import write_manifest

    manifest = write_manifest(kernel_cache, cpus, report.variants, report.functions)
    typer.echo(f"kernel cache {kernel_cache}: {report.variants} variants of {report.functions} functions for CPU "
               f"{' / '.join(cpus)} (numba {manifest['numba']}, Python {manifest['python']}, {manifest['machine']}); "
               f"{'; '.join(lines)}; {time.perf_counter() - started:.1f} s")


def _numba_env(kernel_cache: Path, cpu: str) -> dict[str, str]:
    env = {"NUMBA_CACHE_DIR": str(kernel_cache)}
    if cpu != "host":
        env.update(NUMBA_CPU_NAME=cpu, NUMBA_CPU_FEATURES="")
    return env


def _compile_for(kernel_cache: Path, cpu: str, signatures: Path) -> str:
    """The recorded signatures compiled for ``cpu`` in a process of its own (numba reads its CPU once), from the
    package this process imported.

    ``-P``: ``python -m`` puts the current folder first on ``sys.path``, so run in a checkout of the project (a
    folder with a ``service`` package) the process compiled that tree's kernels, which numba files under a folder
    named after that tree's path; a server of the installed package then found none of this level in the cache and
    compiled all of them at every start (issue 57: 61 of 61 variants, ready after 23 s). The package it compiled is
    checked against this one all the same (``PYTHONPATH`` is passed on)."""
    import json
    import subprocess

    from service.startup import host_description

    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    env.update(_numba_env(kernel_cache, cpu))
    res = subprocess.run([sys.executable, "-P", "-m", "service.startup", "compile", str(signatures)],
                         capture_output=True, text=True, env=env)
    if res.returncode != 0:
        typer.echo(f"error: compiling the kernels for {cpu} failed:\n{res.stderr[-3000:]}", err=True)
        raise typer.Exit(2)
    report = json.loads(res.stdout.strip().splitlines()[-1])
    package = host_description()["package"]
    if report.get("package") != package:
        typer.echo(f"error: the kernels for {cpu} were compiled from the package at {report.get('package')}, not "
                   f"from this one at {package}: a server of this one would not find them (PYTHONPATH?)", err=True)
        raise typer.Exit(2)
    return f"{cpu}: {report['compiled']} compiled now, {report['loaded']} were there (not run)"


def _synthetic_index(tmp: Path, docs: int) -> Path:
    """A small trilingual index with translation tables from the corpus' aligned claims (no lexicon needed)."""
    from training.build import build_index
    from training.synth import generate

    out = tmp / "index"
    # (no dense stage: the kernels are the first stage's and the passages'; a wheel with the service extra alone has
    # no pretrained weights to build one from)
    build_index(list(generate(docs, seed=0)), out, lexicons="", splitter_lexicons="", progress=False, dense=False)
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
