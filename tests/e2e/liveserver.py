"""A real ``priorart serve`` subprocess on a free localhost port, for the browser, fuzz and load tests.

Shared by ``tests/e2e`` and ``tests/load`` (imported by path, the test folders are not packages).
The index is the session's ``real_index`` when the real data is there, else ``priorart synth -n 2000``
built once per session. Everything listens on 127.0.0.1 only; the server is stopped by its own pid.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

REPO = Path(__file__).resolve().parents[2]
SHARED_DATA = Path(os.environ.get("PRIORART_DATA", REPO.parent / "shared" / "data"))
CPC_TITLES = SHARED_DATA / "cpc" / "cpc-titles-2025-05.tsv.gz"
_ACCESS_RE = re.compile(r'"([A-Z]+) (\S+) HTTP/[\d.]+" (\d{3})')
_SYNTH_INDEX: dict[Path, Path] = {}  # one synthetic index per test session (basetemp), shared by the modules


def priorart_exe() -> list[str]:
    """The CLI of this checkout's environment (``priorart`` beside the running python, else ``-m``)."""
    exe = Path(sys.executable).with_name("priorart")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "training.cli"]


def artifacts_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where screenshots, downloads and figures go: ``$PRIORART_ARTIFACTS`` or a session tmp folder."""
    env = os.environ.get("PRIORART_ARTIFACTS")
    out = Path(env) if env else tmp_path_factory.getbasetemp() / "artifacts"
    out.mkdir(parents=True, exist_ok=True)
    return out


def service_index(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real-data index when available, else a synthetic one (2000 documents, fixed seed)."""
    try:
        return Path(request.getfixturevalue("real_index"))
    except pytest.skip.Exception:
        pass
    cached = _SYNTH_INDEX.get(tmp_path_factory.getbasetemp())
    if cached is not None:
        return cached
    folder = tmp_path_factory.mktemp("synth-service")
    corpus, index = folder / "corpus.jsonl", folder / "index"
    for args in (["synth", "-n", "2000", "-o", str(corpus), "--seed", "11"], ["build", str(corpus), "-o", str(index)]):
        subprocess.run([*priorart_exe(), *args], check=True, capture_output=True, timeout=300)
    _SYNTH_INDEX[tmp_path_factory.getbasetemp()] = index
    return index


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class LiveServer:
    """A running ``priorart serve``: its base URL, index folder and log file (uvicorn access log)."""

    url: str
    index_dir: Path
    log_path: Path
    process: subprocess.Popen[bytes]

    def access_log(self) -> list[tuple[str, str, int]]:
        """(method, path, status) of every request the server has answered so far."""
        text = self.log_path.read_text(encoding="utf-8", errors="replace")
        return [(m, p, int(s)) for m, p, s in _ACCESS_RE.findall(text)]

    def status_counts(self) -> Counter[int]:
        return Counter(s for _, _, s in self.access_log())


@contextlib.contextmanager
def live_server(index_dir: Path, log_path: Path, *, ready_timeout: float = 90.0,
                extra_env: dict[str, str] | None = None) -> Iterator[LiveServer]:
    """Start ``priorart serve INDEX --host 127.0.0.1 --port N``, wait for /ready, stop it afterwards.

    ``extra_env``: settings for the server (e.g. ``PRIORART_RELOAD_INTERVAL_S``) on top of the environment."""
    port = free_port()
    cmd = [*priorart_exe(), "serve", str(index_dir), "--host", "127.0.0.1", "--port", str(port)]
    if CPC_TITLES.exists():
        cmd += ["--cpc", str(CPC_TITLES)]
    env = {k: v for k, v in os.environ.items() if k not in ("PRIORART_API_KEY", "PRIORART_ADMIN_KEY")}
    env["PRIORART_LOG_LEVEL"] = "INFO"
    env["PRIORART_ACCESS_LOG"] = "1"  # the tests count the server's answers in its access log (off by default)
    env.update(extra_env or {})
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO,
                                start_new_session=True)
    server = LiveServer(f"http://127.0.0.1:{port}", index_dir, log_path, proc)
    try:
        deadline = time.monotonic() + ready_timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"priorart serve exited with {proc.returncode}:\n{log_path.read_text()[-3000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{server.url}/ready", timeout=2.0).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"priorart serve not ready after {ready_timeout} s:\n{log_path.read_text()[-3000:]}")
            time.sleep(0.25)
        yield server
    finally:
        _stop(proc)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)  # its own session: only the server and its children
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=5)


def chromium_wanted() -> str:
    """Where the browser tests look for chromium: ``$PRIORART_CHROMIUM``, else Debian's ``/usr/bin/chromium``."""
    return os.environ.get("PRIORART_CHROMIUM", "/usr/bin/chromium")


def chromium_path() -> str | None:
    """The chromium executable if installed, else None."""
    path = chromium_wanted()
    return path if Path(path).exists() or shutil.which(path) else None


def read_docs(index_dir: Path, limit: int | None = None) -> Iterator[dict]:
    """The records of an index folder's doc store (``docs.jsonl``), as plain dicts."""
    with (index_dir / "docs.jsonl").open(encoding="utf-8") as f:
        for i, line in enumerate(f):
            if limit is not None and i >= limit:
                return
            yield json.loads(line)
