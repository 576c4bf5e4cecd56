"""What a newcomer ran into (issue 30), through the app over a small synthetic trilingual index with its
translation tables: what the query summary says was translated."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from service.api import create_app
from service.settings import Settings

pytestmark = pytest.mark.slow  # a trilingual index with its translation tables, built for the module (18 s)


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from training.build import build_index
    from training.synth import generate

    out = tmp_path_factory.mktemp("newcomer") / "index"
    build_index(list(generate(150, seed=3)), out, progress=False)
    return out


@pytest.fixture(scope="module")
def client(index: Path) -> Iterator[TestClient]:
    with TestClient(create_app(Settings(index_dir=index))) as c:
        yield c


def test_the_query_summary_names_the_languages_it_was_translated_into(client: TestClient) -> None:
    """An English query's summary said 'translated to English': it was translated into German and French."""
    en = client.post("/search", json={"query": "a rotor with a bearing", "lang": "en"}).json()["query"]
    assert en["translated_to"] == ["de", "fr"] and en["routes"] == ["en", "de:psq", "fr:psq"]
    de = client.post("/search", json={"query": "ein Rotor mit einem Lager", "lang": "de"}).json()["query"]
    assert de["translated_to"] == ["en", "fr"]
    plain = client.post("/search", json={"query": "a rotor", "lang": "en", "translate": False}).json()["query"]
    assert plain["translated_to"] == []
    page = client.get("/static/app.js").text  # the page's status line says what the server says
    assert "translated to English" not in page and "q.translated_to" in page


def test_api_docs_page_loads_nothing_from_another_host(client: TestClient) -> None:
    """/docs was blank offline: Swagger UI's files came from a CDN. Every file it references is served here."""
    import re

    page = client.get("/docs")
    assert page.status_code == 200 and "SwaggerUIBundle" in page.text
    refs = re.findall(r"""(?:src|href)\s*=\s*["']([^"']+)["']""", page.text)
    refs += re.findall(r"""url:\s*["']([^"']+)["']""", page.text)  # the OpenAPI document Swagger UI reads
    assert refs and "/openapi.json" in refs
    for ref in refs:
        assert ref.startswith("/") and not ref.startswith("//"), f"/docs loads {ref} from elsewhere"
        got = client.get(ref)
        assert got.status_code == 200 and got.content, ref
    types = {ref.rsplit(".", 1)[-1]: client.get(ref).headers["content-type"] for ref in refs}
    assert types["js"].startswith(("text/javascript", "application/javascript")) and types["css"].startswith("text/css")
    assert client.get("/docs/oauth2-redirect").status_code == 200
