"""Bibliographic fields: dates, cited and own document ids, person and applicant names."""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import date
from typing import Any

from training.ingest.xmltext import clean, local


def parse_date(raw: str | None) -> date | None:
    """``'20060426'`` (or ``'2006-04-26'``) -> date; ``None`` when missing or invalid.

    A zero day or month (``19290200``, citation dates) becomes the first day / month.
    """
    if not raw:
        return None
    digits = re.sub(r"\D", "", raw)
    if len(digits) != 8:
        return None
    y, m, d = int(digits[:4]), int(digits[4:6]), int(digits[6:8])
    try:
        return date(y, m or 1, d or 1)
    except ValueError:
        return None


# citations and names

_CIT_RE = re.compile(
    r"^\s*([A-Z]{2})\s*[-‑]?\s*(?:([A-Z]\d?)\s*-\s*)?([A-Z]?[\d\s/,.]*\d[A-Z]?)\s*(?:-?\s*([A-Z]\d?))?\s*$"
)


def citation_id(text: str) -> str | None:
    """``'EP-A- 0 294 097'`` -> ``'EP0294097A'``, ``'US-B1- 6 556 945'`` -> ``'US6556945B1'``; None if no patent."""
    m = _CIT_RE.match(text.strip().upper())
    if not m:
        return None
    country, kind, number, kind2 = m.groups()
    digits = re.sub(r"[\s/,.]", "", number)
    if not any(c.isdigit() for c in digits):
        return None
    return f"{country}{digits}{kind or kind2 or ''}"


def document_id(el: Any | None) -> str | None:
    """country+doc-number+kind of a ``<document-id>`` (or an element that contains one)."""
    if el is None:
        return None
    if local(el.tag) != "document-id":
        el = el.find(".//document-id")
        if el is None:
            return None
    country = clean(el.findtext("country"))
    number = clean(el.findtext("doc-number")).replace(" ", "")
    kind = clean(el.findtext("kind"))
    if not number:
        return None
    return f"{country}{number}{kind}" if country and not number.startswith(country) else f"{number}{kind}"


def person_name(el: Any | None) -> str:
    """Name from an addressbook-like element: orgname, or 'last-name, first-name', or name/snm text."""
    if el is None:
        return ""
    org = clean(el.findtext(".//orgname"))
    if org:
        return org
    last = clean(el.findtext(".//last-name"))
    firstn = clean(el.findtext(".//first-name"))
    if last or firstn:
        return ", ".join(p for p in (last, firstn) if p)
    for tag in ("name", "snm"):
        t = clean(el.findtext(f".//{tag}"))
        if t:
            return t
    return ""


def add_names(target: list[str], names: Iterable[str]) -> None:
    """Append non-empty names not already present."""
    for n in names:
        n = clean(n)
        if n and n not in target:
            target.append(n)
