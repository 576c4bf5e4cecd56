"""The live index over HTTP (issue 18): admin routes behind the key, new generations picked up by the server."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from service.api import create_app
from service.api.deps import EngineHolder
from service.corpus.jsonl import read_corpus
from service.corpus.record import PatentRecord
from service.index.live import add_documents
from service.settings import Settings


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[PatentRecord]]:
    from training.synth import SynthConfig, write_synthetic

    d = tmp_path_factory.mktemp("api-live")
    write_synthetic(d / "c.jsonl", SynthConfig(n=120, seed=3), progress=False)
    return d, list(read_corpus(d / "c.jsonl"))


def _index(d: Path, records: list[PatentRecord], name: str) -> Path:
    from training.build import build_index

    build_index(records[:100], d / name, translation=False, compounds="", progress=False)
    return d / name


def _json(rec: PatentRecord) -> dict:
    return rec.model_dump(mode="json", exclude_defaults=True)


def test_admin_documents_need_the_key(corpus: tuple[Path, list[PatentRecord]]) -> None:
    d, records = corpus
    idx = _index(d, records, "nokey")
    with TestClient(create_app(Settings(index_dir=idx, reload_interval_s=0))) as c:
        assert c.post("/admin/documents", json=[_json(records[100])]).status_code == 403
        assert c.delete(f"/admin/documents/{records[0].id}").status_code == 403
    with TestClient(create_app(Settings(index_dir=idx, admin_key="s3cret", reload_interval_s=0))) as c:
        for headers in ({}, {"X-API-Key": "wrong"}, {"X-API-Key": "s3cret "}):
            assert c.post("/admin/documents", json=[_json(records[100])], headers=headers).status_code == 401
            assert c.delete(f"/admin/documents/{records[0].id}", headers=headers).status_code == 401
        key = {"X-API-Key": "s3cret"}
        r = c.post("/admin/documents", json=[_json(r) for r in records[100:110]], headers=key)
        assert r.status_code == 200, r.text
        assert r.json()["generation"] == 1 and r.json()["added"] == 10 and r.json()["loaded"] is True
        assert c.get(f"/documents/{records[105].id}").status_code == 200
        s = c.post("/search", json={"query": records[105].title["en"], "lang": "en", "k": 5}).json()
        assert s["generation"] == 1 and s["results"][0]["id"] == records[105].id
        r = c.delete(f"/admin/documents/{records[105].id}", headers=key)
        assert r.status_code == 200 and r.json()["generation"] == 2
        assert c.get(f"/documents/{records[105].id}").status_code == 404
        s = c.post("/search", json={"query": records[105].title["en"], "lang": "en", "k": 100}).json()
        assert records[105].id not in {h["id"] for h in s["results"]} and s["generation"] == 2
        assert c.delete(f"/admin/documents/{records[105].id}", headers=key).status_code == 404
        assert c.get("/health").json()["index"]["generation"] == 2


def test_server_picks_up_a_new_generation_by_itself(corpus: tuple[Path, list[PatentRecord]]) -> None:
    d, records = corpus
    idx = _index(d, records, "watch")
    with TestClient(create_app(Settings(index_dir=idx, reload_interval_s=0.1))) as c:
        assert c.get("/health").json()["index"]["generation"] == 0
        add_documents(idx, records[100:120], progress=False)
        deadline = time.monotonic() + 20
        while c.get("/health").json()["index"]["generation"] != 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        h = c.get("/health").json()
        assert h["index"]["generation"] == 1 and h["documents"] == 120


def test_a_replaced_engine_is_closed_after_its_requests() -> None:
    class FakeEngine:
        closed = False

        def close(self) -> None:
            self.closed = True

    old, new = FakeEngine(), FakeEngine()
    holder = EngineHolder(old)  # type: ignore[arg-type]
    got = holder.acquire()
    assert got is old
    holder.swap(new)  # type: ignore[arg-type]
    assert holder.engine is new and not old.closed  # a request still holds it
    holder.release(old)  # type: ignore[arg-type]
    assert old.closed and holder.in_flight() == 0
    idle = FakeEngine()
    holder.swap(idle)  # type: ignore[arg-type]
    assert new.closed  # nobody held it: closed at once
