"""``priorart-lab bench watch``: prior-art watches after a weekly add (issue 34).

A synthetic index of ``n_base`` documents (``priorart synth`` + ``priorart build``, kept in ``--cache-dir``), and
``n_watches`` watches saved on it: real claims (every claim of ../shared/data's patents with at least 15 words, en,
de and fr) and synthetic claims (the first claims of documents drawn from the synthetic corpus, in turn en, de, fr
where the document has them), k = 10 (70 %), 20 (20 %) or 50 (10 %). Then an add of ``n_add`` more synthetic
documents (1 %), and the evaluation of every watch against them (:func:`service.watch.evaluate.evaluate`): its
time in all and per watch (each watch's own share, from the evaluations table), how many watches the bound settled
without a search, the hits, and the memory (the process's resident set before, its peak during the evaluation).

``verify``: each watch's search run again after the add; its new documents in the top k must be its hits, rank for
rank (the searches before the add are the ones the watches ran when saved: none of the added documents was in the
index then). The saving, the add and the verification are timed too, not counted in the evaluation.
"""

from __future__ import annotations

import contextlib
import os
import random
import resource
import shutil
import statistics
import time
from pathlib import Path
from typing import Any

from service.corpus.jsonl import read_corpus, write_corpus
from service.corpus.record import PatentRecord

MIN_WORDS = 15
K_CHOICES = (10,) * 7 + (20,) * 2 + (50,)


def _rss_mb(field: str = "VmRSS") -> float | None:
    """This process's resident set (``VmRSS``) or its peak since the last reset (``VmHWM``), in MB (Linux)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return None


def _reset_peak() -> None:
    """Start the peak resident set (``VmHWM``) over from now (Linux: ``clear_refs`` 5)."""
    with contextlib.suppress(OSError), open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def corpus(cache_dir: Path, n_base: int, n_add: int, seed: int, log: Any = print) -> tuple[Path, Path, Path]:
    """The synthetic corpus of ``n_base + n_add`` documents, the index of the first ``n_base`` and the batch of the
    rest (kept in ``cache_dir`` for the next run)."""
    from training.build import build_index
    from training.synth import SynthConfig, write_synthetic

    d = cache_dir / f"synth-{n_base}-{n_add}-{seed}"
    d.mkdir(parents=True, exist_ok=True)
    all_path, index, batch = d / "all.jsonl", d / "index", d / "add.jsonl"
    if not all_path.exists():
        log(f"writing a synthetic corpus of {n_base + n_add} documents in {d}")
        write_synthetic(d / "all.jsonl.tmp", SynthConfig(n=n_base + n_add, seed=seed), progress=False)
        (d / "all.jsonl.tmp").rename(all_path)
    if not (index / "meta.json").exists() or not batch.exists():
        records = list(read_corpus(all_path))
        write_corpus(records[n_base:], batch)
        log(f"building the index of {n_base} documents (minutes)")
        shutil.rmtree(d / "index.tmp", ignore_errors=True)
        build_index(records[:n_base], d / "index.tmp", progress=False)
        shutil.rmtree(index, ignore_errors=True)
        (d / "index.tmp").rename(index)
    return all_path, index, batch


def real_claims(data: Path | None) -> list[tuple[str, str]]:
    """Every claim of the real patents with at least :data:`MIN_WORDS` words, as (text, language), once each."""
    if data is None or not (data / "patents").is_dir():
        return []
    from training.ingest import iter_records

    seen: set[str] = set()
    out: list[tuple[str, str]] = []
    for rec in iter_records([data / "patents"]):
        for lang in ("en", "de", "fr"):
            for claim in rec.claims.get(lang, []):
                text = " ".join(claim.text.split())
                if len(text.split()) >= MIN_WORDS and text not in seen:
                    seen.add(text)
                    out.append((text, lang))
    return out


def synthetic_claims(records: list[PatentRecord], n: int, rng: random.Random) -> list[tuple[str, str]]:
    """The first claims of ``n`` documents drawn at random, in turn en, de, fr (a document without claims in that
    language gives its English ones)."""
    out: list[tuple[str, str]] = []
    for i, rec in enumerate(rng.sample(records, min(n, len(records)))):
        lang = ("en", "de", "fr")[i % 3]
        if not rec.claims.get(lang):
            lang = "en" if rec.claims.get("en") else next(iter(rec.claims), "en")
        claims = rec.claims.get(lang) or []
        if claims:
            out.append((" ".join(claims[0].text.split()), lang))
    return out


def run_watch_bench(*, n_base: int = 100_000, n_add: int = 1_000, n_watches: int = 10_000, real_share: float = 0.3,
                    data: Path | None = None, cache_dir: Path, work_dir: Path | None = None, seed: int = 0,
                    verify: bool = True, chunk: int | None = None, log: Any = print,
                    database_url: str | None = None, workers: int | None = None) -> dict[str, Any]:
    """Run the benchmark (see the module doc); the result as a dict. ``workers``: the evaluation's (None: one per core,
    as ``priorart add`` evaluates)."""
    from service.engine import Engine
    from service.index.live import add_documents
    from service.settings import Settings
    from service.watch.evaluate import CHUNK, all_cores, evaluate, save_watch
    from service.watch.models import WatchRequest
    from service.watch.store import WatchStore

    load = os.getloadavg()[0]
    rng = random.Random(seed)
    all_path, base_index, batch_path = corpus(cache_dir, n_base, n_add, seed, log)
    records = list(read_corpus(all_path))
    real = real_claims(data)
    rng.shuffle(real)
    real = real[: int(n_watches * real_share)]
    synthetic = synthetic_claims(records, n_watches - len(real), rng)
    del records
    claims = real + synthetic
    work = Path(work_dir) if work_dir is not None else cache_dir / "work"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    index = work / "index"
    # the build's files are never written again (an add writes new segments and manifests): links, not copies
    shutil.copytree(base_index, index, copy_function=os.link)
    store = WatchStore.open(work / "index.state", create=True, url=database_url)  # (a new, empty database)
    if database_url is not None and store.watches(None):
        raise ValueError(f"{store.where} already holds watches: the benchmark needs an empty database")
    settings = Settings(index_dir=index, database_url=database_url)
    try:
        engine = Engine.load(index, settings=settings, verify=False)
        log(f"saving {len(claims)} watches ({len(real)} real claims, {len(synthetic)} synthetic)")
        t0 = time.perf_counter()
        requests: dict[str, WatchRequest] = {}
        for text, lang in claims:
            req = WatchRequest(query=text, lang=lang, k=rng.choice(K_CHOICES))
            requests[save_watch(engine, store, "", req).id] = req
        save_s = time.perf_counter() - t0
        engine.close()
        log(f"adding {n_add} documents")
        t0 = time.perf_counter()
        added = add_documents(index, read_corpus(batch_path), progress=False)
        add_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        engine = Engine.load(index, settings=settings, verify=False)
        load_s = time.perf_counter() - t0
        load_before = os.getloadavg()[0]
        log(f"evaluating {len(requests)} watches at generation {engine.generation} (load average {load_before:.2f})")
        rss_before = _rss_mb()
        _reset_peak()
        t0 = time.perf_counter()
        report = evaluate(engine, store, chunk=chunk or CHUNK, workers=workers or all_cores())
        eval_s = time.perf_counter() - t0
        rss_peak = _rss_mb("VmHWM")
        workers_peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # (KB on Linux; the largest)
        load_after = os.getloadavg()[0]
        per_watch = _per_watch_ms(store)
        result: dict[str, Any] = {
            "n_base": n_base, "n_add": n_add, "watches": len(requests), "real_claims": len(real),
            "synthetic_claims": len(synthetic), "k": {str(k): sum(r.k == k for r in requests.values())
                                                      for k in sorted(set(K_CHOICES))},
            "cpus": os.cpu_count(), "load_at_start": round(load, 2), "load_before": round(load_before, 2),
            "load_after": round(load_after, 2),
            "save_s": save_s, "add_s": add_s, "added": added.added, "generation": engine.generation,
            "load_s": load_s, "evaluation": report.to_dict(), "evaluation_s": eval_s,
            "per_watch_ms": per_watch, "mean_ms_per_watch": eval_s * 1000 / max(1, len(requests)),
            "rss_before_mb": rss_before, "rss_peak_mb": rss_peak, "chunk": chunk or CHUNK,
            "worker_rss_peak_mb": workers_peak if report.workers.endswith("processes") else None,
            "store_mb": (sum(p.stat().st_size for p in store.root.iterdir() if p.is_file()) / 1e6
                         if database_url is None else None),
            "database": "sqlite" if database_url is None else "postgresql",
        }
        if verify:
            log("verifying: every watch's search again after the add")
            t0 = time.perf_counter()
            result["verify"] = _verify(engine, store, requests, {r.id for r in read_corpus(batch_path)})
            result["verify"]["seconds"] = time.perf_counter() - t0
        engine.close()
        return result
    finally:
        if work_dir is None:
            shutil.rmtree(work, ignore_errors=True)


def _per_watch_ms(store: Any) -> dict[str, Any]:
    """Each watch's share of the evaluation, by how it was settled (p50, p99, mean, count)."""
    with contextlib.closing(store.connect()) as conn:
        rows = [(str(h), float(m)) for h, m in conn.execute("SELECT how, ms FROM evaluations").fetchall()]
    out: dict[str, Any] = {}
    for how in sorted({h for h, _ in rows}) + ["all"]:
        ms = sorted(m for h, m in rows if how in (h, "all"))
        if ms:
            p99 = ms[min(len(ms) - 1, int(0.99 * len(ms)))]
            out[how] = {"count": len(ms), "p50": statistics.median(ms), "p99": p99, "mean": statistics.fmean(ms)}
    return out


def _verify(engine: Any, store: Any, requests: dict[str, Any], new: set[str]) -> dict[str, Any]:
    """Each watch's search again: its new documents in the top k against its hits (ranks included)."""
    wrong: list[str] = []
    expected_hits = 0
    for wid, req in requests.items():
        top = [h.id for h in engine.search(req.search_request()).results]
        expected = [(i, d) for i, d in enumerate(top, 1) if d in new]
        got = sorted((h.rank, h.doc_id) for h in store.hits(None, wid) or [])
        expected_hits += len(expected)
        if got != expected:
            wrong.append(wid)
    return {"watches": len(requests), "expected_hits": expected_hits, "mismatches": len(wrong),
            "mismatched": wrong[:20]}


def format_report(r: dict[str, Any]) -> str:
    e, pw = r["evaluation"], r["per_watch_ms"]
    lines = [
        f"{r['watches']} watches ({r['real_claims']} real claims, {r['synthetic_claims']} synthetic; en/de/fr; k "
        f"{', '.join(f'{k}: {n}' for k, n in r['k'].items())}) on {r['n_base']} synthetic documents, then an add of "
        f"{r['added']} ({r['n_add'] / r['n_base']:.0%}); {r['cpus']} CPUs, load average (1 min) {r['load_before']} as "
        f"the evaluation started, {r['load_after']} as it ended",
        f"evaluation in {e.get('workers', '1 thread')}: {r['evaluation_s']:.1f} s in all, "
        f"{r['mean_ms_per_watch']:.2f} ms per watch (the times below are each watch's own, in its worker); "
        f"{e['by_bound']} settled by the bound, {e['searched']} searched, {e['hits']} hits, {e['errors']} failed",
    ]
    for how, s in pw.items():
        lines.append(f"  {how}: {s['count']} watches, p50 {s['p50']:.2f} ms, p99 {s['p99']:.2f} ms, mean "
                     f"{s['mean']:.2f} ms")
    lines.append(f"memory: {r['rss_before_mb']:.0f} MB resident before the evaluation (the index loaded), peak "
                 f"{r['rss_peak_mb']:.0f} MB during it"
                 + (f", each worker process at most {r['worker_rss_peak_mb']:.0f} MB"
                    if r.get("worker_rss_peak_mb") else "")
                 + f"; the state database ({r.get('database', 'sqlite')}) "
                 + (f"{r['store_mb']:.1f} MB" if r.get("store_mb") is not None else "on the server"))
    lines.append(f"not counted: saving the watches {r['save_s']:.1f} s (a search each), the add {r['add_s']:.1f} s, "
                 f"loading generation {r['generation']} {r['load_s']:.1f} s")
    if "verify" in r:
        v = r["verify"]
        lines.append(f"verified: {v['watches']} searches again after the add, {v['expected_hits']} new documents in "
                     f"their top k, {v['mismatches']} watches whose hits differ ({v['seconds']:.0f} s)")
    return "\n".join(lines)


__all__ = ["format_report", "run_watch_bench"]
