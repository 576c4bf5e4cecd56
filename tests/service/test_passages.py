"""Structure-aware passage retrieval (QSF variants of "Passage retrieval in context")."""

from __future__ import annotations

import math
import random
from collections.abc import Collection, Mapping
from pathlib import Path

import numpy as np
import pytest

from service.corpus.record import Claim, PatentRecord, Section
from service.retrieval.passages import (
    VARIANTS,
    BackgroundModel,
    PassageHit,
    PassageRanker,
    TuningQuery,
    analysed_spans,
    build_tree,
    claim_signs,
    gaussian_weight,
    highlight_spans,
    lm_similarity,
    minmax,
    paragraph_signs,
    reference_sign_queries,
    tune,
)
from service.text.analysis import get_analyzer


def _rec(doc_id: str, description: list[Section], *, title: str | None = None, lang: str = "en",
         claims: dict[str, list[Claim]] | None = None, abstract: dict[str, str] | None = None) -> PatentRecord:
    return PatentRecord(
        id=doc_id, country=doc_id[:2], number=doc_id[2:-2], kind=doc_id[-2:], source="synth", lang=lang,
        title={lang: title} if title else {}, abstract=abstract or {}, claims=claims or {}, description=description,
    )


def _nested() -> PatentRecord:
    return _rec(
        "EP0000001B1",
        [
            Section(paragraphs=["Opening words about pumps."]),
            Section(heading="Background", paragraphs=["Pumps are known.", "   ", "Valves leak."],
                    sections=[Section(heading="Prior seals", paragraphs=["Seals wear out quickly."])]),
            Section(heading="Detailed description", paragraphs=["The valve 1 has a spring 2.", "Spring 2 is steel."]),
        ],
        title="Valve for pumps",
        claims={"en": [Claim(num=1, text="A valve (1) comprising a spring (2)."),
                       Claim(num=2, text="Valve according to claim 1 with a seal.", refs=[1])],
                "de": [Claim(num=1, text="Ventil (1) mit einer Feder (2)."),
                       Claim(num=2, text="Ventil nach Anspruch 1 mit Dichtung.", refs=[1])]},
        abstract={"en": "A valve with a spring."},
    )


# ------------------------------------------------------------------------------------ similarity


def test_lm_similarity_hand_computed() -> None:
    # query "valve spring" -> [valv, spring]: p_q = 1/2 each
    # text "valve valve seal" -> [valv, valv, seal]: |x| = 3
    # collection p(valv) = 1/4, p(spring) = 1/4, p(seal) = 1/2, mu = 4
    # p_Dir(valv)   = (2 + 4 * 1/4) / (3 + 4) = 3/7
    # p_Dir(spring) = (0 + 4 * 1/4) / (3 + 4) = 1/7
    # CE = -(1/2 log 3/7 + 1/2 log 1/7)  ->  Sim = exp(-CE) = sqrt(3/7 * 1/7) = sqrt(3) / 7 = 0.247436...
    an = get_analyzer("en")
    sim = lm_similarity(an("valve spring"), an("valve valve seal"), {"valv": 0.25, "spring": 0.25, "seal": 0.5}, mu=4)
    assert sim == pytest.approx(math.sqrt(3) / 7, rel=1e-12)
    # a query term absent from the collection is dropped and the query model renormalised
    assert lm_similarity(["valv", "nowhere"], ["valv"], {"valv": 0.5}, mu=2) == pytest.approx((1 + 1) / (1 + 2))
    assert lm_similarity(["nowhere"], ["valv"], {"valv": 1.0}) == 0.0


def test_ranker_sims_match_hand_computation_on_candidate_collection() -> None:
    # one candidate, two paragraphs, no title/abstract/claims/headings:
    #   g1 = "valve valve seal"        -> [valv, valv, seal]          |g1| = 3
    #   g2 = "spring seal seal seal"   -> [spring, seal, seal, seal]   |g2| = 4
    # collection = the candidate's text: valv 2, spring 1, seal 4, N = 7; mu = 7 so mu * p(w|C) = cf(w)
    # Sim(q, g1)  = sqrt((2 + 2) / (3 + 7) * (0 + 1) / (3 + 7)) = sqrt(0.4 * 0.1) = 0.2
    # Sim(q, g2)  = sqrt((0 + 2) / (4 + 7) * (1 + 1) / (4 + 7)) = 2 / 11
    # Sim(q, doc) = sqrt((2 + 2) / (7 + 7) * (1 + 1) / (7 + 7)) = sqrt(8) / 14
    rec = _rec("EP0000009A1", [Section(paragraphs=["valve valve seal", "spring seal seal seal"])])
    scores = PassageRanker(mu=7).score("valve spring", "en", [(rec, 1.0)], variant="qsf_v")
    assert scores.raw["passage"] == pytest.approx([0.2, 2 / 11], rel=1e-12)
    assert scores.raw["passage_title"] == pytest.approx([0.2, 2 / 11], rel=1e-12)  # no titles to add
    assert scores.raw["doc"] == pytest.approx([math.sqrt(8) / 14] * 2, rel=1e-12)
    # min-max over the candidate passages: the best is 1, the worst 0
    assert scores.passage.tolist() == [1.0, 0.0]


def test_vectorised_sims_equal_reference_on_a_nested_document() -> None:
    rec = _nested()
    query = "seal for a valve spring in pumps"
    scores = PassageRanker(mu=1000).score(query, "en", [(rec, 1.0)], variant="qsf_v_title")
    an = get_analyzer("en")
    tree = build_tree(rec, "en")
    headings = {"Background": an("Background"), "Prior seals": an("Prior seals"),
                "Detailed description": an("Detailed description")}
    texts = [an(p.text) for p in tree.passages]
    ext = [an(p.text) + [t for h in p.section_path if h in headings for t in headings[h]] + an("Valve for pumps")
           for p in tree.passages]
    all_terms = [t for x in texts for t in x] + [t for h in headings.values() for t in h] + an("Valve for pumps")
    coll = {t: n / len(all_terms) for t, n in __import__("collections").Counter(all_terms).items()}
    for i in range(len(texts)):
        assert scores.raw["passage"][i] == pytest.approx(lm_similarity(an(query), texts[i], coll), rel=1e-9)
        assert scores.raw["passage_title"][i] == pytest.approx(lm_similarity(an(query), ext[i], coll), rel=1e-9)
    assert scores.raw["doc"][0] == pytest.approx(lm_similarity(an(query), all_terms, coll), rel=1e-9)


def test_background_model_replaces_candidate_collection() -> None:
    rec = _rec("EP0000009A1", [Section(paragraphs=["valve valve seal", "spring seal seal seal"])])
    bg = BackgroundModel({"valv": 10, "spring": 30, "seal": 60}, "en")
    scores = PassageRanker(mu=4, background={"en": bg}).score("valve spring", "en", [(rec, 1.0)], variant="qsf_v")
    coll = {"valv": 0.1, "spring": 0.3, "seal": 0.6}
    an = get_analyzer("en")
    assert scores.raw["passage"][0] == pytest.approx(lm_similarity(an("valve spring"), an("valve valve seal"), coll, 4))
    assert bg.prob("unseen") == pytest.approx(0.5 / 100)
    with pytest.raises(ValueError, match="is a 'en' model"):
        PassageRanker(background={"de": bg})


def test_gaussian_weight_and_minmax() -> None:
    assert gaussian_weight(0, 1.0) == pytest.approx(1.0)
    assert gaussian_weight(1, 1.0) == pytest.approx(math.exp(-0.5))
    assert gaussian_weight(2, 0.5) == pytest.approx(math.exp(-8))
    assert gaussian_weight(3, 5.0) == pytest.approx(math.exp(-9 / 50))
    w = gaussian_weight([1, 2, 3, 4], 2.0)
    assert np.all(np.diff(w) < 0)  # strictly decreasing with distance
    for bad in (0.0, -1.0):
        with pytest.raises(ValueError, match="sigma"):
            gaussian_weight(1, bad)
    assert minmax([2.0, 4.0, 3.0]).tolist() == [0.0, 1.0, 0.5]
    assert minmax([5.0, 5.0]).tolist() == [0.0, 0.0]


# ----------------------------------------------------------------------------------------- tree


def test_passage_ids_paths_and_distances() -> None:
    rec = _nested()
    tree = build_tree(rec, "en")
    ids = [p.passage_id for p in tree.passages]
    assert ids == [
        "EP0000001B1/abstract",
        "EP0000001B1/d/1/p1",
        "EP0000001B1/d/2/p1",
        "EP0000001B1/d/2/p3",  # the blank paragraph 2 is skipped but keeps its number
        "EP0000001B1/d/2.1/p1",
        "EP0000001B1/d/3/p1",
        "EP0000001B1/d/3/p2",
        "EP0000001B1/claims/1",
        "EP0000001B1/claims/2",
    ]
    assert len(set(ids)) == len(ids)
    paths = {p.passage_id.split("/", 1)[1]: p.section_path for p in tree.passages}
    assert paths["abstract"] == ("Abstract",)
    assert paths["d/1/p1"] == ("Description",)  # headingless section: hangs from "Description"
    assert paths["d/2.1/p1"] == ("Description", "Background", "Prior seals")
    assert paths["claims/2"] == ("Claims",)
    d = tree.pass_dist
    i = {pid.split("/", 1)[1]: n for n, pid in enumerate(ids)}
    assert d[i["d/2/p1"], i["d/2/p3"]] == 2  # siblings
    assert d[i["d/2/p1"], i["d/2.1/p1"]] == 3  # into the subsection
    assert d[i["d/2/p1"], i["d/3/p1"]] == 4  # cousins under Description
    assert d[i["d/1/p1"], i["d/2/p1"]] == 3
    assert d[i["abstract"], i["claims/1"]] == 4
    assert d[i["d/2.1/p1"], i["claims/1"]] == 6
    assert np.array_equal(d, d.T) and not np.diag(d).any()
    # ids do not depend on the query language; the German claims keep the claim numbers
    de_tree = build_tree(rec, "de")
    assert [p.passage_id for p in de_tree.passages] == ids
    assert [p.lang for p in de_tree.passages if p.kind == "claim"] == ["de", "de"]
    assert de_tree.passages[-1].text.startswith("Ventil nach Anspruch")
    # the same record built twice gives the same ids
    assert [p.passage_id for p in build_tree(rec, "en").passages] == ids


def test_repeated_claim_numbers_get_unique_ids() -> None:
    rec = _rec("EP0000002A1", [], claims={"en": [Claim(num=1, text="A."), Claim(num=1, text="B.")]})
    ids = [p.passage_id for p in build_tree(rec, "en").passages]
    assert ids == ["EP0000002A1/claims/1", "EP0000002A1/claims/1_2"]


# ------------------------------------------------------------------------------------- variants

FILL = "lorem ipsum dolor"


def _rank_of(hits: list[PassageHit], pid: str) -> int:
    return [h.passage_id for h in hits].index(pid)


def test_title_variant_lifts_passage_under_matching_heading() -> None:
    # g_head: plain text has one query term, its heading has the other two
    # g_plain: two query terms in its own text, under an unrelated heading
    doc = _rec("EP0000010B1", [
        Section(heading="Spring damper", paragraphs=["steel element bent " + FILL]),
        Section(heading="Misc notes", paragraphs=["steel spring rod " + FILL]),
    ])
    other = _rec("EP0000011B1", [Section(heading="Misc", paragraphs=["wood table chair " + FILL])])
    cands = [(doc, 2.0), (other, 1.0)]
    ranker = PassageRanker()
    g_head, g_plain = "EP0000010B1/d/1/p1", "EP0000010B1/d/2/p1"
    v = ranker.rank("spring damper steel", "en", cands, variant="qsf_v", alpha=0.8)
    vt = ranker.rank("spring damper steel", "en", cands, variant="qsf_v_title", alpha=0.8)
    assert _rank_of(v, g_plain) < _rank_of(v, g_head)
    assert _rank_of(vt, g_head) < _rank_of(vt, g_plain)


def test_document_score_orders_identical_passages() -> None:
    strong = _rec("EP0000020B1", [Section(heading="Part", paragraphs=["valve spring " + FILL, "valve seal spring"])])
    weak = _rec("EP0000021B1", [Section(heading="Part", paragraphs=["valve spring " + FILL, "wood table chair"])])
    ranker = PassageRanker()
    cands = [(weak, 1.0), (strong, 1.0)]  # weak first: ties would keep it first
    hits = ranker.rank("valve spring seal", "en", cands, variant="qsf_v", alpha=0.5)
    assert _rank_of(hits, "EP0000020B1/d/1/p1") < _rank_of(hits, "EP0000021B1/d/1/p1")
    assert hits[0].components["doc"] == 1.0
    only_text = ranker.rank("valve spring seal", "en", cands, variant="qsf_v", alpha=1.0)
    same = [h.score for h in only_text if h.passage_id.endswith("/d/1/p1")]
    assert same[0] == pytest.approx(same[1])
    # first-stage scores instead of the LM document score
    fs = ranker.rank("valve spring seal", "en", [(weak, 9.0), (strong, 1.0)], variant="qsf_v", alpha=0.5,
                     doc_score="first_stage")
    assert _rank_of(fs, "EP0000021B1/d/1/p1") < _rank_of(fs, "EP0000020B1/d/1/p1")


def _context_doc() -> PatentRecord:
    # the same target text "steel rod" in two places:
    #   A: section "Alpha" whose other passages match the query (valve spring)
    #   B: section "Gamma" whose other passages do not
    return _rec("EP0000030B1", [
        Section(heading="Alpha part", paragraphs=["steel rod " + FILL, "valve spring seal valve", "valve spring"]),
        Section(heading="Gamma part", paragraphs=["steel rod " + FILL, "wood table chair", "glass door frame"]),
    ])


@pytest.mark.parametrize("variant", ["qsf_section", "qsf_section_propagate", "qsf_passage_propagate"])
def test_context_variants_lift_passage_in_matching_section(variant: str) -> None:
    ranker = PassageRanker()
    cands = [(_context_doc(), 1.0)]
    a, b = "EP0000030B1/d/1/p1", "EP0000030B1/d/2/p1"
    plain = ranker.rank("steel valve spring", "en", cands, variant="qsf_v_title", alpha=0.5)
    assert plain[_rank_of(plain, a)].score == pytest.approx(plain[_rank_of(plain, b)].score)  # a tie without context
    hits = ranker.rank("steel valve spring", "en", cands, variant=variant, alpha=0.5, beta=0.2)
    ha, hb = hits[_rank_of(hits, a)], hits[_rank_of(hits, b)]
    assert ha.score > hb.score
    name = "section" if variant == "qsf_section" else "propagated"
    assert ha.components[name] > hb.components[name]
    # the score is the paper's combination of its components
    for h in hits:
        c = h.components
        assert h.score == pytest.approx(0.5 * c["passage"] + 0.5 * (0.2 * c["doc"] + 0.8 * c[name]))
    # beta = 1: the context has no weight, the tie is back
    no_ctx = ranker.rank("steel valve spring", "en", cands, variant=variant, alpha=0.5, beta=1.0)
    assert no_ctx[_rank_of(no_ctx, a)].score == pytest.approx(no_ctx[_rank_of(no_ctx, b)].score)


def test_section_propagate_uses_grandparents_but_section_does_not() -> None:
    # target passages sit alone in their own subsection, so the direct parent scores are equal;
    # only the grandparent ("Alpha" with matching passages vs "Gamma" without) differs
    doc = _rec("EP0000040B1", [
        Section(heading="Alpha part", paragraphs=["valve spring seal", "valve spring"],
                sections=[Section(heading="Sub one", paragraphs=["steel rod " + FILL])]),
        Section(heading="Gamma part", paragraphs=["wood table chair", "glass door frame"],
                sections=[Section(heading="Sub two", paragraphs=["steel rod " + FILL])]),
    ])
    a, b = "EP0000040B1/d/1.1/p1", "EP0000040B1/d/2.1/p1"
    ranker = PassageRanker()
    sec = ranker.rank("steel valve spring", "en", [(doc, 1.0)], variant="qsf_section", alpha=0.5, beta=0.0)
    assert sec[_rank_of(sec, a)].score == pytest.approx(sec[_rank_of(sec, b)].score)
    prop = ranker.rank("steel valve spring", "en", [(doc, 1.0)], variant="qsf_section_propagate", alpha=0.5,
                       beta=0.0)
    assert prop[_rank_of(prop, a)].score > prop[_rank_of(prop, b)].score


def test_passage_propagate_prefers_near_matching_passages_and_sigma_widens() -> None:
    # a and b have equal text; a is the sibling of the matching passage m, b is 4 edges away from it
    doc = _rec("EP0000050B1", [
        Section(heading="Alpha part", paragraphs=["steel rod " + FILL, "valve spring seal valve"]),
        Section(heading="Gamma part", paragraphs=["steel rod " + FILL, "wood table chair"]),
    ])
    ranker = PassageRanker()
    scores = ranker.score("steel valve spring", "en", [(doc, 1.0)], variant="qsf_passage_propagate", sigma=1.0)
    st = scores.raw["passage_title"]
    a, m, b, n = 0, 1, 2, 3
    # propag(a) = mean over the 3 other passages of Sim_title * w(dist): dist(a,m)=2, dist(a,b)=4, dist(a,n)=4
    w = gaussian_weight([2, 4], 1.0)
    expected_a = (st[m] * w[0] + st[b] * w[1] + st[n] * w[1]) / 3
    assert scores.raw["context"][a] == pytest.approx(expected_a, rel=1e-12)
    assert scores.raw["context"][a] > scores.raw["context"][b]
    wide = ranker.score("steel valve spring", "en", [(doc, 1.0)], variant="qsf_passage_propagate", sigma=5.0)
    ratio_narrow = scores.raw["context"][b] / scores.raw["context"][a]
    ratio_wide = wide.raw["context"][b] / wide.raw["context"][a]
    assert ratio_wide > ratio_narrow  # a wider Gaussian lets far passages contribute more


def test_section_scores_are_recursive_averages() -> None:
    # "Top" has passages p1, p2 and subsection "Sub" with p3, p4:
    # Sim_sec(Sub) = (s3 + s4) / 2 ; Sim_sec(Top) = (s1 + s2 + Sim_sec(Sub)) / 3  (not the flat mean of 4)
    doc = _rec("EP0000060B1", [Section(heading="Top", paragraphs=["valve spring", "valve " + FILL],
                                       sections=[Section(heading="Sub", paragraphs=["spring seal", FILL])])])
    ranker = PassageRanker()
    sc = ranker.score("valve spring", "en", [(doc, 1.0)], variant="qsf_section")
    s = sc.raw["passage_title"]
    sub = (s[2] + s[3]) / 2
    top = (s[0] + s[1] + sub) / 3
    assert sc.raw["context"].tolist() == pytest.approx([top, top, sub, sub], rel=1e-12)
    # section propagate: mean over ancestors (parent .. root) of Sim_sec * w(dist)
    sp = ranker.score("valve spring", "en", [(doc, 1.0)], variant="qsf_section_propagate", sigma=2.0)
    desc = top  # "Description" has the single child "Top"; root has the single child "Description"
    w = gaussian_weight([1, 2, 3, 4], 2.0)
    assert sp.raw["context"][0] == pytest.approx((top * w[0] + desc * w[1] + desc * w[2]) / 3, rel=1e-12)
    assert sp.raw["context"][2] == pytest.approx((sub * w[0] + top * w[1] + desc * w[2] + desc * w[3]) / 4,
                                                 rel=1e-12)


def test_rank_returns_k_best_with_ties_in_candidate_order() -> None:
    docs = [_rec(f"EP00001{i:02d}B1", [Section(paragraphs=["valve spring", "wood"])]) for i in range(5)]
    hits = PassageRanker().rank("valve spring", "en", [(d, 1.0) for d in docs], variant="qsf_v", k=3)
    assert [h.passage_id for h in hits] == [f"{d.id}/d/1/p1" for d in docs[:3]]
    assert PassageRanker().rank("valve", "en", []) == []


def test_partial_order_equals_stable_full_sort() -> None:
    rec = _nested()
    scores = PassageRanker().score("valve", "en", [(rec, 1.0)])
    rng = np.random.default_rng(3)
    for k in (1, 5, 40, 200):
        values = rng.integers(0, 6, size=100).astype(np.float64)  # many ties
        assert scores.order(values, k).tolist() == np.argsort(-values, kind="stable")[:k].tolist()


def test_cache_is_bounded_and_reused() -> None:
    docs = [_rec(f"EP00002{i:02d}B1", [Section(paragraphs=[f"valve number {i}"])]) for i in range(6)]
    ranker = PassageRanker(cache_size=4)
    ranker.rank("valve", "en", [(d, 1.0) for d in docs])
    assert len(ranker._cache) == 4
    again = ranker.rank("valve", "en", [(d, 1.0) for d in docs])
    fresh = PassageRanker(cache_size=0).rank("valve", "en", [(d, 1.0) for d in docs])
    assert [(h.passage_id, h.score) for h in again] == [(h.passage_id, h.score) for h in fresh]
    # a copy without claims under the same id gets its own entry
    rec = _nested()
    ranker.rank("valve", "en", [(rec, 1.0)])
    bare = ranker.rank("valve", "en", [(rec.model_copy(update={"claims": {}}), 1.0)])
    assert not any("/claims/" in h.passage_id for h in bare)


# ------------------------------------------------------------------------------------ languages


def test_query_language_picks_claims_and_identity_fallback() -> None:
    rec = _nested()
    hits = PassageRanker().rank("Ventil Dichtung", "de", [(rec, 1.0)], k=3)
    assert hits[0].passage_id == "EP0000001B1/claims/2"
    assert hits[0].lang == "de"
    assert [hits[0].text[s:e] for s, e in hits[0].highlights] == ["Ventil", "Dichtung"]


def test_translation_table_reaches_english_text() -> None:
    from service.retrieval.translate import TranslationTable

    rec = _rec("EP0000070B1", [Section(paragraphs=["the spring holds the valve", "wood table chair"])])
    table = TranslationTable({"fed": {"spring": 0.9, "pen": 0.1}}, src="de")
    with_table = PassageRanker(translations={"de": table}).rank("Feder", "de", [(rec, 1.0)], variant="qsf_v")
    assert with_table[0].passage_id == "EP0000070B1/d/1/p1"
    assert [with_table[0].text[s:e] for s, e in with_table[0].highlights] == ["spring"]
    assert with_table[0].components["passage"] == 1.0


# ----------------------------------------------------------------------------------- highlights


def test_highlights_point_at_query_term_characters() -> None:
    text = "The Valves (4) hold a SPRING; springs and the valve-seat."
    spans = highlight_spans(text, set(get_analyzer("en")("valve spring")), get_analyzer("en"))
    assert [text[s:e] for s, e in spans] == ["Valves", "SPRING", "springs", "valve"]
    # non-ASCII text whose normal form changes length (ß -> ss, the fi ligature -> fi)
    de = "Die Straße hat eine Feder; die ﬁlter-Feder und das Gerät."
    an = get_analyzer("de")
    spans = highlight_spans(de, set(an("Feder Geräte Filter")), an)
    assert [de[s:e] for s, e in spans] == ["Feder", "ﬁlter", "Feder", "Gerät"]
    # decomposed accent (e + combining acute) stays one token
    fr = "Le re\u0301servoir et le ressort."
    fan = get_analyzer("fr")
    assert [fr[s:e] for s, e in highlight_spans(fr, set(fan("réservoir")), fan)] == ["re\u0301servoir"]
    assert highlight_spans(text, set(), get_analyzer("en")) == []


@pytest.mark.parametrize(
    ("lang", "text"),
    [
        ("en", "A housing (4) per H01F 27/14 with 1,5 mm SO2; the ﬁlter's Valves and SPRINGS."),
        ("de", "Das Gehäuse (12a) enthält 0,25 g Natriumchlorid und eine Straße für Geräte."),
        ("fr", "Le dispositif selon la revendication 1, où l'élément (3) est réalisé en acier."),
    ],
)
def test_analysed_spans_agree_with_the_analyzer(lang: str, text: str) -> None:
    an = get_analyzer(lang)
    assert [t for _, _, t in analysed_spans(text, an)] == an(text)


# ------------------------------------------------------------------------------------- validation


def test_invalid_parameters_raise() -> None:
    ranker = PassageRanker()
    cands = [(_nested(), 1.0)]
    with pytest.raises(ValueError, match="qsf_v, qsf_v_title, qsf_section, qsf_section_propagate"):
        ranker.rank("valve", "en", cands, variant="bm25")
    for kwargs in ({"alpha": -0.1}, {"alpha": 1.1}, {"alpha": float("nan")}, {"beta": 2.0}, {"beta": -1e-9}):
        with pytest.raises(ValueError, match="alpha|beta"):
            ranker.rank("valve", "en", cands, **kwargs)  # type: ignore[arg-type]
    for sigma in (0.0, -1.0, float("inf")):
        with pytest.raises(ValueError, match="sigma"):
            ranker.rank("valve", "en", cands, sigma=sigma)
    with pytest.raises(ValueError, match="k must be"):
        ranker.rank("valve", "en", cands, k=0)
    with pytest.raises(ValueError, match="unsupported query language"):
        ranker.rank("valve", "xx", cands)
    with pytest.raises(ValueError, match="no index terms"):
        ranker.rank("the and of", "en", cands)
    with pytest.raises(ValueError, match="appears twice"):
        ranker.rank("valve", "en", cands + cands)
    with pytest.raises(ValueError, match="not a \\(PatentRecord, score\\) pair"):
        ranker.rank("valve", "en", [("EP1", 1.0)])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="doc_score"):
        ranker.rank("valve", "en", cands, doc_score="bm25")
    with pytest.raises(ValueError, match="mu"):
        PassageRanker(mu=0)
    assert set(VARIANTS) == {"qsf_v", "qsf_v_title", "qsf_section", "qsf_section_propagate", "qsf_passage_propagate"}


# ----------------------------------------------------------------------------------------- tuning


def _tuning_queries() -> list[TuningQuery]:
    # the relevant passage "steel rod" (a) has weaker own text than the distractor "steel steel rod" (x),
    # but sits among passages that match the query; only enough context weight ranks it first
    doc = _rec("EP0000080B1", [
        Section(heading="Alpha part", paragraphs=["steel rod " + FILL, "valve spring seal valve", "valve spring"]),
        Section(heading="Gamma part", paragraphs=["steel steel rod " + FILL, "wood table chair", "glass door"]),
    ])
    other = _rec("EP0000081B1", [Section(heading="Misc", paragraphs=["valve " + FILL])])
    cands = [(doc, 1.0), (other, 0.5)]
    return [TuningQuery("q1", "steel valve spring", "en", cands, {doc.id: {"EP0000080B1/d/1/p1"}}),
            TuningQuery("q2", "steel spring", "en", cands, {doc.id: {"EP0000080B1/d/1/p1"}})]


def _first_hit_metric(run: Mapping[str, list[tuple[str, str, float]]],
                      qrels: Mapping[str, Mapping[str, Collection[str]]]) -> float:
    hits = 0.0
    for qid, docs in qrels.items():
        relevant = {p for ps in docs.values() for p in ps}
        hits += float(bool(run[qid]) and run[qid][0][1] in relevant)
    return hits / len(qrels)


def test_tune_finds_context_weight_and_reports_grid() -> None:
    queries = _tuning_queries()
    res = tune(queries, grid_step=0.25, variant="qsf_section", metric=_first_hit_metric)
    assert len(res.grid) == 5 * 5 and {g[2] for g in res.grid} == {None}
    assert res.value == max(g[3] for g in res.grid) == 1.0
    assert res.beta is not None and res.sigma is None
    # the chosen parameters really put the relevant passage first
    hits = PassageRanker().rank("steel valve spring", "en", queries[0].candidates, variant="qsf_section",
                                alpha=res.alpha, beta=res.beta)
    assert hits[0].passage_id == "EP0000080B1/d/1/p1"
    # and a pure-content setting does not
    assert any(g[0] == 1.0 and g[3] < 1.0 for g in res.grid)


def test_tune_grids_per_variant_and_default_metric() -> None:
    queries = _tuning_queries()
    v = tune(queries, grid_step=0.5, variant="qsf_v")
    assert [(g[0], g[1], g[2]) for g in v.grid] == [(0.0, None, None), (0.5, None, None), (1.0, None, None)]
    p = tune(queries, grid_step=0.5, variant="qsf_passage_propagate", sigmas=(0.5, 2.0))
    assert len(p.grid) == 2 * 3 * 3 and {g[2] for g in p.grid} == {0.5, 2.0}
    assert 0.0 <= p.value <= 1.0 and p.value == max(g[3] for g in p.grid)
    with pytest.raises(ValueError, match="grid_step"):
        tune(queries, grid_step=0)
    with pytest.raises(ValueError, match="at least one"):
        tune([])


# --------------------------------------------------------------------------------- proxy judgments


def test_reference_signs_in_claims_and_paragraphs() -> None:
    signs, stripped = claim_signs("A housing (4) with a lid (5, 6a) and a hinge (7 and 8).")
    assert signs == {"4", "5", "6a", "7", "8"}
    assert stripped == "A housing with a lid and a hinge."
    found = paragraph_signs("As shown in Fig. 2, the housing 4 is 10 mm wide and the lid (5) has 3 holes.", "en")
    assert found == {"4", "5"}
    assert paragraph_signs("Das Gehäuse 4 ist gemäß Anspruch 1 aus Stahl und 2,5 mm dick.", "de") == {"4"}


def test_reference_sign_queries_on_a_record() -> None:
    rec = _rec("EP0000090B1", [
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
    qs = reference_sign_queries(rec)
    assert [q.qid for q in qs] == ["EP0000090B1-c1", "EP0000090B1-c2"]
    assert qs[0].relevant == {"EP0000090B1/d/2/p1", "EP0000090B1/d/2/p2"}  # >= 2 shared signs
    assert "(" not in qs[0].query and qs[0].lang == "en"
    assert qs[1].relevant == {"EP0000090B1/d/2/p1", "EP0000090B1/d/2/p2", "EP0000090B1/d/2/p3"}  # 1 sign
    # a claim whose signs are in more than half of the paragraphs is not informative
    assert [q.qid for q in reference_sign_queries(rec, max_relevant_share=0.4)] == ["EP0000090B1-c1"]


# ------------------------------------------------------------------------------------------ real data


@pytest.fixture(scope="module")
def ep_records(ep_dir: Path) -> list[PatentRecord]:
    ingest = pytest.importorskip("training.ingest", reason="ingestion (training.ingest) is not available")
    return list(ingest.iter_records([ep_dir]))


def _xml_headings(path: Path) -> set[str]:
    etree = pytest.importorskip("lxml.etree")
    root = etree.parse(str(path)).getroot()
    return {" ".join("".join(h.itertext()).split()) for h in root.iter("heading")
            if any(a.tag == "description" for a in h.iterancestors())}


@pytest.mark.realdata
def test_real_ep_passages_have_real_headings_and_unique_ids(ep_records: list[PatentRecord], ep_dir: Path) -> None:
    by_id = {r.id: r for r in ep_records}
    checked = 0
    for doc_id in ("EP0640886B1", "EP0430402B2", "EP1011858B2", "EP2743087B2", "EP2361995B2"):
        rec = by_id[doc_id]
        tree = build_tree(rec, "en")
        ids = [p.passage_id for p in tree.passages]
        assert len(ids) == len(set(ids)), doc_id
        assert all(p.text.strip() for p in tree.passages)
        n_desc = sum(1 for p in tree.passages if p.kind == "description")
        n_paras = sum(1 for s in rec.description for _, node in s.walk() for para in node.paragraphs if para.strip())
        assert n_desc == n_paras and n_desc > 0
        xml_headings = _xml_headings(ep_dir / f"{doc_id}.xml")
        used = {h for p in tree.passages for h in p.section_path[1:] if p.section_path[0] == "Description"}
        assert used, f"{doc_id}: no headed section"
        normalised = {" ".join(h.split()) for h in used}
        assert normalised <= xml_headings, f"{doc_id}: headings not in the XML: {sorted(normalised - xml_headings)}"
        checked += 1
    assert checked == 5


@pytest.mark.realdata
def test_real_ep_claim_queries_find_their_own_description(ep_records: list[PatentRecord]) -> None:
    # query = the first usable claim without its reference signs, English documents only (one
    # language keeps the test fast); the candidates' claims are left out so a query cannot find itself
    ranker = PassageRanker(include_claims=False)
    with_desc = [r for r in ep_records if r.description and r.lang == "en"]
    queries = [q for r in with_desc for q in reference_sign_queries(r)[:1]]
    assert len(queries) >= 10
    cands = [(r, 0.0) for r in with_desc]
    by_id = {r.id: r for r in with_desc}
    for q in queries:  # the proxy judgments use the ranker's passage ids
        assert q.relevant <= {p.passage_id for p in ranker.passages(by_id[q.doc_id], q.lang)}
    rng = random.Random(7)
    ap_model: list[float] = []
    ap_random: list[float] = []
    top_doc_hits = 0
    for q in queries:
        scores = ranker.score(q.query, q.lang, cands, variant="qsf_passage_propagate", sigma=1.0)
        run = scores.run(0.5, 0.3, k=1500)
        top_doc_hits += run[0][0] == q.doc_id
        own = [pid for doc, pid, _ in run if doc == q.doc_id]
        shuffled = own[:]
        rng.shuffle(shuffled)
        for ranked, out in ((own, ap_model), (shuffled, ap_random)):
            hits, total = 0, 0.0
            for i, pid in enumerate(ranked, 1):
                if pid in q.relevant:
                    hits += 1
                    total += hits / i
            out.append(total / len(q.relevant))
    # the ranking inside the relevant document beats a random order, and the best passage
    # comes from the query's own document for most claims
    assert np.mean(ap_model) > np.mean(ap_random) + 0.1
    assert top_doc_hits >= 0.8 * len(queries)
