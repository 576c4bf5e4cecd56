"""Problem-details (RFC 9457) error responses; HTTP errors are raised only in the API layer."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

PROBLEM_TYPE = "application/problem+json"
log = logging.getLogger(__name__)


def problem(status: int, title: str, detail: str, **extra: Any) -> JSONResponse:
    body = {"type": "about:blank", "title": title, "status": status, "detail": detail, **extra}
    return JSONResponse(body, status_code=status, media_type=PROBLEM_TYPE)


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        title = {400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 405: "Method Not Allowed",
                 409: "Conflict", 413: "Payload Too Large", 422: "Unprocessable Content",
                 503: "Service Unavailable", 504: "Gateway Timeout"}.get(exc.status_code, "Error")
        return problem(exc.status_code, title, str(exc.detail))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return problem(500, "Internal Server Error", f"unexpected {type(exc).__name__}; the error is logged")

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [
            {"loc": [str(p) for p in e.get("loc", ())], "msg": str(e.get("msg", "")), "type": str(e.get("type", ""))}
            for e in exc.errors()
        ]
        if errors:
            loc = ".".join(str(x) for x in errors[0]["loc"] if x != "body")
            detail = f"{loc}: {errors[0]['msg']}" if loc else str(errors[0]["msg"])
        else:
            detail = "invalid request"
        return problem(422, "Unprocessable Content", detail, errors=errors)
