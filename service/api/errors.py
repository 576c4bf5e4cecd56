"""Problem-details (RFC 9457) error responses; HTTP errors are raised only in the API layer.

Public replies name no path on the server's disk: :func:`public` turns the index folder's paths into paths
relative to it and any other absolute path into its last part.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

PROBLEM_TYPE = "application/problem+json"
log = logging.getLogger(__name__)
TITLES = {400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed",
          408: "Request Timeout", 409: "Conflict", 413: "Payload Too Large", 422: "Unprocessable Content",
          500: "Internal Server Error", 503: "Service Unavailable", 504: "Gateway Timeout",
          507: "Insufficient Storage"}
_ABSOLUTE = re.compile(r"(?<![\w.:/~-])/(?:[^\s/'\",:;()]+/)+([^\s/'\",:;()]*)")


def public(value: Any, index_dir: str | Path) -> Any:
    """``value`` (a string, or the strings in a JSON-like structure) without paths on the server's disk: the
    index folder's own paths become relative to it (``segments/seg-000003/meta.json``), any other absolute path
    is cut to its last part."""
    if isinstance(value, str):
        text = value
        for root in sorted({str(Path(index_dir)), str(Path(index_dir).resolve())}, key=len, reverse=True):
            text = text.replace(root + "/", "").replace(root, "the index folder")
        return _ABSOLUTE.sub(lambda m: m.group(1) or "(a folder)", text)
    if isinstance(value, dict):
        return {k: public(v, index_dir) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [public(v, index_dir) for v in value]
    return value


def problem(status: int, title: str, detail: str, *, headers: dict[str, str] | None = None,
            **extra: Any) -> JSONResponse:
    body = {"type": "about:blank", "title": title, "status": status, "detail": detail, **extra}
    return JSONResponse(body, status_code=status, media_type=PROBLEM_TYPE, headers=headers)


def install_error_handlers(app: FastAPI) -> None:
    from service.index.store import DamagedRecordError

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        return problem(exc.status_code, TITLES.get(exc.status_code, "Error"), str(exc.detail),
                       headers=getattr(exc, "headers", None))

    @app.exception_handler(DamagedRecordError)
    async def _damaged(request: Request, exc: DamagedRecordError) -> JSONResponse:
        # logged by the doc store with the file on disk; the reply names the record and its segment only
        log.error("answered 503 on %s %s: %s", request.method, request.url.path, exc)
        return problem(503, "Service Unavailable", f"{exc}: this server cannot read it; the index needs a repair "
                       "(the error is logged)", record=exc.doc_id, segment=exc.segment)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return problem(500, "Internal Server Error", f"unexpected {type(exc).__name__}; the error is logged")

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        raw = exc.errors()
        errors = [
            {"loc": [str(p) for p in e.get("loc", ())], "msg": str(e.get("msg", "")), "type": str(e.get("type", ""))}
            for e in raw
        ]
        if raw and raw[0].get("type") == "json_invalid":
            detail = _json_invalid(raw[0], getattr(exc, "body", None))
        elif errors:
            loc = ".".join(str(x) for x in errors[0]["loc"] if x != "body")
            detail = f"{loc}: {errors[0]['msg']}" if loc else str(errors[0]["msg"])
        else:
            detail = "invalid request"
        return problem(422, "Unprocessable Content", detail, errors=errors)


def _json_invalid(error: Any, body: Any) -> str:
    """A body that is not JSON, said as such: what the parser expected, and where (line, column and character of
    the body, as Python's ``json`` counts them), e.g. ``the body is not valid JSON: Expecting ',' delimiter at line 1,
    column 11 (character 10)`` (FastAPI's own says ``10: JSON decode error``)."""
    why = str((error.get("ctx") or {}).get("error") or "it cannot be parsed")
    pos = next((x for x in reversed(error.get("loc", ())) if isinstance(x, int)), None)
    if pos is None:
        return f"the body is not valid JSON: {why}"
    if isinstance(body, bytes | bytearray):
        body = body.decode("utf-8", errors="replace")
    if isinstance(body, str) and 0 <= pos <= len(body):
        line = body.count("\n", 0, pos) + 1
        column = pos - body.rfind("\n", 0, pos)
        return f"the body is not valid JSON: {why} at line {line}, column {column} (character {pos})"
    return f"the body is not valid JSON: {why} at character {pos}"
