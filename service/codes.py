"""IPC/CPC classification codes: their syntax, in one place.

A code names a node at one of five levels (:data:`CODE_LEVELS`)::

    section  H          class  H01          subclass  H01F
    main_group  H01F27/00                   subgroup  H01F27/14

Normalised form (:func:`normalise_code`): upper case, no spaces, the main group without leading zeros
(``H01F 027/14`` -> ``H01F27/14``), the subgroup with its digits as written (``B05B 7/ 00`` ->
``B05B7/00``); text after a full code is ignored (IPC-R ``G03G  15/08  20060101AFI...``).
:func:`syntactic_level`, :func:`syntactic_parent` and :func:`truncate_code` take normalised codes;
:func:`code_fallbacks` and :func:`codes_at` normalise what they get. Levels, truncation and parents
are judged by the shape alone; the scheme-aware versions (CPC 2000-series subgroups under another
main group, dot levels, titles) live in :mod:`service.classification`, which builds on this module.

What each side accepts:

- records, query topics and the API's ``codes`` (:func:`normalise_codes`): subclass or finer
  (``coarsest="subclass"``): an office classifies a document at least to a subclass, and refusing
  ``H`` or ``H01`` there keeps national classes (US ``D11``) out of the IPC/CPC lists;
- filters and scheme lookups (:func:`parse_code`): any level, ``H`` .. ``H01F27/14``.

A record's codes (:func:`record_codes`) are its **CPC codes first, then its IPC codes**, duplicates
removed. CPC is the finer, current scheme (built on IPC, with many more subgroups), the code
embeddings are trained on the CPC tree, and the neural models were trained with codes in this
order: the order is part of the models' input (a convolution reads the code sequence, capped at
``CODES_MAX`` codes), so the document encodings, training and every query side use this one function.
For filters and the domain features the order does not matter (sets per level, :func:`codes_at`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from typing import Literal, Protocol, get_args

CodeLevel = Literal["section", "class", "subclass", "main_group", "subgroup"]
"""The levels, coarsest first: the one definition (filters, indexes, the API's ``code_filter``)."""
CODE_LEVELS: tuple[str, ...] = get_args(CodeLevel)

_RANK = {name: i for i, name in enumerate(CODE_LEVELS)}

_GROUP_RE = re.compile(r"^([A-HY])\s*(\d{2})\s*([A-Z])\s*(\d{1,4})\s*/\s*(\d{1,6})")  # trailing text allowed
_SUBCLASS_RE = re.compile(r"^([A-HY])\s*(\d{2})\s*([A-Z])$")
_CLASS_RE = re.compile(r"^([A-HY])\s*(\d{2})$")
_SECTION_RE = re.compile(r"^[A-HY]$")
_PREFIX_RE = re.compile(r"[A-HY](\d{1,2}([A-Z](\d{1,4}(/\d{0,6})?)?)?)?")


class ClassificationError(ValueError):
    """Text that is not a classification code, an unknown level, or a scheme file that cannot be parsed."""


class HasCodes(Protocol):
    """Anything with IPC and CPC code lists (a ``PatentRecord``, an evaluation ``Topic``)."""

    @property
    def ipc(self) -> Sequence[str]: ...

    @property
    def cpc(self) -> Sequence[str]: ...


def check_level(level: str) -> str:
    """``level`` itself when it is one of :data:`CODE_LEVELS`; :class:`ClassificationError` otherwise."""
    if level not in _RANK:
        raise ClassificationError(f"unknown level {level!r}; valid: {', '.join(CODE_LEVELS)}")
    return level


def level_rank(level: str) -> int:
    """0 for ``section`` .. 4 for ``subgroup``."""
    return _RANK[check_level(level)]


@functools.lru_cache(maxsize=1 << 16)
def normalise_code(raw: str, *, coarsest: str = "section") -> str | None:
    """The normalised code, or ``None`` for text that is no code or one coarser than ``coarsest``.

    ``'h'`` -> ``'H'``, ``'H 01'`` -> ``'H01'``, ``'h01f'`` -> ``'H01F'``, ``'B05B 7/ 00'`` -> ``'B05B7/00'``,
    ``'G03G  15/08 20060101AFI'`` -> ``'G03G15/08'``. With ``coarsest="subclass"`` (record codes)
    ``'H'`` and ``'H01'`` give ``None``. Memoised: every record read (a hit list's headers) normalises its codes,
    and the same codes recur across a collection.
    """
    text = raw.strip().upper()
    m = _GROUP_RE.match(text)
    if m:
        section, cls, sub, group, subgroup = m.groups()
        code = f"{section}{cls}{sub}{int(group)}/{subgroup}"
    elif (m := _SUBCLASS_RE.match(text)) or (m := _CLASS_RE.match(text)):
        code = "".join(m.groups())
    elif _SECTION_RE.match(text):
        code = text
    else:
        return None
    if coarsest != "section" and _RANK[syntactic_level(code)] < level_rank(coarsest):
        return None
    return code


def parse_code(raw: str) -> str:
    """The normalised code of any level; :class:`ClassificationError` (a ``ValueError``) for text that is no code."""
    code = normalise_code(raw)
    if code is None:
        raise ClassificationError(
            f"not a classification code: {raw!r} (expected e.g. H, H01, H01F, H01F27/00 or H01F27/14)"
        )
    return code


def normalise_codes(raw: Iterable[str], *, coarsest: str = "subclass") -> list[str]:
    """Normalised codes without duplicates, in order; :class:`ClassificationError` names the first that is none.

    The validator of a record's, a topic's and a search request's codes (subclass or finer by default).
    """
    out: list[str] = []
    for text in raw:
        code = normalise_code(text, coarsest=coarsest)
        if code is None:
            raise ClassificationError(f"not an IPC/CPC code: {text!r} (expected e.g. H01F27/14 or H01F)")
        if code not in out:
            out.append(code)
    return out


def looks_like_code_prefix(text: str) -> bool:
    """True for the start of a normalised code (``H``, ``H0``, ``H01F2``, ``H01F27/``): autocomplete input."""
    return _PREFIX_RE.fullmatch(text) is not None


def syntactic_level(code: str) -> str:
    """Level of a normalised code judged by its shape (``''`` for a shape that is no code)."""
    if "/" in code:
        return "main_group" if code.rsplit("/", 1)[1] == "00" else "subgroup"
    return ("section", "", "class", "subclass")[len(code) - 1] if len(code) in (1, 3, 4) else ""


def syntactic_parent(code: str) -> str | None:
    """Parent of a normalised code by shape: subgroup -> main group -> subclass -> class -> section -> None."""
    level = syntactic_level(code)
    if level == "subgroup":
        return code.rsplit("/", 1)[0] + "/00"
    if level == "main_group":
        return code[:4]
    if level == "subclass":
        return code[:3]
    if level == "class":
        return code[:1]
    return None


def code_fallbacks(code: str) -> list[str]:
    """The code (normalised) and its syntactic ancestors: ``H01F27/14`` -> ``[H01F27/14, H01F27/00, H01F, H01, H]``.

    Empty for text that is no code.
    """
    out: list[str] = []
    node = normalise_code(code)
    while node:
        out.append(node)
        node = syntactic_parent(node)
    return out


def truncate_code(code: str, level: str) -> str | None:
    """A normalised code truncated by shape; ``None`` when the code is coarser than ``level``.

    ``H01F27/14``: section ``H``, class ``H01``, subclass ``H01F``, main_group ``H01F27/00``,
    subgroup ``H01F27/14``.
    """
    check_level(level)
    if level == "section":
        return code[:1] if code else None
    if level == "class":
        return code[:3] if len(code) >= 3 else None
    if level == "subclass":
        return code[:4] if len(code) >= 4 else None
    if "/" not in code:
        return None
    if level == "main_group":
        return code.split("/", 1)[0] + "/00"
    return code


def record_codes(item: HasCodes) -> list[str]:
    """A record's (or topic's) codes: CPC first, then IPC, duplicates removed (see the module docstring)."""
    return list(dict.fromkeys([*item.cpc, *item.ipc]))


def codes_at(codes: Iterable[str], level: str) -> list[str]:
    """Distinct codes truncated to ``level``, in order (codes coarser than the level and non-codes dropped)."""
    check_level(level)
    out: dict[str, None] = {}
    for raw in codes:
        code = normalise_code(raw)
        if code is None:
            continue
        t = truncate_code(code, level)
        if t is not None:
            out.setdefault(t, None)
    return list(out)
