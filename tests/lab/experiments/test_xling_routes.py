"""Every cross-lingual route on the real patents, through a plain ``build_index`` (the product path).

These check the wiring (the tables of the index translate; each route finds the documents only it can
reach); the translation quality is measured, cross-fitted, by ``priorart-lab experiment xling-tasks``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.experiments.xling import first_claim
from lab.experiments.xling_tasks import XlingTaskSettings, _strip_english, run_xling_task
from service.corpus.jsonl import read_corpus
from service.corpus.record import PatentRecord
from service.retrieval.first_stage import FirstStage
from training.build import build_index
from training.tasks import strip_reference_signs

pytestmark = pytest.mark.realdata

ISSUE_QUERY = (
    "Hochspannungsanordnung mit einem abgedichteten Fach, einem Transformator und einem Ausdehnungsgefäß"
)


@pytest.fixture(scope="module")
def records(real_corpus: Path) -> list[PatentRecord]:
    return list(read_corpus(real_corpus))


@pytest.fixture(scope="module")
def default_index(real_plain_index: Path) -> FirstStage:
    return FirstStage.load(real_plain_index)  # the default build: tables of every direction, compounds


def _claim(records: list[PatentRecord], doc_id: str, lang: str) -> str:
    return strip_reference_signs(first_claim(next(r for r in records if r.id == doc_id), lang))


def test_the_issue_query_finds_english_documents_on_a_plain_build(default_index: FirstStage) -> None:
    res = default_index.search(ISSUE_QUERY, lang="de", k=10)
    routes = {r.name: r.table for r in res.info.routes}
    assert routes == {"de": None, "en:psq": "de-en", "fr:psq": "de-fr + via en"}
    assert len(res.hits) == 10 and not res.info.notes
    assert res.hits[0].route == "en:psq"
    # the compounds were split: their parts are query terms, and translated
    assert {"hochspann", "anordn", "ausdehn", "gefass"} <= set(res.info.query_terms)


def test_english_claim_reaches_german_and_french_only_grants(records: list[PatentRecord], tmp_path: Path) -> None:
    targets = ["EP0640886B1", "EP0697382B1", "EP0773297B2"]
    ep = [(_strip_english(r) if r.id in targets else r) for r in records if r.country == "EP"]
    build_index(ep, tmp_path / "idx", progress=False)
    stage = FirstStage.load(tmp_path / "idx")
    for doc_id in targets:
        res = stage.search(_claim(records, doc_id, "en"), lang="en", k=10)
        assert [r.name for r in res.info.routes] == ["en", "de:psq", "fr:psq"]
        ranks = {h.doc_id: h for h in res.hits}
        assert doc_id in ranks and ranks[doc_id].rank <= 3, doc_id
        assert ranks[doc_id].route in ("de:psq", "fr:psq")  # it has no English text left


@pytest.mark.parametrize(
    ("doc_id", "query_lang", "index_lang"),
    [("EP0588006B2", "fr", "de"), ("EP1011858B2", "de", "fr")],  # a German / a French description
)
def test_german_and_french_reach_each_other_through_their_table_and_english(
    records: list[PatentRecord], tmp_path: Path, doc_id: str, query_lang: str, index_lang: str
) -> None:
    ep = [r for r in records if r.country == "EP"]
    build_index(ep, tmp_path / "idx", index_langs=index_lang, fields="description", progress=False)
    stage = FirstStage.load(tmp_path / "idx")
    res = stage.search(_claim(records, doc_id, query_lang), lang=query_lang, k=10)
    assert [(r.name, r.table) for r in res.info.routes] == [
        (f"{index_lang}:psq", f"{query_lang}-{index_lang} + via en")
    ]
    assert res.hits[0].doc_id == doc_id and res.hits[0].route == f"{index_lang}:psq"


def test_reverse_task_cross_fitted_on_real_data(shared_data: Path, records: list[PatentRecord]) -> None:
    result = run_xling_task(shared_data, "reverse", XlingTaskSettings(folds=2), records=records, progress=False)
    rows = result.rows
    assert rows["none"]["all"]["mrr"] == 0.0  # the grants have no English text: nothing without translation
    assert rows["all"]["all"]["mrr"] > 0.8 and result.p_values["all"]["vs none"] < 0.01
    assert rows["all"]["all"]["mrr"] > rows["all, max merge"]["all"]["mrr"]  # the reference merge matters here
    assert set(result.routes["all"]) <= {"de:psq", "fr:psq", "not found"}
