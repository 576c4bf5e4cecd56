"""service.fusion: the methods, applicability and renormalisation, the weights file, the stage."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from service.candidates import Candidates
from service.fusion import (
    BM25_ONLY,
    FusionError,
    FusionModel,
    FusionStep,
    ProfileWeights,
    fuse,
    fuse_linear,
    linear_grid,
    minmax,
    sum_normalise,
)
from service.query import Query, QueryError, Resolved

NAN = np.nan


def _query(codes: tuple[str, ...] = (), **kw: object) -> Query:
    q = Query(text="pump", **kw)  # type: ignore[arg-type]
    q.resolved = Resolved(lang="en", lang_detected=False, text="pump", codes=codes)
    return q


def test_minmax_and_borda_points() -> None:
    assert minmax(np.array([4.0, 2.0, 0.0])).tolist() == [1.0, 0.5, 0.0]
    assert minmax(np.array([2.0, 2.0])).tolist() == [1.0, 1.0]  # constant: every candidate equally good
    assert minmax(np.array([NAN, 3.0, 1.0])).tolist() == [0.0, 1.0, 0.0]  # not scored -> 0
    assert sum_normalise(np.array([3.0, 1.0, 2.0])).tolist() == [2 / 3, 0.0, 1 / 3]
    assert sum_normalise(np.array([-1.0, 1.0, NAN])).tolist() == [0.0, 1.0, 0.0]
    assert sum_normalise(np.array([5.0, 5.0])).tolist() == [0.0, 0.0]  # no preference, no points


def test_methods_by_hand() -> None:
    scores = {"bm25": np.array([4.0, 2.0, 0.0]), "dense": np.array([NAN, 1.0, 3.0])}
    # linear: bm25 min-max 1, .5, 0; dense (NaN -> 0) 0, 0, 1; divided by the weights of the present components
    assert np.allclose(fuse("linear", scores, {"bm25": 0.6, "dense": 0.2, "text": 0.2}),
                       [0.6 / 0.8, 0.3 / 0.8, 0.2 / 0.8])
    assert np.allclose(fuse("linlearn", scores, {"bm25": 2.0, "dense": -1.0}), [2.0, 1.0, -1.0])  # no division
    b = {"a": np.array([3.0, 1.0, 2.0]), "b": np.array([0.0, 10.0, NAN])}
    assert np.allclose(fuse("borda", b, {"a": 0.25, "b": 0.75}), [0.25 * 2 / 3, 0.75, 0.25 / 3])
    assert np.allclose(fuse("borda", b, {"a": 1.0, "c": 5.0}), sum_normalise(b["a"]))  # absent system ignored
    with pytest.raises(ValueError, match="unknown fusion method"):
        fuse("max", scores, {"bm25": 1.0})
    with pytest.raises(ValueError, match="differ in length"):
        fuse("linear", {"a": np.zeros(2), "b": np.zeros(3)}, {"a": 1.0})


def test_linear_renormalises_over_present_components_and_falls_back_to_bm25() -> None:
    scores = {"bm25": np.array([1.0, 3.0, 2.0]), "text": np.array([0.9, 0.1, 0.5])}
    # meta absent (did not apply): 0.5 bm25 + 0.2 text over 0.7, the same ranking as 5/7 and 2/7
    got = fuse("linear", scores, {"bm25": 0.5, "text": 0.2, "meta": 0.3})
    want = (0.5 * minmax(scores["bm25"]) + 0.2 * minmax(scores["text"])) / 0.7
    assert np.allclose(got, want)
    # only absent components weighted: BM25 alone
    assert np.allclose(fuse("linear", scores, {"meta": 1.0}), minmax(scores["bm25"]))
    # a grid of several weight vectors is the same arithmetic column by column
    grid = np.array([[1.0, 0.0, 0.0], [0.5, 0.2, 0.3], [0.0, 0.0, 1.0]])
    many = fuse_linear(scores, ("bm25", "text", "meta"), grid)
    for p, w in enumerate(grid):
        one = fuse("linear", scores, dict(zip(("bm25", "text", "meta"), w, strict=True)))
        assert np.array_equal(many[:, p], one)  # bit-identical: learning and serving rank the same
    assert linear_grid([np.ones(2)], np.array([[0.0]]))[:, 0].tolist() == [0.0, 0.0]


def test_step_leaves_out_what_does_not_apply_and_explains() -> None:
    model = FusionModel({"codes": ProfileWeights(True, "learned", {40: {"bm25": 0.5, "meta": 0.5},
                                                                  1000: {"bm25": 0.4, "text": 0.6}}),
                         "nocodes": ProfileWeights(False, "did not beat BM25")})
    step = FusionStep(model)
    cands = Candidates(rows=np.array([10, 11, 12]), scores={"bm25": np.array([1.0, 3.0, 2.0]),
                                                            "dense": np.array([0.3, 0.2, 0.1])})
    cands.skipped["meta"] = "the query has no classification codes"
    q = _query(depth=50)
    step.run(q, cands)  # no codes: the nocodes profile, not installed -> BM25 alone
    assert cands.fusion is not None and cands.fusion.profile == "nocodes"
    assert cands.fusion.weights == {"bm25": 1.0} and "BM25 only: did not beat BM25" in cands.fusion.source
    assert cands.fusion.components["meta"] == "not applied: the query has no classification codes"
    assert cands.fusion.components["dense"] == "computed, weight 0"
    assert cands.fused is not None and np.allclose(cands.fused, minmax(np.array([1.0, 3.0, 2.0])))
    q = _query(codes=("H01F",), depth=50)  # with codes, nearest depth 40: meta weighted but skipped -> renormalised
    cands.fused = None
    step.run(q, cands)
    assert cands.fusion is not None and cands.fusion.profile == "codes" and cands.fusion.depth == 40
    assert cands.fusion.fallback is None and cands.fusion.weights == {"bm25": 1.0}
    q = _query(codes=("H01F",), depth=900)  # depth 1000's weights: text not computed at all -> left out
    step.run(q, cands)
    assert cands.fusion.components["text"] == "not applied: no such stage in this index"
    q = _query(weights={"dense": 1.0})  # a request's own weights
    step.run(q, cands)
    assert cands.fusion.source == "the request's weights" and np.allclose(cands.fused, [1.0, 0.5, 0.0])
    q = _query(weights={"meta": 1.0})  # nothing weighted applies: BM25, said as a fallback and a note
    step.run(q, cands)
    assert cands.fusion.fallback and "BM25 alone" in q.notes[0]
    with pytest.raises(QueryError, match="train-ltr"):
        step.run(_query(fusion="borda"), cands)


def test_borda_and_linlearn_weights_from_the_file(tmp_path: Path) -> None:
    model = FusionModel({"nocodes": ProfileWeights(True, "ok", {40: {"bm25": 0.7, "dense": 0.3}}),
                         "codes": ProfileWeights(False, "too few")}, borda={"bm25": 0.6, "wordpair": 0.4},
                        linlearn={"bm25": 2.0, "wordpair": -0.5}, sources={"borda": "train-ltr"},
                        learning={"linear": {"folds": 5}})
    path = model.save(tmp_path / "fusion.json")
    data = json.loads(path.read_text())
    assert data["format"] == "priorart-fusion" and data["version"] == 2
    back = FusionModel.load(path)
    assert back.methods == ["linear", "borda", "linlearn"] and back.borda == model.borda
    assert back.weights("linear", "nocodes", 1000) == ({"bm25": 0.7, "dense": 0.3}, "ok", 40)
    assert back.weights("linear", "codes", 40)[0] == BM25_ONLY
    assert back.weights("linlearn", "codes", 40)[0] == {"bm25": 2.0, "wordpair": -0.5}
    cands = Candidates(rows=np.arange(3), scores={"bm25": np.array([1.0, 3.0, 2.0]),
                                                  "wordpair": np.array([5.0, 0.0, 1.0])})
    FusionStep(back).run(_query(fusion="linlearn"), cands)
    assert cands.fused is not None and np.allclose(cands.fused, [2.0 * 0 - 0.5, 2.0 * 1 - 0.0, 2.0 * 0.5 - 0.5 * 0.2])
    data["version"] = 1
    path.write_text(json.dumps(data))
    with pytest.raises(FusionError, match="version 1.*priorart fuse"):
        FusionModel.load(path)
    data["version"] = 2
    data["linear"]["nocodes"]["depths"]["40"] = {"bm25": 1.0, "colour": 1.0}
    path.write_text(json.dumps(data))
    with pytest.raises(FusionError, match="unknown component"):
        FusionModel.load(path)
