"""Sparse first stage: query analysis -> reduction -> routes per language (incl. PSQ) -> filters -> top-k.

Routes. An index holds one sparse index per indexed language, rows aligned on the doc store. A query in
language ``L`` is searched in its own language's index and, translated by PSQ, in every other indexed language a
table of the index reaches: the routes of :class:`service.retrieval.resources.IndexResources`, which the passage
ranker reads too (the query's image per language).

Query analysis uses the analyzers the index was built with (``meta.json`` ``settings.analysis``: German
compounds split into their parts, see ``service.text.compounds``).

Combination. One route: its raw scores. Several routes score the same document in different languages,
so their raw BM25 scores are not comparable (other collection statistics, another number of query
units). Each route's score is divided by a *reference score*: what a document of average length holding the
query's best translation of every unit once (its probability as expected tf) would score in that route
(:func:`reference_score`; a unit that matches nothing in the route's index counts with the idf of a term seen
once, so a route that cannot express part of the query is not rewarded for it). One occurrence of every term
then scores 1 on every route. The ceilings are aligned too (``combine="aligned"``, the default,
:func:`ceiling_slope`): an untranslated query's own route reaches at most ``k1 + 1`` after the division, a
translated route more (its reference holds each translation with a probability below 1), so what a translated
route's score gains above a knee (1.5) is scaled down until its ceiling is ``k1 + 1`` as well. Without that, an English
document repeating the translations of a German title's generic words outscored the German publication that
holds the title's own words (docs/RESULTS.md, "The route merge and own-language documents"). A document gets its
maximum over routes, and the hit says which route gave it (``Hit.route``). The other merges stay selectable for
comparison: ``"reference"`` (the division alone), ``"weight"`` (by the attainable ``sum_u w_u * idf_u * (k1 +
1)``), ``"max"`` (each route's best hit gets 1), ``"saturated"``, ``"scaled"``.

Query reduction. Long queries keep their ``max_query_terms`` terms of highest tf-idf (query tf times
idf in the first route's index; default 100, the passage paper's claims setting; 0 = keep all).
For a patent-number query ``query_form="abstract"`` (10 terms) and ``"claims"`` (100 terms) give the
paper's two query forms (Mahdabi et al. 2011), ``"text"`` uses title, abstract and claims.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np

from service.codes import CODE_LEVELS
from service.filecache import file_identity, load_shared
from service.index.folder import IndexFolder, IndexMeta, Layout
from service.index.parts import open_part
from service.index.store import DocStore
from service.query import Query, QueryError, resolve
from service.retrieval.feedback import Feedback, centroid, expansion_terms, term_vector
from service.retrieval.kernels import AccumulatorPool
from service.retrieval.resources import PARTS_MAX_TERMS, IndexResources, Route
from service.retrieval.segments import SparseGeneration
from service.retrieval.sparse import BaseSparseIndex, CollectionStats, QueryUnit, SparseIndex
from service.text.analysis import Analyzer
from service.text.translation import TranslationTable

log = logging.getLogger(__name__)

DEFAULT_MAX_QUERY_TERMS = 100
PAPER_TERMS = {"abstract": 10, "claims": 100}
COMBINES = ("weight", "reference", "max", "saturated", "scaled", "aligned")
DEFAULT_COMBINE = "aligned"
ALIGN_KNEE = 1.5  # the aligned merge leaves a translated route's scores up to this as they are (see ceiling_slope)

@dataclass(slots=True)
class Hit:
    """One retrieved document. ``route_scores``: raw score per route that matched it; ``route``: the route
    whose (normalised) score is the hit's score."""

    doc_id: str
    row: int
    score: float
    rank: int
    matched_terms: list[str]
    route_scores: dict[str, float]
    route: str | None = None


@dataclass(slots=True)
class RouteInfo:
    name: str  # e.g. "de", "en:psq", "en:raw"
    index_lang: str
    kind: str  # mono | psq | raw
    table: str | None  # e.g. "de-en", "de-fr + via en" (its own table mixed with de-en + en-fr), "de-fr via en"
    n_matched: int | None  # documents matching a query term (None: not counted, an unexplained one-route search)
    max_score: float
    norm: float = 0.0  # the score a document would need to reach 1 after normalisation (0: raw scores)
    slope: float = 1.0  # what the normalised score gains above the knee is multiplied by (ceilings aligned; 1: none)


@dataclass(slots=True)
class SearchInfo:
    lang: str
    lang_detected: bool
    translation: str | None
    routes: list[RouteInfo]
    query_terms: list[str]
    n_terms_before_reduction: int
    filters: dict[str, Any]
    query_doc: str | None = None
    combine: str = "raw"
    notes: list[str] = field(default_factory=list)


RouteTerms = list[tuple[str, list[str]]]
"""Per route of a search, the index language it searched and its target terms (the matched terms' source)."""


class FirstStageResult:
    """A search's hits, best first, as arrays and as :class:`Hit` objects, made on first use of :attr:`hits` (the
    offline API: experiments and tests; the pipeline's first stage emits :class:`service.candidates.Candidates`).

    ``route_scores``: per route name, each hit's raw score in that route (NaN where the route did not match it or
    the filters excluded it); ``winner``: per hit, the index in ``route_names`` of the route whose score is the
    hit's (-1: none); ``route_terms``: what :meth:`terms_of` looks up. The hits carry their matched terms when the
    query asked to explain."""

    def __init__(self, ids: Sequence[str], rows: np.ndarray, scores: np.ndarray, info: SearchInfo, *,
                 route_names: Sequence[str] = (), route_scores: Mapping[str, np.ndarray] | None = None,
                 winner: np.ndarray | None = None, route_terms: RouteTerms = (),  # type: ignore[assignment]
                 resources: IndexResources | None = None, explain: bool = False) -> None:
        self.rows = rows
        self.scores = scores
        self.info = info
        self.route_names = list(route_names)
        self.route_scores = dict(route_scores or {})
        self.winner = winner if winner is not None else np.full(len(rows), -1, dtype=np.int64)
        self.route_terms = list(route_terms)
        self.explain = explain
        self._resources = resources
        self._ids = ids
        self._hits: list[Hit] | None = None

    def terms_of(self, rows: Sequence[int]) -> list[list[str]]:
        """Each of ``rows``' matched query terms (distinct, in query order, route after route)."""
        if self._resources is None:
            return [[] for _ in rows]
        return self._resources.matched_terms(self.route_terms, rows)

    @property
    def hits(self) -> list[Hit]:
        if self._hits is None:
            n = len(self.rows)
            per_route = {name: arr.tolist() for name, arr in self.route_scores.items()}
            terms = self.terms_of(self.rows.tolist()) if self.explain else [[] for _ in range(n)]
            won = self.winner.tolist()
            self._hits = [
                Hit(self._ids[r], r, score, i + 1, terms[i],
                    {name: v[i] for name, v in per_route.items() if not math.isnan(v[i])},
                    self.route_names[won[i]] if won[i] >= 0 else None)
                for i, (r, score) in enumerate(zip(self.rows.tolist(), self.scores.tolist(), strict=True))
            ]
        return self._hits

    def to_dict(self) -> dict[str, Any]:
        return {"hits": [asdict(h) for h in self.hits], "info": asdict(self.info)}


def reference_score(index: BaseSparseIndex, units: Sequence[QueryUnit], *, scale_tf: bool = False) -> float:
    """The score of the query's own best translation as a document of average length in ``index``.

    Each unit counts as if a document held its most probable target term once (expected tf = that
    probability), so a route whose translations spread their probability is measured against what a
    perfect match *in that route* scores, not against an untranslated query's. Units that match nothing
    in the index count with the idf of a term seen once (a miss). ``scale_tf``: the units' expected tf is scaled by
    their best translation's probability (:meth:`BaseSparseIndex.accumulate`), so that translation counts as tf 1."""
    return route_norms(index, units, scale_tf=scale_tf)[0]


def attainable_score(index: BaseSparseIndex, units: Sequence[QueryUnit]) -> float:
    """The best score a document could reach for ``units`` in ``index`` (see the module docstring)."""
    return route_norms(index, units)[1]


def route_norms(index: BaseSparseIndex, units: Sequence[QueryUnit], *, scale_tf: bool = False) -> tuple[float, float]:
    """:func:`reference_score` and :func:`attainable_score` of a route in one pass over its units (each unit's idf
    is looked up once)."""
    rare = index.idf_of(1.0)
    bm25 = index.scoring == "bm25"
    k1 = index.k1
    reference = attainable = 0.0
    for mapping, weight in units:
        if not mapping:
            continue
        idf = index.unit_idf(mapping) if any(t in index.term_id for t in mapping) else rare
        tf = 1.0 if scale_tf else max(mapping.values())
        part = tf * (k1 + 1) / (tf + k1) if bm25 else math.log1p(tf) / math.log(2.0)
        reference += weight * idf * part
        attainable += weight * idf
    return reference, attainable * (k1 + 1 if bm25 else 1.0)


def ceiling_slope(index: BaseSparseIndex, units: Sequence[QueryUnit], norm: float, knee: float = ALIGN_KNEE, *,
                  attainable: float | None = None) -> float:
    """How much a translated route's scores are bent above ``knee`` so that its ceiling is an untranslated query's
    (BM25; the merge ``aligned``). After the division by the reference score ``norm``, an own route reaches at most
    ``k1 + 1`` (one occurrence of each term scores 1, many occurrences approach ``k1 + 1``). A translated route
    reaches ``C = attainable / norm``, more (3.5 at the median of the real titles): its reference holds each unit's
    best translation with its probability ``p < 1`` as expected tf, and a row repeating several translations of a
    generic word (Verfahren: method, process, procedure) sums them. The part of a score above ``knee`` is multiplied
    by ``(k1 + 1 - knee) / (C - knee)``, so that the route's ceiling is ``k1 + 1``; scores up to ``knee`` and the
    order within the route are unchanged. ``knee`` 1 bends everything above one occurrence; 1.5 (the default) keeps
    the scores of a translation that matches the query's every unit a few times, which a document reached only
    through translation needs against own-language documents sharing the query's generic words (docs/RESULTS.md,
    "The route merge and own-language documents"). Returns 1 (no bend) when the route's ceiling is not above
    ``k1 + 1`` or the scoring is tf-idf (no ceiling). ``attainable``: the route's :func:`attainable_score` when
    already known."""
    if index.scoring != "bm25" or norm <= 0:
        return 1.0
    ceiling = (attainable_score(index, units) if attainable is None else attainable) / norm
    top = index.k1 + 1.0
    return (top - knee) / (ceiling - knee) if ceiling > top + 1e-9 and knee < top else 1.0


def reduce_terms(counts: Mapping[str, int], idf: Mapping[str, float], max_terms: int) -> dict[str, int]:
    """Keep the ``max_terms`` terms of highest ``count * idf`` (ties: first occurrence), in query order."""
    if max_terms <= 0 or len(counts) <= max_terms:
        return dict(counts)
    keys = list(counts)
    order = sorted(range(len(keys)), key=lambda i: (-counts[keys[i]] * idf.get(keys[i], 0.0), i))
    return {keys[i]: counts[keys[i]] for i in sorted(order[:max_terms])}


class FirstStage:
    """Loads an index folder and runs sparse searches (``FirstStage.load(dir).search(query)``)."""

    def __init__(
        self,
        meta: IndexMeta,
        docs: DocStore,
        indexes: Mapping[str, BaseSparseIndex],
        tables: Mapping[str, TranslationTable] | Mapping[tuple[str, str], TranslationTable],
        *,
        max_query_terms: int = DEFAULT_MAX_QUERY_TERMS,
        analyzers: Mapping[str, Analyzer] | None = None,
        combine: str = DEFAULT_COMBINE,
        compound_parts: int = PARTS_MAX_TERMS,
        knee: float = ALIGN_KNEE,
    ) -> None:
        if combine not in COMBINES:
            raise ValueError(f"unknown route combination {combine!r}; valid: {', '.join(COMBINES)}")
        self.meta = meta
        self.resources = IndexResources(docs, indexes, tables, analyzers=analyzers, compound_parts=compound_parts)
        self.docs = docs
        self.indexes = self.resources.indexes
        self.pair_tables = self.resources.pair_tables
        self.tables = self.resources.tables  # into English, by source
        self.analyzers = self.resources.analyzers
        self.combine = combine
        self.knee = knee  # the aligned merge's (ceiling_slope)
        self.max_query_terms = max_query_terms
        self._accumulators = AccumulatorPool(len(docs))  # the queries' score arrays, kept between queries

    @property
    def compound_parts(self) -> int:
        """Translate the parts of compounds a table does not know in queries of at most this many terms."""
        return self.resources.compound_parts

    def analyzer(self, lang: str) -> Analyzer:
        """The analyzer of ``lang`` this index was built with."""
        return self.resources.analyzer(lang)

    @classmethod
    def load(
        cls,
        index_dir: str | Path,
        *,
        verify: bool = True,
        mmap: bool = True,
        max_query_terms: int = DEFAULT_MAX_QUERY_TERMS,
    ) -> FirstStage:
        """Open (and with ``verify`` checksum) an index folder built by ``priorart build``."""
        return cls.from_folder(IndexFolder.open(index_dir, verify=verify), mmap=mmap, max_query_terms=max_query_terms)

    @classmethod
    def from_folder(
        cls,
        folder: IndexFolder,
        docs: DocStore | None = None,
        *,
        mmap: bool = True,
        max_query_terms: int = DEFAULT_MAX_QUERY_TERMS,
        stats: Mapping[str, CollectionStats] | None = None,
        indexes: Mapping[str, BaseSparseIndex] | None = None,
    ) -> FirstStage:
        """The first stage of an opened index folder (``docs``: its doc store when already open; ``indexes``: its
        sparse index per language when already open, the registry's ``bm25`` component); ``stats``: the collection
        statistics per language to weight with (a shard's global ones, service/shards.py)."""
        docs = docs if docs is not None else DocStore.of_folder(folder)
        if indexes is None:
            indexes = {lang: open_sparse(folder, lang, mmap, (stats or {}).get(lang))
                       for lang in folder.settings.index_langs}
        # the index-level parts (service/index/parts.py; a reload reuses unchanged files' objects)
        tables = {(t.src, t.tgt): t for t in open_part("translation", folder)}
        return cls(folder.meta, docs, indexes, tables, max_query_terms=max_query_terms,
                   analyzers=open_part("analysis", folder))

    def _expansion(self, fb: Feedback, lang: str, units: Sequence[QueryUnit],
                   counts: Mapping[str, float]) -> list[QueryUnit]:
        """Rocchio expansion units of one route (see service/retrieval/feedback.py); recorded on ``fb.added``."""
        if lang not in fb.added:
            analyzer, index = self.analyzer(lang), self.indexes[lang]

            def vectors(rows: Sequence[int]) -> list[dict[str, float]]:
                out = []
                for row in rows:
                    text = self.docs.get_row(row).text(lang)
                    if text.strip():
                        out.append(term_vector(analyzer(text)))
                return out

            rel, non = vectors(fb.relevant), vectors(fb.nonrelevant)
            if fb.relevant and not rel:
                fb.notes.append(f"no marked relevant document has {lang} text: no {lang} terms were added")
            searched = {t for mapping, _ in units for t in mapping}
            fb.added[lang] = expansion_terms(centroid(rel, non, beta=fb.beta, gamma=fb.gamma),
                                             lambda t: index.unit_idf({t: 1.0}), searched, n=fb.terms,
                                             scale=max(sum(counts.values()), 1.0),
                                             cap=max(counts.values(), default=1.0))
        return [({t: 1.0}, w) for t, w in fb.added[lang].items()]

    # ------------------------------------------------------------------ search

    def search(
        self,
        query: str,
        *,
        lang: str | None = None,
        k: int = 10,
        depth: int | None = None,
        codes: Sequence[str] = (),
        code_level: str = "subclass",
        before: date | None = None,
        translate: bool | str = True,
        max_query_terms: int | None = None,
        query_form: str = "text",
        use_doc_codes: bool = False,
        explain: bool = True,
        pseudo_feedback: int = 0,
        priority_cutoff: bool = True,
    ) -> FirstStageResult:
        """Search the index; returns ``depth`` (or ``k`` when no depth) hits, best first.

        ``query`` is text or a publication number of a document in the index (then its text is the
        query and the document is excluded; ``use_doc_codes`` adds its codes to ``codes``).
        ``translate``: True (the index's table for the query language), False (untranslated terms),
        or a table name of the index (``"de-en"``) or a JSON file path (offline experiments; an API
        should not pass user-supplied paths).
        ``max_query_terms``: None = default (100, or 10/100 for ``query_form`` abstract/claims),
        0 = no reduction. ``codes`` keeps documents sharing a code at ``code_level``; ``before``
        keeps documents published strictly before that date. ``explain``: list each hit's matched terms.
        ``pseudo_feedback``: take the top this many documents as relevant and search again with the Rocchio expansion
        of every route (pseudo-relevance feedback, :meth:`run_pseudo_feedback`; 0: none). ``priority_cutoff``: a
        publication number without ``before`` searches what was published before its priority date (as /search).
        """
        q = Query(text=query, lang=lang, codes=list(codes), code_level=code_level if codes or use_doc_codes else None,
                  before=before, k=k, depth=depth if depth is not None else k, translate=translate,
                  query_form=query_form, use_doc_codes=use_doc_codes, max_query_terms=max_query_terms,
                  explain=explain, priority_cutoff=priority_cutoff)
        if code_level not in CODE_LEVELS:
            raise QueryError(f"unknown code level {code_level!r}; valid: {', '.join(CODE_LEVELS)}")
        resolve(q, self.docs, self.resources)
        return self.run_pseudo_feedback(q, pseudo_feedback) if pseudo_feedback > 0 else self.run(q)

    def run_pseudo_feedback(self, query: Query, docs: int, *, skip: Sequence[int] = ()) -> FirstStageResult:
        """Pseudo-relevance feedback (RM3-like, on every route): the query is searched, its top ``docs`` documents
        (rows in ``skip`` passed over) are taken as relevant (:class:`Feedback`, the terms each route's language adds:
        service/retrieval/feedback.py) and it is searched again with the expansion. The second result carries the
        terms added (``query.feedback.added``); a query without hits is returned as it is."""
        first = self.run(query)
        if not len(first.rows):
            return first
        marked = query.feedback or Feedback(relevant=[])  # an analyst's marks stay; the top documents join them
        top = [r for r in (int(x) for x in first.rows) if r not in skip][:docs]
        top = [r for r in top if r not in marked.nonrelevant]
        query.feedback = Feedback(relevant=list(dict.fromkeys([*marked.relevant, *top])),
                                  nonrelevant=list(marked.nonrelevant), terms=marked.terms, beta=marked.beta,
                                  gamma=marked.gamma)
        return self.run(query)

    def run(self, query: Query) -> FirstStageResult:
        """Search with a resolved query (:func:`service.query.resolve`): its top ``query.depth`` hits."""
        r = query.r
        n = query.depth
        if query.k < 1 or n < 1:
            raise QueryError(f"k and depth must be >= 1 (k={query.k}, depth={n})")
        notes: list[str] = []
        lang, text, translate = r.lang, r.text, query.translate
        max_query_terms = query.max_query_terms
        if max_query_terms is None:
            max_query_terms = PAPER_TERMS.get(query.query_form, self.max_query_terms)
        if max_query_terms < 0:
            raise QueryError(f"max_query_terms must be >= 0, got {max_query_terms}")

        routes = self.resources.routes(lang, translate, notes)
        counts, groups = self.resources.analysed(text, lang)  # (read-only: the passages read the same)
        n_before = len(counts)
        # the query's units on every route, translated once for the request (the passages and the matched words read
        # them too), unless its terms are reduced here
        shared: Mapping[str, list[tuple[str, QueryUnit]]] | None = None
        if max_query_terms and len(counts) > max_query_terms:
            first = routes[0]
            idx = self.indexes[first.index_lang]
            units = first.units({t: 1 for t in counts})
            idf = {t: idx.unit_idf(m) for t, (m, _) in zip(counts, units, strict=True)}
            counts = reduce_terms(counts, idf, max_query_terms)
        elif isinstance(translate, bool):
            shared = self.resources.query_units(text, lang, translate=translate)

        mask, filters = r.mask, dict(r.filters)
        single = len(routes) == 1
        # each route's scores in an accumulator of the pool (the rows a route reaches, no array of every row per
        # query), and with several routes one more that merges them on one scale
        accs = self._accumulators.take(len(routes) + (0 if single else 1))
        try:
            per_route: list[tuple[Route, list[QueryUnit]]] = []
            infos: list[RouteInfo] = []
            rows = np.zeros(0, dtype=np.int64)
            for route, acc in zip(routes, accs, strict=False):
                units = ([unit for _, unit in shared[route.index_lang]] if shared is not None
                         else route.units(counts, groups, parts=len(counts) <= self.compound_parts))
                if query.feedback is not None and not query.feedback.empty:
                    units = units + self._expansion(query.feedback, route.index_lang, units, counts)
                index = self.indexes[route.index_lang]
                # candidates: rows with a non-zero score (rows without any query term score exactly 0; so does
                # the rare row whose only terms have idf 0) that the mask allows
                norm, slope = 0.0, 1.0
                n_matched: int | None
                sat, scaled = self.combine == "saturated", self.combine == "scaled"
                if single:  # one route: its top rows (the matched rows counted when the query is explained)
                    rows, final, n_matched = index.search(units, acc, n, mask, count=query.explain, saturate=sat,
                                                          scale_tf=scaled)
                    best = float(final[0]) if len(rows) else 0.0
                else:
                    index.accumulate(units, acc, saturate=sat, scale_tf=scaled)
                    n_matched, best = acc.matched_max(mask)
                    if self.combine == "weight":
                        norm = attainable_score(index, units)
                    elif self.combine == "aligned" and route.kind != "mono":  # (an own route's ceiling is k1 + 1)
                        norm, attainable = route_norms(index, units)
                        slope = ceiling_slope(index, units, norm, self.knee, attainable=attainable)
                    elif self.combine in ("reference", "saturated", "scaled", "aligned"):
                        norm = reference_score(index, units, scale_tf=scaled)
                    else:
                        norm = best
                per_route.append((route, units))
                infos.append(RouteInfo(route.name, route.index_lang, route.kind, route.table_name, n_matched, best,
                                       norm, slope))
            if single:
                won = np.zeros(len(rows), dtype=np.int64)
                route_scores = {routes[0].name: final.copy()}
                combine = "raw"
            else:
                merged = accs[-1]
                for i, rinfo in enumerate(infos):
                    if rinfo.norm > 0 and rinfo.n_matched:
                        merged.merge(accs[i], mask, rinfo.norm, i, rinfo.slope, self.knee)
                rows = merged.top_k(n, nonzero=False)  # every row a route matched, even at 0 after the merge
                final = merged.scores[rows]
                won = np.zeros(0, dtype=np.int64)
                if len(rows):
                    assert merged.winner is not None  # rows come from the merged routes only
                    won = merged.winner[rows].astype(np.int64)
                # per route, its raw score of each hit (NaN where the route did not match it or the filters excluded it)
                route_scores = {}
                for route, acc in zip(routes, accs, strict=False):
                    raw = acc.scores[rows]
                    allowed = raw != 0 if mask is None else (raw != 0) & mask[rows]
                    route_scores[route.name] = np.where(allowed, raw, np.nan)
                combine = {"weight": "query-weight", "reference": "reference", "max": "max-normalised",
                           "saturated": "reference, translations saturated",
                           "scaled": "reference, translated tf scaled to its best translation",
                           "aligned": "aligned"}[self.combine]
        finally:
            self._accumulators.give(accs)

        # the matched terms are looked up for the rows that are shown, once they are known (the pipeline's explain
        # step; FirstStageResult.hits offline): what each route searched
        route_terms = [(route.index_lang, [t for m, _ in units for t in m]) for route, units in per_route]
        if not counts:
            notes.append("the query has no index terms after analysis (only stop words or punctuation)")
        translation: str | None = None  # the first route's table
        for route in routes:
            if route.table_name:
                translation = route.table_name
                break
        info = SearchInfo(
            lang=lang,
            lang_detected=r.lang_detected,
            translation=translation,
            routes=infos,
            query_terms=list(counts),
            n_terms_before_reduction=n_before,
            filters=filters,
            query_doc=r.query_doc,
            combine=combine,
            notes=notes,
        )
        return FirstStageResult(self.docs.ids, rows, final, info, route_names=[r.name for r in routes],
                                route_scores=route_scores, winner=won, route_terms=route_terms,
                                resources=self.resources, explain=query.explain)


def open_sparse(folder: IndexFolder, lang: str, mmap: bool, stats: CollectionStats | None = None, *,
                prefault: bool = True) -> BaseSparseIndex:
    """The sparse index of ``lang`` at the folder's generation: the one segment of a compacted generation mapped as a
    build's (its own statistics are the live ones), else the segments searched where they lie with the generation's
    statistics (:class:`SparseGeneration`; nothing copied); weighted with ``stats`` when given (the global
    statistics of a shard: the segments joined and weighted again). ``prefault``: read the pages of a memory-mapped
    index in at load (a segment's once per process: a reload reads only the new segment's)."""
    whole = folder.one_build
    if whole is not None:  # the object a later generation of this segment reuses (a reload after the first add)
        index = _segment_part(whole.path(Layout.bm25(lang)), mmap)
        if mmap and prefault:
            index.prefault()
        return index if stats is None else index.reweighted(stats)
    parts = [_segment_part(s.folder.path(Layout.bm25(lang)), mmap) for s in folder.segments]
    deleted = [s.deleted for s in folder.segments]
    if stats is not None:
        return SparseIndex.join(parts, deleted).reweighted(stats)
    return SparseGeneration(parts, deleted, prefault=mmap and prefault)


def _open_part(vocab: Path) -> SparseIndex:
    return SparseIndex.load(vocab.parent, prefault=False)


def _segment_part(directory: Path, mmap: bool) -> SparseIndex:
    """A segment's sparse index, to be searched in place or joined: memory-mapped, the one this process opened already
    while its files are unchanged (service/filecache.py; a reload after an add opens only the new segment's)."""
    if not mmap:
        return SparseIndex.load(directory, mmap=False, prefault=False)
    return load_shared(directory / "vocab.json", _open_part, *file_identity(directory / "params.json"))


def collection_stats(folder: IndexFolder, lang: str) -> CollectionStats:
    """The collection statistics of ``lang`` at the folder's generation (its live documents; counted, not
    searched: its postings are not read in)."""
    return CollectionStats.of(open_sparse(folder, lang, True, prefault=False))
