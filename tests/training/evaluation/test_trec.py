"""TREC run / qrels and JSONL topics: round trips, tolerance of blank lines, errors with line numbers."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from training.evaluation.trec import (
    Topic,
    TrecFormatError,
    read_qrels,
    read_run,
    read_topics,
    write_qrels,
    write_run,
    write_topics,
)


def test_topics_round_trip(tmp_path: Path) -> None:
    topics = [
        Topic(qid="EP1-de", text="Vorrichtung zum Fördern", lang="de", ipc=["B05B 7/ 00"], before=date(2001, 2, 3)),
        Topic(qid="q2", text="a pump", cpc=["H01F 027/14"]),
    ]
    assert topics[0].ipc == ["B05B7/00"]
    assert topics[1].cpc == ["H01F27/14"]
    path = tmp_path / "topics.jsonl"
    assert write_topics(topics, path) == 2
    assert read_topics(path) == topics
    assert '"lang"' not in path.read_text(encoding="utf-8").splitlines()[1]  # defaults left out


def test_topics_tolerant_reading(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(
        '\n{"qid": 7, "text": "claim one", "lang": "fr", "ipc": "A61K 31/00", "note": "ignored"}\n\n'
        '{"qid": "b", "text": "x", "ipc": ["A61K31/00", "A61K 31/00"], "cpc": [], "before": "2005-01-04"}\n',
        encoding="utf-8",
    )
    t = read_topics(path)
    assert [x.qid for x in t] == ["7", "b"]
    assert t[0].ipc == ["A61K31/00"] and t[0].lang == "fr"
    assert t[1].ipc == ["A61K31/00"] and t[1].before == date(2005, 1, 4)
    assert t[1].codes == ["A61K31/00"]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "not valid JSON"),
        ('["qid", "text"]', "expected a JSON object"),
        ('{"text": "no id"}', "qid"),
        ('{"qid": "a b", "text": "x"}', "whitespace"),
        ('{"qid": "q", "text": "   "}', "text is empty"),
        ('{"qid": "q", "text": "x", "lang": "es"}', "lang must be one of"),
        ('{"qid": "q", "text": "x", "ipc": ["not a code"]}', "not an IPC/CPC code"),
        ('{"qid": "q", "text": "x", "before": "yesterday"}', "before"),
    ],
)
def test_topics_bad_line_names_line(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"qid": "ok", "text": "fine"}\n\n' + line + "\n", encoding="utf-8")
    with pytest.raises(TrecFormatError, match=message) as info:
        read_topics(path)
    assert f"{path}:3:" in str(info.value)


def test_topics_duplicate_qid(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"qid": "a", "text": "x"}\n{"qid": "a", "text": "y"}\n', encoding="utf-8")
    with pytest.raises(TrecFormatError, match=r":2: duplicate qid"):
        read_topics(path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no such file"):
        read_topics(tmp_path / "absent.jsonl")


def test_qrels_round_trip_and_blank_lines(tmp_path: Path) -> None:
    qrels = {"q1": {"d1": 1, "d2": 0}, "q2": {"d9": 2}}
    path = tmp_path / "qrels.txt"
    assert write_qrels(qrels, path) == 3
    assert path.read_text(encoding="utf-8").splitlines()[0] == "q1 0 d1 1"
    path.write_text("\n" + path.read_text(encoding="utf-8") + "\n  \n", encoding="utf-8")
    assert read_qrels(path) == qrels


@pytest.mark.parametrize(
    ("line", "message"),
    [("q1 0 d1", "expected 4 fields"), ("q1 0 d1 yes", "must be an integer"), ("q1 0 d1 2", "different grades")],
)
def test_qrels_errors(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "qrels.txt"
    path.write_text("q1 0 d1 1\n" + line + "\n", encoding="utf-8")
    with pytest.raises(TrecFormatError, match=message) as info:
        read_qrels(path)
    assert f"{path}:2:" in str(info.value)


def test_run_round_trip_keeps_scores_and_trec_order(tmp_path: Path) -> None:
    run = {"q2": {"a": 1.0, "c": 3.25, "b": 1.0}, "q1": {"x": 0.1 + 0.2}}
    path = tmp_path / "run.trec"
    assert write_run(run, path, tag="bm25") == 4
    lines = path.read_text(encoding="utf-8").splitlines()
    # score order, ties by descending doc id (trec_eval); queries in the run's order
    assert [ln.split()[2] for ln in lines] == ["c", "b", "a", "x"]
    assert lines[0] == "q2 Q0 c 1 3.25 bm25"
    assert [ln.split()[3] for ln in lines] == ["1", "2", "3", "1"]
    assert read_run(path) == run  # exact float round trip


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("q1 Q0 d2 2 1.0", "expected 6 fields"),
        ("q1 Q0 d2 two 1.0 t", "rank must be an integer"),
        ("q1 Q0 d2 2 high t", "rank must be an integer and score a number"),
        ("q1 Q0 d2 2 nan t", "not finite"),
        ("q1 Q0 d1 2 0.5 t", "appears twice"),
    ],
)
def test_run_errors(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "run.trec"
    path.write_text("q1 Q0 d1 1 2.0 t\n\n" + line + "\n", encoding="utf-8")
    with pytest.raises(TrecFormatError, match=message) as info:
        read_run(path)
    assert f"{path}:3:" in str(info.value)


def test_write_rejects_ids_with_spaces(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="whitespace"):
        write_run({"q 1": {"d": 1.0}}, tmp_path / "r.trec")
    with pytest.raises(ValueError, match="whitespace"):
        write_qrels({"q": {"d 1": 1}}, tmp_path / "q.txt")
