"""The log a user reads (issue 30): a search on an index with models on a machine without a GPU logs the device once,
at INFO, and nothing else (faiss's ModuleNotFoundError lines for each instruction set it tries, three "no CUDA"
warnings for a device nobody asked for)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("faiss")
pytest.importorskip("torch")
pytest.importorskip("gensim")

from models_fixture import tiny_index  # noqa: E402


@pytest.mark.slow
def test_a_search_says_which_device_runs_once_and_quietly() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRIORART_")}
    res = subprocess.run([sys.executable, "-m", "training.cli", "search", str(tiny_index()), "a rotor with a bearing",
                          "--k", "2", "--device", "auto"], capture_output=True, text=True, env=env, timeout=300,
                         check=False)
    assert res.returncode == 0, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert not [ln for ln in lines if "faiss.loader" in ln or "ModuleNotFoundError" in ln], res.stderr
    assert not [ln for ln in lines if " WARNING " in ln], res.stderr
    device = [ln for ln in lines if re.search(r"\bon (cpu|cuda)\b", ln, flags=re.I)]
    assert len(device) == 1 and " INFO " in device[0], res.stderr
