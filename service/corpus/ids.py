"""Publication ids: the one normaliser and the shape of a publication number (``EP0640886B1``, ``US 7,861,316``).

Every reader of an id (the doc store's lookup, the API's /documents, a feedback or chart id, a priority claim when
families are collapsed, a citation's reference) normalises it with :func:`normalise_pub_id`.
"""

from __future__ import annotations

import re

_ID_SEP_RE = re.compile(r"[\s\-.,/]+")
_ID_RE = re.compile(r"^([A-Z]{2})([A-Z]{0,2})(\d+)([A-Z]\d?)?$")
# patent offices whose numbers we recognise as a "patent number query"
_OFFICES_TEXT = (
    "EP WO US DE FR GB JP CN KR CH AT BE NL IT ES SE DK FI NO PL CZ RU CA AU BR IN MX TW IL ZA NZ SG HK "
    "IE PT GR HU RO SK SI LU EA AP OA"
)
OFFICES = frozenset(_OFFICES_TEXT.split(" "))


def normalise_pub_id(text: str) -> str:
    """``'ep 0640886 b1'`` -> ``'EP0640886B1'`` (uppercase, spaces/dashes/dots removed)."""
    return _ID_SEP_RE.sub("", text.strip().upper())


def id_keys(norm: str) -> tuple[str, str] | None:
    """(id without leading zeros in the number, same without kind) or None when not id-shaped."""
    m = _ID_RE.match(norm)
    if not m:
        return None
    country, prefix, digits, kind = m.groups()
    base = f"{country}{prefix}{digits.lstrip('0') or '0'}"
    return base + (kind or ""), base


def id_shaped(text: str) -> bool:
    """True for text shaped like a publication number: country letters + at least 4 digits (+ kind)."""
    if len(text) > 40:
        return False
    m = _ID_RE.match(normalise_pub_id(text))
    return bool(m and len(m.group(3)) >= 4)


def looks_like_pub_id(text: str) -> bool:
    """True for text shaped like a publication number of a known office (``EP0640886B1``, ``US 7,861,316``)."""
    return id_shaped(text) and normalise_pub_id(text)[:2] in OFFICES


__all__ = ["OFFICES", "id_keys", "id_shaped", "looks_like_pub_id", "normalise_pub_id"]
