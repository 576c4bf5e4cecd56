"""Structure-aware passage retrieval (QSF variants of "Passage retrieval in context") over the passage index."""

from __future__ import annotations

import math
import random
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from lab.benchmarks.passages_reference import lm_similarity
from service.corpus.record import Claim, PatentRecord, Section
from service.passages import VARIANTS, PassageHit, PassageIndex
from service.passages.highlight import analysed_spans, highlight_spans
from service.passages.lm import gaussian_weight, minmax
from service.passages.tree import document_passages
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


def _rank(docs: list[tuple[PatentRecord, float]], query: str, lang: str = "en", **kwargs: object) -> list[PassageHit]:
    index = PassageIndex.from_records([d for d, _ in docs])
    return index.rank(query, lang, list(range(len(docs))), [s for _, s in docs], **kwargs).hits  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------ similarity


def test_ranker_sims_match_hand_computation_on_the_index_collection() -> None:
    # one document, two paragraphs, no title/abstract/claims/headings:
    #   g1 = "valve valve seal"        -> [valv, valv, seal]          |g1| = 3
    #   g2 = "spring seal seal seal"   -> [spring, seal, seal, seal]   |g2| = 4
    # collection = the index's English text: valv 2, spring 1, seal 4, N = 7; mu = 7 so mu * p(w|C) = cf(w)
    # Sim(q, g1)  = sqrt((2 + 2) / (3 + 7) * (0 + 1) / (3 + 7)) = sqrt(0.4 * 0.1) = 0.2
    # Sim(q, g2)  = sqrt((0 + 2) / (4 + 7) * (1 + 1) / (4 + 7)) = 2 / 11
    # Sim(q, doc) = sqrt((2 + 2) / (7 + 7) * (1 + 1) / (7 + 7)) = sqrt(8) / 14
    # each measured against the query's ideal text, the query itself: [valv, spring], |ideal| = 2
    # Sim(q, ideal) = sqrt((1 + 2) / (2 + 7) * (1 + 1) / (2 + 7)) = sqrt(6) / 9
    rec = _rec("EP0000009A1", [Section(paragraphs=["valve valve seal", "spring seal seal seal"])])
    scores = PassageIndex.from_records([rec]).score("valve spring", "en", [0], [1.0], variant="qsf_v", mu=7,
                                                     doc_score="lm")
    ideal = math.sqrt(6) / 9
    assert scores.raw["passage"] == pytest.approx([0.2 / ideal, 2 / 11 / ideal], rel=1e-12)
    assert scores.raw["passage_title"] == pytest.approx([0.2 / ideal, 2 / 11 / ideal], rel=1e-12)  # no titles
    assert scores.raw["doc"] == pytest.approx([math.sqrt(8) / 14 / ideal] * 2, rel=1e-12)
    # min-max over the candidate passages: the best is 1, the worst 0
    assert scores.passage.tolist() == [1.0, 0.0]


def test_ranker_collection_is_the_index_not_the_candidates() -> None:
    # the same paragraph scores the same whatever else is a candidate: p(w|C) is the index's
    a = _rec("EP0000010A1", [Section(paragraphs=["valve spring seal", "wood table"])])
    b = _rec("EP0000011A1", [Section(paragraphs=["valve valve valve", "spring"])])
    index = PassageIndex.from_records([a, b])
    alone = index.score("valve spring", "en", [0], variant="qsf_v").raw["passage"]
    both = index.score("valve spring", "en", [0, 1], variant="qsf_v").raw["passage"]
    assert both[:2] == pytest.approx(alone, rel=1e-12)


def test_array_sims_equal_the_scalar_formula_on_a_nested_document() -> None:
    rec = _nested()
    query = "seal for a valve spring in pumps"
    scores = PassageIndex.from_records([rec]).score(query, "en", [0], variant="qsf_v_title", doc_score="lm")
    an = get_analyzer("en")
    passages = document_passages(rec, "en")
    headings = {"Background", "Prior seals", "Detailed description"}
    texts = [an(p.text) for p in passages]
    ext = [an(p.text) + [t for h in p.section_path if h in headings for t in an(h)] + an("Valve for pumps")
           for p in passages]
    all_terms = [t for x in texts for t in x] + [t for h in sorted(headings) for t in an(h)] + an("Valve for pumps")
    coll = {t: n / len(all_terms) for t, n in Counter(all_terms).items()}
    ideal = lm_similarity(an(query), an(query), coll)  # the ideal text of the query's own language: itself
    for i in range(len(texts)):
        assert scores.raw["passage"][i] == pytest.approx(lm_similarity(an(query), texts[i], coll) / ideal, rel=1e-9)
        assert scores.raw["passage_title"][i] == pytest.approx(lm_similarity(an(query), ext[i], coll) / ideal,
                                                               rel=1e-9)
    assert scores.raw["doc"][0] == pytest.approx(lm_similarity(an(query), all_terms, coll) / ideal, rel=1e-9)


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


def test_passage_ids_and_paths() -> None:
    rec = _nested()
    passages = document_passages(rec, "en")
    ids = [p.passage_id for p in passages]
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
    paths = {p.passage_id.split("/", 1)[1]: p.section_path for p in passages}
    assert paths["abstract"] == ("Abstract",)
    assert paths["d/1/p1"] == ("Description",)  # headingless section: hangs from "Description"
    assert paths["d/2.1/p1"] == ("Description", "Background", "Prior seals")
    assert paths["claims/2"] == ("Claims",)
    # the ranker scores exactly these passages, and the hits carry the same paths
    index = PassageIndex.from_records([rec])
    assert [pid for _, pid in index.score("valve", "en", [0]).ids()] == ids
    hits = index.rank("prior seals wear", "en", [0], k=20).hits
    assert {h.passage_id: tuple(h.section_path) for h in hits} == {p.passage_id: p.section_path for p in passages}
    # ids do not depend on the query language; the German claims keep the claim numbers
    de = document_passages(rec, "de")
    assert [p.passage_id for p in de] == ids
    assert [p.lang for p in de if p.kind == "claim"] == ["de", "de"]
    assert de[-1].text.startswith("Ventil nach Anspruch")


def test_repeated_claim_numbers_get_unique_ids() -> None:
    rec = _rec("EP0000002A1", [], claims={"en": [Claim(num=1, text="A."), Claim(num=1, text="B.")]})
    assert [p.passage_id for p in document_passages(rec, "en")] == ["EP0000002A1/claims/1", "EP0000002A1/claims/1_2"]


def test_passage_distances_through_the_tree() -> None:
    # qsf_passage_propagate with one matching passage m: every other passage's context is
    # Sim_title(m) * w(dist(g, m)) / (n - 1) plus the small terms of the non-matching passages;
    # comparing passages at known distances from m checks the distances
    rec = _rec("EP0000003B1", [
        Section(heading="Alpha", paragraphs=["valve spring seal", "wood"],
                sections=[Section(heading="Sub", paragraphs=["glass"])]),
        Section(heading="Gamma", paragraphs=["wood"]),
    ], claims={"en": [Claim(num=1, text="wood")]})
    sc = PassageIndex.from_records([rec]).score("valve spring seal", "en", [0], variant="qsf_passage_propagate",
                                                sigma=1.0)
    st, ctx = sc.raw["passage_title"], sc.raw["context"]
    ids = [pid.split("/", 1)[1] for _, pid in sc.ids()]
    i = {pid: n for n, pid in enumerate(ids)}
    dist = {"d/1/p2": 2, "d/1.1/p1": 3, "d/2/p1": 4, "claims/1": 5}  # from the matching d/1/p1
    n = len(ids)
    for pid, d in dist.items():
        others = sum(st[j] * float(gaussian_weight(_dist(ids[j], pid), 1.0)) for j in range(n) if ids[j] != pid)
        assert ctx[i[pid]] == pytest.approx(others / (n - 1), rel=1e-12)
        assert _dist("d/1/p1", pid) == d


def _dist(a: str, b: str) -> int:
    """Tree distances of the document in test_passage_distances_through_the_tree, by hand."""
    path = {"d/1/p1": ("D", "A"), "d/1/p2": ("D", "A"), "d/1.1/p1": ("D", "A", "S"), "d/2/p1": ("D", "G"),
            "claims/1": ("C",)}
    pa, pb = path[a], path[b]
    common = 0
    while common < min(len(pa), len(pb)) and pa[common] == pb[common]:
        common += 1
    return (len(pa) + 1) + (len(pb) + 1) - 2 * common if a != b else 0


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
    g_head, g_plain = "EP0000010B1/d/1/p1", "EP0000010B1/d/2/p1"
    v = _rank(cands, "spring damper steel", variant="qsf_v", alpha=0.8)
    vt = _rank(cands, "spring damper steel", variant="qsf_v_title", alpha=0.8)
    assert _rank_of(v, g_plain) < _rank_of(v, g_head)
    assert _rank_of(vt, g_head) < _rank_of(vt, g_plain)


def test_document_score_orders_identical_passages() -> None:
    strong = _rec("EP0000020B1", [Section(heading="Part", paragraphs=["valve spring " + FILL, "valve seal spring"])])
    weak = _rec("EP0000021B1", [Section(heading="Part", paragraphs=["valve spring " + FILL, "wood table chair"])])
    cands = [(weak, 1.0), (strong, 1.0)]  # weak first: ties would keep it first
    hits = _rank(cands, "valve spring seal", variant="qsf_v", alpha=0.5, doc_score="lm")
    assert _rank_of(hits, "EP0000020B1/d/1/p1") < _rank_of(hits, "EP0000021B1/d/1/p1")
    assert hits[0].components["doc"] == 1.0
    only_text = _rank(cands, "valve spring seal", variant="qsf_v", alpha=1.0, doc_score="lm")
    same = [h.score for h in only_text if h.passage_id.endswith("/d/1/p1")]
    assert same[0] == pytest.approx(same[1])
    # the default: the first stage's scores (which merge the languages on one scale) as the document component
    fs = _rank([(weak, 9.0), (strong, 1.0)], "valve spring seal", variant="qsf_v", alpha=0.5)
    assert _rank_of(fs, "EP0000021B1/d/1/p1") < _rank_of(fs, "EP0000020B1/d/1/p1")
    assert fs[0].components["first_stage"] == 9.0 and fs[0].components["doc"] == 1.0


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
    cands = [(_context_doc(), 1.0)]
    a, b = "EP0000030B1/d/1/p1", "EP0000030B1/d/2/p1"
    plain = _rank(cands, "steel valve spring", variant="qsf_v_title", alpha=0.5)
    assert plain[_rank_of(plain, a)].score == pytest.approx(plain[_rank_of(plain, b)].score)  # a tie without context
    hits = _rank(cands, "steel valve spring", variant=variant, alpha=0.5, beta=0.2)
    ha, hb = hits[_rank_of(hits, a)], hits[_rank_of(hits, b)]
    assert ha.score > hb.score
    name = "section" if variant == "qsf_section" else "propagated"
    assert ha.components[name] > hb.components[name]
    # the score is the paper's combination of its components; a passage without any query term scores 0 and
    # comes after every passage with one
    for h in hits:
        c = h.components
        combined = 0.5 * c["passage"] + 0.5 * (0.2 * c["doc"] + 0.8 * c[name])
        assert h.score == pytest.approx(combined if h.matches else 0.0)
    with_terms = [bool(h.matches) for h in hits]
    assert with_terms == sorted(with_terms, reverse=True) and not all(with_terms)
    # beta = 1: the context has no weight, the tie is back
    no_ctx = _rank(cands, "steel valve spring", variant=variant, alpha=0.5, beta=1.0)
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
    sec = _rank([(doc, 1.0)], "steel valve spring", variant="qsf_section", alpha=0.5, beta=0.0)
    assert sec[_rank_of(sec, a)].score == pytest.approx(sec[_rank_of(sec, b)].score)
    prop = _rank([(doc, 1.0)], "steel valve spring", variant="qsf_section_propagate", alpha=0.5, beta=0.0)
    assert prop[_rank_of(prop, a)].score > prop[_rank_of(prop, b)].score


def test_passage_propagate_prefers_near_matching_passages_and_sigma_widens() -> None:
    # a and b have equal text; a is the sibling of the matching passage m, b is 4 edges away from it
    doc = _rec("EP0000050B1", [
        Section(heading="Alpha part", paragraphs=["steel rod " + FILL, "valve spring seal valve"]),
        Section(heading="Gamma part", paragraphs=["steel rod " + FILL, "wood table chair"]),
    ])
    index = PassageIndex.from_records([doc])
    scores = index.score("steel valve spring", "en", [0], variant="qsf_passage_propagate", sigma=1.0)
    st = scores.raw["passage_title"]
    a, m, b, n = 0, 1, 2, 3
    # propag(a) = mean over the 3 other passages of Sim_title * w(dist): dist(a,m)=2, dist(a,b)=4, dist(a,n)=4
    w = gaussian_weight([2, 4], 1.0)
    expected_a = (st[m] * w[0] + st[b] * w[1] + st[n] * w[1]) / 3
    assert scores.raw["context"][a] == pytest.approx(expected_a, rel=1e-12)
    assert scores.raw["context"][a] > scores.raw["context"][b]
    wide = index.score("steel valve spring", "en", [0], variant="qsf_passage_propagate", sigma=5.0)
    ratio_narrow = scores.raw["context"][b] / scores.raw["context"][a]
    ratio_wide = wide.raw["context"][b] / wide.raw["context"][a]
    assert ratio_wide > ratio_narrow  # a wider Gaussian lets far passages contribute more


def test_section_scores_are_recursive_averages() -> None:
    # "Top" has passages p1, p2 and subsection "Sub" with p3, p4:
    # Sim_sec(Sub) = (s3 + s4) / 2 ; Sim_sec(Top) = (s1 + s2 + Sim_sec(Sub)) / 3  (not the flat mean of 4)
    doc = _rec("EP0000060B1", [Section(heading="Top", paragraphs=["valve spring", "valve " + FILL],
                                       sections=[Section(heading="Sub", paragraphs=["spring seal", FILL])])])
    index = PassageIndex.from_records([doc])
    sc = index.score("valve spring", "en", [0], variant="qsf_section")
    s = sc.raw["passage_title"]
    sub = (s[2] + s[3]) / 2
    top = (s[0] + s[1] + sub) / 3
    assert sc.raw["context"].tolist() == pytest.approx([top, top, sub, sub], rel=1e-12)
    # section propagate: mean over ancestors (parent .. root) of Sim_sec * w(dist)
    sp = index.score("valve spring", "en", [0], variant="qsf_section_propagate", sigma=2.0)
    desc = top  # "Description" has the single child "Top"; root has the single child "Description"
    w = gaussian_weight([1, 2, 3, 4], 2.0)
    assert sp.raw["context"][0] == pytest.approx((top * w[0] + desc * w[1] + desc * w[2]) / 3, rel=1e-12)
    assert sp.raw["context"][2] == pytest.approx((sub * w[0] + top * w[1] + desc * w[2] + desc * w[3]) / 4,
                                                 rel=1e-12)


def test_rank_returns_k_best_with_ties_in_candidate_order() -> None:
    docs = [_rec(f"EP00001{i:02d}B1", [Section(paragraphs=["valve spring", "wood"])]) for i in range(5)]
    hits = _rank([(d, 1.0) for d in docs], "valve spring", variant="qsf_v", k=3)
    assert [h.passage_id for h in hits] == [f"{d.id}/d/1/p1" for d in docs[:3]]
    # the candidate order, not the row order, breaks ties
    index = PassageIndex.from_records(docs)
    hits = index.rank("valve spring", "en", [4, 2, 0], variant="qsf_v", k=2).hits
    assert [h.passage_id for h in hits] == [f"{docs[4].id}/d/1/p1", f"{docs[2].id}/d/1/p1"]
    ranking = index.rank("valve", "en", [])
    assert ranking.hits == [] and ranking.documents == 0


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_alone_ranks_each_candidate_as_if_it_were_the_only_one(variant: str) -> None:
    """rank(alone=True), a claim chart's cells: each candidate's k best passages, exactly (scores, components,
    highlights) as ranking that candidate alone gives them, candidate by candidate, from one scoring of them all."""
    docs = [_nested(), _context_doc(), _rec("EP0000080B1", [Section(paragraphs=["la soupape et le ressort"])],
                                            lang="fr", title="Soupape"),
            _rec("EP0000081B1", [Section(heading="Seals", paragraphs=["valve valve seal", "spring"])])]
    index = PassageIndex.from_records(docs)
    rows = [3, 0, 2, 1]
    for query, lang, langs in (("valve spring seal", "en", None), ("valve spring", "en", {"en"}),
                               ("Ventil Feder Dichtung", "de", {"de"})):
        together = index.rank(query, lang, rows, variant=variant, k=3, langs=langs, alone=True)
        one_by_one = [index.rank(query, lang, [r], variant=variant, k=3, langs=langs) for r in rows]
        assert together.hits == [h for r in one_by_one for h in r.hits], (query, variant)
        assert together.skipped == sum(r.skipped for r in one_by_one)
        assert together.documents == sum(r.documents for r in one_by_one)


def test_partial_order_equals_stable_full_sort() -> None:
    scores = PassageIndex.from_records([_nested()]).score("valve", "en", [0])
    rng = np.random.default_rng(3)
    for k in (1, 5, 40, 200):
        values = rng.integers(0, 6, size=100).astype(np.float64)  # many ties
        assert scores.order(values, k).tolist() == np.argsort(-values, kind="stable")[:k].tolist()


def test_exclude_claims_scores_a_document_as_if_it_had_none() -> None:
    rec, other = _nested(), _context_doc()
    index = PassageIndex.from_records([rec, other, rec.model_copy(update={"id": "EP0000099B1", "claims": {}})])
    without = index.score("valve spring seal", "en", [0, 1], exclude_claims=[True, False])
    bare = index.score("valve spring seal", "en", [2, 1])
    assert not any("/claims/" in pid for _, pid in without.ids())
    for key in ("passage", "passage_title", "doc", "context"):
        assert without.raw[key] == pytest.approx(bare.raw[key], rel=1e-12)


# ------------------------------------------------------------------------------------ languages


def test_query_language_picks_claims_and_identity_fallback() -> None:
    hits = _rank([(_nested(), 1.0)], "Ventil Dichtung", "de", k=3)
    assert hits[0].passage_id == "EP0000001B1/claims/2"
    assert hits[0].lang == "de"
    assert [hits[0].text[s:e] for s, e in hits[0].highlights] == ["Ventil", "Dichtung"]


def test_translation_table_reaches_english_text() -> None:
    from service.text.translation import TranslationTable

    rec = _rec("EP0000070B1", [Section(paragraphs=["the spring holds the valve", "wood table chair"])])
    table = TranslationTable({"fed": {"spring": 0.9, "pen": 0.1}}, src="de")
    index = PassageIndex.from_records([rec])
    with_table = index.rank("Feder", "de", [0], translations={"de": table}, variant="qsf_v").hits
    assert with_table[0].passage_id == "EP0000070B1/d/1/p1"
    assert [with_table[0].text[s:e] for s, e in with_table[0].highlights] == ["spring"]
    assert with_table[0].components["passage"] == 1.0


def test_langs_filter_returns_readable_passages_and_skips_unreadable_documents() -> None:
    en = _nested()
    fr = _rec("EP0000080B1", [Section(paragraphs=["la soupape et le ressort"])], lang="fr", title="Soupape")
    index = PassageIndex.from_records([en, fr])
    ranking = index.rank("Ventil Feder Dichtung", "de", [0, 1], [2.0, 1.0], langs={"de"}, k=50)
    assert ranking.skipped == 1 and ranking.documents == 1  # the French-only document has no German text
    assert {h.lang for h in ranking.hits} == {"de"}  # only the German claims of EP0000001B1 are shown
    assert [h.passage_id for h in ranking.hits] == ["EP0000001B1/claims/2", "EP0000001B1/claims/1"]
    assert ranking.hits[0].title == "Valve for pumps"  # no German title: English
    assert index.readable([0, 1], {"fr"}).tolist() == [False, True]


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


SPAN_TEXTS = ["Die Straße", "ﬁlter Feder", "re\u0301servoir", "ΣΑΣ όρος", "Gerät’s – x", "q\u0307x", "STRAẞE groß",
              "ŉ ǰ ΐ", "e\u0301\u0301a", "\u0301start", "x\u00b5m 5\u00b2 H01F 27/14 (4) ½", "a\u0308bc ä",
              "ｆｕｌｌ ｗｉｄｔｈ", "plain ASCII text (12a)", ""]


def test_token_spans_equal_the_per_cluster_reference() -> None:
    from lab.benchmarks.passages_reference import token_spans as reference_spans
    from service.passages.highlight import token_spans

    for text in SPAN_TEXTS:
        assert token_spans(text) == reference_spans(text), text


@pytest.mark.realdata
def test_highlights_of_ascii_text_equal_the_analysed_spans_on_real_claims(ep_records: list[PatentRecord]) -> None:
    """The fast path for ASCII passages gives the spans of the tokens whose analysed term is a query term, exactly
    as the general path (analysed_spans) does."""
    from service.passages.highlight import analysed_spans

    an = get_analyzer("en")
    texts = [c.text for r in ep_records for c in r.claims.get("en", []) if c.text.isascii()]
    assert len(texts) > 100
    for i, text in enumerate(texts):
        query = set(an(texts[(i + 1) % len(texts)])) | set(an(text)[:3]) | {"h01f27/14", "(4)"}
        want = [(s, e) for s, e, term in analysed_spans(text, an) if term in query]
        assert highlight_spans(text, query, an) == want


@pytest.mark.realdata
def test_token_spans_equal_the_reference_on_real_non_ascii_text(ep_records: list[PatentRecord]) -> None:
    from lab.benchmarks.passages_reference import token_spans as reference_spans
    from service.passages.highlight import token_spans

    texts = [c.text for r in ep_records for cl in r.claims.values() for c in cl if not c.text.isascii()]
    assert len(texts) > 200
    for text in texts:
        assert token_spans(text) == reference_spans(text)


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


def test_term_matches_of_the_token_terms_are_the_highlight_matches() -> None:
    """A claim chart analyses a passage once (token_terms) and finds each element's matches in it (term_matches):
    the same spans and terms as highlight_matches, compound parts included (the first term a query holds)."""
    from service.passages.highlight import highlight_matches, term_matches, token_terms
    from service.text.analysis import Analyzer, stopwords
    from service.text.compounds import CompoundSplitter

    splitter = CompoundSplitter({"hoch": 30, "spannung": 12, "anordnung": 20, "gehäuse": 9, "deckel": 5}, set(),
                                lang="de", stop=stopwords("de"))
    cases = [
        (get_analyzer("en"), "A housing (4) per H01F 27/14 with 1,5 mm SO2; the ﬁlter's Valves and SPRINGS."),
        (get_analyzer("fr"), "Le dispositif selon la revendication 1, où l'élément (3) est réalisé en acier."),
        (Analyzer("de", splitter=splitter), "Die Hochspannungsanordnung (12a) hat einen Gehäusedeckel und "
                                            "eine Anordnung; das Gehäuse enthält 0,25 g Natriumchlorid."),
    ]
    for an, text in cases:
        tokens = token_terms(text, an)
        every = {t for _, _, terms in tokens for t in terms}
        assert every == set(an(text))
        for query in (every, {"deckel", "anordn", "hoch"}, {"gehaus", "gehausedeckel"}, {"h01f27/14", "(4)"},
                      {an.term("valves"), an.term("acier")}, set()):
            assert term_matches(tokens, query) == highlight_matches(text, query, an), (an.lang, query)


# ------------------------------------------------------------------------------------- validation


def test_invalid_parameters_raise() -> None:
    index = PassageIndex.from_records([_nested()])
    with pytest.raises(ValueError, match="qsf_v, qsf_v_title, qsf_section, qsf_section_propagate"):
        index.rank("valve", "en", [0], variant="bm25")
    for kwargs in ({"alpha": -0.1}, {"alpha": 1.1}, {"alpha": float("nan")}, {"beta": 2.0}, {"beta": -1e-9}):
        with pytest.raises(ValueError, match="alpha|beta"):
            index.rank("valve", "en", [0], **kwargs)  # type: ignore[arg-type]
    for sigma in (0.0, -1.0, float("inf")):
        with pytest.raises(ValueError, match="sigma"):
            index.rank("valve", "en", [0], sigma=sigma)
    with pytest.raises(ValueError, match="k must be"):
        index.rank("valve", "en", [0], k=0)
    with pytest.raises(ValueError, match="unsupported query language"):
        index.rank("valve", "xx", [0])
    with pytest.raises(ValueError, match="no index terms"):
        index.rank("the and of", "en", [0])
    with pytest.raises(ValueError, match="appears twice"):
        index.rank("valve", "en", [0, 0])
    with pytest.raises(ValueError, match="row 3 is not in the passage index"):
        index.rank("valve", "en", [3])
    with pytest.raises(ValueError, match="2 document scores for 1 candidate rows"):
        index.rank("valve", "en", [0], [1.0, 2.0])
    with pytest.raises(ValueError, match="doc_score"):
        index.rank("valve", "en", [0], doc_score="bm25")
    with pytest.raises(ValueError, match="unsupported language"):
        index.rank("valve", "en", [0], langs={"xx"})
    with pytest.raises(ValueError, match="mu"):
        index.score("valve", "en", [0], mu=0)
    assert set(VARIANTS) == {"qsf_v", "qsf_v_title", "qsf_section", "qsf_section_propagate", "qsf_passage_propagate"}


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
        passages = document_passages(rec, "en")
        ids = [p.passage_id for p in passages]
        assert len(ids) == len(set(ids)), doc_id
        assert all(p.text.strip() for p in passages)
        n_desc = sum(1 for p in passages if p.kind == "description")
        n_paras = sum(1 for s in rec.description for _, node in s.walk() for para in node.paragraphs if para.strip())
        assert n_desc == n_paras and n_desc > 0
        xml_headings = _xml_headings(ep_dir / f"{doc_id}.xml")
        used = {h for p in passages for h in p.section_path[1:] if p.section_path[0] == "Description"}
        assert used, f"{doc_id}: no headed section"
        normalised = {" ".join(h.split()) for h in used}
        assert normalised <= xml_headings, f"{doc_id}: headings not in the XML: {sorted(normalised - xml_headings)}"
        checked += 1
    assert checked == 5


@pytest.mark.realdata
def test_real_ep_claim_queries_find_their_own_description(ep_records: list[PatentRecord]) -> None:
    # query = the first usable claim without its reference signs, English documents only (one
    # language keeps the test fast); the candidates' claims are left out so a query cannot find itself
    from training.passage_tuning import reference_sign_queries

    with_desc = [r for r in ep_records if r.description and r.lang == "en"]
    queries = [q for r in with_desc for q in reference_sign_queries(r)[:1]]
    assert len(queries) >= 10
    index = PassageIndex.from_records(with_desc)
    rows = list(range(len(with_desc)))
    by_id = {r.id: r for r in with_desc}
    for q in queries:  # the proxy judgments use the ranker's passage ids
        assert q.relevant <= {p.passage_id for p in document_passages(by_id[q.doc_id], q.lang)}
    rng = random.Random(7)
    ap_model: list[float] = []
    ap_random: list[float] = []
    top_doc_hits = 0
    for q in queries:
        scores = index.score(q.query, q.lang, rows, variant="qsf_passage_propagate", sigma=1.0,
                             exclude_claims=[True] * len(rows))
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
