"""A reference evaluator of the query language, written from docs/QUERY_LANGUAGE.md alone, over corpus JSONL records
(plain dicts): no numpy, no index, no code of service/querylang but its parser's tree (the tests generate the trees
they check, and the engine's parse of their text must give the same tree).

It reads the documented semantics directly: words are runs of letters and digits of the case-folded text; a field is a
list of paragraphs (titles, abstracts, each claim, each heading and paragraph of the description, each applicant,
each inventor); distances are counted in words within one paragraph; a sentence ends after . ! ? ; and white space.
Translations are not known here: a test gives each word's translations (what the engine reported) as ``extra``."""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Mapping
from datetime import date
from typing import Any

WORD = re.compile(r"[^\W_]+")
SENTENCE_END = re.compile(r"(?<=[.!?;])\s+")
TEXT = ("ti", "ab", "cl", "desc")


def _paragraphs(rec: Mapping[str, Any], field: str) -> list[str]:
    if field == "ti":
        return [t for t in rec.get("title", {}).values() if t]
    if field == "ab":
        return [t for t in rec.get("abstract", {}).values() if t]
    if field == "cl":
        return [c["text"] for cs in rec.get("claims", {}).values() for c in cs if c["text"]]
    if field == "desc":
        out: list[str] = []

        def walk(s: Mapping[str, Any]) -> None:
            if s.get("heading"):
                out.append(s["heading"])
            out.extend(p for p in s.get("paragraphs", []) if p)
            for c in s.get("sections", []):
                walk(c)

        for s in rec.get("description", []):
            walk(s)
        return out
    if field == "pa":
        return [a for a in rec.get("applicants", []) if a]
    if field == "in":
        return [a for a in rec.get("inventors", []) if a]
    raise KeyError(field)


class Doc:
    """One record's words: per field, per paragraph, the (word, sentence number) of each position; and where each
    word occurs (field, paragraph, position, sentence), to look words up instead of reading every paragraph."""

    def __init__(self, rec: Mapping[str, Any]) -> None:
        self.rec = rec
        self.fields: dict[str, list[list[tuple[str, int]]]] = {}
        self.where: dict[str, list[tuple[str, int, int, int]]] = {}
        for f in (*TEXT, "pa", "in"):
            paras = []
            for p, text in enumerate(_paragraphs(rec, f)):
                words: list[tuple[str, int]] = []
                for s, sentence in enumerate(SENTENCE_END.split(text)):
                    words.extend((w, s) for w in WORD.findall(sentence.casefold()))
                for i, (w, s) in enumerate(words):
                    self.where.setdefault(w, []).append((f, p, i, s))
                paras.append(words)
            self.fields[f] = paras

    def vocabulary(self) -> set[str]:
        return set(self.where)


_WILD = {"*": ".*", "?": ".?", "#": "."}  # Espacenet's: any run, zero or one, exactly one


def _wild(pattern: str) -> re.Pattern[str]:
    return re.compile("".join(_WILD.get(c) or re.escape(c) for c in pattern) + r"\Z")


class Reference:
    """Evaluates a tree (:mod:`service.querylang.syntax`'s node classes, read by attribute) over records."""

    def __init__(self, records: Iterable[Mapping[str, Any]], extra: Mapping[str, Iterable[str]] | None = None) -> None:
        self.docs = [Doc(r) for r in records]
        self.vocab = set().union(*(d.vocabulary() for d in self.docs)) if self.docs else set()
        self.extra = {k: set(v) for k, v in (extra or {}).items()}
        self._wild: dict[str, set[str]] = {}  # a truncation's words of the corpus

    def ids(self, node: Any) -> set[str]:
        return {d.rec["id"] for d in self.docs if self.matches(node, d)}

    # ---- one document -------------------------------------------------------------------------------
    def words(self, word: str, translate: bool) -> set[str]:
        if any(c in word for c in _WILD):
            if word not in self._wild:
                rx = _wild(word)
                self._wild[word] = {w for w in self.vocab if rx.match(w)}
            return self._wild[word]
        return {word} | (self.extra.get(word, set()) if translate else set())

    def spans(self, node: Any, doc: Doc) -> list[tuple[str, int, int, int, int]]:
        """(field, paragraph, start, end, sentence of start) of every occurrence of a positional node."""
        kind = type(node).__name__
        if kind == "Term":
            out = []
            single = len(node.words) == 1
            options = [self.words(w, translate=single and not node.exact) for w in node.words]
            n = len(node.words)
            for first in options[0]:
                for f, p, i, s in doc.where.get(first, ()):
                    if f not in node.fields:
                        continue
                    para = doc.fields[f][p]
                    if i + n <= len(para) and all(para[i + j][0] in options[j] for j in range(1, n)):
                        out.append((f, p, i, i + n - 1, s))
            return out
        if kind == "Bool" and node.op == "or":
            return [s for part in node.parts for s in self.spans(part, doc)]
        if kind == "Near":
            a, b = self.spans(node.left, doc), self.spans(node.right, doc)
            if not a or not b:
                return []

            def ok(x: tuple[str, int, int, int, int], y: tuple[str, int, int, int, int]) -> bool:
                if x[0] != y[0] or x[1] != y[1]:
                    return False
                if node.unit == "sentence":
                    return x[4] == y[4]
                if node.unit == "paragraph":
                    return True
                if 1 <= y[2] - x[3] <= node.distance:  # y after x
                    return True
                return not node.ordered and 1 <= x[2] - y[3] <= node.distance

            left = [x for x in a if any(ok(x, y) for y in b)]
            right = [y for y in b if any(ok(x, y) for x in a)]
            return left + right
        raise ValueError(f"not positional: {kind}")

    def matches(self, node: Any, doc: Doc) -> bool:
        kind = type(node).__name__
        if kind == "Bool":
            results = (self.matches(p, doc) for p in node.parts)
            return all(results) if node.op == "and" else any(results)
        if kind == "Not":
            return not self.matches(node.part, doc)
        if kind == "DateRange":
            d = self._date(doc.rec, node.field)
            return d is not None and (node.start is None or d >= node.start) and (node.end is None or d < node.end)
        if kind == "Match":
            return self._value(doc.rec, node.field, node.value)
        return bool(self.spans(node, doc))

    @staticmethod
    def _date(rec: Mapping[str, Any], field: str) -> date | None:
        if field == "pd":
            v = rec.get("publication_date")
        elif field == "ad":
            v = rec.get("application_date")
        else:
            v = min(rec.get("priority_dates") or [None], key=lambda x: x or "9999")
        return date.fromisoformat(v) if v else None

    @staticmethod
    def _value(rec: Mapping[str, Any], field: str, value: str) -> bool:
        v = value.upper()
        if field == "pn":
            return rec["id"].upper().startswith(v)
        if field == "pc":
            return rec.get("country", "").upper() == v
        if field == "kind":
            return rec.get("kind", "").upper() == v
        codes = [c.upper() for c in rec.get(field, [])]
        if "/" not in v:  # a section, class or subclass: its prefix; a main group: every group code under it
            return any(c.startswith(v + "/" if len(v) > 4 else v) for c in codes)
        if v.endswith("/00"):
            return any(c.startswith(v[:-2]) for c in codes)
        return any(c == v or (c.startswith(v) and c[len(v)].isdigit()) for c in codes)


# ---- queries generated from a corpus (the real-data, live and sharded tests) -------------------------------


def _good(w: str) -> bool:
    return len(w) >= 4 and w.isalpha()


def generate(records: list[dict[str, Any]], n: int, seed: int = 61) -> list[str]:
    """Queries over every operator, field and language, from the words of the records themselves."""
    rnd = random.Random(seed)
    docs = [Doc(r) for r in records]
    by_lang: dict[str, list[tuple[Doc, str]]] = {"en": [], "de": [], "fr": []}
    for d in docs:
        for lang, t in d.rec.get("title", {}).items():
            if lang in by_lang:
                by_lang[lang].append((d, t))

    def word(d: Doc, field: str = "cl") -> str:
        paras = [p for p in d.fields.get(field) or d.fields["ti"] if p] or [p for p in d.fields["ti"] if p]
        words = [w for p in paras for w, _ in p if _good(w)]
        return rnd.choice(words) if words else "device"

    def pair(d: Doc, field: str, gap: int) -> tuple[str, str] | None:
        paras = [p for p in d.fields.get(field, []) if len(p) > gap + 1]
        if not paras:
            return None
        p = rnd.choice(paras)
        i = rnd.randrange(0, len(p) - gap)
        a, b = p[i][0], p[i + gap][0]
        return (a, b) if _good(a) and _good(b) and a != b else None

    def any_doc(lang: str | None = None) -> Doc:
        if lang:
            return rnd.choice(by_lang[lang])[0]
        return rnd.choice(docs)

    templates = ["word", "field", "and", "or", "not", "phrase", "near", "adj", "sent", "para", "trunc", "qmark",
                 "cpc", "ipc", "pn", "pc", "kind", "date", "pa", "mixed", "exact", "cql"]
    out: list[str] = []
    tries = 0
    while len(out) < n and tries < n * 20:
        tries += 1
        kind = templates[len(out) % len(templates)]
        lang = ("en", "de", "fr")[rnd.randrange(3)]
        d = any_doc(lang) if by_lang[lang] else any_doc()
        q: str | None = None
        if kind == "word":
            q = f"{word(d)} AND {word(d, 'ti')}"
        elif kind == "field":
            f = rnd.choice(["ti", "ab", "cl", "desc"])
            q = f"{f}={word(d, f)}"
        elif kind == "and":
            q = f"{word(d)} AND {word(any_doc())}"
        elif kind == "or":
            q = f"({word(d)} OR {word(any_doc())}) AND {word(d, 'ti')}"
        elif kind == "not":
            q = f"{word(d)} NOT {word(any_doc())}"
        elif kind in ("phrase", "near", "adj", "sent", "para"):
            f = rnd.choice(["cl", "ab", "desc", "cl"])
            gap = {"phrase": 1, "near": rnd.randrange(1, 6), "adj": rnd.randrange(1, 4), "sent": 3, "para": 8}[kind]
            got = pair(d, f, gap)
            if got is None:
                continue
            a, b = got
            if kind == "phrase":
                q = f'{f}="{a} {b}"'
            elif kind == "near":
                q = f"{b} NEAR/{gap} {a}"
            elif kind == "adj":
                q = f"cl=({a} ADJ/{gap} {b})" if f == "cl" else f"{a} ADJ/{gap} {b}"
            else:
                q = f"{a} {'SENT' if kind == 'sent' else 'PARA'} {b}"
        elif kind == "trunc":
            w = word(d)
            q = f"{w[:rnd.randrange(4, len(w) + 1)]}* AND {word(d, 'ti')}"
        elif kind == "qmark":
            w = word(d)
            i = rnd.randrange(1, len(w) - 1)
            q = f"{w[:i]}?{w[i + 1:]}"
        elif kind in ("cpc", "ipc"):
            codes = d.rec.get(kind) or []
            if not codes:
                continue
            c = rnd.choice(codes)
            level = rnd.choice([1, 3, 4, "group", "exact"])
            v = c[:level] if isinstance(level, int) else c.split("/")[0] if level == "group" else c
            q = f"{kind}={v} AND {word(d, 'ti')}"
        elif kind == "pn":
            q = f"pn={d.rec['id'][:rnd.randrange(4, len(d.rec['id']))]} AND {word(d, 'ti')}"
        elif kind == "pc":
            q = f"pc={d.rec['country']} AND {word(d)}"
        elif kind == "kind":
            q = f"kind={d.rec['kind']} AND {word(d)}"
        elif kind == "date":
            year = rnd.randrange(1985, 2015)
            op = rnd.choice(["<", ">=", "=", "<="])
            field = rnd.choice(["pd", "ad", "prd"])
            q = f"{word(d)} AND {field}{op}{year}" if rnd.random() < 0.8 else \
                f'{word(d)} AND {field} within "{year},{year + 3}"'
        elif kind == "pa":
            names = [w for p in d.fields["pa"] for w, _ in p if _good(w)]
            if not names:
                continue
            q = f"pa={rnd.choice(names)} AND {word(d)}"
        elif kind == "mixed":
            got = pair(d, "cl", 2)
            if got is None:
                continue
            q = f"ti=({word(d, 'ti')} OR {word(any_doc(), 'ti')}) AND cl=({got[0]} NEAR/3 {got[1]}) NOT pd>2020"
        elif kind == "exact":
            q = f'="{word(d)}" OR {word(any_doc())}'
        elif kind == "cql":
            got = pair(d, "cl", 3)
            if got is None:
                continue
            q = f"cl=({got[0]} prox/distance<=3 {got[1]}) and ti={word(d, 'ti')}"
        if q and q not in out:
            out.append(q)
    return out
