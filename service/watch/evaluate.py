"""The evaluation of every watch against the documents a new generation brought (issue 34).

A new document is a hit of a watch when it ranks in the watch's top k of the whole index at the new generation
(global statistics): exactly what running the watch's search (:meth:`Engine.search`, documents not collapsed into
families) shows in its top k that it did not show before, because it was not in the index.

Scoring every document again for each watch would be a search per watch. Most watches get no hit from a weekly
add, and that can be proven by scoring far fewer rows: a watch's top k at the previous evaluation are ``k``
documents that rank high; scored again with the new generation's statistics, together with the new documents,
they bound the ranking. If the ``k`` best rows among the new documents and those are all old documents, ``k``
old documents outrank every new one in the whole index too (the same scores, the same order: ties by lower row),
so no new document reaches the top k. Only when a new document is among them does the watch run its search, and
the hits are what that search shows: the proof only ever says "no hit", every hit comes from the search itself.
``/search`` orders its first documents by their evidence (the evidence stage, service/stages/evidence.py: the first
``evidence_docs`` by their best passage, or the learned ranker's first ``docs`` by its score), so a document of the
fused order's first ``max(k, that many)`` can reach the top k: the proof and the stored documents cover that many
(:meth:`EvidenceStep.reach`; the ranker only reorders those documents), and a
watch's hits are those of its top k only.

The scores of a set of rows are the first stage's own (:class:`service.retrieval.first_stage.FirstStage` run over
sparse indexes whose postings are cut to those rows, :func:`restrict`: the same per-posting weights, the
generation's document frequencies, lengths and idf, the same query analysis, routes, translation and merge), so
a row's score is bit for bit its score in a search. The rows are those of a chunk of watches (:data:`CHUNK`):
the new documents and each watch's stored top k, so that one cut serves many watches. The rows' first stage is a
search's ranking when the pipeline ranks by the first stage alone (an index without models: stages ``bm25`` and
``fusion``; BM25-only fusion is a min-max of those scores, which keeps their order).

Any other pipeline (the default build's dense stage, models, a sharded index) takes the **fused-order bound**: the
watch's pipeline without the evidence stage (:meth:`Pipeline.run` with ``evidence_docs`` 0), its query's vector
remembered (:attr:`Query.remember_vector`: encoded once, when the watch was saved). The evidence orders only the fused
order's first ``reach`` documents, so when none of those is new, no new document is in the search's top k: no hit,
without the evidence step and without encoding the query again. Else the watch runs its search. (A new document's
cosine is not bounded by its first-stage score, and fusion's min-max depends on every candidate: this bound runs the
pipeline, the first-stage bound a cut of it.)

Evaluation is idempotent per (watch, generation) (service/watch/store.py): batches of :data:`BATCH` watches are
committed together, and a watch evaluated at a generation is never evaluated at it again.

Each watch's evaluation is independent of the others', so a writer evaluates several at once (``workers``: one per
core for ``priorart add`` and ``priorart watch run``): in processes that each load the index at the generation being
evaluated (:func:`in_processes`, from :data:`PROCESS_MIN` watches per worker), or in threads of this process (fewer
watches; a sharded index). A server evaluates in one thread beside its requests. The outcomes and their order are
the same whatever the workers; this process alone writes them.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import asdict, dataclass
from itertools import groupby, islice
from typing import TYPE_CHECKING, Any

import numpy as np

from service.index.folder import Layout, generation_numbers, is_sharded
from service.query import Query, QueryError, resolve
from service.watch.models import Watch, WatchHit, WatchRequest
from service.watch.store import Outcome, Pending, Snapshot, WatchStore, now

if TYPE_CHECKING:
    from service.candidates import Candidates, StageTrace
    from service.engine import Engine
    from service.retrieval.first_stage import FirstStage

log = logging.getLogger(__name__)

BATCH = 250
"""Watches whose evaluations are committed in one transaction."""
CHUNK = 250
"""Watches that share one cut of the sparse indexes (the new documents and their stored top k)."""


PROCESS_MIN = 1000
"""Watches per worker from which a writer evaluates them in processes rather than threads: a process starts in a few
seconds (the interpreter, the imports, the index at the generation mapped again), which 1,000 watches' evaluations
outweigh; threads share the GIL, and each watch holds it for most of its Python (docs/RESULTS.md, "Prior-art
watch")."""


def all_cores() -> int:
    """The cores this process may use: the workers of a writer's evaluation (``priorart add``, ``priorart watch
    run``, the benchmark). Those it may run on, at most its control group's CPU quota (a container's CPU limit, as the
    weekly add's Kubernetes Job sets: a node's 16 cores are not its own)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    quota = cgroup_cpus()
    return max(1, min(cores, quota)) if quota is not None else max(1, cores)


def cgroup_cpus(root: str = "/sys/fs/cgroup") -> int | None:
    """The CPU quota of this process's control group, rounded up (cgroup v2 ``cpu.max``, else v1's
    ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``); None without one."""
    import math
    from pathlib import Path

    with contextlib.suppress(OSError, ValueError, IndexError):
        quota, period = Path(root, "cpu.max").read_text().split()[:2]
        return None if quota == "max" else max(1, math.ceil(int(quota) / int(period)))
    with contextlib.suppress(OSError, ValueError):
        q = int(Path(root, "cpu", "cpu.cfs_quota_us").read_text())
        period_us = int(Path(root, "cpu", "cpu.cfs_period_us").read_text())
        return None if q <= 0 else max(1, math.ceil(q / period_us))
    return None


@dataclass
class EvaluationReport:
    """What an evaluation did: watches evaluated, how (proven by the bound, searched, no new document, failed)."""

    generation: int
    watches: int = 0
    new_documents: int = 0  # documents brought since the oldest evaluation of a watch evaluated now
    hits: int = 0
    by_bound: int = 0
    searched: int = 0
    nothing_new: int = 0
    errors: int = 0
    seconds: float = 0.0
    stale: bool = False  # the store already describes a newer generation: nothing to do here
    busy: bool = False  # another process was evaluating (only when not waiting for it)
    # which bound settled watches without a search: "first stage" (a cut of the sparse indexes, a pipeline that ranks
    # by the first stage alone) or "fused order" (each watch's pipeline without the evidence step)
    bound: str = "first stage"
    workers: str = "1 thread"  # how many watches were evaluated at once, and in what ("2 processes", "2 threads")
    webhooks: dict[str, Any] | None = None  # the deliveries made after it (service/watch/webhooks.py; CLI)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def line(self) -> str:
        if self.stale:
            return f"watches: generation {self.generation} is older than the one already evaluated: nothing to do"
        if self.busy:
            return "watches: another process is evaluating them"
        if not self.watches:
            return f"watches: none pending at generation {self.generation}"
        how = f"{self.by_bound} proven without a search, {self.searched} searched"
        if self.nothing_new:
            how += f", {self.nothing_new} with no new document"
        if self.errors:
            how += f", {self.errors} failed"
        if self.by_bound:
            how += f" (the {self.bound} bound)"
        pushed = ""
        if self.webhooks and (self.webhooks["delivered"] or self.webhooks["failed"]):
            pushed = (f"; webhooks: {self.webhooks['delivered']} deliveries made, {self.webhooks['failed']} failed "
                      "(retried later)")
        return (f"watches: {self.watches} evaluated at generation {self.generation} against {self.new_documents} new "
                f"documents: {self.hits} hits ({how}) in {self.seconds:.1f} s{pushed}")


def snapshot(engine: Engine) -> Snapshot:
    """The store's view of an engine's generation (:class:`Snapshot`): per row, the generation that wrote its segment,
    and per publication the newest add among the generations the index folder still keeps (an add's segment is
    kept for a while after a compaction merged it), so that a publication replaced just before a compaction is
    still known as new."""
    folder = engine.folder
    prov = np.full(len(engine.docs.ids), -1, dtype=np.int64)
    sharded = any(s.dir.startswith(Layout.SHARDS) for s in folder.segments)  # (per-shard numbers: not comparable)
    if sharded:
        return Snapshot(engine.generation, folder.meta.created, engine.docs.ids, engine.docs.live, prov)
    for s in folder.segments:
        seg = s.folder.components.get("segment") if s.dir != Layout.ROOT_SEGMENT else None
        if isinstance(seg, dict) and not seg.get("compacted") and isinstance(seg.get("generation"), int):
            prov[s.start : s.start + s.n_rows] = int(seg["generation"])
    added: dict[str, int] = {}
    for n in generation_numbers(folder.root):
        if n > engine.generation:
            continue
        seg_dir = folder.root / Layout.segment(n)
        try:  # (a segment is written whole before its manifest names it; the cleanup may remove it meanwhile)
            meta = json.loads((seg_dir / Layout.META).read_text(encoding="utf-8"))
            if meta.get("components", {}).get("segment", {}).get("compacted"):
                continue
            ids = json.loads((seg_dir / Layout.IDS).read_text(encoding="utf-8"))
        except (OSError, ValueError, AttributeError):
            continue
        added.update(dict.fromkeys(ids, n))
    return Snapshot(engine.generation, folder.meta.created, engine.docs.ids, engine.docs.live, prov, added)


def ranking_first_stage(engine: Engine) -> FirstStage | None:
    """The first stage when it alone gives this engine's fused order (stages ``bm25`` and ``fusion``, a route merge on
    a fixed scale; the evidence stage after them reorders only the first ``reach`` of it), else None."""
    from service.stages.first import FirstStageStep

    step = engine.pipeline.generator
    scoring = [s.name for s in engine.pipeline.scoring]
    if scoring != ["resolve", "bm25", "fusion"] or not isinstance(step, FirstStageStep):
        return None
    fs = step.fs
    return fs if fs.combine != "max" else None  # ("max" scales each route by its best row: not a row's own score)


def restricted_first_stage(fs: FirstStage, allowed: np.ndarray) -> FirstStage:
    """A first stage like ``fs`` (analysis, tables, routes, merge) over the rows ``allowed`` marks."""
    from service.retrieval.first_stage import FirstStage

    indexes = {lang: index.restricted(allowed) for lang, index in fs.indexes.items()}
    return FirstStage(fs.meta, fs.docs, indexes, fs.pair_tables, max_query_terms=fs.max_query_terms,
                      analyzers=fs.analyzers, combine=fs.combine, compound_parts=fs.compound_parts,
                      knee=fs.knee)


def in_order(pending: Sequence[Pending]) -> list[Pending]:
    """The order watches are evaluated and their outcomes given in: by the generation each was last evaluated at (the
    documents new to it), then by id."""
    return sorted(pending, key=lambda w: (w.evaluated_generation, w.id))


class Evaluator:
    """Evaluates pending watches against one engine (one generation)."""

    def __init__(self, engine: Engine, *, chunk: int = CHUNK, threads: int = 1) -> None:
        self.engine = engine
        self.docs = engine.docs
        self.generation = engine.generation
        self.first = ranking_first_stage(engine)
        self.chunk = max(1, chunk)
        self.threads = max(1, threads)

    def run(self, pending: Sequence[Pending], brought: np.ndarray) -> Iterator[Outcome]:
        """An outcome per pending watch: the watches grouped by the generation they were last evaluated at (the
        documents new to them), each group in chunks that share one cut of the indexes."""
        ordered = in_order(pending)
        pool = ThreadPoolExecutor(self.threads, thread_name_prefix="watch") if self.threads > 1 else None
        try:
            yield from self._groups(ordered, brought, pool)
        finally:
            if pool is not None:  # (an evaluation stopped: the few watches still running end, the rest never start)
                pool.shutdown(wait=True, cancel_futures=True)

    def _groups(self, ordered: Sequence[Pending], brought: np.ndarray, pool: ThreadPoolExecutor | None
                ) -> Iterator[Outcome]:
        for since, group in groupby(ordered, key=lambda w: w.evaluated_generation):
            watches = list(group)
            new_rows = np.flatnonzero(brought > since)
            if not len(new_rows):
                for w in watches:
                    yield Outcome(w.id, self.generation, 0, "nothing new", 0.0)
                continue
            is_new = np.zeros(len(self.docs.ids), dtype=bool)
            is_new[new_rows] = True
            for lo in range(0, len(watches), self.chunk):
                part = watches[lo : lo + self.chunk]
                cut = self._cut(new_rows, part) if self.first is not None else None
                if pool is None:
                    for w in part:
                        yield self._one(w, cut, is_new, len(new_rows))
                    continue
                # in the pool's threads, in order, a few ahead (each watch's evaluation is independent of the others';
                # the engine answers concurrent searches as a server's does)
                ahead: deque[Future[Outcome]] = deque()
                todo = iter(part)
                for w in islice(todo, 2 * self.threads):
                    ahead.append(pool.submit(self._one, w, cut, is_new, len(new_rows)))
                while ahead:
                    done = ahead.popleft()
                    for w in islice(todo, 1):
                        ahead.append(pool.submit(self._one, w, cut, is_new, len(new_rows)))
                    yield done.result()

    def _cut(self, new_rows: np.ndarray, watches: Sequence[Pending]) -> FirstStage:
        assert self.first is not None
        allowed = np.zeros(len(self.docs.ids), dtype=bool)
        allowed[new_rows] = True
        for w in watches:
            for doc_id in w.topk:
                row = self._row(doc_id)
                if row is not None:
                    allowed[row] = True
        return restricted_first_stage(self.first, allowed)

    def _row(self, doc_id: str) -> int | None:
        with contextlib.suppress(KeyError):  # (UnknownDocumentError: an ambiguous kind-less id; ours are exact)
            return self.docs.find(doc_id)
        return None

    def _one(self, w: Pending, cut: FirstStage | None, is_new: np.ndarray, n_new: int) -> Outcome:
        started = time.perf_counter()
        req = w.request.search_request()
        reach = self.engine.evidence.reach(w.request.k)
        try:
            if cut is not None:
                query = self._query(req, reach)
                query.depth = reach
                resolve(query, self.docs, self.engine.resources)
                found = cut.run(query)
                rows = found.rows
                if len(rows) == reach and self._settled(rows, is_new):
                    return Outcome(w.id, self.generation, n_new, "bound", (time.perf_counter() - started) * 1000.0,
                                   topk=[self.docs.ids[r] for r in rows.tolist()], kth_score=float(found.scores[-1]))
            else:
                query, cands, trace = self._fused_top(req, reach)
                rows = cands.rows[:reach]
                if self._settled(rows, is_new):
                    return Outcome(w.id, self.generation, n_new, "bound", (time.perf_counter() - started) * 1000.0,
                                   topk=[self.docs.ids[r] for r in rows.tolist()])
                return self._search(w, req, is_new, n_new, started, ran=(query, cands, trace))
            return self._search(w, req, is_new, n_new, started)
        except QueryError as exc:
            return Outcome(w.id, self.generation, n_new, "error", (time.perf_counter() - started) * 1000.0,
                           error=str(exc))

    @staticmethod
    def _settled(rows: np.ndarray, is_new: np.ndarray) -> bool:
        """The proof: no new document among the rows that can reach the top k."""
        return not is_new[rows].any()

    def _fused_top(self, req: Any, reach: int) -> tuple[Query, Candidates, list[StageTrace]]:
        """The fused order's first ``reach`` (the pipeline without the evidence step, the query's vector remembered):
        the only documents the search's top k can hold; with the query and the trace, for the search to go on from."""
        query = self._query(req, reach)
        query.evidence_docs = 0
        cands, trace = self.engine.pipeline.run(query)
        query.evidence_docs = None  # (the search that goes on from it orders by the evidence, as /search does)
        return query, cands, trace

    def _query(self, req: Any, reach: int) -> Query:
        """A watch's query: its first ``reach`` documents, unexplained, its vector remembered."""
        query = self.engine.query(req)
        query.explain = False
        query.k = reach
        query.remember_vector = True
        return query

    def _search(self, w: Pending, req: Any, is_new: np.ndarray, n_new: int, started: float,
                ran: tuple[Query, Candidates, list[StageTrace]] | None = None) -> Outcome:
        """The watch's search (from the fused order the bound ran, ``ran``, where it did)."""
        reach = self.engine.evidence.reach(req.k)
        if ran is not None:
            query, cands, trace = ran
            res = self.engine.run(query, ran=(cands, trace))
        else:
            query = self._query(req, reach)
            res = self.engine.run(query)
        hits: list[WatchHit] = []
        found_at = now()
        for rank, h in enumerate(res.results[: req.k], 1):
            row = self._row(h.id)
            if row is None or not is_new[row]:
                continue
            hits.append(WatchHit(doc_id=h.id, title=h.title, publication_date=h.publication_date,
                                 generation=self.generation, rank=rank, score=h.score, found_at=found_at,
                                 passage=self._passage(query.r.text, query.r.lang, row)))
        kth = res.results[-1].score if len(res.results) == reach else None
        return Outcome(w.id, self.generation, n_new, "search", (time.perf_counter() - started) * 1000.0, hits=hits,
                       topk=[h.id for h in res.results], kth_score=kth)

    def _passage(self, text: str, lang: str, row: int) -> Any:
        try:
            best = self.engine.evidence.passages_of(text, lang, [row], 1)
        except QueryError as exc:  # an index without passages, a query without passage terms: the hit stands
            log.info("no passage for a watch hit (%s)", exc)
            return None
        return best[0] if best else None


def in_processes(engine: Engine, pending: Sequence[Pending], brought: np.ndarray, workers: int,
                 chunk: int = CHUNK) -> Iterator[Outcome]:
    """:meth:`Evaluator.run`'s outcomes, in its order, from ``workers`` processes: each loads the engine's generation
    of the index (the same files, mapped again: :meth:`Engine.load` at ``generation``) and evaluates chunks of the
    watches as :class:`Evaluator` does here. Processes are started afresh (``spawn``: nothing of this one's threads
    or thread pools is inherited); an evaluation stopped cancels the chunks not started."""
    import multiprocessing

    ordered = in_order(pending)
    parts = [ordered[lo : lo + chunk] for lo in range(0, len(ordered), chunk)]  # (each a chunk of the Evaluator's)
    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"), initializer=_worker_start,
                               initargs=(str(engine.index_dir), engine.generation, engine.settings, brought, chunk))
    try:
        for outcomes in pool.map(_worker_run, parts):
            yield from outcomes
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


_WORKER: dict[str, Any] = {}  # a worker process's evaluator (its engine) and the rows each generation brought


def _worker_start(index_dir: str, generation: int, settings: Any, brought: np.ndarray, chunk: int) -> None:
    from service.engine import Engine

    engine = Engine.load(index_dir, settings=settings, verify=False, generation=generation)
    _WORKER.update(evaluator=Evaluator(engine, chunk=chunk), brought=brought)


def _worker_run(watches: list[Pending]) -> list[Outcome]:
    return list(_WORKER["evaluator"].run(watches, _WORKER["brought"]))


def evaluate(engine: Engine, store: WatchStore, *, wait: bool = True, batch: int = BATCH, chunk: int = CHUNK,
             stop: Callable[[], bool] | None = None, workers: int = 1,
             processes: bool | None = None) -> EvaluationReport:
    """Evaluate every watch of ``store`` not yet evaluated at the engine's generation (see the module doc).

    ``wait``: wait for another process's evaluation to end (else return at once, ``busy``). A store that
    already describes a newer generation than the engine's is left as it is (``stale``). ``stop``: asked between
    watches; True ends the evaluation there (the evaluated watches are committed, the others stay pending).
    ``workers``: watches evaluated at once, the same outcomes whatever their number: the writer's ``priorart add`` and
    ``priorart watch run`` use every core, a server one thread beside the requests it answers. They are processes
    (``processes`` True, or None and at least :data:`PROCESS_MIN` watches per worker: each loads the engine's
    generation of the index itself) or threads of this one (a sharded index, fewer watches)."""
    started = time.perf_counter()
    report = EvaluationReport(engine.generation)
    if not store.exists:
        return report
    with store.evaluation_lock(wait=wait) as got:
        if not got:
            report.busy = True
            return report
        with contextlib.closing(store.connect()) as conn:
            snap = snapshot(engine)
            brought = store.sync(conn, snap)
            if brought is None:
                report.stale = True
                return report
            pending = store.pending(conn, engine.generation)
            if not pending:
                return report
            workers = max(1, workers)
            if processes is None:
                processes = workers > 1 and len(pending) >= PROCESS_MIN * workers
            processes = processes and not is_sharded(engine.index_dir)
            evaluator = Evaluator(engine, chunk=chunk, threads=1 if processes else workers)
            report.bound = "first stage" if evaluator.first is not None else "fused order"
            report.workers = f"{workers} {'processes' if processes else 'threads'}" if workers > 1 else "1 thread"
            oldest = min(w.evaluated_generation for w in pending)
            report.new_documents = int(np.count_nonzero(brought > oldest))
            log.info("watches: evaluating %d at generation %d (%d documents new since generation %d) in %s",
                     len(pending), engine.generation, report.new_documents, oldest, report.workers)
            buffer: list[Outcome] = []
            by_id = {w.id: w for w in pending}
            outcomes = (in_processes(engine, pending, brought, workers, chunk) if processes else
                        evaluator.run(pending, brought))
            for outcome in outcomes:
                if stop is not None and stop():
                    break
                watch = by_id[outcome.watch_id]  # (its hits are pushed to its webhook, queued with them)
                outcome.webhook, outcome.watch_name = watch.request.webhook, watch.request.title()
                buffer.append(outcome)
                report.watches += 1
                report.hits += len(outcome.hits)
                report.by_bound += outcome.how == "bound"
                report.searched += outcome.how == "search"
                report.nothing_new += outcome.how == "nothing new"
                report.errors += outcome.how == "error"
                if len(buffer) >= batch:
                    store.record(conn, buffer, snap.index)
                    buffer = []
            if buffer:
                store.record(conn, buffer, snap.index)
    report.seconds = time.perf_counter() - started
    log.info("%s", report.line())
    return report


def save_watch(engine: Engine, store: WatchStore, owner: str, request: WatchRequest) -> Watch:
    """Save a watch at the engine's generation: its search runs once now (a query that cannot run is refused with
    the engine's ``QueryError``), and its top k is the bound of its first evaluation. The store's record of the
    documents is brought up to this generation when no evaluation holds it (the documents of this generation and
    before are never the watch's hits). A webhook must point where the settings let webhooks go
    (:func:`service.watch.webhooks.check_url`: ``WebhookRefusedError``)."""
    if request.webhook is not None:
        from service.watch.webhooks import check_url

        check_url(str(request.webhook.url), engine.settings.webhook_allow)
    req = request.search_request()
    # the bound: the documents that can rank; the query's vector kept for its evaluations
    res = engine.search(req.model_copy(update={"k": engine.evidence.reach(req.k)}), remember_vector=True)
    if not res.query.terms:
        raise QueryError("the query has no index terms after analysis (only stop words or punctuation?): no document "
                         "could ever match it")
    with store.evaluation_lock(wait=False) as got, contextlib.closing(store.connect()) as conn:
        synced = store.synced_generation(conn)
        snap = snapshot(engine)
        if got and (synced is None or synced < engine.generation or store.synced_build(conn) != snap.index):
            store.sync(conn, snap)  # (before the watch is saved: a rebuild noticed here re-baselines the others)
    return store.add(owner, request, engine.generation, topk=[h.id for h in res.results])


__all__ = ["BATCH", "CHUNK", "EvaluationReport", "Evaluator", "evaluate", "ranking_first_stage",
           "restricted_first_stage", "save_watch", "snapshot"]
