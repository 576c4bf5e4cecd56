"""`priorart demo` wiring: synthetic corpus -> index with its translation tables (no training, no serving)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from training.cli import app


def test_demo_builds_a_searchable_index_from_synthetic_data(tmp_path: Path) -> None:
    work = tmp_path / "demo"
    res = CliRunner().invoke(app, ["demo", "-n", "300", "--workdir", str(work), "--no-train", "--no-serve"])
    assert res.exit_code == 0, res.output
    meta = json.loads((work / "index" / "meta.json").read_text())
    assert meta["format"] == "priorart-index"
    pairs = {(t["src"], t["tgt"]) for t in meta["components"]["translation"]}
    assert pairs == {("de", "en"), ("fr", "en"), ("en", "de"), ("en", "fr")}  # de <-> fr: through English
    out = CliRunner().invoke(app, ["search", str(work / "index"), "XS00000007", "--k", "3", "--json"])
    assert out.exit_code == 0, out.output
    assert len(json.loads(out.output)["results"]) == 3


def test_demo_index_answers_german_french_and_english_queries_across_languages(tmp_path: Path) -> None:
    """No extra step: the demo's plain build translates a German claim into English and French text."""
    from service.corpus.jsonl import read_corpus
    from service.retrieval.first_stage import FirstStage

    work = tmp_path / "demo"
    res = CliRunner().invoke(app, ["demo", "-n", "300", "--workdir", str(work), "--no-train", "--no-serve"])
    assert res.exit_code == 0, res.output
    stage = FirstStage.load(work / "index")
    recs = list(read_corpus(work / "corpus.jsonl"))
    tri = next(r for r in recs if all(r.claims.get(x) for x in ("en", "de", "fr")))
    for lang in ("de", "fr", "en"):
        hit = stage.search(tri.claims[lang][0].text, lang=lang, k=5)
        assert {r.kind for r in hit.info.routes} == {"mono", "psq"} and len(hit.info.routes) == 3, lang
        assert tri.id in [h.doc_id for h in hit.hits], lang
