"""USPTO grant full text 2001-2004 (``PATDOC``, DTD ST.32 v2.4/2.5: SGML-like ``<B110><DNUM><PDAT>`` tags)."""

from __future__ import annotations

from typing import Any

from service.corpus.record import Citation, PatentRecord
from training.ingest.biblio import add_names, parse_date
from training.ingest.claims import claims_from_elements
from training.ingest.codes import add_codes, normalise_ipc
from training.ingest.description import description_tree
from training.ingest.errors import DocumentError
from training.ingest.xmltext import local, text_of

# children of <PATDOC> this reader turns into fields (anything else is reported in ``warnings``)
_HANDLED = {"SDOBI", "SDOAB", "SDODE", "SDOCL", "SDODR", "SDOCR"}


def us_doc_type(number: str, kind: str) -> str:
    """USPTO document type from the number prefix / kind code."""
    if number.startswith("D") or kind.startswith("S"):
        return "design"
    if number.startswith("PP") or kind.startswith("P"):
        return "plant"
    if number.startswith("RE") or kind.startswith("E"):
        return "reissue"
    if number.startswith("H") or kind.startswith("H"):
        return "sir"
    return "utility"


def _pdat(el: Any | None, path: str) -> str:
    if el is None:
        return ""
    found = el.find(path)
    return text_of(found) if found is not None else ""


def _party_name(party: Any) -> str:
    nam = party.find(".//NAM")
    if nam is None:
        return text_of(party)
    onm = _pdat(nam, "ONM")
    if onm:
        return onm
    snm, fnm = _pdat(nam, "SNM"), _pdat(nam, "FNM")
    return ", ".join(p for p in (snm, fnm) if p)


def _citations(bib: Any) -> list[Citation]:
    out: list[Citation] = []
    for cit in bib.iterfind(".//B560/*"):
        tag = local(cit.tag)
        category = None
        if cit.find("CITED-BY-EXAMINER") is not None:
            category = "examiner"
        elif cit.find("CITED-BY-OTHER") is not None:
            category = "other"
        if tag == "B561":
            doc = cit.find(".//PCIT/DOC")
            if doc is None:
                continue
            number = _pdat(doc, "DNUM").replace(" ", "")
            country = _pdat(doc, "CTRY") or "US"
            kind = _pdat(doc, "KIND")
            name = _pdat(cit, ".//PARTY-US") or _pdat(cit, ".//PARTY")
            text = " ".join(p for p in (country, number, kind, name) if p)
            out.append(Citation(text=text, id=f"{country}{number}{kind}" if number else None, category=category))
        elif tag == "B562":
            text = _pdat(cit, "NCIT") or text_of(cit)
            if text:
                out.append(Citation(text=text, id=None, category=category))
    return out


def patdoc_record(root: Any, source_name: str, warnings: list[str] | None = None) -> PatentRecord:
    """Build a record from a parsed ``PATDOC`` root."""
    warnings = list(warnings or [])
    bib = root.find("SDOBI")
    if bib is None:
        raise DocumentError("<PATDOC> without <SDOBI> bibliographic data")
    number = _pdat(bib, "B100/B110").replace(" ", "")
    kind = _pdat(bib, "B100/B130")
    country = _pdat(bib, "B100/B190") or "US"
    if not number:
        raise DocumentError("no publication number (B110)")
    if not kind:
        raise DocumentError(f"no kind code for {country}{number} (B130)")

    prio_dates = []
    prio_ids: list[str] = []
    for b300 in bib.iterfind("B300"):
        d = parse_date(_pdat(b300, "B320"))
        if d and d not in prio_dates:
            prio_dates.append(d)
        pnum = _pdat(b300, "B310").replace(" ", "")
        if pnum:
            pid = _pdat(b300, "B330") + pnum
            if pid not in prio_ids:
                prio_ids.append(pid)

    ipc: list[str] = []
    for tag in ("B511", "B512"):
        add_codes(ipc, (normalise_ipc(text_of(el)) for el in bib.iterfind(f"B500/B510/{tag}")))

    inventors: list[str] = []
    add_names(inventors, (_party_name(p) for p in bib.iterfind("B700/B720/B721")))
    applicants: list[str] = []
    add_names(applicants, (_party_name(p) for p in bib.iterfind("B700/B730/B731")))

    abstract_el = root.find("SDOAB")
    abstract = ""
    if abstract_el is not None:
        abstract = "\n".join(t for p in abstract_el.iter("PARA") if (t := text_of(p)))
    title = _pdat(bib, "B500/B540")
    claims_el = root.find("SDOCL")
    claims = (
        claims_from_elements(claims_el.iter("CLM"), ref_tags=("CLREF",), num_attrs=("ID",))
        if claims_el is not None
        else []
    )
    unhandled = sorted({local(c.tag) for c in root if isinstance(c.tag, str)} - _HANDLED)
    if unhandled:
        warnings.append("PATDOC parts not extracted: " + ", ".join(unhandled))
    if claims_el is not None and not claims:
        warnings.append("claims present but none could be extracted")

    return PatentRecord(
        id=f"{country}{number}{kind}",
        country=country,
        number=number,
        kind=kind,
        source="us-sgml",
        doc_type=us_doc_type(number, kind),
        publication_date=parse_date(_pdat(bib, "B100/B140")),
        application_date=parse_date(_pdat(bib, "B200/B220")),
        priority_dates=prio_dates,
        lang="en",
        title={"en": title} if title else {},
        abstract={"en": abstract} if abstract else {},
        claims={"en": claims} if claims else {},
        description=description_tree(root.find("SDODE")),
        ipc=ipc,
        citations=_citations(bib),
        priority_ids=prio_ids,
        applicants=applicants,
        inventors=inventors,
        warnings=warnings,
    )
