"""Watches that every replica sees (issue 62): the store on a real PostgreSQL server (tests/postgres_server.py) as on
SQLite, replicas with state folders of their own sharing one database, one evaluation per watch and generation when
evaluators race and one is killed, and a rebuilt index whose next add still reaches every watch."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from watch_crash import CRASH_AT_COMMIT

from service.corpus.jsonl import read_corpus
from service.corpus.record import PatentRecord
from service.engine import Engine
from service.index.live import add_documents
from service.settings import Settings
from service.watch.db import HEAD
from service.watch.evaluate import evaluate, save_watch
from service.watch.models import WatchRequest
from service.watch.store import DB_NAME, WatchStore, state_dir

pytestmark = pytest.mark.slow  # a 300-document index built for the module, and a PostgreSQL server per worker

N_BASE = 300
REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> list[PatentRecord]:
    from training.synth import SynthConfig, write_synthetic

    d = tmp_path_factory.mktemp("shared-watch")
    write_synthetic(d / "all.jsonl", SynthConfig(n=N_BASE + 80, seed=21), progress=False)
    return list(read_corpus(d / "all.jsonl"))


def _build(records: list[PatentRecord], idx: Path, *, overwrite: bool = False) -> None:
    from training.build import build_index

    build_index(records[:N_BASE], idx, progress=False, dense=False, translation=False, compounds="",
                overwrite=overwrite)


def _load(idx: Path, url: str | None = None) -> Engine:
    return Engine.load(idx, settings=Settings(index_dir=idx, database_url=url), verify=False)


def _watch_requests(records: list[PatentRecord]) -> list[WatchRequest]:
    """Claims of documents that the adds bring (each ranks first once added), and of base documents."""
    added = [r for r in records[N_BASE:] if r.claims.get("en")][::4]
    base = [r for r in records[:N_BASE] if r.claims.get("en")][:6]
    return [WatchRequest(query=" ".join(c.text for c in r.claims["en"][:2])[:1500], lang="en", k=k)
            for r, k in zip(added + base, [1, 5, 10, 20] * 20, strict=False)]


def _new_in_top_k(engine: Engine, store: WatchStore, new: set[str]) -> dict[str, list[tuple[int, str]]]:
    """Per watch: the (rank, id) of the new documents in its top k, by re-running its search."""
    out = {}
    for w in store.watches(None):
        found = [h.id for h in engine.search(w.request.search_request()).results]
        out[w.id] = [(i, d) for i, d in enumerate(found, 1) if d in new]
    return out


def _hits_at(store: WatchStore, generation: int) -> dict[str, list[tuple[int, str]]]:
    return {w.id: sorted((h.rank, h.doc_id) for h in store.hits(None, w.id) or [] if h.generation == generation)
            for w in store.watches(None)}


def test_replicas_with_their_own_state_folders_share_one_database(records: list[PatentRecord], tmp_path: Path,
                                                                  postgres_db: str) -> None:
    """Two replicas (state folders of their own, as the pods' emptyDirs) on one PostgreSQL database: a watch saved
    through one API is listed, read and deleted through the other; owners stay apart."""
    idx = tmp_path / "index"
    _build(records, idx)
    apps = []
    for pod in ("a", "b"):
        from service.api import create_app

        settings = Settings(index_dir=idx, state_dir=tmp_path / f"pod-{pod}", database_url=postgres_db,
                            api_key="key-1,key-2")
        apps.append(TestClient(create_app(settings)))
    with apps[0] as a, apps[1] as b:
        one, two = {"x-api-key": "key-1"}, {"x-api-key": "key-2"}
        r = a.post("/watches", json={"query": records[3].title["en"], "lang": "en", "k": 5}, headers=one)
        assert r.status_code == 201, r.text
        wid = r.json()["id"]
        assert [w["id"] for w in b.get("/watches", headers=one).json()] == [wid]
        assert b.get(f"/watches/{wid}", headers=one).json()["request"]["query"] == records[3].title["en"]
        assert b.get("/watches", headers=two).json() == [] and b.get(f"/watches/{wid}", headers=two).status_code == 404
        assert b.delete(f"/watches/{wid}", headers=one).status_code in (200, 204)
        assert a.get("/watches", headers=one).json() == []
    assert not (tmp_path / "pod-a" / DB_NAME).exists() and not (tmp_path / "pod-b" / DB_NAME).exists()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_rebuild_at_the_same_path_and_its_next_add_reach_every_watch(records: list[PatentRecord], tmp_path: Path,
                                                                        backend: str,
                                                                        request: pytest.FixtureRequest) -> None:
    """Issue 62: after a rebuild at the same path (state kept), the next add said 'none pending' and its documents
    never reached the watches; with a watch saved after the rebuild the add failed (UNIQUE constraint failed:
    evaluations.watch_id, evaluations.generation). Now the rebuild is noticed, its build is the new baseline, and
    the add's documents are hits of every watch, old and new, as re-running the searches shows."""
    url = request.getfixturevalue("postgres_db") if backend == "postgresql" else None
    idx = tmp_path / "index"
    _build(records, idx)
    store = WatchStore.open(state_dir(idx), create=True, url=url)
    engine = _load(idx, url)
    reqs = _watch_requests(records)
    for req in reqs[:12]:
        save_watch(engine, store, "", req)
    engine.close()
    first = records[N_BASE : N_BASE + 20]
    add_documents(idx, first, progress=False)
    engine = _load(idx, url)
    assert evaluate(engine, store).watches == 12
    assert _hits_at(store, engine.generation) == _new_in_top_k(engine, store, {r.id for r in first})
    old_build = engine.folder.meta.created
    engine.close()
    time.sleep(max(0.0, 1.05 - (time.time() % 1)))  # (a build is named by its creation second)
    _build(records, idx, overwrite=True)  # the same path, the state folder kept
    engine = _load(idx, url)
    assert engine.generation == 0 and engine.folder.meta.created != old_build
    for req in reqs[12:18]:  # saved after the rebuild: this used to make the next add fail
        save_watch(engine, store, "", req)
    engine.close()
    batch = records[N_BASE + 20 : N_BASE + 60]
    add_documents(idx, batch, progress=False)
    engine = _load(idx, url)
    report = evaluate(engine, store)
    assert report.watches == 18 and report.errors == 0
    got, want = _hits_at(store, engine.generation), _new_in_top_k(engine, store, {r.id for r in batch})
    assert got == want and sum(map(len, got.values())) >= 10
    for w in store.watches(None):  # one evaluation per build and generation, the old build's kept beside
        builds = [(e["build"], e["generation"]) for e in store.evaluations(w.id)]
        assert len(builds) == len(set(builds)) and (engine.folder.meta.created, engine.generation) in builds
    engine.close()


def test_racing_evaluators_on_one_database_evaluate_each_watch_once(records: list[PatentRecord], tmp_path: Path,
                                                                    postgres_db: str) -> None:
    """Issue 62's goal: two evaluators (`priorart watch run`, as two replicas would) start at once after each of 6
    adds on one PostgreSQL database, each with a state folder of its own (no shared file lock): the database's
    advisory lock lets one evaluate and the other find nothing pending; at one add an evaluator is first killed at
    a commit (kill -9) and the two then finish its work. Exactly one evaluation row per watch, build and generation,
    and every watch's hits are the new documents of its top k, as re-running its search shows."""
    idx = tmp_path / "index"
    _build(records, idx)
    store = WatchStore.open(tmp_path / "state-0", create=True, url=postgres_db)
    engine = _load(idx, postgres_db)
    for req in _watch_requests(records):
        save_watch(engine, store, "", req)
    engine.close()
    n_watches = len(store.watches(None))
    env = {**os.environ, "PRIORART_DATABASE_URL": postgres_db, "PRIORART_LOG_LEVEL": "WARNING"}
    cmd = [sys.executable, "-m", "training.cli", "watch", "run", str(idx), "--batch", "4", "--json"]
    added = records[N_BASE:]
    killed = 0
    seen: set[int] = set()
    for n, start in enumerate(range(0, 60, 10), 1):
        batch = added[start : start + 10]
        add_documents(idx, batch, progress=False)
        if n == 3:  # one evaluator killed at its third batch's commit (two committed), before the others start
            crash = subprocess.run([sys.executable, "-c", CRASH_AT_COMMIT, *cmd[3:], "--state-dir",
                                    str(tmp_path / "state-1")], env={**env, "WATCH_CRASH_AT": "3"}, cwd=REPO,
                                   capture_output=True, text=True, timeout=300)
            assert crash.returncode == -signal.SIGKILL, crash.stderr
            killed += 1
            assert len(_evaluation_rows(store)) == n_watches * (n - 1) + 8  # its committed batches stay
        procs = [subprocess.Popen([*cmd, "--state-dir", str(tmp_path / f"state-{i}")], env=env, cwd=REPO,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in (1, 2)]
        evaluated = 0
        for proc in procs:
            out, err = proc.communicate(timeout=300)
            assert proc.returncode == 0, err
            evaluated += json.loads(out).get("watches", 0)
        # the two ran at once: one held the database's lock and evaluated, the other then found nothing pending
        assert evaluated == (n_watches - 8 if n == 3 else n_watches), f"add {n}: {evaluated} evaluations run"
        engine = _load(idx, postgres_db)  # (an add may compact as well: its generation is the newest)
        rows = _evaluation_rows(store)
        assert len(rows) == n_watches * n == len(set(rows)), f"add {n}: {len(rows)} evaluation rows"
        assert {g for _, _, g in rows} == {*seen, engine.generation}
        seen.add(engine.generation)
        assert _hits_at(store, engine.generation) == _new_in_top_k(engine, store, {r.id for r in batch}), f"add {n}"
        engine.close()
    assert killed == 1
    print(f"\n{n_watches} watches, 6 adds, two evaluators at once on PostgreSQL, one killed and restarted: one "
          f"evaluation per watch and generation, every hit as re-running the searches shows")


def _evaluation_rows(store: WatchStore) -> list[tuple[str, str, int]]:
    return [(w.id, e["build"], e["generation"]) for w in store.watches(None) for e in store.evaluations(w.id)]


def test_a_database_url_that_is_not_postgresql_is_refused(tmp_path: Path) -> None:
    from service.watch.db import StateError

    with pytest.raises(StateError, match="postgresql:// URL is expected"):
        WatchStore(tmp_path, "mysql://u:secret@host/db")
    with pytest.raises(StateError, match="cannot open the watch database postgresql://u:\\*\\*\\*@127.0.0.1:9/db"):
        WatchStore.open(tmp_path, create=True, url="postgresql://u:secret@127.0.0.1:9/db")


def test_an_older_sqlite_file_is_upgraded_in_place(tmp_path: Path) -> None:
    """A state folder written before the migrations (PRAGMA user_version 1, the tables of revision 0001) is stamped
    and upgraded on first use: its watches and hits stay, each hit now names the build of the state."""
    import importlib.util
    import sqlite3

    spec = importlib.util.spec_from_file_location("initial", REPO / "service/watch/migrations/versions/0001_initial.py")
    assert spec is not None and spec.loader is not None
    initial = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(initial)

    path = tmp_path / DB_NAME
    conn = sqlite3.connect(path)
    for sql in initial.STATEMENTS:
        conn.execute(sql.replace("DOUBLE PRECISION", "REAL"))
    conn.execute("INSERT INTO watches VALUES ('w1', '', 'old', ?, '2026-01-01', 0, 1, '[]', NULL)",
                 (json.dumps({"query": "rotor blade"}),))
    conn.execute("INSERT INTO evaluations VALUES ('w1', 1, '2026-01-02', 3, 1, 'search', NULL, 1.0, NULL)")
    conn.execute("INSERT INTO hits VALUES ('w1', 1, 'EP1', 1, 0.5, 't', NULL, NULL, '2026-01-02', NULL)")
    conn.execute("INSERT INTO state VALUES ('index', '2026-01-01T00:00:00+00:00')")
    conn.execute("PRAGMA user_version=1")
    conn.commit()
    conn.close()
    store = WatchStore.open(tmp_path)
    assert [w.id for w in store.watches(None)] == ["w1"]
    assert [h.doc_id for h in store.hits(None, "w1") or []] == ["EP1"]
    assert store.evaluations("w1")[0]["build"] == "2026-01-01T00:00:00+00:00"
    with sqlite3.connect(path) as raw:
        assert raw.execute("SELECT version_num FROM alembic_version").fetchone()[0] == HEAD


def test_a_server_s_runner_outlives_a_database_it_cannot_reach(tmp_path: Path) -> None:
    """A replica whose database is down keeps its watch runner: it logs, tries again later, and evaluates once the
    database answers (here: never; the thread stays alive and idle)."""
    from service.watch.runner import WatchRunner

    runner = WatchRunner(tmp_path, lambda: None, lambda engine: None, url="postgresql://u@127.0.0.1:9/db",
                         backoff_s=0.05)
    runner.start()
    try:
        assert runner.wait_idle(30)
        runner.notify()
        assert runner.wait_idle(30)
        assert runner._thread is not None and runner._thread.is_alive()
    finally:
        runner.stop()
