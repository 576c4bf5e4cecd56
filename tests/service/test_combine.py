"""Combination of systems: Borda points, linear, LinLearn and the pipeline stage."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from service.pipeline import Candidates, FusionStep, Query
from service.retrieval.combine import (
    CombineConfig,
    CombineStep,
    borda,
    combine,
    linear,
    linlearn,
    sum_normalise,
)
from service.retrieval.first_stage import QueryError

NAN = np.nan


def test_borda_points_sum_to_one_after_shifting_to_zero() -> None:
    assert sum_normalise(np.array([3.0, 1.0, 2.0])).tolist() == [2 / 3, 0.0, 1 / 3]
    assert sum_normalise(np.array([-1.0, 1.0, NAN])).tolist() == [0.0, 1.0, 0.0]
    assert sum_normalise(np.array([5.0, 5.0])).tolist() == [0.0, 0.0]  # no preference, no points
    assert sum_normalise(np.array([NAN, NAN])).tolist() == [0.0, 0.0]


def test_borda_interpolation_by_hand() -> None:
    scores = {"a": np.array([3.0, 1.0, 2.0]), "b": np.array([0.0, 10.0, NAN])}
    # a's points 2/3, 0, 1/3; b's points 0, 1, 0
    got = borda(scores, {"a": 0.25, "b": 0.75})
    assert np.allclose(got, [0.25 * 2 / 3, 0.75, 0.25 / 3])
    assert np.allclose(borda(scores, {"a": 1.0, "b": 0.0}), sum_normalise(scores["a"]))
    assert np.allclose(borda(scores, {"a": 1.0, "c": 5.0}), sum_normalise(scores["a"]))  # absent system ignored


def test_linear_is_the_fusion_steps_formula_and_linlearn_does_not_divide() -> None:
    scores = {"bm25": np.array([4.0, 2.0, 0.0]), "dense": np.array([NAN, 1.0, 3.0])}
    weights = {"bm25": 0.6, "dense": 0.2, "text": 0.2}
    cands = Candidates(rows=np.arange(3), scores={k: v.copy() for k, v in scores.items()})
    FusionStep(weights, "test").run(Query(text="x"), cands)
    assert cands.fused is not None
    assert np.allclose(linear(scores, weights), cands.fused)
    # bm25 min-max 1, .5, 0; dense (NaN -> 0) 0, 0, 1
    assert np.allclose(linear(scores, weights), [0.6 / 0.8, 0.3 / 0.8, 0.2 / 0.8])
    assert np.allclose(linlearn(scores, {"bm25": 2.0, "dense": -1.0}), [2.0, 1.0, -1.0])
    with pytest.raises(ValueError, match="unknown fusion method"):
        combine("max", scores, weights)
    with pytest.raises(ValueError, match="differ in length"):
        linear({"a": np.zeros(2), "b": np.zeros(3)}, {"a": 1.0})


def _cands() -> Candidates:
    return Candidates(rows=np.array([10, 11, 12]),
                      scores={"bm25": np.array([1.0, 3.0, 2.0]), "wordpair": np.array([5.0, 0.0, 1.0])})


def test_combine_step_chooses_the_method_per_query() -> None:
    step = CombineStep({"linear": {"bm25": 1.0}, "borda": {"bm25": 0.5, "wordpair": 0.5},
                        "linlearn": {"bm25": 1.0, "wordpair": 2.0}}, default="linlearn", source="test")
    assert step.name == "fusion"
    q = Query(text="pump")
    c = step.run(q, _cands())
    assert c.fused is not None and np.allclose(c.fused, [2.0, 1.0, 0.5 + 2.0 * 0.2])
    assert c.weights == {"bm25": 1.0, "wordpair": 2.0}
    assert np.allclose(c.normalised["wordpair"], [1.0, 0.0, 0.2])
    assert q.info["fusion"]["method"] == "linlearn"
    q = Query(text="pump")
    q.fusion = "borda"  # type: ignore[attr-defined]  # the field the engine adds to Query
    c = step.run(q, _cands())
    assert c.fused is not None and np.allclose(c.fused, [0.5 * 0 + 0.5 * 5 / 6, 0.5 * 2 / 3, 0.5 / 3 + 0.5 / 6])
    q.weights = {"wordpair": 1.0}  # request (or depth-specific) weights are the linear method's ...
    c = step.run(q, _cands())  # ... so borda keeps its learned weights
    assert c.fused is not None and np.allclose(c.fused, [0.5 * 5 / 6, 0.5 * 2 / 3, 0.5 / 3 + 0.5 / 6])
    q.fusion = "linear"  # type: ignore[attr-defined]
    c = step.run(q, _cands())
    assert c.fused is not None and np.allclose(c.fused, [1.0, 0.0, 0.2])
    q.weights = None
    c = step.run(q, _cands())  # linear without request weights: the stored ones (bm25 only)
    assert c.fused is not None and np.allclose(c.fused, [0.0, 1.0, 0.5])
    q.fusion = "nope"  # type: ignore[attr-defined]
    with pytest.raises(QueryError, match="not available"):
        step.run(q, _cands())
    assert step.describe()["default"] == "linlearn"
    with pytest.raises(ValueError, match="default"):
        CombineStep({"linear": {"bm25": 1.0}}, default="borda")


def test_missing_components_are_reported_and_earlier_fusion_info_is_kept() -> None:
    step = CombineStep({"linlearn": {"bm25": 1.0, "dense": 3.0}}, default="linlearn")
    q = Query(text="pump")
    q.info["fusion"] = {"variant": "stacked", "depth": 100, "weights": {"bm25": 0.5}}  # as WeightsStep leaves it
    step.run(q, _cands())
    assert q.info["fusion"]["missing_components"] == ["dense"]
    assert q.info["fusion"]["variant"] == "stacked" and q.info["fusion"]["linear_weights"] == {"bm25": 0.5}


def test_combine_config_round_trip(tmp_path: Path) -> None:
    cfg = CombineConfig({"borda": {"bm25": 0.7, "wordpair": 0.3}, "linlearn": {"bm25": 1.5}}, "linlearn",
                        {"dev": {"map": 0.5}})
    cfg.save(tmp_path / "combine.json")
    back = CombineConfig.load(tmp_path / "combine.json")
    assert back.methods == cfg.methods and back.default == "linlearn" and back.info["dev"] == {"map": 0.5}
    with pytest.raises(ValueError, match="unknown fusion method"):
        CombineConfig({"vote": {}}, "vote")
