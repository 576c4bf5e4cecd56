"""``priorart-lab bench start``: how long ``priorart serve`` takes to be ready, cold and warm (issue 35).

The installation timed is the image's (:mod:`lab.benchmarks.install`: the wheel with the ``service`` extra in a
fresh virtual environment, offline), or this environment (``current_env``). Its kernel cache is filled once by its
own ``priorart warmup`` (as the Dockerfile does; not timed). Then, per index:

- ``no kernel cache``: an empty ``NUMBA_CACHE_DIR`` and no ``PRIORART_KERNEL_CACHE``: the kernels are compiled at
  load (the image before issue 35);
- ``cold``: a new container on a new node: an empty ``NUMBA_CACHE_DIR``, the kernel cache set, and the files of the
  index, of the kernel cache and of the installation (its ``site-packages`` and the interpreter's standard library)
  dropped from the page cache first (``posix_fadvise(DONTNEED)``: the next read comes from the disk);
- ``warm``: the same start again, nothing dropped (a restart of the container on the same node).

Each start is timed from the process's spawn to the first ``200`` of ``GET /ready`` (polled every 20 ms); the
server's own lines give the phases, the kernels compiled at start and the CPU level whose code it read from the
kernel cache (a host without AVX-512 reads the generic code, which the warm-up compiled in its own process; an
AVX-512 host the x86-64-v4 code, which a process of its own compiled: issue 57's starts, which compiled every kernel,
were of this kind only); then two ``POST /search`` (the index's first title) are timed.
Nothing here asserts a time: the figures are printed.
"""

from __future__ import annotations

import os
import re
import signal
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from lab.benchmarks.service import free_port

PHASES = ("python", "kernels", "checksums", "index files", "page-in", "first query")
_PHASE = re.compile(r"start-up: (python|kernels|checksums|index files|page-in|first query) ([0-9.]+) s")
_COMPILED = re.compile(r"start-up: kernels [0-9.]+ s: (\d+) of \d+ variants")
_LEVEL = re.compile(r"kernels: kernel cache .*?; (\S+) here")
KINDS = ("no kernel cache", "cold", "warm")


@dataclass
class Start:
    index: str
    kind: str
    ready_s: float
    phases: dict[str, float] = field(default_factory=dict)
    compiled: int = 0
    cpu: str = ""  # the CPU level of the kernel cache's code the server read ("": no kernel cache used)
    first_search_ms: float = float("nan")
    second_search_ms: float = float("nan")


def evict(paths: Iterable[Path]) -> int:
    """Drop the files under ``paths`` from the page cache (their clean pages: the next read comes from the disk);
    the bytes they hold."""
    total = 0
    for root in paths:
        files = [root] if root.is_file() else (p for p in root.rglob("*") if p.is_file() and not p.is_symlink())
        for path in files:
            try:
                fd = os.open(path, os.O_RDONLY)
            except OSError:
                continue
            try:
                total += os.fstat(fd).st_size
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)
    return total


def _http(port: int, method: str, path: str, body: bytes | None = None, timeout: float = 60.0) -> tuple[int, bytes]:
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers={"Content-Type": "application/json"} if body else {})
        res = conn.getresponse()
        return res.status, res.read()
    finally:
        conn.close()


def time_start(priorart: Path, index: Path, env: dict[str, str], *, kind: str, label: str, query: str,
               timeout_s: float = 900.0) -> Start:
    """One ``priorart serve`` from spawn to ready, its phases, two searches; the server is stopped after."""
    import json

    port = free_port()
    lines: list[str] = []
    started = time.perf_counter()
    proc = subprocess.Popen([str(priorart), "serve", str(index), "--port", str(port)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout or []), daemon=True)
    reader.start()
    try:
        while True:
            try:
                if _http(port, "GET", "/ready", timeout=5)[0] == 200:
                    break
            except OSError:
                pass
            if proc.poll() is not None:
                raise RuntimeError(f"priorart serve {index} exited ({proc.returncode}):\n" + "".join(lines[-20:]))
            if time.perf_counter() - started > timeout_s:
                raise RuntimeError(f"priorart serve {index} was not ready in {timeout_s:.0f} s")
            time.sleep(0.02)
        ready = time.perf_counter() - started
        body = json.dumps({"query": query, "k": 10}).encode()
        searches = []
        for _ in range(2):
            t = time.perf_counter()
            status, _ = _http(port, "POST", "/search", body)
            if status != 200:
                raise RuntimeError(f"POST /search answered {status}")
            searches.append((time.perf_counter() - t) * 1000)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        reader.join(5)
    phases, compiled, cpu = read_log("".join(lines))
    return Start(label, kind, ready, phases, compiled, cpu, searches[0], searches[1])


def read_log(text: str) -> tuple[dict[str, float], int, str]:
    """A server's start-up log: the seconds of each phase, the kernel variants compiled at start, and the CPU level
    whose code it read from the kernel cache ("": no kernel cache used)."""
    compiled, level = _COMPILED.search(text), _LEVEL.search(text)
    return ({m.group(1): float(m.group(2)) for m in _PHASE.finditer(text)}, int(compiled.group(1)) if compiled else 0,
            level.group(1) if level else "")


def installation_files(python: Path) -> list[Path]:
    """The folders an installation's imports read: its site-packages and the interpreter's standard library."""
    code = "import json, sysconfig; print(json.dumps([sysconfig.get_paths()[k] for k in ('purelib', 'platlib', " \
           "'stdlib', 'platstdlib')]))"
    import json

    out = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True).stdout
    return sorted({Path(p) for p in json.loads(out)})


def documents(index: Path) -> int:
    from service.index.store import DocStore

    docs = DocStore.load(index)
    try:
        return docs.n_live
    finally:
        docs.close()


def first_title(index: Path) -> str:
    """The first English title of the index (the timed searches' query)."""
    from service.index.store import DocStore

    docs = DocStore.load(index)
    try:
        for row in range(min(len(docs.ids), 100)):
            title = docs.header_row(row).title.get("en", "")
            if title.strip():
                return title
    finally:
        docs.close()
    raise ValueError(f"{index}: no English title among its first 100 documents")


def run_start_bench(indexes: Sequence[tuple[str, Path]], priorart: Path, python: Path, kernel_cache: Path, *,
                    rounds: int = 3, before: bool = True, log: Any = None) -> list[Start]:
    """Every kind of start of every index (``before``: the start without a kernel cache too), ``rounds`` cold and
    warm starts each, in turn (cold, warm, cold, warm, ...)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("NUMBA_", "PRIORART_"))}
    base.pop("VIRTUAL_ENV", None)
    base["PATH"] = f"{python.parent}{os.pathsep}{base.get('PATH', '')}"
    installed = installation_files(python)
    out: list[Start] = []
    for label, index in indexes:
        query = first_title(index)
        with tempfile.TemporaryDirectory(prefix="priorart-start-") as tmp:
            if before:
                env = {**base, "NUMBA_CACHE_DIR": str(Path(tmp) / "numba-none")}
                out.append(time_start(priorart, index, env, kind="no kernel cache", label=label, query=query))
                _say(log, out[-1])
            for r in range(rounds):
                runtime = Path(tmp) / f"numba-{r}"  # the container's empty NUMBA_CACHE_DIR
                env = {**base, "NUMBA_CACHE_DIR": str(runtime), "PRIORART_KERNEL_CACHE": str(kernel_cache)}
                evict([index, kernel_cache, *installed])
                out.append(time_start(priorart, index, env, kind="cold", label=label, query=query))
                _say(log, out[-1])
                out.append(time_start(priorart, index, env, kind="warm", label=label, query=query))
                _say(log, out[-1])
    return out


def _say(log: Any, s: Start) -> None:
    if log is not None:
        log(f"  {s.index}: {s.kind}: ready in {s.ready_s:.2f} s")


def summary(starts: Sequence[Start]) -> list[dict[str, Any]]:
    """Per index and kind: the median of its starts (ready, phases, first search) and their count."""
    rows = []
    for label in dict.fromkeys(s.index for s in starts):
        for kind in KINDS:
            group = [s for s in starts if s.index == label and s.kind == kind]
            if not group:
                continue
            med = statistics.median
            rows.append({"index": label, "kind": kind, "n": len(group), "ready_s": med(s.ready_s for s in group),
                         "ready_all_s": [round(s.ready_s, 2) for s in group],
                         "phases": {p: med(s.phases.get(p, float("nan")) for s in group) for p in PHASES},
                         "compiled": max(s.compiled for s in group),
                         "cpu": " / ".join(sorted({s.cpu for s in group if s.cpu})) or "-",
                         "first_search_ms": med(s.first_search_ms for s in group),
                         "second_search_ms": med(s.second_search_ms for s in group)})
    return rows


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    head = ["index", "start", "n", "ready s (median)", "each", *PHASES, "compiled", "kernels for", "1st /search ms",
            "2nd ms"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["index"], r["kind"], str(r["n"]), f"**{r['ready_s']:.2f}**", " ".join(map(str, r["ready_all_s"])),
                 *(f"{r['phases'][p]:.2f}" for p in PHASES), str(r["compiled"]), r["cpu"],
                 f"{r['first_search_ms']:.1f}", f"{r['second_search_ms']:.1f}"]
        lines.append("| " + " | ".join(cells) + " |")
    for label in dict.fromkeys(r["index"] for r in rows):
        by = {r["kind"]: r["ready_s"] for r in rows if r["index"] == label}
        if "cold" in by and "warm" in by:
            lines.append(f"{label}: cold / warm = {by['cold'] / by['warm']:.2f}")
    return "\n".join(lines)


def as_json(starts: Sequence[Start]) -> list[dict[str, Any]]:
    return [asdict(s) for s in starts]


def load_average() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"



def real_index(data: Path, cache_dir: Path, log: Any = None) -> Path:
    """The real patents of ``data`` ingested and built (``priorart ingest`` + ``priorart build``), kept in
    ``cache_dir/real`` for the next run."""
    out = cache_dir / "real" / "index"
    if (out / "meta.json").exists():
        return out
    from service.corpus.jsonl import write_corpus
    from training.build import build_index
    from training.ingest import iter_records

    corpus = cache_dir / "real" / "corpus.jsonl"
    corpus.parent.mkdir(parents=True, exist_ok=True)
    if log:
        log(f"building the real-data index in {out}")
    write_corpus(iter_records([data / "patents"]), corpus)
    build_index(corpus, out, progress=False, overwrite=True)
    return out


def synthetic_index(n: int, cache_dir: Path, log: Any = None) -> Path:
    """``priorart synth -n N`` then ``priorart build`` (defaults), kept in ``cache_dir/synth-N`` for the next run."""
    out = cache_dir / f"synth-{n}" / "index"
    if (out / "meta.json").exists():
        return out
    from training.build import build_index
    from training.synth import SynthConfig, write_synthetic

    corpus = cache_dir / f"synth-{n}" / "corpus.jsonl"
    corpus.parent.mkdir(parents=True, exist_ok=True)
    if log:
        log(f"building a {n}-document synthetic index in {out} (minutes)")
    if not corpus.exists():
        write_synthetic(corpus, SynthConfig(n=n, seed=0), progress=False)
    build_index(corpus, out, progress=False, overwrite=True)
    return out


def fill_kernel_cache(priorart: Path, python: Path, kernel_cache: Path) -> str:
    """The installation's own ``priorart warmup`` into ``kernel_cache`` (what the Dockerfile runs); its report."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NUMBA_", "PRIORART_"))}
    env.pop("VIRTUAL_ENV", None)
    env["PATH"] = f"{python.parent}{os.pathsep}{env.get('PATH', '')}"
    env["PRIORART_LOG_LEVEL"] = "WARNING"
    res = subprocess.run([str(priorart), "warmup", "--kernel-cache", str(kernel_cache)], capture_output=True,
                         text=True, env=env)
    if res.returncode != 0:
        raise RuntimeError(f"priorart warmup failed:\n{res.stdout[-2000:]}{res.stderr[-2000:]}")
    return res.stdout.strip().splitlines()[-1]
