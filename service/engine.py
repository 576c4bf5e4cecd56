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
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from service import __version__
from service.candidates import Candidates, StageTrace
from service.classification import ClassificationScheme
from service.code_classifier import CodeClassifier
from service.code_vectors import CodeVectors
from service.codes import record_codes
from service.corpus.families import KEYS as FAMILY_KEYS
from service.corpus.families import Group as FamilyGroup
from service.corpus.families import group as family_groups
from service.corpus.record import PatentRecord
from service.filecache import load_shared
from service.fusion import COMPONENTS
from service.index.components import open_component
from service.index.folder import IndexFolder, IndexFormatError, Layout, ShardSet, is_sharded
from service.index.parts import open_part
from service.index.store import DocStore, UnknownDocumentError
from service.kernel_pooling import KernelPooling, kernel_pooling, reads_kernels
from service.notices import explain as explain_notices
from service.notices import ranking_said
from service.passages import DEFAULT_PARAMS, PassageIndex, PassageIndexMissingError
from service.passages.lm import QueryImage, betas_of, minmax, rho_of
from service.passages.ranker import PassageRanking
from service.passages.segments import SegmentedPassageIndex
from service.pipeline import Pipeline, compose
from service.query import Query, QueryError
from service.ranker import CODE_EMBEDDING, RankerModel, evidence_features, reads_models
from service.retrieval.feedback import Feedback
from service.schema import (
    DEFAULT_VARIANT,
    ClaimChartRequest,
    FamiliesInfo,
    FamilyMember,
    FeedbackInfo,
    FeedbackRequest,
    FusionInfo,
    Notice,
    PassageHit,
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
from service.stages.first import FirstStageStep
from service.text.analysis import SUPPORTED_LANGS

if TYPE_CHECKING:
    from service.ranker import Evidence
    from service.retrieval.first_stage import FirstStage
    from service.retrieval.resources import IndexResources
    from service.shards import Submit
    from service.text.word_vectors import WordVectors

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
        self.resources = pipeline.resources  # the index's analysis, translation tables and routes
        self.notices = list(pipeline.notices)
        self.scheme = scheme
        self.generation = folder.generation
        self.device = pipeline.device
        self.loaded_at = time.time()
        self._passages: PassageIndex | SegmentedPassageIndex | None = None
        self._passages_missing: str | None = None
        try:
            self._passages = open_component("passages", folder)
        except PassageIndexMissingError as exc:  # an index built before passages were indexed: search still works
            self._passages_missing = str(exc)
            self.notices.append(str(exc))
        # the kernel-pooling features over word vectors of the index's terms (service/kernel_pooling.py), when it has
        # them (the index part word_vectors, written with a ranker that reads them; or use_word_vectors)
        vectors = open_part("word_vectors", folder)
        self.kernels: KernelPooling | None = kernel_pooling(self._passages, vectors)
        # the codes of a query from the CPC titles (service/code_classifier.py), where the build had the title list
        self.code_classifier: CodeClassifier | None = open_part("code_classifier", folder)
        # vectors of the index's codes (service/code_vectors.py), where a ranker that reads them was installed
        self.code_vectors: CodeVectors | None = open_part("code_vectors", folder)
        # the learned ranker of the first documents, where one won held out and was installed (service/ranker.py)
        self.ranker: RankerModel | None = None
        part = open_part("ranker", folder)
        if part is not None:
            body, where = part
            try:
                self.ranker = RankerModel.of_part(body, where, settings.device)
            except (ValueError, KeyError, OSError) as exc:
                raise IndexFormatError(f"{folder.path(Layout.RANKER_META)}: {exc}") from exc
            if self.kernels is None and reads_kernels(self.ranker.features):
                self.ranker = None  # its trees would read kernel features of 0: the passage rule orders instead
                self.notices.append("the learned ranker reads kernel features of word vectors this index does not "
                                    "have (too little text, or no passages): its first documents are ordered by "
                                    "their best passage; `priorart install-ranker INDEX` trains the vectors")
            elif self.ranker is not None and CODE_EMBEDDING in self.ranker.features and self.code_vectors is None:
                self.ranker = None  # likewise for the code-embedding feature (service/code_vectors.py)
                self.notices.append("the learned ranker reads the code-embedding feature of code vectors this index "
                                    "does not have (its documents hold no code): its first documents are ordered by "
                                    "their best passage; `priorart install-ranker INDEX` learns the vectors")

    def use_word_vectors(self, vectors: WordVectors) -> None:
        """Compute the kernel-pooling features of the first documents (:mod:`service.kernel_pooling`) with
        ``vectors``, word vectors of this index's terms (:func:`training.word_vectors.train_word_vectors`)."""
        self.kernels = kernel_pooling(self._passages, vectors)

    def use_code_vectors(self, vectors: CodeVectors) -> None:
        """Compute the code-embedding feature of the first documents (:mod:`service.code_vectors`) with ``vectors``,
        vectors of this index's codes (:func:`training.code_vectors.train_code_vectors`)."""
        self.code_vectors = vectors

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
        # the matched words are shown with every result: a sharded index's shards send their candidates' (the
        # ingress has no sparse index to look them up in), one index looks them up for the rows returned
        query.explain = req.explain or self._first_stage() is None
        if req.collapse_families:  # room for the members that collapse, so that k results remain
            query.k = min(query.depth, req.k * FAMILY_ROOM)
        return self.run(query, explain=req.explain, collapse=req.collapse_families, k=req.k,
                        evidence_docs=req.evidence_docs, evidence_weight=req.evidence_weight,
                        evidence_by=req.evidence_by)

    def rank(self, query: Query, *, evidence_docs: int | None = None, evidence_weight: float | None = None,
             evidence_by: str | None = None, ran: tuple[Candidates, list[StageTrace]] | None = None,
             ) -> tuple[Candidates, list[StageTrace], np.ndarray | None]:
        """The order ``/search`` returns, without the response: the pipeline's top ``query.k`` candidates with the
        first ``evidence_docs`` ordered by their evidence (:meth:`run` says how), each stage's trace, and the
        ordering score of the documents the evidence ordered (None: the fused order). ``priorart evaluate`` and
        the experiments rank through it, so that they measure what ``/search`` serves. ``ran``: what the pipeline
        gave this query already (its candidates and trace, from a ``rank`` with ``evidence_docs`` 0 at the same
        ``k``: the watches' bound), used instead of running it again where the evidence needs nothing more."""
        if evidence_docs is None:
            evidence_docs = self.settings.evidence_docs
        if evidence_weight is None:
            evidence_weight = self.settings.evidence_weight
        ranker = self._evidence_ranker(evidence_by)
        if evidence_docs and self._passages is None:
            query.note("ranked by the fused scores, not by passage evidence: "
                       + (self._passages_missing or "this index has no passage index"))
            evidence_docs = 0
        if evidence_docs and ranker is not None:  # the learned ranker orders the first documents it learned on
            evidence_docs = ranker.docs
        keep = query.k
        query.k = max(query.k, min(evidence_docs, query.depth))
        if evidence_docs and ranker is not None and reads_models(ranker.features):
            query.every_component = True  # its features are the rankers' scores, weighed by the fusion or not
        if ran is not None and not query.every_component and len(ran[0]) <= query.k:
            cands, trace = ran
        else:
            cands, trace = self.pipeline.run(query)
        ordered: np.ndarray | None = None  # the ordering score of the first documents the evidence ordered
        if evidence_docs:
            ordered = self.order_by_evidence(query, cands, trace, evidence_docs, evidence_weight, ranker)
            cands.take(np.arange(min(keep, len(cands))))
        query.k = keep
        return cands, trace, ordered

    def run(self, query: Query, *, explain: bool = False, collapse: bool = False, k: int | None = None,
            evidence_docs: int | None = None, evidence_weight: float | None = None,
            evidence_by: str | None = None, ran: tuple[Candidates, list[StageTrace]] | None = None) -> SearchResponse:
        """Run a pipeline query (:meth:`query` of a request, possibly with first-stage options set); ``evidence_docs``:
        the first so many documents ordered by their evidence (:meth:`order_by_evidence`), where the index has
        passages: by the learned ranker (``evidence_by`` ``ranker``, or ``auto`` in an index that has one: the first
        documents it learned on) or by their best passage (``passage``); None: the settings' (as ``evidence_weight``
        and ``evidence_by``), so ``priorart search`` and the claim chart's search rank as ``/search`` does. A request
        for the ranker in an index without one is refused (``QueryError``). ``ran``: as :meth:`rank`'s."""
        started = time.perf_counter()
        cands, trace, ordered = self.rank(query, evidence_docs=evidence_docs, evidence_weight=evidence_weight,
                                          evidence_by=evidence_by, ran=ran)
        lang = query.r.lang
        row_list = cands.rows.tolist()
        shown = len(row_list) if k is None else min(k, len(row_list))
        groups: list[FamilyGroup] = []
        records: list[PatentRecord] = []
        if collapse:  # every candidate's record groups; the first k groups are shown, with their members
            records = [self.docs.header_row(row) for row in row_list]
            groups = family_groups(records)
            at = sorted({i for g in groups[:shown] for i in (g.head, *g.members)})
        else:
            at = list(range(shown))
        assert cands.fused is not None and cands.fusion is not None
        fused = cands.fused.tolist()
        scores = _order_scores(cands.fused, ordered)
        matched = self._matched_words(query, cands, [row_list[i] for i in at])
        language = query.r.language  # (a query in the query language: the clauses each result satisfies, and where)
        fields = language.fields([row_list[i] for i in at]) if language is not None else {}
        # the components that shaped the ranking (a non-zero weight), not every score computed
        normalised = {name: cands.normalised[name].tolist() for name in COMPONENTS
                      if name in cands.normalised and cands.fusion.weights.get(name)}
        hits: dict[int, SearchHit] = {}
        for i in at:
            row = row_list[i]
            rec = records[i] if collapse else self.docs.header_row(row)
            comps = {name: column[i] for name, column in normalised.items()}
            comps["fused"] = fused[i]
            if cands.evidence is not None and not np.isnan(cands.evidence[i]):
                comps["evidence"] = float(cands.evidence[i])
            if cands.ranker is not None and not np.isnan(cands.ranker[i]):
                comps["ranker"] = float(cands.ranker[i])
            words = matched.get(row, {})
            hits[i] = SearchHit(
                id=rec.id, title=title_of(rec, lang), score=scores[i], components=comps, matched_terms=list(words),
                matched_stems=words, route=cands.routes.get(row), codes=record_codes(rec)[:12],
                publication_date=rec.publication_date, clauses=language.satisfied(row) if language else [],
                fields=fields.get(row, {}))
        families = None
        if collapse:
            results, families = _collapse(hits, groups, shown)
        else:
            results = [hits[i] for i in at]
        fusion = _fusion_info(cands)
        notices = self.notices + query.notes
        # what ordered the results: the one source of ranked_by, the ranking line and the explanation's ranking notice
        ranked_by: RankedBy = ("learned ranker" if cands.ranker is not None else "passage evidence"
                               if cands.evidence is not None else "fusion")
        reordered = 0 if ordered is None else len(ordered)
        return SearchResponse(results=results, stages=self._stages(trace, explain),
                              took_ms=(time.perf_counter() - started) * 1000.0, query=self._query_info(query, cands),
                              fusion=fusion, notices=notices,
                              explained=_explained(notices, fusion, ranked_by, reordered), families=families,
                              ranked_by=ranked_by, reordered=reordered,
                              ranking=ranking_said(ranked_by, reordered, fusion.weights),
                              generation=self.generation, partial=bool(cands.missing_shards),
                              missing_shards=cands.missing_shards)

    def _matched_words(self, query: Query, cands: Candidates, rows: list[int]) -> dict[int, dict[str, list[str]]]:
        """The matched words of ``rows`` (the results returned): per row, each query word (as written) it contains,
        itself or through a translation, with the index terms it matched as (a term with no query word behind it, one
        relevance feedback added, stands for itself). Looked up for these rows only; a sharded pipeline's shards send
        theirs with their candidates (``query.explain``: the ingress has no sparse index to look them up in)."""
        if self._first_stage() is not None:
            self.pipeline.explain(cands, np.asarray(rows, dtype=np.int64))
        if not cands.matched_terms or self.resources is None:
            return {}
        translate = query.translate if isinstance(query.translate, bool) else True
        words = self.resources.term_words(query.r.text, query.r.lang, translate=translate)
        out: dict[int, dict[str, list[str]]] = {}
        for row in rows:
            mine: dict[str, list[str]] = {}
            for term in cands.matched_terms.get(row, []):
                for word in words.get(term, (term,)):
                    stems = mine.setdefault(word, [])
                    if term not in stems:
                        stems.append(term)
            out[row] = mine
        return out

    def passages(self, req: PassageRequest) -> PassageResponse:
        """Rank passages of the top documents in context (QSF variants) from the build-time passage index."""
        if self._passages is None:
            raise QueryError(self._passages_missing or "this index has no passage index")
        started = time.perf_counter()
        query = self.query(req, depth=req.depth or PASSAGE_DOCS)
        query.k = query.depth  # passages need the whole candidate list, not the top k documents
        query.explain = False  # the documents' matched terms are not shown with passages
        cands, trace = self.pipeline.run(query)
        t0 = time.perf_counter()
        ranking, detail, _ = self._rank_passages(query, cands, req, k=req.k)
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

    def _rank_passages(self, query: Query, cands: Candidates, req: PassageRequest | None, *, k: int,
                       highlight: bool = True,
                       spread: bool = False) -> tuple[PassageRanking, dict[str, Any], dict[str, QueryImage]]:
        """The passages of the pipeline's candidates, ranked in context with the request's parameters (``None``: the
        defaults), what the trace says of them (``readable``: the languages the query reaches, for the callers'
        note on the candidates without text in them), and the query's images they were ranked with."""
        assert self._passages is not None
        given: dict[str, Any] = {name: getattr(req, name, None)
                                 for name in (*DEFAULT_PASSAGE_PARAMS, "rho", "beta_translated")}
        params: dict[str, float] = {name: float(given[name]) if given[name] is not None else default
                                    for name, default in DEFAULT_PASSAGE_PARAMS.items()}
        lang = query.r.lang
        params["rho"] = rho_of(given["rho"], lang)  # the query language's default unless given
        betas = betas_of(params["beta"], given["beta_translated"], lang)  # per passage language, defaults unless given
        beta_translated = {pl: b for pl, b in zip(SUPPORTED_LANGS, betas, strict=True) if pl != lang}
        variant = req.variant if req is not None else DEFAULT_VARIANT
        images, words = self.passage_query(query.r.text, lang, translate=query.translate is not False,
                                           words=highlight)
        readable = set(images)
        try:
            ranking = self._passages.rank(
                images, lang, cands.rows, cands.fused, analyzers=self._resources().analyzers, words=words,
                variant=variant, k=k, langs=readable, alpha=params["alpha"], beta=params["beta"],
                sigma=params["sigma"], mu=params["mu"], mu_translated=params["mu_translated"],
                rho=params["rho"], beta_translated=beta_translated, highlight=highlight, spread=spread)
        except ValueError as exc:
            raise QueryError(str(exc)) from exc
        return ranking, {"variant": variant, **params, "beta_translated": beta_translated,
                         "documents": ranking.documents, "readable": sorted(readable)}, images

    def reach(self, k: int) -> int:
        """How many documents of the fused order can reach a search's top ``k``: ``k``, or the first documents that
        their evidence orders (:meth:`order_by_evidence`: the learned ranker's ``docs``, else ``evidence_docs``) when
        there are more (the watches' bound)."""
        if self._passages is None or not self.settings.evidence_docs:
            return k
        ranker = self._evidence_ranker(None)
        return max(k, ranker.docs if ranker is not None else self.settings.evidence_docs)

    def _evidence_ranker(self, evidence_by: str | None) -> RankerModel | None:
        """The learned ranker that orders the first documents (None: their best passage does), for ``evidence_by``
        (None: the settings')."""
        by = evidence_by or self.settings.evidence_by
        if by == "ranker" and self.ranker is None:
            raise QueryError("evidence_by 'ranker': this index has no learned ranker (it was built with --ranker none, "
                             "or before one was written: `priorart install-ranker INDEX` installs one); use "
                             "'passage' or 'auto'")
        return self.ranker if by != "passage" else None

    def order_by_evidence(self, query: Query, cands: Candidates, trace: list[StageTrace], n: int,
                          weight: float = 1.0, ranker: RankerModel | None = None) -> np.ndarray | None:
        """Order the first ``n`` candidates (the pipeline's, best fused first) by their evidence. Each one's best
        passage is ranked in context among theirs at the passage defaults (as ``/passages`` would rank them, had it
        these ``n`` documents), its score in [0, 1] (0 for a document whose passages hold no query term, or that has
        none in a language the query reaches). With a ``ranker`` (:mod:`service.ranker`) they are ordered by its
        score of their features; else by ``(1 - weight) * fused + weight * best passage``, the fused score min-max
        normalised over the ``n``. The fused order breaks ties and stands below ``n``. ``cands.evidence``: the best
        passage's score of the first ``n``, NaN below (``cands.ranker`` likewise the ranker's, min-max); it stays
        None, and the fused order with it, when there is no candidate or the passages cannot read the query (a note
        says why). Why these defaults: docs/RESULTS.md, 'Passage evidence in /search'. Returns the score the first
        ``n`` were ordered by, in their new order, in [0, 1] (the ranker's min-max over them, or the blend above), None
        where they were not reordered."""
        t0 = time.perf_counter()
        ordered: np.ndarray | None = None
        n = min(n, len(cands))
        detail: dict[str, Any] = {"documents": n, "weight": weight}
        ranking: PassageRanking | None = None
        if n:
            head = Candidates(rows=cands.rows[:n], fused=None if cands.fused is None else cands.fused[:n])
            try:
                ranking, passages, images = self._rank_passages(query, head, None, k=1, highlight=False,
                                                                spread=ranker is not None)
                detail.update(passages, documents=n)
            except QueryError as exc:
                query.note(f"ranked by the fused scores, not by passage evidence: {exc}")
        if ranking is not None and ranking.best is not None:
            if ranking.skipped:
                query.note(f"passage evidence: {ranking.skipped} of the first {n} documents have no text in "
                           f"{', '.join(detail['readable'])}: they come after those that do")
            best, second = ranking.evidence()
            learned: np.ndarray | None = None
            if ranker is not None:  # the learned ranker's score of each document's evidence
                kernels = (self.kernels.features(images, cands.rows[:n])
                           if self.kernels is not None and reads_kernels(ranker.features) else None)
                ev = evidence_features(self._first_stage(), self.docs, query, cands, n, best, ranker.features,
                                       second, ranking.matched, kernels, ranking.field_evidence(),
                                       self.classify(images), self.code_vectors)
                learned = ranker.score(ev.X)
                key = learned
                if not cands.predicted_codes:  # (the rerank stage's, where it predicted them, are the ones shown)
                    cands.predicted_codes = [code for code, _ in ev.predicted_codes[:3]]
                detail["ranker"] = {"kind": ranker.kind, "features": ranker.features}
            else:
                fused = minmax(cands.fused[:n]) if cands.fused is not None else np.zeros(n)
                key = (1.0 - weight) * fused + weight * best
            order = np.lexsort((np.arange(n), -key))
            ordered = (minmax(learned) if learned is not None else key)[order]
            cands.take(np.concatenate([order, np.arange(n, len(cands))]))
            cands.evidence = np.full(len(cands), np.nan)
            cands.evidence[:n] = best[order]
            if learned is not None:  # (min-max over the n: what the response shows of it)
                cands.ranker = np.full(len(cands), np.nan)
                cands.ranker[:n] = minmax(learned)[order]
        trace.append(StageTrace("evidence", (time.perf_counter() - t0) * 1000.0, n, detail))
        return ordered

    def evidence(self, query: Query, n: int) -> tuple[Candidates, Evidence | None]:
        """The pipeline's candidates of ``query`` (the fused order) and the evidence features of the first ``n``
        (:mod:`service.ranker`): what a learned ranker orders them by (``None`` when the index has no passages or they
        cannot read the query, with a note)."""
        query.k = max(query.k, min(n, query.depth))
        cands, _ = self.pipeline.run(query)
        n = min(n, len(cands))
        if not n or self._passages is None:
            if self._passages is None:
                query.note(self._passages_missing or "this index has no passage index")
            return cands, None
        head = Candidates(rows=cands.rows[:n], fused=None if cands.fused is None else cands.fused[:n])
        try:
            ranking, _, images = self._rank_passages(query, head, None, k=1, highlight=False, spread=True)
        except QueryError as exc:
            query.note(f"no passage evidence: {exc}")
            return cands, None
        best, second = ranking.evidence()
        started = time.perf_counter()
        kernels = self.kernels.features(images, cands.rows[:n]) if self.kernels is not None else None
        kernels_ms = (time.perf_counter() - started) * 1000.0
        ev = evidence_features(self._first_stage(), self.docs, query, cands, n, best, second=second,
                               matched=ranking.matched, kernels=kernels, fields=ranking.field_evidence(),
                               classified=self.classify(images), code_vectors=self.code_vectors)
        ev.kernels_ms = kernels_ms
        return cands, ev

    def classify(self, images: Mapping[str, QueryImage]) -> dict[str, list[tuple[str, float]]] | None:
        """The code classifier's codes per level for a query of these images (its English one: the CPC titles are
        English); None where the index has no classifier or the query does not reach English."""
        if self.code_classifier is None or "en" not in images:
            return None
        return {level: self.code_classifier.predict(images["en"].probs, level) for level in self.code_classifier.levels}

    def _first_stage(self) -> FirstStage | None:
        """The pipeline's first stage, for the features that read the index (None: a sharded pipeline, whose rows are
        the shards' together, has none here: its ``first_stage`` is one shard's)."""
        step = self.pipeline.stages[0]
        return step.fs if isinstance(step, FirstStageStep) else None

    # ------------------------------------------------------------------ passages of given documents
    def passage_index(self) -> PassageIndex | SegmentedPassageIndex:
        """The index's passage index; ``QueryError`` when it has none (an index built before passages were indexed)."""
        if self._passages is None:
            raise QueryError(self._passages_missing or "this index has no passage index")
        return self._passages

    def passages_of(self, text: str, lang: str, rows: list[int], k: int) -> list[PassageHit]:
        """The ``k`` best passages of the documents ``rows`` for ``text`` (ranked among those documents only)."""
        if self._passages is None:
            raise QueryError(self._passages_missing or "this index has no passage index")
        if not rows or k < 1:
            return []
        images, words = self.passage_query(text, lang)
        ranking = self._passages.rank(images, lang, np.asarray(rows, dtype=np.int64), None,
                                      analyzers=self._resources().analyzers, words=words, k=k, langs=set(images))
        return list(ranking.hits)

    def passage_query(self, text: str, lang: str, *, translate: bool = True,
                      words: bool = True) -> tuple[dict[str, QueryImage], dict[str, list[str]]]:
        """What the passage ranker reads of a query: its image in every language it reaches, rendered as the first
        stage's routes render it (the index's analysis and translation tables), and the query words behind each
        of its terms (for the highlights). Raises ``QueryError`` when the query has no index term. The analysis and
        the translation are the first stage's of the same query (:meth:`IndexResources.query_units`, kept for the
        last queries): a search's passages do not analyse or translate it again. ``words``: False where no passage is
        highlighted (the evidence step): none are looked up (empty)."""
        res = self._resources()
        units = res.query_units(text, lang, translate=translate)
        if not units.get(lang):
            raise QueryError("the query has no index terms after analysis (only stop words or punctuation?)")
        images = {tgt: QueryImage.of_units(tgt, u, hops=res.hops(lang, tgt)) for tgt, u in units.items()
                  if any(w > 0 for _, (_, w) in u)}
        if lang in images:  # its own terms in their order: a passage that says them word for word ranks first
            images[lang] = images[lang].with_terms(res.terms(text, lang))
        return images, res.words(text, lang) if words else {}

    def _resources(self) -> IndexResources:
        if self.resources is None:
            raise QueryError("this index's pipeline has no analysis or translation tables to read")
        return self.resources

    def passage_langs(self, lang: str) -> set[str]:
        """Languages whose passages a ``lang`` query reaches: its own, and every language a translation route of
        this index reaches (de/fr <-> en, de <-> fr through English)."""
        return set(self._resources().query_units("", lang)) | {lang}

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
            "passages": self._passages.describe() if self._passages is not None else None,
            "loaded_at": self.loaded_at,
        }


FAMILY_ROOM = 3


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

