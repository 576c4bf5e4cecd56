"""Bad input on the command line is one line (issue 57 item 5): a usage error (an unknown option, a missing argument,
a value of the wrong type, an unknown verb) prints ``error: ...`` naming the verb's ``--help`` and exits 2, as every
other refusal does; click's own report is a box of several lines."""

from __future__ import annotations

import pytest

from training.cli import run


@pytest.mark.parametrize(("argv", "says"), [
    (["build", "--bogus", "x"], "No such option: --bogus"),
    (["build"], "Missing argument 'corpus'"),
    (["search", "--k", "many", "idx", "q"], "Invalid value for '--k'"),
    (["no-such-verb"], "No such command 'no-such-verb'"),
    (["watch", "add"], "Missing argument 'index'"),
])
def test_a_usage_error_is_one_line_and_exit_2(argv: list[str], says: str, capsys: pytest.CaptureFixture[str]) -> None:
    rc = run(argv)
    err = capsys.readouterr().err
    assert rc == 2
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ") and says in lines[0] and "--help`)" in lines[0], lines[0]


def test_help_still_prints_and_succeeds(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["build", "--help"]) == 0
    assert "Usage" in capsys.readouterr().out
