"""A parsed query (:mod:`service.querylang.syntax`) evaluated over the word index (:mod:`service.querylang.words`):
the documents it matches, and what each of its terms was expanded to.

- A word matches itself only (``transform`` is not ``transformer``: truncate, ``transform*``); ``*`` and ``?`` are
  expanded to the index's words (at most :data:`MAX_EXPANSION` per term: more is an error that says how many);
- across languages: a word (not a phrase, not ``=word``, not a wildcard) also matches its translations: the word is
  analysed (stemmed) in the language the query names (``lang``), else in each language whose text in the index has
  it (every language for a word no text has); each stem the index's translation tables know is translated into the
  other languages (the :data:`TOP_TRANSLATIONS` most probable with p >= :data:`MIN_PROBABILITY`), and each
  translated stem matches every word of that language's text in the index with that stem. ``drop`` removes
  translations by word;
- ``NEAR/n``: a word, phrase or OR-group within n words of the other, in either order, in one field and one
  paragraph (the spans do not overlap); ``ADJ/n``: the right one starts 1 to n words after the left one ends; ``SENT``
  and ``PARA``: their first words in one sentence, one paragraph. A proximity group's occurrences are its operands'
  occurrences that satisfy it (what an outer proximity measures from);
- ``NOT`` is every document of the index but those; dates: a document with no such date matches no range.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Any

import numpy as np

from service.querylang.syntax import (
    FIELD_NUMBER,
    NAME_FIELDS,
    TEXT_FIELDS,
    TOKEN_FIELDS,
    WILDCARDS,
    Bool,
    DateRange,
    Match,
    Near,
    Node,
    Not,
    Term,
)
from service.querylang.words import EPOCH, MISSING_DATE, WordSegment

MAX_EXPANSION = 1000
TOP_TRANSLATIONS = 3
MIN_PROBABILITY = 0.15
DATE_COLUMN = {"pd": 0, "ad": 1, "prd": 2}
LANGS = ("en", "de", "fr")


class QueryLanguageError(ValueError):
    """A query that parses but cannot run as asked (a wildcard matching too many words, proximity over AND)."""


@dataclass
class Expansion:
    """What one term of the query matched: its own words and, by language, its translations' words."""

    term: str
    fields: tuple[str, ...]
    words: list[str] = field(default_factory=list)
    translations: dict[str, list[str]] = field(default_factory=dict)
    dropped: list[str] = field(default_factory=list)
    documents: int = 0

    def all_words(self) -> list[str]:
        return list(dict.fromkeys([*self.words, *(w for ws in self.translations.values() for w in ws)]))

    def to_json(self) -> dict[str, Any]:
        return {"term": self.term, "fields": list(self.fields), "words": self.words,
                "translations": self.translations, "dropped": self.dropped, "documents": self.documents}


Spans = tuple[np.ndarray, np.ndarray, np.ndarray]  # key (row * 16 + field), start, end: int64, by key then start


class Evaluator:
    """Evaluates trees over a generation's word segments (``(segment, first row)``, in row order).

    ``analyzers`` and ``tables`` (``{(src, tgt): TranslationTable}``): the index's, for the translations (None: words
    are not translated, and :attr:`notes` says so)."""

    def __init__(self, segments: Sequence[tuple[WordSegment, int]], n_rows: int, *,
                 analyzers: Mapping[str, Any] | None = None, tables: Mapping[tuple[str, str], Any] | None = None,
                 drop: Sequence[str] = (), translate: bool = True, lang: str | None = None) -> None:
        self.segments, self.n_rows = list(segments), n_rows
        self.lang = lang  # the language the query names (None: each word's own, from the index's text)
        self.analyzers, self.tables = analyzers, tables
        self.drop = {d.casefold() for d in drop}
        self.translate = translate
        self.expansions: dict[Term, Expansion] = {}
        self.notes: list[str] = []
        # each node's rows per segment, computed once a query (the mask, the terms' counts and the alternatives
        # each read them; the arrays are shared, never written)
        self._memo: dict[tuple[int, Node], np.ndarray] = {}
        self._spans_memo: dict[tuple[int, Node], Spans] = {}

    # ---- the whole query ------------------------------------------------------------------------------
    def mask(self, node: Node) -> np.ndarray:
        """bool [n_rows]: the documents ``node`` matches."""
        parts = [self._rows(node, seg) for seg, _ in self.segments]
        out = np.concatenate(parts) if parts else np.zeros(0, dtype=bool)
        if len(out) != self.n_rows:
            raise ValueError(f"the word index has {len(out)} rows, the doc store {self.n_rows}")
        for term, exp in self.expansions.items():
            exp.documents = int(np.concatenate([self._rows(term, seg) for seg, _ in self.segments]).sum())
        return out

    def alternatives(self, node: Node) -> list[tuple[str, np.ndarray]]:
        """The alternatives a result can say it satisfied, with their masks: the parts of the query when it is an OR,
        else the parts of each OR among the parts of its AND (the other parts every result satisfies)."""
        if isinstance(node, Bool) and node.op == "or":
            chosen = list(node.parts)
        elif isinstance(node, Bool):
            chosen = [q for p in node.parts if isinstance(p, Bool) and p.op == "or" for q in p.parts]
        else:
            chosen = []
        return [(p.show(), np.concatenate([self._rows(p, seg) for seg, _ in self.segments])) for p in chosen]

    def fields(self, node: Node, rows: Sequence[int]) -> dict[int, dict[str, list[str]]]:
        """Where each of ``rows`` matched the query: its clauses of words that are not negated (a word, a phrase, a
        proximity), as :meth:`Node.show` writes them, each with the fields (``ti``, ``ab``, ``cl``, ``desc``, ``pa``,
        ``in``) the document has it in (through a translation too); a row that has none of them is left out."""
        clauses = positive_clauses(node)
        out: dict[int, dict[str, list[str]]] = {}
        if not clauses or not len(rows):
            return out
        wanted = np.asarray(sorted(set(rows)), dtype=np.int64)
        for seg, start in self.segments:
            local = wanted[(wanted >= start) & (wanted < start + seg.n_rows)] - start
            if not len(local):
                continue
            for clause in clauses:
                keys = self._spans(clause, seg)[0]
                at = np.isin(keys // 16, local)
                for key in np.unique(keys[at]).tolist():  # (sorted: by row, then field number)
                    out.setdefault(start + key // 16, {}).setdefault(clause.show(), []).append(TOKEN_FIELDS[key % 16])
        return out

    # ---- expansions -----------------------------------------------------------------------------------
    def expand(self, term: Term) -> Expansion:
        """The words ``term`` (one word) matches, computed once per query."""
        exp = self.expansions.get(term)
        if exp is not None:
            return exp
        exp = Expansion(term.show(), term.fields)
        (word,) = term.words
        if term.wildcard:
            found: set[str] = set()
            for seg, _ in self.segments:
                found.update(w for w, _ in seg.matching(word))
                if len(found) > MAX_EXPANSION:
                    raise QueryLanguageError(
                        f"{word!r} matches more than {MAX_EXPANSION} words of the index: give more letters before "
                        "the * (or fewer wildcards)")
            exp.words = sorted(found)
        else:
            exp.words = [word]
            if not term.exact and self.translate and set(term.fields) & set(TEXT_FIELDS):
                self._translations(word, exp)
        self.expansions[term] = exp
        return exp

    def _translations(self, word: str, exp: Expansion) -> None:
        if not self.analyzers or not self.tables:
            note = "no translation tables here: the query's words were not translated"
            if note not in self.notes:
                self.notes.append(note)
            return
        # from the language the query names, else from each language whose text in the index has the word (a word
        # no text has: from every language)
        sources = [self.lang] if self.lang else \
            sorted(set().union(*(seg.languages(word) for seg, _ in self.segments))) or list(LANGS)
        targets: dict[str, set[str]] = {}
        for src in sources:
            analyze = self.analyzers.get(src)
            if analyze is None:
                continue
            stems = analyze(word)
            if len(stems) != 1:
                continue
            for tgt in LANGS:
                table = self.tables.get((src, tgt)) if tgt != src else None
                if table is None or stems[0] not in table:
                    continue
                best = [t for t, p in table.lookup(stems[0])[:TOP_TRANSLATIONS] if p >= MIN_PROBABILITY]
                targets.setdefault(tgt, set()).update(best)
        for tgt, stems_ in sorted(targets.items()):
            analyze = self.analyzers.get(tgt)
            if analyze is None:
                continue
            words: set[str] = set()
            for seg, _ in self.segments:
                by_stem = seg.stems(tgt, analyze)
                for s in stems_:
                    words.update(seg.vocab[i] for i in by_stem.get(s, ()))
            words.discard(word)
            kept = sorted(w for w in words if w not in self.drop)
            exp.dropped.extend(sorted(w for w in words if w in self.drop))
            if kept:
                exp.translations[tgt] = kept

    # ---- one segment ----------------------------------------------------------------------------------
    def _rows(self, node: Node, seg: WordSegment) -> np.ndarray:
        key = (id(seg), node)
        got = self._memo.get(key)
        if got is None:
            got = self._memo[key] = self._evaluate(node, seg)
        return got

    def _evaluate(self, node: Node, seg: WordSegment) -> np.ndarray:
        n = seg.n_rows
        if isinstance(node, Bool):
            masks = [self._rows(p, seg) for p in node.parts]
            out = masks[0].copy()
            for m in masks[1:]:
                if node.op == "and":
                    out &= m
                else:
                    out |= m
            return out
        if isinstance(node, Not):
            return ~self._rows(node.part, seg)
        if isinstance(node, DateRange):
            col = np.asarray(seg.dates[:, DATE_COLUMN[node.field]])
            ok = col != MISSING_DATE
            if node.start is not None:
                ok &= col >= _days(node.start)
            if node.end is not None:
                ok &= col < _days(node.end)
            return ok
        out = np.zeros(n, dtype=bool)
        if isinstance(node, Match):
            keys, _ = seg.occurrences(self._match_ids(node, seg), (FIELD_NUMBER[node.field],))
        else:
            keys = self._spans(node, seg)[0]
        out[(keys // 16).astype(np.int64)] = True
        return out

    def _match_ids(self, node: Match, seg: WordSegment) -> list[int]:
        v = node.value.casefold()
        if node.field in ("pc", "kind"):
            i = seg.word_id(v)
            return [] if i is None else [i]
        if node.field == "pn":
            return [i for _, i in seg.prefixed(v)]
        # cpc / ipc: a code and the codes below it (H01F, H01F27 = H01F27/..., H01F27/12 = H01F27/12...)
        if "/" not in v:
            prefix = v + "/" if len(v) > 4 else v
            return [i for _, i in seg.prefixed(prefix)]
        if v.endswith("/00"):
            return [i for _, i in seg.prefixed(v[:-2])]
        return [i for w, i in seg.prefixed(v) if w == v or w[len(v)].isdigit()]

    def _word_spans(self, term: Term, seg: WordSegment, word_index: int = 0) -> tuple[np.ndarray, np.ndarray]:
        fields = tuple(FIELD_NUMBER[f] for f in term.fields)
        one = Term((term.words[word_index],), term.fields, term.exact, pos=term.pos)
        words = self.expand(one).all_words() if len(term.words) == 1 else self._phrase_word(one)
        ids = [i for w in words if (i := seg.word_id(w)) is not None]
        keys, pos = seg.occurrences(ids, fields)
        return keys.astype(np.int64), pos

    def _phrase_word(self, one: Term) -> list[str]:
        """A phrase's word: as written (a wildcard expanded), not translated."""
        if one.wildcard:
            return self.expand(one).words
        return [one.words[0]]

    def _spans(self, node: Node, seg: WordSegment) -> Spans:
        key = (id(seg), node)
        got = self._spans_memo.get(key)
        if got is None:
            got = self._spans_memo[key] = self._compute_spans(node, seg)
        return got

    def _compute_spans(self, node: Node, seg: WordSegment) -> Spans:
        if isinstance(node, Term):
            keys, pos = self._word_spans(node, seg)
            if len(node.words) > 1:
                comb = (keys << 32) | pos
                for i in range(1, len(node.words)):
                    k2, p2 = self._word_spans(node, seg, i)
                    comb = comb[np.isin(comb + i, (k2 << 32) | p2)]
                keys, pos = comb >> 32, comb & 0xFFFFFFFF
                for term in (Term((w,), node.fields, node.exact, pos=node.pos) for w in node.words):
                    if term.wildcard:
                        self.expand(term)
                self.expansions.setdefault(node, Expansion(node.show(), node.fields, [" ".join(node.words)]))
                return keys, pos, pos + len(node.words) - 1
            return keys, pos, pos.copy()
        if isinstance(node, Bool) and node.op == "or":
            parts = [self._spans(p, seg) for p in node.parts]
            k = np.concatenate([p[0] for p in parts])
            s = np.concatenate([p[1] for p in parts])
            e = np.concatenate([p[2] for p in parts])
            order = np.lexsort((e, s, k))
            return k[order], s[order], e[order]
        if isinstance(node, Near):
            a, b = self._spans(node.left, seg), self._spans(node.right, seg)
            ma, mb = _near(a, b, node, seg)
            k = np.concatenate([a[0][ma], b[0][mb]])
            s = np.concatenate([a[1][ma], b[1][mb]])
            e = np.concatenate([a[2][ma], b[2][mb]])
            order = np.lexsort((e, s, k))
            return k[order], s[order], e[order]
        raise QueryLanguageError(f"proximity takes words, phrases and OR-groups of them, not {node.show()}")


def _days(d: date) -> int:
    return (d - EPOCH).days


def _after(x_key: np.ndarray, x_end: np.ndarray, y_key: np.ndarray, y_start: np.ndarray, n: int) -> np.ndarray:
    """For each x: some y of its key starts 1 to n words after x ends."""
    ys = np.sort((y_key << 32) | y_start)
    base = (x_key << 32) | x_end
    return np.searchsorted(ys, base + n, side="right") > np.searchsorted(ys, base + 1, side="left")


def _before(x_key: np.ndarray, x_start: np.ndarray, y_key: np.ndarray, y_end: np.ndarray, n: int) -> np.ndarray:
    """For each x: some y of its key ends 1 to n words before x starts."""
    ys = np.sort((y_key << 32) | y_end)
    base = (x_key << 32) | x_start
    return np.searchsorted(ys, base - 1, side="right") > np.searchsorted(ys, base - n, side="left")


def _unit_ids(seg: WordSegment, unit: str, keys: np.ndarray, starts: np.ndarray) -> np.ndarray:
    bounds = np.asarray(seg.sentences if unit == "sentence" else seg.paragraphs).astype(np.int64)
    return np.searchsorted(bounds, (keys << 32) | starts, side="right") - 1


def _near(a: Spans, b: Spans, node: Near, seg: WordSegment) -> tuple[np.ndarray, np.ndarray]:
    """Which occurrences of each side satisfy the proximity with some occurrence of the other."""
    if node.unit is not None:
        ua, ub = _unit_ids(seg, node.unit, a[0], a[1]), _unit_ids(seg, node.unit, b[0], b[1])
        return np.isin(ua, ub), np.isin(ub, ua)
    n = int(node.distance or 1)
    ma = _after(a[0], a[2], b[0], b[1], n)
    mb = _before(b[0], b[1], a[0], a[2], n)
    if not node.ordered:
        ma |= _before(a[0], a[1], b[0], b[2], n)
        mb |= _after(b[0], b[2], a[0], a[1], n)
    return ma, mb


_NO_WILDCARDS = str.maketrans("", "", WILDCARDS)
_WORD_FIELDS = frozenset((*TEXT_FIELDS, *NAME_FIELDS))


def positive_clauses(node: Node) -> list[Node]:
    """The query's clauses of words that are not negated: its terms in text or name fields, and its proximity
    clauses whole (their words count only where near each other), in order."""
    out: list[Node] = []

    def walk(n: Node) -> None:
        if isinstance(n, Near) or (isinstance(n, Term) and set(n.fields) & _WORD_FIELDS):
            out.append(n)
        elif isinstance(n, Bool):
            for p in n.parts:
                walk(p)

    walk(node)
    return list(dict.fromkeys(out))


def positive_words(node: Node) -> list[str]:
    """The words of the query's terms that are not negated (wildcards without their ``*`` and ``?``), in order:
    what the product's ranking orders the matching documents by."""
    out: list[str] = []

    def walk(n: Node, negated: bool) -> None:
        if isinstance(n, Term) and not negated and set(n.fields) & _WORD_FIELDS:
            out.extend(w.translate(_NO_WILDCARDS) for w in n.words)
        elif isinstance(n, Bool):
            for p in n.parts:
                walk(p, negated)
        elif isinstance(n, Not):
            walk(n.part, not negated)
        elif isinstance(n, Near):
            walk(n.left, negated)
            walk(n.right, negated)

    walk(node, False)
    return [w for w in dict.fromkeys(out) if len(w) > 1]


__all__ = ["MAX_EXPANSION", "Evaluator", "Expansion", "QueryLanguageError", "positive_clauses", "positive_words"]
