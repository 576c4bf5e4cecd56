"""The search engine behind the API: one opened index folder, its pipeline, the doc store, passages.

:meth:`Engine.load` opens and verifies the folder once (:class:`service.index.folder.IndexFolder`),
opens the doc store once, and composes the pipeline with :func:`service.pipeline.compose` (the one
place stages are chosen). Requests and responses are the typed models of :mod:`service.schema`;
anything missing degrades visibly in the response's ``notices`` (e.g. "no models in this index: BM25
only"), and ``fusion`` says which components shaped the ranking and why the others did not.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from service import __version__
from service.candidates import Candidates, StageTrace
from service.classification import ClassificationScheme
from service.codes import record_codes
from service.corpus.record import PatentRecord
from service.fusion import COMPONENTS
from service.index.folder import IndexFolder
from service.index.store import DocStore, UnknownDocumentError
from service.passages import DEFAULT_PARAMS, PassageIndex, PassageIndexMissingError
from service.pipeline import Pipeline, compose
from service.query import Query, QueryError
from service.schema import (
    FusionInfo,
    PassageHit,
    PassageRequest,
    PassageResponse,
    QueryInfo,
    SearchHit,
    SearchRequest,
    SearchResponse,
    StageInfo,
)
from service.settings import Settings

log = logging.getLogger(__name__)

DEFAULT_PASSAGE_PARAMS = dict(DEFAULT_PARAMS)
PASSAGE_DOCS = 1000

__all__ = ["Engine", "QueryError"]


class Engine:
    """One loaded index: the pipeline, the doc store, the classification scheme, passage ranking."""

    def __init__(self, folder: IndexFolder, settings: Settings, pipeline: Pipeline,
                 scheme: ClassificationScheme) -> None:
        self.folder = folder
        self.index_dir = folder.root
        self.settings = settings
        self.pipeline = pipeline
        self.docs: DocStore = pipeline.docs
        self.first_stage = pipeline.first_stage
        self.notices = list(pipeline.notices)
        self.scheme = scheme
        self.generation = folder.generation
        self.device = pipeline.device
        self.loaded_at = time.time()
        self._passages: PassageIndex | None = None
        self._passages_missing: str | None = None
        try:
            self._passages = PassageIndex.load(folder)
        except PassageIndexMissingError as exc:  # an index built before passages were indexed: search still works
            self._passages_missing = str(exc)
            self.notices.append(str(exc))

    def close(self) -> None:
        """Release the doc store's descriptors (memory maps go with the object); only once no request uses it."""
        self.docs.close()

    # ------------------------------------------------------------------ loading
    @classmethod
    def load(cls, index_dir: str | Path, *, settings: Settings | None = None, verify: bool = True) -> Engine:
        """Open and verify an index folder; raises ``IndexFormatError`` with a clear message if unusable."""
        settings = settings or Settings(index_dir=Path(index_dir))
        folder = IndexFolder.open(index_dir, verify=verify)
        pipeline = compose(folder, settings)
        return cls(folder, settings, pipeline, _load_scheme(settings, pipeline.docs))

    @property
    def num_docs(self) -> int:
        """Documents searchable (a live index's deleted rows left out)."""
        return self.docs.n_live

    def describe(self) -> str:
        return f"{self.num_docs} documents, stages {' -> '.join(self.pipeline.names)}, device {self.device}"

    # ------------------------------------------------------------------ queries
    def query(self, req: SearchRequest, depth: int | None = None) -> Query:
        """The pipeline query of a request (depth: the request's, else the settings' default; clamped)."""
        want = depth if depth is not None else (req.depth or self.settings.default_depth)
        depth = min(want, self.settings.max_depth)
        return Query(text=req.query.strip(), lang=None if req.lang == "auto" else req.lang, codes=list(req.codes),
                     code_level=None if req.code_filter == "none" else req.code_filter, before=req.before, k=req.k,
                     depth=max(depth, req.k), translate=req.translate, weights=req.weights, fusion=req.fusion)

    def search(self, req: SearchRequest) -> SearchResponse:
        """Run the pipeline; the result is the body of ``POST /search``."""
        return self.run(self.query(req), explain=req.explain)

    def run(self, query: Query, *, explain: bool = False) -> SearchResponse:
        """Run a pipeline query (:meth:`query` of a request, possibly with first-stage options set)."""
        started = time.perf_counter()
        cands, trace = self.pipeline.run(query)
        lang = query.r.lang
        results = []
        for i, row in enumerate(cands.rows.tolist()):
            rec = self.docs.get_row(row)
            comps: dict[str, float | None] = {
                name: float(cands.normalised[name][i]) if name in cands.normalised else None for name in COMPONENTS}
            assert cands.fused is not None
            comps["fused"] = float(cands.fused[i])
            results.append(SearchHit(
                id=rec.id, title=title_of(rec, lang), score=float(cands.fused[i]), components=comps,
                matched_terms=cands.matched_terms.get(row, []) if explain else [], route=cands.routes.get(row),
                codes=record_codes(rec)[:12], publication_date=rec.publication_date))
        return SearchResponse(results=results, stages=self._stages(trace, explain),
                              took_ms=(time.perf_counter() - started) * 1000.0, query=self._query_info(query, cands),
                              fusion=_fusion_info(cands), notices=self.notices + query.notes,
                              generation=self.generation)

    def passages(self, req: PassageRequest) -> PassageResponse:
        """Rank passages of the top documents in context (QSF variants) from the build-time passage index."""
        if self._passages is None:
            raise QueryError(self._passages_missing or "this index has no passage index")
        started = time.perf_counter()
        query = self.query(req, depth=req.depth or PASSAGE_DOCS)
        query.k = query.depth  # passages need the whole candidate list, not the top k documents
        cands, trace = self.pipeline.run(query)
        params = {name: getattr(req, name) if getattr(req, name) is not None else default
                  for name, default in DEFAULT_PASSAGE_PARAMS.items()}
        t0 = time.perf_counter()
        lang = query.r.lang
        readable = {lang} | ({"en"} if lang in self.first_stage.tables else set())
        try:
            ranking = self._passages.rank(
                query.r.text, lang, cands.rows, cands.fused, translations=self.first_stage.tables,
                variant=req.variant, k=req.k, langs=readable, alpha=params["alpha"], beta=params["beta"],
                sigma=params["sigma"])
        except ValueError as exc:
            raise QueryError(str(exc)) from exc
        if ranking.skipped:
            query.note(f"{ranking.skipped} candidate documents have no text in {', '.join(sorted(readable))}: "
                       "their passages are not ranked")
        trace.append(StageTrace("passages", (time.perf_counter() - t0) * 1000.0, len(ranking.hits),
                                {"variant": req.variant, **params, "documents": ranking.documents}))
        results = [PassageHit.model_validate(h.to_dict()) for h in ranking.hits]
        return PassageResponse(results=results, stages=self._stages(trace, req.explain),
                               took_ms=(time.perf_counter() - started) * 1000.0, query=self._query_info(query, cands),
                               fusion=_fusion_info(cands), notices=self.notices + query.notes,
                               generation=self.generation)

    @staticmethod
    def _stages(trace: list[StageTrace], explain: bool) -> list[StageInfo]:
        return [StageInfo(name=t.name, ms=t.ms, candidates=t.candidates, detail=t.detail if explain else {})
                for t in trace]

    @staticmethod
    def _query_info(query: Query, cands: Candidates) -> QueryInfo:
        r, info = query.r, cands.first_info
        return QueryInfo(
            lang=r.lang, lang_detected=r.lang_detected, text_from=r.query_doc, codes=list(r.codes),
            codes_from=r.codes_from, translated=bool(info and info.translation), translation=info.translation if info
            else None, routes=[x.name for x in info.routes] if info else [],
            route_tables={x.name: x.table for x in info.routes if x.table} if info else {},
            terms=list(info.query_terms) if info else [], terms_before_reduction=info.n_terms_before_reduction
            if info else 0, filters=dict(r.filters))

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
                "settings": meta.settings,
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
            "passages": self._passages.describe() if self._passages is not None else None,
            "loaded_at": self.loaded_at,
        }


def _fusion_info(cands: Candidates) -> FusionInfo:
    f = cands.fusion
    assert f is not None
    return FusionInfo(method=f.method, profile=f.profile, depth=f.depth, weights=f.weights, source=f.source,
                      components=f.components, fallback=f.fallback)


def title_of(rec: PatentRecord, lang: str | None) -> str | None:
    """A record's title in ``lang``, else English, else its first language."""
    if lang and lang in rec.title:
        return rec.title[lang]
    if "en" in rec.title:
        return rec.title["en"]
    return next(iter(rec.title.values()), None)


def _load_scheme(settings: Settings, docs: DocStore) -> ClassificationScheme:
    """The CPC scheme from settings (titles), else a title-less tree of the codes seen in the index."""
    if settings.cpc_titles is not None:
        try:
            return ClassificationScheme.load(settings.cpc_titles)
        except (OSError, ValueError) as exc:
            log.warning("CPC titles %s unreadable (%s): code suggestions without titles", settings.cpc_titles, exc)
    codes: set[str] = set()
    for lvl in ("subgroup", "main_group"):
        codes.update(docs.code_vocabulary(lvl))
    return ClassificationScheme.from_codes(sorted(codes))

