"""``priorart bench load`` end to end at a tiny size: a worktree of another commit (here HEAD), both builds of the
same corpus served one after the other under the locust mix, the figures printed (not asserted: machine-bound)."""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.load,
    pytest.mark.skipif(importlib.util.find_spec("locust") is None,
                       reason="python package locust not installed (pip install -e '.[dev]')"),
]


def test_bench_load_runs_both_codes_and_prints_the_ratio(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from training.benchmarks.load import REPO, format_report, run_load_bench
    from training.synth import SynthConfig, write_synthetic

    if subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, check=False).returncode != 0:
        pytest.skip("not a git checkout: no commit to compare with")
    corpus = tmp_path / "corpus.jsonl"
    write_synthetic(corpus, SynthConfig(n=120, seed=3), progress=False)
    # 6 s: a 3-second run on the busy 2-core machine again ended with no request answered (fresh clone of 1919f67)
    report = run_load_bench(corpus, baseline="HEAD", users=2, seconds=6, rounds=1, work_dir=tmp_path,
                            progress=False)
    assert [r["code"] for r in report["runs"]] == ["current", "baseline"]
    for run in report["runs"]:
        assert run["all"]["requests"] > 0 and run["search"]["requests"] > 0
    assert report["failures"] == 0
    assert report["speedup"] > 0
    worktrees = subprocess.run(["git", "worktree", "list"], cwd=REPO, capture_output=True, text=True).stdout
    assert str(tmp_path) not in worktrees  # the baseline's worktree is removed
    table = format_report(report)
    assert "mean throughput" in table and "baseline" in table
    with capsys.disabled():
        print("\n" + table)
