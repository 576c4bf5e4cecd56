"""The live index over HTTP (issue 18): admin routes behind the key, new generations picked up by the server."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from service.api import create_app
from service.api.deps import EngineHolder
from service.corpus.jsonl import read_corpus
from service.corpus.record import PatentRecord
from service.index.live import add_documents, delete_documents
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


@pytest.mark.slow
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

        def reloaded(generation: int) -> bool:
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                if c.app.state.engines.engine.generation == generation:
                    return True
                time.sleep(0.1)
            return False

        add_documents(idx, records[100:120], progress=False)
        assert reloaded(1)
        h = c.get("/health").json()
        assert h["index"]["generation"] == 1 and h["documents"] == 120
        found = c.post("/search", json={"query": records[110].title["en"], "lang": "en", "k": 5}).json()
        assert records[110].id in [r["id"] for r in found["results"]] and found["generation"] == 1
        delete_documents(idx, [records[3].id])
        assert reloaded(2)


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


# ------------------------------------------------------------------------------------------ issue 29


def test_the_api_key_never_opens_the_admin_routes(corpus: tuple[Path, list[PatentRecord]]) -> None:
    """Only PRIORART_API_KEY set: every admin route is off (403, a problem document saying so) for the search key
    too, and nothing changes; the key is checked before the body is read (no key: 401/403, never 422)."""
    d, records = corpus
    idx = _index(d, records, "apikey-only")
    with TestClient(create_app(Settings(index_dir=idx, api_key="search-key", reload_interval_s=0))) as c:
        key = {"X-API-Key": "search-key"}
        assert c.post("/search", json={"query": "motor", "k": 3}, headers=key).status_code == 200
        r = c.delete(f"/admin/documents/{records[0].id}", headers=key)
        assert r.status_code == 403 and r.headers["content-type"].startswith("application/problem+json")
        assert "admin routes are off" in r.json()["detail"] and "PRIORART_ADMIN_KEY" in r.json()["detail"]
        assert c.post("/admin/reload", headers=key).status_code == 403
        assert c.post("/admin/documents", json=[_json(records[100])], headers=key).status_code == 403
        assert c.post("/admin/documents", content=b"not json", headers=key).status_code == 403
        assert c.get(f"/documents/{records[0].id}", headers=key).status_code == 200  # still there
        assert c.get("/health").json()["index"]["generation"] == 0
    with TestClient(create_app(Settings(index_dir=idx, api_key="search-key", admin_key="admin-key",
                                        reload_interval_s=0))) as c:
        for headers in ({}, {"X-API-Key": "search-key"}, {"X-API-Key": "admin-key "}):
            for body in (b"not json", b'[{"id": 5}]'):  # the key first: never a 422 about the body
                r = c.post("/admin/documents", content=body, headers={**headers, "content-type": "application/json"})
                assert r.status_code == 401, (headers, body, r.text)
            assert c.post("/admin/reload", headers=headers).status_code == 401
        r = c.post("/admin/documents", content=b"not json", headers={"X-API-Key": "admin-key",
                                                                      "content-type": "application/json"})
        assert r.status_code == 422  # the right key: now the body is read


def test_every_key_comparison_is_constant_time(corpus: tuple[Path, list[PatentRecord]],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    import hmac

    d, records = corpus
    idx = _index(d, records, "hmac")
    compared: list[bytes] = []
    real = hmac.compare_digest

    def recording(a: bytes, b: bytes) -> bool:
        compared.append(bytes(b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", recording)
    with TestClient(create_app(Settings(index_dir=idx, api_key="search-key", admin_key="admin-key",
                                        reload_interval_s=0))) as c:
        body = {"query": "motor", "k": 3}
        assert c.post("/search", json=body, headers={"X-API-Key": "nope"}).status_code == 401
        assert c.post("/search", json=body, headers={"X-API-Key": "search-key"}).status_code == 200
        assert c.post("/admin/reload", headers={"X-API-Key": "nope"}).status_code == 401
    assert compared.count(b"search-key") == 2 and b"admin-key" in compared


def test_storage_failures_are_507_and_say_the_disk_is_full(corpus: tuple[Path, list[PatentRecord]],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """ENOSPC while writing a segment (POST) or the manifest (DELETE): 507, committed false, the generation the
    index stays at (was: 422 and 404); EIO: 503. Nothing changed. No path on disk in the replies."""
    import errno

    from service.index.folder import IndexFolder

    d, records = corpus
    idx = _index(d, records, "enospc")
    key = {"X-API-Key": "k"}

    def fail(code: int) -> object:
        def raise_(*args: object, **kwargs: object) -> None:
            raise OSError(code, os.strerror(code), str(idx / "segments" / "x" / "meta.json"))
        return raise_

    with TestClient(create_app(Settings(index_dir=idx, admin_key="k", reload_interval_s=0))) as c:
        monkeypatch.setattr("service.index.live.write_meta", fail(errno.ENOSPC))
        r = c.post("/admin/documents", json=[_json(records[100])], headers=key)
        assert r.status_code == 507 and r.headers["content-type"].startswith("application/problem+json"), r.text
        body = r.json()
        assert body["committed"] is False and body["generation"] == 0 and body["disk_full"] is True
        assert "the disk is full" in body["detail"] and "unchanged at generation 0" in body["detail"]
        assert str(d) not in r.text and "segments/x/meta.json" in r.text
        monkeypatch.undo()
        monkeypatch.setattr(IndexFolder, "write_generation", fail(errno.ENOSPC))
        r = c.delete(f"/admin/documents/{records[0].id}", headers=key)
        assert r.status_code == 507 and r.json()["committed"] is False, r.text
        monkeypatch.setattr(IndexFolder, "write_generation", fail(errno.EIO))
        r = c.delete(f"/admin/documents/{records[0].id}", headers=key)
        assert r.status_code == 503 and "I/O error" in r.json()["detail"] and r.json()["disk_full"] is False
        monkeypatch.undo()
        assert c.get(f"/documents/{records[0].id}").status_code == 200
        assert c.get(f"/documents/{records[100].id}").status_code == 404
        r = c.delete("/admin/documents/EP9999999A1", headers=key)
        assert r.status_code == 404 and r.json()["committed"] is False


@pytest.mark.slow
def test_a_committed_batch_whose_compaction_fails_is_207_committed(corpus: tuple[Path, list[PatentRecord]],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The issue's case over HTTP: the add's segment makes a run of MERGE_FACTOR small segments, and the disk fills
    during their merge: 207 with committed true and the generation (was: 422 "unchanged at generation 10" while the
    new document was served)."""
    import errno

    import service.index.live as live

    d, records = corpus
    idx = _index(d, records, "compaction")
    for i in range(live.MERGE_FACTOR - 1):  # the build's segment and 3 of one document
        live.add_documents(idx, [records[100 + i]], progress=False)
    real_merge = live.merge_segments

    def merge_on_a_full_disk(*args: object, **kwargs: object) -> object:
        def full(*a: object, **k: object) -> None:
            raise OSError(errno.ENOSPC, "No space left on device")
        monkeypatch.setattr(live, "write_meta", full)
        return real_merge(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(live, "merge_segments", merge_on_a_full_disk)
    with TestClient(create_app(Settings(index_dir=idx, admin_key="k", reload_interval_s=0))) as c:
        r = c.post("/admin/documents", json=[_json(records[115])], headers={"X-API-Key": "k"})
        assert r.status_code == 207, r.text
        body = r.json()
        assert body["committed"] is True and body["generation"] == live.MERGE_FACTOR and body["added"] == 1
        assert body["loaded"] is True and body["disk_full"] is True and "merge of segments" in body["failed_step"]
        assert f"committed at generation {live.MERGE_FACTOR}" in body["error"] and "unchanged" not in body["error"]
        assert "index_dir" not in body and str(d) not in r.text
        assert c.get(f"/documents/{records[115].id}").status_code == 200


def test_a_damaged_record_is_a_503_naming_it(corpus: tuple[Path, list[PatentRecord]],
                                             caplog: pytest.LogCaptureFixture) -> None:
    """One flipped byte in the doc store of a serving index: GET /documents/{id} is a 503 problem document that
    names the record and its segment, and the error is logged (was: a bare 500)."""
    d, records = corpus
    idx = _index(d, records, "flip")
    with TestClient(create_app(Settings(index_dir=idx, reload_interval_s=0))) as c:
        target = records[7]
        docs = idx / "docs.jsonl"
        with open(docs, "r+b") as fh:  # in place: the server reads the file it opened at load
            data = fh.read()
            at = data.index(b'{"id":"' + target.id.encode()) + 1
            fh.seek(at)
            fh.write(b"#")
        r = c.get(f"/documents/{target.id}")
        assert r.status_code == 503 and r.headers["content-type"].startswith("application/problem+json"), r.text
        body = r.json()
        assert body["record"] == target.id and body["segment"] == "." and target.id in body["detail"]
        assert "docs.jsonl" in body["detail"] and str(d) not in r.text
        assert any(target.id in rec.getMessage() and rec.levelname == "ERROR" for rec in caplog.records)
        assert c.get(f"/documents/{records[8].id}").status_code == 200


def test_probes_answer_head_and_public_replies_name_no_disk_path(corpus: tuple[Path, list[PatentRecord]]) -> None:
    d, records = corpus
    idx = _index(d, records, "probes")
    with TestClient(create_app(Settings(index_dir=idx, admin_key="k", reload_interval_s=0))) as c:
        for path in ("/health", "/ready", "/metrics", "/"):
            r = c.head(path)
            assert r.status_code == 200 and r.content == b"", path
        h = c.get("/health")
        assert h.status_code == 200 and str(d) not in h.text and str(idx.resolve()) not in h.text
        assert "path" not in h.json()["index"] and h.json()["index"]["generation"] == 0
        r = c.post("/admin/documents", json=[_json(records[100])], headers={"X-API-Key": "k"})
        assert r.status_code == 200 and str(d) not in r.text and "index_dir" not in r.json()
        r = c.post("/admin/reload", headers={"X-API-Key": "k"})
        assert r.status_code == 200 and str(d) not in r.text
        (idx / "meta.json").write_text("{")  # a reload refused: the reason, without the path
        r = c.post("/admin/reload", headers={"X-API-Key": "k"})
        assert r.status_code == 409 and "meta.json" in r.json()["detail"] and str(d) not in r.text


def test_strict_integers_and_live_counts(corpus: tuple[Path, list[PatentRecord]]) -> None:
    d, records = corpus
    idx = _index(d, records, "strict")
    from service.index.live import delete_documents

    delete_documents(idx, [r.id for r in records[:3]])
    with TestClient(create_app(Settings(index_dir=idx, reload_interval_s=0))) as c:
        for bad in ({"k": True}, {"k": "5"}, {"k": 5.5}, {"depth": "100"}, {"depth": False},
                    {"feedback": {"relevant": [records[5].id], "terms": "3"}}):
            r = c.post("/search", json={"query": "motor", **bad})
            assert r.status_code == 422 and r.json()["errors"], (bad, r.text)
        assert c.post("/passages", json={"query": "motor", "k": "3"}).status_code == 422
        assert c.post("/claimchart", json={"claim_text": "1. A motor.", "k": True}).status_code == 422
        assert c.post("/search", json={"query": "motor", "k": 5}).status_code == 200
        r = c.post("/search", json={"query": "EP9999999A1"})
        assert r.status_code == 422 and "(97 live documents)" in r.json()["detail"], r.text
