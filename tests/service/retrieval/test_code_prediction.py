"""Codes voted by the top documents of a search (service/retrieval/code_prediction.py, issue 33 item 2)."""

from __future__ import annotations

import pytest

from service.codes import ClassificationError
from service.retrieval.code_prediction import predict_codes


def test_each_document_votes_one_over_its_rank_once_per_code() -> None:
    ranked = [["H01F27/14", "H01F27/02", "H02J3/00"], ["H02J3/38"], ["H01F 27/08", "B60L53/00"], []]
    got = predict_codes(ranked, "subclass")
    # H01F: rank 1 + rank 3 (its two codes at rank 1 count once); H02J: ranks 1 and 2; B60L: rank 3
    votes = {"H02J": 1 + 1 / 2, "H01F": 1 + 1 / 3, "B60L": 1 / 3}
    total = sum(votes.values())
    assert [c for c, _ in got] == ["H02J", "H01F", "B60L"]
    assert [s for _, s in got] == pytest.approx([votes[c] / total for c, _ in got])
    assert [c for c, _ in predict_codes(ranked, "main_group")] == ["H02J3/00", "H01F27/00", "B60L53/00"]
    assert [c for c, _ in predict_codes(ranked, "subclass", depth=2)] == ["H02J", "H01F"]


def test_ties_keep_the_order_first_met_and_nothing_to_vote_is_empty() -> None:
    assert [c for c, _ in predict_codes([["A61K"], ["C07D"]], "class", depth=1)] == ["A61"]
    assert [c for c, _ in predict_codes([["A61K", "C07D"]], "subclass")] == ["A61K", "C07D"]
    assert predict_codes([[], ["US D11"]], "subclass") == [] and predict_codes([], "subclass") == []
    with pytest.raises(ClassificationError, match="unknown level"):
        predict_codes([["A61K"]], "group")
    with pytest.raises(ValueError, match="depth"):
        predict_codes([["A61K"]], depth=0)
