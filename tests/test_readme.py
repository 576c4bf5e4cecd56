"""The README's API examples (its ``curl`` lines) are what the API takes: each body fits its request schema, and on
the real data each example is answered (issue 30: the README's /report example was a 422)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
CURL = re.compile(r"curl -s '?http://127\.0\.0\.1:8000(?P<path>[^\s']+)'?(?: -H '[^']*')*(?: -d '(?P<body>[^']*)')?")
ENDPOINTS = ("/search", "/passages", "/claimchart", "/report", "/documents/", "/codes")


@dataclass
class Example:
    path: str
    body: dict[str, Any] | None

    @property
    def endpoint(self) -> str:
        return next(e for e in ENDPOINTS if self.path.startswith(e))


def readme_examples() -> list[Example]:
    """Every ``curl`` line of the README's code blocks: its path (with the query string) and its JSON body."""
    text = README.read_text(encoding="utf-8")
    blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    out = []
    for block in blocks:
        for m in CURL.finditer(block):
            body = m.group("body")
            out.append(Example(m.group("path"), json.loads(body) if body is not None else None))
    return out


def test_the_readme_is_short_enough_to_read() -> None:
    """Issue 31: the README is for users (what it is, two commands, a tour), at most 200 lines; results go to docs/."""
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines (at most 200: move measured results to docs/)"


def test_the_readme_has_an_example_of_each_endpoint() -> None:
    assert {e.endpoint for e in readme_examples()} == set(ENDPOINTS)


def test_readme_bodies_fit_the_request_schemas() -> None:
    from service.schema import ClaimChartRequest, PassageRequest, ReportRequest, SearchRequest

    models = {"/search": SearchRequest, "/passages": PassageRequest, "/claimchart": ClaimChartRequest,
              "/report": ReportRequest}
    for ex in readme_examples():
        model = models.get(ex.endpoint)
        assert (ex.body is not None) == (model is not None), ex.path
        if model is not None:
            model.model_validate(ex.body)  # raises what the API would answer with a 422


@pytest.fixture(scope="module")
def client(real_index: Path) -> Iterator[Any]:
    from fastapi.testclient import TestClient

    from service.api import create_app
    from service.settings import Settings

    with TestClient(create_app(Settings(index_dir=real_index))) as c:
        yield c


@pytest.mark.realdata
def test_readme_examples_answer_on_the_real_data(client: Any) -> None:
    examples = readme_examples()
    assert examples
    for ex in examples:
        got = client.post(ex.path, json=ex.body) if ex.body is not None else client.get(ex.path)
        assert got.status_code == 200, f"{ex.path}: {got.status_code} {got.text[:300]}"
        if "json" in got.headers["content-type"]:
            answer = got.json()
            if ex.endpoint in ("/search", "/passages", "/codes"):
                assert answer if ex.endpoint == "/codes" else answer["results"], ex.path
        else:
            assert got.text.strip(), ex.path


DEMO_TIME = re.compile(r"The first run generates 5,000 synthetic patents, builds the index and serves it in about "
                       r"(?P<seconds>\d+) s")


def readme_demo_seconds() -> int:
    """The time the README quotes for the synthetic demo's first run (after the set-up)."""
    m = DEMO_TIME.search(" ".join(README.read_text(encoding="utf-8").split()))
    assert m, "the README no longer quotes the demo's first run time in the expected words"
    return int(m.group("seconds"))


@pytest.mark.slow
@pytest.mark.server
@pytest.mark.solo
def test_the_demo_time_the_readme_quotes_is_what_the_demo_takes(tmp_path: Path) -> None:
    """Issue 57 item 5: the README said the first run serves in about 30 s; it took 141 s. The demo as the README
    runs it on a new machine (5,000 synthetic patents, a new work folder, numba's cache and the document vector cache
    empty), timed to its own ``ready ... s`` line: the quoted figure is neither under half of it nor over twice it
    (the README quotes a quiet 2-core machine; here the other test worker takes a core: 160 s measured beside it,
    74 s to the build's end on a quieter machine; the figure it replaced was under a quarter of the time taken). And
    item 1: the demo's first serve compiled 59 of 61 kernel variants before it answered; the demo compiles them
    beside its build, and the server reads them from the cache."""
    import os
    import socket
    import subprocess
    import sys
    import time

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    began = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "training.cli", "demo", "--workdir", str(tmp_path / "demo"),
                             "--port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba"),
                                 "PRIORART_VECTOR_CACHE": str(tmp_path / "vectors.sqlite")})  # (a new machine's)
    said: float | None = None
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            m = re.search(r"ready (\d+) s after the demo started", line)
            if m:
                said = float(m.group(1))
                break
            if time.monotonic() - began > 600:
                break
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    assert said is not None, "".join(lines[-30:])
    kernels = [line for line in lines if "start-up: kernels" in line]
    assert kernels and "read from numba's cache" in kernels[0] and "compiled here" not in kernels[0], "".join(lines)
    quoted = readme_demo_seconds()
    assert said / 2 <= quoted <= said * 2, f"the README says about {quoted} s; the demo took {said:.0f} s"
