"""Evidence in ``/search`` (``evidence_docs``, ``evidence_weight``, ``evidence_by``): the first N documents ordered
with their best passage (``evidence_by: passage``) or by the index's learned ranker (the default where the index has
one, as the real-data index built with the project's ranker does), the fused order below, and a response that says
which order it is (the measured effect is ``priorart-lab experiment ranking``, docs/RESULTS.md)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from service.engine import Engine
from service.passages import PassageIndex
from service.query import QueryError
from service.schema import SearchRequest
from service.settings import Settings
from training.synth import generate

QUERY = ("Verfahren zur Herstellung eines Bauteils, wobei eine Schicht auf ein Substrat aufgebracht und anschliessend "
         "erwaermt wird")


@pytest.fixture(scope="module")
def engine(real_index: Path) -> Engine:
    e = Engine.load(real_index, settings=Settings(index_dir=real_index), verify=False)
    yield e
    e.close()


def _ids(engine: Engine, **kw: object) -> list[str]:
    kw.setdefault("evidence_by", "passage")
    return [h.id for h in engine.search(SearchRequest(query=QUERY, lang="de", k=50, collapse_families=False,
                                                      **kw)).results]


def test_the_best_passage_of_each_candidate_orders_documents_as_the_passage_list_does() -> None:
    records = list(generate(40, seed=5))
    index = PassageIndex.from_records(records)
    text = " ".join(r.abstract.get("en", "") for r in records[3:6])
    rows = np.arange(len(records))
    ranking = index.rank(text, "en", rows, np.linspace(1.0, 0.0, rows.size), k=10**6, highlight=False, spread=True)
    assert ranking.best is not None and ranking.best.shape == rows.shape
    first_seen = list(dict.fromkeys(h.doc_id for h in ranking.hits if h.score > 0))
    with_match = rows[ranking.best >= 2.0]
    by_best = [index.doc_id(int(r)) for r in with_match[np.lexsort((with_match, -ranking.best[with_match]))]]
    assert by_best == first_seen[: len(by_best)] and len(by_best) > 3
    assert set(np.unique(ranking.best[ranking.best < 2.0])) <= {-1.0, 0.0}
    # the spread of each candidate's evidence (features of the learned ranker): its second-best passage, and the share
    # of its passages that hold a query term (none where its best holds none)
    assert ranking.second is not None and ranking.matched is not None
    assert np.all(ranking.second <= ranking.best) and np.all((ranking.matched >= 0) & (ranking.matched <= 1))
    assert np.all(ranking.matched[ranking.best < 2.0] == 0) and np.all(ranking.matched[ranking.best >= 2.0] > 0)
    assert np.count_nonzero(ranking.second >= 2.0) > 3
    # the best passage of each field: one of them is the best passage, none is above it
    fields = ranking.fields
    assert fields is not None and fields.shape == (rows.size, 3)
    assert np.array_equal(fields.max(axis=1), ranking.best)
    assert np.count_nonzero(fields[:, 0] >= 2.0) > 3 and np.count_nonzero(fields[:, 2] >= 2.0) > 3
    field_scores = ranking.field_evidence()
    assert field_scores is not None and np.all((field_scores >= 0) & (field_scores <= 1))
    plain = index.rank(text, "en", rows, np.linspace(1.0, 0.0, rows.size), k=10**6, highlight=False)
    assert plain.second is None and plain.matched is None and plain.fields is None
    assert np.array_equal(plain.best, ranking.best)


def test_the_best_and_second_passage_the_matched_share_and_the_best_of_each_field_of_each_candidate() -> None:
    """``_per_candidate`` on passage keys given directly (2 + score where a passage holds a query term): candidates
    0 (three passages), 1 (none), 2 (two), 3 (one); ``among`` keeps some passages, ``kept`` spreads over all rows;
    ``kinds`` says which field each passage is of (the columns of ``fields``: abstract, description, claims)."""
    from types import SimpleNamespace

    from service.passages.ranker import FIELDS, _per_candidate
    from service.passages.tree import KIND_ABSTRACT, KIND_CLAIM, KIND_DESCRIPTION

    assert list(FIELDS) == ["abstract", "description", "claims"]
    keys = np.array([2.5, 2.9, 0.3, 0.0, 2.1, 2.2])
    kinds = np.array([KIND_ABSTRACT, KIND_CLAIM, KIND_CLAIM, KIND_DESCRIPTION, KIND_CLAIM, KIND_DESCRIPTION])
    sc = SimpleNamespace(rows=np.arange(4), doc_index=np.array([0, 0, 0, 2, 2, 3]), key=lambda final: final)
    best, second, share, fields = _per_candidate(sc, keys, None, 4, None, kinds=kinds)  # type: ignore[arg-type]
    assert best.tolist() == [2.9, -1.0, 2.1, 2.2] and second.tolist() == [2.5, -1.0, 0.0, -1.0]
    assert share.tolist() == pytest.approx([2 / 3, 0.0, 0.5, 1.0])
    assert fields.tolist() == [[2.5, -1.0, 2.9], [-1.0, -1.0, -1.0], [-1.0, 0.0, 2.1], [-1.0, 2.2, -1.0]]
    best, second, share, fields = _per_candidate(sc, keys, np.array([0, 2, 3]), 4, None,  # type: ignore[arg-type]
                                                 kinds=kinds)
    assert best.tolist() == [2.5, -1.0, 0.0, -1.0] and second.tolist() == [0.3, -1.0, -1.0, -1.0]
    assert share.tolist() == pytest.approx([0.5, 0.0, 0.0, 0.0])
    assert fields.tolist() == [[2.5, -1.0, 0.3], [-1.0] * 3, [-1.0, 0.0, -1.0], [-1.0] * 3]
    kept = np.array([True, False, True, True, True])  # five rows given, the second not scored (no readable passage)
    best, second, share, fields = _per_candidate(sc, keys, None, 5, kept, kinds=kinds)  # type: ignore[arg-type]
    assert best.tolist() == [2.9, -1.0, -1.0, 2.1, 2.2] and share.tolist() == pytest.approx([2 / 3, 0, 0, 0.5, 1])
    assert second.tolist() == [2.5, -1.0, -1.0, 0.0, -1.0]
    assert fields.shape == (5, 3) and fields[1].tolist() == [-1.0] * 3 and fields[4].tolist() == [-1.0, 2.2, -1.0]
    tie = SimpleNamespace(rows=np.arange(1), doc_index=np.zeros(3, dtype=np.int64), key=lambda final: final)
    best, second, _, _ = _per_candidate(tie, np.array([2.4, 2.4, 0.1]), None, 1, None)  # type: ignore[arg-type]
    assert best.tolist() == second.tolist() == [2.4]  # two passages tie for the best: the second is as good
    assert _per_candidate(tie, np.array([2.4, 2.4, 0.1]), None, 1, None, spread=False)[1:] == (None,) * 3  # type: ignore


def test_the_first_n_are_reordered_by_their_best_passage_and_the_rest_keep_the_fused_order(engine: Engine) -> None:
    fused = engine.search(SearchRequest(query=QUERY, lang="de", k=50, collapse_families=False, evidence_docs=0))
    res = engine.search(SearchRequest(query=QUERY, lang="de", k=50, collapse_families=False, evidence_docs=10,
                                      evidence_weight=1.0, evidence_by="passage"))
    assert fused.ranked_by == "fusion" and res.ranked_by == "passage evidence"
    a, b = [h.id for h in fused.results], [h.id for h in res.results]
    assert set(a[:10]) == set(b[:10]) and a[10:] == b[10:]
    assert a[:10] != b[:10]  # this query's twin-like passages do move documents
    evidence = [h.components["evidence"] for h in res.results[:10]]
    assert evidence == sorted(evidence, reverse=True)
    assert all("evidence" not in h.components for h in res.results[10:])
    stage = next(s for s in engine.search(SearchRequest(query=QUERY, lang="de", k=5, evidence_docs=10,
                                                        evidence_by="passage", explain=True)).stages
                 if s.name == "evidence")
    assert stage.candidates == 10 and stage.detail["variant"] == "qsf_passage_propagate"


def test_weight_zero_keeps_the_fused_order_and_zero_documents_is_the_fused_ranking(engine: Engine) -> None:
    fused = _ids(engine, evidence_docs=0)
    assert _ids(engine, evidence_docs=20, evidence_weight=0.0) == fused
    assert _ids(engine, evidence_docs=20, evidence_weight=0.5) != _ids(engine, evidence_docs=20, evidence_weight=1.0)


def test_fewer_results_than_n_and_the_matched_terms_of_the_shown_rows(engine: Engine) -> None:
    res = engine.search(SearchRequest(query=QUERY, lang="de", k=3, evidence_docs=50, explain=True,
                                      collapse_families=False, evidence_by="passage"))
    assert len(res.results) == 3 and res.ranked_by == "passage evidence"
    assert all(h.matched_terms for h in res.results)


def test_the_server_setting_is_the_default_and_an_index_without_passages_says_why_it_is_not_used(
        engine: Engine, real_index: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    other = Engine.load(real_index, settings=Settings(index_dir=real_index, evidence_docs=10, evidence_by="passage"),
                        verify=False)
    try:
        assert other.evidence.ranker is not None  # the index has one; the server's setting asks for the passage rule
        assert other.search(SearchRequest(query=QUERY, lang="de")).ranked_by == "passage evidence"
        assert other.search(SearchRequest(query=QUERY, lang="de", evidence_by="auto")).ranked_by == "learned ranker"
        assert other.search(SearchRequest(query=QUERY, lang="de", evidence_docs=0)).ranked_by == "fusion"
        monkeypatch.setattr(other.evidence, "passages", None)
        monkeypatch.setattr(other.evidence, "missing", "this index has no passage index (test)")
        res = other.search(SearchRequest(query=QUERY, lang="de"))
        assert res.ranked_by == "fusion"
        assert any("not by passage evidence" in n and "(test)" in n for n in res.notices)
        said = [e for e in res.explained if "not of their best passage" in e.text]
        assert said and said[0].kind == "ranking" and "priorart build" in said[0].detail
    finally:
        other.close()


def test_a_query_the_passages_cannot_read_keeps_the_fused_order_and_says_why(engine: Engine,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    fused = _ids(engine, evidence_docs=0)

    def unreadable(*args: object, **kwargs: object) -> None:
        raise QueryError("no passage terms (test)")

    monkeypatch.setattr(engine.evidence, "rank_passages", unreadable)
    res = engine.search(SearchRequest(query=QUERY, lang="de", k=50, collapse_families=False, evidence_docs=10))
    assert [h.id for h in res.results] == fused and res.ranked_by == "fusion"
    assert any("not by passage evidence: no passage terms (test)" in n for n in res.notices)
    assert all("evidence" not in h.components for h in res.results)


def test_the_learned_ranker_orders_the_first_documents_by_default(engine: Engine) -> None:
    """The real-data index holds the project's ranker (priorart build's default): /search orders its first
    ``ranker.docs`` documents by the ranker's score, whatever N a request gives above 0; below them the fused order
    stands, and ``evidence_weight`` does not change the ranker's order."""
    assert engine.evidence.ranker is not None and engine.settings.evidence_by == "auto"
    n = engine.evidence.ranker.docs
    fused = _ids(engine, evidence_docs=0)
    res = engine.search(SearchRequest(query=QUERY, lang="de", k=50, collapse_families=False, explain=True))
    got = [h.id for h in res.results]
    assert res.ranked_by == "learned ranker" and set(got[:n]) == set(fused[:n]) and got[n:] == fused[n:]
    ranker = [h.components["ranker"] for h in res.results[:n]]
    assert ranker == sorted(ranker, reverse=True) and ranker[0] == 1.0
    assert all("ranker" not in h.components for h in res.results[n:])
    stage = next(s for s in res.stages if s.name == "evidence")
    assert stage.candidates == n and stage.detail["ranker"]["kind"] == engine.evidence.ranker.kind
    assert _ids(engine, evidence_by="auto", evidence_docs=3, evidence_weight=0.0) == got


@pytest.mark.parametrize("bad", [{"evidence_docs": -1}, {"evidence_weight": 1.5}, {"evidence_docs": "10"},
                                 {"evidence_by": "tfidf"}])
def test_bad_evidence_parameters_are_refused(bad: dict) -> None:
    with pytest.raises(ValueError):
        SearchRequest(query="x", **bad)
