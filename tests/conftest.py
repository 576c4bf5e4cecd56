"""Shared fixtures: where the real data lives, and skips with a clear reason when it is absent."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from index_copy import copy_index

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("PRIORART_DATA", REPO.parent / "shared" / "data"))


# The suite runs on two workers (scripts/test.sh: pytest-xdist, whole files per worker, in collection order). Files are
# handed out longest first, so that no long file starts last and holds up the end (each file's seconds, the sum of its
# tests', in a full run of 1,209 tests in a new worktree of 8ef732a, -n 2 on the 2-core machine:
# `PRIORART_TEST_TIMELINE=FILE bash scripts/test.sh`, then `python scripts/test_timeline.py FILE`); every other file
# keeps its place after these.
LONGEST_FIRST = (
    "tests/service/index/test_live.py",  # 182 (its first build encodes the real patents: the run's cache keeps them)
    "tests/training/commands/test_demo.py",  # 112 (synthetic; with the new machine's demo on 200 documents, 24 s)
    "tests/service/test_serve_ray.py",  # 114 (after the demo: the real patents' vectors are in the run's cache by
    # then, where starting beside test_live both workers encoded them at once)
    "tests/load/test_load.py",  # 108
    "tests/service/index/test_live_failures.py",  # 98
    "tests/training/test_build_all_data.py",  # 93 (the whole shared data set ingested, built, searched)
    "tests/service/watch/test_watch_shared.py",  # 85
    "tests/lab/experiments/test_ranking.py",  # 72
    "tests/service/watch/test_watch.py",  # 69
    "tests/service/test_shards.py",  # 69
    "tests/lab/experiments/test_xling_routes.py",  # 69
    "tests/deploy/test_fresh_install.py",  # 68 (two CPU levels of kernels warmed, as the Dockerfile does)
    "tests/service/stages/test_dense_pretrained.py",  # 62
    "tests/training/test_ranker.py",  # 58
    "tests/training/commands/test_watch_cli.py",  # 56
    "tests/training/commands/test_evaluate.py",  # 55
    "tests/training/test_build.py",  # 54
    "tests/e2e/test_browser.py",  # 45
    "tests/training/translation/test_index_step.py",  # 45
    "tests/load/test_bench_load.py",  # 42
    "tests/service/passages/test_passage_regression.py",  # 40
    "tests/lab/experiments/test_experiment_code_prediction.py",  # 38
    "tests/test_docs_results.py",  # 33
    "tests/training/test_fusion.py",  # 30
    "tests/e2e/test_schemathesis.py",  # 28
)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """With ``PRIORART_TEST_TIMELINE=FILE``: one JSON line per test (worker, test, start, end: setup to teardown, in
    epoch seconds) appended to FILE, to see where a run's time goes, which file a worker ran when, and where a worker
    waited (``scripts/test_timeline.py`` sums it up)."""
    path = os.environ.get("PRIORART_TEST_TIMELINE")
    start = time.time()
    yield
    if path:
        line = {"worker": os.environ.get("PYTEST_XDIST_WORKER", "master"), "test": item.nodeid, "start": start,
                "end": time.time()}
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(line) + "\n")


# The fixtures below that read ../shared/data: a test that uses one (directly or through another fixture) is marked
# `realdata`, so that a bare `pytest` (pyproject's addopts: `-m 'not (slow or realdata or ...)'`) leaves it out.
REAL_DATA_FIXTURES = frozenset({"shared_data", "ep_dir", "us_dir", "us_formats_dir", "cpc_titles", "real_corpus",
                                "real_translation", "real_index"})
# Folders whose every test starts a live `priorart serve` (tests/e2e: browser and schemathesis; tests/load: locust).
FOLDER_MARKS = {"tests/e2e/": ("e2e", "server"), "tests/load/": ("load", "server")}


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by the marks added here
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if REAL_DATA_FIXTURES & set(getattr(item, "fixturenames", ())) and not item.get_closest_marker("realdata"):
            item.add_marker(pytest.mark.realdata)
        for folder, marks in FOLDER_MARKS.items():
            if item.nodeid.startswith(folder):
                for mark in marks:
                    if not item.get_closest_marker(mark):
                        item.add_marker(getattr(pytest.mark, mark))
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))  # stable: the rest as collected


@pytest.fixture()
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``$PRIORART_CACHE_DIR`` set to a folder of the test's own (parsed lexicons, headwords, vectors: what the test
    varies), which shares the machine's converted pretrained encoder (its conversion takes 18 s and depends on nothing
    a test varies; a default build's dense stage needs it)."""
    from service.settings import cache_dir

    machine, own = cache_dir() / "encoders", tmp_path / "cache"
    own.mkdir()
    if machine.is_dir():
        (own / "encoders").symlink_to(machine, target_is_directory=True)
    monkeypatch.setenv("PRIORART_CACHE_DIR", str(own))
    return own


def _need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"real data not found at {path} (set PRIORART_DATA or put ../shared beside the repo)")
    return path


@pytest.fixture(scope="session")
def shared_data() -> Path:
    return _need(SHARED_DATA)


@pytest.fixture(scope="session")
def ep_dir() -> Path:
    return _need(SHARED_DATA / "patents" / "ep")


@pytest.fixture(scope="session")
def us_dir() -> Path:
    return _need(SHARED_DATA / "patents" / "us")


@pytest.fixture(scope="session")
def us_formats_dir() -> Path:
    return _need(SHARED_DATA / "patents" / "us-formats")


@pytest.fixture(scope="session")
def cpc_titles() -> Path:
    return _need(SHARED_DATA / "cpc" / "cpc-titles-2025-05.tsv.gz")


def _once_per_run(tmp_path_factory: pytest.TempPathFactory, worker_id: str, name: str,
                  build: Callable[[Path], None]) -> Path:
    """``build(folder)`` once for the whole run: under pytest-xdist the first worker to get here builds it, under a
    lock in the run's temporary folder that all workers share, and the others wait and reuse it."""
    from filelock import FileLock

    root = tmp_path_factory.getbasetemp()
    if worker_id != "master":
        root = root.parent  # pytest-of-<user>/pytest-<n>: shared by the workers of this run
    folder, done = root / name, root / f"{name}.done"
    with FileLock(str(root / f"{name}.lock")):
        if not done.exists():
            if folder.exists():
                shutil.rmtree(folder)  # a build that failed half-way
            folder.mkdir()
            build(folder)
            done.touch()
    return folder


@pytest.fixture(scope="session", autouse=True)
def lexicons_kept() -> Iterator[None]:
    """The lexicons a build reads stay in the worker's memory for its next build (``keeping`` in
    training/translation/dictionary.py, as the lab's CLI does: a worker builds dozens of indexes); the CLI's own
    processes that the tests start (``priorart build`` and the like) keep none, as for a user."""
    from training.translation.dictionary import keeping

    with keeping():
        yield


@pytest.fixture(scope="session", autouse=True)
def vector_cache_of_the_run(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Iterator[Path]:
    """One document vector cache (service/retrieval/vector_cache.py) for the whole run, shared by both workers and the
    processes they start: the many builds of the same synthetic and real documents encode each text once per run,
    not once per build (a test that times or checks a cold build names its own file). A cache the machine already
    has is not read: each run starts empty."""
    from service.retrieval.vector_cache import ENV

    root = tmp_path_factory.getbasetemp()
    path = (root if worker_id == "master" else root.parent) / "vectors.sqlite"
    before = os.environ.get(ENV)
    os.environ[ENV] = str(path)
    yield path
    if before is None:
        os.environ.pop(ENV, None)
    else:
        os.environ[ENV] = before


@pytest.fixture(scope="session")
def real_corpus(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """All of ../shared/data/patents ingested once per test run (corpus JSONL)."""
    patents = _need(SHARED_DATA / "patents")

    def build(folder: Path) -> None:
        from service.corpus.jsonl import write_corpus
        from training.ingest import iter_records

        write_corpus(iter_records([patents]), folder / "corpus.jsonl")

    return _once_per_run(tmp_path_factory, worker_id, "real", build) / "corpus.jsonl"


@pytest.fixture(scope="session")
def real_translation(real_corpus: Path, tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """de/fr -> en translation tables (aligned claims + FreeDict when installed) over the real corpus."""

    def build(folder: Path) -> None:
        from service.corpus.jsonl import read_corpus
        from training.translation.tables import build_tables, write_tables

        tables, meta = build_tables(list(read_corpus(real_corpus)), progress=False)
        write_tables(folder, tables, meta)

    return _once_per_run(tmp_path_factory, worker_id, "real-translation", build)


@pytest.fixture(scope="session")
def real_plain_index(real_corpus: Path, tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """The real corpus through ``build_index`` with every default (tables of every direction trained from it,
    compounds, the dense stage, the passages) but the learned ranker (``ranker="none"``: what the code-prediction
    experiment builds; nothing of the first stage depends on it), once per run and read-only (a test that writes to
    an index copies it); the build's report beside it (``report.json``)."""

    def build(folder: Path) -> None:
        from training.build import build_index

        report = build_index(real_corpus, folder / "index", ranker="none", progress=False)
        (folder / "report.json").write_text(json.dumps(report.to_dict()), encoding="utf-8")

    return _once_per_run(tmp_path_factory, worker_id, "real-plain", build) / "index"


@pytest.fixture(scope="session")
def real_index(real_corpus: Path, real_translation: Path, tmp_path_factory: pytest.TempPathFactory,
               worker_id: str) -> Path:
    """A BM25 index (en, de, fr) with translation tables over the real corpus, built once per test run; each worker
    has its own copy (a server keeps its watches beside its index)."""

    def build(folder: Path) -> None:
        from training.build import build_index

        build_index(real_corpus, folder / "index", translation_dir=real_translation, progress=False)

    built = _once_per_run(tmp_path_factory, worker_id, "real-index", build) / "index"
    if worker_id == "master":
        return built
    own = tmp_path_factory.mktemp("real-index") / "index"
    copy_index(built, own)
    return own


@pytest.fixture(scope="session")
def postgres() -> Iterator[str]:
    """A PostgreSQL server of this test worker (tests/postgres_server.py: Debian's package, a cluster of its own on a
    free port), for the run; skipped with the reason only where none can be started."""
    from postgres_server import postgres_server, unavailable

    why = unavailable()
    if why is not None:
        pytest.skip(why)
    with postgres_server() as url:
        yield url


@pytest.fixture()
def postgres_db(postgres: str) -> str:
    """A new empty database on the worker's PostgreSQL server: its URL."""
    from postgres_server import new_database

    return new_database(postgres)
