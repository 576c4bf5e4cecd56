"""Load test: the locust scenario (``locustfile.py``) headless against a live ``priorart serve`` on 127.0.0.1.

20 users, spawn rate 10/s, 12 s, ``--exit-code-on-error 1``. Fails on any failed request (HTTP error or a
response that does not check out). Prints requests/s and p50/p95/p99 from locust's ``--csv`` stats and
writes them (plus the CSVs and the HTML report) to ``$PRIORART_ARTIFACTS/load`` or a session tmp folder.
Figures are reported, never asserted: they depend on the machine.

``test_locust_mix_while_adding_and_compacting`` (issue 18): the same mix against a server of a small live index
while three ``priorart add`` batches and one ``priorart compact`` write generations that the server loads by
itself; 0 failed requests and every response from a committed generation; prints the counts per generation.
"""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import signal
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
USERS, SPAWN_RATE, RUN_TIME_S = 20, 10, 12  # 12 s: the figures settle; the suite's time

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


# ------------------------------------------------------------------------------------ live index under load

LIVE_MIN_RUN_S, LIVE_MAX_RUN_S, PICKUP_TIMEOUT_S = 20, 300, 30  # the test stops locust itself; 300: a cap only


@pytest.fixture
def live_index(tmp_path: Path) -> tuple[Path, list[Path]]:
    """An index of 400 synthetic documents (its own folder; BM25 and the dense stage) and three add batches of 100
    (the second replaces 10 of the indexed documents), from the suite's collection (tests/suite_corpus.py)."""
    from suite_corpus import suite_records

    from service.corpus.jsonl import write_corpus
    from training.build import build_index

    records = suite_records(700)
    index = tmp_path / "index"
    build_index(records[:400], index, translation=False, compounds="", progress=False)
    replaced = [r.model_copy(update={"abstract": {**r.abstract, "en": "A replaced abstract: a rotor and a stator."}})
                for r in records[:400:40]]
    batches = []
    for i, batch in enumerate((records[400:500], [*records[500:590], *replaced], records[600:700])):
        path = tmp_path / f"batch-{i + 1}.jsonl"
        write_corpus(batch, path)
        batches.append(path)
    return index, batches


def _served_generation(url: str) -> int:
    return int(httpx.get(url + "/health", timeout=10).json()["index"]["generation"])


def _live_op(args: list[str]) -> dict[str, Any]:
    """``priorart add|compact ... --json`` as its own process (as an operator runs it); its report."""
    proc = subprocess.run([*ls.priorart_exe(), *args, "--json"], capture_output=True, text=True, timeout=120,
                          cwd=ls.REPO)
    assert proc.returncode == 0, f"priorart {args[0]} failed:\n{proc.stderr[-3000:]}"
    return dict(json.loads(proc.stdout))


def test_locust_mix_while_adding_and_compacting(live_index: tuple[Path, list[Path]],
                                                tmp_path_factory: pytest.TempPathFactory,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 18: the locust mix (20 users) while three ``priorart add`` batches and one ``priorart compact`` write
    generations into the served folder, which the server loads by itself (reload polling every 0.3 s).

    0 failed requests, and every response carries a generation that was complete (the build's 0 or one an
    operation committed): the locust scenario records the ``generation`` of every response."""
    index, batches = live_index
    out = Path(ls.artifacts_dir(tmp_path_factory)) / "load-live"
    out.mkdir(parents=True, exist_ok=True)
    gen_file = out / "generations.json"
    gen_file.unlink(missing_ok=True)
    env_server = {"PRIORART_RELOAD_INTERVAL_S": "0.3"}
    with ls.live_server(index, out / "serve.log", extra_env=env_server) as server:
        assert _served_generation(server.url) == 0
        cmd = [sys.executable, "-m", "locust", "-f", str(HERE / "locustfile.py"), "--headless",
               "-u", str(USERS), "-r", str(SPAWN_RATE), "-t", f"{LIVE_MAX_RUN_S}s", "--stop-timeout", "10",
               "--host", server.url, "--csv", str(out / "locust"), "--exit-code-on-error", "1",
               "--only-summary", "--loglevel", "WARNING"]
        env = {**os.environ, "PRIORART_LOAD_INDEX": str(index), "PRIORART_LOAD_GENERATIONS": str(gen_file)}
        log = (out / "locust.log").open("w", encoding="utf-8")
        started = time.monotonic()
        locust = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=HERE)
        committed = {0: "build"}
        steps: list[dict[str, Any]] = []
        try:
            time.sleep(5)  # users spawned, generation 0 under load
            ops = [["add", str(index), str(b), "--no-progress"] for b in batches]
            ops.append(["compact", str(index), "--no-progress"])
            for args in ops:
                t_op = time.monotonic()
                report = _live_op(args)
                t_commit = time.monotonic()
                gen = int(report["generation"])
                committed[gen] = args[0]
                while _served_generation(server.url) < gen:
                    assert time.monotonic() - t_commit < PICKUP_TIMEOUT_S, f"generation {gen} not loaded"
                    time.sleep(0.1)
                steps.append({"op": args[0], "generation": gen, "op_s": round(t_commit - t_op, 1),
                              "loaded_after_s": round(time.monotonic() - t_commit, 1),
                              "at_s": round(t_commit - started, 1), "live_documents": report["live_documents"],
                              "segments": report["segments"]})
                time.sleep(1)  # some load on this generation
            time.sleep(max(4.0, LIVE_MIN_RUN_S - (time.monotonic() - started)))
        finally:
            if locust.poll() is None:
                locust.send_signal(signal.SIGTERM)  # locust stops its users, fires quit (generations.json)
            locust.wait(timeout=60)
            log.close()
        run_s = round(time.monotonic() - started, 1)
        statuses = server.status_counts()
    assert locust.returncode in (0, 1), (out / "locust.log").read_text()[-3000:]
    seen = json.loads(gen_file.read_text(encoding="utf-8"))
    by_gen = {int(g): n for g, n in seen["by_generation"].items()}
    report = {"users": USERS, "run_s": run_s, "reload_interval_s": 0.3, "steps": steps, "committed": committed,
              "requests": seen["requests"], "failures": seen["failures"], "by_generation": by_gen,
              "by_generation_and_request": seen["by_generation_and_request"],
              "server_status_counts": {str(k): v for k, v in sorted(statuses.items())}}
    (out / "load-live.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
    with capsys.disabled():
        print(f"\nlive index under load: {USERS} users, {run_s} s, reload polling 0.3 s")
        for s in steps:
            print(f"  {s['op']:8s} -> generation {s['generation']} ({s['segments']} segment(s), "
                  f"{s['live_documents']} docs) in {s['op_s']} s at {s['at_s']} s, served {s['loaded_after_s']} s "
                  "after the commit")
        print(f"  {seen['requests']} requests, {seen['failures']} failures; responses per generation: "
              + ", ".join(f"{g}: {n}" for g, n in sorted(by_gen.items())))
        print(f"  figures: {out / 'load-live.json'}")
    failures = (out / "locust_failures.csv").read_text(encoding="utf-8") if seen["failures"] else ""
    assert seen["requests"] > 0, (out / "locust.log").read_text()[-3000:]
    assert seen["failures"] == 0, f"{seen['failures']} failed requests:\n{failures}"
    assert sum(by_gen.values()) == seen["requests"]  # every response carried its generation
    assert locust.returncode == 0, (out / "locust.log").read_text()[-3000:]
    assert set(by_gen) <= set(committed), f"responses from generations never committed: {set(by_gen) - set(committed)}"
    assert sorted(committed) == [0, 1, 2, 3, 4] and by_gen.get(4, 0) > 0 and by_gen.get(0, 0) > 0
    assert not any(code >= 500 for code in statuses), f"server answered 5xx: {statuses}"
