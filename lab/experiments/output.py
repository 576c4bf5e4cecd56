"""The result file an experiment writes with ``--out``: its result as JSON, with the commit of the code that
measured it and the command that ran it (``priorart-lab docs results`` renders docs/RESULTS.md's tables from these
files, and names both under each table)."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent


def commit() -> str | None:
    """The repository's short commit, ``+dirty`` when tracked files differ from it; None outside a checkout."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=5,
                              cwd=_HERE, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True, timeout=5, cwd=_HERE, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def command_line() -> str:
    """This process's command line as a ``priorart-lab`` command (what a reader types to measure it again; results
    recorded before the lab had its own command say ``priorart``)."""
    return shlex.join(["priorart-lab", *sys.argv[1:]])


def write_result(result: dict[str, Any], path: str | Path, *, command: str | None = None) -> Path:
    """Write ``result`` as sorted, indented JSON to ``path`` with ``commit`` (when it has none) and ``command``."""
    out = {**result, "command": command if command is not None else result.get("command")}
    out.setdefault("commit", None)
    if out["commit"] is None:
        out["commit"] = commit()
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return p
