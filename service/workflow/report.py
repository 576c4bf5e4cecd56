"""Claim charts and search reports as CSV and printable HTML (and the report's JSON body).

A search report lists, per cited document, its category (X: relevant taken alone, Y: relevant combined
with another Y document, A: technological background, as in an EPO search report), the claims concerned
and its relevant passages (the best passages of that document for the session's last query, ranked by
the passage index among the cited documents), then the queries of the session and the claim chart.
Rendering is pure: the same response always renders to the same text.
"""

from __future__ import annotations

import csv
import html
import io
from datetime import UTC, datetime

from service.query import QueryError, resolve
from service.schema import CATEGORIES, ClaimChartResponse, PassageHit, ReportEntry, ReportRequest, ReportResponse
from service.workflow.chart import Engine

PRINT_CSS = """body{font:11pt/1.4 system-ui,sans-serif;margin:1.5cm;color:#111}h1{font-size:16pt}h2{font-size:13pt;
margin-top:1.2em}table{border-collapse:collapse;width:100%;font-size:9.5pt}th,td{border:1px solid #999;padding:4px;
vertical-align:top;text-align:left}th{background:#eee}mark{background:#ffe58a}.path{color:#555;font-size:8.5pt}
.disclosed{background:#e7f5e7}.partly{background:#fff8e1}.not-found{background:#fbeaea}@media print{a{color:#000}}"""


def build_report(engine: Engine, req: ReportRequest) -> ReportResponse:
    """The report body: the marked documents with their passages, the queries, the claim chart."""
    rows: list[int] = []
    for d in req.documents:
        row = engine.row(d.id)
        if row is None:
            raise QueryError(f"no document {d.id!r} in this index")
        rows.append(row)
    last = next((q for q in reversed(req.queries)), None)
    passages: dict[str, list] = {}
    if last is not None and req.passages and rows:
        # (a publication number becomes its document's text; a query in the language, its words)
        r = resolve(engine.query(last), engine.docs, engine.resources)
        for row in dict.fromkeys(rows):
            hits = engine.evidence.passages_of(r.text, r.lang, [row], req.passages)
            if hits:
                passages[hits[0].doc_id] = hits
    entries = []
    for d, row in zip(req.documents, rows, strict=True):
        rec = engine.docs.get_row(row)
        entries.append(ReportEntry(id=rec.id, title=rec.title.get("en") or next(iter(rec.title.values()), None),
                                   publication_date=rec.publication_date, category=d.category, claims=d.claims,
                                   note=d.note, passages=passages.get(rec.id, [])))
    order = {"X": 0, "Y": 1, "A": 2}
    entries.sort(key=lambda e: order[e.category])
    queries = [q.model_dump(mode="json", exclude_defaults=True) for q in req.queries]
    return ReportResponse(title=req.title, created=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
                          queries=queries, entries=entries, claim_chart=req.claim_chart)


# ---------------------------------------------------------------------------------------------- CSV
def _csv(rows: list[list[object]]) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    return buf.getvalue()


CHART_SCORE_COLUMN = "score_among_charted"
"""The chart CSV's score column: a cell's ``score`` (service/workflow/chart.py), in [0, 1] among the charted documents'
passages (1: the best passage for the element among them; 0: none of its words)."""


def chart_csv(chart: ClaimChartResponse) -> str:
    """One row per element and document: element, its text, document, status, overlap (share of the element's words
    in the passage), the passage's score among the charted documents' passages (:data:`CHART_SCORE_COLUMN`), section
    path, passage."""
    text = {e.label: e.text for e in chart.elements}
    rows: list[list[object]] = [["element", "element_text", "doc_id", "status", "overlap", CHART_SCORE_COLUMN,
                                 "section_path", "passage_id", "passage"]]
    for c in chart.cells:
        rows.append([c.element, text.get(c.element, ""), c.doc_id, c.status, f"{c.overlap:.3f}", f"{c.score:.4f}",
                     " > ".join(c.section_path), c.passage_id or "", c.text or ""])
    return _csv(rows)


def report_csv(rep: ReportResponse) -> str:
    rows: list[list[object]] = [["category", "document", "title", "publication_date", "claims", "passage_section",
                                 "passage_id", "passage", "note"]]
    for e in rep.entries:
        choices: list[PassageHit | None] = [*e.passages] or [None]
        for p in choices:
            rows.append([e.category, e.id, e.title or "", e.publication_date or "", e.claims,
                         " > ".join(p.section_path) if p else "", p.passage_id if p else "", p.text if p else "",
                         e.note])
    return _csv(rows)


# ---------------------------------------------------------------------------------------------- HTML
def _marked(text: str, spans: list[tuple[int, int]]) -> str:
    out, pos = [], 0
    for s, e in sorted(spans):
        if s < pos:
            continue
        out += [html.escape(text[pos:s]), "<mark>", html.escape(text[s:e]), "</mark>"]
        pos = e
    return "".join(out) + html.escape(text[pos:])


def _page(title: str, body: str) -> str:
    return (f"<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
            f"<style>{PRINT_CSS}</style></head><body>{body}</body></html>\n")


def _chart_table(chart: ClaimChartResponse) -> str:
    cells = {(c.element, c.doc_id): c for c in chart.cells}
    head = "".join(f"<th>{html.escape(d.id)}<br><small>{html.escape(d.title or '')}</small><br>"
                   f"<small>{d.disclosed}/{len(chart.elements)} disclosed · suggested {d.category}</small></th>"
                   for d in chart.documents)
    rows = []
    for e in chart.elements:
        tds = []
        for d in chart.documents:
            c = cells.get((e.label, d.id))
            if c is None or c.text is None:
                tds.append("<td class=\"not-found\">—</td>")
                continue
            tds.append(f"<td class=\"{c.status.replace(' ', '-')}\"><b>{html.escape(c.status)}</b> "
                       f"({c.overlap:.0%} of terms)<div class=\"path\">{html.escape(' › '.join(c.section_path))} · "
                       f"{html.escape(c.passage_id or '')}</div>{_marked(c.text, list(c.highlights))}</td>")
        rows.append(f"<tr><th>{html.escape(e.label)}<br><small>{html.escape(e.kind)}</small></th>"
                    f"<td>{html.escape(e.text)}</td>{''.join(tds)}</tr>")
    return (f"<p>{html.escape(chart.coverage)}</p><table class=\"chart\"><thead><tr><th>element</th><th>claim text</th>"
            f"{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
            "<p class=\"path\">Disclosed / partly / not found: share of the element's terms found in the passage "
            "(or its translation); a term-overlap aid, not a judgement.</p>")


def chart_html(chart: ClaimChartResponse) -> str:
    title = f"Claim chart: claim {chart.claim}"
    return _page(title, f"<h1>{html.escape(title)}</h1>{_chart_table(chart)}")


def report_html(rep: ReportResponse) -> str:
    cats = "".join(f"<li><b>{k}</b>: {html.escape(v)}</li>" for k, v in CATEGORIES.items())
    rows = []
    for e in rep.entries:
        ps = "".join(f"<div class=\"path\">{html.escape(' › '.join(p.section_path))} · {html.escape(p.passage_id)}"
                     f"</div><div>{_marked(p.text, list(p.highlights))}</div>" for p in e.passages)
        rows.append(f"<tr><td><b>{e.category}</b></td><td><b>{html.escape(e.id)}</b><br>{html.escape(e.title or '')}"
                    f"<br><small>published {e.publication_date or '?'}</small>"
                    f"{'<br><i>' + html.escape(e.note) + '</i>' if e.note else ''}</td><td>{ps or '—'}</td>"
                    f"<td>{html.escape(e.claims) or '—'}</td></tr>")
    queries = "".join(f"<li><code>{html.escape(str(q.get('query', ''))[:500])}</code>"
                      f"{' · ' + html.escape(str({k: v for k, v in q.items() if k != 'query'})) if len(q) > 1 else ''}"
                      "</li>" for q in rep.queries)
    body = (f"<h1>{html.escape(rep.title)}</h1><p class=\"path\">created {html.escape(rep.created)} by priorart</p>"
            f"<h2>Documents considered to be relevant</h2><table class=\"report\"><thead><tr><th>Category</th>"
            f"<th>Document</th><th>Relevant passages</th><th>Relevant to claim</th></tr></thead><tbody>"
            f"{''.join(rows) or '<tr><td colspan=4>no documents marked</td></tr>'}</tbody></table>"
            f"<h2>Categories of cited documents</h2><ul>{cats}</ul><h2>Searches</h2><ol>{queries or '<li>—</li>'}</ol>")
    if rep.claim_chart is not None:
        body += f"<h2>Claim chart: claim {rep.claim_chart.claim}</h2>{_chart_table(rep.claim_chart)}"
    return _page(rep.title, body)


__all__ = ["CHART_SCORE_COLUMN", "build_report", "chart_csv", "chart_html", "report_csv", "report_html"]
