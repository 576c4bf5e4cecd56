"""Claims: numbers, and the claims each one refers to (``according to claims 1 to 3``, de, fr)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from service.corpus.record import Claim
from training.ingest.xmltext import DROP_TAGS, text_of

_NUM = r"\d{1,3}"
_CONNECT = r"(?:[,;]|[-–—]|\b(?:and|or|to|through|bis|oder|und|sowie|à|a|ou|et|inclusive)\b)"
_KEYWORD_AGAIN = r"(?:claims?\s+|anspr(?:u|ü|ue)ch(?:e|en|s)?\s+|revendications?\s+)?"
_NUM_LIST = rf"{_NUM}[a-z]?(?:\s*(?:{_CONNECT}\s*)+{_KEYWORD_AGAIN}{_NUM}\b)*"
_REF_RE = re.compile(
    rf"\b(?:claims?|anspr(?:u|ü|ue)ch(?:e|en|es|s)?|patentanspr(?:u|ü|ue)ch(?:e|en|s)?|revendications?)"
    rf"\s*(?:n[o°º]s?\.?\s*|nr\.?\s*|no\.?\s*)?({_NUM_LIST})",
    re.I,
)
_RANGE_WORDS = {"to", "through", "-", "–", "—", "bis", "à", "a"}
_TOKEN_RE = re.compile(rf"\d+|{_CONNECT}", re.I)
_PRECEDING_RE = re.compile(
    r"\b(?:(?:preceding|previous|foregoing|prior|above|aforementioned)\s+claims?"
    r"|claims?\s+(?:hereinbefore|above|previously)"
    r"|(?:vorhergehenden|vorangehenden|vorangegangenen|vorstehenden|voranstehenden|vorherigen|vorigen)\s+(?:Patent)?anspr"
    r"|revendications?\s+(?:pr[ée]c[ée]dentes?|ant[ée]rieures?))",
    re.I,
)


def parse_claim_refs(text: str, num: int | None = None) -> list[int]:
    """Numbers of the claims a claim text refers to (en/de/fr wording).

    ``'according to claim 1'``, ``'as claimed in claims 1 to 3'``, ``'any one of claims 1-4'``,
    ``'nach Anspruch 1 oder 2'``, ``'selon l'une des revendications 1 à 3'``; "any preceding claim" and
    its German/French forms mean all claims before ``num``. When ``num`` is given, only numbers below it
    are kept (a claim refers back to earlier claims).
    """
    refs: set[int] = set()
    for m in _REF_RE.finditer(text):
        tokens = [t.lower() for t in _TOKEN_RE.findall(m.group(1))]
        prev: int | None = None
        pending_range = False
        for tok in tokens:
            if tok.isdigit():
                n = int(tok)
                if pending_range and prev is not None and prev < n <= prev + 200:
                    refs.update(range(prev, n + 1))
                else:
                    refs.add(n)
                prev = n
                pending_range = False
            elif tok in _RANGE_WORDS:
                pending_range = True
            else:
                pending_range = False
    if num is not None and _PRECEDING_RE.search(text):
        refs.update(range(1, num))
    if num is not None:
        refs = {r for r in refs if 0 < r < num}
    else:
        refs = {r for r in refs if r > 0}
    return sorted(refs)


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


def make_claim(num: int, text: str, idrefs: Iterable[int] = ()) -> Claim:
    """A claim whose refs are the explicit ``claim-ref`` targets plus what its wording refers to.

    A leading copy of the claim's own number (``'2. The arrangement ...'``) is removed from the text.
    """
    text = re.sub(rf"^\s*{num}\s*[.)]+\s*", "", text) or text
    refs = set(parse_claim_refs(text, num))
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
) -> list[Claim]:
    """Claims from ``<claim num=..>`` elements with ``<claim-ref idref=..>`` children."""
    claims: list[Claim] = []
    ref_tags = tuple(ref_tags)
    for i, cl in enumerate(claim_els, 1):
        raw_num = next((cl.get(a) for a in num_attrs if cl.get(a)), None)
        num = claim_number(raw_num, i)
        text = text_of(cl, drop)
        if not text:
            continue
        claims.append(make_claim(num, text, claim_idrefs(cl, ref_tags)))
    return claims
