"""A query as every stage sees it, and its resolution, done once per request.

:class:`Query` is what the request asked for. :func:`resolve` turns it into a :class:`Resolved` query
before any stage runs:

- a publication number of the index (``EP0640886B1``, ``ep 0640886 b1``, ``US 7,861,316``) becomes
  that document's text (title + abstract + claims in the asked language when it has them, else its
  own language) and, when the request gave no codes, the document's codes; the document itself is
  excluded from the results. A number of a known office that is not in the index is an error;
- the language is the one given, else detected from the text;
- a query in the query language (``syntax``; service/querylang): its filter is the ``query`` mask, and the text the
  product ranks the passing documents by is its words that are not negated;
- the filter mask: documents sharing a code with the query's codes at ``code_level`` (when asked),
  published before ``before`` (when given; a publication number's priority date unless ``priority_cutoff`` is
  off), never the query document.

Stages read the resolved fields (``query.resolved.text``, ``.lang``, ``.codes``, ``.mask``) and
write what they noticed into ``query.notes``; nothing else travels between stages.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from typing import Any, Literal, get_args

import numpy as np

from service.codes import CODE_LEVELS, record_codes
from service.corpus.ids import id_shaped, looks_like_pub_id
from service.corpus.record import PatentRecord
from service.index.store import DocStore, UnknownDocumentError
from service.retrieval.feedback import Feedback
from service.schema import Syntax
from service.text.analysis import SUPPORTED_LANGS, detect_language

QUERY_FORMS = ("text", "abstract", "claims")
FORM_FIELDS = {"text": ("title", "abstract", "claims"), "abstract": ("abstract",), "claims": ("claims",)}
DESCRIPTION_WORDS = 300
"""A publication-number query of a record with a description only (an EPO OPS full text) searches with the first
words of its description, as many as a long first claim has: they say what the invention is about (its field and
background), and the first stage keeps at most 100 terms of any query."""


class QueryError(ValueError):
    """A query that cannot run as asked (empty text, unknown number, bad option); the message says what to change.
    ``extra``: fields the API's problem document carries beside the message (a syntax error's ``position``, 0-based,
    and what was ``expected`` there)."""

    def __init__(self, message: str = "", **extra: Any) -> None:
        super().__init__(message)
        self.extra = extra


@dataclass
class Query:
    """A search request as the pipeline sees it."""

    text: str
    lang: str | None = None
    codes: list[str] = field(default_factory=list)
    code_level: str | None = None  # None: codes describe the query but do not filter
    before: date | None = None
    k: int = 10
    depth: int = 1000
    translate: bool | str = True
    weights: dict[str, float] | None = None  # a request's own fusion weights (else the index's)
    fusion: str | None = None  # linear | borda | linlearn (None: the index's default)
    query_form: str = "text"  # for a publication number: text (title+abstract+claims), abstract or claims
    use_doc_codes: bool = False  # a publication-number query filters by its document's codes too
    # a publication-number query without ``before``: only documents published before its priority date (its prior art)
    priority_cutoff: bool = True
    max_query_terms: int | None = None  # first-stage query reduction (None: the default)
    feedback: Feedback | None = None  # marked rows: Rocchio expansion (service/retrieval/feedback.py)
    explain: bool = True  # the shown rows' matched terms are looked up (False: /passages, /search unexplained)
    # score every component that applies, weighed by the fusion or not (Pipeline.features: what fusion learning reads;
    # the evidence stage for a learned ranker that reads the components' scores)
    every_component: bool = False
    # the evidence stage (service/stages/evidence.py): the first so many documents of the fused order ordered by
    # their evidence (0: the fused order), by the learned ranker or their best passage (auto | ranker | passage),
    # with the best passage's weight against the fused score; None: the settings'
    evidence_docs: int | None = None
    evidence_by: str | None = None
    evidence_weight: float | None = None
    # the collapse stage (service/stages/results.py): the first so many family groups shown, each head with its
    # members (0: no grouping, the first k candidates shown)
    collapse: int = 0
    # the query language (service/querylang): auto (the language when the text looks like it), query, text (free
    # text whatever it holds); translations to leave out, by word
    syntax: str = "auto"
    drop_translations: tuple[str, ...] = ()
    # a query that runs again and again (a watch, at every generation): its vector is kept in the vector cache
    # (service/retrieval/vector_cache.py), so the encoder reads it once
    remember_vector: bool = False
    resolved: Resolved | None = None
    notes: list[str] = field(default_factory=list)

    def note(self, message: str) -> None:
        if message not in self.notes:
            self.notes.append(message)

    @property
    def r(self) -> Resolved:
        """The resolved query (raises when :func:`resolve` has not run)."""
        if self.resolved is None:
            raise RuntimeError("query not resolved: call service.query.resolve first")
        return self.resolved


@dataclass(slots=True)
class Resolved:
    """What the query is, decided once: language, text, query document, codes and the filter mask."""

    lang: str
    lang_detected: bool
    text: str
    query_doc: str | None = None  # publication id when the query was a publication number
    query_row: int | None = None
    codes: tuple[str, ...] = ()
    codes_from: Literal["request", "query document"] | None = None
    mask: np.ndarray | None = None  # rows allowed by the filters (None: every row)
    filters: dict[str, Any] = field(default_factory=dict)
    # each filter's own rows ("codes", "before"), and the rows every search leaves out (the query document,
    # deleted rows; None: none): what :meth:`mask_without` recombines to say which filter emptied a search
    filter_masks: dict[str, np.ndarray] = field(default_factory=dict)
    base_mask: np.ndarray | None = None
    language: LanguageQuery | None = None  # a query in the query language

    @property
    def has_codes(self) -> bool:
        return bool(self.codes)

    def allowed(self, n_rows: int) -> np.ndarray:
        """The mask, or all rows allowed."""
        return self.mask if self.mask is not None else np.ones(n_rows, dtype=bool)

    def mask_without(self, *names: str) -> np.ndarray | None:
        """The filter mask without the filters ``names`` (of :attr:`filter_masks`); the query document and deleted
        rows stay out. None: every row."""
        mask = None if self.base_mask is None else self.base_mask.copy()
        for name, m in self.filter_masks.items():
            if name not in names:
                mask = m.copy() if mask is None else mask & m
        return mask


def _number_query(docs: DocStore, text: str, lang: str | None, form: str) -> tuple[PatentRecord, int, str, str]:
    try:
        row = docs.row(text)
    except UnknownDocumentError as exc:
        raise QueryError(f"{exc}; give another number or search with text") from exc
    rec = docs.get_row(row)
    have = [x for x in rec.languages if x in SUPPORTED_LANGS]  # Spanish claims are kept, not searched with
    if lang is not None and lang in have:
        use = lang
    elif rec.lang in have:
        use = str(rec.lang)
    elif have:
        use = have[0]
    else:
        raise QueryError(f"publication {rec.id} has no title, abstract or claims in {', '.join(SUPPORTED_LANGS)} "
                         "to search with")
    fields = FORM_FIELDS[form]
    body = rec.text(use, fields)
    if not body.strip() and form == "text":  # a full text without title, abstract or claims (EPO OPS): its description
        body = " ".join(rec.text(use, ("description",)).split()[:DESCRIPTION_WORDS])
    if not body.strip():
        raise QueryError(f"publication {rec.id} has no {'/'.join(fields)} text in {use}")
    return rec, row, use, body


def _cutoff(rec: PatentRecord) -> tuple[date | None, str | None]:
    """A publication's prior-art cut-off: its earliest priority date, else its filing date, else its publication
    date (None: it has none)."""
    if rec.priority_dates:
        return min(rec.priority_dates), "priority date"
    if rec.application_date is not None:
        return rec.application_date, "filing date"
    if rec.publication_date is not None:
        return rec.publication_date, "publication date"
    return None, None


def is_number_query(docs: DocStore, text: str) -> bool:
    """Text shaped like a publication number: any id of the doc store, or a number of a known office."""
    return id_shaped(text) and (looks_like_pub_id(text) or docs.find(text) is not None)


SYNTAXES: tuple[str, ...] = get_args(Syntax)


@dataclass(slots=True)
class LanguageQuery:
    """A query in the query language, as :func:`resolve` read it."""

    mask: np.ndarray  # the documents it matches
    entry: dict[str, Any]  # how it was read (query.filters.query: the tree, each term's expansion)
    text: str  # what the product ranks the documents by: its words that are not negated
    notes: list[str]
    clauses: list[tuple[str, np.ndarray]]  # the alternatives a result may satisfy, with their rows (SearchHit.clauses)
    evaluator: Any  # (service.querylang.evaluate.Evaluator: its words, for the fields of a result's matches)
    node: Any

    def __getstate__(self) -> dict[str, Any]:
        """Sent to a shard (Ray pickles the query) without the evaluator: a shard reads the mask, the ingress the
        fields."""
        return {name: None if name == "evaluator" else getattr(self, name) for name in self.__slots__}

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name, value in state.items():
            object.__setattr__(self, name, value)

    def satisfied(self, row: int) -> list[str]:
        """The alternatives row ``row`` satisfies (:attr:`SearchHit.clauses`)."""
        return [c for c, m in self.clauses if m[row]]

    def fields(self, rows: list[int]) -> dict[int, dict[str, list[str]]]:
        """Per row, its clauses of words and the fields it has them in (:attr:`SearchHit.fields`)."""
        return self.evaluator.fields(self.node, rows)


def _language(query: Query, docs: DocStore, resources: Any) -> LanguageQuery:
    """A query in the query language: the documents it matches, how it was read (the filter's entry: the tree, each
    term's expansion), the text the product ranks them by (its words that are not negated), and notes."""
    from service.querylang.evaluate import Evaluator, QueryLanguageError, positive_words
    from service.querylang.syntax import QuerySyntaxError, parse
    from service.querylang.words import word_segments

    try:
        node = parse(query.text)
    except QuerySyntaxError as exc:
        raise QueryError(str(exc), position=exc.position, expected=exc.expected) from exc
    try:
        segments = word_segments(docs)
    except FileNotFoundError as exc:
        raise QueryError(str(exc)) from exc
    analyzers = tables = None
    if resources is not None:
        analyzers = {lang: resources.analyzer(lang) for lang in SUPPORTED_LANGS}
        tables = resources.pair_tables
    ev = Evaluator(segments, len(docs), analyzers=analyzers, tables=tables, drop=query.drop_translations,
                   translate=query.translate is not False, lang=query.lang)
    try:
        mask = ev.mask(node)
    except QueryLanguageError as exc:
        raise QueryError(str(exc)) from exc
    words = positive_words(node)
    if not words:
        raise QueryError(f"the query {node.show()} has no word to rank its documents by: add a word (ti=..., a word "
                         "of the claims) beside the codes, dates and numbers")
    entry = {"syntax": "query", "parsed": node.show(), "terms": [e.to_json() for e in ev.expansions.values()],
             "ranked_by": " ".join(words)}
    notes = list(ev.notes)
    if not mask.any():  # a query that can match nothing says so, and which of its terms no document has
        absent = [e.term for e in ev.expansions.values() if not e.documents]
        notes.append(f"no document matches {node.show()}" + (f": no document has {', '.join(absent)}" if absent
                                                                else ""))
    return LanguageQuery(mask, entry, " ".join(words), notes, ev.alternatives(node), ev, node)


def resolve(query: Query, docs: DocStore, resources: Any = None) -> Resolved:
    """Resolve ``query`` against the doc store (see the module doc); sets and returns ``query.resolved``.
    ``resources`` (:class:`service.retrieval.resources.IndexResources`): the index's analyzers and translation
    tables, which translate the words of a query in the query language (None: untranslated, and a note says so)."""
    text = query.text
    if not isinstance(text, str) or not text.strip():
        raise QueryError("empty query: give text or a publication number")
    if query.syntax not in SYNTAXES:
        raise QueryError(f"unknown syntax {query.syntax!r}; valid: {', '.join(SYNTAXES)}")
    if query.lang is not None and query.lang not in SUPPORTED_LANGS:
        raise QueryError(f"unsupported language {query.lang!r}; valid: {', '.join(SUPPORTED_LANGS)}")
    if query.query_form not in QUERY_FORMS:
        raise QueryError(f"unknown query form {query.query_form!r}; valid: {', '.join(QUERY_FORMS)}")
    level = query.code_level
    if level is not None and level not in CODE_LEVELS:
        raise QueryError(f"unknown code level {level!r}; valid: {', '.join(CODE_LEVELS)}")
    codes = list(dict.fromkeys(query.codes))
    codes_from: Literal["request", "query document"] | None = "request" if codes else None
    lang = query.lang
    query_doc: str | None = None
    query_row: int | None = None
    filter_codes = list(codes) if level else []
    before, before_from = query.before, None
    if is_number_query(docs, text):
        rec, query_row, lang, text = _number_query(docs, text, lang, query.query_form)
        query_doc = rec.id
        if before is None and query.priority_cutoff:
            before, before_from = _cutoff(rec)
        doc_codes = record_codes(rec)
        if not codes and doc_codes:
            codes, codes_from = list(dict.fromkeys(doc_codes)), "query document"
        if query.use_doc_codes:
            filter_codes += [c for c in doc_codes if c not in filter_codes]
            level = level or "subclass"
    elif query.query_form != "text":
        raise QueryError(f"query_form={query.query_form!r} needs a publication number as the query")
    language: LanguageQuery | None = None
    if query_doc is None and query.syntax != "text":
        from service.querylang.syntax import looks_like_query

        if query.syntax == "query" or looks_like_query(text):
            language = _language(query, docs, resources)
            text = language.text
            for note in language.notes:
                query.note(note)
    detected = lang is None
    if lang is None:
        lang = detect_language(text)
    mask: np.ndarray | None = None
    filters: dict[str, Any] = {}
    filter_masks: dict[str, np.ndarray] = {}
    if filter_codes and level:
        try:
            filter_masks["codes"] = docs.code_mask(filter_codes, level)
            filters["codes"] = docs.query_codes(filter_codes, level)
        except ValueError as exc:
            raise QueryError(str(exc)) from exc
        filters["code_level"] = level
        mask = filter_masks["codes"]
    if language is not None:
        qmask = filter_masks["query"] = language.mask
        mask = qmask if mask is None else mask & qmask
        filters["query"] = language.entry
    if before is not None:
        dmask = filter_masks["before"] = docs.date_mask(before)
        mask = dmask if mask is None else mask & dmask
        filters["before"] = before.isoformat()
        if before_from is not None:
            filters["before_from"] = before_from
            query.note(f"prior art of {query_doc}: documents published before its {before_from} {before.isoformat()} "
                       "(give before, or priority_cutoff false, to change it)")
    base: np.ndarray | None = None
    if query_row is not None:
        base = np.ones(len(docs), dtype=bool)
        base[query_row] = False
        mask = base if mask is None else mask & base
        filters["exclude"] = query_doc
    filtered = mask is not None
    live = getattr(docs, "live", None)
    if live is not None:  # a live index with deleted rows: they are never candidates
        mask = live.copy() if mask is None else mask & live
        base = live if base is None else base & live
    if filtered and mask is not None:
        filters["n_allowed"] = int(mask.sum())
    query.resolved = Resolved(lang=lang, lang_detected=detected, text=text, query_doc=query_doc, query_row=query_row,
                              codes=tuple(codes), codes_from=codes_from, mask=mask, filters=filters,
                              filter_masks=filter_masks, base_mask=base, language=language)
    return query.resolved


__all__ = ["FORM_FIELDS", "QUERY_FORMS", "SYNTAXES", "LanguageQuery", "Query", "QueryError", "Resolved",
           "is_number_query", "resolve"]
