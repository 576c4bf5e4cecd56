"""``priorart serve`` options: what it hands to uvicorn (uvicorn itself is not started here)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from training.commands import serve


@pytest.mark.parametrize(("args", "env", "access_log"), [
    ([], {}, False),  # off by default: /metrics counts every request
    (["--access-log"], {}, True),
    ([], {"PRIORART_ACCESS_LOG": "1"}, True),
])
def test_access_log_is_off_unless_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str],
                                        env: dict[str, str], access_log: bool) -> None:
    import uvicorn

    (tmp_path / "meta.json").write_text("{}", encoding="utf-8")  # serve checks the folder, the app loads it later
    seen: dict[str, Any] = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: seen.update(kw))
    monkeypatch.delenv("PRIORART_ACCESS_LOG", raising=False)
    app = typer.Typer()
    serve.register(app)
    app.command("noop")(lambda: None)  # (a group, so that `serve` is a subcommand)
    res = CliRunner().invoke(app, ["serve", str(tmp_path), *args], env=env)
    assert res.exit_code == 0, res.output
    assert seen["access_log"] is access_log and seen["log_level"] == "info"
