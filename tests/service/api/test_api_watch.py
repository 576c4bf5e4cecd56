"""The watch routes (issue 34): save, list, read, delete; each API key sees only its own watches; new generations
(``POST /admin/documents``, or one the server picks up, or one written while it was down) are evaluated by the
server, the hits read with ``since`` and as an Atom feed; bad input is a 4xx that says what is wrong."""

from __future__ import annotations

import time
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
from fastapi.testclient import TestClient
from index_copy import copy_index

from service.api import create_app
from service.corpus.record import PatentRecord
from service.index.live import add_documents
from service.settings import Settings

ADMIN = {"X-API-Key": "admin-secret"}
A = {"X-API-Key": "key-a"}
B = {"X-API-Key": "key-b"}
ATOM = "{http://www.w3.org/2005/Atom}"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[PatentRecord]]:
    from suite_corpus import suite_records

    from training.build import build_index

    d = tmp_path_factory.mktemp("api-watch")
    records = suite_records(330)  # (the suite's collection: tests/suite_corpus.py)
    build_index(records[:300], d / "index", translation=False, compounds="", progress=False)
    return d / "index", records


def _index(built: tuple[Path, list[PatentRecord]], tmp_path: Path) -> Path:
    copy_index(built[0], tmp_path / "index")
    return tmp_path / "index"


def _claim(rec: PatentRecord) -> str:
    return " ".join(c.text for c in rec.claims["en"][:2])


def _app(idx: Path, **kw: object) -> TestClient:
    settings = Settings(index_dir=idx, api_key="key-a, key-b", admin_key="admin-secret", reload_interval_s=0,
                        **kw)  # type: ignore[arg-type]
    return TestClient(create_app(settings))


def _evaluated(c: TestClient, watch_id: str, generation: int, headers: dict[str, str]) -> dict:
    runner = c.app.state.watch_runner  # type: ignore[attr-defined]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        runner.wait_idle(1.0)
        w = c.get(f"/watches/{watch_id}", headers=headers).json()
        if w["evaluated_generation"] >= generation:
            return w
    raise AssertionError(f"watch {watch_id} not evaluated at generation {generation}: {w}")


def test_watches_per_key_hits_since_and_feed(built: tuple[Path, list[PatentRecord]], tmp_path: Path) -> None:
    idx = _index(built, tmp_path)
    records = built[1]
    new = [r for r in records[300:] if r.claims.get("en")]
    with _app(idx) as c:
        assert c.get("/watches").status_code == 401  # no key
        assert c.get("/watches", headers={"X-API-Key": "key-c"}).status_code == 401
        assert c.get("/watches", headers=A).json() == []  # no state folder yet: none
        r = c.post("/watches", json={"query": _claim(new[0]), "lang": "en", "k": 5, "name": "first"}, headers=A)
        assert r.status_code == 201, r.text
        wa = r.json()
        assert (wa["name"], wa["created_generation"], wa["evaluated_generation"], wa["hits"]) == ("first", 0, 0, 0)
        assert wa["request"]["k"] == 5
        wb = c.post("/watches", json={"query": _claim(new[1]), "lang": "en", "k": 5}, headers=B).json()
        assert wb["name"].startswith(_claim(new[1])[:20])
        # each key sees its own only; another key's watch does not exist for it
        assert [w["id"] for w in c.get("/watches", headers=A).json()] == [wa["id"]]
        assert [w["id"] for w in c.get("/watches", headers=B).json()] == [wb["id"]]
        for path in (f"/watches/{wa['id']}", f"/watches/{wa['id']}/hits", f"/watches/{wa['id']}/feed"):
            assert c.get(path, headers=B).status_code == 404 and c.get(path, headers=A).status_code == 200
        assert c.delete(f"/watches/{wa['id']}", headers=B).status_code == 404
        assert (tmp_path / "index.state" / "watches.sqlite").is_file() and not (idx / "watches.sqlite").exists()
        # an add over HTTP: the server loads the generation and evaluates the watches against it
        docs = [r.model_dump(mode="json", exclude_defaults=True) for r in new[:10]]
        assert c.post("/admin/documents", json=docs, headers=ADMIN).json()["generation"] == 1
        w = _evaluated(c, wa["id"], 1, A)
        got = c.get(f"/watches/{wa['id']}/hits", headers=A).json()
        ids = [h["doc_id"] for h in got["hits"]]
        assert ids[0] == new[0].id and w["hits"] == len(ids) and w["last_hit_generation"] == 1
        top = [h["id"] for h in c.post("/search", json={"query": _claim(new[0]), "lang": "en", "k": 5,
                                                        "collapse_families": False}, headers=A).json()["results"]]
        assert ids == [d for d in top if d in {r.id for r in new[:10]}]
        first = got["hits"][0]
        assert (first["generation"], first["rank"]) == (1, 1) and first["passage"]["doc_id"] == new[0].id
        assert first["passage"]["text"] and first["passage"]["highlights"]
        assert c.get(f"/watches/{wa['id']}/hits?since=1", headers=A).json()["hits"] == []
        assert len(c.get(f"/watches/{wa['id']}/hits?since=0", headers=A).json()["hits"]) == len(ids)
        # the Atom feed: one entry per hit, its passage in the content
        feed = c.get(f"/watches/{wa['id']}/feed", headers=A)
        assert feed.headers["content-type"].startswith("application/atom+xml")
        root = ET.fromstring(feed.content)
        entries = root.findall(f"{ATOM}entry")
        assert root.tag == f"{ATOM}feed" and root.find(f"{ATOM}id").text == f"urn:priorart:watch:{wa['id']}"
        assert [e.find(f"{ATOM}id").text for e in entries] == [f"urn:priorart:watch:{wa['id']}:1:{d}" for d in ids]
        assert "<mark>" in entries[0].find(f"{ATOM}content").text
        assert entries[0].find(f"{ATOM}link").get("href").endswith(f"/documents/{new[0].id}")
        # a generation the server picks up by itself (written by another process)
        add_documents(idx, new[10:], progress=False)
        c.post("/admin/reload", headers=ADMIN)
        assert _evaluated(c, wb["id"], 2, B)["evaluated_generation"] == 2
        assert c.delete(f"/watches/{wa['id']}", headers=A).status_code == 204
        assert c.get(f"/watches/{wa['id']}", headers=A).status_code == 404
        assert c.delete(f"/watches/{wa['id']}", headers=A).status_code == 404


def test_watches_survive_a_restart_and_the_generation_written_meanwhile(built: tuple[Path, list[PatentRecord]],
                                                                        tmp_path: Path) -> None:
    idx = _index(built, tmp_path)
    new = [r for r in built[1][300:] if r.claims.get("en")]
    with _app(idx) as c:
        w = c.post("/watches", json={"query": _claim(new[2]), "lang": "en", "k": 3}, headers=A).json()
    add_documents(idx, new, progress=False)  # no server running: nobody evaluates it now
    with _app(idx) as c:  # the new server evaluates the generation it loads
        got = _evaluated(c, w["id"], 1, A)
        assert got["id"] == w["id"] and got["created"] == w["created"] and got["hits"] >= 1
        hits = c.get(f"/watches/{w['id']}/hits", headers=A).json()["hits"]
        assert hits[0]["doc_id"] == new[2].id
    with _app(idx) as c:  # and once more: nothing is evaluated twice or lost
        assert c.get(f"/watches/{w['id']}/hits", headers=A).json()["hits"] == hits


def test_bad_input_is_a_4xx_that_says_why(built: tuple[Path, list[PatentRecord]], tmp_path: Path) -> None:
    idx = _index(built, tmp_path)
    with _app(idx) as c:
        cases = [
            ({"query": "rotor", "k": 0}, "k"),
            ({"query": "rotor", "k": 101}, "k"),
            ({"query": "rotor", "k": "5"}, "k"),
            ({"query": "   "}, "blank"),
            ({"k": 5}, "query"),
            ({"query": "rotor", "lang": "es"}, "lang"),
            ({"query": "rotor", "colour": "red"}, "colour"),
            ({"query": "rotor", "code_filter": "family"}, "code_filter"),
            ({"query": "rotor", "before": "yesterday"}, "before"),
            ({"query": "the of and", "lang": "en"}, "no index terms"),
            ({"query": "EP9999999A1"}, "EP9999999A1"),
            ({"query": "x" * 20_001}, "20000"),
            ({"query": "ti=(rotor and"}, "query syntax error at character 14"),  # the query language's errors too
            ({"query": "rotor", "syntax": "boolean"}, "syntax"),
        ]
        for body, said in cases:
            r = c.post("/watches", json=body, headers=A)
            assert r.status_code == 422, (body, r.text)
            assert r.headers["content-type"].startswith("application/problem+json")
            assert said in r.json()["detail"], (body, r.json()["detail"])
        assert c.post("/watches", content=b"{not json", headers={**A, "Content-Type": "application/json"}
                      ).status_code == 422
        w = c.post("/watches", json={"query": "rotor blade"}, headers=A).json()
        boolean = c.post("/watches", json={"query": "ti=rotor* AND NOT blade", "drop_translations": ["x"]},
                         headers=A)
        assert boolean.status_code == 201, boolean.text
        assert boolean.json()["request"]["syntax"] == "auto" and boolean.json()["request"]["drop_translations"] == ["x"]
        for since in ("-1", "abc"):
            r = c.get(f"/watches/{w['id']}/hits?since={since}", headers=A)
            assert r.status_code == 422 and "since" in r.json()["detail"]
        r = c.get("/watches/nope", headers=A)
        assert r.status_code == 404 and r.json()["detail"] == "no watch 'nope'"
    # a state folder inside the index folder is refused, without naming server paths
    with _app(idx, state_dir=idx / "state") as c:
        r = c.post("/watches", json={"query": "rotor blade"}, headers=A)
        assert r.status_code == 503 and "inside the index folder" in r.json()["detail"]
        assert str(tmp_path) not in r.json()["detail"]
        assert not (idx / "state").exists()
