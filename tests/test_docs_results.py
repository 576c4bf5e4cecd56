"""The measured figures in the docs are their result files' (docs/results/), and the small real-data experiments
still measure them (docs/results/expected.json; a regression is a failing line, as in Pyserini's regressions)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from index_copy import copy_index

from lab.docs_results import DOCUMENTS, RESULTS_DIR, ResultsError, figure, load, render_document, update

EXPECTED: list[dict[str, Any]] = json.loads((RESULTS_DIR / "expected.json").read_text(encoding="utf-8"))["figures"]
# the experiments small enough to measure again in the test suite (about a minute together on 2 cores)
REMEASURED = ("passages", "feedback")


def _id(e: dict[str, Any]) -> str:
    return f"{e['experiment']}:{e['row']}:{e['measure']}"


def test_the_docs_tables_are_the_rendering_of_their_result_files() -> None:
    stale = update(DOCUMENTS, RESULTS_DIR, check=True)
    assert not stale, f"{[str(d) for d in stale]} differ from their result files: run `priorart-lab docs results`"


def test_every_result_file_has_a_table_and_says_how_it_was_measured() -> None:
    from lab.docs_results import TABLES

    named = {f for t in TABLES.values() for f in t.files}
    on_disk = {str(p.relative_to(RESULTS_DIR)) for p in RESULTS_DIR.rglob("*.json")}
    assert named <= on_disk, named - on_disk
    for name in named:
        r = load(name)
        # (recorded before the lab had its own command: ``priorart experiment ...``)
        assert r.get("commit") and r.get("command", "").startswith(
            ("priorart experiment ", "priorart bench ", "priorart-lab experiment ", "priorart-lab bench ")), name
    rendered = "".join(d.read_text(encoding="utf-8") for d in DOCUMENTS)
    for name in TABLES:
        assert f"<!-- BEGIN results {name} -->" in rendered, f"table {name} is in no document"


def test_a_changed_figure_makes_the_check_fail(tmp_path: Path) -> None:
    results = tmp_path / "results"
    copy_index(RESULTS_DIR, results)
    doc = tmp_path / "RESULTS.md"
    doc.write_text((RESULTS_DIR.parent / "RESULTS.md").read_text(encoding="utf-8"), encoding="utf-8")
    assert update((doc,), results, check=True) == []
    data = json.loads((results / "passages.json").read_text(encoding="utf-8"))
    data["variants"][0]["defaults"] += 0.01
    (results / "passages.json").write_text(json.dumps(data), encoding="utf-8")
    assert update((doc,), results, check=True) == [doc]
    assert update((doc,), results) == [doc] and update((doc,), results, check=True) == []
    with pytest.raises(ResultsError, match="unknown results table 'nope'"):
        render_document("<!-- BEGIN results nope -->\n<!-- END results -->", results)


@pytest.mark.parametrize("entry", EXPECTED, ids=_id)
def test_expected_figure_is_the_result_files(entry: dict[str, Any]) -> None:
    got = figure(entry["experiment"], load(entry["file"]), entry["row"], entry["measure"])
    assert abs(got - entry["value"]) <= entry["tolerance"], f"{_id(entry)}: result file {got:.4f}, expected " \
                                                            f"{entry['value']} ± {entry['tolerance']}"


def _measure(experiment: str, data: Path) -> dict[str, Any]:
    """Run ``experiment`` again with the settings its result file records."""
    from dataclasses import asdict, fields

    if experiment == "passages":
        from lab.experiments.passages import PassageTuningSettings, load_records, run_passage_tuning

        saved = load("passages.json")
        assert saved.get("tables") is None, "the documented run has no --tables; this test measures that one"
        kwargs: dict[str, Any] = {f.name: tuple(v) if isinstance(v := saved["settings"][f.name], list) else v
                                  for f in fields(PassageTuningSettings)}
        settings = PassageTuningSettings(**kwargs)
        # each fold at the parameters the result file says its grid search chose: the figures are the scoring's;
        # the grid search itself is checked on the real proxy by tests/training/test_passage_tuning.py
        chosen = {v["variant"]: v["folds"] for v in saved["variants"]}
        return run_passage_tuning(load_records(data), settings, progress=False, fold_params=chosen).to_dict()
    if experiment == "feedback":
        from lab.experiments.feedback import run_feedback
        from training.ingest import iter_records

        saved = load("feedback.json")
        assert saved.get("index") is None, "the documented run builds its own index; this test measures that one"
        records = list(iter_records([data / "patents" / "ep", data / "patents" / "us"]))
        return asdict(run_feedback(records, depth=saved["depth"], terms=saved["terms"],
                                   min_relevant=saved["min_relevant"]))
    raise AssertionError(f"no way to measure {experiment!r} again")


@pytest.mark.realdata
@pytest.mark.parametrize("experiment", REMEASURED)
def test_expected_figures_are_measured_again(experiment: str, shared_data: Path) -> None:
    """One run of the experiment; every expected figure it no longer gives is one line of the failure."""
    entries = [e for e in EXPECTED if e["experiment"] == experiment]
    assert entries, f"docs/results/expected.json has no figure of {experiment}"
    measured = _measure(experiment, shared_data)
    failed = []
    for e in entries:
        got = figure(experiment, measured, e["row"], e["measure"])
        if abs(got - e["value"]) > e["tolerance"]:
            failed.append(f"{_id(e)}: measured {got:.4f}, expected {e['value']} ± {e['tolerance']}")
    assert not failed, ("\n".join(failed) + f"\n(docs/results/expected.json; if the change is intended, run "
                        f"`{load(entries[0]['file'])['command']}`, then `priorart-lab docs results`, and update the "
                        "expected values)")
