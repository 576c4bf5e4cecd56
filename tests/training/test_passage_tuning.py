"""Tuning of the passage ranker (grid search, fast MAP(D)) and the reference-sign proxy judgments."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path

import numpy as np
import pytest

from service.corpus.record import Claim, PatentRecord, Section
from service.passages import PassageIndex
from training.evaluation.passages import evaluate_passages
from training.passage_tuning import (
    TuningQuery,
    _Judged,
    claim_signs,
    evaluate_params,
    paragraph_signs,
    proxy_tuning_queries,
    reference_sign_queries,
    tune,
)

FILL = "lorem ipsum dolor"


def _rec(doc_id: str, description: list[Section], claims: dict[str, list[Claim]] | None = None) -> PatentRecord:
    return PatentRecord(id=doc_id, country=doc_id[:2], number=doc_id[2:-2], kind=doc_id[-2:], source="synth",
                        lang="en", claims=claims or {}, description=description)


def _tuning_queries() -> tuple[PassageIndex, list[TuningQuery]]:
    # the relevant passage "steel rod" (a) has weaker own text than the distractor "steel steel rod" (x),
    # but sits among passages that match the query; only enough context weight ranks it first
    doc = _rec("EP0000080B1", [
        Section(heading="Alpha part", paragraphs=["steel rod " + FILL, "valve spring seal valve", "valve spring"]),
        Section(heading="Gamma part", paragraphs=["steel steel rod " + FILL, "wood table chair", "glass door"]),
    ])
    other = _rec("EP0000081B1", [Section(heading="Misc", paragraphs=["valve " + FILL])])
    index = PassageIndex.from_records([doc, other])
    rel = {doc.id: {"EP0000080B1/d/1/p1"}}
    return index, [TuningQuery("q1", "steel valve spring", "en", [0, 1], rel, first_stage=[1.0, 0.5]),
                   TuningQuery("q2", "steel spring", "en", [0, 1], rel, first_stage=[1.0, 0.5])]


def _first_hit_metric(run: Mapping[str, list[tuple[str, str, float]]],
                      qrels: Mapping[str, Mapping[str, Collection[str]]]) -> float:
    hits = 0.0
    for qid, docs in qrels.items():
        relevant = {p for ps in docs.values() for p in ps}
        hits += float(bool(run[qid]) and run[qid][0][1] in relevant)
    return hits / len(qrels)


def test_tune_finds_context_weight_and_reports_grid() -> None:
    index, queries = _tuning_queries()
    res = tune(index, queries, grid_step=0.25, variant="qsf_section", metric=_first_hit_metric)
    assert len(res.grid) == 5 * 5 and {g[2] for g in res.grid} == {None}
    assert res.value == max(g[3] for g in res.grid) == 1.0
    assert res.beta is not None and res.sigma is None
    # the chosen parameters really put the relevant passage first
    hits = index.rank("steel valve spring", "en", [0, 1], [1.0, 0.5], variant="qsf_section", alpha=res.alpha,
                      beta=res.beta).hits
    assert hits[0].passage_id == "EP0000080B1/d/1/p1"
    # and a pure-content setting does not
    assert any(g[0] == 1.0 and g[3] < 1.0 for g in res.grid)


def test_tune_grids_per_variant_and_the_fast_map_d_equals_evaluate_passages() -> None:
    index, queries = _tuning_queries()
    v = tune(index, queries, grid_step=0.5, variant="qsf_v")
    assert [(g[0], g[1], g[2]) for g in v.grid] == [(0.0, None, None), (0.5, None, None), (1.0, None, None)]
    for k in (1500, 3):  # k = 3 cuts inside the relevant document
        fast = tune(index, queries, grid_step=0.5, variant="qsf_passage_propagate", sigmas=(0.5, 2.0), k=k)
        slow = tune(index, queries, grid_step=0.5, variant="qsf_passage_propagate", sigmas=(0.5, 2.0), k=k,
                    metric=lambda run, qrels: evaluate_passages(run, qrels).aggregate["map(d)"])
        assert len(fast.grid) == 2 * 3 * 3 and {g[2] for g in fast.grid} == {0.5, 2.0}
        assert [g[:3] for g in fast.grid] == [g[:3] for g in slow.grid]
        assert [g[3] for g in fast.grid] == pytest.approx([g[3] for g in slow.grid], abs=1e-12)
    with pytest.raises(ValueError, match="grid_step"):
        tune(index, queries, grid_step=0)
    with pytest.raises(ValueError, match="at least one"):
        tune(index, [])


def test_fast_map_d_handles_ties_at_the_cut_off() -> None:
    index, queries = _tuning_queries()
    scores = index.score(queries[0].query, "en", [0, 1], variant="qsf_section")
    judged = _Judged(scores, {"EP0000080B1": {"EP0000080B1/d/1/p1", "EP0000080B1/d/2/p2"}})
    rng = np.random.default_rng(0)
    for _ in range(30):  # replace the components by values with many ties
        scores.passage = rng.integers(0, 3, len(scores)).astype(float)
        scores.doc = rng.integers(0, 2, len(scores)).astype(float)
        assert scores.context is not None
        scores.context = rng.integers(0, 2, len(scores)).astype(float)
        for k in (1, 2, 3, 5, 50):
            run = {"q": scores.run(0.5, 0.5, k)}
            want = evaluate_passages(run, {"q": {"EP0000080B1": {"EP0000080B1/d/1/p1", "EP0000080B1/d/2/p2"}}})
            assert judged.map_d(0.5, 0.5, k) == pytest.approx(want.aggregate["map(d)"], abs=1e-12)


# --------------------------------------------------------------------------------- proxy judgments


def test_reference_signs_in_claims_and_paragraphs() -> None:
    signs, stripped = claim_signs("A housing (4) with a lid (5, 6a) and a hinge (7 and 8).")
    assert signs == {"4", "5", "6a", "7", "8"}
    assert stripped == "A housing with a lid and a hinge."
    found = paragraph_signs("As shown in Fig. 2, the housing 4 is 10 mm wide and the lid (5) has 3 holes.", "en")
    assert found == {"4", "5"}
    assert paragraph_signs("Das Gehäuse 4 ist gemäß Anspruch 1 aus Stahl und 2,5 mm dick.", "de") == {"4"}


def _box() -> PatentRecord:
    return _rec("EP0000090B1", [
        Section(heading="Background", paragraphs=["Hinges are known from many documents in the art.",
                                                  "Boxes are used for storage.", "They are made of wood."]),
        Section(heading="Description of embodiments", paragraphs=[
            "Fig. 1 shows the housing 4 with the lid 5 on top.",
            "The lid 5 is fixed by the hinge 7 to the housing 4.",
            "The colour of the lid 5 is red.",
            "Other parts are not shown in Fig. 1 or Fig. 2.",
        ]),
    ], claims={"en": [Claim(num=1, text="A box comprising a housing (4), a lid (5) and a hinge (7) joining them."),
                      Claim(num=2, text="Box according to claim 1, wherein the lid (5) is painted red outside.",
                            refs=[1])]})


def test_reference_sign_queries_on_a_record() -> None:
    rec = _box()
    qs = reference_sign_queries(rec)
    assert [q.qid for q in qs] == ["EP0000090B1-c1", "EP0000090B1-c2"]
    assert qs[0].relevant == {"EP0000090B1/d/2/p1", "EP0000090B1/d/2/p2"}  # >= 2 shared signs
    assert "(" not in qs[0].query and qs[0].lang == "en"
    assert qs[1].relevant == {"EP0000090B1/d/2/p1", "EP0000090B1/d/2/p2", "EP0000090B1/d/2/p3"}  # 1 sign
    # a claim whose signs are in more than half of the paragraphs is not informative
    assert [q.qid for q in reference_sign_queries(rec, max_relevant_share=0.4)] == ["EP0000090B1-c1"]


def test_proxy_queries_score_their_own_document_without_claims() -> None:
    other = _rec("EP0000091B1", [Section(paragraphs=["a box with a hinge and a housing"])],
                 claims={"en": [Claim(num=1, text="A box with a hinge.")]})
    index, queries = proxy_tuning_queries([other, _box()], max_per_doc=1)
    assert [q.qid for q in queries] == ["EP0000090B1-c1"]
    q = queries[0]
    assert list(q.rows) == [0, 1] and list(q.exclude_claims or []) == [False, True]
    ids = [pid for _, pid in index.score(q.query, q.lang, q.rows, exclude_claims=q.exclude_claims).ids()]
    assert "EP0000091B1/claims/1" in ids and not any(pid.startswith("EP0000090B1/claims") for pid in ids)
    values = evaluate_params(index, queries, variant="qsf_passage_propagate", alpha=0.5, beta=0.5, sigma=1.0)
    assert set(values) == {"EP0000090B1-c1"} and 0.0 < values["EP0000090B1-c1"] <= 1.0
    with pytest.raises(ValueError, match="1 records given"):
        proxy_tuning_queries([other], index=index)


@pytest.mark.realdata
def test_passage_experiment_on_the_real_proxy(shared_data: Path) -> None:
    from lab.docs_results import load
    from lab.experiments.passages import PassageTuningSettings, format_table, load_records, run_passage_tuning

    records = load_records(shared_data)
    # the documented run's grid (docs/results/passages.json) for the service's variant, with the sigmas its folds
    # chose (in the grid's order): the grid search chooses again what it chose there, with the same training value
    # (test_docs_results re-measures every variant at the chosen parameters)
    saved = load("passages.json")
    recorded = next(v for v in saved["variants"] if v["variant"] == "qsf_passage_propagate")
    chosen = {f["sigma"] for f in recorded["folds"]}
    sigmas = tuple(x for x in saved["settings"]["sigmas"] if x in chosen)
    settings = PassageTuningSettings(grid_step=saved["settings"]["grid_step"], sigmas=sigmas,
                                     variants=("qsf_passage_propagate",), permutations=200)
    result = run_passage_tuning(records, settings, progress=False)
    assert (result.queries, result.query_documents) == (91, 37)  # the proxy's size on the shared data
    for v in result.variants:
        assert len(v.folds) == 2 and sum(f["queries"] for f in v.folds) == 91
        assert 0.0 < v.defaults < 1.0 and 0.0 < v.tuned < 1.0 and 0.0 < v.p_vs_defaults <= 1.0
        assert len(v.per_query) == 91
        for got, want in zip(v.folds, recorded["folds"], strict=True):
            assert (got["alpha"], got["beta"], got["sigma"]) == (want["alpha"], want["beta"], want["sigma"])
            assert got["train_map_d"] == pytest.approx(want["train_map_d"], abs=1e-9)
    table = format_table(result)
    assert "qsf_passage_propagate" in table and "held-out" in table
