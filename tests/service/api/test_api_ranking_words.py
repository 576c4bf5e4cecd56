"""What a search says of its ranking, through the engine, the app and ``priorart search`` over a small synthetic
trilingual index built as ``priorart build`` builds it (translation tables, passages, the project's learned ranker
with its word vectors): what ordered the results (said once, as ``ranked_by`` says it), the score that follows that
order, the query words a result matched, the claim chart's score, a body that is not JSON, the UI's icon (issue 57)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from service.api import create_app
from service.engine import Engine
from service.notices import ranking_said
from service.schema import SearchRequest, SearchResponse
from service.settings import Settings

pytestmark = pytest.mark.slow  # a trilingual index with its tables, passages, ranker and word vectors (about 10 s)


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from training.build import build_index
    from training.synth import SynthConfig, write_synthetic

    folder = tmp_path_factory.mktemp("ranking-words")
    write_synthetic(folder / "all.jsonl", SynthConfig(n=300, seed=7), progress=False)
    build_index(folder / "all.jsonl", folder / "index", progress=False)
    return folder / "index"


@pytest.fixture(scope="module")
def engine(index: Path) -> Iterator[Engine]:
    e = Engine.load(index, settings=Settings(index_dir=index))
    assert e.evidence.ranker is not None, e.notices  # the project's ranker, with the word vectors its kernels read
    yield e
    e.close()


@pytest.fixture(scope="module")
def client(index: Path) -> Iterator[TestClient]:
    with TestClient(create_app(Settings(index_dir=index))) as c:
        yield c


def _claim(engine: Engine, lang: str, row: int = 0) -> str:
    """The first claim in ``lang`` of the ``row``-th document that has one."""
    records = (engine.docs.get_row(r) for r in range(engine.num_docs))
    have = [rec for rec in records if lang in rec.claims]
    return have[row].claims[lang][0].text


def _non_increasing(res: SearchResponse) -> bool:
    scores = [h.score for h in res.results]
    return all(a >= b for a, b in zip(scores, scores[1:], strict=False))


def test_the_score_follows_the_order_the_learned_ranker_made(engine: Engine) -> None:
    """The ranker reordered the first 20 documents and each kept its fused score as ``score``: 1.0, 0.733, 0.655,
    0.629, 0.636 down the list. Now the first documents score 1 + the ranker's score min-max over them (in [1, 2]),
    above the fused scores below them; ``components`` keep each component's own score."""
    req = SearchRequest(query=_claim(engine, "en"), lang="en", k=30, collapse_families=False)
    res = engine.search(req)
    n = engine.evidence.ranker.docs
    assert res.ranked_by == "learned ranker" and res.reordered == n
    fused = [h.components["fused"] for h in res.results[:n]]
    assert fused != sorted(fused, reverse=True)  # the ranker moved documents: the fused score does not follow it
    assert _non_increasing(res)
    assert [h.score for h in res.results[:n]] == [1.0 + h.components["ranker"] for h in res.results[:n]]
    assert res.results[0].score == 2.0 and res.results[n - 1].score == 1.0
    assert all(h.score == h.components["fused"] <= 1.0 for h in res.results[n:])
    # the passage rule: 1 + (1 - w) * fused (min-max over the first n) + w * best passage, likewise above the rest
    rule = engine.search(req.model_copy(update={"evidence_by": "passage", "evidence_docs": 10}))
    assert rule.ranked_by == "passage evidence" and rule.reordered == 10 and _non_increasing(rule)
    assert all(1.0 <= h.score <= 2.0 for h in rule.results[:10]) and rule.results[10].score <= 1.0
    # the fused order: the fused score
    fusion = engine.search(req.model_copy(update={"evidence_docs": 0}))
    assert fusion.ranked_by == "fusion" and fusion.reordered == 0 and _non_increasing(fusion)
    assert [h.score for h in fusion.results] == [h.components["fused"] for h in fusion.results]


def test_what_ordered_the_results_is_said_once_by_the_response_the_explanation_and_the_cli(
        engine: Engine, index: Path) -> None:
    """``ranked_by`` said "learned ranker" while the explanation said "Ranked by word match only: no learned model
    ... exists for this index" and ``priorart search`` printed "ranking: linear over bm25" above the ranker's order.
    One sentence (``ranking``, made of ``ranked_by`` and ``reordered``) is what each of them says now."""
    from typer.testing import CliRunner

    from training.cli import app

    query = _claim(engine, "en")
    for update, ranked_by in (({}, "learned ranker"), ({"evidence_by": "passage"}, "passage evidence"),
                              ({"evidence_docs": 0}, "fusion")):
        res = engine.search(SearchRequest(query=query, lang="en", k=10, **update))
        assert res.ranked_by == ranked_by
        assert res.ranking == ranking_said(res.ranked_by, res.reordered, res.fusion.weights)
        said = [e for e in res.explained if e.kind == "ranking"]
        if set(res.fusion.weights) == {"bm25"}:  # word match alone gives the fused score: the explanation says why
            assert said and said[0].text.startswith(res.ranking)
            assert "learned model" not in said[0].text
        else:  # (the default build: BM25 and the dense cosine; the response's ranking sentence says what ordered them)
            assert not said and set(res.fusion.weights) == {"bm25", "dense"}
        assert ("learned ranker" in res.ranking) == (ranked_by == "learned ranker")
        assert ("by their best passage" in res.ranking) == (ranked_by == "passage evidence")
    out = CliRunner().invoke(app, ["search", str(index), query, "--lang", "en", "--k", "25", "--no-verify"])
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    res = engine.search(SearchRequest(query=query, lang="en", k=25, explain=True))
    assert f"ranking: {res.ranking}" in lines and not any(line.startswith("ranking: linear") for line in lines)
    table = lines[lines.index(next(x for x in lines if x.split()[:3] == ["rank", "id", "score"])) + 1:]
    printed = [float(line.split()[2]) for line in table]
    assert printed == sorted(printed, reverse=True) and printed[0] == 2.0  # the order's score, as /search gives it


def test_matched_terms_are_the_query_words_of_every_hit_returned_without_explain(engine: Engine) -> None:
    """``matched_terms`` was empty unless ``explain: true``, and stems when given (``sparum``, ``cosear``). Each hit
    returned now lists the query's words it contains, as written, with the index terms they matched as; a German
    query's English hit, the German words whose translations it contains."""
    query = _claim(engine, "de")
    for explain in (False, True):
        res = engine.search(SearchRequest(query=query, lang="de", k=10, explain=explain, collapse_families=False))
        assert res.results and all(h.matched_terms for h in res.results)
        for h in res.results:
            assert list(h.matched_stems) == h.matched_terms
            assert all(word in query for word in h.matched_terms), (h.id, h.matched_terms)
    translated = [h for h in res.results if h.route == "en:psq"]
    assert translated, [h.route for h in res.results]
    en = engine.resources.indexes["en"]
    for h in translated:
        stems = {s for ss in h.matched_stems.values() for s in ss}
        assert stems - set(engine.resources.analyzer("de")(query))  # English index terms, not the query's own
        row = engine.row(h.id)
        assert all(en.matched_terms([s], [row]) == [[s]] for s in stems if s in en.term_id)


def test_the_claim_chart_score_compares_the_cells_of_an_element(engine: Engine, client: TestClient) -> None:
    """The chart's CSV ``score`` was 0.5000 in most cells: each cell's passage scored within its document alone,
    where a document's best passage always scores about the same. It is now the passage's score among every passage
    of the charted documents, as ``/passages`` ranks those documents' passages (1: the best of them)."""
    from service.workflow.report import CHART_SCORE_COLUMN

    claim = _claim(engine, "de", row=1)
    found = engine.search(SearchRequest(query=claim, lang="de", k=4, collapse_families=False))
    ids = [h.id for h in found.results]
    body = {"claim_text": claim, "lang": "de", "documents": ids}
    chart = client.post("/claimchart", json=body).json()
    rows = [engine.row(i) for i in ids]
    cells = [c for c in chart["cells"] if c["text"] is not None]
    assert cells
    elements = {e["label"]: e["text"] for e in chart["elements"]}
    for label in {c["element"] for c in cells}:
        hits = engine.evidence.passages_of(elements[label], "de", rows, k=100_000)
        want = {h.passage_id: h.score for h in hits}
        for c in (c for c in cells if c["element"] == label):
            assert c["score"] == pytest.approx(want[c["passage_id"]], abs=1e-6)
    assert len({round(c["score"], 4) for c in cells}) > len(cells) // 2  # not one value in most cells
    got = list(csv.DictReader(io.StringIO(client.post("/claimchart?format=csv", json=body).text)))
    assert [float(r[CHART_SCORE_COLUMN]) for r in got if r["passage_id"]] == pytest.approx(
        [c["score"] for c in cells], abs=1e-4)


def test_a_body_that_is_not_json_says_where_and_what_the_parser_expected(client: TestClient) -> None:
    """The problem said ``23: JSON decode error``: a character offset with no word for it."""
    bad = client.post("/search", content=b'{"query": "a rotor"\n "k": 5}', headers={"content-type": "application/json"})
    assert bad.status_code == 422
    detail = bad.json()["detail"]
    assert detail == "the body is not valid JSON: Expecting ',' delimiter at line 2, column 2 (character 21)"
    with pytest.raises(json.JSONDecodeError, match=r"line 2 column 2 \(char 21\)"):  # as Python's json counts
        json.loads('{"query": "a rotor"\n "k": 5}')


def test_the_page_links_its_icon_and_favicon_ico_is_no_404(client: TestClient) -> None:
    page = client.get("/").text
    assert '<link rel="icon" href="/static/favicon.svg"' in page
    for path in ("/static/favicon.svg", "/favicon.ico"):
        icon = client.get(path)
        assert icon.status_code == 200 and icon.headers["content-type"].startswith("image/svg+xml")
        assert icon.text.startswith("<svg")
