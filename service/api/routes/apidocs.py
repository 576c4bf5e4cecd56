"""/docs: Swagger UI over /openapi.json, its JavaScript, CSS and icon served by this app (no CDN).

FastAPI's own /docs page loads Swagger UI from a CDN, and is blank where there is no network (an analyst's
often has none). The files come from the ``swagger-ui-bundle-v2`` package (the ``service`` extra: Swagger UI 5,
which reads OpenAPI 3.1) and are served under ``/docs/assets``; without that package /docs says what to install.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS = "/docs/assets"
FILES = ("swagger-ui-bundle.js", "swagger-ui.css", "favicon-32x32.png")


def swagger_ui_dir() -> Path | None:
    """The folder of the Swagger UI files of the installed package (None: not installed, or missing files)."""
    try:
        from swagger_ui_bundle import swagger_ui_path
    except ImportError:
        return None
    path = Path(str(swagger_ui_path))
    return path if all((path / f).is_file() for f in FILES) else None


def install(app: FastAPI) -> None:
    """Add /docs (and Swagger UI's OAuth2 redirect page) to an app made with ``docs_url=None``."""
    folder = swagger_ui_dir()
    if folder is not None:
        app.mount(ASSETS, StaticFiles(directory=folder), name="docs-assets")
    redirect = "/docs/oauth2-redirect"

    @app.get("/docs", include_in_schema=False)
    def docs() -> HTMLResponse:
        if folder is None:
            return HTMLResponse("<!doctype html><title>priorart API docs</title><p>The API docs page needs Swagger "
                                "UI's files: <code>pip install swagger-ui-bundle-v2</code> (in the <code>service"
                                "</code> extra). The API itself is described at <a href=\"/openapi.json\">"
                                "/openapi.json</a>.</p>", status_code=503)
        return get_swagger_ui_html(openapi_url=app.openapi_url or "/openapi.json", title=f"{app.title} - API docs",
                                   oauth2_redirect_url=redirect, swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
                                   swagger_css_url=f"{ASSETS}/swagger-ui.css",
                                   swagger_favicon_url=f"{ASSETS}/favicon-32x32.png")

    @app.get(redirect, include_in_schema=False)
    def oauth2_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()
