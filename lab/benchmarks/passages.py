"""``priorart-lab bench passages``: /passages latency from a cold process, against today's implementation.

1. In a fresh child process (nothing warmed up, nothing cached by an earlier query): load the
   engine, then run ``Engine.passages`` for every query (first-stage candidates at ``depth``, the
   passage ranker over the build-time passage index); the first query is reported on its own.
2. In the same child, for the first ``reference_queries`` queries: today's implementation
   (:mod:`lab.benchmarks.passages_reference`, the per-record ranker the engine used before the
   passage index, with its LRU cache and no warm-up) on the *same* candidate lists, timed as the old
   engine ran it (records read from the doc store + ranking), and the two hit lists compared
   (same passages, scores within 1e-9, tie order aside).
3. Over HTTP: ``POST /passages`` on a freshly started ``priorart serve`` (the first request included).

Queries are the English first claims (first 60 words) of random documents of the index. All times
are wall-clock milliseconds; speed-ups are ratios of figures measured in the same run.
"""

from __future__ import annotations

import json
import os
import random
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

_CHILD = "lab.benchmarks.passages"


def _pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q)) if values else float("nan")


def _stats(values: list[float]) -> dict[str, float]:
    mean = float(np.mean(values)) if values else float("nan")
    return {"p50": _pct(values, 50), "p99": _pct(values, 99), "mean": mean, "n": len(values)}


def _memory_mb() -> dict[str, float]:
    """Resident memory of this process (MiB): all, anonymous (heap), file-backed (memory maps, page cache)."""
    out = {"rss": float("nan"), "anon": float("nan"), "file": float("nan")}
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            key, _, value = line.partition(":")
            name = {"VmRSS": "rss", "RssAnon": "anon", "RssFile": "file"}.get(key)
            if name:
                out[name] = int(value.split()[0]) / 1024
    except OSError:
        out["rss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def bench_queries(docs: Any, n: int, seed: int) -> list[str]:
    """English first claims (first 60 words) of random documents of the doc store."""
    rng = random.Random(seed)
    rows = rng.sample(range(len(docs)), min(len(docs), n * 3))
    out: list[str] = []
    for r in rows:
        rec = docs.get_row(r)
        claims = rec.claims.get("en") or []
        text = claims[0].text if claims else ""
        if text.strip():
            out.append(" ".join(text.split()[:60]))
        if len(out) == n:
            break
    return out


def same_hits(new: list[dict[str, Any]], old: list[Any], tol: float = 1e-9) -> bool:
    """Same scores rank by rank (within ``tol``) and the same passages, up to the order of tied ones.

    Passages tied with the last returned score may differ (the cut-off falls inside a tie).
    """
    if len(new) != len(old):
        return False
    if any(abs(a["score"] - b.score) > tol for a, b in zip(new, old, strict=True)):
        return False
    if not old:
        return True
    last = old[-1].score
    above_new = {a["passage_id"] for a in new if a["score"] > last + tol}
    above_old = {b.passage_id for b in old if b.score > last + tol}
    return above_new == above_old


def _child(index_dir: str, n_queries: int, depth: int, k: int, reference_queries: int, variant: str,
           seed: int) -> dict[str, Any]:
    """The in-process part (runs in a fresh process: ``python -m lab.benchmarks.passages``)."""
    started = time.perf_counter()
    mem0 = _memory_mb()
    from service.engine import Engine
    from service.passages import DEFAULT_PARAMS
    from service.schema import PassageRequest
    from service.settings import Settings

    engine = Engine.load(index_dir, settings=Settings(index_dir=Path(index_dir)))
    load_s = time.perf_counter() - started
    mem_loaded = _memory_mb()
    texts = bench_queries(engine.docs, n_queries, seed)
    e2e: list[float] = []
    cpu: list[float] = []
    stage: dict[str, list[float]] = {}
    documents: list[int] = []
    results: list[list[dict[str, Any]]] = []
    for text in texts:
        t, c = time.perf_counter(), time.process_time()
        res = engine.passages(PassageRequest(query=text, k=k, depth=depth, variant=variant, explain=True))
        e2e.append((time.perf_counter() - t) * 1000.0)
        cpu.append((time.process_time() - c) * 1000.0)
        results.append([h.model_dump() for h in res.results])
        for st in res.stages:
            stage.setdefault(st.name, []).append(st.ms)
            if st.name == "passages":
                documents.append(int(st.detail["documents"]))
    mem_after = _memory_mb()

    # today's implementation on the same candidate lists
    from lab.benchmarks.passages_reference import PassageRanker, background_of_index
    from service.passages import PassageIndex

    ref = PassageRanker(translations=engine.pipeline.first_stage.tables,
                        background=background_of_index(PassageIndex.load(engine.folder, mmap=True)))
    docs = engine.docs
    ref_stage: list[float] = []
    ref_e2e: list[float] = []
    new_e2e: list[float] = []
    identical = 0
    for i, text in enumerate(texts[:reference_queries]):
        req = PassageRequest(query=text, k=k, depth=depth, variant=variant)
        t = time.perf_counter()
        query = engine.query(req, depth)
        query.k = depth
        cands, _ = engine.pipeline.run(query)
        t_first = time.perf_counter() - t
        lang = query.r.lang
        # the query as the engine's passage ranker reads it: its image in every language a route reaches
        images, _ = engine.evidence.passage_query(query.r.text, lang, translate=query.translate is not False)
        readable = set(images)
        t = time.perf_counter()
        recs = []
        for r, s in zip(cands.rows, cands.fused if cands.fused is not None else [], strict=True):
            rec = docs.get_row(int(r))
            if readable & set(rec.languages):
                recs.append((rec, float(s)))
        hits = ref.rank(images, lang, recs, variant=variant, k=k, langs=readable,
                        alpha=DEFAULT_PARAMS["alpha"], beta=DEFAULT_PARAMS["beta"],
                        sigma=DEFAULT_PARAMS["sigma"])
        t_ref = time.perf_counter() - t
        ref_stage.append(t_ref * 1000.0)
        ref_e2e.append((t_first + t_ref) * 1000.0)
        new_e2e.append(e2e[i])
        identical += same_hits(results[i], hits)
    return {
        "index": index_dir, "documents": engine.num_docs, "queries": len(texts), "depth": depth, "k": k,
        "variant": variant, "load_s": load_s, "memory_mb": {"start": mem0, "loaded": mem_loaded, "after": mem_after},
        "candidates_mean": float(np.mean(documents)) if documents else 0.0,
        "first_query_ms": e2e[0] if e2e else float("nan"),
        "engine": _stats(e2e), "engine_cpu": _stats(cpu), "per_stage": {name: _stats(v) for name, v in stage.items()},
        "reference": {"queries": len(ref_stage), "passages": _stats(ref_stage), "engine": _stats(ref_e2e),
                      "new_engine_same_queries": _stats(new_e2e), "identical_hits": identical},
        "texts": texts,
    }


def _http(index_dir: str, texts: list[str], depth: int, k: int, variant: str) -> dict[str, Any]:
    import logging

    from lab.benchmarks.service import served

    logging.getLogger("httpx").setLevel(logging.WARNING)

    lat: list[float] = []
    with served(index_dir, poll_s=0.1) as (client, ready_s, _pid):
        for text in texts:
            t = time.perf_counter()
            r = client.post("/passages", json={"query": text, "k": k, "depth": depth, "variant": variant})
            lat.append((time.perf_counter() - t) * 1000.0)
            r.raise_for_status()
    return {"ready_s": ready_s, "first_request_ms": lat[0] if lat else float("nan"), **_stats(lat)}


def run_passage_bench(index_dir: Path, *, queries: int = 100, depth: int = 1000, k: int = 10,
                      reference_queries: int = 10, variant: str = "qsf_passage_propagate", seed: int = 0,
                      http: bool = True) -> dict[str, Any]:
    """Measure (child process for the cold in-process part, then a live server); returns the figures."""
    from service.passages import VARIANTS

    if variant not in VARIANTS:
        raise ValueError(f"unknown passage variant {variant!r}; valid: {', '.join(VARIANTS)}")
    if queries < 1 or depth < 1 or k < 1 or reference_queries < 0:
        raise ValueError("queries, depth and k must be >= 1, reference queries >= 0")
    args = json.dumps({"index_dir": str(index_dir), "n_queries": queries, "depth": depth, "k": k,
                       "reference_queries": min(reference_queries, queries), "variant": variant, "seed": seed})
    proc = subprocess.run([sys.executable, "-m", _CHILD, args], capture_output=True, text=True, check=False,
                          env={**os.environ, "PRIORART_LOG_LEVEL": "WARNING"})
    if proc.returncode != 0:
        raise RuntimeError(f"benchmark process failed:\n{proc.stderr[-3000:]}")
    report: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    texts = report.pop("texts")
    ref = report["reference"]
    if ref["queries"]:
        ref["speedup_engine_mean"] = ref["engine"]["mean"] / ref["new_engine_same_queries"]["mean"]
        ref["speedup_engine_p50"] = ref["engine"]["p50"] / ref["new_engine_same_queries"]["p50"]
        new_passages = report["per_stage"]["passages"]["p50"]
        ref["speedup_passages_p50"] = ref["passages"]["p50"] / new_passages if new_passages > 0 else float("inf")
    if http:
        report["http"] = _http(str(index_dir), texts, depth, k, variant)
    return report


def format_report(r: dict[str, Any]) -> str:
    """The figures as text."""
    m = r["memory_mb"]
    lines = [f"index {r['index']}: {r['documents']} documents; {r['queries']} queries (English first claims), "
             f"depth {r['depth']} ({r['candidates_mean']:.0f} candidate documents ranked on average), k {r['k']}, "
             f"variant {r['variant']}",
             f"cold process: engine loaded in {r['load_s']:.2f} s; resident MiB (anonymous + file-backed maps) "
             f"{m['loaded']['anon']:.0f} + {m['loaded']['file']:.0f} after load, {m['after']['anon']:.0f} + "
             f"{m['after']['file']:.0f} after the queries; first query {r['first_query_ms']:.1f} ms",
             f"{'in process':<34}{'p50 ms':>10}{'p99 ms':>10}{'mean ms':>10}"]
    for name, v in r["per_stage"].items():
        lines.append(f"  stage {name:<26}{v['p50']:>10.2f}{v['p99']:>10.2f}{v['mean']:>10.2f}")
    e = r["engine"]
    lines.append(f"  {'Engine.passages (end to end)':<32}{e['p50']:>10.2f}{e['p99']:>10.2f}{e['mean']:>10.2f}")
    c = r["engine_cpu"]
    lines.append(f"  {'  same, process CPU time':<32}{c['p50']:>10.2f}{c['p99']:>10.2f}{c['mean']:>10.2f}")
    ref = r["reference"]
    if ref["queries"]:
        lines.append(f"today's implementation, same run, first {ref['queries']} queries, same candidates:")
        for label, v in (("passages (records + ranking)", ref["passages"]), ("end to end", ref["engine"]),
                         ("new end to end, same queries", ref["new_engine_same_queries"])):
            lines.append(f"  {label:<32}{v['p50']:>10.2f}{v['p99']:>10.2f}{v['mean']:>10.2f}")
        lines.append(f"  speed-up end to end: {ref['speedup_engine_mean']:.0f}x (mean), "
                     f"{ref['speedup_engine_p50']:.0f}x (p50); passage stage alone "
                     f"{ref['speedup_passages_p50']:.0f}x (p50); identical hits "
                     f"{ref['identical_hits']}/{ref['queries']}")
    if "http" in r:
        h = r["http"]
        lines.append(f"POST /passages over HTTP, fresh `priorart serve` (ready in {h['ready_s']:.1f} s): p50 "
                     f"{h['p50']:.2f} ms, p99 {h['p99']:.2f} ms, mean {h['mean']:.2f} ms, first request "
                     f"{h['first_request_ms']:.1f} ms")
    return "\n".join(lines)


if __name__ == "__main__":  # the cold child process of run_passage_bench
    import logging

    logging.basicConfig(level=logging.WARNING)
    a = json.loads(sys.argv[1])
    print(json.dumps(_child(a["index_dir"], a["n_queries"], a["depth"], a["k"], a["reference_queries"],
                            a["variant"], a["seed"])))
