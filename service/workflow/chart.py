"""Claim charts: every element of a claim against every charted document, the best passage of each.

For one element and one document, the document's passages are ranked by the passage index
(:meth:`service.passages.PassageReader.rank`, the same QSF ranking as ``/passages``, with the element's image in
every language it reaches: a German element finds the English passage that discloses it), within that document
alone, so that a cell never depends on which other documents are charted. Of its :data:`CELL_CANDIDATES` best
passages the cell is the one that renders most of the element's words. Whether the passage *discloses* the
element is a term-overlap heuristic, said as such: the share of the element's words that occur in the passage
(in its own language, or rendered by the index's translation tables when the passage is in another one; a split
German compound counts as found when it or one of its parts is): ``disclosed`` from :data:`DISCLOSED`,
``partly`` from :data:`PARTLY`, else ``not found``. The suggested category follows: ``X`` when a document
discloses every element, ``Y`` when it discloses at least half of them, else ``A`` (the analyst decides; the
report takes the analyst's category). Highlights mark the matched words and say which element words they render.

A cell's ``score`` says how well its passage renders the element beside the other cells of that element: the
passage's QSF score (the ``/passages`` defaults) among every passage of the charted documents, min-max over them (1:
the best passage of the charted documents for the element; 0: one that holds none of its words). The within-document
score the cell is chosen by is no measure across cells: each document's best passage scores about the same there
(its passage component is 1 by construction; a passage reached through a table weighs its document, 0 alone: the
best of them scores 0.5 exactly).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Literal, Protocol

import numpy as np

from service.passages import DEFAULT_PARAMS, PassageReader
from service.passages.highlight import term_matches, token_terms
from service.passages.lm import QueryImage
from service.passages.ranker import passage_matches
from service.query import Query, QueryError
from service.schema import (
    DEFAULT_VARIANT,
    ChartCell,
    ChartDocument,
    ClaimChartRequest,
    ClaimChartResponse,
    ClaimElementOut,
    PassageHit,
    SearchRequest,
    SearchResponse,
)
from service.stages.results import collapse_to
from service.text.analysis import detect_language
from service.workflow.claims import split_claims

if TYPE_CHECKING:
    from service.index.store import DocStore
    from service.retrieval.resources import IndexResources


class Passages(Protocol):
    """What the workflow reads of the engine's evidence stage (:class:`service.stages.evidence.EvidenceStep`): the
    passage index and the passages of given documents."""

    def passage_index(self) -> PassageReader: ...

    def passages_of(self, text: str, lang: str, rows: list[int], k: int) -> list[PassageHit]: ...

    def passage_query(self, text: str, lang: str, *,
                      translate: bool = True) -> tuple[dict[str, QueryImage], dict[str, list[str]]]: ...


class Engine(Protocol):
    """What the workflow reads of :class:`service.engine.Engine`: its public methods, nothing private. (The workflow
    sits above the engine; a protocol keeps it to what it uses, and lets a test hand it a stand-in.)"""

    docs: DocStore
    resources: IndexResources | None

    @property
    def evidence(self) -> Passages: ...

    def row(self, doc_id: str) -> int | None: ...

    def query(self, req: SearchRequest | ClaimChartRequest, depth: int | None = None, *,
              text: str | None = None) -> Query: ...

    def run(self, query: Query, *, explain: bool = False) -> SearchResponse: ...


DISCLOSED = 0.6
PARTLY = 0.3
CELL_CANDIDATES = 5


def _status(overlap: float) -> Literal["disclosed", "partly", "not found"]:
    return "disclosed" if overlap >= DISCLOSED else "partly" if overlap >= PARTLY else "not found"


def claim_chart(engine: Engine, req: ClaimChartRequest) -> ClaimChartResponse:
    """Each element of the claim x each document: its best passage in context (module docstring). ``QueryError``
    for a claim that cannot be split, an unknown document, or an index without a passage index."""
    started = time.perf_counter()
    passages = engine.evidence.passage_index()
    resources = engine.resources
    if resources is None:
        raise QueryError("this index's pipeline has no analysis or translation tables to read")
    try:
        split = split_claims(req.claim_text, req.claim)
    except ValueError as exc:
        raise QueryError(str(exc)) from exc
    claim = next(c for c in split.claims if c.num == split.claim)
    lang = req.lang if req.lang != "auto" else detect_language(claim.text)
    notes = list(split.notes)
    if req.documents:
        rows: list[int] = []
        for doc_id in req.documents:
            row = engine.row(doc_id)
            if row is None:
                raise QueryError(f"no document {doc_id!r} in this index")
            if row not in rows:
                rows.append(row)
        source = "request"
    elif req.query and req.query.strip():  # the top k of the analyst's query in the query language
        query = engine.query(SearchRequest(query=req.query, syntax="query", lang=req.lang, codes=req.codes,
                                           code_filter=req.code_filter, before=req.before, k=req.k))
        query.collapse = req.k
        found = engine.run(query)
        rows = [engine.row(h.id) or 0 for h in found.results]
        source = "query"
        if not rows:
            raise QueryError(f"the query {req.query!r} found no document to chart")
    else:  # the top k of a search with the whole claim (its elements, references resolved)
        text = " ".join(e.text for e in split.elements)
        query = engine.query(req, text=text)
        query.lang = lang
        collapse_to(query, req.k)
        found = engine.run(query)
        rows = [engine.row(h.id) or 0 for h in found.results]
        source = "search"
        if not rows:
            raise QueryError("the search with this claim found no document to chart")
    ids = [engine.docs.ids[r] for r in rows]
    cells: list[ChartCell] = []
    # per passage id, what the chart's elements read of it again and again: its terms, its tokens' spans and terms
    analysed: dict[str, set[str]] = {}
    tokens: dict[str, list[tuple[int, int, tuple[str, ...]]]] = {}
    disclosed = dict.fromkeys(ids, 0)
    not_disclosed: list[str] = []
    for el in split.elements:
        try:
            images, words = engine.evidence.passage_query(el.text, lang)
        except QueryError:  # only stop words or reference signs: nothing to look for
            notes.append(f"element {el.label} has no searchable words: not charted")
            cells.extend(ChartCell(element=el.label, doc_id=doc_id) for doc_id in ids)
            not_disclosed.append(el.label)
            continue
        words_of = list({whole: (whole, *parts) for whole, parts in
                         resources.analyzer(lang).groups(el.text)}.values())
        targets = _targets(images, words_of)
        # each document's CELL_CANDIDATES best passages, ranked within the document alone (a cell does not depend
        # on the other documents charted), all documents scored at once
        of_doc: dict[str, list[PassageHit]] = {}
        for hit in passages.rank(images, lang, np.asarray(rows, dtype=np.int64), None, analyzers=resources.analyzers,
                                 words=words, k=CELL_CANDIDATES, langs=set(images), highlight=False,
                                 alone=True).hits:
            of_doc.setdefault(hit.doc_id, []).append(hit)
        joint = _joint_scores(passages, resources, images, lang, rows) if of_doc else {}
        any_disclosed = False
        for doc_id in ids:
            cell = _cell(resources, el.label, doc_id, of_doc.get(doc_id, []), images, words, targets, lang, analysed,
                         tokens, joint)
            cells.append(cell)
            if cell.status == "disclosed":
                disclosed[doc_id] += 1
                any_disclosed = True
        if not any_disclosed:
            not_disclosed.append(el.label)
    n = len(split.elements)
    docs: list[ChartDocument] = []
    for row, doc_id in zip(rows, ids, strict=True):
        rec = engine.docs.get_row(row)
        d = disclosed[doc_id]
        cat: Literal["X", "Y", "A"] = "X" if d == n else "Y" if 2 * d >= n else "A"
        docs.append(ChartDocument(id=doc_id, title=_title(rec.title, lang), publication_date=rec.publication_date,
                                  disclosed=d, category=cat))
    coverage = (f"all {n} elements are disclosed by at least one document" if not not_disclosed else
                f"{n - len(not_disclosed)} of {n} elements are disclosed by at least one document; "
                f"not disclosed: {', '.join(not_disclosed)}")
    return ClaimChartResponse(
        claim=split.claim, lang=lang,
        elements=[ClaimElementOut(label=e.label, kind=e.kind, claim=e.claim, text=e.text) for e in split.elements],
        documents=docs, cells=cells, not_disclosed=not_disclosed, coverage=coverage, documents_from=source,
        notes=notes, took_ms=(time.perf_counter() - started) * 1000.0)


def _targets(images: dict[str, QueryImage], words_of: list[tuple[str, ...]]) -> dict[str, list[set[str]]]:
    """Per passage language, each word of the element (its term and, for a split compound, its parts' terms) as the
    set of terms that render it there: itself in its own language, its translations in the others (the terms of
    the query's image there that render the word or one of its parts)."""
    out: dict[str, list[set[str]]] = {}
    for plang, image in images.items():
        by_src: dict[str, set[str]] = {}
        for term, srcs in image.sources.items():
            for src in srcs:
                by_src.setdefault(src, set()).add(term)
        out[plang] = [set().union(*(by_src.get(t, set()) for t in word)) for word in words_of]
    return out


def _joint_scores(passages: PassageReader, resources: IndexResources,
                  images: dict[str, QueryImage], lang: str, rows: list[int]) -> dict[str, float]:
    """Passage id -> its score for the element among every passage of the charted documents ``rows`` that have text
    in a language the element reaches (the module docstring: the cells' ``score``), at the ``/passages`` defaults."""
    at = np.asarray(rows, dtype=np.int64)
    at = at[passages.readable(at, set(images))]
    if not at.size:
        return {}
    sc = passages.score(images, lang, at, None, variant=DEFAULT_VARIANT, analyzers=resources.analyzers,
                        sigma=DEFAULT_PARAMS["sigma"], mu=DEFAULT_PARAMS["mu"],
                        mu_translated=DEFAULT_PARAMS["mu_translated"])
    final = sc.combine(DEFAULT_PARAMS["alpha"], DEFAULT_PARAMS["beta"])
    return {pid: float(v) for (_, pid), v in zip(sc.ids(), final.tolist(), strict=True)}


def _cell(resources: IndexResources, label: str, doc_id: str, hits: list[PassageHit],
          images: dict[str, QueryImage], words: dict[str, list[str]],
          targets: dict[str, list[set[str]]], lang: str, analysed: dict[str, set[str]],
          tokens: dict[str, list[tuple[int, int, tuple[str, ...]]]], joint: dict[str, float]) -> ChartCell:
    """One document's cell for one element: of its ``CELL_CANDIDATES`` best passages for the element (``hits``,
    ranked within the document alone, so that a cell does not depend on the other documents charted), the one that
    renders most of the element's terms (ties: the better ranked). Only that one is highlighted; its score is its
    ``joint`` one (:func:`_joint_scores`). ``analysed`` and ``tokens`` keep a passage's terms and tokens for the
    chart's other elements."""
    best: tuple[float, PassageHit] | None = None
    for hit in hits:
        plang = hit.lang or lang
        rendered = targets.get(plang, [])
        if not rendered:
            continue
        present = analysed.get(hit.passage_id)
        if present is None:
            present = analysed[hit.passage_id] = set(resources.analyzer(plang)(hit.text))
        overlap = sum(1 for t in rendered if not t.isdisjoint(present)) / len(rendered)
        if best is None or overlap > best[0]:
            best = (overlap, hit)
    if best is None:
        return ChartCell(element=label, doc_id=doc_id)
    overlap, hit = best
    plang = hit.lang or lang
    matches = []
    if plang in images:
        found = tokens.get(hit.passage_id)
        if found is None:
            found = tokens[hit.passage_id] = token_terms(hit.text, resources.analyzer(plang))
        matches = passage_matches(term_matches(found, images[plang].probs), plang, lang, images[plang], words)
    return ChartCell(element=label, doc_id=doc_id, passage_id=hit.passage_id, section_path=list(hit.section_path),
                     text=hit.text, score=round(joint.get(hit.passage_id, 0.0), 6),
                     highlights=[(m.start, m.end) for m in matches], matches=matches,
                     lang=plang, overlap=round(overlap, 4), status=_status(overlap))


def _title(titles: dict[str, str], lang: str) -> str | None:
    return titles.get(lang) or titles.get("en") or next(iter(titles.values()), None)


__all__ = ["DISCLOSED", "PARTLY", "claim_chart"]
