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
