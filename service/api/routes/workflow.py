"""POST /claimchart and POST /report: the analyst's workflow (service/workflow/)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, TypeVar

from fastapi import APIRouter, HTTPException, Query
from fastapi.responses import Response

from service.api.deps import EngineDep, SettingsDep
from service.query import QueryError
from service.schema import ClaimChartRequest, ClaimChartResponse, ReportRequest, ReportResponse
from service.workflow.chart import claim_chart
from service.workflow.report import build_report, chart_csv, chart_html, report_csv, report_html

T = TypeVar("T")
router = APIRouter(tags=["workflow"])
_TYPES = {"csv": "text/csv; charset=utf-8", "html": "text/html; charset=utf-8"}
_EXPORT = {200: {"content": {"text/csv": {}, "text/html": {}}, "description": "the chart or report, as asked"}}


def _file(body: str, fmt: str, name: str) -> Response:
    return Response(body, media_type=_TYPES[fmt],
                    headers={"Content-Disposition": f'attachment; filename="{name}.{fmt}"'})


def _checked(texts: list[tuple[str, str]], limit: int) -> None:
    """A 422 for the first text (field name, text) longer than the server's limit."""
    for field, text in texts:
        if len(text) > limit:
            raise HTTPException(422, f"{field}: {len(text)} characters, the limit is {limit}")


def _answer(make: Callable[[], T], fmt: str, csv: Callable[[T], str], html: Callable[[T], str],
            name: Callable[[T], str]) -> T | Response:
    """``make()``'s result (a ``QueryError`` is a 422) as JSON, or as the CSV or printable HTML file ``fmt`` asks."""
    try:
        made = make()
    except QueryError as exc:
        raise HTTPException(422, str(exc)) from exc
    if fmt == "csv":
        return _file(csv(made), "csv", name(made))
    if fmt == "html":
        return _file(html(made), "html", name(made))
    return made


@router.post("/claimchart", response_model=ClaimChartResponse, responses=_EXPORT,  # type: ignore[arg-type]
             summary="Claim chart: each element of a claim against each document's best passage")
def claimchart(req: ClaimChartRequest, engine: EngineDep, settings: SettingsDep,
               format: Literal["json", "csv", "html"] = Query("json", description="json, csv or printable html")
               ) -> ClaimChartResponse | Response:
    """Split the claim into elements (preamble, features; dependent claims resolved) and find, for each element
    and document (given ids, or the top k of a search with the claim), the best passage in context."""
    _checked([("claim_text", req.claim_text)], settings.limits.max_query_chars)
    return _answer(lambda: claim_chart(engine, req), format, chart_csv, chart_html,
                   lambda chart: f"claim-chart-{chart.claim}")


@router.post("/report", response_model=ReportResponse, responses=_EXPORT,  # type: ignore[arg-type]
             summary="Search report of a session (documents with category X/Y/A, passages, claims concerned)")
def report(req: ReportRequest, engine: EngineDep, settings: SettingsDep) -> ReportResponse | Response:
    """The session's queries, the documents marked with their category, relevant passages and claims
    concerned, and the claim chart; ``format`` json, csv or html (printable)."""
    _checked([("query", q.query) for q in req.queries], settings.limits.max_query_chars)
    return _answer(lambda: build_report(engine, req), req.format, report_csv, report_html, lambda _: "search-report")
