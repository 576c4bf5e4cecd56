"""``priorart-lab bench add``: the live index against a full rebuild (issue 18); ``priorart-lab bench merges``: what the
merge policy of ``add`` writes over a run of adds (issue 32).

On a synthetic corpus (:mod:`training.synth`): the time of ``priorart build`` of the whole collection
(translation tables and compound word list built, as by default) against the time of adding the last
``n_add`` documents to an index of the first ``n_base`` (one ``add``: a segment and a generation); then
search latency (BM25 pipeline, in-process, p50/p99 over the same queries) with the added documents in
``segments - 1`` batches (``segments`` segments) against a copy of it compacted into one, both engines
loaded side by side and each query timed on both in alternating order (a shared machine's load falls on
both alike).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import service.index.live as live
from service.corpus.jsonl import read_corpus
from service.engine import Engine
from service.index.folder import IndexFolder
from service.index.live import add_documents, compact
from service.retrieval.vector_cache import turned_off
from service.schema import SearchRequest
from service.settings import Settings
from service.text.analysis import SUPPORTED_LANGS


def _latencies(indexes: dict[str, Path], queries: list[tuple[str, str]], rounds: int,
               **request: Any) -> dict[str, dict[str, Any]]:
    """p50/p99 of ``Engine.search`` per index (``request``: more fields of each :class:`SearchRequest`), the engines
    loaded side by side and timed query by query in alternating order (``rounds`` passes), so that the load of a
    shared machine falls on both alike; also of the first pass alone (the first use of each term and page since the
    open) and of the later passes."""
    engines = {name: Engine.load(d, settings=Settings(index_dir=d), verify=False) for name, d in indexes.items()}
    times: dict[str, list[float]] = {name: [] for name in engines}
    for text, lang in queries[:5]:  # warm-up
        for engine in engines.values():
            engine.search(SearchRequest(query=text, lang=lang, k=10, **request))
    names = list(engines)
    for rnd in range(rounds):
        for i, (text, lang) in enumerate(queries):
            for name in names if (i + rnd) % 2 == 0 else names[::-1]:
                t = time.perf_counter()
                engines[name].search(SearchRequest(query=text, lang=lang, k=10, **request))
                times[name].append(time.perf_counter() - t)
    out: dict[str, dict[str, Any]] = {}
    n = len(queries)
    for name, ts in times.items():
        out[name] = {**_percentiles(ts), "segments": len(engines[name].folder.segments), "timed": len(ts),
                     "first_pass": _percentiles(ts[:n]), "later": _percentiles(ts[n:]) if rounds > 1 else None}
        engines[name].close()
    return out


def _ratios(many: dict[str, float], one: dict[str, float]) -> dict[str, float]:
    return {q: many[q] / one[q] for q in ("p50_ms", "p99_ms")}


def run_add_bench(n_base: int = 100_000, n_add: int = 10_000, *, segments: int = 10, queries: int = 600,
                  rounds: int = 3, seed: int = 0, work_dir: Path | None = None,
                  build_options: dict[str, Any] | None = None) -> dict[str, Any]:
    """Run the benchmark (``build_options``: keyword arguments of both builds, the defaults when None). ``work_dir``:
    build there and keep the indexes; a later run with the same sizes and seed times the kept ones again (its build
    and add figures are the first run's, kept in ``builds.json``). The document vector cache is off: the add would
    read the vectors the full build encoded."""
    with turned_off():
        return _run_add_bench(n_base, n_add, segments=segments, queries=queries, rounds=rounds, seed=seed,
                              work_dir=work_dir, build_options=build_options)


def _run_add_bench(n_base: int, n_add: int, *, segments: int, queries: int, rounds: int, seed: int,
                   work_dir: Path | None, build_options: dict[str, Any] | None) -> dict[str, Any]:
    from training.build import build_index
    from training.synth import SynthConfig, write_synthetic

    tmp = Path(work_dir) if work_dir else Path(tempfile.mkdtemp(prefix="priorart-bench-add-"))
    tmp.mkdir(parents=True, exist_ok=True)
    kept = tmp / "builds.json"
    key = json.loads(json.dumps({"n_base": n_base, "n_add": n_add, "segments": segments, "seed": seed,
                                 "build_options": build_options}))
    try:
        builds = json.loads(kept.read_text()) if kept.is_file() and (tmp / "all.jsonl").is_file() else None
        if builds is None or builds["key"] != key:  # nothing kept for these settings: build afresh
            builds = None
            for name in ("live", "seg", "one", "full"):
                shutil.rmtree(tmp / name, ignore_errors=True)
            kept.unlink(missing_ok=True)
            write_synthetic(tmp / "all.jsonl", SynthConfig(n=n_base + n_add, seed=seed), progress=False)
        records = list(read_corpus(tmp / "all.jsonl"))
        if builds is None:
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
                              max_segments=segments + 1, merge_factor=0)  # `segments` segments: no merges
            shutil.copytree(tmp / "seg", tmp / "one")
            compact(tmp / "one", progress=False)
            builds = {"key": key, "full_s": full_s, "add_s": add_s, "generation": add.generation}
            kept.write_text(json.dumps(builds))
        full_s, add_s = builds["full_s"], builds["add_s"]
        qs = []
        for i, rec in enumerate(records[:: max(1, len(records) // queries)][:queries]):
            lang = SUPPORTED_LANGS[i % 3]
            text = rec.title.get(lang) or rec.title.get("en") or next(iter(rec.title.values()))
            qs.append((text, lang if lang in rec.title else "en"))
        indexes = {"many": tmp / "seg", "one": tmp / "one"}
        # /search as served (the first 10 ordered by their best passage), then the first stage and the fusion alone
        out: dict[str, Any] = {"n_base": n_base, "n_add": n_add, "full_build_s": full_s, "add_s": add_s,
                               "speedup": full_s / add_s, "add_generation": builds["generation"], "queries": len(qs),
                               "rounds": rounds}
        for key, request in (("search", {}), ("first_stage", {"evidence_docs": 0})):
            timed = _latencies(indexes, qs, rounds, **request)
            many, one = timed["many"], timed["one"]
            part: dict[str, Any] = {"many": many, "one": one, "p50_ratio": many["p50_ms"] / one["p50_ms"],
                                    "p99_ratio": many["p99_ms"] / one["p99_ms"],
                                    "first_pass_ratio": _ratios(many["first_pass"], one["first_pass"])}
            if rounds > 1:
                part["later_ratio"] = _ratios(many["later"], one["later"])
            if key == "search":  # (the keys of the result files before the first stage was timed alone)
                out.update({"search": {"many": many, "one": one}, **{k: v for k, v in part.items()
                                                                     if k not in ("many", "one")}})
            else:
                out[key] = part
        return out
    finally:
        if work_dir is None:
            shutil.rmtree(tmp, ignore_errors=True)


def format_report(r: dict[str, Any]) -> str:
    lines = [f"add {r['n_add']} documents to an index of {r['n_base']}: {r['add_s']:.1f} s; full rebuild of "
             f"{r['n_base'] + r['n_add']}: {r['full_build_s']:.1f} s ({r['speedup']:.1f}x faster)"]
    for what, part in (("/search", {**r, "many": r["search"]["many"], "one": r["search"]["one"]}),
                       ("first stage alone (evidence_docs 0)", r.get("first_stage"))):
        if part is None:
            continue
        m, o = part["many"], part["one"]
        lines.append(
            f"{what} ({r['queries']} title queries x {r['rounds']} rounds, en/de/fr, k=10, the two indexes timed "
            f"alternately): {m['segments']} segments p50 {m['p50_ms']:.1f} ms p99 {m['p99_ms']:.1f} ms; 1 segment "
            f"p50 {o['p50_ms']:.1f} ms p99 {o['p99_ms']:.1f} ms (ratio p50 {part['p50_ratio']:.2f}, p99 "
            f"{part['p99_ratio']:.2f}); first pass ratio p50 {part['first_pass_ratio']['p50_ms']:.2f} p99 "
            f"{part['first_pass_ratio']['p99_ms']:.2f}"
            + (f"; later passes p50 {part['later_ratio']['p50_ms']:.2f} p99 {part['later_ratio']['p99_ms']:.2f}"
               if "later_ratio" in part else ""))
    return "\n".join(lines)


def run_merge_bench(n_base: int = 2_000, batch: int = 25, adds: int = 40, *, old_bound: int = 10,
                    seed: int = 3) -> dict[str, Any]:
    """``adds`` adds of ``batch`` synthetic documents to an index of ``n_base``, once with ``add``'s tiered merges
    (the default) and once with the rule before them (every segment compacted into one when a generation passes
    ``old_bound`` segments): the documents written into segments (the adds' own and every merge's), the segment
    counts after each add, and the seconds of the whole run (both on one machine, one after the other; the document
    vector cache off, else the second policy would read the first one's vectors)."""
    with turned_off():
        return _run_merge_bench(n_base, batch, adds, old_bound=old_bound, seed=seed)


def _run_merge_bench(n_base: int, batch: int, adds: int, *, old_bound: int, seed: int) -> dict[str, Any]:
    from service.index.folder import IndexFolder
    from service.index.store import DocStoreWriter
    from training.build import build_index
    from training.synth import SynthConfig, write_synthetic

    written = [0]
    real = DocStoreWriter.add

    def counting(self: DocStoreWriter, record: Any) -> int:  # every document written into a segment's doc store
        written[0] += 1
        return real(self, record)

    tmp = Path(tempfile.mkdtemp(prefix="priorart-bench-merges-"))
    try:
        write_synthetic(tmp / "all.jsonl", SynthConfig(n=n_base + batch * adds, seed=seed), progress=False)
        records = list(read_corpus(tmp / "all.jsonl"))
        build_index(records[:n_base], tmp / "base", translation=False, compounds="", progress=False)
        out: dict[str, Any] = {"n_base": n_base, "batch": batch, "adds": adds, "old_bound": old_bound}
        DocStoreWriter.add = counting  # type: ignore[method-assign]
        for policy in ("tiered", "old"):
            idx = tmp / policy
            shutil.copytree(tmp / "base", idx)
            written[0], counts, t0 = 0, [], time.perf_counter()
            for i in range(adds):
                part = records[n_base + batch * i: n_base + batch * (i + 1)]
                if policy == "tiered":
                    add_documents(idx, part, progress=False)
                elif add_documents(idx, part, progress=False, merge_factor=0,
                                   max_segments=adds + 1).segments > old_bound:
                    compact(idx, progress=False)
                counts.append(len(IndexFolder.open(idx, verify=False).segments))
            out[policy] = {"written": written[0], "max_segments": max(counts), "segments": counts,
                           "seconds": time.perf_counter() - t0}
        return out
    finally:
        DocStoreWriter.add = real  # type: ignore[method-assign]
        shutil.rmtree(tmp, ignore_errors=True)


def format_merge_report(r: dict[str, Any]) -> str:
    t, o = r["tiered"], r["old"]
    added = r["batch"] * r["adds"]
    return "\n".join([
        f"{r['adds']} adds of {r['batch']} documents to an index of {r['n_base']} ({added} added):",
        f"  tiered merges: {t['written']} documents written ({t['written'] - added} by merges), at most "
        f"{t['max_segments']} segments, {t['seconds']:.1f} s",
        f"  compaction past {r['old_bound']} segments: {o['written']} documents written ({o['written'] - added} by "
        f"compactions), at most {o['max_segments']} segments, {o['seconds']:.1f} s",
        f"  written: {t['written'] / o['written']:.2f}x; time: {t['seconds'] / o['seconds']:.2f}x",
    ])


# ------------------------------------------------------------------ opening a generation (issue 32, items 2 and 4)

_OPEN_PROBE = r"""
import json, sys, time
from pathlib import Path
from service.engine import Engine
from service.schema import PassageRequest
from service.settings import Settings
from lab.benchmarks.service import memory_mb  # VmHWM: ru_maxrss would keep a forking parent's peak across exec

def written():  # bytes this process has passed to write() so far (files, pipes: /proc/self/io's wchar)
    for line in open("/proc/self/io"):
        if line.startswith("wchar:"):
            return int(line.split()[1])
    return 0

index, query, lang = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
w0, t0 = written(), time.perf_counter()
engine = Engine.load(index, settings=Settings(index_dir=index), verify=False)
open_s, w1 = time.perf_counter() - t0, written()
t1 = time.perf_counter()
hits = engine.passages(PassageRequest(query=query, lang=lang, k=10)).results
first_s = time.perf_counter() - t1
print(json.dumps({"open_s": open_s, "written": w1 - w0, "first_passages_s": first_s, "hits": len(hits),
                  "segments": len(engine.folder.segments),
                  "max_rss_mb": memory_mb().get("peak", 0.0)}))
"""


def _probe(index: Path, query: str, lang: str) -> dict[str, Any]:
    import json
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _OPEN_PROBE, str(index), query, lang], capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"opening {index} failed: {done.stderr.strip()[-2000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def run_open_bench(n_base: int = 100_000, share: float = 0.01, *, rounds: int = 3, seed: int = 0,
                   work_dir: Path | None = None, build_options: dict[str, Any] | None = None,
                   index: Path | None = None, corpus: Path | None = None) -> dict[str, Any]:
    """Open a generation after an add of ``share`` of ``n_base`` synthetic documents (two segments) against the same
    collection compacted into one segment: each opened ``rounds`` times in a fresh process (the two alternating),
    with the seconds of ``Engine.load``, the bytes the process wrote while opening, its peak memory, and one
    ``/passages`` query answered after the open. ``work_dir``: build there and keep (a later run reuses it);
    ``build_options``: keyword arguments of the build (the defaults when None).

    ``index`` and ``corpus`` (an index too large to build twice here: 1M): the generation after adding ``corpus``
    to a hard-linked copy of ``index`` in ``work_dir`` against ``index`` itself as the one-segment reference (the
    collection before the add, not compacted after it)."""
    from training.build import build_index
    from training.synth import SynthConfig, write_synthetic

    n_add = max(1, round(n_base * share))
    tmp = Path(work_dir) if work_dir else Path(tempfile.mkdtemp(prefix="priorart-bench-open-"))
    tmp.mkdir(parents=True, exist_ok=True)
    added, compacted = tmp / f"added-{n_base}", tmp / f"compacted-{n_base}"
    reference = "the same collection compacted"
    rec = None  # the query below: the first added document's claim
    if index is not None:
        if corpus is None:
            raise ValueError("an index needs the corpus to add to it")
        added, compacted, reference = tmp / "added-to-index", Path(index), "the index before the add"
        new = list(read_corpus(corpus))
        if not (added / "meta.json").is_file():
            _linked_copy(Path(index), added)
            add_documents(added, new, progress=False)
        n_base, n_add, rec = IndexFolder.open(compacted, verify=False).n_live, len(new), new[0]
    try:
        if rec is None:
            records = None
            if not (compacted / "meta.json").is_file():
                write_synthetic(tmp / "all.jsonl", SynthConfig(n=n_base + n_add, seed=seed), progress=False)
                records = list(read_corpus(tmp / "all.jsonl"))
                shutil.rmtree(added, ignore_errors=True)
                build_index(records[:n_base], added, progress=False, **(build_options or {}))
                add_documents(added, records[n_base:], progress=False)
                shutil.rmtree(compacted, ignore_errors=True)
                shutil.copytree(added, compacted)
                compact(compacted, progress=False)
            rec = records[n_base] if records else next(iter(read_corpus(tmp / "all.jsonl")))
        query = (rec.claims.get("en") or next(iter(rec.claims.values())))[0].text[:300]
        lang = "en" if rec.claims.get("en") else next(iter(rec.claims))
        runs: dict[str, list[dict[str, Any]]] = {"added": [], "compacted": []}
        for rnd in range(rounds):
            for name in ("added", "compacted") if rnd % 2 == 0 else ("compacted", "added"):
                runs[name].append(_probe(added if name == "added" else compacted, query, lang))
        out: dict[str, Any] = {"n_base": n_base, "n_add": n_add, "rounds": rounds, "reference": reference}
        for name, rs in runs.items():
            out[name] = {"open_s": statistics.median(r["open_s"] for r in rs),
                         "max_rss_mb": statistics.median(r["max_rss_mb"] for r in rs),
                         "written_bytes": max(r["written"] for r in rs),
                         "first_passages_s": statistics.median(r["first_passages_s"] for r in rs),
                         "segments": rs[0]["segments"], "runs": rs}
        out["open_ratio"] = out["added"]["open_s"] / out["compacted"]["open_s"]
        out["rss_ratio"] = out["added"]["max_rss_mb"] / out["compacted"]["max_rss_mb"]
        return out
    finally:
        if work_dir is None:
            shutil.rmtree(tmp, ignore_errors=True)


def format_open_report(r: dict[str, Any]) -> str:
    a, c = r["added"], r["compacted"]
    return "\n".join([
        f"open an index of {r['n_base']} after an add of {r['n_add']} ({a['segments']} segments) against "
        f"{r.get('reference', 'the same collection compacted')} "
        f"(1 segment), fresh process each, {r['rounds']} rounds alternating (medians):",
        f"  after the add: open {a['open_s']:.2f} s, peak RSS {a['max_rss_mb']:.0f} MB, written at open "
        f"{a['written_bytes']:,} bytes, first /passages {a['first_passages_s'] * 1000:.0f} ms",
        f"  one segment:   open {c['open_s']:.2f} s, peak RSS {c['max_rss_mb']:.0f} MB, written at open "
        f"{c['written_bytes']:,} bytes, first /passages {c['first_passages_s'] * 1000:.0f} ms",
        f"  ratio: open {r['open_ratio']:.2f}x, peak RSS {r['rss_ratio']:.2f}x",
    ])


# ------------------------------------------------------------------------------------------ reload in a running server


def _linked_copy(src: Path, dest: Path) -> None:
    """``src`` copied to ``dest`` as hard links (an add writes new files beside them and never changes one in place;
    the lock file is left out), so a run leaves ``src`` as it was, at no cost in disk."""
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(src, dest, copy_function=os.link, ignore=shutil.ignore_patterns(live.Layout.LOCK))


def _searches(client: Any, queries: list[str], k: int) -> list[tuple[float, int]]:
    """Each query's seconds over HTTP and the generation that answered."""
    out = []
    for q in queries:
        t0 = time.perf_counter()
        resp = client.post("/search", json={"query": q, "k": k})
        resp.raise_for_status()
        out.append((time.perf_counter() - t0, int(resp.json()["generation"])))
    return out


def _percentiles(values: list[float]) -> dict[str, float]:
    import numpy as np

    arr = np.asarray(values) * 1000
    return {"p50_ms": float(np.percentile(arr, 50)), "p99_ms": float(np.percentile(arr, 99)), "n": len(values)}


def _add_and_wait(client: Any, copy: Path, corpus: Path, text: str, k: int, poll_s: float) -> dict[str, Any]:
    """``priorart add`` of ``corpus`` in another process while a client searches ``text`` again and again: the add's
    report, its commit time and the time of the first answer from the committed generation."""
    import json
    import subprocess
    import sys
    import threading

    import httpx

    from service.index.folder import Layout

    answers: list[tuple[float, int]] = []
    stop = threading.Event()

    def poll() -> None:
        with httpx.Client(base_url=str(client.base_url), timeout=120.0) as c:
            while not stop.is_set():
                resp = c.post("/search", json={"query": text, "k": k})
                answers.append((time.time(), int(resp.json()["generation"])))
                time.sleep(poll_s)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    t_add = time.time()
    try:
        done = subprocess.run([sys.executable, "-m", "training.cli", "add", str(copy), str(corpus), "--json",
                               "--no-progress", "--no-watches"], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"priorart add failed: {done.stderr.strip()[-2000:]}")
        report = json.loads(done.stdout)
        gen = int(report["generation"])
        committed = (copy / Layout.generation(gen)).stat().st_mtime
        deadline = time.time() + 600
        while not any(g >= gen for _, g in answers) and time.time() < deadline:
            time.sleep(poll_s)
    finally:
        stop.set()
        poller.join(timeout=120)
    first = next((t for t, g in answers if g >= gen), None)
    if first is None:
        raise RuntimeError(f"the server did not answer from generation {gen} within 600 s")
    return {"generation": gen, "segments": report.get("segments"), "add_s": committed - t_add,
            "commit_to_first_answer_s": first - committed}


def run_reload_bench(index: Path, corpus: Path, work: Path, *, adds: int = 2, queries: int = 100, k: int = 10,
                     reload_interval_s: float = 2.0, poll_s: float = 0.05) -> dict[str, Any]:
    """The time from ``priorart add``'s commit to the first answer from the new generation in a running server.

    ``index`` is copied as hard links into ``work`` (it stays as it was); ``priorart serve`` serves the copy (its own
    ``reload_interval_s``), and ``priorart add`` adds ``corpus`` to it in ``adds`` batches in another process, while
    a client searches again and again (one request at a time). Per add: the commit (the new generation manifest's
    time) to the end of the first answer that names the new generation; the server's resident memory; ``/search``
    p50/p99 over ``queries`` first claims of the added documents on the new generation twice (the first pass fills
    what the generation reads at first use, unless the reload warmed it; the second is the steady state). The first
    add reloads from the index as given, the next ones from a generation of segments (whose queries' postings
    warm the next)."""
    from lab.benchmarks.service import memory_mb, served
    from service.corpus.jsonl import write_corpus
    from service.index.folder import current_generation

    logging.getLogger("httpx").setLevel(logging.WARNING)  # a line per request otherwise
    records = list(read_corpus(corpus))
    texts = [" ".join((rec.claims.get("en") or next(iter(rec.claims.values())))[0].text.split()[:60])
             for rec in records if rec.claims][:queries]
    if not texts or len(records) < adds:
        raise RuntimeError(f"{corpus} has too few records with claims for {adds} adds")
    copy = Path(work) / "reload-index"
    _linked_copy(Path(index), copy)
    batches = []
    for i in range(adds):
        path = Path(work) / f"reload-batch-{i}.jsonl"
        write_corpus(records[i * len(records) // adds : (i + 1) * len(records) // adds], path)
        batches.append(path)
    before_gen, n_docs = current_generation(copy), IndexFolder.open(copy, verify=False).n_live
    os.environ["PRIORART_RELOAD_INTERVAL_S"] = str(reload_interval_s)
    rounds = []
    try:
        with served(copy) as (client, ready_s, pid):
            old = _searches(client, texts, k)  # the index as given, its pages read in
            mem = [memory_mb(pid)]
            for path in batches:
                got = _add_and_wait(client, copy, path, texts[0], k, poll_s)
                time.sleep(min(5.0, 2 * reload_interval_s))  # what the reload warms, as a server between queries
                first, warm = _searches(client, texts, k), _searches(client, texts, k)
                mem.append(memory_mb(pid))
                rounds.append({**got, "memory_mb": mem[-1], "search": {
                    "first_pass": _percentiles([t for t, _ in first]), "again": _percentiles([t for t, _ in warm])},
                    "answered_by": sorted({g for _, g in warm})})
    finally:
        os.environ.pop("PRIORART_RELOAD_INTERVAL_S", None)
    return {"index": str(index), "index_documents": n_docs, "documents_added": len(records), "adds": adds,
            "queries": len(texts), "k": k, "reload_interval_s": reload_interval_s, "server_ready_s": ready_s,
            "generation_before": before_gen,
            "memory_mb_before": mem[0], "search_before": _percentiles([t for t, _ in old]), "rounds": rounds}


def format_reload_report(r: dict[str, Any]) -> str:
    b = r["search_before"]
    lines = [f"{r['index']} ({r['index_documents']} documents): {r['documents_added']} documents added in "
             f"{r['adds']} adds in a running server (reload "
             f"every {r['reload_interval_s']:g} s; ready {r['server_ready_s']:.1f} s after start); /search p50/p99 "
             f"over {r['queries']} claims before: {b['p50_ms']:.1f}/{b['p99_ms']:.1f} ms, server rss "
             f"{r['memory_mb_before'].get('rss', 0):.0f} MB"]
    for i, x in enumerate(r["rounds"], 1):
        f, a = x["search"]["first_pass"], x["search"]["again"]
        lines.append(f"  add {i}: generation {x['generation']} ({x['segments']} segments), add to commit "
                     f"{x['add_s']:.1f} s, commit to the first answer from it {x['commit_to_first_answer_s']:.2f} s; "
                     f"/search first pass {f['p50_ms']:.1f}/{f['p99_ms']:.1f} ms, again {a['p50_ms']:.1f}/"
                     f"{a['p99_ms']:.1f} ms; rss {x['memory_mb'].get('rss', 0):.0f} MB")
    return "\n".join(lines)
