"""Result dumps of the real-data topics, to show that a refactoring changes no result (``priorart-lab bench dump``).

The topics are every query the real-data experiments use: the known-item topics (title + abstract of the US
utility grants), the first claims of the trilingual EP grants in English, German and French, every claim of
those grants in every language, and the titles of every publication in each language it has other text in.
For each, ``/search`` (the top ``k``: ids and scores) on the default path (``search``) and in the fused order
(``fused``: ``evidence_docs: 0``, no evidence step), and, for every ``passage_every``-th topic, ``/passages``
(the top ``passages_k``: passage ids and scores) through :class:`service.engine.Engine`, the API's own path.
Two dumps are compared topic by topic: the same ids in the same order, scores within ``tol``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from service.corpus.record import PatentRecord
from service.text.analysis import SUPPORTED_LANGS

DUMP_FORMAT = "priorart-result-dump"


@dataclass(frozen=True)
class DumpTopic:
    qid: str
    lang: str
    text: str


def real_topics(records: Sequence[PatentRecord]) -> list[DumpTopic]:
    """The queries of the real-data experiments (module docstring), in a fixed order."""
    from lab.experiments.route_merge import own_language_topics
    from lab.experiments.xling import trilingual_grants
    from training.tasks import known_item_task, strip_reference_signs

    out = [DumpTopic(f"known-item/{t.qid}", t.lang or "en", t.text) for t in known_item_task(records).topics]
    for g in trilingual_grants(records):
        for lang in SUPPORTED_LANGS:
            for claim in sorted(g.claims[lang], key=lambda c: c.num):
                text = strip_reference_signs(claim.text)
                if text.strip():
                    out.append(DumpTopic(f"claim/{g.id}/{claim.num}/{lang}", lang, text))
    out += [DumpTopic(f"title/{qid}", lang, text) for qid, _, lang, text in own_language_topics(records)]
    return out


def dump(index_dir: str | Path, records: Sequence[PatentRecord], *, k: int = 100, passage_every: int = 5,
         passages_k: int = 20) -> dict[str, Any]:
    """Run every topic against the index (module docstring); returns the dump (JSON-ready)."""
    from service.engine import Engine
    from service.query import QueryError
    from service.schema import PassageRequest, SearchRequest
    from service.settings import Settings

    engine = Engine.load(index_dir, settings=Settings(index_dir=Path(index_dir)))
    results: dict[str, Any] = {}
    try:
        for i, t in enumerate(real_topics(records)):
            entry: dict[str, Any] = {}
            try:
                found = engine.search(SearchRequest(query=t.text, lang=t.lang, k=k))
                entry["search"] = [[h.id, h.score] for h in found.results]
                fused = engine.search(SearchRequest(query=t.text, lang=t.lang, k=k, evidence_docs=0))
                entry["fused"] = [[h.id, h.score] for h in fused.results]
                if i % passage_every == 0:
                    res = engine.passages(PassageRequest(query=t.text, lang=t.lang, k=passages_k))
                    entry["passages"] = [[h.passage_id, h.score] for h in res.results]
            except QueryError as exc:
                entry["error"] = str(exc)
            results[t.qid] = entry
    finally:
        engine.close()
    return {"format": DUMP_FORMAT, "version": 2, "index": str(index_dir), "k": k, "topics": len(results),
            "results": results}


def compare(a: dict[str, Any], b: dict[str, Any], *, tol: float = 1e-9) -> list[str]:
    """Differences between two dumps, one line each (empty: the same results)."""
    out: list[str] = []
    ra, rb = a["results"], b["results"]
    for qid in sorted(set(ra) | set(rb)):
        if qid not in ra or qid not in rb:
            out.append(f"{qid}: only in {'the first' if qid in ra else 'the second'} dump")
            continue
        for part in ("search", "fused", "passages", "error"):
            x, y = ra[qid].get(part), rb[qid].get(part)
            if part == "error" or x is None or y is None:
                if x != y:
                    out.append(f"{qid} {part}: {x!r} != {y!r}")
                continue
            ids_x, ids_y = [i for i, _ in x], [i for i, _ in y]
            if ids_x != ids_y:
                at = next((n for n, (p, q) in enumerate(zip(ids_x, ids_y, strict=False)) if p != q),
                          min(len(ids_x), len(ids_y)))
                out.append(f"{qid} {part}: rankings differ from rank {at + 1} ({len(ids_x)} vs {len(ids_y)} results)")
                continue
            worst = max((abs(p - q) for (_, p), (_, q) in zip(x, y, strict=True)), default=0.0)
            if worst > tol:
                out.append(f"{qid} {part}: scores differ by up to {worst:.3g}")
    return out


def write(data: dict[str, Any], path: str | Path) -> None:
    Path(path).write_text(json.dumps(data, sort_keys=True) + "\n", encoding="utf-8")


def read(path: str | Path) -> dict[str, Any]:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, dict) or data.get("format") != DUMP_FORMAT:
        raise ValueError(f"{path} is not a {DUMP_FORMAT} file")
    return data
