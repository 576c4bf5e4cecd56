"""``priorart-lab bench start`` reads the server's start-up lines: the phases, the kernels compiled at start and the CPU
level of the kernel cache's code it read (issue 57: the starts that compiled every kernel were those of an AVX-512
host, which reads the x86-64-v4 code; the figures had been measured on a host that read the generic code)."""

from __future__ import annotations

from pathlib import Path

from lab.benchmarks.start import Start, format_table, read_log, summary
from service.startup import KERNEL_CACHE_FORMAT, KERNEL_CACHE_VERSION, MANIFEST, X86_LEVELS, plan_kernel_cache
from service.versioned import write_versioned

HOST = {"numba": "0.68.1", "python": "3.11", "machine": "x86_64", "package": "/opt/venv/site-packages/service"}


def _line(tmp_path: Path, flags: frozenset[str]) -> str:
    cache = tmp_path / "kernel-cache"
    cache.mkdir(exist_ok=True)
    write_versioned(cache / MANIFEST, KERNEL_CACHE_FORMAT, KERNEL_CACHE_VERSION,
                    {**HOST, "cpus": ["x86-64-v4", "generic"]})
    plan = plan_kernel_cache(cache, {"NUMBA_CACHE_DIR": str(tmp_path / "run")}, HOST, flags, writable=False)
    return f"2026-12-06 09:45:08,610 INFO service.startup: kernels: {plan.line}: 206 files in 0.04 s\n"


def test_the_cpu_level_read_and_the_kernels_compiled_come_from_the_servers_lines(tmp_path: Path) -> None:
    compiled = ("2026-12-06 09:45:29,324 WARNING service.startup: start-up: kernels 20.24 s: 61 of 61 variants of 48 "
                "functions compiled here (not in numba's cache /tmp/run: see the kernel cache line above)\n"
                "2026-12-06 09:45:30,385 INFO service.startup: start-up: first query 0.32 s (6 searches)\n")
    phases, n, cpu = read_log(_line(tmp_path, X86_LEVELS["x86-64-v4"]) + compiled)
    assert (phases, n, cpu) == ({"kernels": 20.24, "first query": 0.32}, 61, "x86-64-v4")
    assert read_log(_line(tmp_path, X86_LEVELS["x86-64-v3"]))[2] == "generic"
    assert read_log(compiled) == ({"kernels": 20.24, "first query": 0.32}, 61, "")  # no kernel cache line
    starts = [Start("real", "cold", 22.6, phases, n, cpu), Start("real", "cold", 1.8, {}, 0, cpu)]
    row = summary(starts)[0]
    assert row["cpu"] == "x86-64-v4" and row["compiled"] == 61
    assert "| compiled | kernels for |" in format_table([row]) and "| 61 | x86-64-v4 |" in format_table([row])
