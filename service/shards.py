"""Sharded search: shards that share the global statistics, a fan-out, one merge, the fusion once.

A sharded index (``priorart build --shards N``; layout and routing in :mod:`service.index.folder`,
:class:`~service.index.folder.ShardSet`) splits the documents into index folders. Searching it:

1. the query is resolved once, against the doc store of the whole collection (the shards' doc stores as
   one row space, :meth:`ShardSet.union`): language, a publication number's text, codes, the filter mask;
2. every shard gets the query with its slice of the mask (:func:`shard_query`) and runs its own pipeline
   without the fusion (:meth:`Shard.features`): the first stage's top ``depth`` and the dense search's
   top ``depth``, with every component's raw score (:class:`ShardHits`);
3. :func:`merge` (the one merge, used in process and by the Ray Serve ingress, service/serve_ray.py)
   keeps the global top ``depth`` of each list, which the shards' tops contain, and gives the dense-only
   candidates BM25 0 as the dense stage does;
4. the fusion (service/fusion.py) runs once over the merged candidate set (its min-max normalisation needs
   the whole set), and the pipeline takes the top k.

Exactness. Each shard's pipeline is composed with the global collection statistics (:func:`global_stats`:
the sum over the shards of ``N``, the summed length and ``df`` per term, per language;
``SparseIndex.reweighted``), so every document's BM25 score (every route, PSQ expected df, the route
reference scores, the query reduction) equals the unsharded index's, and so do its dense (flat FAISS:
exact) and rerank scores, which depend on the document alone. The merged candidate set is the unsharded
one, so the fused scores and the top k are the unsharded pipeline's, up to the order of exact ties
(broken by row; rows are numbered shard after shard) and floating-point summation order (~1e-16).
Not exact: an approximate FAISS index (HNSW, IVF) is one per shard. Not available: relevance feedback
(its rows and the Rocchio centroid span the shards) and learning-to-rank stores (``ltr/``).

Faults. A shard that raises, is unreachable or answers after ``Settings.shard_timeout_s`` is left out: the
answer holds the other shards' candidates, ``Candidates.missing_shards`` names the missing shard and a
notice says so (the API answers 200 with ``partial: true``). A bad query (:class:`QueryError`) is not a
fault: it is raised as it would be unsharded.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import numpy as np

from service.candidates import CANDIDATES, Candidates
from service.index.folder import IndexFolder, ShardSet
from service.index.store import DocStore
from service.query import Query, QueryError
from service.retrieval.first_stage import FirstStage, RouteInfo, SearchInfo, collection_stats
from service.retrieval.sparse import CollectionStats
from service.stages.resolve import RESOLVED

log = logging.getLogger(__name__)

Waiter = Callable[[float], "ShardHits"]
"""Waits at most the given seconds for a shard's answer (raises on a fault)."""
Submit = Callable[[Query], Waiter]
"""Sends a shard its query and returns the waiter of its answer (in process: already answered)."""


def shard_name(number: int) -> str:
    return f"shard-{number:03d}"


@dataclass
class ShardHits:
    """One shard's candidates (its rows) with every component's raw score: what a shard sends back."""

    shard: int
    n_rows: int  # rows of the shard's generation (the ingress checks it against its own view)
    generation: int
    rows: np.ndarray
    scores: dict[str, np.ndarray]
    in_first: np.ndarray
    in_dense: np.ndarray
    matched_terms: dict[int, list[str]] = field(default_factory=dict)
    routes: dict[int, str] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)
    info: SearchInfo | None = None
    notes: list[str] = field(default_factory=list)


def global_stats(shards: ShardSet) -> dict[str, CollectionStats]:
    """The collection statistics of every indexed language summed over the shards (their live documents)."""
    out: dict[str, CollectionStats] = {}
    for lang in shards.settings.index_langs:
        out[lang] = sum((collection_stats(f, lang) for f in shards.shards), CollectionStats())
    return out


class ShardPipeline(Protocol):
    """What a shard needs of its pipeline (service/pipeline.py ``Pipeline``; composed there, with the global
    statistics: :func:`service.pipeline.load_shard`)."""

    docs: DocStore

    def features(self, query: Query) -> Candidates: ...

    def explain(self, cands: Candidates, rows: np.ndarray | None = None) -> int: ...


class Shard:
    """One shard's side of a search: its pipeline, composed with the global statistics, without the fusion."""

    def __init__(self, number: int, folder: IndexFolder, pipeline: ShardPipeline) -> None:
        self.number = number
        self.folder = folder
        self.pipeline = pipeline

    @property
    def name(self) -> str:
        return shard_name(self.number)

    def features(self, query: Query) -> ShardHits:
        """This shard's candidates for a query resolved by the ingress (:func:`shard_query`); with ``query.explain``
        every first-stage candidate's matched terms (the ingress cannot look them up later)."""
        cands = self.pipeline.features(query)
        if query.explain:
            self.pipeline.explain(cands)
        rows = cands.rows
        return ShardHits(
            shard=self.number, n_rows=self.folder.n_rows, generation=self.folder.generation, rows=rows,
            scores=cands.scores, in_first=cands.in_first, in_dense=cands.in_dense,
            matched_terms=cands.matched_terms, routes=cands.routes, skipped=cands.skipped, details=cands.details,
            info=cands.first_info, notes=list(query.notes))

    def close(self) -> None:
        self.pipeline.docs.close()


def shard_query(query: Query, start: int, n_rows: int) -> Query:
    """The query a shard runs: the resolved query with the shard's slice of the filter mask and its own notes."""
    r = query.r
    row = r.query_row
    local = row - start if row is not None and start <= row < start + n_rows else None
    mask = None if r.mask is None else np.ascontiguousarray(r.mask[start : start + n_rows])
    return replace(query, resolved=replace(r, mask=mask, query_row=local), notes=[], feedback=None)


def _merge_info(infos: Sequence[SearchInfo]) -> SearchInfo | None:
    if not infos:
        return None
    first = infos[0]
    routes = []
    for i, route in enumerate(first.routes):
        same = [info.routes[i] for info in infos if i < len(info.routes)]
        routes.append(RouteInfo(route.name, route.index_lang, route.kind, route.table,
                                _sum_counts([x.n_matched for x in same]), max(x.max_score for x in same), route.norm))
    notes = list(dict.fromkeys(n for info in infos for n in info.notes))
    return replace(first, routes=routes, notes=notes)


def _sum_counts(counts: Sequence[int | None]) -> int | None:
    return None if any(c is None for c in counts) else sum(c for c in counts if c is not None)


def merge(parts: Sequence[ShardHits], starts: Sequence[int], depth: int) -> Candidates:
    """The candidates of the whole collection from the shards' (rows: ``starts[shard] + row``).

    Keeps the global top ``depth`` of the first stage (by BM25, ties by row) and of the dense search (by the
    dense score), in that order (dense-only rows after, by row, as the dense stage adds them); dense-only
    rows get BM25 0 (not in BM25's top depth). Every kept row keeps its shard's component scores.
    """
    if not parts:
        return Candidates.empty()
    comps = list(dict.fromkeys(c for p in parts for c in p.scores))
    rows = np.concatenate([np.asarray(p.rows, dtype=np.int64) + starts[p.shard] for p in parts])
    scores = {c: np.concatenate([np.asarray(p.scores[c], dtype=np.float64) if c in p.scores
                                 else np.full(len(p.rows), np.nan) for p in parts]) for c in comps}
    in_first = np.concatenate([np.asarray(p.in_first, dtype=bool) for p in parts])
    in_dense = np.concatenate([np.asarray(p.in_dense, dtype=bool) for p in parts])

    def top(flag: np.ndarray, component: str) -> np.ndarray:
        idx = np.flatnonzero(flag)
        if component not in scores or len(idx) == 0:
            return idx[:depth]
        order = np.lexsort((rows[idx], -scores[component][idx]))
        return idx[order[:depth]]

    first = top(in_first, "bm25")
    dense = top(in_dense, "dense")
    extra = np.setdiff1d(dense, first)
    extra = extra[np.argsort(rows[extra], kind="stable")]
    keep = np.concatenate([first, extra]).astype(np.int64)
    out = Candidates(rows=rows[keep], scores={c: a[keep] for c, a in scores.items()},
                     in_first=np.isin(keep, first), in_dense=np.isin(keep, dense))
    if "bm25" in out.scores and len(extra):
        out.scores["bm25"][len(first):] = 0.0
    kept_first = set(rows[first].tolist())
    for p in parts:
        base = starts[p.shard]
        for row, terms in p.matched_terms.items():
            if row + base in kept_first:
                out.matched_terms[row + base] = terms
        for row, route in p.routes.items():
            if row + base in kept_first:
                out.routes[row + base] = route
        for comp, why in p.skipped.items():
            out.skipped.setdefault(comp, why)
            out.scores.pop(comp, None)
    out.first_info = _merge_info([p.info for p in parts if p.info is not None])
    out.details = dict(parts[0].details)
    if out.first_info is not None and "bm25" in out.details:
        out.details["bm25"] = {**out.details["bm25"], "routes": [
            {"route": r.name, "kind": r.kind, "table": r.table, "matched": r.n_matched} for r in out.first_info.routes]}
    return out


class ShardFanOut:
    """The first stage of a sharded pipeline: every shard's candidates, merged (see the module doc)."""

    name = "shards"
    requires = frozenset({RESOLVED})
    provides = frozenset({CANDIDATES, "bm25", "dense", "text", "meta", "joint"})  # what the shards' stages give

    def __init__(self, submit: Sequence[Submit], sizes: Sequence[int], first_stage: FirstStage, *,
                 timeout_s: float, generations: Sequence[int] | None = None, owned: Sequence[Shard] = ()) -> None:
        self.submit = list(submit)
        self.sizes = list(sizes)
        self.starts = [int(x) for x in np.concatenate([[0], np.cumsum(self.sizes)[:-1]])] if self.sizes else []
        self.first_stage = first_stage  # one shard's: analyzers and translation tables (the same in every shard)
        self.timeout_s = timeout_s
        self.generations = list(generations) if generations is not None else None
        self.owned = list(owned)

    def run(self, query: Query, cands: Candidates) -> Candidates:
        if query.feedback is not None and not query.feedback.empty:
            raise QueryError("relevance feedback is not available on a sharded index yet; search without it")
        missing: dict[int, str] = {}
        pending: list[tuple[int, Waiter]] = []
        for i, submit in enumerate(self.submit):
            try:
                pending.append((i, submit(shard_query(query, self.starts[i], self.sizes[i]))))
            except QueryError:
                raise
            except Exception as exc:  # a shard that cannot be reached: the others answer
                missing[i] = _reason(exc)
        deadline = time.monotonic() + self.timeout_s
        parts: list[ShardHits] = []
        for i, wait in pending:
            try:
                hits = wait(max(0.0, deadline - time.monotonic()))
            except QueryError:
                raise
            except Exception as exc:  # timed out, died mid-query, or failed: left out, said in the answer
                missing[i] = _reason(exc)
                continue
            if hits.shard != i or hits.n_rows != self.sizes[i]:
                missing[i] = (f"answered for {hits.n_rows} rows of shard {hits.shard} (generation {hits.generation}), "
                              f"this server reads {self.sizes[i]} rows of shard {i}: reload the index")
                continue
            parts.append(hits)
        for p in parts:
            for note in p.notes:
                query.note(note)
        merged = merge(parts, self.starts, query.depth)
        merged.missing_shards = [shard_name(i) for i in sorted(missing)]
        if missing:
            for i in sorted(missing):
                log.warning("%s left out of a search: %s", shard_name(i), missing[i])
            query.note(f"partial results: {', '.join(merged.missing_shards)} of {len(self.submit)} shards did not "
                       f"answer ({'; '.join(missing[i] for i in sorted(missing))}); the hits are the other shards'")
        merged.details[self.name] = {"shards": len(self.submit), "answered": len(parts),
                                     "missing": merged.missing_shards,
                                     "candidates": {shard_name(p.shard): len(p.rows) for p in parts}}
        return merged

    def describe(self) -> dict[str, Any]:
        return {"shards": len(self.submit), "rows": self.sizes, "timeout_s": self.timeout_s}

    def close(self) -> None:
        """Release the shards loaded in this process (their doc stores)."""
        for shard in self.owned:
            shard.close()


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200]}" if text else type(exc).__name__


def local_submit(shard: Shard) -> Submit:
    """In process: the shard answers at once (its waiter returns the answer)."""

    def submit(query: Query) -> Waiter:
        hits = shard.features(query)
        return lambda _timeout: hits

    return submit


__all__ = ["Shard", "ShardFanOut", "ShardHits", "global_stats", "local_submit", "merge", "shard_name",
           "shard_query"]
