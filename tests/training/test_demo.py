"""`priorart demo` wiring: synthetic corpus -> translation tables -> index (no training, no serving)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from training.cli import app


def test_demo_builds_a_searchable_index_from_synthetic_data(tmp_path: Path) -> None:
    work = tmp_path / "demo"
    res = CliRunner().invoke(app, ["demo", "-n", "300", "--workdir", str(work), "--no-train", "--no-serve"])
    assert res.exit_code == 0, res.output
    meta = json.loads((work / "index" / "meta.json").read_text())
    assert meta["format"] == "priorart-index"
    assert (work / "translation" / "de-en.json").exists()
    out = CliRunner().invoke(app, ["search", str(work / "index"), "XS00000007", "--k", "3", "--json"])
    assert out.exit_code == 0, out.output
    assert len(json.loads(out.output)["results"]) == 3
