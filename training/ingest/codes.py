"""IPC/CPC codes in the forms the offices wrote them (the code syntax itself is :mod:`service.codes`)."""

from __future__ import annotations

import re
from collections.abc import Iterable

from service.codes import normalise_code, truncate_code

_EDITION_RE = re.compile(r"^\s*\d{1,2}\s*(?=[A-H]\s*\d{2}\s*[A-Z])")
_SUBCLASS_HEAD_RE = re.compile(r"^\s*([A-HY])\s*(\d{2})\s*([A-Z])(.*)$")
_GROUP_ONLY_RE = re.compile(r"^\s*(\d{1,4})\s*/\s*(\d{1,6})")


def normalise_ipc(raw: str) -> str | None:
    """Normalise an IPC/CPC symbol in any of the forms the offices used.

    Accepts IPC-R text (``'G03G  15/08   20060101AFI...'``), old EP ``B511`` text with an edition prefix
    (``'2C 07D 307/12 A'``, ``' 7A 01B  45/00   A'``), ``'// A01N43/08'``, and the USPTO fixed-width
    IPC-7 form without slash (``'A45F  504'`` = A45F 5/04, ``'A43B 1314'`` = A43B 13/14). The code
    syntax itself is :func:`service.codes.normalise_code` (subclass or finer, as in a record).
    """
    text = raw.strip().lstrip("/").strip()
    text = _EDITION_RE.sub("", text)
    norm = normalise_code(text, coarsest="subclass")
    if norm is not None and "/" in norm:
        return norm
    m = _SUBCLASS_HEAD_RE.match(text.upper())
    if m and "/" not in m.group(4):
        rest = m.group(4)
        body = rest.rstrip()
        # fixed width: 3 characters main group, then the subgroup (at least 2 digits)
        if len(body) >= 5 and re.fullmatch(r"[ \d]{3}\d{2,6}", body[:3] + body[3:].split(" ")[0]):
            group = body[:3].strip()
            sub = body[3:].split(" ")[0]
            if group.isdigit():
                return normalise_code(f"{m.group(1)}{m.group(2)}{m.group(3)}{group}/{sub}")
    return norm


def split_ipc_list(raw: str) -> list[str]:
    """Codes from an old-style list such as ``'C07D 307/12, 405/12; A01N 43/08'`` (subclass carried over)."""
    out: list[str] = []
    subclass: str | None = None
    for piece in re.split(r"[,;]", raw):
        if not piece.strip():
            continue
        code = normalise_ipc(piece)
        if code is not None:
            subclass = truncate_code(code, "subclass")
            out.append(code)
            continue
        m = _GROUP_ONLY_RE.match(piece)
        if m and subclass:
            out.append(f"{subclass}{int(m.group(1))}/{m.group(2)}")
    return out


def add_codes(target: list[str], codes: Iterable[str | None]) -> None:
    """Append normalised, non-duplicate codes."""
    for code in codes:
        if code and code not in target:
            target.append(code)


_ECLA_RE = re.compile(r"^\s*([A-H])\s*(\d{2})\s*([A-Z])\s*(\d{1,4})\s*/\s*(\d{1,6})")


def ecla_symbol(raw: str) -> str:
    """An ECLA (or ICO) symbol as published, whitespace removed: ``'B29C  65/18+F4'`` -> ``'B29C65/18+F4'``."""
    return re.sub(r"\s+", "", raw)


def ecla_to_cpc(raw: str) -> str | None:
    """The CPC-compatible part of an ECLA classification symbol, or None for an ICO indexing code.

    ECLA, the EPO's internal extension of IPC (until 2012), is the ancestor of CPC: CPC kept ECLA's IPC
    groups and turned ECLA's letter subdivisions (``B60C15/00D2``) into numbered subgroups that cannot be
    derived from the symbol. So the IPC group part of an ECLA symbol is kept as a CPC code, the subdivision
    and any ``+`` combination part dropped: ``'B60C15/00D2'`` -> ``'B60C15/00'``, ``'A61K31/135+M'`` ->
    ``'A61K31/135'``, ``'C08L  23/08A1+B2A'`` -> ``'C08L23/08'``. ICO indexing codes (``K61B17:32A4``,
    ``Y01N6:00``: a section letter outside A-H, ``:`` for ``/``) have no CPC counterpart here: None. The
    symbols as published are kept in the record's ``ecla`` list.
    """
    m = _ECLA_RE.match(raw.upper())
    if not m:
        return None
    section, cls, sub, group, subgroup = m.groups()
    return f"{section}{cls}{sub}{int(group)}/{subgroup}"
