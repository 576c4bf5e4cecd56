"""Where the browser UI's files live: ``static/`` (index.html, app.js, style.css).

Its own module so that the app factory (mounts ``/static``) and the ``/`` route (serves index.html)
both import it without importing each other.
"""

from __future__ import annotations

from pathlib import Path

STATIC_DIR = Path(__file__).parent / "static"
