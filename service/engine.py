"""The search engine behind the API: one opened index folder, its pipeline, and the request -> query and candidates
-> response mapping.

:meth:`Engine.load` opens and verifies the folder once (:class:`service.index.folder.IndexFolder`),
opens the doc store once, and composes the pipeline with :func:`service.pipeline.compose` (the one
place stages are chosen). The pipeline does the whole search, from the query's resolution to the matched words of
the results shown (the evidence stage holds the passage index: :attr:`Engine.evidence`); the engine ranks nothing
itself. Requests and responses are the typed models of :mod:`service.schema`; anything missing degrades visibly in
the response's ``notices`` (e.g. "no models in this index: BM25 only"), and ``fusion`` says which components shaped
the ranking and why the others did not.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from service import __version__
from service.candidates import Candidates, StageTrace
from service.classification import ClassificationScheme
from service.codes import record_codes
from service.corpus.families import KEYS as FAMILY_KEYS
from service.corpus.families import Group as FamilyGroup
from service.corpus.record import PatentRecord
from service.filecache import load_shared
from service.fusion import COMPONENTS
from service.index.folder import IndexFolder, ShardSet, is_sharded
from service.index.store import DocStore, UnknownDocumentError
from service.notices import explain as explain_notices
from service.notices import ranking_said
from service.pipeline import Pipeline, compose
from service.query import Query, QueryError
from service.retrieval.feedback import Feedback
from service.schema import (
    ClaimChartRequest,
    FamiliesInfo,
    FamilyMember,
    FeedbackInfo,
    FeedbackRequest,
    FusionInfo,
    Notice,
    PassageRequest,
    PassageResponse,
    QueryInfo,
    RankedBy,
    SearchHit,
    SearchRequest,
    SearchResponse,
    StageInfo,
)
from service.settings import Settings
from service.stages.results import collapse_to

if TYPE_CHECKING:
    from service.shards import Submit

log = logging.getLogger(__name__)


PASSAGE_DOCS = 1000

__all__ = ["Engine", "QueryError"]


class Engine:
    """One loaded index: the pipeline, the doc store, the classification scheme; requests in, responses out."""

    def __init__(self, folder: IndexFolder, settings: Settings, pipeline: Pipeline,
                 scheme: ClassificationScheme) -> None:
        self.folder = folder
        self.index_dir = folder.root
        self.settings = settings
        self.pipeline = pipeline
        self.docs: DocStore = pipeline.docs
        self.resources = pipeline.resources  # the index's analysis, translation tables and routes
        self.notices = list(pipeline.notices)
        self.scheme = scheme
        self.generation = folder.generation
        self.device = pipeline.device
        self.loaded_at = time.time()
        evidence = pipeline.evidence
        if evidence is None:
            raise ValueError("an engine's pipeline has the evidence stage (a shard's, compose(..., shard=True), has "
                             "none)")
        # the evidence stage: the passage index, and what orders the first documents (service/stages/evidence.py)
        self.evidence = evidence

    def close(self) -> None:
        """Release the doc store's descriptors (memory maps go with the object); only once no request uses it."""
        self.docs.close()
        for stage in self.pipeline.stages:  # a sharded pipeline's shards loaded in this process
            close = getattr(stage, "close", None)
            if callable(close):
                close()

    # ------------------------------------------------------------------ loading
    @classmethod
    def load(cls, index_dir: str | Path, *, settings: Settings | None = None, verify: bool = True,
             generation: int | None = None) -> Engine:
        """Open and verify an index folder (at its newest generation, or at ``generation``); raises
        ``IndexFormatError`` with a clear message if unusable."""
        settings = settings or Settings(index_dir=Path(index_dir))
        if is_sharded(index_dir):  # every shard in this process, weighted with the global statistics
            return cls.sharded(index_dir, settings=settings, verify=verify)
        folder = (IndexFolder.open(index_dir, verify=verify) if generation is None else
                  IndexFolder.at(index_dir, generation, verify=verify))
        pipeline = compose(folder, settings)
        return cls(folder, settings, pipeline, _load_scheme(settings, pipeline.docs))

    @classmethod
    def sharded(cls, index_dir: str | Path, *, settings: Settings, submit: Sequence[Submit] | None = None,
                verify: bool = True) -> Engine:
        """A sharded index (service/shards.py): its shards loaded here, or reached through ``submit`` (one per
        shard: the Ray Serve ingress, service/serve_ray.py). The doc store and the passage index are the whole
        collection's (the shards' in turn); the pipeline is the fan-out, the merge and the fusion."""
        shards = ShardSet.open(index_dir, verify=verify and submit is None)
        pipeline = compose(shards, settings, submit=submit)
        return cls(shards.union(), settings, pipeline, _load_scheme(settings, pipeline.docs))

    @property
    def num_docs(self) -> int:
        """Documents searchable (a live index's deleted rows left out)."""
        return self.docs.n_live

    def describe(self) -> str:
        return f"{self.num_docs} documents, stages {' -> '.join(self.pipeline.names)}, device {self.device}"

    # ------------------------------------------------------------------ queries
    def query(self, req: SearchRequest | ClaimChartRequest, depth: int | None = None, *,
              text: str | None = None) -> Query:
        """The pipeline query of a request (depth: the request's, else the settings' default; clamped)."""
        search = req if isinstance(req, SearchRequest) else None
        want = depth if depth is not None else ((search.depth if search else None) or self.settings.default_depth)
        depth = min(want, self.settings.max_depth)
        if text is None:
            text = search.query if search is not None else getattr(req, "claim_text", "")
        return Query(text=text.strip(),
                     lang=None if req.lang == "auto" else req.lang, codes=list(req.codes),
                     code_level=None if req.code_filter == "none" else req.code_filter, before=req.before, k=req.k,
                     depth=max(depth, req.k), translate=search.translate if search else True,
                     weights=search.weights if search else None, fusion=search.fusion if search else None,
                     feedback=self._feedback(req.feedback), syntax=search.syntax if search else "text",
                     priority_cutoff=search.priority_cutoff if search else True,
                     drop_translations=tuple(search.drop_translations) if search else ())

    def _feedback(self, fb: FeedbackRequest | None) -> Feedback | None:
        if fb is None or not (fb.relevant or fb.nonrelevant):
            return None
        rows: dict[str, list[int]] = {"relevant": [], "nonrelevant": []}
        for name in rows:
            for doc_id in getattr(fb, name):
                row = self.row(doc_id)
                if row is None:
                    raise QueryError(f"feedback: no document {doc_id!r} in this index")
                if row not in rows[name]:
                    rows[name].append(row)
        both = set(rows["relevant"]) & set(rows["nonrelevant"])
        if both:
            raise QueryError(f"feedback: {self.docs.ids[min(both)]} is marked both relevant and not relevant")
        return Feedback(relevant=rows["relevant"], nonrelevant=rows["nonrelevant"], terms=fb.terms)

    def row(self, doc_id: str) -> int | None:
        """The row of a publication id (as :meth:`DocStore.find` reads it: case, spaces, leading zeros and a missing
        kind code tolerated); ``None`` when no document, or several, answer to it."""
        try:
            return self.docs.find(doc_id)
        except UnknownDocumentError:
            return None

    def search(self, req: SearchRequest, *, remember_vector: bool = False) -> SearchResponse:
        """Run the pipeline; the result is the body of ``POST /search``. ``remember_vector``: the query's vector is
        kept in the vector cache (a query that will run again and again: a watch)."""
        query = self.query(req)
        query.remember_vector = remember_vector
        query.explain = True  # (the matched words are shown with every result, looked up for those shown)
        if req.collapse_families:
            collapse_to(query, req.k)
        query.evidence_docs, query.evidence_weight = req.evidence_docs, req.evidence_weight
        query.evidence_by = req.evidence_by
        return self.run(query, explain=req.explain)

    def run(self, query: Query, *, explain: bool = False,
            ran: tuple[Candidates, list[StageTrace]] | None = None) -> SearchResponse:
        """Run a pipeline query (:meth:`query` of a request, possibly with first-stage options set) and map its
        candidates to the response: the first ``query.k``, or the first ``query.collapse`` family groups with their
        members listed under each head. The order is the pipeline's (:meth:`Pipeline.run`), so ``priorart search``,
        the claim chart's search and the watches rank as ``/search`` does. ``explain``: each stage's details in the
        response. ``ran``: as :meth:`Pipeline.run`'s."""
        started = time.perf_counter()
        cands, trace = self.pipeline.run(query, ran=ran)
        assert cands.fused is not None and cands.fusion is not None
        lang, row_list, fused = query.r.lang, cands.rows.tolist(), cands.fused.tolist()
        at = list(range(len(row_list))) if cands.shown is None else cands.shown
        scores = _order_scores(cands.fused, cands.ordered)
        language = query.r.language  # (a query in the query language: the clauses each result satisfies, and where)
        fields = language.fields([row_list[i] for i in at]) if language is not None else {}
        # the components that shaped the ranking (a non-zero weight), not every score computed
        normalised = {name: cands.normalised[name].tolist() for name in COMPONENTS
                      if name in cands.normalised and cands.fusion.weights.get(name)}
        hits: dict[int, SearchHit] = {}
        for i in at:
            row = row_list[i]
            rec = self.docs.header_row(row)
            comps = {name: column[i] for name, column in normalised.items()}
            comps["fused"] = fused[i]
            if cands.evidence is not None and not np.isnan(cands.evidence[i]):
                comps["evidence"] = float(cands.evidence[i])
            if cands.ranker is not None and not np.isnan(cands.ranker[i]):
                comps["ranker"] = float(cands.ranker[i])
            words = cands.matched_words.get(row, {})
            hits[i] = SearchHit(
                id=rec.id, title=title_of(rec, lang), score=scores[i], components=comps, matched_terms=list(words),
                matched_stems=words, route=cands.routes.get(row), codes=record_codes(rec)[:12],
                publication_date=rec.publication_date, clauses=language.satisfied(row) if language else [],
                fields=fields.get(row, {}))
        families = None
        if cands.groups is not None:
            results, families = _collapse(hits, cands.groups, query.collapse)
        else:
            results = [hits[i] for i in at]
        fusion = _fusion_info(cands)
        notices = self.notices + query.notes
        # what ordered the results: the one source of ranked_by, the ranking line and the explanation's ranking notice
        ranked_by: RankedBy = ("learned ranker" if cands.ranker is not None else "passage evidence"
                               if cands.evidence is not None else "fusion")
        reordered = 0 if cands.ordered is None else len(cands.ordered)
        return SearchResponse(results=results, stages=self._stages(trace, explain),
                              took_ms=(time.perf_counter() - started) * 1000.0, query=self._query_info(query, cands),
                              fusion=fusion, notices=notices,
                              explained=_explained(notices, fusion, ranked_by, reordered), families=families,
                              ranked_by=ranked_by, reordered=reordered,
                              ranking=ranking_said(ranked_by, reordered, fusion.weights),
                              generation=self.generation, partial=bool(cands.missing_shards),
                              missing_shards=cands.missing_shards)

    def passages(self, req: PassageRequest) -> PassageResponse:
        """Rank passages of the top documents in context (QSF variants) from the build-time passage index."""
        self.evidence.passage_index()  # (QueryError: none)
        started = time.perf_counter()
        query = self.query(req, depth=req.depth or PASSAGE_DOCS)
        query.k = query.depth  # passages need the whole candidate list, not the top k documents
        query.explain = False  # the documents' matched terms are not shown with passages
        query.evidence_docs = 0  # (ranked in the fused order's context)
        cands, trace = self.pipeline.run(query)
        t0 = time.perf_counter()
        ranking, detail, _ = self.evidence.rank_passages(query, cands, req, k=req.k)
        if ranking.skipped:
            query.note(f"{ranking.skipped} candidate documents have no text in {', '.join(detail['readable'])}: "
                       "their passages are not ranked")
        trace.append(StageTrace("passages", (time.perf_counter() - t0) * 1000.0, len(ranking.hits), detail))
        results = list(ranking.hits)
        fusion = _fusion_info(cands)
        notices = self.notices + query.notes
        return PassageResponse(results=results, stages=self._stages(trace, req.explain),
                               took_ms=(time.perf_counter() - started) * 1000.0, query=self._query_info(query, cands),
                               fusion=fusion, notices=notices, explained=_explained(notices, fusion),
                               generation=self.generation, partial=bool(cands.missing_shards),
                               missing_shards=cands.missing_shards)

    @staticmethod
    def _stages(trace: list[StageTrace], explain: bool) -> list[StageInfo]:
        return [StageInfo(name=t.name, ms=t.ms, candidates=t.candidates, detail=t.detail if explain else {})
                for t in trace]

    def _query_info(self, query: Query, cands: Candidates) -> QueryInfo:
        r, info = query.r, cands.first_info
        return QueryInfo(
            lang=r.lang, lang_detected=r.lang_detected, text_from=r.query_doc, codes=list(r.codes),
            codes_from=r.codes_from, translated=bool(info and info.translation), translation=info.translation if info
            else None, routes=[x.name for x in info.routes] if info else [],
            route_tables={x.name: x.table for x in info.routes if x.table} if info else {},
            translated_to=list(dict.fromkeys(x.index_lang for x in info.routes if x.kind == "psq")) if info else [],
            terms=list(info.query_terms) if info else [], terms_before_reduction=info.n_terms_before_reduction
            if info else 0, filters=dict(r.filters), feedback=_feedback_info(query, self.docs.ids),
            predicted_codes=list(cands.predicted_codes))

    # ------------------------------------------------------------------ lookups
    def document(self, doc_id: str) -> PatentRecord | None:
        try:
            row = self.docs.find(doc_id)
        except UnknownDocumentError:
            return None
        return None if row is None else self.docs.get_row(row)

    def suggest_codes(self, q: str, limit: int) -> list[dict[str, Any]]:
        return [{"code": m.code, "title": m.title, "level": m.level} for m in self.scheme.search(q, limit)]

    def health(self) -> dict[str, Any]:
        meta = self.folder.meta
        return {
            "version": __version__,
            "index": {
                "path": str(self.index_dir),
                "format_version": meta.version,
                "created": meta.created,
                "settings": meta.settings.to_dict(),
                "components": sorted(meta.components),
                "generation": self.generation,
                "segments": [{"dir": s.dir, "documents": s.n_rows, "deleted": len(s.deleted)}
                             for s in self.folder.segments],
            },
            "documents": self.num_docs,
            "stages": self.pipeline.names,
            "stage_details": self.pipeline.describe(),
            "device": self.device,
            "notices": self.notices,
            "passages": self.evidence.passages.describe() if self.evidence.passages is not None else None,
            "loaded_at": self.loaded_at,
        }



def _collapse(hits: Mapping[int, SearchHit], groups: Sequence[FamilyGroup],
              shown: int) -> tuple[list[SearchHit], FamiliesInfo]:
    """The first ``shown`` groups' heads, each with the members of its family / application / priority listed
    under it (``hits``: theirs, by position in the candidates); the counts are over every group."""
    out: list[SearchHit] = []
    for g in groups[:shown]:
        head = hits[g.head]
        if g.members:
            head = head.model_copy(update={"family": [
                FamilyMember(id=hits[m].id, title=hits[m].title, publication_date=hits[m].publication_date,
                             score=hits[m].score, grouped_by=g.reasons[m]) for m in g.members]})
        out.append(head)
    hidden = sum(len(g.members) for g in groups)
    return out, FamiliesInfo(collapsed=True, grouped_by=list(FAMILY_KEYS), groups=sum(1 for g in groups if g.members),
                             hidden=hidden)


def _explained(notices: list[str], fusion: FusionInfo, ranked_by: RankedBy = "fusion",
               reordered: int = 0) -> list[Notice]:
    return [Notice(text=e.text, detail=e.detail, kind=e.kind)
            for e in explain_notices(notices, fusion.weights, profile=fusion.profile, source=fusion.source,
                                     ranked_by=ranked_by, reordered=reordered)]


def _order_scores(fused: np.ndarray, ordered: np.ndarray | None) -> list[float]:
    """The score each result shows: the one its order follows (schema ``SCORE_SCALE``). The fused score, except for
    the first ``len(ordered)`` documents, which their evidence ordered: 1 + their ordering score (``ordered``, in
    [0, 1], non-increasing), lifted by the largest fused score where that passes 1, so above every fused score
    below them."""
    out = fused.astype(np.float64, copy=True)
    if ordered is not None and len(ordered):
        n = min(len(ordered), len(out))
        lift = max(1.0, float(fused.max())) if len(fused) else 1.0
        out[:n] = lift + ordered[:n]
    return out.tolist()


def _feedback_info(query: Query, ids: Any) -> FeedbackInfo | None:
    fb = query.feedback
    if fb is None:
        return None
    return FeedbackInfo(relevant=[ids[r] for r in fb.relevant], nonrelevant=[ids[r] for r in fb.nonrelevant],
                        added_terms={lang: list(terms) for lang, terms in fb.added.items()},
                        weights={lang: {t: round(w, 4) for t, w in terms.items()} for lang, terms in fb.added.items()},
                        dense=fb.dense, notes=list(fb.notes))


def _fusion_info(cands: Candidates) -> FusionInfo:
    assert cands.fusion is not None
    return cands.fusion


def title_of(rec: PatentRecord, lang: str | None) -> str | None:
    """A record's title in ``lang``, else English, else its first language."""
    if lang and lang in rec.title:
        return rec.title[lang]
    if "en" in rec.title:
        return rec.title["en"]
    return next(iter(rec.title.values()), None)


def _load_scheme(settings: Settings, docs: DocStore) -> ClassificationScheme:
    """The CPC scheme from settings (titles), else a title-less tree of the codes seen in the index. The titles are
    read once while an engine holds them (a reload after each add shares them: their parse took 1.5 s a reload)."""
    if settings.cpc_titles is not None:
        try:
            return load_shared(settings.cpc_titles, ClassificationScheme.load)
        except (OSError, ValueError) as exc:
            log.warning("CPC titles %s unreadable (%s): code suggestions without titles", settings.cpc_titles, exc)
    codes: set[str] = set()
    for lvl in ("subgroup", "main_group"):
        codes.update(docs.code_vocabulary(lvl))
    return ClassificationScheme.from_codes(sorted(codes))

