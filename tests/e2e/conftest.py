"""Fixtures shared by the end-to-end tests: an artifacts folder per test module and a live server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from liveserver import LiveServer, artifacts_dir, live_server, service_index


@pytest.fixture(scope="module")
def artifacts(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``<artifacts>/<module name without test_>``: screenshots, server logs, reports."""
    out = artifacts_dir(tmp_path_factory) / request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_")
    out.mkdir(parents=True, exist_ok=True)
    return out


@pytest.fixture(scope="module")
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
           artifacts: Path) -> Iterator[LiveServer]:
    """A real ``priorart serve`` on a free localhost port over the session's index."""
    with live_server(service_index(request, tmp_path_factory), artifacts / "serve.log") as s:
        yield s
