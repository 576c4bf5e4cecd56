"""``priorart serve`` options: what it hands to uvicorn (uvicorn itself is not started here), and a bad index at
start as one line (issue 29)."""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from training.commands import serve


def _serve(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], env: dict[str, str] | None = None,
           *, load: Any = None) -> tuple[Any, dict[str, Any]]:
    import uvicorn

    import service.api.server
    from service.engine import Engine

    seen: dict[str, Any] = {}

    def run(app: Any, **kw: Any) -> None:
        seen.update(kw, app=app, environ=dict(os.environ))

    def run_workers(settings: Any, workers: int, **kw: Any) -> None:
        seen.update(kw, settings=settings, workers=workers, environ=dict(os.environ))

    monkeypatch.setattr(uvicorn, "run", run)
    monkeypatch.setattr(service.api.server, "run_workers", run_workers)
    if load is not None:
        import service.startup

        monkeypatch.setattr(Engine, "load", load)  # (the phased start-up, warm-up query included, is skipped)
        monkeypatch.setattr(service.startup, "load_engine", lambda index_dir, settings, **_: load(index_dir))
    monkeypatch.delenv("PRIORART_ACCESS_LOG", raising=False)
    app = typer.Typer()
    serve.register(app)
    app.command("noop")(lambda: None)  # (a group, so that `serve` is a subcommand)
    res = CliRunner().invoke(app, ["serve", str(tmp_path), *args], env=env or {})
    return res, seen


@pytest.mark.parametrize(("args", "env", "access_log"), [
    ([], {}, False),  # off by default: /metrics counts every request
    (["--access-log"], {}, True),
    ([], {"PRIORART_ACCESS_LOG": "1"}, True),
])
def test_access_log_is_off_unless_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str],
                                        env: dict[str, str], access_log: bool) -> None:
    (tmp_path / "meta.json").write_text("{}", encoding="utf-8")  # serve checks the folder; the load is a stub
    res, seen = _serve(tmp_path, monkeypatch, args, env, load=lambda *a, **k: object())
    assert res.exit_code == 0, res.output
    assert seen["access_log"] is access_log and seen["log_level"] == "info"


def test_the_connection_limits_reach_uvicorn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from service.api.server import GuardedProtocol

    (tmp_path / "meta.json").write_text("{}", encoding="utf-8")
    env = {"PRIORART_KEEP_ALIVE_S": "3", "PRIORART_HEADER_TIMEOUT_S": "7", "PRIORART_MAX_CONNECTIONS": "500",
           "PRIORART_MAX_HEADER_BYTES": "8192"}
    res, seen = _serve(tmp_path, monkeypatch, [], env, load=lambda *a, **k: object())
    assert res.exit_code == 0, res.output
    assert seen["timeout_keep_alive"] == 3 and seen["h11_max_incomplete_event_size"] == 8192 and seen["ws"] == "none"
    factory = pickle.loads(pickle.dumps(seen["http"]))  # --workers pickles the config for each worker
    guard = factory.args[1]
    assert (guard.limits.header_timeout_s, guard.limits.max_connections) == (7, 500)
    from service.api.server import protocol_class

    assert issubclass(protocol_class(factory.args[0]), GuardedProtocol)


def test_a_bad_index_at_start_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A damaged index: one line on stderr and exit 2, before uvicorn starts (was: a failed lifespan's
    50-line traceback); with --workers, the folder is checked once in the parent the same way."""
    (tmp_path / "meta.json").write_text('{"format": "priorart-index", "version": 2', encoding="utf-8")  # torn
    for args in ([], ["--workers", "2"]):
        res, seen = _serve(tmp_path, monkeypatch, args)
        assert res.exit_code == 2 and not seen, res.output
        lines = res.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"error: the index {tmp_path} cannot be loaded: "), res.output
        assert "unreadable JSON" in lines[0] and "Traceback" not in res.output


def test_serve_hands_its_settings_to_the_app_not_the_environment(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The index folder, the CPC titles and the API key of the command line reach the app as settings, with one
    server and with --workers (the workers' configuration carries them: uvicorn pickles it to each worker, which
    makes its app from them); nothing is written into the environment; the environment's other settings count."""
    from service.api.server import WorkerConfig, uvicorn_options

    (tmp_path / "meta.json").write_text("{}", encoding="utf-8")
    monkeypatch.setattr(serve, "_check_index", lambda index_dir: None)  # (the folder is a stub)
    args = ["--api-key", "k3y", "--cpc", str(tmp_path / "cpc.tsv.gz")]
    env = {"PRIORART_MAX_K": "77"}
    for workers in ("1", "2"):
        res, seen = _serve(tmp_path, monkeypatch, [*args, "--workers", workers], env, load=lambda *a, **k: object())
        assert res.exit_code == 0, res.output
        settings = seen["app"].state.settings if workers == "1" else seen["settings"]
        assert (settings.index_dir, settings.cpc_titles, settings.api_key, settings.max_k) == (
            tmp_path, tmp_path / "cpc.tsv.gz", "k3y", 77)
        assert not {"PRIORART_INDEX_DIR", "PRIORART_API_KEY", "PRIORART_CPC_TITLES"} & set(seen["environ"])
    assert seen["workers"] == 2
    config = pickle.loads(pickle.dumps(WorkerConfig(settings, workers=2, **uvicorn_options(settings))))
    app = config.load_app()()  # what a worker runs: the app made from the settings it was handed
    assert app.state.settings == settings and app.state.settings.api_key == "k3y"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _tiny_index(tmp_path: Path) -> Path:
    from service.corpus.jsonl import read_corpus
    from training.build import build_index
    from training.synth import SynthConfig, write_synthetic

    write_synthetic(tmp_path / "c.jsonl", SynthConfig(n=20, seed=1), progress=False)
    idx = tmp_path / "idx"
    build_index(list(read_corpus(tmp_path / "c.jsonl")), idx, translation=False, compounds="", progress=False)
    return idx


@pytest.mark.slow
@pytest.mark.server
def test_priorart_serve_with_two_workers_serves_the_index_and_key_it_was_given(tmp_path: Path) -> None:
    """``priorart serve INDEX --workers 2 --api-key K`` with no PRIORART_* setting in the environment: the workers
    load the index named on the command line and require the key given there."""
    import httpx

    idx = _tiny_index(tmp_path)
    port = _free_port()
    repo = Path(__file__).resolve().parents[3]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRIORART_")}
    env["PYTHONPATH"] = str(repo)
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "training.cli", "serve", str(idx), "--workers", "2",
                                 "--port", str(port), "--api-key", "k3y"], stdout=out, stderr=subprocess.STDOUT,
                                env=env, cwd=tmp_path, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 240
        while True:
            assert proc.poll() is None, log.read_text()[-3000:]
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/ready", timeout=2).status_code == 200:
                    break
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.5)
        body = {"query": "a device", "k": 3}
        assert httpx.post(f"{url}/search", json=body, timeout=30).status_code == 401
        for _ in range(4):  # the two workers answer in turn, as they come
            found = httpx.post(f"{url}/search", json=body, headers={"X-API-Key": "k3y"}, timeout=30)
            assert found.status_code == 200, found.text
        assert httpx.get(f"{url}/health", timeout=10).json()["documents"] == 20
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)  # its own session: the server and its workers
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


@pytest.mark.server
def test_priorart_serve_on_a_corrupt_index_prints_one_line(tmp_path: Path) -> None:
    """The real command on an index with one flipped byte (its checksum fails): one line, exit 2, no traceback."""
    from service.corpus.jsonl import read_corpus
    from training.build import build_index
    from training.synth import SynthConfig, write_synthetic

    write_synthetic(tmp_path / "c.jsonl", SynthConfig(n=20, seed=1), progress=False)
    idx = tmp_path / "idx"
    build_index(list(read_corpus(tmp_path / "c.jsonl")), idx, translation=False, compounds="", progress=False)
    victim = idx / "docs.jsonl"
    data = bytearray(victim.read_bytes())
    data[10] ^= 0x01
    victim.write_bytes(bytes(data))
    repo = Path(__file__).resolve().parents[3]
    done = subprocess.run([sys.executable, "-m", "training.cli", "serve", str(idx), "--port", "0"], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(repo)})
    assert done.returncode == 2, done.stderr
    # besides the start-up's phase lines logged before the load failed (issue 35: kernel cache, python, kernels)
    errors = [line for line in done.stderr.splitlines() if line.strip() and " INFO service.startup: " not in line]
    assert len(errors) == 1 and "cannot be loaded" in errors[0] and "sha256" in errors[0], done.stderr
