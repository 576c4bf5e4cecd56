"""Evaluation task builders: known-item (US grants) and cross-lingual (trilingual EP grants)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from service.corpus.jsonl import write_corpus
from service.corpus.record import Claim, PatentRecord, Section
from training.commands import tasks as tasks_command
from training.evaluation.trec import read_qrels, read_topics
from training.tasks import is_known_item_candidate, known_item_task, xling_task


def _us(number: str, **kw: object) -> PatentRecord:
    base: dict[str, object] = {
        "id": f"US{number}B2",
        "country": "US",
        "number": number,
        "kind": "B2",
        "source": "us-ipg",
        "doc_type": "utility",
        "lang": "en",
        "title": {"en": f"Pump {number}"},
        "abstract": {"en": f"A pump with a valve {number}."},
        "claims": {"en": [Claim(num=1, text="A pump.")]},
        "description": [Section(heading="BACKGROUND", paragraphs=["Pumps move fluids."])],
        "ipc": ["F04B 1/00"],
    }
    base.update(kw)
    return PatentRecord.model_validate(base)


def _ep(number: str, langs: tuple[str, ...] = ("en", "de", "fr"), kind: str = "B1") -> PatentRecord:
    claims = {
        lang: [Claim(num=2, text=f"{lang} claim two", refs=[1]), Claim(num=1, text=f"{lang} claim one {number}")]
        for lang in langs
    }
    return PatentRecord(
        id=f"EP{number}{kind}", country="EP", number=number, kind=kind, source="ep", claims=claims, ipc=["B05B 7/00"]
    )


def test_known_item_eligibility() -> None:
    assert is_known_item_candidate(_us("1"))
    assert not is_known_item_candidate(_us("2", doc_type="design", kind="S1"))
    assert not is_known_item_candidate(_us("3", claims={}))
    assert not is_known_item_candidate(_us("4", description=[]))
    assert not is_known_item_candidate(_us("5", abstract={}))
    assert not is_known_item_candidate(_us("6", description=[Section(heading=None, paragraphs=["  "])]))


def test_known_item_task_topics_and_qrels() -> None:
    records = [_us(str(i)) for i in range(10)] + [_us("99", doc_type="design", kind="S1")]
    task = known_item_task(records, n=4, seed=3)
    assert len(task.topics) == 4
    qids = [t.qid for t in task.topics]
    assert qids == sorted(qids) and "US99B2" not in qids
    assert task.qrels == {q: {q: 1} for q in qids}
    first = task.topics[0]
    n = first.qid[2:-2]
    assert first.text == f"Pump {n}\nA pump with a valve {n}."
    assert first.lang == "en" and first.ipc == ["F04B1/00"]
    # seeded: same seed same sample, another seed (almost surely) another one
    assert [t.qid for t in known_item_task(records, n=4, seed=3).topics] == qids
    assert {t.qid for t in known_item_task(records, n=4, seed=4).topics} != set(qids)
    # fewer eligible than n: all of them
    assert len(known_item_task(records, n=50).topics) == 10


def test_known_item_errors() -> None:
    with pytest.raises(ValueError, match="no US utility grant"):
        known_item_task([_ep("1")])
    with pytest.raises(ValueError, match="n must be"):
        known_item_task([_us("1")], n=0)


def test_xling_task() -> None:
    records = [_ep("2"), _ep("1"), _ep("3", langs=("en", "de")), _ep("4", kind="A1")]
    task = xling_task(records)
    assert [t.qid for t in task.topics] == ["EP1B1-de", "EP1B1-fr", "EP2B1-de", "EP2B1-fr"]
    assert task.topics[0].text == "de claim one 1"  # claim number 1, not the first listed
    assert task.topics[1].lang == "fr"
    assert task.qrels["EP2B1-fr"] == {"EP2B1": 1}
    assert task.params["grants"] == 2
    with pytest.raises(ValueError, match="no EP grant"):
        xling_task([_ep("3", langs=("en", "de"))])
    with pytest.raises(ValueError, match="query languages"):
        xling_task(records, langs=("en",))


def _cli() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        """test root"""

    tasks_command.register(app)
    return app


def test_task_cli_writes_files(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    write_corpus([_us(str(i)) for i in range(5)] + [_ep("1"), _ep("2")], corpus)
    runner = CliRunner()
    res = runner.invoke(_cli(), ["task", "known-item", str(corpus), "-o", str(tmp_path / "ki"), "--n", "3"])
    assert res.exit_code == 0, res.output
    assert "3 topics" in res.stdout
    assert len(read_topics(tmp_path / "ki" / "topics.jsonl")) == 3
    assert len(read_qrels(tmp_path / "ki" / "qrels.txt")) == 3
    meta = json.loads((tmp_path / "ki" / "task.json").read_text(encoding="utf-8"))
    assert meta["task"] == "known-item" and meta["index_fields"] == ["claims", "description"]

    res = runner.invoke(_cli(), ["task", "xling", str(corpus), "-o", str(tmp_path / "xl")])
    assert res.exit_code == 0, res.output
    assert [t.qid for t in read_topics(tmp_path / "xl" / "topics.jsonl")] == [
        "EP1B1-de",
        "EP1B1-fr",
        "EP2B1-de",
        "EP2B1-fr",
    ]


def test_task_cli_errors(tmp_path: Path) -> None:
    runner = CliRunner()
    res = runner.invoke(_cli(), ["task", "xling", str(tmp_path / "absent.jsonl"), "-o", str(tmp_path / "o")])
    assert res.exit_code == 2
    assert "no such corpus file" in res.output
    corpus = tmp_path / "c.jsonl"
    write_corpus([_us("1")], corpus)
    res = runner.invoke(_cli(), ["task", "xling", str(corpus), "-o", str(tmp_path / "o")])
    assert res.exit_code == 2 and "no EP grant" in res.output


@pytest.mark.realdata
def test_known_item_on_real_us_grants(us_dir: Path) -> None:
    from training.ingest import iter_records

    task = known_item_task(iter_records([us_dir]))
    assert len(task.topics) > 100
    assert all(t.qid.startswith("US") and t.lang == "en" for t in task.topics)
    assert all(task.qrels[t.qid] == {t.qid: 1} for t in task.topics)
    assert all("\n" in t.text and len(t.text) > 50 for t in task.topics)


@pytest.mark.realdata
def test_xling_on_real_ep_grants(ep_dir: Path) -> None:
    from training.ingest import iter_records

    task = xling_task(iter_records([ep_dir]))
    assert len(task.topics) == 50
    assert task.params["grants"] == 25
    assert sum(t.qid.endswith("-de") for t in task.topics) == 25
    assert sum(t.qid.endswith("-fr") and t.lang == "fr" for t in task.topics) == 25
    assert all(task.qrels[t.qid] == {t.qid[:-3]: 1} for t in task.topics)


def test_reference_signs_are_stripped_from_xling_topics() -> None:
    from training.tasks import strip_reference_signs

    text = "Vorrichtung (1) mit einem Gehäuse (12, 14a) und einer Rolle (3'), die 10 mm (Millimeter) misst"
    assert strip_reference_signs(text) == "Vorrichtung mit einem Gehäuse und einer Rolle , die 10 mm (Millimeter) misst"
