"""scripts/setup.sh keeps pip's output (and the build backend's notes: setuptools' "Editable installation" warning)
out of the newcomer's terminal, and shows it when the install fails (issue 30). The install step of the script is
run with a stand-in ``python`` that prints what pip printed."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

SETUP = Path(__file__).resolve().parents[1] / "scripts" / "setup.sh"
NOISE = ("  BuildBackendWarning: Editable installation.\n"
         "WARNING: Location 'file:///opt/x/' is ignored: it is neither a file nor a directory.\n")


def _install_step() -> str:
    m = re.search(r"^if ! python -m pip install .*?^fi$", SETUP.read_text(encoding="utf-8"), flags=re.S | re.M)
    assert m, "scripts/setup.sh: no pip install step of the expected shape"
    return m.group(0)


def _run(tmp_path: Path, rc: int) -> subprocess.CompletedProcess[str]:
    fake = tmp_path / "bin"
    fake.mkdir(exist_ok=True)
    (fake / "python").write_text(f"#!/bin/sh\nprintf %s \"{NOISE}\" >&2\nexit {rc}\n")
    (fake / "python").chmod(0o755)
    (tmp_path / ".venv").mkdir(exist_ok=True)
    script = "set -euo pipefail\n" + _install_step() + "\necho step-done\n"
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}"}
    return subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, check=False,
                          timeout=60)


def test_pip_output_goes_to_a_log(tmp_path: Path) -> None:
    ok = _run(tmp_path, 0)
    assert ok.returncode == 0 and ok.stdout == "step-done\n" and ok.stderr == ""
    assert "Editable installation" in (tmp_path / ".venv" / "pip-install.log").read_text()


def test_a_failed_install_shows_its_log(tmp_path: Path) -> None:
    bad = _run(tmp_path, 1)
    assert bad.returncode == 0 and "step-done" in bad.stdout  # the import check after it decides
    assert "Editable installation" in bad.stderr and "pip install failed" in bad.stderr
    assert "is ignored" not in bad.stderr
