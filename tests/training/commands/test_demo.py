"""`priorart demo` wiring: synthetic corpus -> index with its translation tables; its work folders, stopping it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from training.cli import app

pytestmark = pytest.mark.slow  # every test builds a demo index with its translation tables (20-40 s each)


@pytest.fixture(scope="module")
def demo200(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``priorart demo -n 200 --no-train --no-serve``: its work folder (read, not changed, by the tests below; the
    tests that start the demo serve it as it is)."""
    work = tmp_path_factory.mktemp("demo200") / "demo"
    res = CliRunner().invoke(app, ["demo", "-n", "200", "--workdir", str(work), "--no-train", "--no-serve"])
    assert res.exit_code == 0, res.output
    (work.parent / "output.txt").write_text(res.output, encoding="utf-8")  # what the first demo said
    return work


def test_demo_builds_a_searchable_index_from_synthetic_data(demo200: Path) -> None:
    work = demo200
    meta = json.loads((work / "index" / "meta.json").read_text())
    assert meta["format"] == "priorart-index"
    pairs = {(t["src"], t["tgt"]) for t in meta["components"]["translation"]}
    # de <-> fr: its own tables, mixed at query time with the composition through English
    assert pairs == {("de", "en"), ("fr", "en"), ("en", "de"), ("en", "fr"), ("de", "fr"), ("fr", "de")}
    out = CliRunner().invoke(app, ["search", str(work / "index"), "XS00000007", "--k", "3", "--json",
                                   "--every-date"])
    assert out.exit_code == 0, out.output
    assert len(json.loads(out.output)["results"]) == 3
    prior = json.loads(CliRunner().invoke(app, ["search", str(work / "index"), "XS00000007", "--json"]).output)
    assert prior["query"]["filters"]["before_from"]  # by default: what was published before its priority date


def test_demo_index_answers_german_french_and_english_queries_across_languages(demo200: Path) -> None:
    """No extra step: the demo's plain build translates a German claim into English and French text."""
    from service.corpus.jsonl import read_corpus
    from service.retrieval.first_stage import FirstStage

    work = demo200
    stage = FirstStage.load(work / "index")
    recs = list(read_corpus(work / "corpus.jsonl"))
    tri = next(r for r in recs if all(r.claims.get(x) for x in ("en", "de", "fr")))
    for lang in ("de", "fr", "en"):
        hit = stage.search(tri.claims[lang][0].text, lang=lang, k=5)
        assert {r.kind for r in hit.info.routes} == {"mono", "psq"} and len(hit.info.routes) == 3, lang
        assert tri.id in [h.doc_id for h in hit.hits], lang


# ---------------------------------------------------------------------------------------------- issue 30
def _demo(*args: str) -> str:
    res = CliRunner().invoke(app, ["demo", *args, "--no-serve"])
    assert res.exit_code == 0, res.output
    return res.output


def _ids(index: Path) -> set[str]:
    from service.index.store import DocStore

    docs = DocStore.load(index)
    try:
        return set(docs.ids)
    finally:
        docs.close()


def test_each_demo_serves_its_own_index_and_says_what_it_reuses(demo200: Path, tmp_path: Path) -> None:
    """Issue 30: after one demo, another one with other data served the old index (its corpus overwritten, the
    build skipped) and said nothing. Each data source has its own work folder, and a work folder reuses an output
    only when it was made from the same inputs. (The first demo is the module's ``-n 200``, in a copy of its work
    folder: the inputs ``demo.json`` records are the source, its size and seed, not the folder's path.)"""
    import shutil

    from training.commands.demo import NO_TRAIN_LINE, NO_TRAIN_WHY, default_workdir

    assert default_workdir(None) != default_workdir(Path("../shared/data"))
    work = str(tmp_path / "demo")
    shutil.copytree(demo200, work, symlinks=True)
    out = (demo200.parent / "output.txt").read_text(encoding="utf-8")
    assert NO_TRAIN_LINE.format(why=NO_TRAIN_WHY["synthetic"]) in out  # no training by default, and why, in one line
    meta = json.loads((tmp_path / "demo" / "index" / "meta.json").read_text())
    assert "models" not in meta["components"]
    assert len(_ids(tmp_path / "demo" / "index")) == 200
    again = _demo("-n", "200", "--workdir", work)
    assert "corpus: reusing" in again and "index: reusing" in again and "== build index" not in again
    other = _demo("-n", "150", "--workdir", work)  # other inputs, the same folder: rebuilt, and said
    assert "made from other inputs" in other and "== build index" in other
    assert len(_ids(tmp_path / "demo" / "index")) == 150


@pytest.mark.realdata
def test_real_and_synthetic_demos_in_either_order(tmp_path: Path, shared_data: Path) -> None:
    """The real-data demo and the synthetic one in one work folder, each order: each serves its own documents."""
    data = tmp_path / "data"
    for folder, pattern in (("patents", "patents/ep/*.xml"), ("marec", "marec/EP-*.xml"), ("ops", "ops/WO*.xml")):
        (data / folder).mkdir(parents=True)
        for xml in sorted(shared_data.glob(pattern))[:4 if folder == "patents" else 1]:
            (data / folder / xml.name).symlink_to(xml)
    work = str(tmp_path / "demo")
    index = tmp_path / "demo" / "index"
    _demo("-n", "100", "--workdir", work)
    assert all(i.startswith("XS") for i in _ids(index))
    _demo("--data", str(data), "--workdir", work)  # every folder of the real data: the offices' XML, MAREC, OPS
    ids = _ids(index)
    assert len(ids) == 6 and sum(i.startswith("EP") for i in ids) == 5 and sum(i.startswith("WO") for i in ids) == 1
    _demo("-n", "100", "--workdir", work)
    assert len(_ids(index)) == 100 and all(i.startswith("XS") for i in _ids(index))


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _answers(url: str, timeout: float = 0.5) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


class _Demo:
    """``priorart demo`` serving a built work folder, its output read line by line in a thread."""

    def __init__(self, work: Path) -> None:
        import queue
        import subprocess
        import sys
        import threading

        self.port = _free_port()
        self.ready = f"http://127.0.0.1:{self.port}/ready"
        self.proc = subprocess.Popen([sys.executable, "-m", "training.cli", "demo", "-n", "200", "--workdir",
                                      str(work), "--no-train", "--port", str(self.port)], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        self.lines: queue.Queue[str] = queue.Queue()
        self.output: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def wait_for(self, text: str, timeout: float = 120.0) -> str:
        import queue
        import time

        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                line = self.lines.get(timeout=max(0.01, end - time.monotonic()))
            except queue.Empty:
                break
            self.output.append(line)
            if text in line:
                return line
        raise AssertionError(f"{text!r} not printed; output:\n{''.join(self.output)}")

    def server_pid(self) -> int:
        children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text().split()
        assert len(children) == 1, children
        return int(children[0])

    def close(self) -> None:
        """Whatever happened: neither the demo nor its server outlives the test."""
        import os
        import signal

        if self.proc.poll() is None:
            for pid in Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text().split():
                os.kill(int(pid), signal.SIGKILL)
            self.proc.kill()

    def finish(self) -> str:
        self.proc.wait(timeout=60)
        while not self.lines.empty():
            self.output.append(self.lines.get())
        return "".join(self.output)


@pytest.mark.server
@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads a process' children from /proc (Linux)")
def test_stopping_the_demo_stops_its_server(demo200: Path) -> None:
    """Issue 30: SIGTERM to `priorart demo` left its server answering; 'serving http://...' came before the server
    answered."""
    import os
    import signal
    import time

    demo = _Demo(demo200)
    try:
        demo.wait_for("serving http://127.0.0.1")
        assert _answers(demo.ready), "said 'serving' before the server answered"
        server = demo.server_pid()
        os.kill(demo.proc.pid, signal.SIGTERM)
        out = demo.finish()
    finally:
        demo.close()
    deadline = time.monotonic() + 20
    while Path(f"/proc/{server}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not Path(f"/proc/{server}").exists(), "the server outlived the demo"
    assert not _answers(demo.ready)
    assert demo.proc.returncode == 0 and "server stopped (SIGTERM)" in out and "error:" not in out


@pytest.mark.server
@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads a process' children from /proc (Linux)")
def test_a_server_stopped_by_a_signal_is_not_a_failed_step(demo200: Path) -> None:
    """Issue 30: SIGTERM to the demo's server printed "error: step 'serve' failed (exit -15)"."""
    import os
    import signal

    demo = _Demo(demo200)
    try:
        demo.wait_for("serving http://127.0.0.1")
        os.kill(demo.server_pid(), signal.SIGTERM)
        out = demo.finish()
    finally:
        demo.close()
    assert demo.proc.returncode == 0 and "server stopped (SIGTERM)" in out and "error:" not in out


@pytest.mark.server
def test_a_new_machine_s_demo_serves_with_the_kernels_it_compiled_beside_its_build() -> None:
    """Issue 57 item 1: the demo's first serve compiled 59 of 61 kernel variants before it answered. The demo compiles
    them beside its build, and the server reads them from numba's cache: run as ``priorart-lab bench demo`` runs the
    README's demo (a new work folder, numba's cache and the vector cache empty), on 200 documents."""
    from lab.cli import app as lab

    res = CliRunner().invoke(lab, ["bench", "demo", "--json", "--", "-n", "200"])
    assert res.exit_code == 0, res.output
    run = json.loads(res.output)
    assert run["args"] == ["-n", "200"] and run["ready_s"] > 0, run["output_tail"]
    assert run["kernels_from_cache"], run["output_tail"]
    assert run["readme_quote_s"] and run["quoted_over_measured"] == round(run["readme_quote_s"] / run["ready_s"], 2)

