"""``priorart-lab bench querylang``: the query language's cost (issue 61's goal).

On an index (by default the synthetic 100k-document index ``priorart-lab bench watch`` keeps, built with the defaults),
``queries`` Boolean queries of 3 to 5 terms are drawn from its own documents (two words of a document's claims
joined by AND, one more word or a phrase of two of its words, sometimes a field, an OR-group, a NOT or a date);
each is run as ``/search`` runs it (:meth:`service.engine.Engine.search`), and so is the free text of its ranking
words (what the Boolean query's matching documents are ordered by), alternately, ``rounds`` times. It prints both p50
and p90 and their ratio (the goal: the Boolean query's p50 at most 2x the plain one's), how many documents the
filters pass, and the word index's size beside the rest of the index's (the goal: at most 60 % more). An index built
before the word index gets its ``words/`` written first (from its doc store; the time is printed too).
"""

from __future__ import annotations

import random
import statistics
import time
from pathlib import Path
from typing import Any

from service.corpus.record import PatentRecord


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else path.stat().st_size


def index_sizes(index: Path) -> dict[str, int]:
    """Bytes of the word index (every ``words/`` folder: the build's, the segments', the shards') and of the rest."""
    words = sum(_size(p) for p in index.rglob("words") if p.is_dir())
    return {"words": words, "rest": _size(index) - words}


def _words(rec: PatentRecord, rnd: random.Random) -> list[str]:
    from service.querylang.words import tokens

    claims = [c.text for cs in rec.claims.values() for c in cs]
    ws = [w for w in tokens(" ".join(claims[:1])) if len(w) >= 5 and w.isalpha()]
    return rnd.sample(ws, min(4, len(ws))) if len(ws) >= 3 else []


def queries_of(records: list[PatentRecord], n: int, seed: int = 0) -> list[str]:
    """``n`` Boolean queries of 3-5 terms from the records' first claims."""
    rnd = random.Random(seed)
    out: list[str] = []
    while len(out) < n:
        rec = rnd.choice(records)
        ws = _words(rec, rnd)
        if len(ws) < 3:
            continue
        shape = len(out) % 5
        if shape == 0:
            q = f"{ws[0]} AND {ws[1]} AND {ws[2]}"
        elif shape == 1:
            q = f"cl=({ws[0]} AND ({ws[1]} OR {ws[2]}))" + (f" AND {ws[3]}" if len(ws) > 3 else "")
        elif shape == 2:
            q = f"{ws[0]} NEAR/10 {ws[1]} AND {ws[2]}*"
        elif shape == 3:
            q = f"{ws[0]} AND {ws[1]} NOT {ws[2]} AND pd>1990"
        else:
            q = f"ti={ws[0][:4]}* OR ({ws[1]} AND {ws[2]})"
        out.append(q)
    return out


def run_querylang_bench(index: Path, *, queries: int = 200, rounds: int = 3, seed: int = 0,
                        log: Any = None) -> dict[str, Any]:
    from service.engine import Engine
    from service.index.folder import IndexFolder
    from service.index.store import DocStore
    from service.querylang.words import WORDS_DIR, write_words
    from service.schema import SearchRequest

    say = log or (lambda _line: None)
    folder = IndexFolder.open(index, verify=False)
    wrote_s = None
    if not (Path(index) / WORDS_DIR).is_dir():
        say(f"writing {index}/{WORDS_DIR} (built before the word index)")
        t = time.perf_counter()
        for seg in folder.segments:
            docs = DocStore(seg.folder.root)
            try:
                write_words(seg.folder.root, (docs.get_row(r) for r in range(len(docs))), progress=True)
            finally:
                docs.close()
        wrote_s = time.perf_counter() - t
    engine = Engine.load(index, verify=False)
    try:
        n_docs = engine.num_docs
        step = max(1, n_docs // 2000)
        sample = [engine.docs.get_row(r) for r in range(0, len(engine.docs), step)][:2000]
        texts = queries_of(sample, queries, seed)
        pairs: list[tuple[str, str]] = []
        passing: list[int] = []
        for text in texts:
            res = engine.search(SearchRequest(query=text, k=10, syntax="query"))
            pairs.append((text, res.query.filters["query"]["ranked_by"]))
            passing.append(int(res.query.filters.get("n_allowed", 0)))
        timed: dict[str, list[float]] = {"boolean": [], "plain": []}
        for _ in range(rounds):
            for text, plain in pairs:
                for kind, q, syntax in (("boolean", text, "query"), ("plain", plain, "text")):
                    t = time.perf_counter()
                    engine.search(SearchRequest(query=q, k=10, syntax=syntax))
                    timed[kind].append((time.perf_counter() - t) * 1000.0)
    finally:
        engine.close()
    sizes = index_sizes(Path(index))

    def pct(v: list[float], q: float) -> float:
        return statistics.quantiles(v, n=100)[int(q) - 1] if len(v) > 1 else v[0]

    out: dict[str, Any] = {"index": str(index), "documents": n_docs, "queries": len(pairs), "rounds": rounds,
                           "boolean_p50_ms": statistics.median(timed["boolean"]),
                           "boolean_p90_ms": pct(timed["boolean"], 90),
                           "plain_p50_ms": statistics.median(timed["plain"]), "plain_p90_ms": pct(timed["plain"], 90),
                           "passing_median": statistics.median(passing), "passing_max": max(passing),
                           "words_bytes": sizes["words"], "rest_bytes": sizes["rest"],
                           "words_written_s": wrote_s, "examples": [p[0] for p in pairs[:5]]}
    out["p50_ratio"] = out["boolean_p50_ms"] / out["plain_p50_ms"]
    out["size_ratio"] = sizes["words"] / sizes["rest"]
    return out


def format_report(r: dict[str, Any]) -> str:
    return "\n".join([
        f"query language on {r['index']} ({r['documents']} documents): {r['queries']} Boolean queries of 3-5 terms, "
        f"{r['rounds']} rounds, each beside the free text of its ranking words",
        f"  Boolean + ranking: p50 {r['boolean_p50_ms']:.1f} ms, p90 {r['boolean_p90_ms']:.1f} ms",
        f"  plain /search:     p50 {r['plain_p50_ms']:.1f} ms, p90 {r['plain_p90_ms']:.1f} ms",
        f"  ratio of p50: {r['p50_ratio']:.2f} (goal <= 2)",
        f"  documents passing the filters: median {r['passing_median']}, most {r['passing_max']}",
        f"  word index {r['words_bytes'] / 1e6:.1f} MB beside {r['rest_bytes'] / 1e6:.1f} MB of the rest: "
        f"+{100 * r['size_ratio']:.0f} % (goal <= 60 %)"
        + (f"; written in {r['words_written_s']:.0f} s" if r.get("words_written_s") else ""),
        "  e.g. " + " | ".join(r["examples"][:3]),
    ])
