"""Regression: the passage index gives the reference's scores on the real data (within 1e-9), every variant.

The reference is the per-record ranker kept in ``lab/benchmarks/passages_reference.py`` (the service does
not use it), with the passage index's collection statistics as its background models
(tests/service/passages/test_passage_index.py checks those counts against the records). Candidates are the first-stage
results of real queries on the real index (English, German and French claims; German/French reach English text
through the index's PSQ tables), exactly as the engine hands them over.

The index here is built without German compound splitting: the reference ranker analyses text with the
plain analyzers, and the comparison is of the scoring, not of the analysis. (A default build splits German
compounds in BM25 and in the passage index alike, issue 13; that changes the terms, by design.)
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lab.benchmarks.passages_reference import PassageRanker, background_of_index
from service.passages import VARIANTS, PassageIndex
from service.retrieval.first_stage import FirstStage

pytestmark = pytest.mark.realdata

TOL = 1e-9


@pytest.fixture(scope="module")
def real_index(real_corpus: Path, real_translation: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's real index, but with the plain analyzers (no compound splitting); without the dense stage, the
    learned ranker and the code classifier (the passages and the first stage are all this module reads)."""
    from training.build import build_index

    out = tmp_path_factory.mktemp("real-index-plain") / "index"
    build_index(real_corpus, out, translation_dir=real_translation, compounds=(), progress=False, dense=False,
                ranker="none", cpc=None)
    return out


@pytest.fixture(scope="module")
def stage(real_index: Path) -> FirstStage:
    return FirstStage.load(real_index)


@pytest.fixture(scope="module")
def reference(stage: FirstStage, real_index: Path) -> PassageRanker:
    """The reference ranker; one instance, so both tests share its cache of parsed records."""
    return PassageRanker(translations=stage.tables, background=background_of_index(PassageIndex.load(real_index)))


def _queries(stage: FirstStage) -> list[tuple[str, str]]:
    """The first claim of a trilingual EP grant in each language, and an English abstract."""
    from training.tasks import strip_reference_signs

    docs = stage.docs
    out: list[tuple[str, str]] = []
    for row in range(len(docs)):
        rec = docs.get_row(row)
        if rec.id.startswith("EP") and all(rec.claims.get(lang) for lang in ("en", "de", "fr")):
            out += [(strip_reference_signs(rec.claims[lang][0].text), lang) for lang in ("en", "de", "fr")]
            break
    for row in range(len(docs)):
        rec = docs.get_row(row)
        if rec.id.startswith("US") and rec.abstract.get("en"):
            out.append((rec.abstract["en"], "en"))
            break
    assert len(out) == 4
    return out


def _close(got: np.ndarray, want: np.ndarray, what: str) -> None:
    assert got.shape == want.shape, what
    scale = float(np.max(np.abs(want))) if want.size else 0.0
    assert np.allclose(got, want, rtol=TOL, atol=1e-12 * scale), f"{what}: max diff {np.max(np.abs(got - want))}"


def test_passage_index_scores_equal_todays_implementation_on_real_data(stage: FirstStage, real_index: Path,
                                                                      reference: PassageRanker) -> None:
    index = PassageIndex.load(real_index)
    compared = 0
    for text, lang in _queries(stage):
        hits = stage.search(text, lang=lang, k=1000).hits
        rows = [h.row for h in hits]
        scores = [h.score for h in hits]
        assert len(rows) > 100, "too few candidates to be a real test"
        records = [(stage.docs.get_row(r), s) for r, s in zip(rows, scores, strict=True)]
        settings = [(v, 1.0, "lm") for v in VARIANTS] + [("qsf_passage_propagate", 0.5, "lm"),
                                                         ("qsf_section_propagate", 5.0, "lm"),
                                                         ("qsf_section", 1.0, "first_stage")]
        for variant, sigma, doc_score in settings:
            want = reference.score(text, lang, records, variant=variant, sigma=sigma, doc_score=doc_score)
            got = index.score(text, lang, rows, scores, variant=variant, sigma=sigma, doc_score=doc_score,
                              translations=stage.tables)
            assert got.ids() == [(p.doc_id, p.passage_id) for t in want.trees for p in t.passages]
            for key in want.raw:
                _close(got.raw[key], want.raw[key], f"{lang} {variant} raw {key}")
            for key in ("passage", "doc", "context"):
                if getattr(want, key) is not None:
                    assert np.max(np.abs(getattr(got, key) - getattr(want, key))) <= TOL, f"{lang} {variant} {key}"
            for alpha, beta, translated in ((0.5, 0.5, None), (0.8, 0.2, 0.7), (0.1, 0.9, {"en": 0.0, "fr": 1.0})):
                assert np.max(np.abs(got.combine(alpha, beta, translated) - want.combine(alpha, beta, translated))) \
                    <= TOL
            compared += len(got)
    assert compared > 100_000  # passages compared over all queries and settings


def test_rho_scores_equal_the_reference_on_real_data(stage: FirstStage, real_index: Path) -> None:
    """rho < 1 (translated languages measured against a share of their ideal) moves the scores of the languages a
    query reaches through a table, identically in both implementations (0.3: no query language's default)."""
    index = PassageIndex.load(real_index)
    reference = PassageRanker(translations=stage.tables, background=background_of_index(index), rho=0.3)
    changed = 0
    for text, lang in _queries(stage)[:2]:  # English (reaches German, French) and German (reaches English)
        hits = stage.search(text, lang=lang, k=300).hits
        rows, scores = [h.row for h in hits], [h.score for h in hits]
        records = [(stage.docs.get_row(r), s) for r, s in zip(rows, scores, strict=True)]
        want = reference.score(text, lang, records, variant="qsf_passage_propagate", doc_score="lm")
        got = index.score(text, lang, rows, scores, variant="qsf_passage_propagate", doc_score="lm",
                          translations=stage.tables, rho=0.3)
        plain = index.score(text, lang, rows, scores, variant="qsf_passage_propagate", doc_score="lm",
                            translations=stage.tables)
        for key in want.raw:
            _close(got.raw[key], want.raw[key], f"{lang} rho raw {key}")
        assert np.max(np.abs(got.combine(0.5, 0.5) - want.combine(0.5, 0.5))) <= TOL
        if len(got.images) > 1:  # the query reaches a language through a table
            assert not np.allclose(got.raw["passage_title"], plain.raw["passage_title"]), f"{lang}: rho changed nothing"
            changed += 1
        else:  # only the query's own language: rho has nothing to act on
            assert np.array_equal(got.raw["passage_title"], plain.raw["passage_title"])
    assert changed


def test_engine_hits_equal_todays_implementation_on_real_data(stage: FirstStage, real_index: Path,
                                                              reference: PassageRanker) -> None:
    from lab.benchmarks.passages import same_hits

    index = PassageIndex.load(real_index)
    for text, lang in _queries(stage)[:3]:
        readable = {lang} | ({"en"} if lang in stage.tables else set())
        hits = stage.search(text, lang=lang, k=1000).hits
        rows = [h.row for h in hits]
        scores = [h.score for h in hits]
        records = [(stage.docs.get_row(r), s) for r, s in zip(rows, scores, strict=True)]
        want = reference.rank(text, lang, [(r, s) for r, s in records if readable & set(r.languages)], k=50,
                              langs=readable)
        got = index.rank(text, lang, rows, scores, translations=stage.tables, k=50, langs=readable)
        assert got.skipped == len(records) - sum(1 for r, _ in records if readable & set(r.languages))
        assert same_hits([h.model_dump() for h in got.hits], want)
        by_id = {h.passage_id: h for h in want}
        for h in got.hits:
            if h.passage_id in by_id:
                ref = by_id[h.passage_id]
                assert (h.text, h.section_path, h.highlights, h.lang) == (ref.text, ref.section_path, ref.highlights,
                                                                          ref.lang)
