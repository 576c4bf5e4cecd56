"""``priorart-lab bench load``: the locust mix at capacity, this code against another commit's, back to back.

Issue 14 asks for the locust mix (20 users, searches and passages) at 10x or more of "today's" throughput, with 0
errors. Today is the commit before the passage index (:data:`BASELINE_REF`). One command measures both:

1. a worktree of the baseline commit (``git worktree add --detach``; removed at the end);
2. each code builds its own index of the same corpus (``priorart build`` run in its own tree, with its defaults);
3. ``rounds`` times: this code served (``priorart serve``, its defaults), its own locustfile run headless
   (``users``, no think time, ``seconds``), the server stopped; then the baseline the same way, from its tree with
   its locustfile. (This code goes first so that its compiled kernels can be reused by the baseline's tree where
   the kernel sources are the same.) Each code runs its own scenario because the responses changed (a baseline
   answer carries no ``generation``); both draw the same kinds of queries from their index
   (``tests/load/locustfile.py``).
4. per run: requests/s, failures, p50/p99 (all requests, searches, passages), and the ratio of the mean
   throughputs.

Settings as well as commits (``settings``, ``--compare-settings '{"evidence_docs": 0}'``): this code is also run
against its own index with those fields in every ``/search`` body (the locustfile's ``$PRIORART_LOAD_SEARCH_BODY``),
in the same rounds, after its default run: the default path against the setting, on the same machine at the same
time. ``baseline=None`` (``--baseline none``) leaves the other commit out (no worktree, one build). The report
names what was compared.

Locust runs on the same machine, so the server and the load generator share its cores; the two codes alternate so
that a busy moment of the machine falls on both.
"""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

# the commit before the passage index (f18968c): the code issue 14 measured ("today")
BASELINE_REF = "f18968c^1"
REPO = Path(__file__).resolve().parents[2]


def parse_settings(text: str | None) -> dict[str, Any]:
    """The ``/search`` fields of ``--compare-settings`` (a JSON object, e.g. ``{"evidence_docs": 0}``), checked
    against the API's request (:class:`service.schema.SearchRequest`): ``ValueError`` says what is wrong."""
    if not text:
        return {}
    try:
        settings = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"--compare-settings is not JSON ({exc.msg}): {text!r}; e.g. '{{\"evidence_docs\": 0}}'") \
            from exc
    if not isinstance(settings, dict) or not settings:
        raise ValueError(f"--compare-settings must be a non-empty JSON object of /search fields, got {text!r}")
    from pydantic import ValidationError

    from service.schema import SearchRequest

    if "query" in settings:
        raise ValueError("--compare-settings: the query is the load's own; give other /search fields")
    try:
        SearchRequest.model_validate({"query": "x", **settings})
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(x) for x in e['loc'])}: {e['msg']}" for e in exc.errors())
        raise ValueError(f"--compare-settings {text}: not a valid /search body ({problems})") from exc
    return settings


def settings_label(settings: dict[str, Any]) -> str:
    """How the report names a settings run: its fields as JSON."""
    return json.dumps(settings, sort_keys=True)


def make_work_dir(work_dir: Path) -> Path:
    """``work_dir``, made with its parents where missing; ``RuntimeError`` (one line) where it cannot be."""
    try:
        work_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RuntimeError(f"--work-dir {work_dir}: cannot make it a folder ({exc.strerror or exc})") from exc
    return work_dir


def _git(*args: str, cwd: Path = REPO) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)}: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout.strip()


def _build(code: Path, corpus: Path, out: Path) -> float:
    """``priorart build CORPUS -o OUT`` with the packages of ``code``; seconds taken."""
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "training.cli", "build", str(corpus), "-o", str(out)], cwd=code,
                          env=_env(code), capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"the build of {code} failed:\n{proc.stderr[-2000:]}")
    return time.perf_counter() - started


def _env(code: Path) -> dict[str, str]:
    import os

    return {**os.environ, "PYTHONPATH": str(code)}


def _reuse_kernels(tree: Path, echo: Callable[[str], None]) -> None:
    from service.startup import reuse_kernel_cache

    if reused := reuse_kernel_cache(REPO, tree):
        echo(f"  kernels of {', '.join(reused)} reused from {REPO} (the same source)")


def _rows(prefix: Path) -> dict[str, dict[str, str]]:
    with open(f"{prefix}_stats.csv", encoding="utf-8", newline="") as f:
        return {row["Name"]: row for row in csv.DictReader(f)}


def _figures(rows: dict[str, dict[str, str]], kind: str | None) -> dict[str, float]:
    """Requests, failures, requests/s, p50/p99 of the aggregate (None) or of the request names starting with kind."""
    if kind is None:
        picked = [rows["Aggregated"]]
    else:
        picked = [r for name, r in rows.items() if name.startswith(kind)]
    n = sum(int(r["Request Count"]) for r in picked)
    if not n:
        return {"requests": 0, "failures": 0, "requests_per_s": 0.0, "p50_ms": float("nan"), "p99_ms": float("nan")}
    # percentiles of a kind: the request-weighted mean of its names' (locust reports per name)
    return {"requests": n, "failures": sum(int(r["Failure Count"]) for r in picked),
            "requests_per_s": sum(float(r["Requests/s"]) for r in picked),
            "p50_ms": sum(float(r["50%"]) * int(r["Request Count"]) for r in picked) / n,
            "p99_ms": sum(float(r["99%"]) * int(r["Request Count"]) for r in picked) / n}


def _locust(code: Path, index: Path, users: int, seconds: int, out: Path,
            search_body: dict[str, Any] | None = None) -> dict[str, Any]:
    """Serve ``index`` with ``code``, run ``code``'s locust scenario headless against it (``search_body``: fields
    sent in every ``/search`` body), stop the server."""
    from lab.benchmarks.service import served

    # /ready: the index loaded and a first query run, so that a short run measures answers, not the warm-up (a
    # 3-second run on a busy machine saw no answer at all when it began at /health); --stop-timeout: the requests
    # in flight when the time is up are answered and counted (a 3-second run of 2 users on a busy 2-core machine
    # still ended with none answered, twice in CI)
    with served(index, poll_s=0.2, code=code) as (client, ready_s, _pid):
        port = int(str(client.base_url).rsplit(":", 1)[1].strip("/"))
        proc = subprocess.run(
            [sys.executable, "-m", "locust", "-f", str(code / "tests" / "load" / "locustfile.py"), "--headless",
             "-u", str(users), "-r", str(max(1, users // 2)), "-t", f"{seconds}s", "--stop-timeout", "30", "--host",
             f"http://127.0.0.1:{port}", "--csv", str(out), "--only-summary"],
            cwd=code, env={**_env(code), "PRIORART_LOAD_INDEX": str(index), "PRIORART_LOAD_WAIT": "0,0",
                           "PRIORART_LOAD_SEARCH_BODY": json.dumps(search_body or {})},
            capture_output=True, text=True, check=False)
    if not Path(f"{out}_stats.csv").exists():
        raise RuntimeError(f"locust wrote no statistics for {code}:\n{proc.stderr[-2000:]}")
    rows = _rows(out)
    return {"ready_s": ready_s, "all": _figures(rows, None), "search": _figures(rows, "/search"),
            "passages": _figures(rows, "/passages")}


def run_load_bench(corpus: Path, *, baseline: str | None = BASELINE_REF, users: int = 20, seconds: int = 30,
                   rounds: int = 2, work_dir: Path | None = None, progress: bool = True,
                   settings: dict[str, Any] | None = None) -> dict[str, Any]:
    """Build, serve and load the codes (module docstring): this one, ``baseline``'s (None: none) and, with
    ``settings``, this one with those ``/search`` fields; returns the figures of every run."""
    def echo(msg: str) -> None:
        if progress:
            typer.echo(msg, err=True)

    import logging

    if baseline is None and not settings:
        raise RuntimeError("nothing to compare: no baseline commit and no settings (--compare-settings)")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # (a line per readiness poll)
    commit = _git("rev-parse", "--verify", f"{baseline}^{{commit}}") if baseline is not None else None
    work = Path(tempfile.mkdtemp(prefix="priorart-load-", dir=make_work_dir(work_dir) if work_dir else None))
    tree = work / "baseline"
    try:
        # (name, code, index, /search fields): this code first, its setting's run next, on its index
        systems: list[tuple[str, Path, str, dict[str, Any]]] = [("current", REPO, "current", {})]
        if settings:
            systems.append(("settings", REPO, "current", dict(settings)))
        codes = {"current": REPO}
        if commit is not None:
            _git("worktree", "add", "--detach", str(tree), commit)
            systems.append(("baseline", tree, "baseline", {}))
            codes["baseline"] = tree
        # this code first: its compiled kernels are then copied to the baseline's tree where the sources are the
        # same (service.startup.reuse_kernel_cache), before each baseline step, so that no kernel is compiled twice
        built = {}
        for name, code in codes.items():
            echo(f"building the {name} index with {code} ...")
            if code is tree:
                _reuse_kernels(tree, echo)
            built[name] = _build(code, corpus, work / f"index-{name}")
        runs: list[dict[str, Any]] = []
        for rnd in range(1, rounds + 1):
            for name, code, index, body in systems:
                echo(f"round {rnd}: {name}{' ' + settings_label(body) if body else ''}, {users} users for "
                     f"{seconds} s ...")
                if code is tree:
                    _reuse_kernels(tree, echo)
                fig = _locust(code, work / f"index-{index}", users, seconds, work / f"locust-{name}-{rnd}", body)
                runs.append({"round": rnd, "code": name, **fig})
        mean = {name: sum(r["all"]["requests_per_s"] for r in runs if r["code"] == name) / rounds
                for name, *_ in systems}
        report: dict[str, Any] = {
            "corpus": str(corpus), "baseline": baseline, "baseline_commit": commit,
            "current_commit": _git("rev-parse", "HEAD"), "users": users, "seconds": seconds, "rounds": rounds,
            "settings": dict(settings) if settings else None, "compared": [name for name, *_ in systems],
            "build_s": built, "runs": runs, "mean_requests_per_s": mean,
            "failures": sum(r["all"]["failures"] for r in runs)}
        if commit is not None:
            report["speedup"] = mean["current"] / mean["baseline"] if mean["baseline"] else float("inf")
        if settings:  # the setting's throughput over the default path's
            report["settings_ratio"] = mean["settings"] / mean["current"] if mean["current"] else float("inf")
        return report
    finally:
        if commit is not None:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=REPO, capture_output=True,
                           check=False)
        if work_dir is None:
            shutil.rmtree(work, ignore_errors=True)


def format_report(r: dict[str, Any]) -> str:
    """The report's table, its first line naming what was compared (the commits, the settings)."""
    settings = r.get("settings")
    against = []
    if r.get("baseline_commit"):
        against.append(f"baseline {r['baseline']} ({r['baseline_commit'][:10]}), each code serving its own build of "
                       "the corpus")
    if settings:
        against.append(f"this code with {settings_label(settings)} in every /search body ('settings', the same "
                       "index)")
    lines = [f"locust mix at capacity: {r['users']} users, no think time, {r['seconds']} s per run, "
             f"corpus {r['corpus']}; compared: this code ({r['current_commit'][:10]}, 'current', the default "
             f"request) against {' and '.join(against)}",
             f"{'round':>5} {'code':<9} {'req/s':>8} {'failed':>7} {'p50 ms':>7} {'p99 ms':>7} "
             f"{'search p50':>10} {'passages p50':>12} {'passages req/s':>14}"]
    for x in r["runs"]:
        a, s, p = x["all"], x["search"], x["passages"]
        lines.append(f"{x['round']:>5} {x['code']:<9} {a['requests_per_s']:>8.1f} {a['failures']:>7} "
                     f"{a['p50_ms']:>7.0f} {a['p99_ms']:>7.0f} {s['p50_ms']:>10.0f} {p['p50_ms']:>12.0f} "
                     f"{p['requests_per_s']:>14.1f}")
    m = r["mean_requests_per_s"]
    means = ", ".join(f"{name} {m[name]:.1f}" for name in r.get("compared", m))
    said = []
    if "speedup" in r:
        said.append(f"current over baseline {r['speedup']:.1f}x")
    if "settings_ratio" in r:
        said.append(f"with {settings_label(settings or {})} over the default request {r['settings_ratio']:.2f}x")
    lines.append(f"mean throughput: {means} requests/s; {'; '.join(said)}; failed requests {r['failures']}")
    return "\n".join(lines)
