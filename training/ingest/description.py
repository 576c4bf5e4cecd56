"""The description as a tree of sections: headings (by tag or by their shape) and paragraphs."""

from __future__ import annotations

from typing import Any

from service.corpus.record import Section
from training.ingest.xmltext import DROP_TAGS, local, text_of

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
