"""A record's passage tree, in every language at once (what the build-time passage index stores).

Document model (the passage paper's: sections with titles, passages as leaves)::

    root (title = the document title, per language)
    +-- "Abstract"     -> one passage: the abstract                 id  DOC/abstract
    +-- "Description"  -> headed sections (nested as in the record) -> paragraphs
    |                                                               id  DOC/d/3.2/p4
    +-- "Claims"       -> one passage per claim                     id  DOC/claims/1

Passage ids (they appear in the API and in passage qrels, keep them stable):

- ``DOC/d/I.J.../pK``: the K-th paragraph (1-based, counted in ``Section.paragraphs`` including blank
  ones, which are skipped but keep their number) of the record's description section reached by
  taking section ``I`` of ``record.description`` (1-based), then its ``J``-th nested section, ...
  The id depends only on the record's description tree, not on the query language.
- ``DOC/claims/N``: claim number ``N``, the same id in every language (EP claims are aligned claim by
  claim). A repeated claim number gets ``DOC/claims/N_P`` with ``P`` its 1-based position in the list.
- ``DOC/abstract``: the abstract.

Description sections without a heading are not tree nodes: their paragraphs and subsections hang from
the nearest headed ancestor (or from "Description"). "Abstract", "Description" and "Claims" are
structural labels: they appear in ``section_path`` but are not title text.

Languages. The tree a query sees depends on its language ``L``: the abstract and the claims are taken
in ``L`` when the record has them, else English, else the first of en, de, fr that it has; the
description is in the record's language (``record.lang``, English when unset; a description in a language
the index does not serve, such as a Spanish WO publication's, is left out, not indexed as English). The
*sections* do not depend on ``L`` (an "Abstract" or "Claims" section exists when the record has an
abstract or claims in any language), only the passages under "Abstract" and "Claims" do. So the
index stores one :class:`DocumentLayout` per record with every language's abstract and claims, and
the ranker picks per query (:func:`pick_lang`).

Units. Everything with text is a *unit*: the document title per language, section headings, and
passages (abstract, description paragraphs, claims). Units of a document are ordered titles,
headings, abstracts, paragraphs, claims; passages therefore come in tree order (abstract,
description, claims), which is the ranker's tie order.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from service.corpus.record import PatentRecord, Section
from service.text.analysis import SUPPORTED_LANGS

ABSTRACT_LABEL, DESCRIPTION_LABEL, CLAIMS_LABEL = "Abstract", "Description", "Claims"

# language codes (the order of SUPPORTED_LANGS); NO_LANG marks "none"
LANG_CODE = {lang: i for i, lang in enumerate(SUPPORTED_LANGS)}
NO_LANG = len(SUPPORTED_LANGS)

# unit kinds; passages are the kinds >= KIND_ABSTRACT
KIND_TITLE, KIND_HEADING, KIND_ABSTRACT, KIND_DESCRIPTION, KIND_CLAIM = range(5)
KIND_NAMES = ("title", "heading", "abstract", "description", "claim")
KIND_FIELDS = ("ti", "desc", "ab", "desc", "cl")
"""The query language's field of each unit kind (:data:`service.querylang.syntax.TEXT_FIELDS`; a heading is the
description's)."""
# section kinds
SEC_ROOT, SEC_ABSTRACT, SEC_DESCRIPTION, SEC_CLAIMS, SEC_HEADING = range(5)
SECTION_LABELS = (None, ABSTRACT_LABEL, DESCRIPTION_LABEL, CLAIMS_LABEL, None)  # headings: their text


def lang_mask(langs: object) -> int:
    """Bit mask (bit ``LANG_CODE[lang]``) of the supported languages among ``langs``."""
    mask = 0
    for lang in langs:  # type: ignore[attr-defined]
        code = LANG_CODE.get(lang)
        if code is not None:
            mask |= 1 << code
    return mask


def pick_lang(mask: int, lang: int) -> int:
    """The language code a query in ``lang`` reads from a field available in ``mask`` (``NO_LANG``: none).

    ``lang`` itself when available, else English, else the first available in en, de, fr order.
    """
    if mask & (1 << lang):
        return lang
    for code in range(NO_LANG):
        if mask & (1 << code):
            return code
    return NO_LANG


def description_passage_ids(record: PatentRecord) -> Iterator[tuple[str, tuple[str, ...], str]]:
    """``(passage id, heading path, text)`` of every non-blank description paragraph, in document order."""

    def visit(sec: Section, idx: tuple[int, ...], path: tuple[str, ...]) -> Iterator[tuple[str, tuple[str, ...], str]]:
        here = (*path, sec.heading) if sec.heading else path
        key = ".".join(str(i) for i in idx)
        for k, para in enumerate(sec.paragraphs, 1):
            if para.strip():
                yield f"{record.id}/d/{key}/p{k}", here, para
        for j, child in enumerate(sec.sections, 1):
            yield from visit(child, (*idx, j), here)

    for i, top in enumerate(record.description, 1):
        yield from visit(top, (i,), ())


def claim_passage_ids(record: PatentRecord, lang: str) -> list[tuple[str, str]]:
    """``(passage id, text)`` of the non-blank claims in ``lang`` (ids as in the module docstring)."""
    out: list[tuple[str, str]] = []
    seen: set[int] = set()
    for pos, claim in enumerate(record.claims.get(lang, []), 1):
        if not claim.text.strip():
            continue
        pid = f"{record.id}/claims/{claim.num}" if claim.num not in seen else f"{record.id}/claims/{claim.num}_{pos}"
        seen.add(claim.num)
        out.append((pid, claim.text))
    return out


@dataclass(frozen=True)
class Unit:
    """A text of a document: a title, a heading or a passage."""

    kind: int  # KIND_*
    lang: int  # LANG_CODE
    section: int  # passages: direct parent section; headings: their own section; titles: -1
    text: str
    pid: str = ""  # passages: the id without the "DOC/" prefix ("abstract", "d/3.2/p4", "claims/1")


@dataclass
class DocumentLayout:
    """One record's sections (pre-order) and units, for every language (see the module docstring)."""

    doc_id: str
    langs_mask: int  # the record's languages (PatentRecord.languages) among en, de, fr
    desc_lang: int
    abstract_mask: int  # languages with a non-blank abstract
    claims_mask: int  # languages with a non-empty claim list (blank claims included, as the tree does)
    sec_parent: list[int] = field(default_factory=list)  # -1 for the root
    sec_depth: list[int] = field(default_factory=list)
    sec_kind: list[int] = field(default_factory=list)
    sec_unit: list[int] = field(default_factory=list)  # heading unit of a headed section, else -1
    units: list[Unit] = field(default_factory=list)

    @property
    def sec_end(self) -> list[int]:
        """Pre-order subtree end of each section: its descendants are ``[s + 1, end)``."""
        end = [i + 1 for i in range(len(self.sec_parent))]
        for i in range(len(end) - 1, 0, -1):
            p = self.sec_parent[i]
            end[p] = max(end[p], end[i])
        return end


def layout(record: PatentRecord) -> DocumentLayout:
    """The passage tree of ``record`` in every language (sections and units)."""
    desc_lang = LANG_CODE[record.lang] if record.lang in LANG_CODE else LANG_CODE["en"]
    lay = DocumentLayout(
        doc_id=record.id,
        langs_mask=lang_mask(record.languages),
        desc_lang=desc_lang,
        abstract_mask=lang_mask(k for k, v in record.abstract.items() if v.strip()),
        claims_mask=lang_mask(k for k, v in record.claims.items() if v),
    )

    def section(parent: int, kind: int) -> int:
        lay.sec_parent.append(parent)
        lay.sec_depth.append(lay.sec_depth[parent] + 1 if parent >= 0 else 0)
        lay.sec_kind.append(kind)
        lay.sec_unit.append(-1)
        return len(lay.sec_parent) - 1

    titles = [Unit(KIND_TITLE, LANG_CODE[lang], -1, record.title[lang])
              for lang in SUPPORTED_LANGS if record.title.get(lang, "").strip()]
    headings: list[tuple[int, str]] = []  # (section, heading)
    abstracts: list[Unit] = []
    paragraphs: list[Unit] = []
    claims: list[Unit] = []

    section(-1, SEC_ROOT)
    if lay.abstract_mask:
        sec = section(0, SEC_ABSTRACT)
        abstracts = [Unit(KIND_ABSTRACT, LANG_CODE[lang], sec, record.abstract[lang], "abstract")
                     for lang in SUPPORTED_LANGS if lay.abstract_mask & (1 << LANG_CODE[lang])]
    if record.description and (record.lang is None or record.lang in LANG_CODE):
        dsec = section(0, SEC_DESCRIPTION)

        def visit(sec: Section, idx: tuple[int, ...], parent: int) -> None:
            node = parent
            if sec.heading:
                node = section(parent, SEC_HEADING)
                headings.append((node, sec.heading))
            key = ".".join(str(i) for i in idx)
            for k, para in enumerate(sec.paragraphs, 1):
                if para.strip():
                    paragraphs.append(Unit(KIND_DESCRIPTION, desc_lang, node, para, f"d/{key}/p{k}"))
            for j, child in enumerate(sec.sections, 1):
                visit(child, (*idx, j), node)

        for i, top in enumerate(record.description, 1):
            visit(top, (i,), dsec)
    if lay.claims_mask:
        csec = section(0, SEC_CLAIMS)
        prefix = len(record.id) + 1
        for lang in SUPPORTED_LANGS:
            if lay.claims_mask & (1 << LANG_CODE[lang]):
                claims += [Unit(KIND_CLAIM, LANG_CODE[lang], csec, text, pid[prefix:])
                           for pid, text in claim_passage_ids(record, lang)]

    lay.units = titles
    for sec, heading in headings:
        lay.sec_unit[sec] = len(lay.units)
        lay.units.append(Unit(KIND_HEADING, desc_lang, sec, heading))
    lay.units += abstracts + paragraphs + claims
    return lay


@dataclass(frozen=True)
class Passage:
    """One passage as a query in some language sees it."""

    doc_id: str
    passage_id: str
    section_path: tuple[str, ...]  # section labels/headings, outermost first (root excluded)
    text: str
    lang: str
    kind: str  # "abstract" | "description" | "claim"
    depth: int  # edges from the root


def document_passages(record: PatentRecord, lang: str) -> list[Passage]:
    """The passages of ``record`` for a query in ``lang``, in tree order (what the ranker scores)."""
    if lang not in LANG_CODE:
        raise ValueError(f"unsupported language {lang!r}; choose one of {', '.join(SUPPORTED_LANGS)}")
    lay = layout(record)
    code = LANG_CODE[lang]
    abs_lang, claim_lang = pick_lang(lay.abstract_mask, code), pick_lang(lay.claims_mask, code)
    heading = {lay.units[u].section: lay.units[u].text for u in lay.sec_unit if u >= 0}

    def path(sec: int) -> tuple[str, ...]:
        labels: list[str] = []
        while lay.sec_parent[sec] >= 0:
            kind = lay.sec_kind[sec]
            labels.append(heading[sec] if kind == SEC_HEADING else str(SECTION_LABELS[kind]))
            sec = lay.sec_parent[sec]
        return tuple(reversed(labels))

    out: list[Passage] = []
    for u in lay.units:
        if u.kind == KIND_DESCRIPTION or (u.kind == KIND_ABSTRACT and u.lang == abs_lang) or (
                u.kind == KIND_CLAIM and u.lang == claim_lang):
            out.append(Passage(record.id, f"{record.id}/{u.pid}", path(u.section), u.text, SUPPORTED_LANGS[u.lang],
                               KIND_NAMES[u.kind] if u.kind != KIND_DESCRIPTION else "description",
                               lay.sec_depth[u.section] + 1))
    return out
