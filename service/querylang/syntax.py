"""The query language's syntax: the grammar (parsed by lark), the tree it gives, and the errors it raises.

The language (docs/QUERY_LANGUAGE.md has the table and examples):

- words and ``"phrases"``; inside a word Espacenet's wildcards: ``*`` (any run of characters, none included), ``?``
  (zero or one character: ``colo?r`` is ``color`` and ``colour``) and ``#`` (exactly one character);
  ``="word"`` or ``=word``: the word as written, untranslated;
- ``AND``, ``OR``, ``NOT`` (any case) and parentheses; two clauses side by side are joined by AND; precedence, from
  tightest: proximity, NOT, AND, OR;
- proximity between words, phrases and OR-groups of them: ``NEAR/n`` (at most n words apart, either order),
  ``ADJ/n`` (the right one 1 to n words after the left), ``NEAR`` and ``ADJ`` alone (n = 10 and 1), ``SENT`` (in one
  sentence), ``PARA`` (in one paragraph), and Espacenet's spellings ``prox/distance<=n``, ``prox/distance<=n/ordered``,
  ``prox/unit=sentence``, ``prox/unit=paragraph``;
- fields, as ``field=value`` (``field=(...)`` for a group): text ``ti`` ``ab`` ``cl`` ``desc`` and Espacenet's groups
  of them (:data:`GROUPS`: ``txt`` ``ta`` ``ia`` ``ftxt`` ``nftxt``), names ``pa`` ``in``, ``pn`` (publication number,
  any prefix: ``pn=EP064``), ``pc`` (country), ``kind``, ``cpc`` and ``ipc`` (a code covers the codes below it:
  ``cpc=H01F27`` is every H01F27/ group; ``cl=`` with a classification symbol is Espacenet's ``cl``, CPC or IPC),
  dates ``pd`` ``ad`` (filing) ``prd`` (priority) with ``= < <= > >=`` or ``within "2000,2005"``, a year, a year and
  month or a day (``2001``, ``2001-05``, ``2001-05-17``, ``20010517``, ``17/05/2001``); the long names
  (``title=``, ``applicant=``, ``publication_date=``...) are aliases; Espacenet's relations ``ti all "a b"`` (every
  word) and ``ti any "a b"`` (one of them), and its proximity ``prox/distance<n`` (fewer than n words apart) and
  ``prox/ordered``.

:func:`parse` gives the tree (:class:`Node` subclasses); a text that does not parse raises :class:`QuerySyntaxError`
with the character position and what was expected there. :func:`looks_like_query` says whether a text is meant as the
language (``auto`` in the API) rather than free text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken, VisitError

TEXT_FIELDS = ("ti", "ab", "cl", "desc")
NAME_FIELDS = ("pa", "in")
VALUE_FIELDS = ("pn", "pc", "kind", "cpc", "ipc")
"""The fields matched by value (a number's prefix, a country, a kind, a code and those below it), not by words."""
TOKEN_FIELDS = (*TEXT_FIELDS, *NAME_FIELDS, *VALUE_FIELDS)
"""The fields of the word index, in the order of their numbers (:data:`FIELD_NUMBER`)."""
FIELD_NUMBER = {f: i for i, f in enumerate(TOKEN_FIELDS)}
DATE_FIELDS = ("pd", "ad", "prd")
GROUPS = {"all": TEXT_FIELDS, "txt": ("ti", "ab", "pa", "in"), "ta": ("ti", "ab"), "ia": ("pa", "in"),
          "ftxt": ("cl", "desc"), "nftxt": (*TEXT_FIELDS, *NAME_FIELDS)}
"""Fields that stand for several, Espacenet's: ``txt`` title, abstract and names, ``ta`` title or abstract, ``ia``
inventor or applicant, ``ftxt`` claims or description, ``nftxt`` every text field or name; an unfielded word
searches ``all`` (every text field: Espacenet's ``extftxt``)."""
ALIASES = {
    "title": "ti", "abstract": "ab", "claims": "cl", "claim": "cl", "description": "desc",
    "text": "txt", "applicant": "pa", "inventor": "in", "num": "pn", "publication": "pn", "publication_number": "pn",
    "country": "pc", "kd": "kind", "publication_date": "pd", "filing_date": "ad", "application_date": "ad",
    "priority_date": "prd", "ic": "ipc", "extftxt": "all", "ntxt": "txt",
}
FIELD_NAMES = (*TOKEN_FIELDS, *DATE_FIELDS, *GROUPS, *ALIASES)
NEAR_DEFAULT = 10
MAX_DISTANCE = 500
"""The largest n of NEAR/n and ADJ/n (a wider window is a paragraph: PARA)."""

_FIELD_RE = "|".join(sorted((re.escape(f) for f in FIELD_NAMES), key=len, reverse=True))

GRAMMAR = rf"""
?start: or_expr
?or_expr: and_expr (_OR and_expr)*
?and_expr: not_expr (_AND? not_expr)*
?not_expr: _NOT not_expr -> negate
         | prox_expr
?prox_expr: primary (PROX primary)*
?primary: "(" or_expr ")"
        | clause
        | WORD -> word
        | PHRASE -> phrase
        | "=" WORD -> exact_word
        | "=" PHRASE -> exact_phrase
clause: FIELD OP value
      | FIELD _WITHIN PHRASE -> within
      | FIELD _ALL PHRASE -> all_of
      | FIELD _ANY PHRASE -> any_of
?value: "(" or_expr ")"
      | WORD -> word
      | PHRASE -> phrase
      | "=" WORD -> exact_word
      | "=" PHRASE -> exact_phrase

FIELD.4: /(?i:{_FIELD_RE})(?=\s*(=|<|>|(?i:within|all|any)\b))/
_WITHIN.3: /(?i:within)\b/
_ALL.3: /(?i:all)\b/
_ANY.3: /(?i:any)\b/
OP: "<=" | ">=" | "=" | "<" | ">"
PROX.3: /(?i:near|adj)\/\d+(?![\w*?#])/ | /(?i:near|adj|sent|para)(?![\w*?#\/])/
      | /(?i:prox)\/(distance\s*<=?\s*\d+(\/ordered)?|ordered|unit\s*=\s*(sentence|paragraph))/
_AND.3: /(?i:and)(?![\w*?#])/
_OR.3: /(?i:or)(?![\w*?#])/
_NOT.3: /(?i:not)(?![\w*?#])/
PHRASE: /"[^"]*"/
WORD: /[^\s()"=<>]+/

%import common.WS
%ignore WS
"""

_PARSER = Lark(GRAMMAR, parser="lalr", propagate_positions=True, maybe_placeholders=False)

_EXPECTED = {"FIELD": "a field (ti=, cl=, pd<...)", "WORD": "a word", "PHRASE": 'a "phrase"',
             "LPAR": "(", "RPAR": ")", "EQUAL": "=", "OP": "= < <= > >=", "PROX": "a proximity operator",
             "_AND": "AND", "_OR": "OR", "_NOT": "NOT", "_WITHIN": "within", "$END": "the end of the query"}


_OPERATOR_WORDS = {"and", "or", "not", "near", "adj", "sent", "para", "within"}


class QuerySyntaxError(ValueError):
    """A query in the language that does not parse: ``position`` (0-based character) and what was ``expected``."""

    def __init__(self, message: str, position: int, expected: list[str], text: str) -> None:
        self.position, self.expected, self.text = position, expected, text
        where = text[max(0, position - 20):position] + "\u2038" + text[position:position + 20]
        super().__init__(f"query syntax error at character {position + 1}: {message} (here: {where!r})"
                         + (f"; expected {', '.join(expected)}" if expected else ""))


# ------------------------------------------------------------------------------------------------ the tree


@dataclass(frozen=True)
class Node:
    pos: int = field(default=0, compare=False, kw_only=True)  # the character where it starts in the query

    def show(self) -> str:
        raise NotImplementedError


@dataclass(frozen=True)
class Term(Node):
    """A word (the wildcards :data:`WILDCARDS` allowed) or a phrase (several words in a row), in ``fields``;
    ``exact``: untranslated."""

    words: tuple[str, ...]
    fields: tuple[str, ...] = TEXT_FIELDS
    exact: bool = False
    quoted: bool = False
    raw: str = field(default="", compare=False)  # as written (a date's, a code's punctuation)

    @property
    def wildcard(self) -> bool:
        return any(c in w for w in self.words for c in WILDCARDS)

    def show(self) -> str:
        body = " ".join(self.words)
        body = f'"{body}"' if self.quoted or len(self.words) > 1 else body
        body = f"={body}" if self.exact else body
        return body if self.fields == TEXT_FIELDS else f"{_field_label(self.fields)}={body}"


@dataclass(frozen=True)
class Bool(Node):
    op: str  # and | or
    parts: tuple[Node, ...]

    def show(self) -> str:
        return "(" + f" {self.op.upper()} ".join(p.show() for p in self.parts) + ")"


@dataclass(frozen=True)
class Not(Node):
    part: Node

    def show(self) -> str:
        return f"NOT {self.part.show()}"


@dataclass(frozen=True)
class Near(Node):
    """``left`` and ``right`` within ``distance`` words (``ordered``: right after left), or in one ``unit``
    (sentence, paragraph); both in the same field of one document."""

    left: Node
    right: Node
    distance: int | None = None
    ordered: bool = False
    unit: str | None = None  # sentence | paragraph (distance None)

    def show(self) -> str:
        op = self.unit.upper()[:4] if self.unit else f"{'ADJ' if self.ordered else 'NEAR'}/{self.distance}"
        return f"({self.left.show()} {op} {self.right.show()})"


@dataclass(frozen=True)
class Match(Node):
    """A field matched by value, not by words: ``pn`` (prefix of a publication number), ``pc``, ``kind``, ``cpc``
    and ``ipc`` (a code and the codes below it)."""

    field: str
    value: str

    def show(self) -> str:
        return f"{self.field}={self.value}"


@dataclass(frozen=True)
class DateRange(Node):
    """``field`` (pd, ad, prd) in ``[start, end)`` (None: open)."""

    field: str
    start: date | None
    end: date | None
    spelled: str = ""

    def show(self) -> str:
        return self.spelled or f"{self.field} in [{self.start}, {self.end})"


def _field_label(fields: tuple[str, ...]) -> str:
    for name, group in GROUPS.items():
        if fields == group:
            return name
    return "+".join(fields)


# ------------------------------------------------------------------------------------------------ dates


def _date_span(text: str) -> tuple[date, date]:
    """The days a date as written covers: ``[first, after last)``."""
    t = text.strip().strip('"')
    m = re.fullmatch(r"(\d{4})(?:-?(\d{2})(?:-?(\d{2}))?)?", t)
    dmy = re.fullmatch(r"(\d{1,2})([/.])(\d{1,2})\2(\d{4})", t)  # Espacenet's 07/01/2008 and 07.01.2008: day first
    if not m and not dmy:
        raise ValueError(f"not a date: {text!r} (write 2001, 2001-05, 2001-05-17, 20010517 or 17/05/2001)")
    if dmy:
        y, mo, d = int(dmy.group(4)), dmy.group(3).zfill(2), dmy.group(1).zfill(2)
    else:
        assert m is not None
        y, mo, d = int(m.group(1)), m.group(2), m.group(3)
    if mo is None:
        return date(y, 1, 1), date(y + 1, 1, 1)
    first = date(y, int(mo), int(d) if d else 1)
    if d is not None:
        return first, date.fromordinal(first.toordinal() + 1)
    return first, date(y + (int(mo) == 12), int(mo) % 12 + 1, 1)


def _date_range(fname: str, op: str, value: str) -> DateRange:
    lo, hi = _date_span(value)
    spelled = f"{fname}{op}{value}"
    if op == "=":
        return DateRange(fname, lo, hi, spelled)
    if op == "<":
        return DateRange(fname, None, lo, spelled)
    if op == "<=":
        return DateRange(fname, None, hi, spelled)
    if op == ">":
        return DateRange(fname, hi, None, spelled)
    return DateRange(fname, lo, None, spelled)  # >=


# ------------------------------------------------------------------------------------------------ building the tree


def canonical_field(name: str) -> str:
    n = name.lower()
    return ALIASES.get(n, n)


def _fields_of(name: str) -> tuple[str, ...]:
    f = canonical_field(name)
    return GROUPS.get(f, (f,))


def _with_fields(node: Node, fields: tuple[str, ...]) -> Node:
    """``node`` with its unfielded words searched in ``fields`` (an inner field clause keeps its own)."""
    if isinstance(node, Term):
        return Term(node.words, fields, node.exact, node.quoted, node.raw, pos=node.pos) \
            if node.fields == TEXT_FIELDS else node
    if isinstance(node, Bool):
        return Bool(node.op, tuple(_with_fields(p, fields) for p in node.parts), pos=node.pos)
    if isinstance(node, Not):
        return Not(_with_fields(node.part, fields), pos=node.pos)
    if isinstance(node, Near):
        return Near(_with_fields(node.left, fields), _with_fields(node.right, fields), node.distance, node.ordered,
                    node.unit, pos=node.pos)
    return node


def words_of(text: str) -> tuple[str, ...]:
    """A query word or phrase as the index's words (:func:`service.querylang.words.tokens`: runs of letters and
    digits, case-folded), the wildcards kept inside them."""
    return tuple(re.findall(rf"(?:[^\W_]|{WILDCARD_CLASS})+", text.casefold()))


WILDCARDS = "*?#"
"""Espacenet's wildcards: ``*`` any run of characters (none included), ``?`` zero or one, ``#`` exactly one."""
WILDCARD_CLASS = f"[{re.escape(WILDCARDS)}]"
"""A regular expression's class of one wildcard."""
_WILDCARD_RE = {"*": ".*", "?": ".?", "#": "."}


def wildcard_regex(pattern: str) -> str:
    """The regular expression (unanchored) of a word with wildcards (:data:`WILDCARDS`)."""
    return "".join(_WILDCARD_RE.get(c) or re.escape(c) for c in pattern)


def _prox(token: str) -> tuple[int | None, bool, str | None]:
    t = token.lower().replace(" ", "")
    if t.startswith("prox/"):
        if "unit=" in t:
            return None, False, t.split("=", 1)[1]
        if t == "prox/ordered":  # Espacenet's order alone: within NEAR's default distance
            return NEAR_DEFAULT, True, None
        found = re.search(r"<(=?)(\d+)", t)
        assert found is not None  # (the grammar's PROX)
        n = int(found.group(2)) - (not found.group(1))  # (Espacenet's "<n": fewer than n words apart)
        return n, t.endswith("/ordered"), None
    name, _, digits = t.partition("/")
    if name in ("sent", "para"):
        return None, False, {"sent": "sentence", "para": "paragraph"}[name]
    if name == "near":
        return int(digits) if digits else NEAR_DEFAULT, False, None
    return int(digits) if digits else 1, True, None  # adj


@v_args(meta=True)
class _Tree(Transformer[Token, Node]):
    def word(self, meta: Any, children: list[Token]) -> Node:
        return self._term(str(children[0]), meta, quoted=False, exact=False)

    def phrase(self, meta: Any, children: list[Token]) -> Node:
        return self._term(str(children[0])[1:-1], meta, quoted=True, exact=False)

    def exact_word(self, meta: Any, children: list[Token]) -> Node:
        return self._term(str(children[0]), meta, quoted=False, exact=True)

    def exact_phrase(self, meta: Any, children: list[Token]) -> Node:
        return self._term(str(children[0])[1:-1], meta, quoted=True, exact=True)

    @staticmethod
    def _term(text: str, meta: Any, *, quoted: bool, exact: bool) -> Node:
        if not quoted and text.lower() in _OPERATOR_WORDS:
            raise ValueError(f"{text!r} is an operator here: put it in quotes to search the word")
        words = words_of(text)
        if not words:
            raise ValueError(f"{text!r} holds no word (letters or digits)")
        if any(w.strip(WILDCARDS) == "" for w in words):
            raise ValueError(f"{text!r}: a wildcard needs at least one letter or digit beside it")
        return Term(words, TEXT_FIELDS, exact, quoted and len(words) == 1, text, pos=meta.start_pos)

    def or_expr(self, meta: Any, children: list[Node]) -> Node:
        return Bool("or", tuple(children), pos=meta.start_pos)

    def and_expr(self, meta: Any, children: list[Node]) -> Node:
        return Bool("and", tuple(children), pos=meta.start_pos)

    def negate(self, meta: Any, children: list[Node]) -> Node:
        return Not(children[0], pos=meta.start_pos)

    def prox_expr(self, meta: Any, children: list[Any]) -> Node:
        node: Node = children[0]
        for i in range(1, len(children), 2):
            distance, ordered, unit = _prox(str(children[i]))
            if distance is not None and not 0 < distance <= MAX_DISTANCE:
                raise ValueError(f"{children[i]}: the distance must be 1 to {MAX_DISTANCE} words")
            node = Near(node, children[i + 1], distance, ordered, unit, pos=meta.start_pos)
        return node

    def clause(self, meta: Any, children: list[Any]) -> Node:
        fname, op, value = canonical_field(str(children[0])), str(children[1]), children[2]
        if fname in DATE_FIELDS:
            if not isinstance(value, Term) or value.exact or " " in value.raw.strip('"'):
                raise ValueError(f"{fname}{op}: give one date (2001, 2001-05, 2001-05-17)")
            return _date_range(fname, op, value.raw)
        if op != "=":
            raise ValueError(f"{fname}{op}: only dates (pd, ad, prd) take < <= > >=; write {fname}=")
        if fname in VALUE_FIELDS:
            return _matches(fname, value, meta)
        if fname == "cl" and _codes_only(value):  # Espacenet's cl=H01F27: its classification, CPC or IPC
            return Bool("or", (_matches("cpc", value, meta), _matches("ipc", value, meta)), pos=meta.start_pos)
        return _with_fields(value, _fields_of(fname))

    def all_of(self, meta: Any, children: list[Any]) -> Node:
        return self._relation("and", meta, children)

    def any_of(self, meta: Any, children: list[Any]) -> Node:
        return self._relation("or", meta, children)

    @staticmethod
    def _relation(op: str, meta: Any, children: list[Any]) -> Node:
        """Espacenet's ``ti all "a b"`` (every word) and ``ti any "a b"`` (one of them): an AND or an OR of the
        words in the field (of the values: ``cpc any "H01F H02K"``)."""
        fname, raw = canonical_field(str(children[0])), str(children[1]).strip('"')
        if fname in DATE_FIELDS:
            raise ValueError(f"{fname}: dates take = < <= > >= or within, not all/any")
        if fname in VALUE_FIELDS:
            values = raw.split()
            if not values:
                raise ValueError(f'{fname} {"all" if op == "and" else "any"} "": give the values')
            parts: list[Node] = [Match(fname, v.upper(), pos=meta.start_pos) for v in values]
        else:
            words = words_of(raw)
            if not words:
                raise ValueError(f"{raw!r} holds no word (letters or digits)")
            parts = [Term((w,), _fields_of(fname), raw=w, pos=meta.start_pos) for w in words]
        return parts[0] if len(parts) == 1 else Bool(op, tuple(parts), pos=meta.start_pos)

    def within(self, meta: Any, children: list[Any]) -> Node:
        fname = canonical_field(str(children[0]))
        if fname not in DATE_FIELDS:
            raise ValueError(f"{fname} within: only dates (pd, ad, prd) take a range")
        parts = [p.strip() for p in str(children[1]).strip('"').split(",")]
        if len(parts) != 2:
            raise ValueError(f'{fname} within "A,B": give two dates separated by a comma')
        lo, hi = _date_span(parts[0])[0], _date_span(parts[1])[1]
        return DateRange(fname, lo, hi, f'{fname} within "{parts[0]},{parts[1]}"', pos=meta.start_pos)


CODE_SYMBOL = re.compile(r"[A-HY]\d\d[A-Z](?:\d{1,4}(?:/\d{1,6})?)?")
"""A classification symbol (a subclass, a main group, a subgroup: ``H01F``, ``H01F27``, ``H01F27/12``)."""


def _codes_only(value: Node) -> bool:
    """A value of classification symbols only (one, or an OR-group of them), written as symbols (capitals)."""
    if isinstance(value, Bool) and value.op == "or":
        return all(_codes_only(p) for p in value.parts)
    return isinstance(value, Term) and not value.exact and CODE_SYMBOL.fullmatch(value.raw.strip()) is not None


def _matches(fname: str, value: Node, meta: Any) -> Node:
    """``pn=``, ``pc=``, ``kind=``, ``cpc=``, ``ipc=``: one value, or an OR-group of them."""
    if isinstance(value, Bool) and value.op == "or":
        return Bool("or", tuple(_matches(fname, p, meta) for p in value.parts), pos=value.pos)
    if isinstance(value, Term) and not value.exact:
        return Match(fname, re.sub(r"\s+", "", value.raw).upper(), pos=value.pos)
    raise ValueError(f"{fname}= takes a value or (a OR b ...), not {value.show()}")


def _expected(exc: UnexpectedInput) -> list[str]:
    names = getattr(exc, "expected", None) or getattr(exc, "allowed", None) or set()
    return sorted({_EXPECTED.get(n, n) for n in names if not n.startswith("__")})


def parse(text: str) -> Node:
    """The tree of a query in the language (raises :class:`QuerySyntaxError`)."""
    try:
        tree = _PARSER.parse(text)
    except UnexpectedEOF as exc:
        raise QuerySyntaxError("the query ends too early", len(text), _expected(exc), text) from None
    except UnexpectedCharacters as exc:
        at = int(exc.pos_in_stream or 0)
        raise QuerySyntaxError(f"unexpected {text[at]!r}", at, _expected(exc), text) from None
    except UnexpectedToken as exc:
        end = exc.token.type == "$END"
        pos = len(text) if end or exc.token.start_pos is None else exc.token.start_pos
        what = "the end of the query" if end else repr(str(exc.token))
        raise QuerySyntaxError(f"unexpected {what}", int(pos), _expected(exc), text) from None
    try:
        return _Tree().transform(tree)
    except VisitError as exc:
        meta = getattr(exc.obj, "meta", None)
        pos = int(getattr(meta, "start_pos", 0) or 0)
        raise QuerySyntaxError(str(exc.orig_exc), pos, [], text) from None


_DATE_RE = "|".join(f for f in FIELD_NAMES if canonical_field(f) in DATE_FIELDS)
_FIELDS_BOTH = "|".join(sorted({v for f in FIELD_NAMES for v in (f, f.upper())}, key=len, reverse=True))
_DATES_BOTH = "|".join(sorted({v for f in _DATE_RE.split("|") for v in (f, f.upper())}, key=len, reverse=True))
_FIELD_CLAUSE = re.compile(rf"(?:^|[\s(])(?:(?:{_FIELDS_BOTH})\s*=(?!=)|(?:{_DATES_BOTH})\s*(?:<|>|(?i:within)\b)"
                           rf"|(?:{_FIELDS_BOTH})\s+(?i:all|any)\s+\")")
_DISTINCT = re.compile(r"\b(?:NEAR|ADJ)/\d+\b|(?i:\bprox/)|(?:^|[\s(])=\"")
_TRUNCATED = re.compile(r"[^\W_]*(?:\?[^\W_]+)+|[^\W\d_]+#[^\W\d_]+|[^\W\d_]{3,}\*")
_CAPITALS = re.compile(r"(?<![^\s(\"])(?:AND|OR|NOT|NEAR|ADJ)(?=[\s(\"])")
LONG_TEXT = 40
"""Words past which a text needs three signs of the language to be read as it (a claim may hold one: ``(Pn = P3)``)."""


def _capital_operator(text: str, m: re.Match[str]) -> bool:
    """An operator in capitals between words that are not in capitals (``tank AND seal``, not ``METHOD AND
    APPARATUS``)."""
    before = re.findall(r"[^\W\d_]+", text[:m.start()])[-1:]
    after = re.findall(r"[^\W\d_]+", text[m.end():])[:1]
    return any(any(c.islower() for c in w) for w in (*before, *after)) and \
        not any(w.isupper() and len(w) > 1 for w in (*before, *after))


def looks_like_query(text: str) -> bool:
    """Whether ``text`` is meant as the language, not free text. The signs: a field clause (``ti=``, ``TI=``,
    ``pd<``), ``NEAR/n`` or ``ADJ/n``, ``prox/``, ``="...``, a truncation (``transform*``, ``colo?r``, ``wo#en``), an
    operator in capitals between words that are not (``tank AND seal``). One sign makes a text of at most
    :data:`LONG_TEXT` words a query; a longer one needs three (a pasted claim with ``(Pn = P3)`` or ``designated*``
    stays free text). A title in capitals (``METHOD AND APPARATUS``), a symbol in capitals (``VAC*``), quotes and
    parentheses are no sign."""
    signs = len(_FIELD_CLAUSE.findall(text)) + len(_DISTINCT.findall(text))
    if any(c in text for c in "?#*"):  # (a truncation needs one; the pattern is slow on a long claim without)
        signs += sum(any(c.islower() for c in m.group(0)) for m in _TRUNCATED.finditer(text))  # (not VAC*, a symbol)
    signs += sum(_capital_operator(text, m) for m in _CAPITALS.finditer(text))
    return signs >= (1 if len(text.split()) <= LONG_TEXT else 3)


__all__ = ["DATE_FIELDS", "FIELD_NUMBER", "GROUPS", "MAX_DISTANCE", "NAME_FIELDS", "TEXT_FIELDS", "TOKEN_FIELDS",
           "VALUE_FIELDS", "WILDCARDS", "WILDCARD_CLASS", "Bool", "DateRange", "Match", "Near", "Node", "Not",
           "QuerySyntaxError", "Term", "looks_like_query", "parse", "wildcard_regex", "words_of"]
