"""``priorart-lab bench demo``: the README's demo as a new machine runs it, timed to its ``ready ... s`` line.

The demo (5,000 synthetic patents by default) runs in a new work folder with numba's cache and the document vector
cache empty, as on a machine that has only run the set-up; the figure is the demo's own ``ready N s after the demo
started``. The report sets it beside the time the README quotes (``README_QUOTE``), so a quote that no longer holds is
seen, and says whether the server read the kernels from numba's cache (the demo compiles them beside its build).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lab.benchmarks.service import free_port

REPO = Path(__file__).resolve().parents[2]
README_QUOTE = re.compile(r"The first run generates 5,000 synthetic patents, builds the index and serves it in about "
                          r"(?P<seconds>\d+) s")
READY = re.compile(r"ready (\d+) s after the demo started")


def readme_seconds(readme: Path = REPO / "README.md") -> int | None:
    """The time the README quotes for the synthetic demo's first run (None: no such sentence)."""
    m = README_QUOTE.search(" ".join(readme.read_text(encoding="utf-8").split()))
    return int(m.group("seconds")) if m else None


def run_demo(args: list[str], *, timeout_s: float = 900.0, log: Callable[[str], None] = lambda _: None
             ) -> dict[str, Any]:
    """``priorart demo ARGS`` in a new temporary work folder with empty caches, stopped once it is ready; the
    seconds it says it took, the wall time to that line and the start-up kernel line."""
    with tempfile.TemporaryDirectory(prefix="priorart-bench-demo-") as tmp:
        env = {**os.environ, "NUMBA_CACHE_DIR": str(Path(tmp) / "numba"),
               "PRIORART_VECTOR_CACHE": str(Path(tmp) / "vectors.sqlite")}  # (a new machine's)
        cmd = [sys.executable, "-m", "training.cli", "demo", "--workdir", str(Path(tmp) / "demo"),
               "--port", str(free_port()), *args]
        began = time.monotonic()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=REPO)
        said: float | None = None
        lines: list[str] = []
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.append(line)
                log(line.rstrip())
                m = READY.search(line)
                if m:
                    said = float(m.group(1))
                    break
                if time.monotonic() - began > timeout_s:
                    break
            wall = time.monotonic() - began
        finally:
            proc.terminate()
            proc.wait(timeout=60)
    kernels = next((line.strip() for line in lines if "start-up: kernels" in line), None)
    cached = bool(kernels and "read from numba's cache" in kernels and "compiled here" not in kernels)
    return {"ready_s": said, "wall_s": round(wall, 1), "kernels": kernels, "kernels_from_cache": cached,
            "output_tail": "".join(lines[-40:])}


def demo_report(args: list[str], *, log: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """The demo's figure beside the README's quote (``quoted_over_measured``: the README is right within 2x when it
    is between 0.5 and 2)."""
    load = os.getloadavg()[0]
    run = run_demo(args, log=log)
    quoted = readme_seconds()
    ratio = round(quoted / run["ready_s"], 2) if quoted and run["ready_s"] else None
    return {"args": args, **run, "readme_quote_s": quoted, "quoted_over_measured": ratio,
            "load_average": load, "cpus": os.cpu_count()}


def format_report(r: dict[str, Any]) -> str:
    if r["ready_s"] is None:
        return "the demo did not get ready:\n" + r["output_tail"]
    command = " ".join(["priorart demo", *r["args"]])
    lines = [f"{command}: ready {r['ready_s']:.0f} s after it started (new work folder, "
             f"numba's cache and the vector cache empty; load average {r['load_average']:.2f} before, "
             f"{r['cpus']} CPUs)",
             f"  kernels: {r['kernels'] or 'no start-up line'}"]
    if r["readme_quote_s"] is None:
        lines.append("  the README quotes no demo time")
    else:
        verdict = "holds" if 0.5 <= (r["quoted_over_measured"] or 0) <= 2 else "does NOT hold (off by over 2x)"
        lines.append(f"  the README quotes about {r['readme_quote_s']} s: {r['quoted_over_measured']}x the measured "
                     f"time, the quote {verdict}")
    return "\n".join(lines)
