"""The description as a tree of sections: headings (by tag or by their shape) and paragraphs."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from service.corpus.record import Section
from training.ingest.xmltext import DROP_TAGS, clean, local, text_of

_HEADING_TAGS = frozenset({"heading", "H"})
_PARA_TAGS = frozenset({"p", "PARA", "paragraph"})
_CONTAINER_SKIP = frozenset({"drawings", "ep-reference-list", "figure", "img"})


class _TreeBuilder:
    def __init__(self) -> None:
        self.top: list[Section] = []
        self.stack: list[tuple[int, Section]] = []

    def heading(self, text: str, level: int) -> None:
        sec = Section(heading=text)
        # a heading closes the sections of the same or a deeper level, and the lead section (heading None)
        while self.stack and (self.stack[-1][0] >= level or self.stack[-1][1].heading is None):
            self.stack.pop()
        if self.stack:
            self.stack[-1][1].sections.append(sec)
        else:
            self.top.append(sec)
        self.stack.append((level, sec))

    def paragraph(self, text: str) -> None:
        if not text:
            return
        if not self.stack:
            sec = Section(heading=None)
            self.top.append(sec)
            self.stack.append((0, sec))
        self.stack[-1][1].paragraphs.append(text)


def _heading_level(el: Any) -> int:
    raw = el.get("level") or el.get("LVL") or el.get("lvl") or "1"
    try:
        return max(1, int(raw))
    except ValueError:
        return 1


def description_tree(
    desc: Any | None, skip: frozenset[str] = _CONTAINER_SKIP, drop: frozenset[str] = DROP_TAGS
) -> list[Section]:
    """Description element -> list of top-level :class:`Section` (headings with ``level`` nest deeper ones).

    Paragraphs before the first heading go into a section with heading ``None``.
    """
    if desc is None:
        return []
    builder = _TreeBuilder()

    def visit(el: Any) -> None:
        for child in el:
            if not isinstance(child.tag, str):
                continue
            name = local(child.tag)
            if name in skip:
                continue
            if name in _HEADING_TAGS:
                text = text_of(child, drop)
                if text:
                    builder.heading(text, _heading_level(child))
            elif name in _PARA_TAGS:
                builder.paragraph(text_of(child, drop))
            elif len(child) and any(local(g.tag) in _HEADING_TAGS | _PARA_TAGS for g in child.iter()):
                visit(child)
            else:
                builder.paragraph(text_of(child, drop))

    visit(desc)
    return builder.top


_PARA_NUM_RE = re.compile(r"^\s*\[\d{3,5}\]\s*")
_BLANK_LINE_RE = re.compile(r"\n[ \t]*\n")


def split_preformatted(text: str) -> list[str]:
    """A ``<pre>`` block of a whole description -> its paragraphs (separated by blank lines), whitespace collapsed."""
    return [p for p in (clean(b) for b in _BLANK_LINE_RE.split(text)) if p]


def _heading_shaped(text: str) -> bool:
    """A short line without closing punctuation (``Field of Invention``, ``BACKGROUND OF THE INVENTION``)."""
    return 0 < len(text) <= 100 and len(text.split()) <= 12 and text[-1] not in ".,;:" and any(
        c.isalpha() for c in text)


def _caps_heading(text: str) -> bool:
    letters = [c for c in text if c.isalpha()]
    return _heading_shaped(text) and len(letters) >= 4 and all(c.isupper() for c in letters)


def tree_from_blocks(blocks: Iterable[tuple[bool, str]], headings_given: bool = False) -> list[Section]:
    """Text-only description blocks ``(is_heading, text)`` -> top-level :class:`Section` s.

    The leading paragraph number of US and OPS full texts (``[0001]``) is removed. When the source marks
    no headings (``headings_given`` False), they are recognised by shape: in a text whose paragraphs are
    mostly numbered, an unnumbered short line without closing punctuation is a heading (OPS, MAREC US);
    in an unnumbered text, a short line in capitals is (``BACKGROUND OF THE INVENTION``).
    """
    items = [(h, t) for h, t in blocks if t]
    numbered = [not h and bool(_PARA_NUM_RE.match(t)) for h, t in items]
    mostly_numbered = sum(numbered) >= max(2, len(items) // 2)
    builder = _TreeBuilder()
    for (is_heading, text), has_num in zip(items, numbered, strict=True):
        if has_num:
            text = _PARA_NUM_RE.sub("", text)
        elif not headings_given and not is_heading:
            is_heading = _heading_shaped(text) if mostly_numbered else _caps_heading(text)
        if is_heading:
            builder.heading(text, 1)
        else:
            builder.paragraph(text)
    return builder.top
