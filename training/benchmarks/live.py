"""``priorart bench add``: the live index against a full rebuild (issue 18).

On a synthetic corpus (:mod:`training.synth`): the time of ``priorart build`` of the whole collection
(translation tables and compound word list built, as by default) against the time of adding the last
``n_add`` documents to an index of the first ``n_base`` (one ``add``: a segment and a generation); then
search latency (BM25 pipeline, in-process, p50/p99 over the same queries) with the added documents in
``segments - 1`` batches (``segments`` segments) against a copy of it compacted into one, both engines
loaded side by side and each query timed on both in alternating order (a shared machine's load falls on
both alike).
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from service.corpus.jsonl import read_corpus
from service.engine import Engine
from service.index.live import add_documents, compact
from service.schema import SearchRequest
from service.settings import Settings
from service.text.analysis import SUPPORTED_LANGS


def _latencies(indexes: dict[str, Path], queries: list[tuple[str, str]], rounds: int) -> dict[str, dict[str, float]]:
    """p50/p99 of ``Engine.search`` per index, the engines loaded side by side and timed query by query in
    alternating order (``rounds`` passes), so that the load of a shared machine falls on both alike."""
    engines = {name: Engine.load(d, settings=Settings(index_dir=d), verify=False) for name, d in indexes.items()}
    times: dict[str, list[float]] = {name: [] for name in engines}
    for text, lang in queries[:5]:  # warm-up
        for engine in engines.values():
            engine.search(SearchRequest(query=text, lang=lang, k=10))
    names = list(engines)
    for rnd in range(rounds):
        for i, (text, lang) in enumerate(queries):
            for name in names if (i + rnd) % 2 == 0 else names[::-1]:
                t = time.perf_counter()
                engines[name].search(SearchRequest(query=text, lang=lang, k=10))
                times[name].append((time.perf_counter() - t) * 1000)
    out = {}
    for name, ts in times.items():
        ts.sort()
        out[name] = {"p50_ms": statistics.median(ts), "p99_ms": ts[min(len(ts) - 1, int(0.99 * len(ts)))],
                     "segments": len(engines[name].folder.segments), "timed": len(ts)}
    return out


def run_add_bench(n_base: int = 100_000, n_add: int = 10_000, *, segments: int = 10, queries: int = 200,
                  rounds: int = 3, seed: int = 0, work_dir: Path | None = None,
                  build_options: dict[str, Any] | None = None) -> dict[str, Any]:
    """Run the benchmark (``build_options``: keyword arguments of both builds, the defaults when None)."""
    from training.build import build_index
    from training.synth import SynthConfig, write_synthetic

    tmp = Path(work_dir) if work_dir else Path(tempfile.mkdtemp(prefix="priorart-bench-add-"))
    tmp.mkdir(parents=True, exist_ok=True)
    try:
        write_synthetic(tmp / "all.jsonl", SynthConfig(n=n_base + n_add, seed=seed), progress=False)
        records = list(read_corpus(tmp / "all.jsonl"))
        t = time.perf_counter()
        build_index(records, tmp / "full", progress=False, **(build_options or {}))
        full_s = time.perf_counter() - t
        shutil.rmtree(tmp / "full")
        build_index(records[:n_base], tmp / "live", progress=False, **(build_options or {}))
        shutil.copytree(tmp / "live", tmp / "seg")
        t = time.perf_counter()
        add = add_documents(tmp / "live", records[n_base:], progress=False)
        add_s = time.perf_counter() - t
        step = -(-n_add // max(1, segments - 1))
        for lo in range(0, n_add, step):
            add_documents(tmp / "seg", records[n_base + lo: n_base + lo + step], progress=False,
                          max_segments=segments + 1)
        qs = []
        for i, rec in enumerate(records[:: max(1, len(records) // queries)][:queries]):
            lang = SUPPORTED_LANGS[i % 3]
            text = rec.title.get(lang) or rec.title.get("en") or next(iter(rec.title.values()))
            qs.append((text, lang if lang in rec.title else "en"))
        shutil.copytree(tmp / "seg", tmp / "one")
        compact(tmp / "one", progress=False)
        timed = _latencies({"many": tmp / "seg", "one": tmp / "one"}, qs, rounds)
        many, one = timed["many"], timed["one"]
        return {
            "n_base": n_base, "n_add": n_add, "full_build_s": full_s, "add_s": add_s, "speedup": full_s / add_s,
            "add_generation": add.generation, "search": {"many": many, "one": one},
            "p50_ratio": many["p50_ms"] / one["p50_ms"], "p99_ratio": many["p99_ms"] / one["p99_ms"],
            "queries": len(qs), "rounds": rounds,
        }
    finally:
        if work_dir is None:
            shutil.rmtree(tmp, ignore_errors=True)


def format_report(r: dict[str, Any]) -> str:
    m, o = r["search"]["many"], r["search"]["one"]
    return "\n".join([
        f"add {r['n_add']} documents to an index of {r['n_base']}: {r['add_s']:.1f} s; full rebuild of "
        f"{r['n_base'] + r['n_add']}: {r['full_build_s']:.1f} s ({r['speedup']:.1f}x faster)",
        f"search ({r['queries']} title queries x {r['rounds']} rounds, en/de/fr, k=10, the two indexes timed "
        f"alternately): {m['segments']} segments p50 {m['p50_ms']:.1f} ms "
        f"p99 {m['p99_ms']:.1f} ms; 1 segment p50 {o['p50_ms']:.1f} ms p99 {o['p99_ms']:.1f} ms "
        f"(ratio p50 {r['p50_ratio']:.2f}, p99 {r['p99_ratio']:.2f})",
    ])
