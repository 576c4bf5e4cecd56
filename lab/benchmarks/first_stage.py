"""``priorart-lab bench first-stage``: index build speed/memory, and our first stage against other BM25 engines.

For each corpus size a synthetic corpus (:mod:`training.synth`) is indexed by ``priorart build`` (in a
child process, so its peak RSS is the build's own). The English text of every document is analysed
once by our analyser; the token ids are what every peer (:mod:`lab.benchmarks.peers`: rank-bm25,
bm25s, bm25s with numba, PISA) indexes, so all engines search the same tokens. Queries are the English
first claims (or abstracts, or claims) of sampled documents, all terms kept.

Timing. Every engine runs every query once untimed (page cache, compilation); then the heap is
frozen as ``priorart serve`` freezes it once its index is loaded (:func:`service.heap.settle`: the
collector's full passes no longer walk the indexes), and every engine is timed in two regimes:

- *interleaved* (cold caches): query by query, each query through every engine in an order rotated per query, so a
  busy moment of the shared machine falls on all of them alike; each engine's query runs right after the other
  engines' (bm25s' numpy backend alone moves tens of MB per query), so its code and data are out of the CPU caches;
- *warm* (a server that runs one engine): each engine runs the queries one after another, ``rounds`` times, the
  engines' order rotated per round (a busy moment falls on a whole block, the rotation spreads that).

A time is wall-clock from the query text to the top ``k`` document rows: ours is
``FirstStage.search`` (analysis, scoring, top-k, explanations) in the English index alone
(``translate=False``: one route, raw BM25); the peers' include the same analysis and the look-up of
the token ids. p50/p99 are of those per-query times. rank-bm25 (seconds per query at 100k) is timed
on ``bm25_queries`` queries only: it is the exactness oracle (identical top-10: ids up to ties,
scores within 1e-6). The others use other BM25 variants (see :mod:`lab.benchmarks.peers`):
their top-10 overlap with ours is printed.

``cache_dir`` keeps the corpus, the index, the analysed tokens and the query texts of each size and
reuses them on the next run with the same seed, languages, k1 and b (build figures are those of
the run that built them); the peers index in every run (their build times are printed).
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from lab.benchmarks.peers import PEER_NAMES, Peer, make_peers, top10_overlap

QUERY_TEXTS = ("first-claim", "abstract", "claims")

_BUILD_SCRIPT = """
import json, sys
from training.build import build_index
r = build_index(sys.argv[1], sys.argv[2], index_langs=sys.argv[3], k1=float(sys.argv[4]), b=float(sys.argv[5]),
                overwrite=True, progress=False, dense=False)  # (the first stage is timed: no document encoding)
print(json.dumps(r.to_dict()))
"""


def _records(n: int, seed: int) -> Iterator[Any]:
    from training.synth import generate

    return generate(n, seed)


def _query_text(rec: Any, kind: str) -> str:
    if kind == "first-claim":
        return str(rec.claims["en"][0].text) if rec.claims.get("en") else ""
    if kind == "abstract":
        return str(rec.abstract.get("en", ""))
    return str(rec.claims_text("en"))


def _top10_identical(ours: list[tuple[int, float]], ref_scores: Any, tol: float = 1e-6) -> bool:
    """Same top-10 up to ties: equal score profiles, and every returned row has the reference score."""
    k = min(10, len(ours))
    ref_top = np.sort(ref_scores)[::-1][:10]
    ref_top = ref_top[ref_top > 0] if len(ours) < 10 else ref_top
    if len(ref_top) != k:
        return False
    mine = np.array([s for _, s in ours[:k]])
    if not np.allclose(mine, ref_top[:k], rtol=0, atol=tol):
        return False
    return all(abs(ref_scores[r] - s) <= tol for r, s in ours[:k])


def _filled(rows: np.ndarray) -> list[int]:
    """The rows of a padded top-10 line (-1: none)."""
    return [int(r) for r in rows.tolist() if r >= 0]


def _pct(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q)) if len(values) else float("nan")


class _Tokens:
    """English token ids of every document with English text (flat ids + offsets), the rows they
    belong to, and the vocabulary; saved as plain files for ``cache_dir``."""

    def __init__(self, ids: np.ndarray, offsets: np.ndarray, rows: np.ndarray, vocab: list[str]) -> None:
        self.ids, self.offsets, self.rows, self.vocab = ids, offsets, rows, vocab
        self.term_id = {t: i for i, t in enumerate(vocab)}

    def docs(self) -> list[np.ndarray]:
        return [self.ids[a:b] for a, b in zip(self.offsets[:-1].tolist(), self.offsets[1:].tolist(), strict=True)]

    def save(self, d: Path) -> None:
        for name in ("ids", "offsets", "rows"):
            np.save(d / f"tokens-en.{name}.npy", getattr(self, name))
        (d / "tokens-en.vocab.json").write_text(json.dumps(self.vocab, ensure_ascii=False), encoding="utf-8")

    @classmethod
    def load(cls, d: Path) -> _Tokens | None:
        try:
            ids, offsets, rows = (np.load(d / f"tokens-en.{name}.npy") for name in ("ids", "offsets", "rows"))
            vocab = json.loads((d / "tokens-en.vocab.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return cls(ids, offsets, rows, vocab)


def _prepare(n: int, d: Path, *, seed: int, index_langs: str, k1: float, b: float, query_text: str,
             echo: Callable[[str], None]) -> dict[str, Any]:
    """Corpus, index, tokens and query texts of one size in ``d`` (reused when already there)."""
    from service.corpus.jsonl import read_corpus, write_corpus
    from service.index.folder import IndexFolder
    from service.text.analysis import get_analyzer

    d.mkdir(parents=True, exist_ok=True)
    corpus, index_dir, build_json = d / "corpus.jsonl", d / "index", d / "build.json"
    gen_s = 0.0
    if not corpus.exists():
        t = time.perf_counter()
        write_corpus(_records(n, seed), d / "corpus.tmp.jsonl")
        (d / "corpus.tmp.jsonl").rename(corpus)
        gen_s = time.perf_counter() - t
    if not build_json.exists():
        echo(f"[{n}] building the index ...")
        proc = subprocess.run(
            [sys.executable, "-c", _BUILD_SCRIPT, str(corpus), str(index_dir), index_langs, str(k1), str(b)],
            capture_output=True, text=True, check=False,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"index build failed for n={n}:\n{proc.stderr[-2000:]}")
        build_json.write_text(proc.stdout.strip().splitlines()[-1] + "\n", encoding="utf-8")
    build = json.loads(build_json.read_text(encoding="utf-8"))
    fields = tuple(IndexFolder.open(index_dir, verify=False).settings.fields)
    analyzer = get_analyzer("en")
    tokens = _Tokens.load(d)
    texts_json = d / f"queries-{query_text}.json"
    t = time.perf_counter()
    if tokens is None or not texts_json.exists():
        echo(f"[{n}] analysing the English text of the corpus ...")
        vocab: dict[str, int] = {}
        parts: list[np.ndarray] = []
        rows: list[int] = []
        queries: list[str] = []
        german: list[str] = []
        for row, rec in enumerate(read_corpus(corpus)):
            if "en" in rec.languages:
                terms = analyzer(rec.text("en", fields))
                if terms:
                    rows.append(row)
                    parts.append(np.fromiter((vocab.setdefault(x, len(vocab)) for x in terms), np.int32, len(terms)))
            text = _query_text(rec, query_text)
            if text:
                queries.append(text)
            if rec.claims.get("de"):
                german.append(str(rec.claims["de"][0].text))
        offsets = np.zeros(len(parts) + 1, dtype=np.int64)
        np.cumsum([len(p) for p in parts], out=offsets[1:])
        tokens = _Tokens(np.concatenate(parts) if parts else np.zeros(0, np.int32), offsets,
                         np.asarray(rows, dtype=np.int64), list(vocab))
        del parts
        tokens.save(d)
        texts_json.write_text(json.dumps({"queries": queries, "german": german}, ensure_ascii=False),
                              encoding="utf-8")
    texts = json.loads(texts_json.read_text(encoding="utf-8"))
    queries, german = texts["queries"], texts["german"]
    return {"corpus": corpus, "index": index_dir, "build": build, "tokens": tokens, "queries": queries,
            "german": german, "generate_s": gen_s, "analyse_s": time.perf_counter() - t}


def run_first_stage_bench(
    sizes: list[int],
    n_queries: int,
    *,
    bm25_queries: int | None = None,
    seed: int = 13,
    index_langs: str = "en,de,fr",
    k1: float = 1.2,
    b: float = 0.75,
    k: int = 10,
    work_dir: Path | None = None,
    cache_dir: Path | None = None,
    peers: Sequence[str] = PEER_NAMES,
    progress: bool = True,
    query_text: str = "first-claim",
    rounds: int = 3,
) -> list[dict[str, Any]]:
    """Run the benchmark; returns one dict of measured figures per size."""
    import typer

    if query_text not in QUERY_TEXTS:
        raise ValueError(f"unknown query text {query_text!r}; valid: {', '.join(QUERY_TEXTS)}")
    if k < 10:
        raise ValueError(f"k must be >= 10 (top-10 overlap), got {k}")

    def echo(msg: str) -> None:
        if progress:
            typer.echo(msg, err=True)

    results = []
    tmp_root = Path(tempfile.mkdtemp(prefix="priorart-bench-", dir=work_dir))
    try:
        for n in sizes:
            key = f"n{n}-seed{seed}-{index_langs.replace(',', '+')}-k1{k1:g}-b{b:g}"
            d = (cache_dir / key) if cache_dir is not None else tmp_root / key
            prep = _prepare(n, d, seed=seed, index_langs=index_langs, k1=k1, b=b, query_text=query_text, echo=echo)
            rng = random.Random(seed)
            queries = rng.sample(prep["queries"], min(n_queries, len(prep["queries"])))
            german = rng.sample(prep["german"], min(n_queries, len(prep["german"])))
            if not queries:
                raise RuntimeError("the synthetic corpus has no English claims to use as queries")
            engines, skipped = make_peers(peers, k1, b)
            docs = prep["tokens"].docs()
            for peer in engines:
                echo(f"[{n}] {peer.name}: indexing {len(docs)} documents ...")
                work = tmp_root / f"{key}-{peer.name}"
                work.mkdir(parents=True, exist_ok=True)
                peer.build(docs, prep["tokens"].vocab, work)
            del docs
            n_ref = len(queries) if bm25_queries is None else max(1, min(bm25_queries, len(queries)))
            echo(f"[{n}] warm-up and timing of {len(queries)} queries on ours + "
                 f"{', '.join(p.name for p in engines) or 'no peer'} ...")
            figures = _measure(prep, queries, german, engines, k=k, n_ref=n_ref, rounds=rounds)
            build = prep["build"]
            results.append(
                {
                    "n_docs": n,
                    "k": k,
                    "build_docs_per_s": build["docs_per_s"],
                    "build_s": build["seconds"],
                    "build_cpu_s": build["cpu_s"],
                    "build_docs_per_cpu_s": n / build["cpu_s"],
                    "build_peak_rss_mb": build["peak_rss_mb"],
                    "index_mb": build["index_bytes"] / 2**20,
                    "n_queries": len(queries),
                    "query_text": query_text,
                    **figures,
                    "skipped": skipped,
                    "generate_s": prep["generate_s"],
                    "analyse_s": prep["analyse_s"],
                }
            )
            del engines
            echo(f"[{n}] done")
    finally:
        shutil.rmtree(tmp_root, ignore_errors=True)
    return results


def _measure(prep: dict[str, Any], queries: list[str], german: list[str], engines: list[Peer], *, k: int,
             n_ref: int, rounds: int = 3) -> dict[str, Any]:
    """Warm-up, the interleaved timed pass, top-10 overlaps, the oracle check, our other query paths."""
    from service import heap
    from service.retrieval.first_stage import FirstStage
    from service.text.analysis import get_analyzer

    analyzer = get_analyzer("en")
    tokens: _Tokens = prep["tokens"]
    stage = FirstStage.load(prep["index"], verify=True)

    def ours(q: str) -> Any:
        # the top-k rows and scores, as the peers give them (explain=False: no matched terms per hit)
        return stage.search(q, lang="en", k=k, max_query_terms=0, translate=False, explain=False)

    def ids_of(q: str) -> list[int]:
        return [i for i in (tokens.term_id.get(t) for t in analyzer(q)) if i is not None]

    def peer_rows(peer: Peer, q: str) -> np.ndarray:
        return tokens.rows[peer.search(ids_of(q), k)]

    timed_on = {p.name: (n_ref if p.name == "rank-bm25" else len(queries)) for p in engines}
    for q in queries:  # warm-up: every page of the postings touched, numba compiled
        ours(q)
        for peer in engines:
            if timed_on[peer.name] == len(queries):
                peer_rows(peer, q)
    # what `priorart serve` does once its index is loaded, here once every engine is loaded and warm (numba's
    # compilation in the warm-up leaves ~90,000 objects that the collector's full passes would walk)
    heap.settle()
    # the top 10 of every engine and query in preallocated arrays (-1: no row): results kept in Python objects
    # across the timed pass would be walked by the collector's full passes, in whichever engine's time
    times: dict[str, list[float]] = {"ours": [], **{p.name: [] for p in engines}}
    top_rows = {name: np.full((len(queries), 10), -1, dtype=np.int64) for name in times}
    ours_scores = np.zeros((len(queries), 10))
    runners: list[tuple[str, Peer | None]] = [("ours", None)] + [(p.name, p) for p in engines]
    for i, q in enumerate(queries):
        shift = i % len(runners)
        for name, runner in runners[shift:] + runners[:shift]:
            if runner is None:
                t = time.perf_counter()
                res = ours(q)
                times[name].append(time.perf_counter() - t)
                best = res.hits[:10]
                top_rows[name][i, : len(best)] = [h.row for h in best]
                ours_scores[i, : len(best)] = [h.score for h in best]
                del res, best
            elif i < timed_on[name]:
                t = time.perf_counter()
                got = peer_rows(runner, q)
                times[name].append(time.perf_counter() - t)
                top_rows[name][i, : min(10, len(got))] = got[:10]

    # warm: each engine's queries one after another (its caches its own), rounds in a rotated order of the engines
    warm: dict[str, list[float]] = {name: [] for name in times}
    for rnd in range(rounds):
        shift = rnd % len(runners)
        for name, runner in runners[shift:] + runners[:shift]:
            for i, q in enumerate(queries):
                if runner is None:
                    t = time.perf_counter()
                    res = ours(q)
                    warm[name].append(time.perf_counter() - t)
                    del res
                elif i < timed_on[name]:
                    t = time.perf_counter()
                    peer_rows(runner, q)
                    warm[name].append(time.perf_counter() - t)

    out: dict[str, dict[str, Any]] = {}
    for name, ts in times.items():
        ms = [x * 1000 for x in ts]
        warm_ms = [x * 1000 for x in warm[name]]
        entry: dict[str, Any] = {"p50_ms": _pct(ms, 50), "p99_ms": _pct(ms, 99), "mean_ms": float(np.mean(ms)),
                                 "timed_queries": len(ms), "warm_p50_ms": _pct(warm_ms, 50),
                                 "warm_p99_ms": _pct(warm_ms, 99), "warm_mean_ms": float(np.mean(warm_ms)),
                                 "warm_rounds": rounds}
        peer_obj = next((p for p in engines if p.name == name), None)
        if peer_obj is not None:
            theirs = top_rows[name]
            entry["top10_overlap"] = float(np.mean([
                top10_overlap(_filled(top_rows["ours"][j]), _filled(theirs[j])) for j in range(len(ts))
            ]))
            entry["build_s"] = peer_obj.build_s
            entry["variant"] = peer_obj.variant
        out[name] = entry

    # exactness against the oracle (rank-bm25 computes our formula)
    oracle = next((p for p in engines if p.name == "rank-bm25"), None)
    identical = None
    if oracle is not None:
        identical = 0
        for i in range(n_ref):
            full = np.zeros(len(stage.docs))
            full[tokens.rows] = oracle.scores(ids_of(queries[i]))
            rows = _filled(top_rows["ours"][i])
            identical += _top10_identical(list(zip(rows, ours_scores[i, : len(rows)].tolist(), strict=True)), full)

    # the product path (query reduction, every route) and the reduced English query, ours only
    t = time.perf_counter()
    for q in queries:
        stage.search(q, lang="en", k=10, translate=False)
    reduced_ms = (time.perf_counter() - t) / len(queries) * 1000
    return {
        "mean_query_terms": float(np.mean([len(set(analyzer(q))) for q in queries])),
        "engines": out,
        "first_stage_ms": out["ours"]["mean_ms"],
        "first_stage_reduced_ms": reduced_ms,
        **_time_routes(stage, queries, german),
        "top10_identical": identical,
        "top10_checked": n_ref if oracle is not None else 0,
    }


def _time_routes(stage: Any, english: list[str], german: list[str]) -> dict[str, Any]:
    """ms/query of English and German queries through every route the index has (the default search)."""
    out: dict[str, Any] = {"translation_tables": sorted(f"{s}-{t}" for s, t in stage.pair_tables)}
    for name, lang, texts in (("en", "en", english), ("de", "de", german)):
        if not texts:
            continue
        stage.search(texts[0], lang=lang, k=10)
        t = time.perf_counter()
        for q in texts:
            res = stage.search(q, lang=lang, k=10)
        out[f"routes_{name}_ms"] = (time.perf_counter() - t) / len(texts) * 1000
        out[f"routes_{name}"] = [r.name for r in res.info.routes]
    return out


def format_table(rows: list[dict[str, Any]]) -> str:
    """The benchmark figures as plain-text tables."""
    head = f"{'docs':>8} {'build doc/s':>11} {'doc/cpu-s':>9} {'peak MiB':>9} {'index MiB':>9}"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['n_docs']:>8} {r['build_docs_per_s']:>11.0f} {r['build_docs_per_cpu_s']:>9.0f} "
                     f"{r['build_peak_rss_mb']:>9.0f} {r['index_mb']:>9.1f}")
    for r in rows:
        lines.append("")
        lines.append(f"{r['n_docs']} documents, {r['n_queries']} queries ({r['query_text']}, mean "
                     f"{r['mean_query_terms']:.1f} distinct terms), top {r['k']}, same English tokens:")
        head = (f"{'engine':<12} {'p50 ms':>8} {'p99 ms':>8} {'mean ms':>8} {'warm p50':>9} {'warm p99':>9} "
                f"{'timed':>6} {'top10 overlap':>13} {'build s':>8}  BM25 variant")
        lines += [head, "-" * len(head)]
        for name, e in r["engines"].items():
            overlap = f"{e['top10_overlap']:>13.3f}" if "top10_overlap" in e else f"{'(ours)':>13}"
            build = f"{e['build_s']:>8.1f}" if "build_s" in e else f"{'':>8}"
            lines.append(f"{name:<12} {e['p50_ms']:>8.2f} {e['p99_ms']:>8.2f} {e['mean_ms']:>8.2f} "
                         f"{e['warm_p50_ms']:>9.2f} {e['warm_p99_ms']:>9.2f} {e['timed_queries']:>6} {overlap} "
                         f"{build}  {e.get('variant', 'priorart FirstStage')}")
        for name, reason in r["skipped"].items():
            lines.append(f"{name:<12} skipped: {reason}")
        ours = r["engines"]["ours"]
        for name, e in r["engines"].items():
            if name != "ours" and e["timed_queries"] == ours["timed_queries"]:
                lines.append(f"  {name} time / ours: interleaved p50 {e['p50_ms'] / ours['p50_ms']:.2f}, "
                             f"p99 {e['p99_ms'] / ours['p99_ms']:.2f}; warm p50 "
                             f"{e['warm_p50_ms'] / ours['warm_p50_ms']:.2f}, p99 "
                             f"{e['warm_p99_ms'] / ours['warm_p99_ms']:.2f} (above 1: ours is faster)")
        if r["top10_identical"] is not None:
            lines.append(f"  identical top-10 with rank-bm25 (our formula): "
                         f"{r['top10_identical']}/{r['top10_checked']}")
        for name in ("en", "de"):
            if f"routes_{name}_ms" in r:
                lines.append(f"  {name} queries through routes {'+'.join(r[f'routes_{name}'])}: "
                             f"{r[f'routes_{name}_ms']:.2f} ms/query (default search: query reduction, every route)")
    lines.append(
        "Times: wall clock per query from the query text to the top-k rows (analysis included for every engine), "
        "after an untimed pass; p50/p99/mean: engines interleaved query by query (each query in caches the other "
        "engines just used); warm: each engine's queries in a block, the rounds rotating the engines' order; "
        "ours = FirstStage.search in the English index "
        "alone (translate=False), all query terms kept, rows and scores without the matched terms per hit "
        "(explain=False; the peers give none). rank-bm25 is timed on the 'timed' queries only."
    )
    return "\n".join(lines)
