"""``priorart-lab experiment xling-passages`` on synthetic patents (the real-data run is in docs/RESULTS.md): every
direction's topics are the claims of the trilingual grants, each against an index where its grant keeps one
language; a sweep gives a row per value and two cross-fitted rows (one value for all topics, one per query
language), each half of the grants scored with the value chosen on the other half."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.experiments import ExperimentError
from lab.experiments.xling_passages import (
    TOP_KINDS,
    Topic,
    XlingPassageSettings,
    format_table,
    run_xling_passages,
    top_kind,
)


@pytest.fixture(scope="module")
def records() -> list:
    from training.synth import generate

    out = []
    for r in generate(60, seed=3):
        if r.kind == "B1" and all(r.claims.get(lang) for lang in ("en", "de", "fr")):
            r = r.model_copy(update={"id": "EP" + r.id[2:], "country": "EP"})
        out.append(r)
    return out


@pytest.mark.slow
def test_a_rho_sweep_cross_fits_one_value_and_one_per_query_and_passage_language(records: list, tmp_path: Path) -> None:
    s = XlingPassageSettings(folds=2, k=10, variants=("qsf_passage_propagate",),
                             directions=(("de", "en"), ("fr", "en")), max_claims=2, sweep=("rho", (1.0, 0.5)))
    res = run_xling_passages(None, s, records=records, work=tmp_path / "work", out=tmp_path / "out.json",
                             progress=False)
    grants = [r for r in records if r.country == "EP"]
    assert len(res.grants) == len(grants) >= 2
    rows = {"qsf_passage_propagate rho=1", "qsf_passage_propagate rho=0.5", "qsf_passage_propagate rho=cross-fitted",
            "qsf_passage_propagate rho=cross-fitted per query language",
            "qsf_passage_propagate rho=cross-fitted per passage language"}
    assert set(res.rows["de-en"]) == rows and set(res.rows["fr-en"]) == rows
    assert res.topics["de-en"] > 0 and res.topics["fr-en"] > 0
    assert set(res.chosen) == {"qsf_passage_propagate rho=cross-fitted",
                               "qsf_passage_propagate rho=cross-fitted per query language de",
                               "qsf_passage_propagate rho=cross-fitted per query language fr",
                               "qsf_passage_propagate rho=cross-fitted per passage language en"}
    assert all(len(v) == 2 and set(v) <= {1.0, 0.5} for v in res.chosen.values())
    # each topic of a cross-fitted row has the measures of the value its half was given
    fold_of = {g: i % s.folds for i, g in enumerate(res.grants)}
    per_lang = res.per_query["qsf_passage_propagate rho=cross-fitted per query language"]
    for qid, m in per_lang.items():
        src = qid.split("-")[-2]
        value = res.chosen[f"qsf_passage_propagate rho=cross-fitted per query language {src}"][
            fold_of[qid.split("-", 1)[0]] % 2]
        assert m == res.per_query[f"qsf_passage_propagate rho={value:g}"][qid]
    # both directions keep English: the per passage language row chose one value, on all the topics of each half
    assert per_lang.keys() == res.per_query["qsf_passage_propagate rho=cross-fitted per passage language"].keys()
    assert res.per_query["qsf_passage_propagate rho=cross-fitted per passage language"] == \
        res.per_query["qsf_passage_propagate rho=cross-fitted"]
    assert "per query language de" in format_table(res)
    # what came first, per topic of each run: the twin exactly when it is at rank 1, a passage of the grant exactly
    # when the top passage is the grant's
    for value in (1.0, 0.5):
        row = f"qsf_passage_propagate rho={value:g}"
        assert res.tops[row].keys() == res.per_query[row].keys()
        for qid, kind in res.tops[row].items():
            assert kind in TOP_KINDS
            assert (kind == "twin") == (res.per_query[row][qid]["success@1"] == 1.0)
            assert (kind in ("twin", "grant claim", "grant other")) == (res.per_query[row][qid]["top_from_grant"] == 1)
    assert (tmp_path / "out.json").is_file()
    # the indexes are kept in `work` for later runs: one per fold and target language
    assert sorted(p.name for p in (tmp_path / "work").iterdir()) == ["index-0-en", "index-1-en"]


def test_a_sweep_of_an_unknown_parameter_is_refused() -> None:
    with pytest.raises(ExperimentError, match="sweep a parameter"):
        XlingPassageSettings(sweep=("gamma", (1.0,)))
    with pytest.raises(ExperimentError, match="sweep a parameter"):
        XlingPassageSettings(sweep=("rho", ()))


def test_what_came_first_is_the_twin_the_grant_or_another_documents_passage_by_language() -> None:
    from service.schema import PassageHit

    def hit(passage_id: str, lang: str) -> PassageHit:
        return PassageHit(doc_id=passage_id.split("/", 1)[0], passage_id=passage_id, section_path=[], text="",
                          score=1.0, components={}, highlights=[], lang=lang)

    topic = Topic("EP1-2-de-en", "EP1", "de", "Ein Anspruch", "EP1/claims/2")
    assert top_kind(topic, hit("EP1/claims/2", "en")) == "twin"
    assert top_kind(topic, hit("EP1/claims/1", "en")) == "grant claim"
    assert top_kind(topic, hit("EP1/d/3/p2", "en")) == "grant other"
    assert top_kind(topic, hit("US2/claims/2", "fr")) == "other fr"
    assert top_kind(topic, None) == "none"
