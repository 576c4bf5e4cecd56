"""Claims: the claims a claim refers to, and a claim split into its elements (en/de/fr).

:func:`parse_claim_refs` is the one parser of claim references (``according to claims 1 to 3``,
``nach Anspruch 1``, ``selon la revendication 1``); ingestion (training/ingest/claims.py) uses it too.

:func:`split_claims` reads pasted claim text (``1. A device ... 2. The device of claim 1, wherein ...``
or a single claim) and returns the elements of one claim: its preamble, then its features, separated by
``;``, by commas that open a new feature (``, a roller``), by ``wherein`` / ``characterised in that`` /
``dadurch gekennzeichnet, dass`` / ``wobei`` / ``caractérisé en ce que`` / ``dans lequel``. A dependent
claim's elements are those of the claims it refers to (resolved recursively, each once) followed by its
own features; the reference phrase itself is not an element.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

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


# ---------------------------------------------------------------------------------------------- elements
ElementKind = Literal["preamble", "feature"]

_TRANSITION = re.compile(
    r"\b(?:comprising|which comprises|that comprises|comprises|consisting of|consists of|including|"
    r"umfassend|umfasst|aufweisend|aufweist|enthaltend|bestehend aus|mit folgenden Merkmalen|"
    r"comprenant|comporte|comportant|incluant|constitu[ée]e? (?:de|par))\b\s*[:,]?",
    re.I,
)
_MARKERS = re.compile(
    r"\b(?:characteri[sz]ed\s+(?:in\s+that|by)|wherein|whereby|in which|"
    r"dadurch\s+gekennzeichnet\s*,?\s*(?:dass|daß)?|gekennzeichnet\s+durch|wobei|"
    r"caract[ée]ris[ée]e?s?\s+(?:en\s+ce\s+que?|par)|dans\s+lequel|dans\s+laquelle|dans\s+lesquel(?:le)?s)\b\s*[:,]?",
    re.I,
)
# a comma that opens a new feature: followed by an indefinite noun phrase
_FEATURE_COMMA = re.compile(
    r",\s+(?=(?:(?:and|und|et|sowie)\s+)?(?:a|an|at\s+least\s+one|one\s+or\s+more|a\s+plurality\s+of|"
    r"ein|eine|einen|einem|einer|eines|mindestens|wenigstens|un|une|au\s+moins|plusieurs)\s)",
    re.I,
)
_LEADING = re.compile(r"^(?:[\s,;:]|\b(?:and|und|sowie|et|further|ferner)\b)+", re.I)
_NUMBERED = re.compile(r"(?:^|(?<=[\n.;]))\s*(\d{1,3})\s*[.)]\s+(?=\S)")
_MIN_WORDS = 2


@dataclass(frozen=True)
class ClaimElement:
    """One element of a claim: ``label`` like ``1.0`` (the preamble) or ``1.2`` (claim 1, feature 2)."""

    label: str
    kind: ElementKind
    claim: int
    text: str


@dataclass(frozen=True)
class ParsedClaim:
    """A numbered claim of the pasted text, with the claims it refers to."""

    num: int
    text: str
    refs: list[int]


@dataclass
class ClaimSplit:
    """The elements of one claim of the text, and what else was found."""

    claim: int
    elements: list[ClaimElement]
    claims: list[ParsedClaim]
    notes: list[str] = field(default_factory=list)


def number_claims(text: str) -> list[ParsedClaim]:
    """The numbered claims of ``text`` (``1. ... 2. ...``, numbers in sequence), else the whole text as claim 1."""
    text = text.strip()
    starts: list[tuple[int, int, int]] = []  # (number, match start, text start)
    for m in _NUMBERED.finditer(text):
        n = int(m.group(1))
        before = text[max(0, m.start() - 20): m.start()].lower()
        if re.search(r"(claims?|anspr\w*|revendications?)\s*$", before):
            continue  # "according to claim 1." is a reference, not a new claim
        expected = starts[-1][0] + 1 if starts else None
        if (expected is None and (m.start() == 0 or not text[: m.start()].strip())) or n == expected:
            starts.append((n, m.start(), m.end()))
    if not starts:
        return [ParsedClaim(1, text, parse_claim_refs(text))]
    out: list[ParsedClaim] = []
    for i, (n, _, begin) in enumerate(starts):
        end = starts[i + 1][1] if i + 1 < len(starts) else len(text)
        body = " ".join(text[begin:end].split())
        out.append(ParsedClaim(n, body, parse_claim_refs(body, n)))
    return out


def _clean(segment: str) -> str:
    segment = segment.replace(_SEMI, ";").replace(_COMMA, ",")
    return _LEADING.sub("", " ".join(segment.split())).strip(" ,;:.")


_PARENS = re.compile(r"\([^()]*\)")
_SEMI, _COMMA = "\x00", "\x01"


def _protect(text: str) -> str:
    """``;`` and ``,`` inside parentheses (reference signs ``(107, 108; U, L)``) do not separate features."""
    return _PARENS.sub(lambda m: m.group(0).replace(";", _SEMI).replace(",", _COMMA), text)


def _features(body: str) -> list[str]:
    """Split a claim body (after the preamble) into features; short pieces join the one before."""
    parts: list[str] = []
    for piece in _MARKERS.split(_protect(body)):
        for semi in piece.split(";"):
            parts.extend(_FEATURE_COMMA.split(semi))
    out: list[str] = []
    for p in (_clean(x) for x in parts):
        if not p:
            continue
        if out and len(p.split()) < _MIN_WORDS:
            out[-1] = f"{out[-1]}, {p}"
        else:
            out.append(p)
    return out


def _independent(claim: ParsedClaim) -> list[ClaimElement]:
    text = _protect(claim.text)
    m = _TRANSITION.search(text)
    marker = _MARKERS.search(text)
    if m is not None and (marker is None or m.start() < marker.start()):
        preamble, body = text[: m.start()], text[m.end():]
    elif marker is not None:
        preamble, body = text[: marker.start()], text[marker.start():]
        if "," in preamble:  # "A device, having a roller, characterised in that": preamble up to the first comma
            head, rest = preamble.split(",", 1)
            preamble, body = head, f"{rest} {body}"
    else:
        head, _, rest = text.partition(",")
        preamble, body = head, rest
    out = [ClaimElement(f"{claim.num}.0", "preamble", claim.num, _clean(preamble))] if _clean(preamble) else []
    out += [ClaimElement(f"{claim.num}.{i}", "feature", claim.num, f) for i, f in enumerate(_features(body), 1)]
    return out


def _own_features(claim: ParsedClaim) -> list[ClaimElement]:
    """A dependent claim's own features: the text after its reference phrase."""
    text = _protect(claim.text)
    m = _REF_RE.search(text)
    rest = text[m.end():] if m is not None else text
    feats = _features(rest) or [_clean(claim.text)]
    return [ClaimElement(f"{claim.num}.{i}", "feature", claim.num, f) for i, f in enumerate(feats, 1) if f]


def split_claims(text: str, claim: int | None = None) -> ClaimSplit:
    """The elements of claim ``claim`` (default: the first claim) of the pasted ``text``."""
    claims = number_claims(text)
    by_num = {c.num: c for c in claims}
    want = claim if claim is not None else claims[0].num
    if want not in by_num:
        raise ValueError(f"claim {want} is not in the text (claims found: {', '.join(str(c) for c in by_num)})")
    notes: list[str] = []
    seen: set[int] = set()

    def elements(num: int) -> list[ClaimElement]:
        if num in seen:
            return []
        seen.add(num)
        c = by_num[num]
        if not c.refs:
            return _independent(c)
        out: list[ClaimElement] = []
        for ref in c.refs:
            if ref in by_num:
                out += elements(ref)
            else:
                notes.append(f"claim {num} refers to claim {ref}, which is not in the text: its elements are missing")
        return out + _own_features(c)

    found = elements(want)
    if not found:
        raise ValueError("the claim has no text to split")
    return ClaimSplit(claim=want, elements=found, claims=claims, notes=notes)


__all__ = ["ClaimElement", "ClaimSplit", "ParsedClaim", "number_claims", "parse_claim_refs", "split_claims"]
