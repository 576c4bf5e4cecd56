"""EPO Open Patent Services full text (``<fulltext-document xmlns="http://www.epo.org/fulltext">``) -> record.

What OPS returns for ``published-data/publication/docdb/{id}/fulltext`` (``fulltext-format="text-only"``):
the publication's docdb id (country, number, kind; WO and US numbers in docdb form: ``WO0100832A1`` is
WO 01/00832, ``US2004248206A1`` is US 2004/0248206; :func:`training.ingest.merge.publication_key` makes them
meet the other sources' spellings), and the description or the claims as paragraphs of plain text. Headings
are paragraphs too: they are recognised by shape (:func:`training.ingest.description.tree_from_blocks`), the
``[0001]`` paragraph numbers removed. No bibliographic data beyond the id: an OPS record is usually merged
with the same publication from a richer source (:mod:`training.ingest.merge`).
"""

from __future__ import annotations

from typing import Any

from service.corpus.record import Claim, PatentRecord
from training.ingest.claims import claims_from_elements
from training.ingest.description import tree_from_blocks
from training.ingest.ep import doc_type_of_kind
from training.ingest.errors import DocumentError
from training.ingest.xmltext import clean, local, parse_xml, text_of

ROOT = "fulltext-document"
SOURCE = "ops"


def _child(el: Any, name: str) -> Any | None:
    return next((c for c in el if local(c.tag) == name), None)


def _children(el: Any, name: str) -> list[Any]:
    return [c for c in el if local(c.tag) == name]


def ops_record(root: Any, source_name: str, warnings: list[str] | None = None) -> PatentRecord:
    """Build a record from a parsed OPS ``fulltext-document`` root."""
    if local(root.tag) != ROOT:
        raise DocumentError(f"not an OPS fulltext-document: root element <{local(root.tag)}>")
    doc = next((el for el in root.iter("{*}document-id")), None)
    if doc is None:
        raise DocumentError("no publication-reference/document-id")
    fields = {local(c.tag): clean(c.text) for c in doc if isinstance(c.tag, str)}
    country = fields.get("country", "").upper()
    number = fields.get("doc-number", "").replace(" ", "")
    kind = fields.get("kind", "").upper()
    if not number:
        raise DocumentError("no publication number (document-id/doc-number)")
    if not country or not kind:
        raise DocumentError(f"no country or kind code for {country}{number}")

    lang: str | None = None
    description: list[Any] = []
    desc = _child(root, "description")
    if desc is not None:
        lang = clean(desc.get("lang")).lower() or None
        description = tree_from_blocks((False, text_of(p)) for p in _children(desc, "p"))
    claims: dict[str, list[Claim]] = {}
    for el in _children(root, "claims"):
        c_lang = clean(el.get("lang")).lower() or lang
        parsed = claims_from_elements(_children(el, "claim"), lang=c_lang)
        if c_lang and parsed and c_lang not in claims:
            claims[c_lang] = parsed
    abstract: dict[str, str] = {}
    for el in _children(root, "abstract"):
        a_lang = clean(el.get("lang")).lower() or lang
        text = text_of(el)
        if a_lang and text and a_lang not in abstract:
            abstract[a_lang] = text

    return PatentRecord(
        id=f"{country}{number}{kind}",
        country=country,
        number=number,
        kind=kind,
        source=SOURCE,
        doc_type=("utility" if kind.startswith(("A", "B")) else None) if country == "US" else doc_type_of_kind(kind),
        lang=lang,
        abstract=abstract,
        claims=claims,
        description=description,
        warnings=list(warnings or []),
    )


def parse_ops(xml_bytes: bytes, source_name: str) -> PatentRecord:
    """Parse one OPS ``fulltext-document``. Raises :class:`DocumentError` when unusable."""
    root, warnings = parse_xml(xml_bytes)
    return ops_record(root, source_name, warnings)
