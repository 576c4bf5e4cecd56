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


RESULTS = README.parent / "docs" / "RESULTS.md"
MEASURED_DEMO = re.compile(r"The demo's first run \(5,000 synthetic documents, the dense stage, numba's cache empty, "
                           r"quiet machine\): ready (?P<seconds>\d+) s")


def test_the_demo_time_the_readme_quotes_is_the_measured_one() -> None:
    """Issue 57 item 5: the README said the first run serves in about 30 s; it took 141 s. The time is measured by
    ``priorart-lab bench demo`` (the README's run on a new machine, its caches empty) and recorded in docs/RESULTS.md;
    the README quotes that figure, rounded (within 10 %). (A timed assertion in a test measured the test machine's load:
    the benchmark prints the figure, and compares it with the quote itself.)"""
    from lab.benchmarks.demo import readme_seconds

    quoted = readme_seconds(README)
    assert quoted is not None, "the README no longer quotes the demo's first run time in the expected words"
    m = MEASURED_DEMO.search(" ".join(RESULTS.read_text(encoding="utf-8").split()))
    assert m, "docs/RESULTS.md no longer records the demo's first run (priorart-lab bench demo)"
    measured = int(m.group("seconds"))
    assert abs(quoted - measured) <= 0.1 * measured, f"the README quotes {quoted} s, docs/RESULTS.md {measured} s"
