"""EPO publication-server XML (``ep-patent-document``, DTD 1.0 to 1.5) -> :class:`PatentRecord`."""

from __future__ import annotations

import re
from typing import Any

from service.corpus.record import Citation, Claim, PatentRecord
from training.ingest.biblio import add_names, citation_id, document_id, parse_date
from training.ingest.claims import claims_from_elements
from training.ingest.codes import add_codes, normalise_ipc, split_ipc_list
from training.ingest.description import description_tree
from training.ingest.errors import DocumentError
from training.ingest.xmltext import clean, local, parse_xml, text_of

ROOT = "ep-patent-document"
_CO_RE = re.compile(r",?\s*\bc/o\b.*$", re.I | re.S)


def doc_type_of_kind(kind: str) -> str | None:
    """EP (and WO) kind code -> ``grant`` (B), ``search-report`` (A3, A4), ``application`` (other A), else None."""
    if kind.startswith("B"):
        return "grant"
    if kind in ("A3", "A4"):
        return "search-report"
    if kind.startswith("A"):
        return "application"
    return None


def _name(el: Any) -> str:
    """Name of a B711/B721/B731 party: ``snm`` without the ``c/o ...`` address part."""
    snm = el.findtext("snm")
    if snm is None:
        return text_of(el.find("name")) if el.find("name") is not None else ""
    return clean(_CO_RE.sub("", snm)).rstrip(",")


def _titles(root: Any) -> dict[str, str]:
    out: dict[str, str] = {}
    for b540 in root.iterfind(".//SDOBI//B540"):
        lang: str | None = None
        for child in b540:
            tag = local(child.tag)
            if tag == "B541":
                lang = clean(child.text).lower() or None
            elif tag == "B542":
                text = text_of(child)
                if text and lang and lang not in out:
                    out[lang] = text
    return out


def _priorities(root: Any) -> tuple[list[Any], list[str]]:
    dates = []
    ids: list[str] = []
    for b300 in root.iterfind(".//SDOBI/B300"):
        number = country = None
        pdate = None
        entries: list[tuple[str | None, str | None, Any]] = []
        for child in b300:
            tag = local(child.tag)
            if tag == "B310":
                if number is not None:
                    entries.append((number, country, pdate))
                    country = pdate = None
                number = clean(child.text)
            elif tag == "B320":
                pdate = parse_date(child.findtext("date") or child.text)
            elif tag == "B330":
                country = clean(child.findtext("ctry") or child.text)
        if number is not None:
            entries.append((number, country, pdate))
        for number, country, pdate in entries:
            if pdate and pdate not in dates:
                dates.append(pdate)
            if number:
                pid = f"{country or ''}{number.replace(' ', '')}"
                if pid not in ids:
                    ids.append(pid)
    return dates, ids


def _classifications(root: Any) -> tuple[list[str], list[str]]:
    ipc: list[str] = []
    cpc: list[str] = []
    add_codes(ipc, (normalise_ipc(t.text or "") for t in root.iterfind(".//B510EP//classification-ipcr/text")))
    for b510 in root.iterfind(".//SDOBI//B510"):
        for child in b510:
            if local(child.tag) in ("B511", "B512", "B513", "B514", "B517EP") and child.text:
                add_codes(ipc, split_ipc_list(child.text))
        add_codes(ipc, (normalise_ipc(t.text or "") for t in b510.iterfind(".//classification-ipcr/text")))
    add_codes(cpc, (normalise_ipc(t.text or "") for t in root.iterfind(".//B520EP//classification-cpc/text")))
    return ipc, cpc


def _citations(root: Any) -> list[Citation]:
    out: list[Citation] = []
    seen: set[tuple[str, str | None, str | None]] = set()

    def add(text: str, cid: str | None, category: str | None) -> None:
        key = (text, cid, category)
        if text and key not in seen:
            seen.add(key)
            out.append(Citation(text=text, id=cid, category=category))

    for b560 in root.iterfind(".//SDOBI//B560"):
        for child in b560:
            tag = local(child.tag)
            if tag == "B561":  # patent literature
                text = text_of(child.find("text")) or text_of(child)
                pat = child.find(".//patcit")
                cid = (pat.get("dnum") or document_id(pat)) if pat is not None else citation_id(text)
                add(text, cid, None)
            elif tag == "B562":  # non-patent literature
                add(text_of(child.find("text")) or text_of(child), None, None)
    for cit in root.iterfind(".//search-report-data//srep-citations/citation"):
        category = clean(cit.findtext("category")) or None
        pat = cit.find("patcit")
        if pat is not None:
            add(text_of(pat), pat.get("dnum") or document_id(pat), category)
        else:
            npl = cit.find("nplcit")
            add(text_of(npl if npl is not None else cit), None, category)
    for ref_list in root.iterfind(".//ep-reference-list"):
        for pat in ref_list.iter("patcit"):
            add(text_of(pat), pat.get("dnum") or document_id(pat), "applicant")
        for npl in ref_list.iter("nplcit"):
            add(text_of(npl), None, "applicant")
    return out


def ep_record(root: Any, source_name: str, warnings: list[str] | None = None) -> PatentRecord:
    """Build a record from a parsed ``ep-patent-document`` root."""
    if local(root.tag) != ROOT:
        raise DocumentError(f"not an EP publication: root element <{local(root.tag)}>")
    warnings = list(warnings or [])
    sdobi = root.find("SDOBI")
    bib = sdobi if sdobi is not None else root
    country = clean(root.get("country") or bib.findtext(".//B190")) or "EP"
    number = clean(root.get("doc-number") or bib.findtext(".//B110"))
    kind = clean(root.get("kind") or bib.findtext(".//B130"))
    if not number:
        raise DocumentError("no publication number (doc-number / B110)")
    if not kind:
        raise DocumentError(f"no kind code for {country}{number} (kind / B130)")
    pub = parse_date(root.get("date-publ")) or parse_date(bib.findtext(".//B140/date"))
    app_date = parse_date(bib.findtext(".//B220/date"))
    prio_dates, prio_ids = _priorities(root)

    desc = root.find("description")
    lang_text = clean((desc.get("lang") if desc is not None else None) or root.get("lang") or bib.findtext(".//B260"))
    lang = lang_text.lower() or None

    abstracts: dict[str, str] = {}
    for ab in root.iterfind("abstract"):
        ab_lang = (ab.get("lang") or lang or "").lower()
        paras = [text_of(p) for p in ab.iterfind(".//p")] or [text_of(ab)]
        text = "\n".join(p for p in paras if p)
        if text and ab_lang and ab_lang not in abstracts:
            abstracts[ab_lang] = text

    claims: dict[str, list[Claim]] = {}
    for cl in root.iterfind("claims"):
        cl_lang = (cl.get("lang") or lang or "").lower()
        parsed = claims_from_elements(cl.iterfind("claim"))
        if parsed and cl_lang and cl_lang not in claims:
            claims[cl_lang] = parsed

    ipc, cpc = _classifications(root)
    applicants: list[str] = []
    add_names(applicants, (_name(el) for el in bib.iterfind(".//B711")))
    add_names(applicants, (_name(el) for el in bib.iterfind(".//B731")))
    inventors: list[str] = []
    add_names(inventors, (_name(el) for el in bib.iterfind(".//B721")))

    return PatentRecord(
        id=f"{country}{number}{kind}",
        country=country,
        number=number,
        kind=kind,
        source="ep",
        doc_type=doc_type_of_kind(kind),
        publication_date=pub,
        application_date=app_date,
        priority_dates=prio_dates,
        lang=lang,
        title=_titles(root),
        abstract=abstracts,
        claims=claims,
        description=description_tree(desc),
        ipc=ipc,
        cpc=cpc,
        citations=_citations(root),
        priority_ids=prio_ids,
        applicants=applicants,
        inventors=inventors,
        warnings=warnings,
    )


def parse_ep(xml_bytes: bytes, source_name: str) -> PatentRecord:
    """Parse one EPO ``ep-patent-document`` XML document. Raises :class:`DocumentError` when unusable."""
    root, warnings = parse_xml(xml_bytes)
    return ep_record(root, source_name, warnings)
