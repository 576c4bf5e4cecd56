"""Service latency benchmark: per-stage breakdown, end-to-end p50/p99, and the HTTP/JSON overhead.

The same queries run (1) in-process through ``Engine.search`` (the pipeline alone) and (2) as
``POST /search`` against a real ``priorart serve`` on 127.0.0.1 (uvicorn + FastAPI + JSON + loopback
HTTP). The API overhead is ``(http p50 - engine p50) / http p50``. Queries are the English first
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
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger(__name__)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _queries(engine: Any, n: int, seed: int) -> list[str]:
    docs = engine.first_stage.docs
    rng = random.Random(seed)
    rows = rng.sample(range(len(docs)), min(len(docs), n * 3))
    out: list[str] = []
    for r in rows:
        rec = docs.get_row(r)
        claims = rec.claims.get("en") or []
        text = claims[0].text if claims else rec.title.get("en", "")
        if text.strip():
            out.append(" ".join(text.split()[:60]))
        if len(out) == n:
            break
    return out


def _pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q)) if values else float("nan")


def run_service_bench(index_dir: Path, *, queries: int = 200, depth: int = 1000, k: int = 10, seed: int = 0,
                      http: bool = True) -> dict[str, Any]:
    """Measure; returns a dict of figures (milliseconds)."""
    import httpx

    from service.engine import Engine
    from service.schema import SearchRequest
    from service.settings import Settings

    engine = Engine.load(index_dir, settings=Settings(index_dir=index_dir))
    texts = _queries(engine, queries, seed)
    for t in texts[:5]:  # warm-up: caches, ONNX sessions, FAISS
        engine.search(SearchRequest(query=t, k=k, depth=depth))
    stage_ms: dict[str, list[float]] = {}
    e2e: list[float] = []
    cands: list[int] = []
    for t in texts:
        started = time.perf_counter()
        res = engine.search(SearchRequest(query=t, k=k, depth=depth))
        e2e.append((time.perf_counter() - started) * 1000.0)
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
        "depth": depth,
        "candidates_mean": float(np.mean(cands)) if cands else 0.0,
        "engine": {"p50": _pct(e2e, 50), "p99": _pct(e2e, 99), "mean": float(np.mean(e2e))},
        "per_stage": {name: {"p50": _pct(v, 50), "p99": _pct(v, 99), "mean": float(np.mean(v))}
                      for name, v in stage_ms.items()},
    }
    engine.close()
    if not http:
        return out
    port = _free_port()
    env = {**os.environ, "PRIORART_LOG_LEVEL": "WARNING"}
    proc = subprocess.Popen([sys.executable, "-m", "training.cli", "serve", str(index_dir), "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, start_new_session=True)
    try:
        base = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=base, timeout=60.0) as client:
            deadline = time.time() + 180
            while True:
                try:
                    if client.get("/ready").status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.time() > deadline or proc.poll() is not None:
                    raise RuntimeError("priorart serve did not become ready")
                time.sleep(0.3)
            while client.get("/health").json().get("passage_warmup", {}).get("state") == "running":
                if time.time() > deadline:
                    raise RuntimeError("the passage cache warm-up did not finish")
                time.sleep(0.5)  # measure queries, not the background warm-up competing for the CPU
            for t in texts[:5]:
                client.post("/search", json={"query": t, "k": k, "depth": depth})
            lat: list[float] = []
            for t in texts:
                started = time.perf_counter()
                r = client.post("/search", json={"query": t, "k": k, "depth": depth})
                lat.append((time.perf_counter() - started) * 1000.0)
                r.raise_for_status()
        out["http"] = {"p50": _pct(lat, 50), "p99": _pct(lat, 99), "mean": float(np.mean(lat))}
        out["api_overhead_of_p50"] = (out["http"]["p50"] - out["engine"]["p50"]) / out["http"]["p50"]
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    return out


def format_report(r: dict[str, Any]) -> str:
    lines = [f"index {r['index']}: {r['documents']} documents, stages {' -> '.join(r['stages'])}, "
             f"device {r['device']}, {r['queries']} queries, depth {r['depth']} "
             f"({r['candidates_mean']:.0f} candidates reranked on average)",
             f"{'stage':<12}{'p50 ms':>10}{'p99 ms':>10}{'mean ms':>10}"]
    for name, v in r["per_stage"].items():
        lines.append(f"{name:<12}{v['p50']:>10.2f}{v['p99']:>10.2f}{v['mean']:>10.2f}")
    e = r["engine"]
    lines.append(f"{'engine e2e':<12}{e['p50']:>10.2f}{e['p99']:>10.2f}{e['mean']:>10.2f}")
    if "http" in r:
        h = r["http"]
        lines.append(f"{'HTTP e2e':<12}{h['p50']:>10.2f}{h['p99']:>10.2f}{h['mean']:>10.2f}")
        lines.append(f"API (FastAPI + JSON + loopback HTTP) overhead: {100 * r['api_overhead_of_p50']:.1f} % of p50")
    return "\n".join(lines)
