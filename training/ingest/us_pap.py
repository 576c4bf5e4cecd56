"""USPTO pre-grant application publications 2001-2004 (``patent-application-publication``, DTD v1.5/1.6)."""

from __future__ import annotations

from typing import Any

from service.corpus.record import PatentRecord
from training.ingest.biblio import add_names, parse_date
from training.ingest.claims import claims_from_elements
from training.ingest.codes import add_codes, normalise_ipc
from training.ingest.description import description_tree
from training.ingest.errors import DocumentError
from training.ingest.us_sgml import us_doc_type
from training.ingest.xmltext import DROP_TAGS, clean, local, text_of

# paragraph numbers (<number>12.</number>) are layout, not text
_DROP = DROP_TAGS | {"number"}
_HANDLED = {"subdoc-bibliographic-information", "subdoc-abstract", "subdoc-description", "subdoc-claims",
            "subdoc-drawings", "subdoc-cross-reference", "subdoc-sequence-listing"}


def _name(el: Any) -> str:
    """'family-name, given-name middle-name' from a ``<name>`` element (or organisation name)."""
    if el is None:
        return ""
    org = clean(el.findtext(".//organization-name"))
    if org:
        return org
    family = clean(el.findtext(".//family-name"))
    given = " ".join(p for p in (clean(el.findtext(".//given-name")), clean(el.findtext(".//middle-name"))) if p)
    return ", ".join(p for p in (family, given) if p)


def pap_record(root: Any, source_name: str, warnings: list[str] | None = None) -> PatentRecord:
    """Build a record from a parsed ``patent-application-publication`` root."""
    warnings = list(warnings or [])
    bib = root.find("subdoc-bibliographic-information")
    if bib is None:
        raise DocumentError("<patent-application-publication> without bibliographic information")
    doc = bib.find("document-id")
    number = clean(doc.findtext("doc-number")) if doc is not None else ""
    kind = clean(doc.findtext("kind-code")) if doc is not None else ""
    if not number:
        raise DocumentError("no publication number (document-id/doc-number)")
    if not kind:
        raise DocumentError(f"no kind code for US{number}")

    prio_dates = []
    prio_ids: list[str] = []
    for fp in bib.iterfind(".//foreign-priority-data"):
        d = parse_date(fp.findtext(".//filing-date"))
        if d and d not in prio_dates:
            prio_dates.append(d)
        pnum = clean(fp.findtext(".//doc-number")).replace(" ", "")
        if pnum:
            pid = clean(fp.findtext(".//country-code")) + pnum
            if pid not in prio_ids:
                prio_ids.append(pid)

    ipc: list[str] = []
    add_codes(ipc, (normalise_ipc(el.text or "") for el in bib.iterfind(".//classification-ipc//ipc")))

    inventors: list[str] = []
    add_names(inventors, (_name(el.find("name")) for el in bib.iterfind("inventors/*")))
    applicants: list[str] = []
    add_names(applicants, (_name(el) for el in bib.iterfind(".//assignee")))

    abstract_el = root.find("subdoc-abstract")
    abstract = ""
    if abstract_el is not None:
        abstract = "\n".join(t for p in abstract_el.iter("paragraph") if (t := text_of(p, _DROP)))
    claims_el = root.find("subdoc-claims")
    claims = (
        claims_from_elements(
            claims_el.iterfind("claim"), ref_tags=("dependent-claim-reference", "claim-reference"),
            drop=_DROP, num_attrs=("id",),
        )
        if claims_el is not None
        else []
    )
    unhandled = sorted({local(c.tag) for c in root if isinstance(c.tag, str)} - _HANDLED)
    if unhandled:
        warnings.append("application parts not extracted: " + ", ".join(unhandled))
    if claims_el is not None and not claims:
        warnings.append("claims present but none could be extracted")
    title = text_of(bib.find(".//title-of-invention"))

    return PatentRecord(
        id=f"US{number}{kind}",
        country="US",
        number=number,
        kind=kind,
        source="us-pap",
        doc_type=us_doc_type(number, kind) if not kind.startswith("A") else "utility",
        publication_date=parse_date(doc.findtext("document-date") if doc is not None else None),
        application_date=parse_date(bib.findtext("domestic-filing-data/filing-date")),
        priority_dates=prio_dates,
        lang="en",
        title={"en": title} if title else {},
        abstract={"en": abstract} if abstract else {},
        claims={"en": claims} if claims else {},
        description=description_tree(root.find("subdoc-description"), drop=_DROP),
        ipc=ipc,
        priority_ids=prio_ids,
        applicants=applicants,
        inventors=inventors,
        warnings=warnings,
    )
