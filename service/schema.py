"""Request and response bodies of priorart: what the engine takes and returns, and the REST API serves.

They live outside the API layer so that :class:`service.engine.Engine` takes typed requests and
returns typed responses without importing FastAPI; the routes in service/api/ use the same classes.
Integer fields are strict: ``true`` or ``"5"`` for ``k`` is a 422, not 1 or 5.
"""

from __future__ import annotations

from datetime import date
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from service.codes import CodeLevel, normalise_codes
from service.text.analysis import Language

Lang = Literal["auto", Language]
"""A request's language: one of the languages (service/text/analysis.py), or ``auto``: detected."""
Variant = Literal["qsf_v", "qsf_v_title", "qsf_section", "qsf_section_propagate", "qsf_passage_propagate"]
"""The passage scoring variants, in the paper's order: the one definition (service/passages/lm.py ``VARIANTS``)."""
DEFAULT_VARIANT: Variant = "qsf_passage_propagate"
"""The passage variant of ``/passages`` and of the passage evidence ``/search`` orders its documents by."""
CodeFilter = Literal["none", CodeLevel]
"""A request's code filter: ``none``, or the level at which a document must share a code with the query."""
FusionMethod = Literal["linear", "borda", "linlearn"]
"""The fusion methods: the one definition (service/fusion.py implements each, ``METHODS`` in its order)."""
RankedBy = Literal["fusion", "passage evidence", "learned ranker"]
"""What ordered a search's results (``SearchResponse.ranked_by``): the one definition (the engine decides it, the
notices say it in words: service/notices.py ``ranking_said``)."""


def _not_blank(text: str, info: ValidationInfo) -> str:
    if not text.strip():
        raise ValueError(f"{info.field_name} is blank")
    return text


def _query_codes(codes: list[str]) -> list[str]:
    return normalise_codes(codes)  # subclass or finer, duplicates removed (service/codes.py)


NonBlank = Annotated[str, AfterValidator(_not_blank)]
"""Text with more than white space in it (a query, a claim): ``FIELD is blank`` otherwise."""
QueryCodes = Annotated[list[str], AfterValidator(_query_codes)]
"""A query's IPC/CPC codes, normalised (service/codes.py ``normalise_codes``)."""
COMPONENTS = ("bm25", "dense", "text", "meta", "joint", "wordpair", "domain")
"""The score components the stages put on candidates: the one definition (service/fusion.py says what each is)."""


class FeedbackRequest(BaseModel):
    """Relevance feedback: publication ids the analyst marked; the search is expanded from them (Rocchio)."""

    model_config = ConfigDict(extra="forbid")

    relevant: list[str] = Field(default_factory=list, max_length=50, description="ids marked relevant")
    nonrelevant: list[str] = Field(default_factory=list, max_length=50, description="ids marked not relevant")
    terms: int = Field(10, ge=1, le=50, strict=True, description="expansion terms added per language")


Syntax = Literal["auto", "query", "text"]
"""How /search reads its query: auto (the query language where the text shows its signs: a field clause, NEAR/n, an
operator in capitals between words that are not, a truncation; three of them in a text of over 40 words), query
(always the language), text (free text)."""


class SearchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: NonBlank = Field(..., min_length=1, description="claims, title+abstract text, a publication number, or a "
                            "query in the query language: AND OR NOT, \"phrases\", NEAR/n ADJ/n SENT PARA, transform* "
                            "colo?r wo#en, fields ti= ab= cl= desc= txt= ta= ftxt= pa= in= ia= pn= pc= kind= cpc= "
                            "ipc=, dates pd ad prd (pd<2001), Espacenet's prox/distance<=n, all, any, within; see "
                            "docs/QUERY_LANGUAGE.md")
    syntax: Syntax = Field("auto", description="auto: the query language where the query shows its signs (a field "
                           "clause, NEAR/n, AND/OR/NOT in capitals between words that are not, a truncation; three in "
                           "a text of over 40 words), else free text; query: always the language; text: always free "
                           "text. query.filters.query says how it was read")
    drop_translations: list[str] = Field(default_factory=list, max_length=100, description="query language: "
                                         "translations of the query's words to leave out, by word")
    lang: Lang = Field("auto", description="query language; auto detects en/de/fr")
    codes: QueryCodes = Field(default_factory=list, max_length=50, description="IPC/CPC codes of the query")
    code_filter: CodeFilter = Field(
        "none", description="keep only documents sharing a code with `codes` at this level"
    )
    before: date | None = Field(None, description="keep only documents published before this date (a publication "
                                "number as the query: its priority date unless priority_cutoff is false)")
    priority_cutoff: bool = Field(True, description="a publication number as the query, without before: keep only "
                                  "documents published before its earliest priority date (else its filing date); "
                                  "query.filters.before_from says which")
    k: int = Field(10, ge=1, strict=True, description="results to return")
    depth: int | None = Field(None, ge=1, strict=True, description="first-stage candidates (default from settings)")
    weights: dict[str, float] | None = Field(
        None, description="fusion weight override, e.g. {'bm25': 1}; components that do not apply to the query "
        "are left out and the rest renormalised")
    fusion: FusionMethod | None = Field(
        None, description="score combination: linear (learned weights), borda, linlearn; default: the index's"
    )
    explain: bool = Field(False, description="include matched terms and stage details")
    translate: bool = Field(True, description="translate the query into the other indexed languages (PSQ)")
    feedback: FeedbackRequest | None = Field(
        None, description="relevance feedback: marked ids; the query is expanded (Rocchio over BM25 terms, and "
        "over dense vectors when the index has models); query.feedback says what was added")
    collapse_families: bool = Field(
        True, description="collapse publications of one family / application / priority into one result")
    evidence_docs: int | None = Field(
        None, ge=0, strict=True,
        description="order the first N documents by their evidence (evidence_by): with their best passage, ranked in "
        "context as /passages ranks them (evidence_weight; the fused order breaks ties and stands below N), or by the "
        "index's learned ranker (which orders the first documents it learned on, 20, for any N above 0); 0: the "
        "fused order; default: the server's setting (PRIORART_EVIDENCE_DOCS, 10). ranked_by in the response says "
        "which order it is")
    evidence_weight: float | None = Field(
        None, ge=0, le=1, description="with evidence_docs: the first N are ordered by (1 - w) * fused + w * best "
        "passage (each in [0, 1]); 1: by the best passage alone; default: the server's setting "
        "(PRIORART_EVIDENCE_WEIGHT); unused where the learned ranker orders them")
    evidence_by: Literal["auto", "ranker", "passage"] | None = Field(
        None, description="what orders the first documents: ranker, the index's learned ranker (its first documents, "
        "by its score of their evidence: fused and first-stage scores, best passage, agreement with the codes the "
        "first documents predict; refused where the index has none); passage, the best passage (evidence_docs, "
        "evidence_weight); auto, the ranker where the index has one; default: the server's setting "
        "(PRIORART_EVIDENCE_BY, auto)")

    @field_validator("weights")
    @classmethod
    def _weights(cls, w: dict[str, float] | None) -> dict[str, float] | None:
        if w is None:
            return None
        allowed = set(COMPONENTS)
        bad = sorted(set(w) - allowed)
        if bad:
            raise ValueError(f"unknown score names {bad}; valid: {sorted(allowed)}")
        if any(not (v == v) or v < 0 or v > 1e6 for v in w.values()):  # NaN, negative or absurd
            raise ValueError("weights must be finite numbers >= 0")
        if not any(v > 0 for v in w.values()):
            raise ValueError("at least one weight must be > 0")
        return w


class PassageRequest(SearchRequest):
    variant: Variant = Field(
        DEFAULT_VARIANT,
        description="how a passage is scored in its document's structure (QSF, the seed paper's variants): 'qsf_v' "
        "the passage's text and its document's score; 'qsf_v_title' the passage with its section headings and the "
        "title; 'qsf_section' that, its document and its parent section; 'qsf_section_propagate' the sections above "
        "it, weighed by their tree distance; 'qsf_passage_propagate' (default) the document's other passages, weighed "
        "by their tree distance (a Gaussian of width sigma)")
    alpha: float | None = Field(None, ge=0, le=1, description="weight of the passage's own score against its "
                                "document and context (1: the passage alone; default 0.5)")
    beta: float | None = Field(None, ge=0, le=1, description="weight of the document's score against the passage's "
                               "context, for passages in the query's language")
    beta_translated: float | None = Field(None, ge=0, le=1,
                                          description="beta of the passages reached through a translation (default: "
                                                      "one per passage language)")
    sigma: float | None = Field(None, gt=0, le=100, description="width of the Gaussian that weighs the context by "
                                "its tree distance in the propagating variants (default 1; distance counts edges, "
                                "siblings are 2 apart: a sibling counts exp(-2) = 0.14)")
    mu: float | None = Field(None, gt=0, le=100_000, description="Dirichlet prior of text in the query's language")
    mu_translated: float | None = Field(None, gt=0, le=100_000,
                                        description="Dirichlet prior of text reached through a translation")
    rho: float | None = Field(None, gt=0, le=1,
                              description="share of its ideal gain a translated text must reach to stand level with "
                                          "a text in the query's language that reaches all of its own")


SCORE_SCALE = (  # SearchHit.score's scale (service/engine.py _order_scores)
    "the score the results are ordered by, non-increasing down the list. ranked_by 'fusion': the fused score (in [0, "
    "1] for the linear and Borda fusions). 'passage evidence' and 'learned ranker': the first documents (the "
    "response's 'reordered') score 1 + their ordering score in [0, 1] (the learned ranker's score min-max over them, "
    "or (1 - evidence_weight) * fused + evidence_weight * best passage), so [1, 2], above every document below them, "
    "which keep their fused score (a linlearn fusion whose fused scores pass 1 lifts the first ones by its largest); "
    "components keep each component's own score")


class SearchHit(BaseModel):
    id: str
    title: str | None
    score: float = Field(description=SCORE_SCALE)
    components: dict[str, float] = Field(
        description="the components that shaped the ranking (those with a non-zero weight in fusion.weights), each "
        "min-max normalised over the candidates, and 'fused' (their weighted combination, the fusion's order); for the "
        "first documents ordered by their evidence, 'evidence' (the best passage's score) and 'ranker' (the learned "
        "ranker's, min-max over them); a score computed with weight 0, or not computed, is left out "
        "(fusion.components says why)")
    matched_terms: list[str] = Field(
        default_factory=list, description="the query's words (as written, in query order) the document contains, "
        "themselves or through a translation (a term relevance feedback added: as its index term); looked up for "
        "the results returned, whatever 'explain' says (a sharded index: with explain only)")
    matched_stems: dict[str, list[str]] = Field(
        default_factory=dict, description="each word of matched_terms -> the index terms (stems, in the languages "
        "the query reaches) it matched in the document as")
    route: str | None = Field(
        None,
        description="first-stage route that reached the document: its own language ('en'), or translated by PSQ "
        "into the document's language ('de:psq'; the tables are in query.route_tables)",
    )
    codes: list[str] = Field(default_factory=list)
    publication_date: date | None = None
    clauses: list[str] = Field(default_factory=list, description="a query in the query language: the alternatives "
                               "(the parts of an OR) this document satisfies, as query.filters.query.parsed writes "
                               "them")
    fields: dict[str, list[str]] = Field(
        default_factory=dict, description="a query in the query language: each of its clauses of words that are not "
        "negated (a word, a phrase, a proximity, as query.filters.query.parsed writes them) this document has -> the "
        "fields it has it in (ti, ab, cl, desc, pa, in), itself or through a translation")
    family: list[FamilyMember] = Field(
        default_factory=list, description="other publications of its family collapsed into this result")


class FamilyMember(BaseModel):
    id: str
    title: str | None = None
    publication_date: date | None = None
    score: float
    grouped_by: list[str] = Field(description="what it shares with the result: family, publication number, priority")


class FamiliesInfo(BaseModel):
    collapsed: bool
    grouped_by: list[str] = Field(description="the keys publications were grouped on")
    groups: int = Field(0, description="results that have other members collapsed into them")
    hidden: int = Field(0, description="publications listed under another result instead of on their own")


class FeedbackInfo(BaseModel):
    method: str = "rocchio"
    relevant: list[str]
    nonrelevant: list[str]
    added_terms: dict[str, list[str]] = Field(description="language -> analysed terms added to the query")
    weights: dict[str, dict[str, float]] = Field(default_factory=dict, description="their query weights")
    dense: str | None = Field(None, description="what happened to the dense query vector")
    notes: list[str] = Field(default_factory=list)


class Notice(BaseModel):
    """A notice in an analyst's words (``text``), with the operator's message and command (``detail``)."""

    text: str
    detail: str = ""
    kind: str = "other"


class StageInfo(BaseModel):
    name: str
    ms: float
    candidates: int
    detail: dict[str, Any] = Field(default_factory=dict)


class QueryInfo(BaseModel):
    """How the query was understood."""

    lang: str
    lang_detected: bool = False
    text_from: str | None = Field(None, description="publication id whose text was searched (number queries)")
    codes: list[str] = Field(default_factory=list, description="the query's classification codes")
    codes_from: str | None = Field(None, description="'request' or 'query document'")
    translated: bool = False
    translation: str | None = None
    routes: list[str] = Field(default_factory=list, description="first-stage routes, e.g. 'en:psq'")
    route_tables: dict[str, str] = Field(
        default_factory=dict, description="table of each translated route, e.g. {'fr:psq': 'de-fr + via en'}"
    )
    translated_to: list[str] = Field(
        default_factory=list, description="languages the query was translated into (its PSQ routes), e.g. ['de', 'fr']")
    terms: list[str] = Field(default_factory=list)
    terms_before_reduction: int = 0
    filters: dict[str, Any] = Field(default_factory=dict)
    feedback: FeedbackInfo | None = None
    predicted_codes: list[str] = Field(
        default_factory=list, description="codes the query is predicted to have, for a query that brings none: the "
        "main groups its first documents vote for, which the meta and joint rankers read (an index with models), else "
        "the subclasses the learned ranker's code features agree with (the code classifier's of the CPC titles, where "
        "the index has it, else its first documents' vote); the query's own codes are in 'codes'")


class FusionInfo(BaseModel):
    """How the scores were combined, and which components counted (and why the others did not)."""

    method: str
    profile: str = Field(description="'codes' when the query has classification codes, else 'nocodes'")
    depth: int | None = Field(None, description="candidate depth the weights were learned for")
    weights: dict[str, float] = Field(description="weights used, renormalised over the components that applied")
    source: str
    components: dict[str, str] = Field(description="component -> 'applied' or why it did not count")
    fallback: str | None = None


class SearchResponse(BaseModel):
    results: list[SearchHit]
    stages: list[StageInfo]
    took_ms: float
    query: QueryInfo
    fusion: FusionInfo
    ranked_by: RankedBy = Field(
        "fusion", description="fusion: the fused score's order; passage evidence: the first documents ordered by their "
        "best passage (their components' 'evidence' is its score; stages.evidence says how many); learned ranker: "
        "the first documents ordered by the ranker the index holds (their components' 'ranker' is its score, "
        "stages.evidence names its features); the results' score follows it")
    reordered: int = Field(0, description="how many of the first documents found ranked_by ordered (0: the fused "
                           "order throughout); the documents below them keep the fused order")
    ranking: str = Field("", description="what ordered the results, in an analyst's words (the UI's and the CLI's "
                         "ranking line; the explanation's ranking notice begins with it)")
    generation: int = Field(0, description="generation of the index that answered (0: as built)")
    partial: bool = Field(False, description="a sharded index: some shard did not answer; the results are the "
                          "other shards' (see missing_shards and the notices)")
    missing_shards: list[str] = Field(default_factory=list, description="the shards that did not answer")
    notices: list[str] = Field(default_factory=list, description="degradations, e.g. 'no models: BM25 only'")
    explained: list[Notice] = Field(default_factory=list, description="the notices in an analyst's words")
    families: FamiliesInfo | None = None


class PassageMatch(BaseModel):
    """A highlighted word of a passage: where it is, the index term it matched, and the query words it renders."""

    start: int
    end: int
    term: str = Field(description="the index term of the passage word that matched (a stem)")
    query_words: list[str] = Field(description="the query's words (as written) this term renders: the word itself "
                                   "in the query's language, its source words through a translation table")
    translated: bool = Field(description="matched through a translation table (the passage is in another language)")


class PassageHit(BaseModel):
    doc_id: str
    passage_id: str
    section_path: list[str]
    text: str
    score: float
    components: dict[str, float]
    highlights: list[tuple[int, int]]
    title: str | None = None
    lang: str | None = None
    field: Literal["ti", "ab", "cl", "desc"] | None = Field(
        None, description="the field the passage and each of its highlights are in, as the query language names it: "
        "ti (title), ab (abstract), cl (a claim), desc (the description, its headings included)")
    matches: list[PassageMatch] = Field(default_factory=list, description="the highlights with what each matched")


class PassageResponse(BaseModel):
    results: list[PassageHit]
    stages: list[StageInfo]
    took_ms: float
    query: QueryInfo
    fusion: FusionInfo
    generation: int = Field(0, description="generation of the index that answered (0: as built)")
    partial: bool = Field(False, description="a sharded index: some shard did not answer; the results are the "
                          "other shards' (see missing_shards and the notices)")
    missing_shards: list[str] = Field(default_factory=list, description="the shards that did not answer")
    notices: list[str] = Field(default_factory=list)
    explained: list[Notice] = Field(default_factory=list)


# ------------------------------------------------------------------------------------ claim charts, reports

CATEGORIES = {
    "X": "particularly relevant if taken alone",
    "Y": "particularly relevant if combined with another document of the same category",
    "A": "technological background",
}


class ClaimChartRequest(BaseModel):
    """A claim (en/de/fr; several numbered claims may be pasted, ``claim`` picks one) and the documents to chart."""

    model_config = ConfigDict(extra="forbid")

    claim_text: NonBlank = Field(..., min_length=1, description="claim text; '1. ... 2. The device of claim 1, ...'")
    claim: int | None = Field(None, ge=1, le=500, strict=True,
                              description="which numbered claim to chart (default: the first)")
    lang: Lang = "auto"
    documents: list[str] = Field(default_factory=list, max_length=20,
                                 description="publication ids to chart; empty: the top k of `query`, else of a search "
                                 "with the claim")
    query: str | None = Field(None, max_length=20_000, description="a query in the query language (docs/"
                              "QUERY_LANGUAGE.md) whose top k documents are charted when none are given: "
                              "'cl=(seal* NEAR/3 housing) AND pd<2001'")
    k: int = Field(5, ge=1, le=20, strict=True, description="documents charted when none are given")
    codes: QueryCodes = Field(default_factory=list, max_length=50)
    code_filter: CodeFilter = "none"
    before: date | None = None
    feedback: FeedbackRequest | None = None


class ClaimElementOut(BaseModel):
    label: str = Field(description="'1.0' the preamble of claim 1, '1.2' its second feature, '3.1' claim 3's own")
    kind: Literal["preamble", "feature"]
    claim: int
    text: str


class ChartCell(BaseModel):
    """The best passage of one document for one element."""

    element: str
    doc_id: str
    passage_id: str | None = None
    section_path: list[str] = Field(default_factory=list)
    text: str | None = None
    score: float = Field(0.0, description="the passage's score for the element among every passage of the charted "
                         "documents (QSF at the /passages defaults, min-max over them): 1 the best passage of the "
                         "charted documents for this element, 0 one that holds none of its words; compares the cells "
                         "of one element")
    highlights: list[tuple[int, int]] = Field(default_factory=list)
    lang: str | None = None
    matches: list[PassageMatch] = Field(default_factory=list, description="the highlights with what each matched")
    overlap: float = Field(0.0, description="share of the element's words found in the passage (or its translation)")
    status: Literal["disclosed", "partly", "not found"] = "not found"


class ChartDocument(BaseModel):
    id: str
    title: str | None = None
    publication_date: date | None = None
    disclosed: int = Field(0, description="elements this document discloses (status 'disclosed')")
    category: Literal["X", "Y", "A"] = Field("A", description="suggested search-report category")


class ClaimChartResponse(BaseModel):
    claim: int
    lang: str
    elements: list[ClaimElementOut]
    documents: list[ChartDocument]
    cells: list[ChartCell] = Field(description="one per element and document, element-major")
    not_disclosed: list[str] = Field(description="labels of the elements no charted document discloses")
    coverage: str = Field(description="a one-line summary")
    documents_from: str = Field(description="'request', 'query' (the request's query in the query language) or "
                                "'search' (a search with the claim)")
    notes: list[str] = Field(default_factory=list)
    took_ms: float = 0.0


class ReportDocument(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    category: Literal["X", "Y", "A"] = "A"
    claims: str = Field("", max_length=200, description="claims concerned, e.g. '1-3, 5'")
    note: str = Field("", max_length=2000)


class ReportRequest(BaseModel):
    """A search session to report: its queries, the documents marked (category, claims), the claim chart."""

    model_config = ConfigDict(extra="forbid")

    title: str = Field("Search report", max_length=300)
    queries: list[SearchRequest] = Field(default_factory=list, max_length=50)
    documents: list[ReportDocument] = Field(default_factory=list, max_length=100)
    claim_chart: ClaimChartResponse | None = None
    passages: int = Field(2, ge=0, le=5, strict=True, description="relevant passages listed per document")
    format: Literal["json", "csv", "html"] = "json"


class ReportEntry(BaseModel):
    id: str
    title: str | None = None
    publication_date: date | None = None
    category: Literal["X", "Y", "A"]
    claims: str
    note: str = ""
    passages: list[PassageHit] = Field(default_factory=list)


class ReportResponse(BaseModel):
    title: str
    created: str
    queries: list[dict[str, Any]]
    entries: list[ReportEntry]
    claim_chart: ClaimChartResponse | None = None
    categories: dict[str, str] = Field(default_factory=lambda: dict(CATEGORIES))

