"""The REST API driven through the real app (TestClient runs the lifespan that loads the index)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from index_copy import copy_index

from service.api import create_app
from service.settings import Settings

pytestmark = pytest.mark.realdata


@pytest.fixture(scope="module")
def client(real_index: Path) -> Iterator[TestClient]:
    with TestClient(create_app(Settings(index_dir=real_index))) as c:
        yield c


def test_health_ready_and_openapi(client: TestClient) -> None:
    h = client.get("/health").json()
    assert h["status"] == "ok" and h["documents"] >= 479
    assert h["stages"][:2] == ["resolve", "bm25"] and h["stages"][-4:] == ["fusion", "evidence", "collapse", "explain"]
    assert h["index"]["format_version"] == 2
    assert client.get("/ready").json() == {"ready": True}
    spec = client.get("/openapi.json").json()
    assert {"/search", "/passages", "/documents/{doc_id}", "/health", "/ready", "/metrics"} <= set(spec["paths"])
    for path, model in (("/search", "SearchResponse"), ("/passages", "PassageResponse")):  # (answered as JSON bytes)
        schema = spec["paths"][path]["post"]["responses"]["200"]["content"]["application/json"]["schema"]
        assert schema == {"$ref": f"#/components/schemas/{model}"}


def test_search_english_finds_the_electrophotographic_grant(client: TestClient) -> None:
    r = client.post("/search", json={"query": "electrophotographic apparatus with process cartridge and developing "
                                              "roller", "k": 5, "explain": True})
    assert r.status_code == 200, r.text
    body = r.json()
    ids = [h["id"] for h in body["results"]]
    assert "EP0640886B1" in ids
    top = body["results"][0]
    # the components that shaped the ranking (BM25 alone here), the fused score, the best passage's score and the
    # learned ranker's that the first results were ordered by (the default: the index holds the project's ranker),
    # nothing unused
    assert body["ranked_by"] == "learned ranker" and body["query"]["predicted_codes"]
    assert set(top["components"]) == {*body["fusion"]["weights"], "fused", "evidence", "ranker"} == {
        "bm25", "dense", "fused", "evidence", "ranker"}  # (the default build: BM25 and the dense cosine fused)
    fused = client.post("/search", json={"query": "electrophotographic apparatus with process cartridge and "
                                                  "developing roller", "k": 5, "evidence_docs": 0}).json()
    assert fused["ranked_by"] == "fusion" and set(fused["results"][0]["components"]) == {"bm25", "dense", "fused"}
    assert fused["results"][0]["components"]["bm25"] == pytest.approx(1.0)  # min-max over the candidates: best is 1
    assert top["matched_terms"], "explain=true must list matched terms"
    assert [s["name"] for s in body["stages"]][:2] == ["resolve", "bm25"] and body["took_ms"] > 0
    assert not any("BM25 only" in n for n in body["notices"])  # (the dense stage is fused with it)
    bad = client.post("/search", json={"query": "toner", "fusion": "linlearn"})
    assert bad.status_code == 422 and "train-ltr --install" in bad.json()["detail"]


def test_search_by_publication_number_excludes_itself(client: TestClient) -> None:
    body = client.post("/search", json={"query": "EP0640886B1", "k": 10}).json()
    assert body["query"]["text_from"] == "EP0640886B1"
    assert "EP0640886B1" not in [h["id"] for h in body["results"]]
    assert body["results"], "a real document must find some neighbours"


def test_a_publication_number_searches_what_was_published_before_its_priority_date(client: TestClient) -> None:
    """Issue 61: a publication number's prior art is what was published before its priority date: the default cut-off,
    said in the response; ``priority_cutoff: false`` searches every date."""
    body = client.post("/search", json={"query": "EP0640886B1", "k": 50}).json()
    cut = body["query"]["filters"]["before"]
    assert body["query"]["filters"]["before_from"] in ("priority date", "filing date")
    assert all(h["publication_date"] < cut for h in body["results"] if h["publication_date"])
    assert any("prior art of EP0640886B1" in n for n in body["notices"])
    every = client.post("/search", json={"query": "EP0640886B1", "k": 50, "priority_cutoff": False}).json()
    assert "before" not in every["query"]["filters"]
    assert any(h["publication_date"] and h["publication_date"] >= cut for h in every["results"])


def test_a_query_in_the_language_filters_the_ranking_and_a_syntax_error_says_where(client: TestClient) -> None:
    body = client.post("/search", json={"query": "cl=(Dichtung AND Gehäuse) AND pd<2015", "k": 20}).json()
    read = body["query"]["filters"]["query"]
    assert read["parsed"] == "((cl=dichtung AND cl=gehäuse) AND pd<2015)" and read["ranked_by"] == "dichtung gehäuse"
    assert body["results"] and all(h["publication_date"] < "2015-01-01" for h in body["results"])
    assert len(body["results"]) <= body["query"]["filters"]["n_allowed"]
    # where each result matched: both terms in its claims (cl=), nowhere else said
    assert all(h["fields"] == {"cl=dichtung": ["cl"], "cl=gehäuse": ["cl"]} for h in body["results"]), body["results"]
    either = client.post("/search", json={"query": "cl=(Dichtung OR Gehäuse) AND pd<2015", "k": 50}).json()
    said = [set(h["clauses"]) for h in either["results"]]  # which alternative each result satisfies
    assert said and all(s and s <= {"cl=dichtung", "cl=gehäuse"} for s in said), said
    assert set().union(*said) == {"cl=dichtung", "cl=gehäuse"}
    assert all(set(h["fields"]) == set(h["clauses"]) for h in either["results"])  # (each word clause it has, in cl)
    anywhere = client.post("/search", json={"query": "toner AND roller", "k": 10}).json()["results"]
    assert anywhere and all(set(h["fields"]) == {"toner", "roller"} for h in anywhere)
    assert {f for h in anywhere for f in h["fields"]["toner"]} == {"cl", "desc"}  # (each field, the real data's)
    bad = client.post("/search", json={"query": "cl=(toner AND"})
    assert bad.status_code == 422 and bad.headers["content-type"].startswith("application/problem+json")
    problem = bad.json()
    assert problem["position"] == 13 and "a word" in problem["expected"], problem
    assert "character 14" in problem["detail"]
    none = client.post("/search", json={"query": "cl=toner AND zzqxv", "k": 5}).json()
    assert none["results"] == [] and none["query"]["filters"]["n_allowed"] == 0
    assert any("no document matches" in n and "zzqxv" in n for n in none["notices"]), none["notices"]
    free = client.post("/search", json={"query": "cl=(toner AND developing)", "syntax": "text", "k": 5}).json()
    assert "query" not in free["query"]["filters"]  # syntax text: free text whatever it holds


def test_german_query_is_translated_to_english(client: TestClient) -> None:
    body = client.post("/search", json={"query": "Elektrophotografisches Gerät mit einer Prozesseinheit, die eine "
                                        "Entwicklungswalze und eine Tonerschicht umfasst", "lang": "auto",
                                        "k": 5}).json()
    assert body["query"]["lang"] == "de" and body["query"]["translated"] is True
    assert "EP0640886B1" in [h["id"] for h in body["results"]]
    untranslated = client.post("/search", json={"query": "Elektrophotografisches Gerät", "translate": False}).json()
    assert untranslated["query"]["translated"] is False


def test_passages_skip_text_the_query_language_cannot_read(client: TestClient) -> None:
    body = client.post("/passages", json={"query": "EP0640886B1", "k": 20, "priority_cutoff": False}).json()
    assert body["results"]
    assert {p["lang"] for p in body["results"]} == {"en"}  # not matched against French descriptions
    de = client.post("/passages", json={"query": "Entwicklungswalze mit einer Tonerschicht", "k": 20}).json()
    assert de["query"]["lang"] == "de" and {p["lang"] for p in de["results"]} <= {"de", "en"}


def test_filters_and_weights(client: TestClient) -> None:
    body = client.post("/search", json={"query": "apparatus", "k": 50, "codes": ["G03G15/08"],
                                        "code_filter": "subclass", "before": "2000-01-01"}).json()
    for hit in body["results"]:
        assert any(c.startswith("G03G") for c in hit["codes"])
        assert hit["publication_date"] < "2000-01-01"
    r = client.post("/search", json={"query": "apparatus", "weights": {"bm25": 1.0}})
    assert r.status_code == 200


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"query": ""}, "query"),
        ({"query": "   "}, "blank"),
        ({"query": "x", "k": 0}, "k"),
        ({"query": "x", "k": 5000}, "limit"),
        ({"query": "x", "lang": "ja"}, "lang"),
        ({"query": "x", "codes": ["nonsense"]}, "not an IPC/CPC code"),
        ({"query": "x", "weights": {"bogus": 1}}, "unknown score names"),
        ({"query": "x", "unexpected": 1}, "unexpected"),
        ({"query": "EP9999999B1"}, "not in this index"),
        ({"query": "x" * 30_000}, "limit"),
    ],
)
def test_bad_input_is_a_4xx_problem_document(client: TestClient, body: dict, fragment: str) -> None:
    r = client.post("/search", json=body)
    assert 400 <= r.status_code < 500, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    problem = r.json()
    assert problem["status"] == r.status_code and fragment.lower() in json.dumps(problem).lower()


def test_documents_endpoint(client: TestClient) -> None:
    doc = client.get("/documents/EP0640886B1").json()
    assert doc["id"] == "EP0640886B1" and doc["title"]["en"].startswith("Electrophotographic")
    assert client.get("/documents/ep 0640886 b1").status_code == 200
    assert client.get("/documents/EP0000000X9").status_code == 404
    assert client.get("/documents/..%2F..%2Fetc%2Fpasswd").status_code == 404


def test_code_suggestions(client: TestClient) -> None:
    res = client.get("/codes", params={"q": "G03G"}).json()["results"]
    assert res and all(r["code"].startswith("G03G") for r in res)


def test_each_passage_says_its_field(client: TestClient) -> None:
    """Issue 61 item 3: a passage (and so each of its highlights) names its field as the query language does."""
    body = client.post("/passages", json={"query": "developing roller toner layer thickness regulating blade",
                                          "k": 50}).json()
    label = {"Claims": "cl", "Abstract": "ab", "Description": "desc"}
    seen = set()
    for p in body["results"]:
        assert p["field"] in ("ti", "ab", "cl", "desc")
        if p["section_path"] and p["section_path"][0] in label:
            assert p["field"] == label[p["section_path"][0]], p
        seen.add(p["field"])
    assert {"cl", "desc"} <= seen, seen


def test_passages_all_variants(client: TestClient) -> None:
    for variant in ("qsf_v", "qsf_v_title", "qsf_section", "qsf_section_propagate", "qsf_passage_propagate"):
        r = client.post("/passages", json={"query": "developing roller toner layer thickness regulating blade",
                                           "variant": variant, "k": 5, "depth": 50})
        assert r.status_code == 200, (variant, r.text)
        res = r.json()["results"]
        assert res and all(p["section_path"] is not None and p["text"] for p in res)
        assert any(p["highlights"] for p in res)
    bad = client.post("/passages", json={"query": "x", "variant": "nope"})
    assert bad.status_code == 422


def test_metrics_count_requests_and_stages(client: TestClient) -> None:
    client.post("/search", json={"query": "toner"})
    text = client.get("/metrics").text
    assert 'priorart_requests_total{method="POST",route="/search",status="200"}' in text
    assert 'priorart_stage_seconds_count{stage="bm25"}' in text
    assert "priorart_index_documents" in text


def test_ui_is_served(client: TestClient) -> None:
    r = client.get("/")
    assert r.status_code == 200 and "priorart" in r.text
    assert client.get("/static/app.js").status_code == 200


def test_api_key_and_reload(real_index: Path, tmp_path: Path) -> None:
    live = tmp_path / "live"
    copy_index(real_index, live)
    settings = Settings(index_dir=live, api_key="secret", admin_key="admin-secret")
    with TestClient(create_app(settings)) as c:
        assert c.post("/search", json={"query": "toner"}).status_code == 401
        ok = c.post("/search", json={"query": "toner"}, headers={"X-API-Key": "secret"})
        assert ok.status_code == 200
        assert c.get("/health").status_code == 200  # probes stay open
        # corrupt the live folder: reload must refuse and keep serving the old index
        # (swapped in as a new file, as a deployment would: the running index keeps its own open files)
        victim = next(p for p in sorted((live / "bm25" / "en").iterdir()) if p.suffix == ".npy")
        tmp = victim.with_suffix(".tmp")
        tmp.write_bytes(victim.read_bytes()[:-8] + b"corrupt!")
        tmp.replace(victim)
        assert c.post("/admin/reload", headers={"X-API-Key": "secret"}).status_code == 401  # the API key: no admin
        r = c.post("/admin/reload", headers={"X-API-Key": "admin-secret"})
        assert r.status_code == 409 and "old one kept" in r.json()["detail"]
        assert c.post("/search", json={"query": "toner"}, headers={"X-API-Key": "secret"}).status_code == 200
        assert c.post("/admin/reload").status_code == 401
        # swap a good index in: reload picks it up
        shutil.rmtree(live)
        copy_index(real_index, live)
        r = c.post("/admin/reload", headers={"X-API-Key": "admin-secret"})
        assert r.status_code == 200 and r.json()["reloaded"] is True


def test_body_size_limit_applies_to_declared_and_chunked_bodies(real_index: Path) -> None:
    settings = Settings(index_dir=real_index, max_body_bytes=2_000)
    with TestClient(create_app(settings)) as c:
        big = json.dumps({"query": "toner " * 1000})
        r = c.post("/search", content=big, headers={"content-type": "application/json"})
        assert r.status_code == 413 and r.json()["title"] == "Payload Too Large"

        def chunks() -> Iterator[bytes]:  # no Content-Length: the limit must still hold
            for i in range(0, len(big), 500):
                yield big[i:i + 500].encode()

        r = c.post("/search", content=chunks(), headers={"content-type": "application/json"})
        assert r.status_code == 413
        assert c.post("/search", json={"query": "toner"}).status_code == 200


@pytest.mark.parametrize("threads", [0, 1, 3])
def test_requests_run_in_as_many_threads_as_the_settings_say(real_index: Path, threads: int,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """0: /search and /passages run in the event loop's thread; n: in the n worker threads of the thread limiter."""
    import threading

    import anyio.to_thread

    from service.engine import Engine

    ran_in: list[int] = []
    for name in ("search", "passages"):
        original = getattr(Engine, name)

        def recording(self: Engine, req: object, _original: object = original) -> object:
            ran_in.append(threading.get_ident())
            return _original(self, req)  # type: ignore[operator]

        monkeypatch.setattr(Engine, name, recording)
    with TestClient(create_app(Settings(index_dir=real_index, request_threads=threads))) as c:
        ran_in.clear()  # the start-up's own first queries (service/startup.py), before the server answers
        assert c.portal is not None
        assert c.portal.call(lambda: anyio.to_thread.current_default_thread_limiter().total_tokens) == max(1, threads)
        loop_thread = c.portal.call(threading.get_ident)
        assert c.post("/search", json={"query": "toner", "k": 3}).status_code == 200
        assert c.post("/passages", json={"query": "toner", "k": 3}).status_code == 200
    assert len(ran_in) == 2
    assert all((t == loop_thread) == (threads == 0) for t in ran_in)


@pytest.mark.parametrize("threads", [0, 1])
def test_a_search_over_the_time_limit_is_a_504_in_the_loop_and_in_a_thread(real_index: Path, threads: int,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """In a worker thread the answer is 504 at the limit; in the loop (nothing can interrupt the engine) when the
    engine returns: a whole problem document either way, never a 200 cut short; the next request is answered."""
    import time

    from service.engine import Engine

    original = Engine.search
    slow = {"on": True}

    def slow_search(self: Engine, req: object) -> object:
        if slow["on"]:
            time.sleep(0.5)
        return original(self, req)  # type: ignore[arg-type]

    monkeypatch.setattr(Engine, "search", slow_search)
    settings = Settings(index_dir=real_index, request_timeout_s=0.2, request_threads=threads)
    with TestClient(create_app(settings)) as c:
        r = c.post("/search", json={"query": "toner", "k": 3})
        assert r.status_code == 504 and r.headers["content-type"].startswith("application/problem+json")
        assert r.json()["detail"] == "request took over 0.2 s"
        slow["on"] = False
        assert c.post("/search", json={"query": "toner", "k": 3}).json()["results"]
