"""USPTO XML -> :class:`PatentRecord`.

:func:`parse_us` dispatches on the root element to the reader of each generation:

* ``us-patent-grant`` / ``us-patent-application`` (DTD v4.0 2004-12 to v4.5+, weekly ``ipg``/``ipa`` files,
  2005 onwards): this module;
* ``PATDOC`` (grant DTD 2.4/2.5, 2001-2004, SGML-like ``<B110>`` tags): :mod:`training.ingest.us_sgml`;
* ``patent-application-publication`` (application DTD 1.x, 2001-2004): :mod:`training.ingest.us_pap`.

``sequence-cwu`` documents (sequence listings interleaved in weekly files) are no patents:
:func:`parse_us` raises :class:`NotAPatent` for them.
"""

from __future__ import annotations

from typing import Any

from service.corpus.record import Citation, PatentRecord
from training.ingest.biblio import add_names, document_id, parse_date, person_name
from training.ingest.claims import claims_from_elements
from training.ingest.codes import add_codes, normalise_ipc
from training.ingest.description import description_tree
from training.ingest.errors import DocumentError
from training.ingest.xmltext import clean, local, parse_xml, text_of

V4_ROOTS = ("us-patent-grant", "us-patent-application")
NON_PATENT_ROOTS = ("sequence-cwu",)


class NotAPatent(DocumentError):
    """A well-formed document that is no patent publication (e.g. a sequence listing); ignored, not an error."""


def _ipcr_code(el: Any) -> str | None:
    """Code from the structured ``classification-ipcr`` / ``classification-cpc`` element."""
    parts = [clean(el.findtext(t)) for t in ("section", "class", "subclass", "main-group", "subgroup")]
    if all(parts):
        return normalise_ipc(f"{parts[0]}{parts[1]}{parts[2]} {parts[3]}/{parts[4]}")
    text = el.findtext("text")
    return normalise_ipc(text) if text else None


def _v4_classifications(bib: Any) -> tuple[list[str], list[str]]:
    ipc: list[str] = []
    cpc: list[str] = []
    add_codes(ipc, (_ipcr_code(el) for el in bib.iterfind("classifications-ipcr/classification-ipcr")))
    for el in bib.iterfind("classification-ipc"):  # IPC 7 (2005 grants): fixed-width text, no slash
        for tag in ("main-classification", "further-classification"):
            add_codes(ipc, (normalise_ipc(t.text or "") for t in el.iterfind(tag)))
    add_codes(cpc, (_ipcr_code(el) for el in bib.iterfind("classifications-cpc//classification-cpc")))
    return ipc, cpc


def _category(raw: str | None) -> str | None:
    text = clean(raw).lower()
    if not text:
        return None
    if "examiner" in text:
        return "examiner"
    if "applicant" in text:
        return "applicant"
    if "third" in text:
        return "third-party"
    if "other" in text:
        return "other"
    return text


def _v4_citations(bib: Any) -> list[Citation]:
    out: list[Citation] = []
    for refs in (bib.find("references-cited"), bib.find("us-references-cited")):
        if refs is None:
            continue
        for cit in refs:
            if local(cit.tag) not in ("citation", "us-citation"):
                continue
            category = _category(cit.findtext("category"))
            pat = cit.find("patcit")
            if pat is not None:
                text = text_of(pat.find("document-id")) or text_of(pat)
                out.append(Citation(text=text, id=document_id(pat), category=category))
                continue
            npl = cit.find("nplcit")
            text = text_of(npl if npl is not None else cit)
            if text:
                out.append(Citation(text=text, id=None, category=category))
    return out


def _v4_parties(bib: Any) -> tuple[list[str], list[str]]:
    """(applicants incl. assignees, inventors) for both the v4.0-4.2 and the v4.3+ party layouts."""
    applicants: list[str] = []
    inventors: list[str] = []
    app_inventors: list[str] = []
    add_names(applicants, (person_name(a.find("addressbook")) for a in bib.iterfind("assignees/assignee")))
    parties = [*bib.iterfind("parties/applicants/applicant"), *bib.iterfind("us-parties/us-applicants/us-applicant")]
    for app in parties:
        name = person_name(app.find("addressbook"))
        if app.get("app-type") == "applicant-inventor":
            app_inventors.append(name)
        else:
            add_names(applicants, [name])
    add_names(inventors, app_inventors)
    for inv in [*bib.iterfind("parties/inventors/inventor"), *bib.iterfind("us-parties/inventors/inventor")]:
        add_names(inventors, [person_name(inv.find("addressbook"))])
    if not applicants:
        add_names(applicants, app_inventors)
    return applicants, inventors


def _v4_record(root: Any, source_name: str, warnings: list[str]) -> PatentRecord:
    root_name = local(root.tag)
    bib = root.find("us-bibliographic-data-grant")
    if bib is None:
        bib = root.find("us-bibliographic-data-application")
    if bib is None:
        raise DocumentError(f"<{root_name}> without bibliographic data")
    pub = bib.find("publication-reference/document-id")
    if pub is None:
        raise DocumentError("no publication-reference")
    country = clean(pub.findtext("country")) or clean(root.get("country")) or "US"
    number = clean(pub.findtext("doc-number"))
    kind = clean(pub.findtext("kind"))
    if not number:
        raise DocumentError("no publication number (publication-reference/doc-number)")
    if not kind:
        raise DocumentError(f"no kind code for {country}{number}")
    app = bib.find("application-reference")
    doc_type = app.get("appl-type") if app is not None else None
    if doc_type == "reissue" or kind.startswith("E"):
        doc_type = "reissue"
    elif doc_type == "sir" or kind.startswith("H"):
        doc_type = "sir"
    app_date = parse_date(app.findtext("document-id/date")) if app is not None else None

    prio_dates = []
    prio_ids: list[str] = []
    for pc in bib.iterfind("priority-claims/priority-claim"):
        d = parse_date(pc.findtext("date"))
        if d and d not in prio_dates:
            prio_dates.append(d)
        pid = f"{clean(pc.findtext('country'))}{clean(pc.findtext('doc-number')).replace(' ', '')}"
        if len(pid) > 2 and pid not in prio_ids:
            prio_ids.append(pid)

    lang = (clean(root.get("lang")) or "en").lower()
    title = text_of(bib.find("invention-title"))
    abstract_el = root.find("abstract")
    abstract = ""
    if abstract_el is not None:
        paras = [text_of(p) for p in abstract_el.iterfind(".//p")] or [text_of(abstract_el)]
        abstract = "\n".join(p for p in paras if p)
    claims_el = root.find("claims")
    claims = claims_from_elements(claims_el.iterfind("claim")) if claims_el is not None else []
    ipc, cpc = _v4_classifications(bib)
    applicants, inventors = _v4_parties(bib)
    source = "us-ipg" if root_name == "us-patent-grant" else "us-ipa"
    return PatentRecord(
        id=f"{country}{number}{kind}",
        country=country,
        number=number,
        kind=kind,
        source=source,
        doc_type=doc_type,
        publication_date=parse_date(pub.findtext("date")) or parse_date(root.get("date-publ")),
        application_date=app_date,
        priority_dates=prio_dates,
        lang=lang,
        title={lang: title} if title else {},
        abstract={lang: abstract} if abstract else {},
        claims={lang: claims} if claims else {},
        description=description_tree(root.find("description")),
        ipc=ipc,
        cpc=cpc,
        citations=_v4_citations(bib),
        priority_ids=prio_ids,
        applicants=applicants,
        inventors=inventors,
        warnings=warnings,
    )


def us_record(root: Any, source_name: str, warnings: list[str] | None = None) -> PatentRecord:
    """Build a record from a parsed USPTO root element of any supported generation."""
    warnings = list(warnings or [])
    name = local(root.tag)
    if name in V4_ROOTS:
        return _v4_record(root, source_name, warnings)
    if name == "PATDOC":
        from training.ingest.us_sgml import patdoc_record

        return patdoc_record(root, source_name, warnings)
    if name == "patent-application-publication":
        from training.ingest.us_pap import pap_record

        return pap_record(root, source_name, warnings)
    if name in NON_PATENT_ROOTS:
        raise NotAPatent(f"<{name}> is not a patent publication")
    raise DocumentError(f"not a USPTO patent document: root element <{name}>")


def parse_us(xml_bytes: bytes, source_name: str) -> PatentRecord:
    """Parse one USPTO XML document (any generation). Raises :class:`DocumentError` when unusable."""
    root, warnings = parse_xml(xml_bytes)
    return us_record(root, source_name, warnings)
