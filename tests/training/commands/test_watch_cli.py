"""``priorart watch`` and the watches of ``priorart add`` (issue 34); the crash test: ``priorart watch run`` killed
with SIGKILL during the evaluation (10 trials), then run again, loses and duplicates no hit."""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from index_copy import copy_index
from typer.testing import CliRunner
from watch_crash import CRASH_AT_COMMIT

from service.corpus.jsonl import write_corpus
from service.corpus.record import PatentRecord
from service.engine import Engine
from service.index.live import add_documents
from service.settings import Settings
from service.watch.evaluate import evaluate, save_watch
from service.watch.models import WatchRequest
from service.watch.store import WatchStore, state_dir
from training.cli import app

REPO = Path(__file__).resolve().parents[3]
N_BASE = 500


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[PatentRecord]]:
    from suite_corpus import suite_records

    from training.build import build_index

    d = tmp_path_factory.mktemp("watch-cli")
    records = suite_records(N_BASE + 60)  # (the suite's collection: tests/suite_corpus.py)
    build_index(records[:N_BASE], d / "index", translation=False, compounds="", progress=False)
    write_corpus(records[N_BASE:], d / "batch.jsonl")
    return d, records


def _claim(rec: PatentRecord, lang: str = "en") -> str:
    return " ".join(c.text for c in rec.claims[lang][:2])


def _cli(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(app, [str(a) for a in args])
    return res.exit_code, res.output


@pytest.mark.slow
def test_watch_add_list_hits_run_and_priorart_add(built: tuple[Path, list[PatentRecord]], tmp_path: Path) -> None:
    d, records = built
    idx = tmp_path / "index"
    copy_index(d / "index", idx)
    target = next(r for r in records[N_BASE:] if r.claims.get("en"))
    code, out = _cli("watch", "add", idx, "--query", _claim(target), "--lang", "en", "--k", "5", "--name", "rotor")
    assert code == 0, out
    wid = out.split()[1]
    assert out.startswith(f"watch {wid} saved at generation 0: 'rotor', top 5")
    code, out = _cli("watch", "add", idx, "--query", _claim(records[N_BASE + 1]), "--lang", "en", "--key", "key-b")
    assert code == 0, out
    wid_b = out.split()[1]
    code, out = _cli("watch", "list", idx, "--key", "key-b")
    assert code == 0 and wid_b in out and wid not in out
    code, out = _cli("watch", "list", idx)  # the operator sees every watch
    assert wid in out and wid_b in out
    assert (tmp_path / "index.state" / "watches.sqlite").is_file()
    # priorart add evaluates the watches against the batch it committed
    code, out = _cli("add", idx, d / "batch.jsonl", "--no-progress")
    assert code == 0, out
    assert "generation 0 -> 1" in out and "watches: 2 evaluated at generation 1 against 60 new documents" in out
    code, out = _cli("watch", "hits", idx, wid)
    assert code == 0, out
    first = out.splitlines()[0].split()
    assert first[:5] == ["generation", "1", "rank", "1", target.id]
    assert "(en): " in out.splitlines()[1]  # its best passage
    code, out = _cli("watch", "hits", idx, wid, "--since", "1")
    assert code == 0 and out.strip() == "no hits after generation 1"
    code, out = _cli("watch", "run", idx)
    assert code == 0 and out.strip() == "watches: none pending at generation 1"
    # bad input: exit 2 and what is wrong
    for args, said in [(("watch", "add", idx, "--query", "rotor", "--k", "0"), "k: Input should be greater"),
                       (("watch", "add", idx), "--query or --query-file"),
                       (("watch", "add", idx, "--query", "rotor", "--lang", "es"), "lang"),
                       (("watch", "add", idx, "--query", "the of and", "--lang", "en"), "no index terms"),
                       (("watch", "hits", idx, "nope"), "no watch 'nope'"),
                       (("watch", "hits", idx, wid, "--key", "key-b"), "for this key"),
                       (("watch", "list", idx, "--state-dir", idx / "inside"), "inside the index folder")]:
        code, out = _cli(*args)
        assert code == 2 and said in out, (args, out)
    code, out = _cli("watch", "delete", idx, wid)
    assert code == 0 and wid not in _cli("watch", "list", idx)[1]


@pytest.mark.slow
def test_add_without_watches_leaves_them_to_watch_run(built: tuple[Path, list[PatentRecord]], tmp_path: Path) -> None:
    d, records = built
    idx = tmp_path / "index"
    copy_index(d / "index", idx)
    state = tmp_path / "elsewhere"
    target = records[N_BASE + 2]
    code, out = _cli("watch", "add", idx, "-q", _claim(target), "--lang", "en", "--state-dir", state)
    assert code == 0, out
    code, out = _cli("add", idx, d / "batch.jsonl", "--no-progress", "--no-watches")
    assert code == 0 and "watches" not in out
    code, out = _cli("watch", "list", idx, "--state-dir", state)
    assert "evaluated at 0" in out and "0 hits" in out
    code, out = _cli("watch", "run", idx, "--state-dir", state)
    assert code == 0 and "1 evaluated at generation 1" in out
    wid = _cli("watch", "list", idx, "--state-dir", state)[1].split()[0]
    assert f"rank 1  {target.id}" in _cli("watch", "hits", idx, wid, "--state-dir", state)[1]
    assert not (tmp_path / "index.state").exists()


# ------------------------------------------------------------------------------------------ kill -9


def _hits(db: Path) -> list[tuple[str, int, str, int, float]]:
    with contextlib.closing(sqlite3.connect(db)) as conn:
        return sorted(conn.execute("SELECT watch_id, generation, doc_id, rank, score FROM hits").fetchall())


def _evaluated(db: Path) -> list[str]:
    with contextlib.closing(sqlite3.connect(db)) as conn:
        rows = conn.execute("SELECT watch_id FROM evaluations WHERE generation = 1").fetchall()
        pending = conn.execute("SELECT COUNT(*) FROM watches WHERE evaluated_generation < 1").fetchone()[0]
        n = conn.execute("SELECT COUNT(*) FROM watches").fetchone()[0]
    assert len(rows) + pending == n, "a watch evaluated without its evaluation row, or the other way round"
    return sorted(r[0] for r in rows)


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), **extra}


@pytest.mark.slow
def test_kill_9_during_evaluation_loses_and_duplicates_nothing(built: tuple[Path, list[PatentRecord]],
                                                              tmp_path: Path) -> None:
    d, records = built
    idx = tmp_path / "index"
    copy_index(d / "index", idx)
    engine = Engine.load(idx, settings=Settings(index_dir=idx), verify=False)
    store = WatchStore.open(state_dir(idx), create=True)
    rng = random.Random(34)
    for rec in rng.sample(records, 100):
        if rec.claims.get("en"):
            save_watch(engine, store, "", WatchRequest(query=_claim(rec), lang="en", k=rng.choice([3, 10, 20])))
    n_watches = len(store.watches(None))
    engine.close()
    add_documents(idx, records[N_BASE:], progress=False)
    pristine = tmp_path / "pristine.state"
    copy_index(store.root, pristine)
    # the reference: one evaluation that nobody interrupts
    engine = Engine.load(idx, settings=Settings(index_dir=idx), verify=False)
    assert evaluate(engine, store).watches == n_watches
    engine.close()
    reference = _hits(store.path)
    assert len(reference) >= 20
    per_watch = {w: [h for h in reference if h[0] == w] for w in {h[0] for h in reference}}
    batch = 8
    batches = -(-n_watches // batch)
    cmd = [sys.executable, "-m", "training.cli", "watch", "run", str(idx), "--batch", str(batch)]
    t0 = time.perf_counter()
    subprocess.run(cmd, env=_env(), check=True, capture_output=True, timeout=300)
    took = time.perf_counter() - t0  # (on the reference state: nothing pending, the load and the sync)
    trials, midway = 2, 0  # each trial is two evaluations in a new process (the suite's time): one of each kind
    for trial in range(trials):
        shutil.rmtree(store.root)
        copy_index(pristine, store.root)
        if trial % 2 == 0:  # killed with the rows of a batch written, not committed
            at = rng.randint(2, batches - 1)  # after one committed batch at least: killed mid-way
            done = subprocess.run([sys.executable, "-c", CRASH_AT_COMMIT, *cmd[3:]], env=_env(WATCH_CRASH_AT=str(at)),
                                  capture_output=True, timeout=300)
            assert done.returncode == -signal.SIGKILL, done.stderr
        else:  # killed at a random time
            proc = subprocess.Popen(cmd, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(rng.uniform(took * 0.8, took * 2.5))
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        evaluated = _evaluated(store.path)
        if 0 < len(evaluated) < n_watches:
            midway += 1
        if trial % 2 == 0:
            assert len(evaluated) == (at - 1) * batch
        # what was committed is whole: every evaluated watch has exactly its hits, the others none
        assert _hits(store.path) == sorted(h for w in evaluated for h in per_watch.get(w, []))
        done = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        assert _hits(store.path) == reference, f"trial {trial}: hits lost or duplicated"
        assert len(_evaluated(store.path)) == n_watches
    print(f"\nkill -9 during the evaluation of {n_watches} watches, {trials} trials ({midway} mid-way): every rerun "
          f"completed with the reference's {len(reference)} hits, none lost or duplicated")
    assert midway >= trials // 2
