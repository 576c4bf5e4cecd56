"""Watches that every replica sees (issue 62): the store on a real PostgreSQL server (tests/postgres_server.py) as on
SQLite, replicas with state folders of their own sharing one database, one evaluation per watch and generation when
evaluators race and one is killed (`priorart watch run`; two `priorart serve` over 50 adds), and a rebuilt index whose
next add still reaches every watch."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

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


def _hits_at(store: WatchStore, generation: int, since: int | None = None) -> dict[str, list[tuple[int, str]]]:
    """Per watch: the (rank, id) of its hits found at ``generation`` (``since``: at the generations after it, up to
    ``generation``: an add's and those of the merges after it, whichever a server loaded)."""
    lo = generation - 1 if since is None else since
    return {w.id: sorted((h.rank, h.doc_id) for h in store.hits(None, w.id, since=lo) or []
                         if h.generation <= generation) for w in store.watches(None)}


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
    """Issue 62's goal: two evaluators (`priorart watch run`, as two replicas would) start at once after each of 2
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
    for n, start in enumerate(range(0, 20, 10), 1):
        batch = added[start : start + 10]
        add_documents(idx, batch, progress=False)
        if n == 2:  # one evaluator killed at its third batch's commit (two committed), before the others start
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
        assert evaluated == (n_watches - 8 if n == 2 else n_watches), f"add {n}: {evaluated} evaluations run"
        engine = _load(idx, postgres_db)  # (an add may compact as well: its generation is the newest)
        rows = _evaluation_rows(store)
        assert len(rows) == n_watches * n == len(set(rows)), f"add {n}: {len(rows)} evaluation rows"
        assert {g for _, _, g in rows} == {*seen, engine.generation}
        seen.add(engine.generation)
        assert _hits_at(store, engine.generation) == _new_in_top_k(engine, store, {r.id for r in batch}), f"add {n}"
        engine.close()
    assert killed == 1
    print(f"\n{n_watches} watches, 2 adds, two evaluators at once on PostgreSQL, one killed and restarted: one "
          f"evaluation per watch and generation, every hit as re-running the searches shows")


def _evaluation_rows(store: WatchStore) -> list[tuple[str, str, int]]:
    return [(w.id, e["build"], e["generation"]) for w in store.watches(None) for e in store.evaluations(w.id)]


def _liveserver() -> ModuleType:
    """tests/e2e/liveserver.py: ``priorart serve`` in a process of its own (the test folders are not packages, so it
    is loaded by path, under the name tests/load loads it by)."""
    if "liveserver" not in sys.modules:
        spec = importlib.util.spec_from_file_location("liveserver", REPO / "tests" / "e2e" / "liveserver.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["liveserver"] = module
        spec.loader.exec_module(module)
    return sys.modules["liveserver"]


N_ADDS = 50
KILL_AT = 25  # the add whose evaluation loses its server


@pytest.mark.server
def test_two_servers_on_one_database_evaluate_each_watch_once_over_50_adds(records: list[PatentRecord],
                                                                           tmp_path: Path, postgres_db: str) -> None:
    """Issue 62's goal with two `priorart serve` processes on one index folder and one PostgreSQL database, each with
    a state folder of its own: the watches saved through A's API are listed by B; then 50 adds of 1-2 documents (in
    this process, as `priorart add --no-watches`), and after each the servers load the new generation by themselves
    (PRIORART_RELOAD_INTERVAL_S) and their runners evaluate the watches, one at a time (the advisory lock). At the
    25th add the server that evaluates is killed (kill -9) with its rows written and not committed (this test holds
    a lock on the evaluations table, so that its INSERT waits there), and restarted at once; the other finishes the
    generation. After every add: one evaluation row per watch, build and generation (the same generations for every
    watch), the newest generation evaluated, and (every fifth add, and the one with the kill) every watch's hits since
    the previous add are the new documents of its top k, as re-running its search shows; each generation was
    evaluated by one evaluation of one server (their logs), and at the end nothing is pending."""
    import httpx
    import psycopg

    from service.index.folder import current_generation

    ls = _liveserver()
    idx = tmp_path / "index"
    _build(records, idx)
    key = {"x-api-key": "key-1"}
    logs: list[tuple[str, Path]] = []

    def start(name: str, stack: contextlib.ExitStack) -> Any:
        log = tmp_path / f"serve-{name}-{len(logs)}.log"
        logs.append((name, log))
        env = {"PRIORART_DATABASE_URL": postgres_db, "PRIORART_STATE_DIR": str(tmp_path / f"state-{name}"),
               "PRIORART_API_KEY": "key-1", "PRIORART_RELOAD_INTERVAL_S": "0.1", "PGAPPNAME": f"priorart-{name}"}
        return stack.enter_context(ls.live_server(idx, log, extra_env=env))

    def tails() -> str:
        return "\n".join(f"--- {log.name}\n{log.read_text(errors='replace')[-2000:]}" for _, log in logs)

    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        servers = {name: start(name, stack) for name in ("a", "b")}
        saved = []
        for req in _watch_requests(records):
            r = httpx.post(f"{servers['a'].url}/watches", json=req.model_dump(mode="json", exclude_none=True),
                           headers=key, timeout=30)
            assert r.status_code == 201, r.text
            saved.append(r.json()["id"])
        listed = httpx.get(f"{servers['b'].url}/watches", headers=key, timeout=30).json()
        assert sorted(w["id"] for w in listed) == sorted(saved)
        store = WatchStore.open(tmp_path / "state-0", url=postgres_db)
        n_watches = len(saved)
        added, last, killed, killed_log, killed_at = records[N_BASE:], 0, "", tmp_path, -1
        with psycopg.connect(postgres_db, autocommit=True) as pg:
            for n in range(1, N_ADDS + 1):
                batch = added[(n - 1) * 3 // 2 : n * 3 // 2]  # 1, 2, 1, 2, ... documents: 75 in all
                if n != KILL_AT:
                    add_documents(idx, batch, progress=False)
                else:
                    with psycopg.connect(postgres_db) as blocker:
                        blocker.execute("LOCK TABLE evaluations IN SHARE MODE")  # held until the rollback below
                        add_documents(idx, batch, progress=False)
                        killed = _waiting_insert(pg, tails)
                        servers[killed].process.kill()  # kill -9, its evaluation's rows written, not committed
                        servers[killed].process.wait(10)
                        killed_log = next(log for name, log in reversed(logs) if name == killed)
                        assert {g for _, _, g in _evaluation_rows(store)} <= set(range(last + 1))
                        servers[killed] = start(killed, stack)  # restarted while the generation is evaluated
                        blocker.rollback()
                    began = re.findall(r"watches: evaluating \d+ at generation (\d+)", killed_log.read_text())
                    assert began and last < int(began[-1]) <= current_generation(idx), began
                    killed_at = int(began[-1])
                generation = current_generation(idx)  # (the add's, or that of the merges after it)
                _wait_evaluated(store, generation, tails)
                rows = _evaluation_rows(store)
                done = {(b, g) for _, b, g in rows}  # every watch at each: an evaluation takes all those pending
                assert len(rows) == len(set(rows)) == n_watches * len(done), f"add {n}: {len(rows)} rows for {done}"
                assert max(g for _, g in done) == generation and len({b for b, _ in done}) == 1
                if n % 5 == 0 or n == KILL_AT:  # the hits of this add (every fifth: the suite's time)
                    engine = _load(idx, postgres_db)
                    assert (engine.folder.meta.created, generation) in done
                    got = _hits_at(store, generation, since=last)
                    want = _new_in_top_k(engine, store, {r.id for r in batch})
                    assert got == want, f"add {n} (generations {last + 1} to {generation})"
                    engine.close()
                last = generation
        with contextlib.closing(store.connect()) as conn:
            assert store.pending(conn, last) == []
        for server in servers.values():  # the restarted one too: every watch evaluated at the newest generation
            shown = httpx.get(f"{server.url}/watches", headers=key, timeout=30).json()
            assert {w["id"]: w["evaluated_generation"] for w in shown} == dict.fromkeys(saved, last)
    logged = [(name, log, int(m[1]), int(m[2])) for name, log in logs
              for m in re.finditer(r"watches: (\d+) evaluated at generation (\d+)", log.read_text())]
    generations = [g for _, _, _, g in logged]  # each evaluated by one evaluation, of all the watches
    assert sorted(generations) == sorted({g for _, _, g in rows}) and {w for _, _, w, _ in logged} == {n_watches}
    assert killed_at not in [g for _, log, _, g in logged if log == killed_log]  # (its evaluation never ended)
    by_server = {name: sum(1 for s, _, _, _ in logged if s == name) for name in ("a", "b")}
    hits = sum(len(h) for h in _hits_at(store, last, since=0).values())
    print(f"\n{n_watches} watches saved through server A, listed by B; {N_ADDS} adds ({len(generations)} generations "
          f"evaluated, merges included: A {by_server['a']}, B {by_server['b']}), server {killed.upper()} killed at add "
          f"{KILL_AT} in its evaluation of generation {killed_at} and restarted: one evaluation row per watch and "
          f"generation, {hits} hits, each as re-running the searches shows; {time.monotonic() - started:.0f} s")


def _waiting_insert(conn: Any, tails: Callable[[], str], timeout: float = 60.0) -> str:
    """The server (its PGAPPNAME, less 'priorart-') whose evaluation waits to insert its rows."""
    deadline = time.monotonic() + timeout
    while True:
        row = conn.execute("SELECT application_name FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                           "AND query LIKE 'INSERT INTO evaluations%'").fetchone()
        if row is not None:
            return str(row[0]).removeprefix("priorart-")
        assert time.monotonic() < deadline, f"no server came to write its evaluations\n{tails()}"
        time.sleep(0.01)


def _wait_evaluated(store: WatchStore, generation: int, tails: Callable[[], str], timeout: float = 60.0) -> None:
    """Until every watch is evaluated at ``generation``."""
    deadline = time.monotonic() + timeout
    while {w.evaluated_generation for w in store.watches(None)} != {generation}:
        assert time.monotonic() < deadline, f"the watches were not evaluated at generation {generation}\n{tails()}"
        time.sleep(0.02)


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
