"""How many workers a writer's evaluation of the watches takes: its cores, at most its control group's CPU quota (the
weekly add's Kubernetes Job limits it to 2 CPUs on a node of many)."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.watch import evaluate as evaluation
from service.watch.evaluate import all_cores, cgroup_cpus


def test_the_cgroup_quota_is_read_from_v2_then_v1(tmp_path: Path) -> None:
    assert cgroup_cpus(str(tmp_path)) is None  # no control group files
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert cgroup_cpus(str(tmp_path)) is None  # no quota
    (tmp_path / "cpu.max").write_text("200000 100000\n")
    assert cgroup_cpus(str(tmp_path)) == 2
    (tmp_path / "cpu.max").write_text("150000 100000\n")
    assert cgroup_cpus(str(tmp_path)) == 2  # 1.5 CPUs: rounded up
    (tmp_path / "cpu.max").unlink()
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")
    (tmp_path / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    assert cgroup_cpus(str(tmp_path)) is None
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("300000\n")
    assert cgroup_cpus(str(tmp_path)) == 3


def test_the_workers_are_the_cores_within_the_quota(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(evaluation.os, "sched_getaffinity", lambda pid: set(range(16)))
    monkeypatch.setattr(evaluation, "cgroup_cpus", lambda root="": 2)
    assert all_cores() == 2
    monkeypatch.setattr(evaluation, "cgroup_cpus", lambda root="": None)
    assert all_cores() == 16
