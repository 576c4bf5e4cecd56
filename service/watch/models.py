"""Bodies of the watch routes and commands: a watch is a saved search (:class:`WatchRequest`), evaluated on each new
generation; a hit is a new document in its top k, with the generation that brought it and its best passage."""

from __future__ import annotations

from datetime import date

from pydantic import AnyHttpUrl, BaseModel, ConfigDict, Field, field_validator

from service.schema import CodeFilter, Lang, NonBlank, PassageHit, QueryCodes, SearchRequest, Syntax

WATCH_MAX_K = 100
"""Largest top k a watch may follow (each evaluation ranks the new documents against it)."""
NAME_CHARS = 200


def now() -> str:
    """Now, as the watches' records write times (UTC, ISO 8601, seconds)."""
    from datetime import UTC, datetime

    return datetime.now(UTC).isoformat(timespec="seconds")


SECRET_SHOWN = "********"
"""What a webhook's secret reads as in every response (it is stored, never shown)."""


class Webhook(BaseModel):
    """Where a watch's new hits are pushed (service/watch/webhooks.py): a POST of JSON to ``url`` after each evaluation
    that finds hits, signed with ``secret`` (header ``X-Priorart-Signature: sha256=<HMAC-SHA256 of the body>``),
    delivered at least once (retried with backoff; each hit has an ``id`` to deduplicate by)."""

    model_config = ConfigDict(extra="forbid")

    url: AnyHttpUrl = Field(..., description="http(s) URL the hits are POSTed to")
    secret: str = Field(..., min_length=16, max_length=200,
                        description="key of the body's HMAC-SHA256 signature (X-Priorart-Signature); shown as "
                                    f"{SECRET_SHOWN!r} afterwards")


class WatchRequest(BaseModel):
    """A saved search: what ``POST /search`` takes that decides a ranking, a top k and a name."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(None, max_length=NAME_CHARS, description="what to call it (default: the query's start)")
    query: NonBlank = Field(..., min_length=1, description="claims, title+abstract text, a publication number, or a "
                            "query in the query language (docs/QUERY_LANGUAGE.md)")
    syntax: Syntax = Field("auto", description="as /search's: auto, query (the query language), text (free text)")
    drop_translations: list[str] = Field(default_factory=list, max_length=100,
                                         description="query language: translations to leave out, by word")
    lang: Lang = Field("auto", description="query language; auto detects en/de/fr")
    codes: QueryCodes = Field(default_factory=list, max_length=50, description="IPC/CPC codes of the query")
    code_filter: CodeFilter = Field(
        "none", description="keep only documents sharing a code with `codes` at this level")
    before: date | None = Field(None, description="keep only documents published before this date")
    k: int = Field(10, ge=1, le=WATCH_MAX_K, strict=True,
                   description=f"a new document is a hit when it ranks in this top k of the whole index (at most "
                               f"{WATCH_MAX_K})")
    translate: bool = Field(True, description="translate the query into the other indexed languages (PSQ)")
    webhook: Webhook | None = Field(None, description="push each evaluation's new hits to a URL (at least once, "
                                    "signed); the Atom feed and GET .../hits stay")

    @field_validator("name")
    @classmethod
    def _name(cls, v: str | None) -> str | None:
        return v.strip() or None if v is not None else None

    def search_request(self) -> SearchRequest:
        """The search the watch runs: documents, not families (``collapse_families`` off), unexplained; a publication
        number's priority date is no cut-off (a watch looks for what is published later)."""
        return SearchRequest(query=self.query, syntax=self.syntax, drop_translations=self.drop_translations,
                             lang=self.lang, codes=self.codes, code_filter=self.code_filter, before=self.before,
                             k=self.k, translate=self.translate, collapse_families=False, priority_cutoff=False)

    def shown(self) -> WatchRequest:
        """The request as responses show it: the webhook's secret masked."""
        if self.webhook is None:
            return self
        return self.model_copy(update={"webhook": self.webhook.model_copy(update={"secret": SECRET_SHOWN})})

    def title(self) -> str:
        """Its name, else the first words of the query."""
        if self.name:
            return self.name
        words = " ".join(self.query.split())
        return words if len(words) <= 60 else words[:59].rsplit(" ", 1)[0] + "…"


class Watch(BaseModel):
    """A watch as stored, with where its evaluation stands."""

    id: str
    name: str
    request: WatchRequest
    created: str = Field(..., description="when it was saved (UTC, ISO 8601)")
    created_generation: int = Field(..., description="the index generation it was saved at: the documents of that "
                                    "generation and before are never hits")
    evaluated_generation: int = Field(..., description="the newest generation it has been evaluated against")
    hits: int = Field(0, description="hits so far (documents deleted since left out)")
    last_hit_generation: int | None = Field(None, description="the newest generation that brought a hit")
    error: str | None = Field(None, description="why its last evaluation failed (its query cannot run any more)")


class WatchHit(BaseModel):
    """A new document that ranks in a watch's top k: the generation that brought it, where it ranked, its evidence."""

    doc_id: str
    title: str | None = None
    publication_date: date | None = None
    generation: int = Field(..., description="the generation whose evaluation found it")
    rank: int = Field(..., description="its rank in the watch's top k at that generation (1 = first)")
    score: float = Field(..., description="its score in that ranking")
    found_at: str = Field(..., description="when it was found (UTC, ISO 8601)")
    passage: PassageHit | None = Field(None, description="its best passage for the watch's query (the evidence)")


class Delivery(BaseModel):
    """One push of a watch's hits of one evaluation to its webhook, as the delivery log shows it."""

    id: str
    generation: int
    hits: int
    created: str = Field(..., description="when the evaluation queued it (UTC, ISO 8601)")
    attempts: int = Field(..., description="POSTs made so far")
    delivered: str | None = Field(None, description="when the receiver answered 2xx (None: not yet)")
    last_status: int | None = Field(None, description="the HTTP status of the last attempt (None: no answer)")
    last_error: str | None = Field(None, description="why the last attempt failed")
    next_attempt: str | None = Field(None, description="when it is tried again (None: delivered, or given up)")


class WatchHits(BaseModel):
    """``GET /watches/{id}/hits``: the hits of generations after ``since``, newest generation first."""

    watch: Watch
    since: int | None
    hits: list[WatchHit]
