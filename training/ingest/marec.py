"""MAREC / CLEF-IP ``patent-document`` XML (EP, US and WO publications) -> :class:`PatentRecord`.

The format of the MAREC collection (the CLEF-IP prior-art tracks): ``<patent-document ucid="EP-1116605-B1"
country=.. doc-number=.. kind=.. date=.. lang=..>`` with ``bibliographic-data`` (publication, application and
priority references, IPC-R / IPC / ECLA classifications, titles in several languages, citations with their
search-report category, parties in up to three renderings: ``epo``, ``intermediate``, ``original``), one
``abstract``, ``claims`` and ``description`` per language, and legal events (not read). What differs from the
EPO publication-server XML (:mod:`training.ingest.ep`):

- ``claim num="xx"``: the claims of EP grants are numbered by their order, in every language alike;
- OCR'd WO claims come as one ``<claim>`` of many ``<claim-text>`` lines with the numbers in the text
  (``1.``, ``2.-``): they are split into claims (:func:`training.ingest.claims.split_numbered_claims`);
- some WO descriptions are one ``<pre>`` block (split at blank lines, capitalised lines as headings); US
  paragraphs start with ``[0001]`` (removed, unnumbered short lines taken as headings);
- ECLA symbols (``B60C15/00D2``, ICO ``K61B17:32A4``) are kept as published in ``ecla``, their CPC part in
  ``cpc`` (:func:`training.ingest.codes.ecla_to_cpc`);
- ten WO files of the OCR layout (``<patent-document id="WO2006000598A1" docnumber=.. date-published=..>``)
  have no bibliographic data at all: id, date and language come from the root element.

Text in a language the index does not serve (Spanish claims and descriptions of WO publications) is kept in
the record under its language code; ingest counts it (:attr:`IngestStats.unserved`) and the indexes skip it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from service.corpus.record import Citation, Claim, PatentRecord
from training.ingest.biblio import document_id, parse_date, person_name
from training.ingest.claims import claims_from_elements, make_claim, split_numbered_claims
from training.ingest.codes import add_codes, ecla_symbol, ecla_to_cpc, normalise_ipc, split_ipc_list
from training.ingest.description import split_preformatted, tree_from_blocks
from training.ingest.ep import doc_type_of_kind
from training.ingest.errors import DocumentError
from training.ingest.xmltext import clean, local, parse_xml, text_of

ROOT = "patent-document"
SOURCE = "marec"
# renderings of a party, the best first: as filed (names with first/last name), normalised, EPO's short form
_PARTY_FORMATS = ("original", "intermediate", "epo")
# placeholders for drawings and formulae in the text: '<IMAGE>' (EPO abstracts), '<EMI ID=84.1>' (WO claims)
_PLACEHOLDER_RE = re.compile(r"\s*<\s*(?:IMAGE|EMI\b[^<>]*)>\s*", re.I)
_UCID_RE = re.compile(r"^([A-Z]{2})-?([0-9A-Z]+?)-?([A-Z]\d?)$")


def strip_placeholders(text: str) -> str:
    """Text without ``<IMAGE>`` / ``<EMI ID=..>`` placeholders (escaped in the XML, so they are text)."""
    return clean(_PLACEHOLDER_RE.sub(" ", text))


def _lang(raw: str | None) -> str | None:
    """``'EN'`` -> ``'en'``; MAREC's ``'XX'`` (unknown) and empty -> None."""
    value = clean(raw).lower()
    return value if value and value != "xx" else None


def _doc_type(country: str, kind: str) -> str | None:
    if country == "US":  # US pre-grant publications are utility applications (as the us-pap reader says)
        return "utility" if kind.startswith(("A", "B")) else None
    return doc_type_of_kind(kind)  # EP and WO: A1/A2 application, A3/A4 search report, B grant


def _id_parts(root: Any, pubref: Any | None) -> tuple[str, str, str]:
    doc = pubref.find("document-id") if pubref is not None else None
    country = clean(root.get("country") or (doc.findtext("country") if doc is not None else None))
    number = clean(root.get("doc-number") or root.get("docnumber")
                   or (doc.findtext("doc-number") if doc is not None else None))
    kind = clean(root.get("kind") or (doc.findtext("kind") if doc is not None else None))
    if not (country and number and kind):  # fall back to the ucid (EP-1116605-B1) or id (WO2006000598A1)
        m = _UCID_RE.match(clean(root.get("ucid") or root.get("id")).upper())
        if m:
            country, number, kind = country or m.group(1), number or m.group(2), kind or m.group(3)
    return country.upper(), number.replace(" ", ""), kind.upper()


def _priorities(bib: Any) -> tuple[list[Any], list[str]]:
    dates: list[Any] = []
    ids: list[str] = []
    for claim in bib.iterfind("priority-claims/priority-claim"):
        doc = claim.find("document-id")
        if doc is None:
            continue
        number = clean(doc.findtext("doc-number")).replace(" ", "")
        pdate = parse_date(doc.findtext("date"))
        if pdate and pdate not in dates:
            dates.append(pdate)
        pid = f"{clean(doc.findtext('country'))}{number}"
        if number and pid not in ids:
            ids.append(pid)
    return dates, ids


def _names(parent: Any | None, tag: str) -> list[str]:
    """Names of the parties ``tag`` below ``parent`` in their best rendering, case-insensitively unique."""
    if parent is None:
        return []
    by_format: dict[str, list[str]] = {}
    for party in parent.iterfind(tag):
        name = person_name(party.find("addressbook"))
        if name:
            by_format.setdefault(party.get("format") or "", []).append(name)
    for fmt in (*_PARTY_FORMATS, *by_format):
        if by_format.get(fmt):
            return by_format[fmt]
    return []


def _add_unique(target: list[str], names: Iterable[str]) -> None:
    seen = {n.casefold() for n in target}
    for name in names:
        if name.casefold() not in seen:
            seen.add(name.casefold())
            target.append(name)


def _classifications(tech: Any | None) -> tuple[list[str], list[str], list[str]]:
    ipc: list[str] = []
    cpc: list[str] = []
    ecla: list[str] = []
    if tech is None:
        return ipc, cpc, ecla
    add_codes(ipc, (normalise_ipc(el.text or "") for el in tech.iterfind("classifications-ipcr/classification-ipcr")))
    for el in tech.iterfind("classification-ipc/*"):
        if local(el.tag) in ("main-classification", "further-classification") and el.text:
            add_codes(ipc, split_ipc_list(el.text))
    for el in tech.iterfind("classification-ecla/classification-symbol"):
        symbol = ecla_symbol(el.text or "")
        if not symbol:
            continue
        if symbol not in ecla:
            ecla.append(symbol)
        if (el.get("scheme") or "EC").upper() == "EC":
            add_codes(cpc, [ecla_to_cpc(symbol)])
    return ipc, cpc, ecla


def _category(el: Any) -> str | None:
    """Search-report category (X, Y, A, ...) of a citation, else 'applicant' for one the applicant cited."""
    sources = el.findall("sources/source")
    category = el.get("category") or next((s.get("category") for s in sources if s.get("category")), None)
    if category:
        return clean(category)
    names = {el.get("source")} | {s.get("name") for s in sources}
    return "applicant" if "APP" in names else None


def _citations(tech: Any | None) -> list[Citation]:
    out: list[Citation] = []
    if tech is None:
        return out
    seen: set[tuple[str, str | None]] = set()
    for pat in tech.iterfind("citations/patent-citations/patcit"):
        ucid = clean(pat.get("ucid"))
        cid = ucid.replace("-", "") or document_id(pat)
        text = ucid or cid or text_of(pat)
        if text and (text, cid) not in seen:
            seen.add((text, cid))
            out.append(Citation(text=text, id=cid, category=_category(pat)))
    for npl in tech.iterfind("citations/non-patent-citations/nplcit"):
        text = text_of(npl.find("text")) or text_of(npl)
        if text and (text, None) not in seen:
            seen.add((text, None))
            out.append(Citation(text=text, id=None, category=_category(npl)))
    return out


def _claims(el: Any, lang: str | None) -> list[Claim]:
    """One ``<claims>`` element: numbered claims, or the claims split out of one OCR'd ``<claim>``."""
    claim_els = el.findall("claim")
    if len(claim_els) == 1:
        pieces = [text_of(ct) for ct in claim_els[0].iterfind("claim-text")] or [text_of(claim_els[0])]
        split = split_numbered_claims(strip_placeholders(p) for p in pieces)
        if split:
            return [make_claim(num, text, (), lang) for num, text in split]
    out: list[Claim] = []
    for claim in claims_from_elements(claim_els, lang=lang):
        text = strip_placeholders(claim.text)
        if text:
            out.append(claim if text == claim.text else make_claim(claim.num, text, claim.refs, lang))
    return out


def _description(desc: Any | None) -> list[Any]:
    if desc is None:
        return []
    blocks: list[tuple[bool, str]] = []
    headings_given = False
    for child in desc:
        name = local(child.tag)
        if name == "heading":
            headings_given = True
            blocks.append((True, text_of(child)))
        elif name == "p":
            pres = list(child.iter("pre"))
            if pres:
                for pre in pres:
                    blocks.extend((False, para) for para in split_preformatted("".join(pre.itertext())))
            else:
                blocks.append((False, text_of(child)))
        elif name:
            blocks.append((False, text_of(child)))
    return tree_from_blocks(((h, strip_placeholders(t) if not h else t) for h, t in blocks), headings_given)


def marec_record(root: Any, source_name: str, warnings: list[str] | None = None) -> PatentRecord:
    """Build a record from a parsed MAREC ``patent-document`` root."""
    if local(root.tag) != ROOT:
        raise DocumentError(f"not a MAREC patent-document: root element <{local(root.tag)}>")
    warnings = list(warnings or [])
    bib = root.find("bibliographic-data")
    pubref = bib.find("publication-reference") if bib is not None else None
    country, number, kind = _id_parts(root, pubref)
    if not number:
        raise DocumentError("no publication number (doc-number / ucid)")
    if not country or not kind:
        raise DocumentError(f"no country or kind code for {country}{number}")
    pub = parse_date(root.get("date") or root.get("date-published")) or parse_date(
        pubref.findtext("document-id/date") if pubref is not None else None)
    app_date = parse_date(bib.findtext("application-reference/document-id/date")) if bib is not None else None
    prio_dates, prio_ids = _priorities(bib) if bib is not None else ([], [])

    desc = root.find("description")
    lang = _lang(desc.get("lang") if desc is not None else None) or _lang(root.get("lang"))
    tech = bib.find("technical-data") if bib is not None else None

    title: dict[str, str] = {}
    for el in tech.iterfind("invention-title") if tech is not None else ():
        t_lang, text = _lang(el.get("lang")) or lang, text_of(el)
        if t_lang and text and t_lang not in title:
            title[t_lang] = text
    abstract: dict[str, str] = {}
    for el in root.iterfind("abstract"):
        a_lang = _lang(el.get("lang")) or lang
        paras = [strip_placeholders(text_of(p)) for p in el.iterfind(".//p")] or [strip_placeholders(text_of(el))]
        text = "\n".join(p for p in paras if p)
        if a_lang and text and a_lang not in abstract:
            abstract[a_lang] = text
    claims: dict[str, list[Claim]] = {}
    for el in root.iterfind("claims"):
        c_lang = _lang(el.get("lang")) or lang
        parsed = _claims(el, c_lang)
        if c_lang and parsed and c_lang not in claims:
            claims[c_lang] = parsed

    ipc, cpc, ecla = _classifications(tech)
    parties = bib.find("parties") if bib is not None else None
    applicants: list[str] = []
    _add_unique(applicants, _names(parties.find("applicants") if parties is not None else None, "applicant"))
    _add_unique(applicants, _names(parties.find("assignees") if parties is not None else None, "assignee"))
    inventors: list[str] = []
    _add_unique(inventors, _names(parties.find("inventors") if parties is not None else None, "inventor"))

    return PatentRecord(
        id=f"{country}{number}{kind}",
        country=country,
        number=number,
        kind=kind,
        source=SOURCE,
        doc_type=_doc_type(country, kind),
        publication_date=pub,
        application_date=app_date,
        priority_dates=prio_dates,
        lang=lang,
        title=title,
        abstract=abstract,
        claims=claims,
        description=_description(desc),
        ipc=ipc,
        cpc=cpc,
        ecla=ecla,
        citations=_citations(tech),
        family_id=clean(root.get("family-id")) or None,
        priority_ids=prio_ids,
        applicants=applicants,
        inventors=inventors,
        warnings=warnings,
    )


def parse_marec(xml_bytes: bytes, source_name: str) -> PatentRecord:
    """Parse one MAREC ``patent-document``. Raises :class:`DocumentError` when unusable."""
    root, warnings = parse_xml(xml_bytes)
    return marec_record(root, source_name, warnings)
