"""Watch webhooks (issue 62 item 3): each evaluation's new hits are POSTed to the watch's URL, signed, at least once:
a receiver that fails gets them later, a crash between the evaluation and the push loses nothing, and the API shows
the delivery log. Against a real HTTP receiver on 127.0.0.1, on SQLite and on PostgreSQL."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.corpus.jsonl import read_corpus
from service.corpus.record import PatentRecord
from service.engine import Engine
from service.index.live import add_documents
from service.settings import Settings
from service.watch.evaluate import evaluate, save_watch
from service.watch.models import SECRET_SHOWN, WatchRequest, Webhook
from service.watch.store import WatchStore, state_dir
from service.watch.webhooks import SIGNATURE_HEADER, WebhookRefusedError, check_url, deliver

pytestmark = pytest.mark.slow  # a 300-document index built for the module

N_BASE = 300
SECRET = "a-shared-secret-of-the-receiver"
REPO = Path(__file__).resolve().parents[3]


class Receiver:
    """A webhook receiver on 127.0.0.1: answers 500 to its first ``fail_first`` calls, then 200; keeps every body it
    accepted and checks each signature."""

    def __init__(self, fail_first: int = 0, port: int = 0) -> None:
        self.fail_first, self.calls, self.accepted = fail_first, 0, []
        self.bad_signatures = 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers["Content-Length"]))
                want = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
                receiver.calls += 1
                if self.headers.get(SIGNATURE_HEADER) != want:
                    receiver.bad_signatures += 1
                status = 500 if receiver.calls <= receiver.fail_first else 200
                if status == 200:
                    receiver.accepted.append(json.loads(body))
                self.send_response(status)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.port = int(self.server.server_address[1])
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    @contextlib.contextmanager
    def running(self) -> Iterator[Receiver]:
        thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self.server.shutdown()
            self.server.server_close()

    def hit_ids(self) -> list[str]:
        return [h["id"] for body in self.accepted for h in body["hits"]]


@pytest.fixture(autouse=True)
def receivers_on_this_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """The receivers here listen on 127.0.0.1, which webhooks reach only when allowed (and example.org, which does
    not resolve on a machine without DNS): the server's setting, from the environment (processes started inherit it)."""
    monkeypatch.setenv("PRIORART_WEBHOOK_ALLOW", "127.0.0.1, example.org")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[PatentRecord]]:
    from training.build import build_index
    from training.synth import SynthConfig, write_synthetic

    d = tmp_path_factory.mktemp("webhooks")
    write_synthetic(d / "all.jsonl", SynthConfig(n=N_BASE + 60, seed=31), progress=False)
    records = list(read_corpus(d / "all.jsonl"))
    build_index(records[:N_BASE], d / "index", progress=False, dense=False, translation=False, compounds="")
    return d / "index", records


def _index(built: tuple[Path, list[PatentRecord]], tmp_path: Path) -> Path:
    from index_copy import copy_index

    idx = tmp_path / "index"
    copy_index(built[0], idx)
    return idx


def _watched(records: list[PatentRecord], url: str) -> list[WatchRequest]:
    """A claim of every third document the adds bring (each ranks first once added), pushed to ``url``."""
    return [WatchRequest(query=" ".join(c.text for c in r.claims["en"][:2])[:1500], lang="en", k=5,
                         webhook=Webhook(url=url, secret=SECRET))  # type: ignore[arg-type]
            for r in records[N_BASE::3] if r.claims.get("en")]


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_receiver_that_fails_its_first_calls_gets_every_hit_once_each(built: tuple[Path, list[PatentRecord]],
                                                                         tmp_path: Path, backend: str,
                                                                         request: pytest.FixtureRequest) -> None:
    """Issue 62's goal: a receiver that fails its first 3 calls gets every hit of 20 adds, once each after
    deduplicating by the hit's id, every body signed with the watch's secret; the log shows the retries."""
    url = request.getfixturevalue("postgres_db") if backend == "postgresql" else None
    _, records = built
    idx = _index(built, tmp_path)
    store = WatchStore.open(state_dir(idx), create=True, url=url)
    with Receiver(fail_first=3).running() as receiver:
        engine = Engine.load(idx, settings=Settings(index_dir=idx, database_url=url), verify=False)
        watches = [save_watch(engine, store, "", r) for r in _watched(records, receiver.url)]
        engine.close()
        assert all(w.request.webhook is not None and w.request.webhook.secret == SECRET_SHOWN for w in watches)
        for n in range(20):
            add_documents(idx, records[N_BASE + 3 * n : N_BASE + 3 * n + 3], progress=False)
            engine = Engine.load(idx, settings=Settings(index_dir=idx, database_url=url), verify=False)
            evaluate(engine, store)
            engine.close()
            deliver(store, backoff_s=0.01)
        for _ in range(50):  # the retries of the failed ones, as the server's runner makes them when they are due
            report = deliver(store, backoff_s=0.01)
            if report.next_due is None:
                break
            time.sleep(0.05)
    stored = {f"{w.id}:{store.evaluations(w.id)[0]['build']}:{h.generation}:{h.doc_id}"
              for w in watches for h in store.hits(None, w.id) or []}
    received = receiver.hit_ids()
    assert len(stored) >= 15 and set(received) == stored  # every hit, after deduplicating by its id
    assert len(received) == len(set(received))  # (a 500 is not accepted: each accepted body once)
    assert receiver.calls >= len(receiver.accepted) + 3 and receiver.bad_signatures == 0
    log = [d for w in watches for d in store.deliveries(None, w.id) or []]
    assert all(d.delivered is not None and d.last_status == 200 and d.next_attempt is None for d in log)
    assert sum(d.attempts - 1 for d in log) == 3  # the three failures, retried
    assert sum(d.hits for d in log) == len(stored)


def test_hits_queued_before_a_crash_are_pushed_by_the_next_process(built: tuple[Path, list[PatentRecord]],
                                                                   tmp_path: Path) -> None:
    """The push is queued in the evaluation's transaction: a process that dies after evaluating (here: evaluated,
    never delivered, with the receiver down: connection refused) loses nothing; the next `priorart watch run` pushes
    the hits."""
    _, records = built
    idx = _index(built, tmp_path)
    store = WatchStore.open(state_dir(idx), create=True)
    closed = Receiver()  # its port, closed: connections are refused until the receiver below opens it
    closed.server.server_close()
    engine = Engine.load(idx, settings=Settings(index_dir=idx), verify=False)
    watches = [save_watch(engine, store, "", r) for r in _watched(records, closed.url)[:6]]
    engine.close()
    add_documents(idx, records[N_BASE : N_BASE + 18], progress=False)
    engine = Engine.load(idx, settings=Settings(index_dir=idx), verify=False)
    assert evaluate(engine, store).hits >= 3
    engine.close()
    down = deliver(store, backoff_s=0.01)  # nothing listens yet
    assert down.delivered == 0 and down.failed >= 1
    log = [d for w in watches for d in store.deliveries(None, w.id) or []]
    assert log and all(d.delivered is None and d.last_status is None and d.attempts == 1 and
                       "Connection refused" in (d.last_error or "") for d in log)
    time.sleep(0.05)
    receiver = Receiver(port=closed.port)
    with receiver.running():
        done = subprocess.run([sys.executable, "-m", "training.cli", "watch", "run", str(idx), "--json"], cwd=REPO,
                              env={**os.environ, "PRIORART_WEBHOOK_BACKOFF_S": "0.01"}, capture_output=True,
                              text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["webhooks"]["delivered"] == len(log)
    stored = {(w.id, h.doc_id) for w in watches for h in store.hits(None, w.id) or []}
    assert {(b["watch"]["id"], h["doc_id"]) for b in receiver.accepted for h in b["hits"]} == stored


def test_the_api_takes_a_webhook_hides_its_secret_and_shows_the_log(built: tuple[Path, list[PatentRecord]],
                                                                    tmp_path: Path) -> None:
    from service.api import create_app

    _, records = built
    idx = _index(built, tmp_path)
    body = {"query": records[5].title["en"], "lang": "en", "k": 5,
            "webhook": {"url": "https://example.org/hook", "secret": SECRET}}
    with TestClient(create_app(Settings(index_dir=idx))) as client:
        r = client.post("/watches", json=body)
        assert r.status_code == 201, r.text
        wid = r.json()["id"]
        assert r.json()["request"]["webhook"] == {"url": "https://example.org/hook", "secret": SECRET_SHOWN}
        assert client.get(f"/watches/{wid}").json()["request"]["webhook"]["secret"] == SECRET_SHOWN
        assert client.get(f"/watches/{wid}/deliveries").json() == []
        assert client.get("/watches/nope/deliveries").status_code == 404
        for bad in ({"url": "ftp://example.org/x", "secret": SECRET}, {"url": "https://example.org/x", "secret": "x"}):
            assert client.post("/watches", json={**body, "webhook": bad}).status_code == 422
    stored = WatchStore(state_dir(idx))
    with contextlib.closing(stored.connect()) as conn:  # the secret is kept to sign with
        request = conn.execute("SELECT request FROM watches WHERE id = ?", (wid,)).fetchone()[0]
    assert json.loads(request)["webhook"]["secret"] == SECRET


def test_a_webhook_reaches_public_addresses_only_unless_allowed(built: tuple[Path, list[PatentRecord]],
                                                                  tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                                  ) -> None:
    """SSRF: by default a webhook into the server's own network (loopback, private, link-local: the cloud metadata
    address) is refused when the watch is saved, with what to set; a host allowed when saved but not when delivering
    is refused then (logged, retried like a failure, nothing POSTed); a redirect is not followed."""
    from service.api import create_app

    monkeypatch.delenv("PRIORART_WEBHOOK_ALLOW")
    for url, kind in (("http://127.0.0.1:9/hook", "loopback"), ("http://169.254.169.254/latest", "link-local"),
                      ("http://10.1.2.3/x", "private"), ("http://[::1]:8080/x", "loopback"),
                      ("http://0.0.0.0/x", "unspecified")):
        with pytest.raises(WebhookRefusedError, match=kind):
            check_url(url)
    check_url("http://10.1.2.3/x", "10.1.0.0/16")  # a network allowed
    check_url("http://hooks.internal/x", "hooks.internal")  # a host allowed by name (not resolved)
    with pytest.raises(WebhookRefusedError, match="does not resolve"):
        check_url("http://no-such-host.invalid/x")
    _, records = built
    idx = _index(built, tmp_path)
    body = {"query": records[5].title["en"], "lang": "en", "k": 5,
            "webhook": {"url": "http://127.0.0.1:9/hook", "secret": SECRET}}
    with TestClient(create_app(Settings(index_dir=idx))) as client:
        r = client.post("/watches", json=body)
        assert r.status_code == 422 and "loopback" in r.json()["detail"], r.text
        assert "PRIORART_WEBHOOK_ALLOW" in r.json()["detail"]
    with TestClient(create_app(Settings(index_dir=idx, webhook_allow="127.0.0.1"))) as client:
        assert client.post("/watches", json=body).status_code == 201
    # saved while allowed; the server's setting changed since: the delivery is refused, nothing is sent
    store = WatchStore.open(state_dir(idx), create=True)
    with Receiver().running() as receiver:
        engine = Engine.load(idx, settings=Settings(index_dir=idx, webhook_allow="127.0.0.1"), verify=False)
        watches = [save_watch(engine, store, "", r) for r in _watched(records, receiver.url)[:4]]
        engine.close()
        add_documents(idx, records[N_BASE: N_BASE + 12], progress=False)
        engine = Engine.load(idx, settings=Settings(index_dir=idx), verify=False)
        assert evaluate(engine, store).hits >= 1
        engine.close()
        refused = deliver(store, backoff_s=0.01, allow="")
        assert refused.delivered == 0 and refused.failed >= 1 and receiver.calls == 0
        log = [d for w in watches for d in store.deliveries(None, w.id) or []]
        assert log and all("loopback" in (d.last_error or "") for d in log)
        time.sleep(0.05)
        assert deliver(store, backoff_s=0.01, allow="127.0.0.1").delivered == len(log)
    # a redirect is not followed: the 3xx is the answer (a failed delivery), the target is never called
    target = Receiver()

    class Bounce(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            self.send_response(307)
            self.send_header("Location", target.url)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    from http.server import ThreadingHTTPServer as Server

    from service.watch.webhooks import http_post

    bouncer = Server(("127.0.0.1", 0), Bounce)
    thread = threading.Thread(target=bouncer.serve_forever, daemon=True)
    thread.start()
    with target.running():
        try:
            status = http_post(f"http://127.0.0.1:{bouncer.server_address[1]}/x", b"{}", {}, 5.0)
        finally:
            bouncer.shutdown()
            bouncer.server_close()
        assert status == 307 and target.calls == 0
