"""``priorart-lab experiment code-prediction`` on the real data (issue 33 item 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = [pytest.mark.realdata, pytest.mark.slow]


def test_top_documents_predict_the_subclass_better_than_the_prior(real_corpus: Path, real_index: Path) -> None:
    from lab.experiments.code_prediction import format_code_prediction, run_code_prediction
    from service.corpus.jsonl import read_corpus

    r = run_code_prediction(list(read_corpus(real_corpus)), index_dir=real_index, depths=(10,), progress=False)
    assert r.topics["all"] > 250 and {"en", "de", "fr"} <= set(r.topics)
    voted, prior = r.rows["subclass top 10"]["all"], r.rows["subclass prior"]["all"]
    reachable = r.rows["subclass reachable"]["all"]["P@1"]
    # the documents of the claim's field, not the corpus's commonest codes; never above what another family holds
    assert 2 * prior["P@1"] < voted["P@1"] <= voted["S@3"] <= reachable < 1
    assert r.rows["main_group top 10"]["all"]["P@1"] <= voted["P@1"]
    table = format_code_prediction(r)
    assert table.splitlines()[0].startswith("| prediction | all (") and "subclass top 10" in table


def test_the_cpc_titles_classify_a_claim_better_than_its_first_documents_vote(real_corpus: Path, real_index: Path,
                                                                             real_plain_index: Path) -> None:
    """An index built from the real corpus has the code classifier (the shared data's CPC title list knows its
    codes). Against the vote of the fused order's first documents (the experiment's own index, without a ranker),
    it finds one of a claim's codes in its first three more often in every claims language, though nothing of the
    corpus shaped it."""
    from lab.experiments.code_prediction import run_code_prediction
    from service.corpus.jsonl import read_corpus
    from service.index.folder import IndexFolder

    assert IndexFolder.open(real_index).has("code_classifier")
    # (the experiment's own index: the build it makes without index_dir, made once per run, tests/conftest.py)
    r = run_code_prediction(list(read_corpus(real_corpus)), index_dir=real_plain_index, depths=(10,), progress=False)
    for level in ("subclass", "main_group"):
        voted, classified = r.rows[f"{level} top 10"], r.rows[f"{level} classifier"]
        assert classified["all"]["P@1"] > voted["all"]["P@1"] + 0.05
        for lang in ("en", "de", "fr"):
            assert classified[lang]["S@3"] > voted[lang]["S@3"], (level, lang)
