"""Request and response bodies of priorart: what the engine takes and returns, and the REST API serves.

They live outside the API layer so that :class:`service.engine.Engine` takes typed requests and
returns typed responses without importing FastAPI; the routes in service/api/ use the same classes.
"""

from __future__ import annotations

from datetime import date
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from service.codes import normalise_codes

Lang = Literal["auto", "en", "de", "fr"]
Variant = Literal["qsf_v", "qsf_v_title", "qsf_section", "qsf_section_propagate", "qsf_passage_propagate"]
COMPONENT_NAMES = ("bm25", "dense", "text", "meta", "joint", "wordpair", "domain")  # service.fusion.COMPONENTS


class SearchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(..., min_length=1, description="claims, title+abstract text, or a publication number")
    lang: Lang = Field("auto", description="query language; auto detects en/de/fr")
    codes: list[str] = Field(default_factory=list, max_length=50, description="IPC/CPC codes of the query")
    code_filter: Literal["none", "section", "class", "subclass", "main_group", "subgroup"] = Field(
        "none", description="keep only documents sharing a code with `codes` at this level"
    )
    before: date | None = Field(None, description="keep only documents published before this date")
    k: int = Field(10, ge=1, description="results to return")
    depth: int | None = Field(None, ge=1, description="first-stage candidates (default from settings)")
    weights: dict[str, float] | None = Field(
        None, description="fusion weight override, e.g. {'bm25': 1}; components that do not apply to the query "
        "are left out and the rest renormalised")
    fusion: Literal["linear", "borda", "linlearn"] | None = Field(
        None, description="score combination: linear (learned weights), borda, linlearn; default: the index's"
    )
    explain: bool = Field(False, description="include matched terms and stage details")
    translate: bool = Field(True, description="translate the query into the other indexed languages (PSQ)")

    @field_validator("query")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("query is blank")
        return v

    @field_validator("codes")
    @classmethod
    def _codes(cls, codes: list[str]) -> list[str]:
        return normalise_codes(codes)  # subclass or finer, duplicates removed (service.codes)

    @field_validator("weights")
    @classmethod
    def _weights(cls, w: dict[str, float] | None) -> dict[str, float] | None:
        if w is None:
            return None
        allowed = set(COMPONENT_NAMES)
        bad = sorted(set(w) - allowed)
        if bad:
            raise ValueError(f"unknown score names {bad}; valid: {sorted(allowed)}")
        if any(not (v == v) or v < 0 or v > 1e6 for v in w.values()):  # NaN, negative or absurd
            raise ValueError("weights must be finite numbers >= 0")
        if not any(v > 0 for v in w.values()):
            raise ValueError("at least one weight must be > 0")
        return w


class PassageRequest(SearchRequest):
    variant: Variant = "qsf_passage_propagate"
    alpha: float | None = Field(None, ge=0, le=1)
    beta: float | None = Field(None, ge=0, le=1)
    sigma: float | None = Field(None, gt=0, le=100)


class SearchHit(BaseModel):
    id: str
    title: str | None
    score: float
    components: dict[str, float | None] = Field(
        description="min-max normalised score of each component over the candidates (null: not computed), and 'fused'")
    matched_terms: list[str] = Field(default_factory=list)
    route: str | None = Field(
        None,
        description="first-stage route that reached the document: its own language ('en'), or translated by PSQ "
        "into the document's language ('de:psq'; the tables are in query.route_tables)",
    )
    codes: list[str] = Field(default_factory=list)
    publication_date: date | None = None


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
        default_factory=dict, description="table of each translated route, e.g. {'fr:psq': 'de-fr via en'}"
    )
    terms: list[str] = Field(default_factory=list)
    terms_before_reduction: int = 0
    filters: dict[str, Any] = Field(default_factory=dict)


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
    generation: int = Field(0, description="generation of the index that answered (0: as built)")
    notices: list[str] = Field(default_factory=list, description="degradations, e.g. 'no models: BM25 only'")


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


class PassageResponse(BaseModel):
    results: list[PassageHit]
    stages: list[StageInfo]
    took_ms: float
    query: QueryInfo
    fusion: FusionInfo
    generation: int = Field(0, description="generation of the index that answered (0: as built)")
    notices: list[str] = Field(default_factory=list)
