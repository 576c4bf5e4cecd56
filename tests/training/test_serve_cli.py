"""``priorart serve`` options: what it hands to uvicorn (uvicorn itself is not started here), and a bad index at
start as one line (issue 29)."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from training.commands import serve


def _serve(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], env: dict[str, str] | None = None,
           *, load: Any = None) -> tuple[Any, dict[str, Any]]:
    import uvicorn

    from service.engine import Engine

    seen: dict[str, Any] = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: seen.update(kw, app=app))
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


def test_priorart_serve_on_a_corrupt_index_prints_one_line(tmp_path: Path) -> None:
    """The real command on an index with one flipped byte (its checksum fails): one line, exit 2, no traceback."""
    import os
    import subprocess
    import sys

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
    repo = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-m", "training.cli", "serve", str(idx), "--port", "0"], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(repo)})
    assert done.returncode == 2, done.stderr
    # besides the start-up's phase lines logged before the load failed (issue 35: kernel cache, python, kernels)
    errors = [line for line in done.stderr.splitlines() if line.strip() and " INFO service.startup: " not in line]
    assert len(errors) == 1 and "cannot be loaded" in errors[0] and "sha256" in errors[0], done.stderr
