"""POST /claimchart and POST /report: the analyst's workflow (service/workflow/)."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, HTTPException, Query
from fastapi.responses import Response

from service.api.deps import EngineDep, SettingsDep
from service.query import QueryError
from service.schema import ClaimChartRequest, ClaimChartResponse, ReportRequest, ReportResponse
from service.workflow.chart import claim_chart
from service.workflow.report import build_report, chart_csv, chart_html, report_csv, report_html

router = APIRouter(tags=["workflow"])
_TYPES = {"csv": "text/csv; charset=utf-8", "html": "text/html; charset=utf-8"}
_EXPORT = {200: {"content": {"text/csv": {}, "text/html": {}}, "description": "the chart or report, as asked"}}


def _file(body: str, fmt: str, name: str) -> Response:
    return Response(body, media_type=_TYPES[fmt],
                    headers={"Content-Disposition": f'attachment; filename="{name}.{fmt}"'})


@router.post("/claimchart", response_model=ClaimChartResponse, responses=_EXPORT,  # type: ignore[arg-type]
             summary="Claim chart: each element of a claim against each document's best passage")
def claimchart(req: ClaimChartRequest, engine: EngineDep, settings: SettingsDep,
               format: Literal["json", "csv", "html"] = Query("json", description="json, csv or printable html")
               ) -> ClaimChartResponse | Response:
    """Split the claim into elements (preamble, features; dependent claims resolved) and find, for each element
    and document (given ids, or the top k of a search with the claim), the best passage in context."""
    if len(req.claim_text) > settings.limits.max_query_chars:
        raise HTTPException(422, f"claim_text: {len(req.claim_text)} characters, the limit is "
                                 f"{settings.limits.max_query_chars}")
    try:
        chart = claim_chart(engine, req)
    except QueryError as exc:
        raise HTTPException(422, str(exc)) from exc
    if format == "csv":
        return _file(chart_csv(chart), "csv", f"claim-chart-{chart.claim}")
    if format == "html":
        return _file(chart_html(chart), "html", f"claim-chart-{chart.claim}")
    return chart


@router.post("/report", response_model=ReportResponse, responses=_EXPORT,  # type: ignore[arg-type]
             summary="Search report of a session (documents with category X/Y/A, passages, claims concerned)")
def report(req: ReportRequest, engine: EngineDep, settings: SettingsDep) -> ReportResponse | Response:
    """The session's queries, the documents marked with their category, relevant passages and claims
    concerned, and the claim chart; ``format`` json, csv or html (printable)."""
    for q in req.queries:
        if len(q.query) > settings.limits.max_query_chars:
            raise HTTPException(422, f"query: {len(q.query)} characters, the limit is "
                                     f"{settings.limits.max_query_chars}")
    try:
        rep = build_report(engine, req)
    except QueryError as exc:
        raise HTTPException(422, str(exc)) from exc
    if req.format == "csv":
        return _file(report_csv(rep), "csv", "search-report")
    if req.format == "html":
        return _file(report_html(rep), "html", "search-report")
    return rep
