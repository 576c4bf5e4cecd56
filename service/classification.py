"""The CPC/IPC classification scheme as a tree: parents, ancestors, children, titles, autocomplete.

Built from the CPC title list (``cpc-titles-YYYY-MM.tsv.gz``: one entry a line, ``symbol<TAB>dot
level<TAB>title``; the dot level is empty for sections, classes and subclasses, ``0`` for a main group
and ``1``-``12`` for subgroups, whose parent is the nearest earlier entry one dot level up), or from
bare codes (``ClassificationScheme.from_codes``: a purely syntactic tree without titles).

Symbols are normalised by :func:`service.codes.parse_code` (``H01F 27/14`` -> ``H01F27/14``, bare
sections ``H`` and classes ``H01`` too). Codes that are not in the scheme (IPC codes of the corpus,
older CPC versions) still get a level, a syntactic parent chain and a truncation
(:mod:`service.codes`), so callers never need to special-case them.
"""

from __future__ import annotations

import bisect
import gzip
import io
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, NamedTuple

from service.codes import (
    ClassificationError,
    check_level,
    level_rank,
    looks_like_code_prefix,
    normalise_code,
    parse_code,
    syntactic_level,
    syntactic_parent,
    truncate_code,
)

__all__ = ["ClassificationError", "ClassificationScheme", "SchemeMatch"]

_WORD_RE = re.compile(r"[^\W_]+")
_PAREN_RE = re.compile(r"\([^()]*\)")


class SchemeMatch(NamedTuple):
    """One autocomplete hit."""

    code: str
    title: str | None
    level: str


def _open_text(path: Path) -> IO[str]:
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8")
    return open(path, encoding="utf-8")  # noqa: SIM115 - closed by the caller's with-block


class ClassificationScheme:
    """A classification tree (CPC title list or syntactic tree). Lookups accept raw or normalised codes."""

    def __init__(self) -> None:
        self._order: list[str] = []  # codes in scheme order (the order of the title file)
        self._index: dict[str, int] = {}  # code -> position in _order
        self._parent: dict[str, str] = {}
        self._children: dict[str, list[str]] = {}
        self._title: dict[str, str] = {}
        self._dots: dict[str, int] = {}  # subgroup dot level (main groups: 0)
        self._sorted: list[str] | None = None  # lazily built for prefix search
        self._folded: list[str] | None = None  # lazily built for title-word search

    # ----------------------------------------------------------------- construction
    def _add(self, code: str, parent: str | None, title: str | None, dots: int | None) -> None:
        if code in self._index:
            raise ClassificationError(f"duplicate classification symbol {code!r}")
        self._index[code] = len(self._order)
        self._order.append(code)
        if parent is not None:
            self._parent[code] = parent
            self._children.setdefault(parent, []).append(code)
        if title:
            self._title[code] = title
        if dots is not None:
            self._dots[code] = dots

    @classmethod
    def load(cls, path: str | Path) -> ClassificationScheme:
        """Parse a CPC title list (``.tsv`` or ``.tsv.gz``)."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"CPC title list not found: {path}")
        with _open_text(path) as fh:
            return cls.from_lines(fh, source=str(path))

    @classmethod
    def from_lines(cls, lines: Iterable[str], *, source: str = "<lines>") -> ClassificationScheme:
        """Parse title-list lines (``symbol<TAB>dot level<TAB>title``)."""
        scheme = cls()
        by_dots: list[str] = []  # by_dots[k] = latest entry at dot level k (k=0: main group)
        for lineno, line in enumerate(lines, 1):
            line = line.rstrip("\r\n")
            if not line.strip():
                continue
            parts = line.split("\t", 2)
            if len(parts) != 3:
                raise ClassificationError(f"{source}:{lineno}: expected 3 tab-separated fields, got {len(parts)}")
            raw, dot_text, title = parts
            code = normalise_code(raw)
            if code is None:
                raise ClassificationError(f"{source}:{lineno}: not a classification symbol: {raw!r}")
            level = syntactic_level(code)
            dot_text = dot_text.strip()
            if not dot_text:
                if level not in ("section", "class", "subclass"):
                    raise ClassificationError(f"{source}:{lineno}: {code} is a {level} but has no dot level")
                by_dots.clear()
                scheme._add(code, syntactic_parent(code), title.strip(), None)
                continue
            try:
                dots = int(dot_text)
            except ValueError:
                raise ClassificationError(f"{source}:{lineno}: dot level {dot_text!r} is not a number") from None
            if dots < 0 or (dots == 0) != (level == "main_group"):
                raise ClassificationError(f"{source}:{lineno}: dot level {dots} does not fit {level} {code}")
            parent: str | None
            if dots == 0:
                parent = syntactic_parent(code)  # a main group hangs under its subclass
            elif dots <= len(by_dots):
                parent = by_dots[dots - 1]
            else:
                raise ClassificationError(
                    f"{source}:{lineno}: {code} at dot level {dots} has no preceding entry at level {dots - 1}"
                )
            del by_dots[dots:]
            by_dots.append(code)
            scheme._add(code, parent, title.strip(), dots)
        if not scheme._order:
            raise ClassificationError(f"{source}: no classification entries")
        return scheme

    @classmethod
    def from_codes(cls, codes: Iterable[str]) -> ClassificationScheme:
        """A syntactic tree (no titles) holding every code and all its ancestors by shape.

        Invalid codes raise :class:`ClassificationError`. Children keep the order of first appearance.
        """
        scheme = cls()
        for raw in codes:
            code = parse_code(raw)
            chain: list[str] = []
            node: str | None = code
            while node is not None and node not in scheme._index:
                chain.append(node)
                node = syntactic_parent(node)
            for c in reversed(chain):
                level = syntactic_level(c)
                dots = 0 if level == "main_group" else (1 if level == "subgroup" else None)
                scheme._add(c, syntactic_parent(c), None, dots)
        return scheme

    # ----------------------------------------------------------------- lookups
    def __contains__(self, code: object) -> bool:
        if not isinstance(code, str):
            return False
        norm = normalise_code(code)
        return norm is not None and norm in self._index

    def __len__(self) -> int:
        return len(self._order)

    def __iter__(self) -> Iterator[str]:
        return iter(self._order)

    def __repr__(self) -> str:
        return f"ClassificationScheme({len(self._order)} entries)"

    def level_of(self, code: str) -> str:
        """``'section'``, ``'class'``, ``'subclass'``, ``'main_group'`` or ``'subgroup'`` (by shape)."""
        return syntactic_level(parse_code(code))

    def dot_level(self, code: str) -> int | None:
        """Dot level in the scheme (0 for main groups, 1-12 for subgroups); ``None`` above or when unknown."""
        return self._dots.get(parse_code(code))

    def parent(self, code: str) -> str | None:
        """The parent code (``None`` for a section). Codes not in the scheme get their syntactic parent."""
        norm = parse_code(code)
        if norm in self._index:
            return self._parent.get(norm)
        return syntactic_parent(norm)

    def ancestors(self, code: str) -> list[str]:
        """All ancestors, nearest first, ending with the section. ``'H01F27/14'`` ->
        ``['H01F27/12', 'H01F27/10', 'H01F27/08', 'H01F27/00', 'H01F', 'H01', 'H']`` in CPC.

        For a code not in the scheme the chain goes up by shape until it reaches a known code.
        """
        out: list[str] = []
        node = self.parent(code)
        while node is not None:
            out.append(node)
            node = self._parent.get(node) if node in self._index else syntactic_parent(node)
        return out

    def children(self, code: str) -> list[str]:
        """Direct children in scheme order (empty for leaves and unknown codes)."""
        return list(self._children.get(parse_code(code), ()))

    def title(self, code: str) -> str | None:
        """The scheme title, or ``None`` when the code is unknown or the scheme has no titles."""
        return self._title.get(parse_code(code))

    def titles_path(self, code: str) -> list[str]:
        """Titles from the section down to the code (subgroup titles are often fragments that need them)."""
        norm = parse_code(code)
        chain = [norm, *self.ancestors(norm)]
        return [self._title[c] for c in reversed(chain) if c in self._title]

    def truncate(self, code: str, level: str) -> str:
        """The code's ancestor-or-self at ``level``: ``truncate('H01F27/14', 'subclass') == 'H01F'``.

        ``main_group`` follows the scheme tree when the code is known (CPC 2000-series subgroups such as
        ``H05H2007/127`` sit under ``H05H7/00``) and the shape otherwise (``'G06F17/30'`` -> ``'G06F17/00'``).
        Asking for a level below the code's own raises :class:`ClassificationError`.
        """
        check_level(level)
        norm = parse_code(code)
        own = syntactic_level(norm)
        if level_rank(level) > level_rank(own):
            raise ClassificationError(f"cannot truncate {own} {norm} to the finer level {level!r}")
        if level == "main_group" and own == "subgroup":
            for anc in self.ancestors(norm):  # the scheme's main group, else the one by shape
                if syntactic_level(anc) == "main_group":
                    return anc
        cut = truncate_code(norm, level)
        if cut is None:  # pragma: no cover - the level is not finer than the code's own
            raise ClassificationError(f"cannot truncate {own} {norm} to {level!r}")
        return cut

    def edges(self) -> Iterator[tuple[str, str]]:
        """Every ``(parent, child)`` pair, in scheme order of the child."""
        parent = self._parent
        for code in self._order:
            p = parent.get(code)
            if p is not None:
                yield p, code

    # ----------------------------------------------------------------- autocomplete
    def _depth(self, code: str) -> int:
        rank = level_rank(syntactic_level(code))
        return rank + self._dots.get(code, 0) if rank >= 3 else rank

    def search(self, query: str, limit: int = 20) -> list[SchemeMatch]:
        """Autocomplete.

        A code-like query (spaces ignored: ``'h01f 27'``) returns the codes starting with it, broader codes
        first, then scheme order. Otherwise (or when no code matches) it returns codes whose title has a
        word starting with every query word (``'oil cool'``), ignoring the parenthesised references to
        other places; shorter titles (denser matches) first, then broader codes, then scheme order.
        """
        if limit <= 0:
            return []
        compact = re.sub(r"\s+", "", query).upper()
        if not compact:
            return []
        index = self._index
        if looks_like_code_prefix(compact):
            hits = self._prefix_hits(compact)
            if hits:
                hits.sort(key=lambda c: (self._depth(c), index[c]))
                return [SchemeMatch(c, self._title.get(c), syntactic_level(c)) for c in hits[:limit]]
        scored = self._word_hits(query)
        scored.sort(key=lambda hit: (hit[1], self._depth(self._order[hit[0]]), hit[0]))
        out = []
        for i, _ in scored[:limit]:
            code = self._order[i]
            out.append(SchemeMatch(code, self._title.get(code), syntactic_level(code)))
        return out

    def _prefix_hits(self, prefix: str) -> list[str]:
        if self._sorted is None:
            self._sorted = sorted(self._order)
        keys = self._sorted
        lo = bisect.bisect_left(keys, prefix)
        hi = bisect.bisect_left(keys, prefix + "\uffff")
        return keys[lo:hi]

    def _word_hits(self, query: str) -> list[tuple[int, int]]:
        """``(position, title word count)`` of every entry whose title matches all query words."""
        words = [w.casefold() for w in _WORD_RE.findall(query)]
        if not words:
            return []
        if self._folded is None:
            self._folded = [
                " " + " ".join(_WORD_RE.findall(_strip_refs(self._title.get(c, "")).casefold())) for c in self._order
            ]
        needles = sorted((" " + w for w in words), key=len, reverse=True)  # longest (most selective) first
        first, rest = needles[0], needles[1:]
        folded = self._folded
        idx = [i for i, t in enumerate(folded) if first in t]
        for needle in rest:
            idx = [i for i in idx if needle in folded[i]]
        return [(i, folded[i].count(" ")) for i in idx]


def _strip_refs(title: str) -> str:
    """Drop parenthesised references to other places (nested too) and CPC's curly braces."""
    prev = None
    while prev != title:
        prev = title
        title = _PAREN_RE.sub(" ", title)
    return title.replace("{", " ").replace("}", " ")
