"""``priorart-lab bench load`` end to end at a tiny size: a worktree of another commit (here HEAD), both builds of the
same corpus served one after the other under the locust mix, the figures printed (not asserted: machine-bound). And,
in the fast set, what it compares without serving anything: the settings it is given, the runs it makes of them (the
servers and builds faked), the report's naming of them, its work folder."""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path
from typing import Any

import pytest

NO_LOCUST = pytest.mark.skipif(importlib.util.find_spec("locust") is None,
                               reason="python package locust not installed (pip install -e '.[dev]')")


def _figures(rps: float) -> dict[str, Any]:
    one = {"requests": 10, "failures": 0, "requests_per_s": rps, "p50_ms": 5.0, "p99_ms": 9.0}
    return {"ready_s": 0.1, "all": one, "search": one, "passages": one}


def test_compare_settings_are_checked_against_the_search_request() -> None:
    from lab.benchmarks.load import parse_settings

    assert parse_settings(None) == {}
    assert parse_settings('{"evidence_docs": 0}') == {"evidence_docs": 0}
    assert parse_settings('{"evidence_by": "passage", "evidence_docs": 10}') == {"evidence_by": "passage",
                                                                                  "evidence_docs": 10}
    with pytest.raises(ValueError, match="evidence_doc: Extra inputs"):
        parse_settings('{"evidence_doc": 0}')
    with pytest.raises(ValueError, match="evidence_docs: Input should be greater than or equal to 0"):
        parse_settings('{"evidence_docs": -1}')
    with pytest.raises(ValueError, match="not JSON"):
        parse_settings("evidence_docs=0")
    with pytest.raises(ValueError, match="non-empty JSON object"):
        parse_settings("[1]")
    with pytest.raises(ValueError, match="the query is the load's own"):
        parse_settings('{"query": "x"}')


def test_a_settings_run_is_this_code_on_its_index_with_the_fields_in_every_search(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import lab.benchmarks.load as load

    built: list[tuple[Path, Path]] = []
    served: list[tuple[Path, str, dict[str, Any] | None]] = []
    def fake_build(code: Path, corpus: Path, out: Path) -> float:
        built.append((code, out))
        return 1.0

    monkeypatch.setattr(load, "_build", fake_build)

    def fake_locust(code: Path, index: Path, users: int, seconds: int, out: Path,
                    search_body: dict[str, Any] | None = None) -> dict[str, Any]:
        served.append((code, index.name, search_body))
        return _figures(40.0 if search_body else 10.0)

    monkeypatch.setattr(load, "_locust", fake_locust)
    report = load.run_load_bench(tmp_path / "c.jsonl", baseline=None, rounds=2, work_dir=tmp_path / "a" / "b",
                                 progress=False, settings={"evidence_docs": 0})
    assert (tmp_path / "a" / "b").is_dir()  # made with its parents
    assert built == [(load.REPO, built[0][1])] and built[0][1].name == "index-current"  # one build: no other commit
    assert served == [(load.REPO, "index-current", {}), (load.REPO, "index-current", {"evidence_docs": 0})] * 2
    assert [r["code"] for r in report["runs"]] == ["current", "settings"] * 2
    assert report["compared"] == ["current", "settings"] and report["settings"] == {"evidence_docs": 0}
    assert report["settings_ratio"] == pytest.approx(4.0) and "speedup" not in report
    text = load.format_report(report)
    assert 'this code with {"evidence_docs": 0} in every /search body' in text
    assert "baseline" not in text
    assert 'with {"evidence_docs": 0} over the default request 4.00x' in text
    with pytest.raises(RuntimeError, match="nothing to compare"):
        load.run_load_bench(tmp_path / "c.jsonl", baseline=None, progress=False)


def test_the_report_names_the_commit_and_the_settings_compared() -> None:
    from lab.benchmarks.load import format_report

    runs = [{"round": 1, "code": name, **_figures(rps)} for name, rps in
            (("current", 30.0), ("settings", 45.0), ("baseline", 3.0))]
    text = format_report({"users": 2, "seconds": 6, "corpus": "c.jsonl", "baseline": "f18968c^1",
                          "baseline_commit": "a" * 40, "current_commit": "b" * 40, "settings": {"evidence_docs": 0},
                          "compared": ["current", "settings", "baseline"], "runs": runs,
                          "mean_requests_per_s": {"current": 30.0, "settings": 45.0, "baseline": 3.0},
                          "speedup": 10.0, "settings_ratio": 1.5, "failures": 0})
    first = text.splitlines()[0]
    assert "this code (bbbbbbbbbb, 'current', the default request)" in first
    assert "baseline f18968c^1 (aaaaaaaaaa)" in first and '{"evidence_docs": 0} in every /search body' in first
    assert text.splitlines()[-1] == ("mean throughput: current 30.0, settings 45.0, baseline 3.0 requests/s; current "
                                     "over baseline 10.0x; with {\"evidence_docs\": 0} over the default request "
                                     "1.50x; failed requests 0")


def test_the_work_dir_is_made_or_refused_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    import lab.benchmarks.load as load
    from lab.cli import app

    corpus = tmp_path / "c.jsonl"
    corpus.write_text("{}\n", encoding="utf-8")
    blocker = tmp_path / "a-file"
    blocker.write_text("", encoding="utf-8")
    res = CliRunner().invoke(app, ["bench", "load", str(corpus), "--work-dir", str(blocker / "sub")])
    assert res.exit_code == 2
    assert res.output.strip().splitlines() == [f"error: --work-dir {blocker / 'sub'}: cannot make it a folder "
                                               "(Not a directory)"]
    seen: dict[str, Any] = {}

    def fake_run(corpus: Path, **kw: Any) -> dict[str, Any]:
        seen.update(kw)
        return {"users": 1, "seconds": 1, "corpus": str(corpus), "baseline": None, "baseline_commit": None,
                "current_commit": "c" * 40, "settings": kw["settings"], "compared": ["current", "settings"],
                "runs": [], "mean_requests_per_s": {"current": 1.0, "settings": 2.0}, "settings_ratio": 2.0,
                "failures": 0}

    monkeypatch.setattr(load, "run_load_bench", fake_run)
    work = tmp_path / "new" / "deeper"
    res = CliRunner().invoke(app, ["bench", "load", str(corpus), "--work-dir", str(work), "--baseline", "none",
                                   "--compare-settings", '{"evidence_docs": 0}'])
    assert res.exit_code == 0, res.output
    assert work.is_dir() and seen["work_dir"] == work and seen["baseline"] is None
    assert seen["settings"] == {"evidence_docs": 0}
    assert 'this code with {"evidence_docs": 0} in every /search body' in res.output
    res = CliRunner().invoke(app, ["bench", "load", str(corpus), "--compare-settings", '{"evidence_doc": 0}'])
    assert res.exit_code == 2 and res.output.strip().splitlines() == [
        'error: --compare-settings {"evidence_doc": 0}: not a valid /search body (evidence_doc: Extra inputs are not '
        "permitted)"]


@NO_LOCUST
def test_bench_load_runs_both_codes_and_prints_the_ratio(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from lab.benchmarks.load import REPO, format_report, run_load_bench
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
