"""Service latency benchmark: per-stage breakdown, end-to-end p50/p99, and the HTTP/JSON overhead.

The same queries run (1) in-process through ``Engine.search`` (the pipeline alone) and (2) as
``POST /search`` against a real ``priorart serve`` on 127.0.0.1 (uvicorn + FastAPI + JSON + loopback
HTTP). The API overhead is ``(http p50 - engine p50) / http p50``. With ``passages`` the same queries
also run through ``Engine.passages`` and ``POST /passages`` (k 10, the default variant). Queries are the English first
claims of documents of the index (each search excludes nothing: it is a latency test), single client.
"""

from __future__ import annotations

import logging
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import httpx

log = logging.getLogger(__name__)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now (the benchmarks' servers and demos listen there)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def served(index_dir: str | Path, *, poll_s: float = 0.1, timeout_s: float = 900.0, code: Path | None = None,
           ready_path: str = "/ready") -> Iterator[tuple[httpx.Client, float, int]]:
    """A fresh ``priorart serve INDEX`` on a free port: yields an HTTP client, the seconds it took to be ready
    (``ready_path`` answers 200) and the server's process id; the server's process group is stopped on exit.
    ``code``: a checkout whose ``training``/``service`` packages serve (another commit's, ``priorart-lab bench load``);
    a server of a commit older than ``/ready`` (404 there) is ready when ``/health`` answers 200."""
    import httpx

    port = free_port()
    env = {**os.environ, "PRIORART_LOG_LEVEL": "WARNING"}
    if code is not None:
        env["PYTHONPATH"] = str(code)
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "training.cli", "serve", str(index_dir), "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, start_new_session=True,
                            cwd=code)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60.0) as client:
            deadline = time.time() + timeout_s
            while True:
                try:
                    status = client.get(ready_path).status_code
                    if status == 200 or (status == 404 and ready_path == "/ready"
                                         and client.get("/health").status_code == 200):
                        break
                except httpx.HTTPError:
                    pass
                if time.time() > deadline or proc.poll() is not None:
                    raise RuntimeError("priorart serve did not become ready")
                time.sleep(poll_s)
            yield client, time.perf_counter() - started, proc.pid
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


def _queries(engine: Any, n: int, seed: int, words: int = 60) -> list[tuple[str, str]]:
    """``n`` random documents' English first claims (their first ``words`` words, 0: whole; the title without claims)
    with the document each comes from: (id, text)."""
    docs = engine.docs
    rng = random.Random(seed)
    rows = rng.sample(range(len(docs)), min(len(docs), n * 3))
    out: list[tuple[str, str]] = []
    for r in rows:
        rec = docs.get_row(r)
        claims = rec.claims.get("en") or []
        text = claims[0].text if claims else rec.title.get("en", "")
        if text.strip():
            out.append((rec.id, " ".join(text.split()[:words] if words > 0 else text.split())))
        if len(out) == n:
            break
    return out


def memory_mb(pid: int | str = "self") -> dict[str, float]:
    """Resident memory of a process from ``/proc/PID/status``: now (``VmRSS``) and its peak (``VmHWM``), MiB
    (empty where there is no /proc)."""
    try:
        text = Path(f"/proc/{pid}/status").read_text(encoding="ascii")
    except OSError:
        return {}
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    return {name: int(fields[key].split()[0]) / 1024 for name, key in (("rss", "VmRSS"), ("peak", "VmHWM"))
            if key in fields}


def _pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q)) if values else float("nan")


def _without_dense(engine: Any) -> Any:
    """The engine's index opened again with its pipeline composed without the dense stage (``neural=False``): the
    default path less the query encoder and the FAISS search, on the same index files."""
    from service.engine import Engine, _load_scheme
    from service.pipeline import compose

    pipeline = compose(engine.folder, engine.settings, neural=False)
    return Engine(engine.folder, engine.settings, pipeline, _load_scheme(engine.settings, pipeline.docs))


def run_service_bench(index_dir: Path, *, queries: int = 200, depth: int = 1000, k: int = 10, seed: int = 0,
                      http: bool = True, passages: bool = False, compare_no_dense: bool = False,
                      compare_fused: bool = False, words: int = 60) -> dict[str, Any]:
    """Measure; returns a dict of figures (milliseconds). ``compare_no_dense``: also time each query, interleaved, on
    the same index without the dense stage (:func:`_without_dense`), reported as ``without_dense``;
    ``compare_fused``: also time each query, interleaved, in the fused order (``evidence_docs: 0``: no evidence
    step, the learned ranker's), reported as ``fused``. ``words``: the queries are the first claims' first ``words``
    words (0: whole claims)."""
    from service import heap
    from service.engine import Engine
    from service.schema import PassageRequest, SearchRequest
    from service.settings import Settings

    started = time.perf_counter()
    engine = Engine.load(index_dir, settings=Settings(index_dir=index_dir))
    heap.settle()  # as `priorart serve` does after loading
    load_s = time.perf_counter() - started
    loaded = memory_mb()
    known = _queries(engine, queries, seed, words)
    texts = [t for _, t in known]
    for t in texts[:5]:  # warm-up: caches, ONNX sessions, FAISS
        engine.search(SearchRequest(query=t, k=k, depth=depth))
    bare = _without_dense(engine) if compare_no_dense and "dense" in engine.pipeline.names else None
    if bare is not None:
        for t in texts[:5]:
            bare.search(SearchRequest(query=t, k=k, depth=depth))
    stage_ms: dict[str, list[float]] = {}
    e2e: list[float] = []
    bare_ms: list[float] = []
    fused_ms: list[float] = []
    cands: list[int] = []
    own_first = bare_first = fused_first = 0  # queries whose own document (the claim's) comes first: the known item
    def fused(t: str, own: str) -> None:
        nonlocal fused_first
        started = time.perf_counter()
        got = engine.search(SearchRequest(query=t, k=k, depth=depth, evidence_docs=0))
        fused_ms.append((time.perf_counter() - started) * 1000.0)
        fused_first += bool(got.results) and got.results[0].id == own

    def without_dense(t: str, own: str) -> None:
        nonlocal bare_first
        assert bare is not None
        started = time.perf_counter()
        got = bare.search(SearchRequest(query=t, k=k, depth=depth))
        bare_ms.append((time.perf_counter() - started) * 1000.0)
        bare_first += bool(got.results) and got.results[0].id == own

    for i, (own, t) in enumerate(known):
        # interleaved, so that the paths see the same machine; each compared path before the default one for every
        # other query and after it for the rest: the second search of a text may find what the first left in a cache
        # (the engine's memo of the query's analysis and translation is the fused order's too), each side half the
        # time
        if bare is not None and i % 2 == 0:
            without_dense(t, own)
        if compare_fused and i % 2 == 0:
            fused(t, own)
        started = time.perf_counter()
        res = engine.search(SearchRequest(query=t, k=k, depth=depth))
        e2e.append((time.perf_counter() - started) * 1000.0)
        own_first += bool(res.results) and res.results[0].id == own
        if compare_fused and i % 2 == 1:
            fused(t, own)
        if bare is not None and i % 2 == 1:
            without_dense(t, own)
        for st in res.stages:
            stage_ms.setdefault(st.name, []).append(st.ms)
            if st.name == "fusion":
                cands.append(st.candidates)
    out: dict[str, Any] = {
        "index": str(index_dir),
        "documents": engine.num_docs,
        "stages": engine.pipeline.names,
        "device": engine.device,
        "queries": len(texts),
        "words": words,
        "depth": depth,
        "candidates_mean": float(np.mean(cands)) if cands else 0.0,
        "own_first": own_first / max(1, len(known)),
        "load_s": load_s,
        # resident memory of this process: after Engine.load, and after the timed searches (page cache of the
        # memory-mapped files counts where it is mapped and touched)
        "memory_mb": {"loaded": loaded.get("rss"), "after_searches": memory_mb().get("rss")},
        "engine": {"p50": _pct(e2e, 50), "p99": _pct(e2e, 99), "mean": float(np.mean(e2e))},
        "per_stage": {name: {"p50": _pct(v, 50), "p99": _pct(v, 99), "mean": float(np.mean(v))}
                      for name, v in stage_ms.items()},
    }
    if bare is not None:
        out["without_dense"] = {"p50": _pct(bare_ms, 50), "p99": _pct(bare_ms, 99), "mean": float(np.mean(bare_ms)),
                                "stages": bare.pipeline.names, "own_first": bare_first / max(1, len(known))}
        out["dense_ratio_p50"] = out["engine"]["p50"] / out["without_dense"]["p50"]
        bare.close()
    if fused_ms:
        out["fused"] = {"p50": _pct(fused_ms, 50), "p99": _pct(fused_ms, 99), "mean": float(np.mean(fused_ms)),
                        "own_first": fused_first / max(1, len(known))}
        out["fused_ratio_p50"] = out["engine"]["p50"] / out["fused"]["p50"]
    if passages:
        elat: list[float] = []
        for t in texts:
            started = time.perf_counter()
            engine.passages(PassageRequest(query=t, k=10, depth=depth))
            elat.append((time.perf_counter() - started) * 1000.0)
        out["passages_engine"] = {"p50": _pct(elat, 50), "p99": _pct(elat, 99), "mean": float(np.mean(elat))}
    engine.close()
    if not http:
        return out
    with served(index_dir, poll_s=0.3) as (client, ready_s, pid):
        out["server"] = {"ready_s": ready_s, "memory_mb_ready": memory_mb(pid).get("rss")}
        for t in texts[:5]:
            client.post("/search", json={"query": t, "k": k, "depth": depth})
        lat: list[float] = []
        for t in texts:
            started = time.perf_counter()
            r = client.post("/search", json={"query": t, "k": k, "depth": depth})
            lat.append((time.perf_counter() - started) * 1000.0)
            r.raise_for_status()
        if passages:
            plat: list[float] = []
            for t in texts:
                started = time.perf_counter()
                r = client.post("/passages", json={"query": t, "k": 10, "depth": depth})
                plat.append((time.perf_counter() - started) * 1000.0)
                r.raise_for_status()
            out["passages_http"] = {"p50": _pct(plat, 50), "p99": _pct(plat, 99), "mean": float(np.mean(plat))}
        out["http"] = {"p50": _pct(lat, 50), "p99": _pct(lat, 99), "mean": float(np.mean(lat))}
        server_mem = memory_mb(pid)
        out["server"].update({"memory_mb": server_mem.get("rss"), "memory_mb_peak": server_mem.get("peak")})
        out["api_overhead_of_p50"] = (out["http"]["p50"] - out["engine"]["p50"]) / out["http"]["p50"]
    return out


def _words(words: int) -> str:
    return f"first claims, their first {words} words" if words > 0 else "whole first claims"


def format_report(r: dict[str, Any]) -> str:
    lines = [f"index {r['index']}: {r['documents']} documents, stages {' -> '.join(r['stages'])}, "
             f"device {r['device']}, {r['queries']} queries ({_words(r.get('words', 60))}), depth {r['depth']} "
             f"({r['candidates_mean']:.0f} candidates reranked on average)",
             f"{'stage':<12}{'p50 ms':>10}{'p99 ms':>10}{'mean ms':>10}"]
    for name, v in r["per_stage"].items():
        lines.append(f"{name:<12}{v['p50']:>10.2f}{v['p99']:>10.2f}{v['mean']:>10.2f}")
    mem = r.get("memory_mb", {})
    if mem.get("loaded") is not None:
        n = max(1, r["documents"])
        lines.append(f"load {r['load_s']:.1f} s; resident memory after load {mem['loaded']:.0f} MiB "
                     f"({mem['loaded'] * 1024 / n:.1f} KiB per document), after the searches "
                     f"{mem['after_searches']:.0f} MiB")
    e = r["engine"]
    lines.append(f"{'engine e2e':<12}{e['p50']:>10.2f}{e['p99']:>10.2f}{e['mean']:>10.2f}   (the query's own document "
                 f"first for {r['own_first']:.0%})")
    if "without_dense" in r:
        w = r["without_dense"]
        lines.append(f"{'no dense':<12}{w['p50']:>10.2f}{w['p99']:>10.2f}{w['mean']:>10.2f}   (same index, "
                     f"interleaved; with the dense stage {r['dense_ratio_p50']:.2f}x at p50; own document first "
                     f"for {w['own_first']:.0%})")
    if "fused" in r:
        f = r["fused"]
        lines.append(f"{'fused order':<12}{f['p50']:>10.2f}{f['p99']:>10.2f}{f['mean']:>10.2f}   (evidence_docs 0, "
                     f"interleaved; the default path {r['fused_ratio_p50']:.2f}x at p50; own document first for "
                     f"{f['own_first']:.0%})")
    if "http" in r:
        h = r["http"]
        lines.append(f"{'HTTP e2e':<12}{h['p50']:>10.2f}{h['p99']:>10.2f}{h['mean']:>10.2f}")
        lines.append(f"API (FastAPI + JSON + loopback HTTP) overhead: {100 * r['api_overhead_of_p50']:.1f} % of p50")
        srv = r.get("server", {})
        if srv.get("memory_mb") is not None:
            lines.append(f"priorart serve: ready in {srv['ready_s']:.1f} s, resident {srv['memory_mb_ready']:.0f} MiB "
                         f"when ready, {srv['memory_mb']:.0f} MiB after the requests (peak "
                         f"{srv['memory_mb_peak']:.0f} MiB)")
    for key, label in (("passages_engine", "passages e2e"), ("passages_http", "passages HTTP")):
        if key in r:
            v = r[key]
            lines.append(f"{label:<12}{v['p50']:>10.2f}{v['p99']:>10.2f}{v['mean']:>10.2f}   (POST /passages, k 10)")
    return "\n".join(lines)
