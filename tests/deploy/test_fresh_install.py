"""The image's installation, made here offline (issue 35): the wheel with the ``service`` extra only in a fresh virtual
environment (no torch, no gensim; :mod:`lab.benchmarks.install` says how, and why not a ``.pth`` file), its kernel
cache filled by its own ``priorart warmup`` as the Dockerfile does, then ``priorart serve`` with an empty
``NUMBA_CACHE_DIR`` is ready and reads every kernel from the cache, which it leaves as it was.

The image's warm-up compiles for two CPU levels (``x86-64-v4,generic``: the Dockerfile, checked by
test_deploy_files): the last in its own process, which runs them, the first in a process of its own. So does this
test, with the best level this CPU runs first, so that its server reads the code that the second process compiled
(issue 57: that process imported the ``service`` package of the current folder, here the repository's, and a server
of the installed package compiled 61 of 61 variants at every start; each level takes about 25-45 s on 2 cores,
the choice among the levels a manifest lists is covered by test_startup). No time is asserted: the log says that no
kernel was compiled at start; ``priorart-lab bench start`` prints the figures (docs/DEPLOYMENT.md).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
READY_WITHIN_S = 300.0
"""How long the test waits for /ready before calling it a hang (not a start-up target)."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env(venv: Path, home: Path) -> dict[str, str]:
    """The environment of a container: the venv's scripts first, no numba or priorart settings, its own HOME (numba's
    user-wide cache folder is not this machine's)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NUMBA_", "PRIORART_", "PIP_"))}
    env.pop("VIRTUAL_ENV", None)
    env.pop("PYTHONPATH", None)
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", HOME=str(home), PRIORART_LOG_LEVEL="INFO")
    return env


def _snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*")}


@pytest.mark.slow
@pytest.mark.server
def test_the_wheel_with_the_service_extra_serves_ready_from_its_kernel_cache(tmp_path: Path) -> None:
    from lab.benchmarks.install import fresh_install
    from training.build import build_index
    from training.synth import generate

    inst = fresh_install(tmp_path / "venv", tmp_path / "work", compile_modules=False)  # pyc: not under test
    assert "numba" in inst.packages and "fastapi" in inst.packages and "torch" not in inst.packages
    home = tmp_path / "home"
    home.mkdir()
    env = _env(inst.venv, home)
    found = subprocess.run([str(inst.python), "-c", "import importlib.util as u, service; print(service.__file__, "
                            "[m for m in ('torch', 'gensim', 'pytest') if u.find_spec(m)])"],
                           capture_output=True, text=True, env=env, cwd=tmp_path, check=True).stdout.split()
    assert found[0].startswith(str(inst.venv)) and found[1:] == ["[]"], found

    import platform

    from service.startup import X86_LEVELS, cpu_flags

    flags = cpu_flags() or frozenset()
    levels = [c for c in ("x86-64-v4", "x86-64-v3", "x86-64-v2") if X86_LEVELS[c] <= flags][:1]  # best first
    cpus = [*levels, "generic"] if platform.machine() in ("x86_64", "AMD64") else ["generic"]
    level = cpus[0]  # what the server reads
    cache = tmp_path / "kernel-cache"  # what the Dockerfile's `priorart warmup` fills, here in a checkout's folder
    res = subprocess.run([str(inst.priorart), "warmup", "--kernel-cache", str(cache), "--cpu", ",".join(cpus)],
                         capture_output=True, text=True, env=env, cwd=REPO, timeout=900)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    manifest = json.loads((cache / "kernel-cache.json").read_text())
    assert manifest["cpus"] == cpus and manifest["package"] == str(Path(found[0]).parent)
    assert manifest["variants"] > 0 and res.stdout.count("compiled now") == len(cpus), res.stdout
    before = _snapshot(cache)
    for p in cache.rglob("*"):  # read-only from here on (root ignores the mode: the snapshot checks it then)
        p.chmod(p.stat().st_mode & ~0o222)
    cache.chmod(0o555)

    index = tmp_path / "index"
    records = list(generate(120, seed=7))
    build_index(records, index, lexicons="", splitter_lexicons="", progress=False)
    query = next(r.title["en"] for r in records if "en" in r.title)

    port = _free_port()
    serve_env = {**env, "NUMBA_CACHE_DIR": str(tmp_path / "container-tmp" / "numba"),
                 "PRIORART_KERNEL_CACHE": str(cache)}
    log = tmp_path / "serve.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([str(inst.priorart), "serve", str(index), "--port", str(port)], env=serve_env,
                                stdout=out, stderr=subprocess.STDOUT, cwd=tmp_path, start_new_session=True)
    try:
        deadline = time.monotonic() + READY_WITHIN_S
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/ready", timeout=5) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            assert proc.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, "not ready in time:\n" + log.read_text()[-3000:]
            time.sleep(0.1)
        req = urllib.request.Request(f"http://127.0.0.1:{port}/search", data=json.dumps({"query": query}).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as r:
            assert r.status == 200 and json.loads(r.read())["results"]
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
        cache.chmod(0o755)
    text = log.read_text()
    assert "copied to" in text and "WARNING" not in text, text[-3000:]
    assert f"; {level} here" in text
    kernels = next(line for line in text.splitlines() if "start-up: kernels" in line)
    assert "read from numba's cache" in kernels and "compiled" not in kernels, kernels  # none compiled at start
    for phase in ("python", "checksums", "index files", "page-in", "first query"):
        assert f"start-up: {phase} " in text, text[-3000:]
    assert _snapshot(cache) == before
