"""Claim charts: every element of a claim against every charted document, the best passage of each.

For one element the passages of the charted documents are ranked together by the passage index
(:meth:`service.passages.PassageIndex.rank`, the same QSF ranking as ``/passages``, restricted to those
documents); each document's best passage is its cell. Whether the passage *discloses* the element is a
term-overlap heuristic, said as such: the share of the element's analysed terms that occur in the
passage (in its own language, or through the index's translation table when the passage is in another
one): ``disclosed`` from :data:`DISCLOSED`, ``partly`` from :data:`PARTLY`, else ``not found``. The
suggested category follows: ``X`` when a document discloses every element, ``Y`` when it discloses at
least half of them, else ``A`` (the analyst decides; the report takes the analyst's category).
"""

from __future__ import annotations

import time
from typing import Any, Literal, Protocol

import numpy as np

from service.passages import PassageIndex
from service.passages.highlight import highlight_spans
from service.passages.ranker import PassageHit
from service.query import QueryError
from service.schema import (
    ChartCell,
    ChartDocument,
    ClaimChartRequest,
    ClaimChartResponse,
    ClaimElementOut,
)
from service.text.analysis import detect_language
from service.workflow.claims import split_claims


class Engine(Protocol):
    """What the workflow reads of :class:`service.engine.Engine` (a protocol: no import cycle)."""

    first_stage: Any
    docs: Any

    def _row(self, doc_id: str) -> int | None: ...

    def query(self, req: Any, depth: int | None = None, *, text: str | None = None) -> Any: ...

    def run(self, query: Any, *, explain: bool = False, collapse: bool = False, k: int | None = None) -> Any: ...

    def passages_of(self, text: str, lang: str, rows: list[int], k: int) -> list[Any]: ...

    def passage_langs(self, lang: str) -> set[str]: ...

DISCLOSED = 0.6
PARTLY = 0.3
MAX_PASSAGES = 100_000


def _status(overlap: float) -> Literal["disclosed", "partly", "not found"]:
    return "disclosed" if overlap >= DISCLOSED else "partly" if overlap >= PARTLY else "not found"


def claim_chart(engine: Engine, passages: PassageIndex, req: ClaimChartRequest) -> ClaimChartResponse:
    started = time.perf_counter()
    try:
        split = split_claims(req.claim_text, req.claim)
    except ValueError as exc:
        raise QueryError(str(exc)) from exc
    claim = next(c for c in split.claims if c.num == split.claim)
    lang = req.lang if req.lang != "auto" else detect_language(claim.text)
    notes = list(split.notes)
    fs = engine.first_stage
    if req.documents:
        rows: list[int] = []
        for doc_id in req.documents:
            row = engine._row(doc_id)
            if row is None:
                raise QueryError(f"no document {doc_id!r} in this index")
            if row not in rows:
                rows.append(row)
        source = "request"
    else:  # the top k of a search with the whole claim (its elements, references resolved)
        text = " ".join(e.text for e in split.elements)
        query = engine.query(req, text=text)
        query.lang = lang
        query.k = min(query.depth, req.k * 3)
        found = engine.run(query, collapse=True, k=req.k)
        rows = [engine._row(h.id) or 0 for h in found.results]
        source = "search"
        if not rows:
            raise QueryError("the search with this claim found no document to chart")
    readable = engine.passage_langs(lang)
    analyzer = fs.analyzer(lang)
    ids = [engine.docs.ids[r] for r in rows]
    cells: list[ChartCell] = []
    disclosed = dict.fromkeys(ids, 0)
    not_disclosed: list[str] = []
    for el in split.elements:
        terms = set(analyzer(el.text))
        hits: list[PassageHit] = []
        if terms:
            try:
                hits = passages.rank(el.text, lang, np.asarray(rows, dtype=np.int64), None, translations=fs.tables,
                                     k=MAX_PASSAGES, langs=readable, highlight=False).hits
            except ValueError as exc:  # e.g. only reference signs: nothing to look for
                notes.append(f"element {el.label}: {exc}")
        else:
            notes.append(f"element {el.label} has no searchable words: not charted")
        best: dict[str, PassageHit] = {}
        for hit in hits:
            best.setdefault(hit.doc_id, hit)
        any_disclosed = False
        for doc_id in ids:
            best_hit = best.get(doc_id)
            if best_hit is None or not terms:
                cells.append(ChartCell(element=el.label, doc_id=doc_id))
                continue
            hit = best_hit
            plang = hit.lang or lang
            targets = _targets(fs, terms, lang, plang)
            p_analyzer = fs.analyzer(plang)
            present = set(p_analyzer(hit.text))
            matched = sum(1 for t in terms if targets[t] & present)
            overlap = matched / len(terms)
            status = _status(overlap)
            if status == "disclosed":
                disclosed[doc_id] += 1
                any_disclosed = True
            spans = highlight_spans(hit.text, set().union(*targets.values()), p_analyzer)
            cells.append(ChartCell(element=el.label, doc_id=doc_id, passage_id=hit.passage_id,
                                   section_path=list(hit.section_path), text=hit.text, score=hit.score,
                                   highlights=[tuple(s) for s in spans], lang=plang, overlap=round(overlap, 4),
                                   status=status))
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


def _targets(fs: object, terms: set[str], src: str, tgt: str) -> dict[str, set[str]]:
    """Each element term and the terms it may appear as in a ``tgt`` passage (itself, or its translations)."""
    if src == tgt:
        return {t: {t} for t in terms}
    table = getattr(fs, "pair_tables", {}).get((src, tgt))
    if table is None:
        return {t: {t} for t in terms}
    return {t: {t, *table.translate_term(t)} for t in terms}


def _title(titles: dict[str, str], lang: str) -> str | None:
    return titles.get(lang) or titles.get("en") or next(iter(titles.values()), None)


__all__ = ["DISCLOSED", "PARTLY", "claim_chart"]
