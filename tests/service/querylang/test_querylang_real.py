"""The query language on the real data (issue 61 item 6): a few hundred queries generated from the corpus, each
operator, field and language, run through the engine as /search reads them; the engine's result set must be the
reference evaluator's (tests/querylang_reference.py, over the corpus JSONL) for every one. The words' translations
are the engine's (the reference does not know the tables): what the engine reported for each word is given to it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from querylang_reference import Reference, generate

pytestmark = [pytest.mark.slow, pytest.mark.realdata]

N_QUERIES = 300


def _records(corpus: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in corpus.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_no_title_abstract_or_claim_of_the_real_data_reads_as_a_query(real_corpus: Path) -> None:
    """Free text stays free text: none of the real data's 10,000 titles, abstracts and claims (what analysts paste,
    what the evaluation's topics are) is read as the query language under ``syntax: auto``."""
    from service.querylang.syntax import looks_like_query

    texts: list[str] = []
    for r in _records(real_corpus):
        texts += [*r.get("title", {}).values(), *r.get("abstract", {}).values()]
        texts += [c["text"] for cs in r.get("claims", {}).values() for c in cs]
    assert len(texts) > 5000
    assert [t[:100] for t in texts if looks_like_query(t)] == []


def test_generated_queries_match_the_reference_on_the_real_data(real_index: Path, real_corpus: Path) -> None:
    from service.engine import Engine
    from service.query import resolve
    from service.querylang.evaluate import positive_clauses
    from service.querylang.syntax import TOKEN_FIELDS, WILDCARDS, parse
    from service.schema import SearchRequest

    records = _records(real_corpus)
    queries = generate(records, N_QUERIES)
    assert len(queries) >= N_QUERIES * 0.9
    engine = Engine.load(real_index)
    try:
        ids = engine.docs.ids
        reference = Reference(records)
        kinds_nonempty = 0
        translated = 0
        checked_fields = 0
        by_id = {d.rec["id"]: d for d in reference.docs}
        for text in queries:
            q = engine.query(SearchRequest(query=text, syntax="query"))
            r = resolve(q, engine.docs, engine.resources)
            got = {ids[i] for i in np.flatnonzero(r.filter_masks["query"])}
            entry = r.filters["query"]
            extra = {t["words"][0]: [w for ws in t["translations"].values() for w in ws] for t in entry["terms"]
                     if len(t["words"]) == 1 and not t["term"].startswith("=")
                     and not any(c in t["term"] for c in WILDCARDS)}
            translated += any(extra.values())
            reference.extra = {k: set(v) for k, v in extra.items()}
            node = parse(text)
            expected = reference.ids(node)
            assert got == expected, (text, sorted(got ^ expected)[:5])
            # the field of each match (SearchHit.fields) of a few of its documents, as the reference finds them
            rows = np.flatnonzero(r.filter_masks["query"])[:3].tolist()
            assert r.language is not None
            fields = r.language.fields(rows)
            for row in rows:
                doc = by_id[ids[row]]
                want = {c.show(): sorted({f for f, *_ in reference.spans(c, doc)}, key=TOKEN_FIELDS.index)
                        for c in positive_clauses(node)}
                want = {c: f for c, f in want.items() if f}
                assert fields.get(row, {}) == want, (text, ids[row])
                checked_fields += bool(want)
            kinds_nonempty += bool(got)
            assert entry["parsed"] == node.show()
        assert kinds_nonempty > N_QUERIES * 0.6  # most generated queries find documents: the test can fail
        assert translated > 20  # the words were translated through the index's tables
        assert checked_fields > N_QUERIES * 0.6  # (documents whose matches have fields: the check can fail)
    finally:
        engine.close()


def test_a_german_query_finds_english_documents_through_the_tables_and_lists_only_matches(real_index: Path,
                                                                                          real_corpus: Path) -> None:
    """Across languages (item 2): German words in a Boolean query match English documents through the index's tables
    (``cl=(Dichtung AND Gehäuse)``: seal, housing), ``="..."`` does not translate, and /search lists only documents
    that pass the filter, each holding a word or a translation of each term in its claims."""
    from service.engine import Engine
    from service.schema import SearchRequest

    records = {r["id"]: r for r in _records(real_corpus)}
    engine = Engine.load(real_index)
    try:
        res = engine.search(SearchRequest(query="cl=(Dichtung AND Gehäuse)", k=100))
        terms = res.query.filters["query"]["terms"]
        assert [t["term"] for t in terms] == ["cl=dichtung", "cl=gehäuse"]
        assert {"seal", "housing"} <= {w for t in terms for w in t["translations"].get("en", [])}, terms
        assert res.results and len(res.results) == res.query.filters["n_allowed"]
        langs = set()
        for h in res.results:
            claims = records[h.id]["claims"]
            langs |= {lang for lang, cs in claims.items() if cs}
            words = set(re.findall(r"[^\W_]+", " ".join(c["text"] for cs in claims.values() for c in cs).casefold()))
            for t in terms:
                assert words & {*t["words"], *(w for ws in t["translations"].values() for w in ws)}, (h.id, t["term"])
        assert "en" in langs, langs  # English claims reached through the translations
        exact = engine.search(SearchRequest(query='cl=(="Dichtung" AND ="Gehäuse")', k=100))
        assert all(t["translations"] == {} for t in exact.query.filters["query"]["terms"])
        assert len(exact.results) < len(res.results)
        assert {h.id for h in exact.results} <= {h.id for h in res.results}
    finally:
        engine.close()
