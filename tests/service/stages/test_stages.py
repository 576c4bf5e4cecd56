"""The pipeline stages over an index with models (tiny trained models): composition, union, applicability,
precomputed encodings against the oracle, filters, feature mode, fusion weights per profile and depth, devices.

The reference oracle is :meth:`service.retrieval.neural.Models.rerank_records` (the same ONNX graphs encoding
the documents at query time): the precomputed document encodings must give the same scores.
"""

from __future__ import annotations

from datetime import date
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("faiss")
pytest.importorskip("torch")
pytest.importorskip("gensim")

from index_copy import copy_index
from models_fixture import tiny_index  # noqa: E402

from service.codes import record_codes  # noqa: E402
from service.fusion import FusionModel, ProfileWeights  # noqa: E402
from service.index.folder import IndexFolder, Layout  # noqa: E402
from service.pipeline import Pipeline, compose  # noqa: E402
from service.query import Query  # noqa: E402
from service.retrieval import neural  # noqa: E402
from service.retrieval.code_prediction import predict_codes  # noqa: E402
from service.settings import Settings  # noqa: E402

TOL = 1e-5


@pytest.fixture(scope="module")
def index() -> Path:
    """The tiny trained models' index (16 s once per process): the tests that use it are marked slow."""
    return tiny_index()


@pytest.fixture(scope="module")
def pipeline(index: Path) -> Pipeline:
    return compose(IndexFolder.open(index), Settings(index_dir=index, device="cpu"))


def _query_of(p: Pipeline, row: int) -> tuple[str, list[str]]:
    rec = p.docs.get_row(row)
    return f"{rec.title['en']}\n{rec.abstract.get('en', '')}", record_codes(rec)


def test_select_providers() -> None:
    both = ["CUDAExecutionProvider", "CPUExecutionProvider"]
    assert neural.select_providers("cpu", both) == (["CPUExecutionProvider"], None)
    assert neural.select_providers("auto", both) == (both, None)
    assert neural.select_providers("cuda", both)[0][0] == "CUDAExecutionProvider"
    providers, warning = neural.select_providers("auto", ["CPUExecutionProvider"])
    assert providers == ["CPUExecutionProvider"] and warning is not None and "CPU" in warning
    with pytest.raises(ValueError, match="unknown device"):
        neural.select_providers("gpu", [])


@pytest.mark.slow
def test_cuda_asked_for_without_cuda_is_said(index: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import onnxruntime as ort

    monkeypatch.setattr(ort, "get_available_providers", lambda: ["CPUExecutionProvider"])
    p = compose(IndexFolder.open(index), Settings(index_dir=index, device="cuda"))
    assert p.device == "cpu" and any("cuda asked for" in n for n in p.notices)


@pytest.mark.slow
def test_composition_without_fusion_weights(pipeline: Pipeline) -> None:
    import json

    assert pipeline.names == ["resolve", "bm25", "dense", "rerank", "fusion", "evidence", "collapse", "explain"]
    assert pipeline.device == "cpu"
    assert not pipeline.fusion.model.linear["nocodes"].installed
    assert any("ranked by BM25 alone" in n for n in pipeline.notices)
    json.dumps(pipeline.describe())  # /health must serialise it


@pytest.mark.slow
def test_precomputed_encodings_match_the_oracle(index: Path, pipeline: Pipeline) -> None:
    oracle = neural.Models(index / Layout.MODELS, device="cpu")
    records = [pipeline.docs.get_row(r) for r in range(len(pipeline.docs))]
    vectors = np.load(index / Layout.DENSE_VECTORS)
    np.testing.assert_allclose(vectors, oracle.encode_documents(records)["dual"], atol=TOL)
    text, codes = _query_of(pipeline, 3)
    rows = np.array([9, 0, 4, 17, 33, 12, 5])
    rerank = pipeline.stage("rerank")
    got = rerank.scores(text, "en", codes, rows)  # type: ignore[union-attr]
    want = oracle.rerank_records(text, "en", codes, [records[int(r)] for r in rows])
    for kind in ("text", "meta", "joint"):
        np.testing.assert_allclose(got[kind], want[kind], atol=TOL, err_msg=kind)


@pytest.mark.slow
def test_union_and_applicability(pipeline: Pipeline) -> None:
    text, codes = _query_of(pipeline, 7)
    q = Query(text=text, lang="en", k=10, depth=8)  # no codes: meta and joint read the codes predicted for it
    cands = pipeline.features(q)
    n_first = int(cands.in_first.sum())
    assert cands.in_first[:n_first].all() and not cands.in_first[n_first:].any()
    assert np.all(cands.scores["bm25"][n_first:] == 0.0)  # dense-only rows: BM25 lower bound 0
    dense = pipeline.stage("dense")
    qv = dense.encoder.encode_query(text, "en")  # type: ignore[union-attr]
    np.testing.assert_allclose(cands.scores["dense"], dense.dense.scores(qv, cands.rows), atol=1e-9)  # type: ignore
    assert set(dense.dense.search(qv, 8).rows.tolist()) == set(cands.rows[cands.in_dense].tolist())  # type: ignore
    assert set(cands.scores) == {"bm25", "dense", "text", "meta", "joint"} and not cands.skipped
    # the predicted codes: the main groups the first stage's top documents vote for, the three best
    top = np.lexsort((np.arange(len(cands)), -cands.scores["bm25"]))[:10]
    voters = [record_codes(pipeline.docs.header_row(int(cands.rows[i]))) for i in top if cands.scores["bm25"][i] > 0]
    want = [c for c, _ in predict_codes(voters, "main_group")[:3]]
    assert want and cands.predicted_codes == want == cands.details["rerank"]["predicted_codes"]
    rerank = pipeline.stage("rerank")
    on_predicted = rerank.scores(text, "en", want, cands.rows, ("meta", "joint"))  # type: ignore[union-attr]
    for kind in ("meta", "joint"):
        np.testing.assert_allclose(cands.scores[kind], on_predicted[kind], err_msg=kind)
    with_codes = pipeline.features(Query(text=text, lang="en", codes=codes, k=10, depth=8))
    assert set(with_codes.scores) == {"bm25", "dense", "text", "meta", "joint"} and not with_codes.skipped
    assert not with_codes.predicted_codes and "predicted_codes" not in with_codes.details["rerank"]
    np.testing.assert_array_equal(with_codes.rows, cands.rows)
    assert not np.allclose(with_codes.scores["meta"], cands.scores["meta"])  # its own codes, not the predicted ones


@pytest.mark.slow
def test_a_query_whose_first_documents_hold_no_codes_is_not_scored_by_the_code_rankers(
        pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch) -> None:
    text, _ = _query_of(pipeline, 7)
    rerank = pipeline.stage("rerank")
    monkeypatch.setattr(rerank, "docs", None)  # a stage without the records: nothing to predict from
    cands = pipeline.features(Query(text=text, lang="en", k=10, depth=8))
    assert set(cands.scores) == {"bm25", "dense", "text"} and not cands.predicted_codes
    assert cands.skipped == {"meta": "the query has no classification codes",
                             "joint": "the query has no classification codes"}
    monkeypatch.setattr(rerank, "docs", pipeline.docs)
    monkeypatch.setattr(rerank, "predict", lambda cands: [])  # first documents without codes
    cands = pipeline.features(Query(text=text, lang="en", k=10, depth=8))
    assert cands.skipped["meta"] == "the query has no classification codes and its first documents predict none"


@pytest.mark.slow
def test_codes_are_predicted_only_where_the_fusion_weighs_the_code_rankers(pipeline: Pipeline) -> None:
    """A search fused with the index's weights (here BM25 alone: the tiny index's fusion is not installed) is spared
    the meta and joint scores; request weights on meta ask for them, and the response's codes are the predicted."""
    text, _ = _query_of(pipeline, 7)
    assert not pipeline.fusion.model.linear["nocodes"].installed
    cands, _ = pipeline.run(Query(text=text, lang="en", k=10, depth=8, evidence_docs=0))  # (the fused order's)
    assert "meta" not in cands.scores and not cands.predicted_codes
    assert "the fusion does not weigh this ranker" in cands.skipped["meta"]
    cands, _ = pipeline.run(Query(text=text, lang="en", k=10, depth=8, weights={"bm25": 0.5, "meta": 0.5},
                                  evidence_docs=0))
    assert "meta" in cands.scores and cands.predicted_codes
    assert cands.fusion is not None and cands.fusion.weights.get("meta", 0) > 0
    features = pipeline.features(Query(text=text, lang="en", k=10, depth=8))  # fusion learning: every component
    assert features.predicted_codes == cands.predicted_codes


@pytest.mark.slow
def test_language_without_encoders_is_left_out(pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch) -> None:
    models = pipeline.stage("dense").encoder.models  # type: ignore[union-attr]
    monkeypatch.setattr(models, "languages_of", lambda kind: ("en",))  # as if no German encoders
    cands = pipeline.features(Query(text="eine Pumpe mit einem Ventil", lang="de", k=5, depth=5))
    assert "dense" not in cands.scores and "text" not in cands.scores
    assert cands.skipped["dense"] == "no dual encoder for de queries in this index"
    assert cands.skipped["text"] == "no text ranker for de queries in the models"


@pytest.mark.slow
def test_filters_and_number_queries_reach_every_stage(pipeline: Pipeline) -> None:
    docs = pipeline.docs
    text, _ = _query_of(pipeline, 11)
    dated = docs.dates[docs.dates > np.iinfo(np.int32).min]
    cut = date.fromordinal(date(1970, 1, 1).toordinal() + int(np.median(dated)))
    cands = pipeline.features(Query(text=text, lang="en", k=50, depth=50, before=cut))
    assert len(cands) > 0 and docs.date_mask(cut)[cands.rows].all()
    q = Query(text=docs.ids[11], k=5, depth=5)  # a publication number: its text, its codes, never itself
    cands = pipeline.features(q)
    assert q.r.query_doc == docs.ids[11] and q.r.codes_from == "query document" and q.r.codes
    assert 11 not in cands.rows.tolist() and "meta" in cands.scores


@pytest.mark.slow
def test_fusion_weights_per_profile_and_depth(index: Path, tmp_path: Path) -> None:
    from service.engine import Engine
    from service.schema import SearchRequest

    root = tmp_path / "index"
    copy_index(index, root)
    folder = IndexFolder.open(root)
    FusionModel({"nocodes": ProfileWeights(True, "learned", {40: {"bm25": 0.5, "dense": 0.2, "text": 0.3},
                                                             200: {"bm25": 0.9, "text": 0.1}}),
                 "codes": ProfileWeights(False, "did not beat BM25")}).save(root / Layout.FUSION)
    folder.register({"fusion": {"version": 2, "file": Layout.FUSION}}, changed=[Layout.FUSION])
    engine = Engine.load(root, settings=Settings(index_dir=root, device="cpu", default_depth=40))
    assert engine.pipeline.names == ["resolve", "bm25", "dense", "rerank", "fusion", "evidence", "collapse", "explain"]
    assert engine.health()["stage_details"]["fusion"]["linear"]["nocodes"]["installed"]
    text, codes = _query_of(engine.pipeline, 5)
    r = engine.search(SearchRequest(query=text, lang="en", k=5, depth=150))
    assert r.fusion.profile == "nocodes" and r.fusion.depth == 200
    assert r.fusion.weights == pytest.approx({"bm25": 0.9, "text": 0.1})
    # each hit shows the components that shaped the ranking, not dense's score computed with weight 0
    assert r.fusion.components["dense"] == "computed, weight 0"
    assert all(set(h.components) - {"evidence", "ranker"} == {"bm25", "text", "fused"} for h in r.results)
    assert r.ranked_by == "learned ranker" and all("ranker" in h.components for h in r.results)
    r = engine.search(SearchRequest(query=text, lang="en", codes=codes, k=5, depth=150))
    assert r.fusion.profile == "codes" and r.fusion.weights == {"bm25": 1.0}
    assert r.fusion.source.startswith("BM25 only: did not beat BM25")
    # a ranker the fusion does not weigh for the query is not scored at all (dense is: its search adds candidates)
    assert r.fusion.components["meta"] == "not applied: the fusion gives it no weight for this query (not scored)"
    assert r.fusion.components["text"] == r.fusion.components["meta"]
    assert all(set(h.components) - {"evidence", "ranker"} == {"bm25", "fused"} for h in r.results)
    # the dense system over the union is the dense search's own top (flat index), in the fused order
    r = engine.search(SearchRequest(query=text, lang="en", k=5, depth=150, weights={"dense": 1.0}, evidence_docs=0))
    dense = engine.pipeline.stage("dense")
    qv = dense.encoder.encode_query(text, "en")  # type: ignore[union-attr]
    top = dense.dense.search(qv, 5).rows  # type: ignore[union-attr]
    assert [h.id for h in r.results] == [engine.docs.ids[int(i)] for i in top]


@pytest.mark.slow
def test_hits_lifted_from_deep_in_the_first_stage_list_their_matched_terms(index: Path) -> None:
    """The first stage explains its top k rows only; a first-stage row that another component lifts into the top k
    from deeper (here: a request ranked by the dense component alone) gets its matched terms on demand, the same
    as a search that explains every row gives them."""
    from service.engine import Engine
    from service.retrieval.first_stage import FirstStage
    from service.schema import SearchRequest

    engine = Engine.load(index, settings=Settings(index_dir=index, device="cpu", default_depth=40))
    text, _ = _query_of(engine.pipeline, 5)
    plain = engine.search(SearchRequest(query=text, lang="en", k=5, depth=40, explain=True))
    lifted = engine.search(SearchRequest(query=text, lang="en", k=5, depth=40, explain=True, weights={"dense": 1.0}))
    shown = {h.id for h in plain.results}
    deep = [h for h in lifted.results if h.route is not None and h.id not in shown]  # route: a first-stage row
    assert deep, "the dense ranking must lift a first-stage row from below the top 5"
    fs: FirstStage = engine.pipeline.first_stage
    q = engine.query(SearchRequest(query=text, lang="en", k=40, depth=40))
    from service.query import resolve

    resolve(q, engine.docs)
    every = {engine.docs.ids[h.row]: h.matched_terms for h in fs.run(q).hits}  # every row of the depth
    for h in lifted.results:
        if h.route is not None:  # (matched_terms: the query's words; matched_stems: the index terms they matched as)
            assert h.matched_terms and {s for ss in h.matched_stems.values() for s in ss} == set(every[h.id])
    engine.close()



def _cut_before_every_match(p: Pipeline) -> tuple[str, list[str], date]:
    """A query and a date with documents published before it, none of which contains a query term."""
    docs = p.docs
    epoch = date(1970, 1, 1).toordinal()
    for row in range(len(docs)):
        rec = docs.get_row(row)
        text, codes = rec.title.get("en", ""), record_codes(rec)
        if not text:
            continue
        every = p.features(Query(text=text, lang="en", k=len(docs), depth=len(docs)))
        first = int(docs.dates[every.rows[every.in_first]].min())
        cut = date.fromordinal(epoch + first)
        if docs.date_mask(cut).sum() and codes:
            return text, codes, cut
    raise AssertionError("no query of the tiny corpus has documents published before its first match")


@pytest.mark.slow
def test_filters_that_leave_no_matching_document_give_no_results_and_say_which(pipeline: Pipeline) -> None:
    """Issue 30: a date filter that left no document containing a query term returned the dense stage's nearest
    documents (each at score 1.0 ranked by word match, matching nothing), and no notice said why."""
    text, codes, cut = _cut_before_every_match(pipeline)
    q = Query(text=text, lang="en", k=10, depth=50, before=cut)
    assert len(pipeline.features(q)) > 0  # the dense stage still finds neighbours among the earlier documents
    q = Query(text=text, lang="en", k=10, depth=50, before=cut)
    cands, _ = pipeline.run(q)
    assert len(cands) == 0
    n = int(pipeline.docs.date_mask(cut).sum())
    passing = "1 document passes" if n == 1 else f"{n} documents pass"
    assert [n for n in q.notes if n.startswith("filtered out:")] == [
        f"filtered out: no document published before {cut.isoformat()} contains a query term "
        f"({passing} that filter); without it, documents match"]
    # with a code filter that leaves matches, the date is the filter named
    q = Query(text=text, lang="en", k=10, depth=50, before=cut, codes=codes, code_level="subclass")
    cands, _ = pipeline.run(q)
    said = [n for n in q.notes if n.startswith("filtered out:")]
    assert len(cands) == 0 and len(said) == 1 and f"published before {cut.isoformat()}" in said[0]
    assert "sharing" not in said[0]
    # a filter that leaves matches ranks them as before
    q = Query(text=text, lang="en", k=10, depth=50, codes=codes, code_level="subclass")
    cands, _ = pipeline.run(q)
    assert len(cands) > 0 and cands.in_first.any() and not [n for n in q.notes if n.startswith("filtered out:")]


@pytest.mark.slow
def test_an_index_without_learned_fusion_says_so(index: Path) -> None:
    """Issue 30: on an index where no fusion was ever learned, the explanation said the learned combination did no
    better than word match."""
    from service.engine import Engine
    from service.schema import SearchRequest

    engine = Engine.load(index, settings=Settings(index_dir=index, device="cpu"))
    text, codes = _query_of(engine.pipeline, 3)
    for req in (SearchRequest(query=text, lang="en"), SearchRequest(query=text, lang="en", codes=codes)):
        r = engine.search(req)
        assert r.fusion.weights == {"bm25": 1.0} and r.explained[0].kind == "ranking"
        assert "no combination was learned" in r.explained[0].text
        assert "did not do better" not in " ".join(e.text for e in r.explained)
    engine.close()


@pytest.mark.slow
def test_the_query_graphs_run_on_one_thread_by_default(index: Path) -> None:
    """Issue 30: a publication-number query took 107 ms (others 5-25 ms). Its long text gives the ONNX graphs the most
    work, and onnxruntime's default thread pool (one spinning thread per core) competed with the server for a busy
    2-core machine's cores: 108.6 ms p50 with it, 10.0 ms on one thread (``priorart search INDEX EP0640886B1
    --repeat 30``, with PRIORART_ONNX_THREADS=0 and unset). The service's graphs run on one intra-op thread unless
    the settings say otherwise."""
    from service.stages.dense import DenseStep
    from service.stages.rerank import RerankStep

    p = compose(IndexFolder.open(index), Settings(index_dir=index, device="cpu"))
    models = {id(m): m for m in (s.encoder.models if isinstance(s, DenseStep) else s.models  # type: ignore[attr-defined]
                                 for s in p.stages if isinstance(s, DenseStep | RerankStep))}
    graphs = [g for m in models.values() for g in (*m.graphs.values(), *(x for d in m.query_graphs.values()
                                                                          for x in d.values()))]
    assert graphs
    assert {g.sess.get_session_options().intra_op_num_threads for g in graphs} == {1}
    assert Settings(index_dir=index, onnx_threads=0).onnx_threads == 0  # onnxruntime's own default, when asked


@pytest.mark.slow
def test_documents_that_match_nothing_are_not_ranked_by_word_match(pipeline: Pipeline) -> None:
    """Issue 30: a query no document contains, ranked by word match alone, listed the dense stage's nearest documents,
    each at score 1.0 with no matched term. With a weight on the dense score they are listed (ranked by it)."""
    q = Query(text="zzqxw blorfing", lang="en", k=5, depth=20)
    cands, _ = pipeline.run(q)
    assert len(cands) == 0 and any(n.startswith("no document contains a query term, and word match") for n in q.notes)
    q = Query(text="zzqxw blorfing", lang="en", k=5, depth=20, weights={"dense": 1.0})
    cands, _ = pipeline.run(q)
    assert len(cands) == 5 and not cands.in_first.any()


def test_compose_checks_that_each_stage_gets_what_it_requires() -> None:
    """A stage whose ``requires`` no earlier stage provides is refused with a message that names it (the stages
    declare what they read and add; PyTerrier-style validation at composition)."""
    from service.candidates import CANDIDATES
    from service.pipeline import check_stages

    class Stub:
        def __init__(self, name: str, requires: set[str], provides: set[str]) -> None:
            self.name, self.requires, self.provides = name, frozenset(requires), frozenset(provides)

        def run(self, query: object, cands: object) -> object:
            return cands

        def describe(self) -> dict[str, object]:
            return {}

    first = Stub("bm25", set(), {CANDIDATES, "bm25"})
    rerank = Stub("rerank", {CANDIDATES}, {"text"})
    fusion = Stub("fusion", {CANDIDATES}, {"fused"})
    check_stages([first, rerank, fusion])  # type: ignore[list-item]
    with pytest.raises(ValueError, match=r"stage 'rerank' requires candidates, which no stage before it provides "
                                         r"\(nothing\)"):
        check_stages([rerank, first, fusion])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="two stages are named 'bm25'"):
        check_stages([first, first, fusion])  # type: ignore[list-item]


@pytest.mark.slow
def test_a_pipeline_begins_with_the_resolution_and_ends_with_the_fusion_evidence_collapse_and_explanation(
        pipeline: Pipeline) -> None:
    """Pipeline refuses a stage list in another order: the steps after the fusion are the evidence, the collapse
    and the explanation (a shard's: the explanation alone), and the query's resolution comes first."""
    stages = pipeline.stages
    resolve, fusion = stages[0], pipeline.fusion
    evidence, collapse, explain = stages[-3:]
    middle = stages[1:stages.index(fusion)]
    assert Pipeline(list(stages), pipeline.docs).names == pipeline.names
    assert Pipeline([resolve, *middle, fusion, explain], pipeline.docs).evidence is None  # (a shard's)
    for wrong in ([*middle, fusion, evidence, collapse, explain],  # no resolution
                  [resolve, *middle, fusion],  # no explanation
                  [resolve, *middle, fusion, collapse, evidence, explain],  # out of order
                  [resolve, *middle, evidence, collapse, explain]):  # no fusion
        with pytest.raises(ValueError, match="a pipeline begins with the query's resolution"):
            Pipeline(wrong, pipeline.docs)


@pytest.mark.slow
def test_the_response_lists_the_codes_predicted_for_the_code_rankers(index: Path, pipeline: Pipeline) -> None:
    from service.engine import Engine
    from service.schema import SearchRequest

    text, _ = _query_of(pipeline, 7)
    engine = Engine.load(index, settings=Settings(index_dir=index, device="cpu"), verify=False)
    try:
        res = engine.search(SearchRequest(query=text, lang="en", k=5, weights={"bm25": 0.5, "meta": 0.5},
                                          explain=True))
        stage = next(s for s in res.stages if s.name == "rerank")
        assert res.query.predicted_codes and res.query.predicted_codes == stage.detail["predicted_codes"]
        assert not res.query.codes and res.fusion is not None and res.fusion.components["meta"] == "applied"
    finally:
        engine.close()


def _stage_table() -> list[dict[str, str]]:
    """docs/ARCHITECTURE.md's stage table ("### The stages"), one dict per row."""
    text = (Path(__file__).resolve().parents[3] / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    section = text.split("\n### The stages\n", 1)[1].split("\n#", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("| `")]
    keys = ("stage", "class", "module", "requires", "provides", "composed")
    return [dict(zip(keys, (c.strip().strip("`") for c in line.strip("|").split("|")), strict=True)) for line in lines]


def _names(cell: str) -> frozenset[str]:
    return frozenset(n.strip() for n in cell.split(",") if n.strip())


@pytest.mark.slow
def test_the_architecture_stage_table_is_what_compose_builds(index: Path, pipeline: Pipeline) -> None:
    """Issue 60: every row names a stage class with the name, requires and provides the table gives, in the module
    it gives; the pipelines compose builds (an index with models, the same without them, a shard's) are those
    stages in the table's order, and every stage compose chose has its row."""
    import importlib

    rows = _stage_table()
    assert [r["stage"] for r in rows][:2] == ["resolve", "bm25"] and rows[-1]["stage"] == "explain"
    for r in rows:
        module = importlib.import_module(r["module"].removesuffix(".py").replace("/", "."))
        cls = getattr(module, r["class"])
        assert (cls.name, cls.requires, cls.provides) == (r["stage"], _names(r["requires"]), _names(r["provides"])), r
    order = {r["stage"]: i for i, r in enumerate(rows)}
    folder = IndexFolder.open(index)
    settings = Settings(index_dir=index, device="cpu")
    for p, composed in ((pipeline, ["resolve", "bm25", "dense", "rerank", "fusion", "evidence", "collapse", "explain"]),
                        (compose(folder, settings, neural=False),
                         ["resolve", "bm25", "fusion", "evidence", "collapse", "explain"]),
                        (compose(folder, settings, shard=True),
                         ["resolve", "bm25", "dense", "rerank", "fusion", "explain"])):
        assert p.names == composed
        assert [order[s.name] for s in p.stages] == sorted(order[s.name] for s in p.stages)
        for s in p.stages:
            row = rows[order[s.name]]
            assert (type(s).__name__, type(s).__module__) == (row["class"], row["module"].removesuffix(".py")
                                                              .replace("/", ".")), row
