"""The cross-lingual experiment: helpers on toy records, and a short real-data run (3 folds)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from lab.commands import experiment as experiment_cmd
from lab.experiments import ExperimentError
from lab.experiments.xling import (
    XlingSettings,
    first_claim,
    format_table,
    run_xling,
    trilingual_grants,
    words_only,
)
from service.corpus.record import Claim, PatentRecord
from training.evaluation.trec import read_qrels, read_run
from training.ingest import MissingDataError


def _rec(rid: str, langs: tuple[str, ...], kind: str = "B1") -> PatentRecord:
    return PatentRecord(
        id=rid,
        country=rid[:2],
        number=rid[2:-2],
        kind=kind,
        source="ep",
        claims={lang: [Claim(num=2, text=f"{lang} two"), Claim(num=1, text=f"{lang} one")] for lang in langs},
    )


def test_trilingual_grants_and_first_claim() -> None:
    recs = [
        _rec("EP0000002B1", ("en", "de", "fr")),
        _rec("EP0000001B1", ("en", "de", "fr")),
        _rec("EP0000003A1", ("en", "de", "fr"), kind="A1"),
        _rec("EP0000004B1", ("en", "de")),
    ]
    grants = trilingual_grants(recs)
    assert [g.id for g in grants] == ["EP0000001B1", "EP0000002B1"]
    assert first_claim(grants[0], "de") == "de one"


def test_words_only_drops_strings_shared_by_all_languages() -> None:
    text = "Gehäuse (4) mit 15 Gew.-% SO2 nach H01F 27/14 und 1,5 mm"
    assert words_only(text) == "gehäuse mit gew so2 nach und mm"


def test_settings_are_checked(tmp_path: Path) -> None:
    with pytest.raises(ExperimentError, match="folds must be >= 2"):
        XlingSettings(folds=1)
    with pytest.raises(MissingDataError, match="patent folders not found"):
        run_xling(tmp_path, XlingSettings(folds=2))
    with pytest.raises(ExperimentError, match="trilingual EP grants found"):
        run_xling(tmp_path, XlingSettings(folds=2), records=[_rec("EP0000001B1", ("en", "de", "fr"))])


@pytest.mark.realdata
@pytest.mark.slow
def test_xling_on_real_data_translation_beats_no_translation(shared_data: Path, tmp_path: Path) -> None:
    result = run_xling(shared_data, XlingSettings(folds=3, folders="default"), out_dir=tmp_path, progress=False)
    assert result.topics == 2 * len(result.grants) and len(result.grants) >= 20
    none = result.rows["none"]["all"]["mrr"]
    # the dictionary carries the translation: dict and both must be clearly ahead. The aligned-claims
    # model alone (cross-fitted: ~16 grants of training claims per fold) is near the baseline, and
    # is reported, not asserted.
    for row in ("dict", "both"):
        assert result.rows[row]["all"]["mrr"] > none + 0.1, (row, result.rows)
    # cross-fitting: every grant is in exactly one fold and each fold's aligned model left it out
    assert set(result.folds) == set(result.grants) and set(result.folds.values()) == {0, 1, 2}
    # each fold's model saw exactly the documents of the others: used + held out is the same for all folds
    totals = set()
    for key, info in result.resources["aligned"].items():
        fold = int(key[len("fold") :].split("-")[0])
        held_out = sum(1 for f in result.folds.values() if f == fold)
        totals.add(info["documents"] + held_out)
    assert len(totals) == 1
    runs = {row: read_run(tmp_path / "runs" / f"xling-{row}.run") for row in result.rows}
    qrels = read_qrels(tmp_path / "qrels.txt")
    # a topic whose untranslated terms match no English document has no line in the "none" run
    assert set(runs["none"]) <= set(qrels) and set(runs["both"]) == set(qrels) and len(qrels) == result.topics
    assert all(next(iter(qrels[q])) == q.rsplit("-", 1)[0] for q in qrels)
    saved = json.loads((tmp_path / "xling.json").read_text(encoding="utf-8"))
    assert saved["rows"] == result.rows
    assert "none" in format_table(result).splitlines()[2]


def test_experiment_command_reports_bad_options(tmp_path: Path) -> None:
    app = typer.Typer()
    experiment_cmd.register(app)
    res = CliRunner().invoke(app, ["experiment", "xling", "--data", str(tmp_path), "--folds", "1"])
    assert res.exit_code == 2 and "folds must be >= 2" in res.output


@pytest.mark.parametrize(("args", "says"), [
    (["route-merge", "--combines", "nope"], "unknown route merge(s) ['nope']"),
    (["feedback"], "patent folders not found"),
    (["code-prediction"], "patent folders not found"),
    (["xling-tasks"], "patent folders not found"),
    (["xling-passages"], "patent folders not found"),
])
def test_experiment_commands_refuse_in_one_line_with_exit_2(tmp_path: Path, args: list[str], says: str) -> None:
    """Every experiment command turns its refusals into one stderr line and exit status 2 (no traceback)."""
    app = typer.Typer()
    experiment_cmd.register(app)
    res = CliRunner().invoke(app, ["experiment", args[0], "--data", str(tmp_path), *args[1:]])
    assert res.exit_code == 2 and says in res.output and "Traceback" not in res.output
    assert isinstance(res.exception, SystemExit)


def _toy_grant(i: int, de: str, fr: str, en: str) -> PatentRecord:
    return PatentRecord(
        id=f"EP000000{i}B1",
        country="EP",
        number=f"000000{i}",
        kind="B1",
        source="ep",
        title={"en": en, "de": de, "fr": fr},
        claims={"en": [Claim(num=1, text=en)], "de": [Claim(num=1, text=de)], "fr": [Claim(num=1, text=fr)]},
    )


TOY_GRANTS = [
    _toy_grant(1, "Gehäuse mit Welle", "Boîtier avec arbre", "Housing with shaft"),
    _toy_grant(2, "Welle aus Stahl", "Arbre en acier", "Shaft of steel"),
    _toy_grant(3, "Schicht aus Stahl", "Couche en acier", "Layer of steel"),
    _toy_grant(4, "Gehäuse mit Schicht", "Boîtier avec couche", "Housing with layer"),
]


def test_missing_dictionary_skips_the_rows_that_need_it(tmp_path: Path) -> None:
    result = run_xling(tmp_path, XlingSettings(folds=2, dictd_dir=str(tmp_path)), records=TOY_GRANTS, progress=False)
    assert list(result.rows) == ["none", "aligned"]
    assert result.topics == 8 and any("not installed" in n for n in result.notes)
    assert "note: FreeDict" in format_table(result)
