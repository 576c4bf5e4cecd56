"""Load test: the locust scenario (``locustfile.py``) headless against a live ``priorart serve`` on 127.0.0.1.

20 users, spawn rate 10/s, 30 s, ``--exit-code-on-error 1``. Fails on any failed request (HTTP error or a
response that does not check out). Prints requests/s and p50/p95/p99 from locust's ``--csv`` stats and
writes them (plus the CSVs and the HTML report) to ``$PRIORART_ARTIFACTS/load`` or a session tmp folder.
Figures are reported, never asserted: they depend on the machine.
"""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest

HERE = Path(__file__).resolve().parent
USERS, SPAWN_RATE, RUN_TIME_S = 20, 10, 30

# never import locust here: it monkey-patches the whole process with gevent; it runs as a subprocess
pytestmark = [
    pytest.mark.load,
    pytest.mark.skipif(importlib.util.find_spec("locust") is None,
                       reason="python package locust not installed (pip install -e '.[dev]')"),
]


def _liveserver() -> ModuleType:
    """tests/e2e/liveserver.py (the test folders are not packages, so it is loaded by path)."""
    if "liveserver" in sys.modules:
        return sys.modules["liveserver"]
    spec = importlib.util.spec_from_file_location("liveserver", HERE.parent / "e2e" / "liveserver.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["liveserver"] = module
    spec.loader.exec_module(module)
    return module


ls = _liveserver()


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = Path(ls.artifacts_dir(tmp_path_factory)) / "load"
    out.mkdir(parents=True, exist_ok=True)
    return out


@pytest.fixture(scope="module")
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, artifacts: Path) -> Iterator[Any]:
    with ls.live_server(ls.service_index(request, tmp_path_factory), artifacts / "serve.log") as s:
        yield s


def _aggregated(stats_csv: Path) -> dict[str, dict[str, str]]:
    with stats_csv.open(encoding="utf-8", newline="") as f:
        return {f"{row['Type']} {row['Name']}".strip(): row for row in csv.DictReader(f)}


def _figures(row: dict[str, str]) -> dict[str, float]:
    return {
        "requests": int(row["Request Count"]),
        "failures": int(row["Failure Count"]),
        "requests_per_s": round(float(row["Requests/s"]), 2),
        "p50_ms": float(row["50%"]),
        "p95_ms": float(row["95%"]),
        "p99_ms": float(row["99%"]),
        "max_ms": round(float(row["Max Response Time"]), 1),
    }


def test_locust_search_and_passages_mix(server: Any, artifacts: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # cold first requests are measured and reported on their own (lazy structures are built on first use)
    cold: dict[str, float] = {}
    for path, body in (("/search", {"query": "an apparatus comprising a housing and a sensor", "k": 20}),
                       ("/passages", {"query": "a developing roller and a toner layer regulating blade", "k": 10})):
        started = time.perf_counter()
        r = httpx.post(server.url + path, json=body, timeout=60)
        cold[path] = round((time.perf_counter() - started) * 1000, 1)
        assert r.status_code == 200, r.text

    prefix = artifacts / "locust"
    cmd = [sys.executable, "-m", "locust", "-f", str(HERE / "locustfile.py"), "--headless",
           "-u", str(USERS), "-r", str(SPAWN_RATE), "-t", f"{RUN_TIME_S}s", "--stop-timeout", "10",
           "--host", server.url, "--csv", str(prefix), "--html", str(artifacts / "locust.html"),
           "--exit-code-on-error", "1", "--only-summary", "--loglevel", "WARNING"]
    env = {**os.environ, "PRIORART_LOAD_INDEX": str(server.index_dir)}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=RUN_TIME_S + 90, cwd=HERE)
    (artifacts / "locust.log").write_text(proc.stdout + proc.stderr, encoding="utf-8")

    stats = _aggregated(Path(f"{prefix}_stats.csv"))
    total = _figures(stats["Aggregated"])
    per_name = {name: _figures(row) for name, row in stats.items() if name != "Aggregated"}
    server_statuses = server.status_counts()
    report = {"users": USERS, "spawn_rate": SPAWN_RATE, "run_time_s": RUN_TIME_S,
              "wait_s": os.environ.get("PRIORART_LOAD_WAIT", "0.5,2.0"), "cold_first_request_ms": cold,
              "total": total, "per_request": per_name,
              "server_status_counts": {str(k): v for k, v in sorted(server_statuses.items())}}
    (artifacts / "load.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
    with capsys.disabled():
        print(f"\nload: {USERS} users, spawn {SPAWN_RATE}/s, {RUN_TIME_S} s against {server.url} "
              f"(cold first /search {cold['/search']} ms, /passages {cold['/passages']} ms)")
        for name, fig in [("Aggregated", total), *sorted(per_name.items())]:
            print(f"  {name:24s} {fig['requests']:6d} req  {fig['failures']:3d} fail"
                  f"  {fig['requests_per_s']:7.2f} req/s  p50 {fig['p50_ms']:7.0f} ms"
                  f"  p95 {fig['p95_ms']:7.0f} ms  p99 {fig['p99_ms']:7.0f} ms")
        print(f"  figures: {artifacts / 'load.json'}")

    failures = Path(f"{prefix}_failures.csv").read_text(encoding="utf-8") if total["failures"] else ""
    assert total["requests"] > 0, f"locust sent no requests:\n{proc.stderr[-3000:]}"
    assert total["failures"] == 0, f"{total['failures']} failed requests:\n{failures}"
    assert proc.returncode == 0, f"locust exited {proc.returncode}:\n{proc.stderr[-3000:]}"
    assert not any(code >= 500 for code in server_statuses), f"server answered 5xx: {server_statuses}"
    assert {n.split()[1] for n in per_name} >= {"/search", "/passages"}
