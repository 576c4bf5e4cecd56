"""Sparse first stage: query analysis -> reduction -> routes per language (incl. PSQ) -> filters -> top-k.

Routes. An index holds one sparse index per indexed language, rows aligned on the doc store. A query
in language ``L`` is searched:

- in the ``L`` index when there is one (``mono``);
- when ``L != en`` and there is an English index: with ``translate=True`` by PSQ through
  ``translation/L-en.json`` (``psq``); with ``translate=False`` as the raw analysed ``L`` terms
  (``raw``, the "no translation" baseline); with ``translate="<name or path>"`` by PSQ through that
  table. With ``translate=True`` and no table for ``L``, the raw route is used only when ``L`` has
  no index of its own (a note says so).

Combination. One route: its raw scores. Several: each route's scores are divided by that route's
best score among the allowed documents (a route whose best score is not positive contributes 0), and a
document gets the maximum over routes.

Query reduction. Long queries keep their ``max_query_terms`` terms of highest tf-idf (query tf times
idf in the first route's index; default 100, the passage paper's claims setting; 0 = keep all).
For a patent-number query ``query_form="abstract"`` (10 terms) and ``"claims"`` (100 terms) give the
paper's two query forms (Mahdabi et al. 2011), ``"text"`` uses title, abstract and claims.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np

from service.codes import CODE_LEVELS
from service.index.folder import IndexFolder, IndexFormatError, IndexMeta, Layout
from service.index.store import DocStore
from service.query import Query, QueryError, resolve
from service.retrieval.sparse import QueryUnit, SparseIndex, top_k
from service.retrieval.translate import TranslationTable
from service.text.analysis import get_analyzer

log = logging.getLogger(__name__)

DEFAULT_MAX_QUERY_TERMS = 100
PAPER_TERMS = {"abstract": 10, "claims": 100}

@dataclass(slots=True)
class Hit:
    """One retrieved document. ``route_scores``: raw score per route that matched it."""

    doc_id: str
    row: int
    score: float
    rank: int
    matched_terms: list[str]
    route_scores: dict[str, float]


@dataclass(frozen=True)
class RouteInfo:
    name: str  # e.g. "de", "en:psq", "en:raw"
    index_lang: str
    kind: str  # mono | psq | raw
    table: str | None
    n_matched: int
    max_score: float


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class FirstStageResult:
    hits: list[Hit]
    info: SearchInfo

    def to_dict(self) -> dict[str, Any]:
        return {"hits": [asdict(h) for h in self.hits], "info": asdict(self.info)}


@dataclass
class _Route:
    name: str
    index_lang: str
    kind: str
    table: TranslationTable | None = None
    table_name: str | None = None

    def units(self, counts: Mapping[str, int]) -> list[QueryUnit]:
        if self.table is None:
            return [({t: 1.0}, float(c)) for t, c in counts.items()]
        return [(self.table.translate_term(t), float(c)) for t, c in counts.items()]


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
        indexes: Mapping[str, SparseIndex],
        tables: Mapping[str, TranslationTable],
        *,
        max_query_terms: int = DEFAULT_MAX_QUERY_TERMS,
    ) -> None:
        self.meta = meta
        self.docs = docs
        self.indexes = dict(indexes)
        self.tables = dict(tables)  # by source language
        self._file_tables: dict[str, TranslationTable] = {}  # tables given as a file path at query time
        self.max_query_terms = max_query_terms
        for lang, idx in self.indexes.items():
            if idx.n_rows != len(docs):
                raise IndexFormatError(f"bm25/{lang} has {idx.n_rows} rows, the doc store {len(docs)}")

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
    ) -> FirstStage:
        """The first stage of an opened index folder (``docs``: its doc store when already open)."""
        docs = docs if docs is not None else DocStore.load(folder.root)
        indexes = {
            lang: SparseIndex.load(folder.path(Layout.bm25(lang)), mmap=mmap) for lang in folder.settings["index_langs"]
        }
        tables: dict[str, TranslationTable] = {}
        for entry in folder.components.get("translation", []):
            try:
                table = TranslationTable.load(folder.path(entry["file"]))
            except (KeyError, TypeError, ValueError) as exc:
                raise IndexFormatError(f"{folder.path(Layout.META)}: bad translation entry {entry!r}: {exc}") from exc
            tables[table.src] = table
        return cls(folder.meta, docs, indexes, tables, max_query_terms=max_query_terms)

    # ------------------------------------------------------------------ helpers

    def _table(self, translate: bool | str, lang: str) -> tuple[TranslationTable | None, str | None]:
        if translate is False or lang == "en":
            return None, None
        if translate is True:
            table = self.tables.get(lang)
            return table, (f"{lang}-en" if table else None)
        name = str(translate)
        if name.removesuffix(".json") in {f"{src}-en" for src in self.tables}:
            src = name.removesuffix(".json").split("-")[0]
            table = self.tables[src]
        else:
            path = Path(name)
            if not path.is_file():
                known = ", ".join(f"{s}-en" for s in self.tables) or "none"
                raise QueryError(f"translation table {name!r} is neither a table of this index ({known}) nor a file")
            cached = self._file_tables.get(name)
            if cached is None:
                try:
                    cached = TranslationTable.load(path)
                except ValueError as exc:
                    raise QueryError(str(exc)) from exc
                if len(self._file_tables) >= 4:  # a few experiment tables, not an unbounded cache
                    self._file_tables.pop(next(iter(self._file_tables)))
                self._file_tables[name] = cached
            table = cached
        if table.src != lang or table.tgt != "en":
            raise QueryError(f"translation table {name!r} translates {table.src}->{table.tgt}, the query is {lang}")
        return table, name

    def _routes(self, lang: str, translate: bool | str, notes: list[str]) -> list[_Route]:
        routes: list[_Route] = []
        if lang in self.indexes:
            routes.append(_Route(lang, lang, "mono"))
        if lang != "en" and "en" in self.indexes:
            table, name = self._table(translate, lang)
            if table is not None:
                routes.append(_Route("en:psq", "en", "psq", table, name))
            elif translate is False or not routes:
                if translate is not False:
                    notes.append(
                        f"no {lang}-en translation table in this index: untranslated {lang} terms "
                        "were searched in the English index"
                    )
                routes.append(_Route("en:raw", "en", "raw"))
            else:
                notes.append(
                    f"no {lang}-en translation table in this index: English documents were not searched "
                    "(build with --translation, or pass translate=False for untranslated terms)"
                )
        if not routes:
            raise QueryError(
                f"the index has no {lang} index and no English index to translate into "
                f"(indexed: {', '.join(self.indexes)})"
            )
        return routes

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
    ) -> FirstStageResult:
        """Search the index; returns ``depth`` (or ``k`` when no depth) hits, best first.

        ``query`` is text or a publication number of a document in the index (then its text is the
        query and the document is excluded; ``use_doc_codes`` adds its codes to ``codes``).
        ``translate``: True (the index's table for the query language), False (untranslated terms),
        or a table name of the index (``"de-en"``) or a JSON file path (offline experiments; an API
        should not pass user-supplied paths).
        ``max_query_terms``: None = default (100, or 10/100 for ``query_form`` abstract/claims),
        0 = no reduction. ``codes`` keeps documents sharing a code at ``code_level``; ``before``
        keeps documents published strictly before that date.
        """
        q = Query(text=query, lang=lang, codes=list(codes), code_level=code_level if codes or use_doc_codes else None,
                  before=before, k=k, depth=depth if depth is not None else k, translate=translate,
                  query_form=query_form, use_doc_codes=use_doc_codes, max_query_terms=max_query_terms)
        if code_level not in CODE_LEVELS:
            raise QueryError(f"unknown code level {code_level!r}; valid: {', '.join(CODE_LEVELS)}")
        resolve(q, self.docs)
        return self.run(q)

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

        routes = self._routes(lang, translate, notes)
        terms = get_analyzer(lang)(text)
        counts: dict[str, int] = dict(Counter(terms))
        n_before = len(counts)
        if max_query_terms and len(counts) > max_query_terms:
            first = routes[0]
            idx = self.indexes[first.index_lang]
            units = first.units({t: 1 for t in counts})
            idf = {t: idx.unit_idf(m) for t, (m, _) in zip(counts, units, strict=True)}
            counts = reduce_terms(counts, idf, max_query_terms)

        mask, filters = r.mask, dict(r.filters)

        # score every route
        per_route: list[tuple[_Route, np.ndarray, np.ndarray, list[QueryUnit]]] = []
        infos: list[RouteInfo] = []
        for route in routes:
            units = route.units(counts)
            scores = self.indexes[route.index_lang].score(units)
            # candidates: rows with a non-zero score (rows without any query term score exactly 0; so does
            # the rare row whose only terms have idf 0)
            matched = scores != 0
            allowed = matched if mask is None else matched & mask
            best = float(np.max(scores, where=allowed, initial=-np.inf)) if allowed.any() else 0.0
            per_route.append((route, scores, allowed, units))
            infos.append(
                RouteInfo(route.name, route.index_lang, route.kind, route.table_name, int(allowed.sum()), best)
            )
        if len(per_route) == 1:
            final, allowed_any = per_route[0][1], per_route[0][2]
            combine = "raw"
        else:
            final = np.zeros(len(self.docs))
            allowed_any = np.zeros(len(self.docs), dtype=bool)
            for (_, scores, allowed, _), rinfo in zip(per_route, infos, strict=True):
                norm = np.where(allowed, scores / rinfo.max_score if rinfo.max_score > 0 else 0.0, 0.0)
                np.maximum(final, norm, out=final)
                allowed_any |= allowed
            combine = "max-normalised"
        rows = top_k(final, n, allowed_any) if allowed_any.any() else np.zeros(0, dtype=np.int64)

        # explanations (plain Python lists: per-element numpy scalar access is slow at depth 1000)
        row_list = rows.tolist()
        matched_terms: list[list[str]] = [[] for _ in row_list]
        route_scores: list[dict[str, float]] = [{} for _ in row_list]
        for route, scores, allowed, units in per_route:
            targets = [t for m, _ in units for t in m]
            per_hit = self.indexes[route.index_lang].matched_terms(targets, rows)
            ok, raw = allowed[rows].tolist(), scores[rows].tolist()
            for i in range(len(row_list)):
                if ok[i]:
                    route_scores[i][route.name] = raw[i]
                mine = matched_terms[i]
                for t in per_hit[i]:
                    if t not in mine:
                        mine.append(t)
        ids = self.docs.ids
        hits = [
            Hit(ids[r], r, score, i + 1, matched_terms[i], route_scores[i])
            for i, (r, score) in enumerate(zip(row_list, final[rows].tolist(), strict=True))
        ]
        if not counts:
            notes.append("the query has no index terms after analysis (only stop words or punctuation)")
        used_tables = [r.table_name for r in routes if r.table_name]
        info = SearchInfo(
            lang=lang,
            lang_detected=r.lang_detected,
            translation=used_tables[0] if used_tables else None,
            routes=infos,
            query_terms=list(counts),
            n_terms_before_reduction=n_before,
            filters=filters,
            query_doc=r.query_doc,
            combine=combine,
            notes=notes,
        )
        return FirstStageResult(hits, info)
