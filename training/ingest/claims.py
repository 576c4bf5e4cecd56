"""Claims: numbers, and the claims each one refers to (``according to claims 1 to 3``, de, fr)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from service.corpus.record import Claim
from service.workflow.claims import parse_claim_refs
from training.ingest.xmltext import DROP_TAGS, text_of

_IDREF_NUM_RE = re.compile(r"(\d+)\s*$")


def idref_number(idref: str | None) -> int | None:
    """``'CLM-00001'`` / ``'c-en-01-0003'`` -> 1 / 3."""
    if not idref:
        return None
    m = _IDREF_NUM_RE.search(idref)
    return int(m.group(1)) if m else None


def claim_number(raw: str | None, fallback: int) -> int:
    """Claim number from a ``num`` attribute (``'0001'``, ``'1.'``), else ``fallback``."""
    if raw:
        m = re.search(r"\d+", raw)
        if m and int(m.group(0)) > 0:
            return int(m.group(0))
    return fallback


def make_claim(num: int, text: str, idrefs: Iterable[int] = (), lang: str | None = None) -> Claim:
    """A claim whose refs are the explicit ``claim-ref`` targets plus what its wording refers to.

    A leading copy of the claim's own number (``'2. The arrangement ...'``) is removed from the text. The
    wording is read in en/de/fr (:func:`parse_claim_refs`), and in Spanish when ``lang`` is ``es``.
    """
    text = re.sub(rf"^\s*{num}\s*[.)]+\s*", "", text) or text
    refs = set(parse_claim_refs(text, num))
    if lang == "es":
        refs.update(spanish_claim_refs(text, num))
    refs.update(r for r in idrefs if r != num and r > 0)
    return Claim(num=num, text=text, refs=sorted(refs))


_REF_ATTRS = ("idref", "IDREF", "ID", "depends_on", "target")


def claim_idrefs(claim_el: Any, ref_tags: Iterable[str] = ("claim-ref",)) -> list[int]:
    """Claim numbers named by explicit reference elements (``<claim-ref idref="CLM-00001">``) below a claim."""
    out: list[int] = []
    for tag in ref_tags:
        for ref in claim_el.iter(tag):
            for attr in _REF_ATTRS:
                n = idref_number(ref.get(attr))
                if n is not None:
                    out.append(n)
                    break
    return out


def claims_from_elements(
    claim_els: Iterable[Any],
    ref_tags: Iterable[str] = ("claim-ref",),
    drop: frozenset[str] = DROP_TAGS,
    num_attrs: tuple[str, ...] = ("num",),
    lang: str | None = None,
) -> list[Claim]:
    """Claims from ``<claim num=..>`` elements with ``<claim-ref idref=..>`` children (``lang``: of the wording)."""
    claims: list[Claim] = []
    ref_tags = tuple(ref_tags)
    for i, cl in enumerate(claim_els, 1):
        raw_num = next((cl.get(a) for a in num_attrs if cl.get(a)), None)
        num = claim_number(raw_num, i)
        text = text_of(cl, drop)
        if not text:
            continue
        claims.append(make_claim(num, text, claim_idrefs(cl, ref_tags), lang))
    return claims


# claim references in Spanish (the service's parse_claim_refs reads en/de/fr wording): "según la reivindicación 1",
# "de acuerdo con las reivindicaciones 1 a 3", "de acuerdo con las reivindicaciones primera y segunda"
_ES_ORDINALS = {"primera": 1, "segunda": 2, "tercera": 3, "cuarta": 4, "quinta": 5, "sexta": 6, "séptima": 7,
                "septima": 7, "octava": 8, "novena": 9, "décima": 10, "decima": 10}
_ES_NUM = rf"(?:\d{{1,3}}|{'|'.join(_ES_ORDINALS)})"
_ES_REF_RE = re.compile(
    rf"\breivindicaci(?:ón|on|ones)\s+((?:n[oº°]\.?\s*)?{_ES_NUM}(?:\s*(?:,|y|o|a|-|–)\s*{_ES_NUM})*)"
    rf"|\b((?:{_ES_NUM})(?:\s*(?:,|y|o|a)\s*{_ES_NUM})*)\s+reivindicaci(?:ón|on|ones)\b",
    re.I,
)
_ES_TOKEN_RE = re.compile(rf"{_ES_NUM}|\b(?:a|y|o)\b|[-–,]", re.I)


def spanish_claim_refs(text: str, num: int) -> list[int]:
    """The earlier claims a Spanish claim refers to (digits or the ordinals primera .. décima, ranges with ``a``)."""
    refs: set[int] = set()
    for m in _ES_REF_RE.finditer(text):
        prev: int | None = None
        pending_range = False
        for tok in _ES_TOKEN_RE.findall(m.group(1) or m.group(2)):
            low = tok.lower()
            n = int(low) if low.isdigit() else _ES_ORDINALS.get(low)
            if n is not None:
                if pending_range and prev is not None and prev < n:
                    refs.update(range(prev, n + 1))
                refs.add(n)
                prev, pending_range = n, False
            else:
                pending_range = low in ("a", "-", "–")
    return sorted(r for r in refs if 0 < r < num)


# the start of a numbered claim in OCR'd claims text: "1. A ...", "2.- Sistema ...", "3) ...", "4 . The ..."
_CLAIM_START_RE = re.compile(r"(\d{1,3})[ \t]*(?:\.[ \t]*[-–]?|\)|[-–])[ \t]*(?=\S)")


def split_numbered_claims(pieces: Iterable[str]) -> list[tuple[int, str]] | None:
    """Claims numbered in their text (OCR'd WO claims: one ``<claim>`` of many ``<claim-text>`` lines) -> (num, text).

    A claim starts with its number (``1.``, ``2.-``, ``3)``) at the start of a piece or after the end of a
    sentence (``... angle θ. 6. Microscope ...``), claim 1 also after a short heading of any shape
    (``AMENDED CLAIMS [received by ...] 1. A pump``), and only the next number in sequence counts, so that
    ``claim 1.`` or ``2.5 mm`` inside a claim start nothing. Text before claim 1 (``CLAIMS``,
    ``REIVINDICACIONES``, ``What is Claimed:``) is dropped. None when no claim 1 is found.
    """
    text = "\n".join(p.strip() for p in pieces if p and p.strip())
    starts: list[tuple[int, int, int]] = []  # (number, start of the number, start of the text)
    for m in _CLAIM_START_RE.finditer(text):
        n = int(m.group(1))
        if n != (starts[-1][0] + 1 if starts else 1):
            continue
        before = text[: m.start()].rstrip(".")  # ".1. An electro-hydraulic ..." (an OCR'd dot before the number)
        if n == 1:  # after a short heading: "AMENDED CLAIMS [received ...] 1. A pump", "WHAT IS CLAIMED IS: .1."
            if before.strip() and (len(before) > 400 or not before[-1].isspace()):
                continue
        elif not re.search(r"(?:\n|[.;:]\s)\s*$", before):
            continue
        starts.append((n, m.start(), m.end()))
    if not starts:
        return None
    out: list[tuple[int, str]] = []
    for i, (n, _, begin) in enumerate(starts):
        end = starts[i + 1][1] if i + 1 < len(starts) else len(text)
        body = " ".join(text[begin:end].split())
        if body:
            out.append((n, body))
    return out
