"""One corpus record per patent publication (one JSON line in ``corpus.jsonl``).

The schema is the contract between ingestion, synthetic data, training and the service.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date

from pydantic import BaseModel, ConfigDict, Field, field_validator

from service.codes import normalise_codes
from service.text.analysis import SUPPORTED_LANGS


class Claim(BaseModel):
    """A numbered claim; ``refs`` are the numbers of the claims it refers to (empty: independent)."""

    model_config = ConfigDict(extra="forbid")

    num: int
    text: str
    refs: list[int] = Field(default_factory=list)


class Section(BaseModel):
    """A node of the description tree: an optional heading, its paragraphs, nested sections."""

    model_config = ConfigDict(extra="forbid")

    heading: str | None = None
    paragraphs: list[str] = Field(default_factory=list)
    sections: list[Section] = Field(default_factory=list)

    def walk(self, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Section]]:
        """Yield ``(heading path, section)`` for this node and every descendant, depth first."""
        here = (*path, self.heading) if self.heading else path
        yield here, self
        for child in self.sections:
            yield from child.walk(here)


class Citation(BaseModel):
    """A cited document. ``id`` is country+number(+kind) when it could be parsed, else ``None``."""

    model_config = ConfigDict(extra="forbid")

    text: str
    id: str | None = None
    category: str | None = None  # e.g. 'X', 'Y', 'A' in EP search reports; 'examiner'/'applicant' in US


class PatentRecord(BaseModel):
    """A normalised patent publication."""

    model_config = ConfigDict(extra="forbid")

    id: str  # country + number + kind exactly as published: EP0640886B1, US07861316B2
    country: str
    number: str
    kind: str
    source: str  # reader that produced it: ep, us-ipg, us-pap, us-sgml, jsonl, synth
    doc_type: str | None = None  # utility, design, plant, reissue, ...
    publication_date: date | None = None
    application_date: date | None = None
    priority_dates: list[date] = Field(default_factory=list)
    lang: str | None = None  # language of the proceedings / of the description
    title: dict[str, str] = Field(default_factory=dict)
    abstract: dict[str, str] = Field(default_factory=dict)
    claims: dict[str, list[Claim]] = Field(default_factory=dict)
    description: list[Section] = Field(default_factory=list)
    ipc: list[str] = Field(default_factory=list)
    cpc: list[str] = Field(default_factory=list)
    ecla: list[str] = Field(default_factory=list)  # ECLA/ICO symbols as published (MAREC); their CPC part is in cpc
    citations: list[Citation] = Field(default_factory=list)
    family_id: str | None = None
    priority_ids: list[str] = Field(default_factory=list)
    applicants: list[str] = Field(default_factory=list)
    inventors: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)  # what the reader could not extract
    # a publication read from several sources (training/ingest/merge.py): field (``claims.de``, ``ipc``) -> the
    # reader(s) its value came from (``marec``, ``ep+marec``); empty for a record read from one source
    provenance: dict[str, str] = Field(default_factory=dict)

    @field_validator("ipc", "cpc")
    @classmethod
    def _codes_normalised(cls, codes: list[str]) -> list[str]:
        return normalise_codes(codes)  # subclass or finer, duplicates removed (service.codes)

    @property
    def languages(self) -> list[str]:
        """Languages in which the record has any title, abstract, claims or description text."""
        langs = set(self.title) | set(self.abstract) | {k for k, v in self.claims.items() if v}
        if self.description and self.lang:
            langs.add(self.lang)
        return sorted(langs, key=lambda x: (SUPPORTED_LANGS.index(x) if x in SUPPORTED_LANGS else len(SUPPORTED_LANGS),
                                            x))

    def description_text(self) -> str:
        """All description paragraphs (headings included) as one string."""
        parts: list[str] = []
        for section in self.description:
            for _, node in section.walk():
                if node.heading:
                    parts.append(node.heading)
                parts.extend(node.paragraphs)
        return "\n".join(parts)

    def claims_text(self, lang: str) -> str:
        return "\n".join(c.text for c in self.claims.get(lang, []))

    def text(self, lang: str, fields: tuple[str, ...] = ("title", "abstract", "claims", "description")) -> str:
        """Concatenated text of the chosen fields in one language (description only in ``self.lang``)."""
        parts: list[str] = []
        for f in fields:
            if f == "title" and lang in self.title:
                parts.append(self.title[lang])
            elif f == "abstract" and lang in self.abstract:
                parts.append(self.abstract[lang])
            elif f == "claims":
                parts.append(self.claims_text(lang))
            elif f == "description" and lang == (self.lang or "en"):
                parts.append(self.description_text())
        return "\n".join(p for p in parts if p)


def family_key(record: PatentRecord) -> str:
    """Family id when known, else country + number (kind dropped): the unit kept together by the train/dev/test
    split (training/models/pairs.py) and by the shards of a sharded index (one family, one shard)."""
    return f"family:{record.family_id}" if record.family_id else f"{record.country}{record.number}"
