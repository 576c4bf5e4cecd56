"""What the stages of one index share: its doc store, sparse indexes, analysis and translation tables, and the
translation routes a query in each language takes (:class:`IndexResources`).

Made once per opened index (the first stage makes it; :func:`service.pipeline.compose` gives the pipeline's to
every stage and to the engine that needs it: the passage ranker reads the query's image in every language through
:meth:`IndexResources.query_units`, the first stage searches the same units).

Routes. A query in language ``L`` is searched:

- in the ``L`` index when there is one (``mono``, route name ``L``);
- with ``translate=True``, in every other indexed language ``X`` for which the index has a table
  ``translation/L-X.json`` (``psq``, route name ``X:psq``): ``de``/``fr`` -> ``en``, ``en`` -> ``de``/``fr``
  (so an English query reaches German- and French-only documents), ``de`` <-> ``fr`` (``L-en`` and ``en-X``
  composed at query time, mixed half and half with the index's own ``L-X`` table when it has one: the route's
  ``table`` then says ``L-X + via en``, or ``L-X via en`` without one);
- with ``translate=False`` and ``L != en``: the raw analysed ``L`` terms in the English index (``raw``,
  the "no translation" baseline); with ``translate="<name or path>"``: by PSQ through that one table
  (offline experiments). With ``translate=True`` and no table into English, the raw route is used only
  when ``L`` has no index of its own (a note says so).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

import numpy as np

from service.index.folder import IndexFormatError
from service.index.store import DocStore
from service.passages.highlight import query_words
from service.query import QueryError
from service.retrieval.sparse import BaseSparseIndex, QueryUnit
from service.text.analysis import SUPPORTED_LANGS, Analyzer, get_analyzer
from service.text.translation import PIVOT_LANG, MixedTable, PivotTable, TranslationTable

MIX_WEIGHT = 0.5
"""The weight of a pair's own table (de-fr, fr-de) beside its composition through English (1 - MIX_WEIGHT)."""
PARTS_MAX_TERMS = 20
"""Translate the parts of compounds a table does not know in queries of at most this many terms."""
QUERY_MEMO = 16
"""The last queries whose analysis and units :class:`IndexResources` keeps (one request's stages read the same
query's: analysed and translated once)."""

K = TypeVar("K")
V = TypeVar("V")


class _Memo(Generic[K, V]):
    """The last ``size`` values put, by key (the oldest dropped first), safe across a server's threads."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: dict[K, V] = {}
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            return self._items.get(key)

    def put(self, key: K, value: V) -> None:
        with self._lock:
            self._items.pop(key, None)
            while len(self._items) >= self.size:
                del self._items[next(iter(self._items))]
            self._items[key] = value


@dataclass
class Route:
    """One route of a query: the index it searches and, translated, the table it translates with."""

    name: str
    index_lang: str
    kind: str
    table: TranslationTable | None = None
    table_name: str | None = None

    def units(
        self, counts: Mapping[str, int], groups: Sequence[tuple[str, tuple[str, ...]]] = (), *, parts: bool = True
    ) -> list[QueryUnit]:
        """Query units of this route. With compound ``groups`` (word term, its parts' terms) a PSQ route
        translates a compound the table knows as a whole and drops its parts; one the table does not know is
        translated through its parts, which share the word's weight (the untranslatable whole is dropped).
        ``parts=False`` never translates parts (compounds split on the index side only)."""
        return [unit for _, unit in self.sourced_units(counts, groups, parts=parts)]

    def sourced_units(
        self, counts: Mapping[str, int], groups: Sequence[tuple[str, tuple[str, ...]]] = (), *, parts: bool = True
    ) -> list[tuple[str, QueryUnit]]:
        """:meth:`units`, each with the query term it renders."""
        if self.table is None:
            return [(t, ({t: 1.0}, float(c))) for t, c in counts.items()]
        weight: dict[str, float] = {t: float(c) for t, c in counts.items()}
        for whole, pieces in groups:
            if not pieces:
                continue
            if whole in self.table or not parts:
                for p in pieces:  # a known compound translates as a whole
                    if p in weight:
                        weight[p] -= 1.0
            else:  # an unknown one through its parts, which share the word's weight
                if whole in weight:
                    weight[whole] -= 1.0
                for p in pieces:
                    if p in weight:
                        weight[p] -= 1.0 - 1.0 / len(pieces)
        return [(t, (self.table.translate_term(t), w)) for t, w in weight.items() if w > 1e-9]


class IndexResources:
    """An opened index's doc store, sparse index per language, analyzers and translation tables (by ``(source,
    target)``, de <-> fr composed through English where the index has no direct table), and the routes."""

    def __init__(
        self,
        docs: DocStore,
        indexes: Mapping[str, BaseSparseIndex],
        tables: Mapping[str, TranslationTable] | Mapping[tuple[str, str], TranslationTable],
        *,
        analyzers: Mapping[str, Analyzer] | None = None,
        compound_parts: int = PARTS_MAX_TERMS,
    ) -> None:
        self.docs = docs
        self.indexes = dict(indexes)
        # tables by (source, target); a mapping by source language alone means tables into English
        self.pair_tables: dict[tuple[str, str], TranslationTable] = {
            (key if isinstance(key, tuple) else (key, "en")): t for key, t in tables.items()
        }
        # de <-> fr through English, composed at query time, and mixed with the pair's own table where the index has
        # one (MIX_WEIGHT each): either alone ranks the twin passage lower (docs/RESULTS.md, passages across languages)
        for src in SUPPORTED_LANGS:
            for tgt in self.indexes:
                legs = self.pair_tables.get((src, PIVOT_LANG)), self.pair_tables.get((PIVOT_LANG, tgt))
                if PIVOT_LANG in (src, tgt) or src == tgt or legs[0] is None or legs[1] is None:
                    continue
                composed = PivotTable(legs[0], legs[1])
                own = self.pair_tables.get((src, tgt))
                self.pair_tables[(src, tgt)] = composed if own is None else MixedTable(own, composed, MIX_WEIGHT)
        self.tables = {src: t for (src, tgt), t in self.pair_tables.items() if tgt == "en"}  # into English, by source
        self.analyzers = dict(analyzers or {})  # the index's analyzers (compound splitting); others: default
        # translate the parts of compounds a table does not know in queries of at most this many terms
        self.compound_parts = compound_parts
        self._file_tables: dict[str, TranslationTable] = {}  # tables given as a file path at query time
        for lang, idx in self.indexes.items():
            if idx.n_rows != len(docs):
                raise IndexFormatError(f"bm25/{lang} has {idx.n_rows} rows, the doc store {len(docs)}")
        # the routes (and their notes) of a query language and translate=True/False: the same for every query
        self._route_cache: dict[tuple[str, bool], tuple[list[Route], tuple[str, ...]]] = {}
        # the last queries' analysis and units: the stages of one request (the first stage, the passages, the matched
        # words) read the same query's
        # (per query: its terms counted, its compound groups, its terms in order)
        self._analysis_memo: _Memo[tuple[str, str], tuple[dict[str, int], list[tuple[str, tuple[str, ...]]],
                                                          list[str]]] = _Memo(QUERY_MEMO)
        self._units_memo: _Memo[tuple[str, str, bool | str], dict[str, list[tuple[str, QueryUnit]]]] = \
            _Memo(QUERY_MEMO)
        self._words_memo: _Memo[tuple[str, str], dict[str, list[str]]] = _Memo(QUERY_MEMO)

    def matched_terms(self, route_terms: Sequence[tuple[str, Sequence[str]]], rows: Sequence[int]) -> list[list[str]]:
        """Each row's terms among a search's ``route_terms`` (per route, the index language and its target terms)
        that occur in it: distinct, in query order, route after route."""
        arr = np.asarray(rows, dtype=np.int64)
        if len(route_terms) == 1:
            lang, terms = route_terms[0]
            return self.indexes[lang].matched_terms(list(terms), arr)
        out: list[list[str]] = [[] for _ in range(len(arr))]
        for lang, terms in route_terms:
            per_hit = self.indexes[lang].matched_terms(list(terms), arr)
            for mine, theirs in zip(out, per_hit, strict=True):
                mine.extend(t for t in theirs if t not in mine)
        return out

    def term_words(self, text: str, lang: str, *, translate: bool = True) -> dict[str, list[str]]:
        """Each index term a query reaches (its own terms, and their translations on its routes: :meth:`query_units`)
        -> the query's words, as written, it renders (a compound's parts: the compound; a word written in several
        cases: its first spelling), in query order: what a document's matched terms (:meth:`matched_terms`, stems) were
        in the analyst's words. A term two languages share lists the words of both."""
        first: dict[str, str] = {}  # a word's first spelling in the query, by its case-folded form
        words = {term: list(dict.fromkeys(first.setdefault(w.casefold(), w) for w in ws))
                 for term, ws in self.words(text, lang).items()}
        out: dict[str, list[str]] = {}
        for units in self.query_units(text, lang, translate=translate).values():
            for src, (mapping, _) in units:
                for term in mapping:
                    mine = out.setdefault(term, [])
                    mine.extend(w for w in words.get(src, ()) if w not in mine)
        return {term: ws for term, ws in out.items() if ws}

    def analyzer(self, lang: str) -> Analyzer:
        """The analyzer of ``lang`` this index was built with."""
        return self.analyzers.get(lang) or get_analyzer(lang)

    def hops(self, src: str, tgt: str) -> int:
        """How many tables a query in ``src`` goes through to reach text in ``tgt``: 0 in its own language, the
        table's :attr:`~service.text.translation.TranslationTable.hops` (2 for de <-> fr composed through English),
        1 on a route without a table."""
        if src == tgt:
            return 0
        table = self.pair_tables.get((src, tgt))
        return 1 if table is None else table.hops

    def query_units(self, text: str, lang: str, *, translate: bool = True) -> dict[str, list[tuple[str, QueryUnit]]]:
        """The query in every language it reaches, as this index's routes render it (the same units a search
        scores), each unit with the query term it renders: its own terms (the index's analysis: compounds split
        where the index splits them; also when ``lang`` has no sparse index of its own), and per route into
        another language the PSQ translation (or, on a ``raw`` route, the untranslated terms). The passage
        ranker scores each language's text with these (service/passages/)."""
        if lang not in SUPPORTED_LANGS:
            raise QueryError(f"unsupported query language {lang!r}; choose one of {', '.join(SUPPORTED_LANGS)}")
        key = (text, lang, translate)
        if isinstance(translate, bool) and (got := self._units_memo.get(key)) is not None:
            return got
        counts, groups = self.analysed(text, lang)
        parts = len(counts) <= self.compound_parts
        routes = self.routes(lang, translate, [])
        if all(r.index_lang != lang for r in routes):
            routes = [Route(lang, lang, "mono"), *routes]
        units = {r.index_lang: r.sourced_units(counts, groups, parts=parts) for r in routes}
        if isinstance(translate, bool):  # (a table given by name or path is looked up each time)
            self._units_memo.put(key, units)
        return units

    def words(self, text: str, lang: str) -> dict[str, list[str]]:
        """The query's words as written behind each of its index terms
        (:func:`service.passages.highlight.query_words`), for the last :data:`QUERY_MEMO` queries (read-only)."""
        key = (text, lang)
        got = self._words_memo.get(key)
        if got is None:
            got = query_words(text, self.analyzer(lang))
            self._words_memo.put(key, got)
        return got

    def analysed(self, text: str, lang: str) -> tuple[dict[str, int], list[tuple[str, tuple[str, ...]]]]:
        """A query's index terms counted (a compound's parts after it, where the index splits them) and its compound
        groups (word term, its parts' terms; none without a splitter): what the first stage searches and
        :meth:`query_units` renders, analysed once for the last :data:`QUERY_MEMO` queries (read-only)."""
        counts, groups, _ = self._analysis(text, lang)
        return counts, groups

    def terms(self, text: str, lang: str) -> list[str]:
        """A query's index terms in their order (the analyzer's sequence: a compound's parts after it, where the index
        splits them), from the same single analysis as :meth:`analysed` (the passage ranker's word-for-word rule reads
        the order; read-only)."""
        return self._analysis(text, lang)[2]

    def _analysis(self, text: str, lang: str) -> tuple[dict[str, int], list[tuple[str, tuple[str, ...]]], list[str]]:
        key = (text, lang)
        got = self._analysis_memo.get(key)
        if got is None:
            analyzer = self.analyzer(lang)
            groups = analyzer.groups(text) if analyzer.splitter is not None else []
            terms = [t for whole, parts in groups for t in (whole, *parts)] if groups else analyzer(text)
            counts: dict[str, int] = {}  # (a dict loop, not Counter: Counter's type checks cost ~10 us in a cold cache)
            for t in terms:
                counts[t] = counts.get(t, 0) + 1
            got = (counts, groups, terms)
            self._analysis_memo.put(key, got)
        return got

    @staticmethod
    def _table_label(table: TranslationTable) -> str:
        via = next((x.split(":", 1)[1] for x in table.sources if x.startswith("pivot:")), None)
        if via and isinstance(table, MixedTable):
            return f"{table.src}-{table.tgt} + via {via}"
        return f"{table.src}-{table.tgt}" + (f" via {via}" if via else "")

    def _named_table(self, name: str, lang: str) -> TranslationTable:
        """A table given by name (``"de-en"``) or as a JSON file path (offline experiments)."""
        key = tuple(name.removesuffix(".json").split("-", 1))
        if len(key) == 2 and key in self.pair_tables:
            table = self.pair_tables[key]
        else:
            path = Path(name)
            if not path.is_file():
                known = ", ".join(f"{s}-{t}" for s, t in self.pair_tables) or "none"
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
        if table.src != lang or table.tgt not in self.indexes or table.tgt == lang:
            raise QueryError(
                f"translation table {name!r} translates {table.src}->{table.tgt}; the query is {lang} and the "
                f"index holds {', '.join(self.indexes)}"
            )
        return table

    def _table(self, translate: bool | str, lang: str, tgt: str = "en") -> tuple[TranslationTable | None, str | None]:
        if translate is False or lang == tgt:
            return None, None
        if translate is True:
            table = self.pair_tables.get((lang, tgt))
            return table, (self._table_label(table) if table else None)
        table = self._named_table(str(translate), lang)
        return (table, str(translate)) if table.tgt == tgt else (None, None)

    def routes(self, lang: str, translate: bool | str, notes: list[str]) -> list[Route]:
        """The routes of a query in ``lang`` (see the module docstring), their notes appended to ``notes``; made once
        per language and translate=True/False (a table given by name or path is looked up each time)."""
        if isinstance(translate, bool):
            cached = self._route_cache.get((lang, translate))
            if cached is None:
                made: list[str] = []
                cached = self._route_cache[(lang, translate)] = (self._make_routes(lang, translate, made), tuple(made))
            notes.extend(cached[1])
            return cached[0]
        return self._make_routes(lang, translate, notes)

    def _make_routes(self, lang: str, translate: bool | str, notes: list[str]) -> list[Route]:
        routes: list[Route] = []
        if lang in self.indexes:
            routes.append(Route(lang, lang, "mono"))
        if isinstance(translate, str):
            table = self._named_table(translate, lang)
            routes.append(Route(f"{table.tgt}:psq", table.tgt, "psq", table, translate))
            return routes
        for tgt in self.indexes:
            if tgt == lang:
                continue
            found, name = self._table(translate, lang, tgt)
            if found is not None:
                routes.append(Route(f"{tgt}:psq", tgt, "psq", found, name))
            elif tgt != "en":
                if translate is not False:
                    notes.append(
                        f"no {lang}-{tgt} translation table in this index: documents with {tgt} text only were not "
                        "reached (rebuild with `priorart build`, which builds the tables)"
                    )
            elif translate is False or not routes:
                if translate is not False:
                    notes.append(
                        f"no {lang}-en translation table in this index: untranslated {lang} terms "
                        "were searched in the English index"
                    )
                routes.append(Route("en:raw", "en", "raw"))
            else:
                notes.append(
                    f"no {lang}-en translation table in this index: English documents were not searched "
                    "(rebuild with `priorart build`, which builds the tables, or pass translate=False for "
                    "untranslated terms)"
                )
        if not routes:
            raise QueryError(
                f"the index has no {lang} index and no English index to translate into "
                f"(indexed: {', '.join(self.indexes)})"
            )
        return routes


__all__ = ["MIX_WEIGHT", "PARTS_MAX_TERMS", "QUERY_MEMO", "IndexResources", "Route"]
