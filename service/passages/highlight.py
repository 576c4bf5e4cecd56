"""Highlights: character spans, in the original text, of the tokens whose analysed term is a query term.

Spans are computed for the returned passages only (about 0.1 ms per passage), from the passage text
stored in the passage index; the analysed terms are exactly the analyzer's (a test checks this).
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from collections.abc import Collection, Iterator

from service.text.analysis import TOKEN_RE, Analyzer, normalise, stopwords


def _clusters(text: str) -> Iterator[tuple[int, int]]:
    """Spans of a base character plus its combining marks."""
    start = 0
    for i in range(1, len(text) + 1):
        if i == len(text) or not unicodedata.combining(text[i]):
            yield start, i
            start = i


_NON_ASCII_RE = re.compile(r"[^\x00-\x7f]+")


class _Positions:
    """Where each character of a normalised text came from: runs of ASCII characters map one to one (lower case),
    each character of a normalised non-ASCII cluster maps to the whole cluster."""

    __slots__ = ("starts", "runs")

    def __init__(self) -> None:
        self.starts: list[int] = []  # normalised position where each run begins
        self.runs: list[tuple[int, int, int, bool]] = []  # (its start there, original start, original end, 1:1?)

    def add(self, norm_at: int, orig_start: int, orig_end: int, one_to_one: bool) -> None:
        self.starts.append(norm_at)
        self.runs.append((norm_at, orig_start, orig_end, one_to_one))

    def span(self, s: int, e: int) -> tuple[int, int]:
        """The original span of the normalised characters ``[s, e)``."""
        a = self.runs[bisect_right(self.starts, s) - 1]
        b = self.runs[bisect_right(self.starts, e - 1) - 1]
        start = a[1] + (s - a[0]) if a[3] else a[1]
        end = b[1] + (e - 1 - b[0]) + 1 if b[3] else b[2]
        return start, end


def _normalised_with_positions(text: str) -> tuple[str, _Positions]:
    """``normalise(text)`` computed per character cluster, and where each output character came from.

    ASCII characters are their own clusters and map one to one (lower case); only the runs of
    non-ASCII characters (with the ASCII letter a combining mark may follow) are normalised cluster by
    cluster.
    """
    parts: list[str] = []
    where = _Positions()
    at = 0
    pos = 0
    for m in _NON_ASCII_RE.finditer(text):
        a, b = m.span()
        if a > pos and unicodedata.combining(text[a]):
            a -= 1  # the mark belongs to the cluster of the preceding ASCII letter
        if a > pos:
            parts.append(text[pos:a].lower())
            where.add(at, pos, a, True)
            at += a - pos
        for ca, cb in _clusters(text[a:b]):
            piece = normalise(text[a + ca: a + cb])
            if piece:
                parts.append(piece)
                where.add(at, a + ca, a + cb, False)
                at += len(piece)
        pos = b
    if pos < len(text):
        parts.append(text[pos:].lower())
        where.add(at, pos, len(text), True)
    return "".join(parts), where


def token_spans(text: str) -> list[tuple[int, int, str]]:
    """``(start, end, token)`` for every token of :func:`~service.text.analysis.tokenize`, spans in ``text``.

    The text is normalised cluster by cluster (a base character and its combining marks), so every
    normalised character points back to the characters it came from.
    """
    norm, where = _normalised(text)
    out: list[tuple[int, int, str]] = []
    for m in TOKEN_RE.finditer(norm):
        tok = m.group(0)
        if "/" in tok:
            tok = _SPACES.sub("", tok)
        s, e = m.span()
        out.append((*(where.span(s, e) if where is not None else (s, e)), tok))
    return out


def _normalised(text: str) -> tuple[str, _Positions | None]:
    if text.isascii():  # NFKC is the identity on ASCII and casefold == lower
        return text.lower(), None
    return _normalised_with_positions(text)


def analysed_spans(text: str, analyzer: Analyzer) -> list[tuple[int, int, str]]:
    """``(start, end, term)`` for every token the analyzer keeps (same terms, same order as ``analyzer(text)``)."""
    stop = stopwords(analyzer.lang) if analyzer.remove_stopwords else frozenset()
    return [
        (s, e, analyzer.term(tok))
        for s, e, tok in token_spans(text)
        if tok not in stop and (len(tok) > 1 or tok.isdigit())
    ]


def highlight_spans(text: str, query_terms: Collection[str], analyzer: Analyzer) -> list[tuple[int, int]]:
    """Character spans of the tokens of ``text`` whose analysed term is one of ``query_terms``."""
    return [(s, e) for s, e, _ in highlight_matches(text, query_terms, analyzer)]


def highlight_matches(text: str, query_terms: Collection[str], analyzer: Analyzer) -> list[tuple[int, int, str]]:
    """``(start, end, term)`` of the tokens of ``text`` with an analysed term in ``query_terms``: the spans of
    :func:`analysed_spans` whose term is a query term, or, with a compound splitter, one of whose parts' terms is
    (``term``: the first that is). Each token is looked at once, without the lists of every token and span (the
    highlights were a fifth of a ``/passages`` request)."""
    if not query_terms:
        return []
    norm, where = _normalised(text)
    stop = stopwords(analyzer.lang) if analyzer.remove_stopwords else frozenset()
    of = analyzer.terms if analyzer.splitter is not None else (lambda tok: (analyzer.term(tok),))
    out: list[tuple[int, int, str]] = []
    for m in TOKEN_RE.finditer(norm):
        tok = m.group(0)
        if "/" in tok:
            tok = _SPACES.sub("", tok)
        if tok in stop or not (len(tok) > 1 or tok.isdigit()):
            continue
        hit = next((t for t in of(tok) if t in query_terms), None)
        if hit is not None:
            s, e = m.span()
            out.append((*(where.span(s, e) if where is not None else (s, e)), hit))
    return out


def token_terms(text: str, analyzer: Analyzer) -> list[tuple[int, int, tuple[str, ...]]]:
    """``(start, end, terms)`` of every token of ``text`` the analyzer keeps: its span and its index terms (its term,
    then, with a compound splitter, its parts' terms). For a text highlighted for many queries (a claim chart's
    passages, once per element): :func:`term_matches` then finds each query's matches without analysing it again."""
    stop = stopwords(analyzer.lang) if analyzer.remove_stopwords else frozenset()
    of = analyzer.terms if analyzer.splitter is not None else (lambda tok: (analyzer.term(tok),))
    return [(s, e, of(tok)) for s, e, tok in token_spans(text) if tok not in stop and (len(tok) > 1 or tok.isdigit())]


def term_matches(tokens: list[tuple[int, int, tuple[str, ...]]],
                 query_terms: Collection[str]) -> list[tuple[int, int, str]]:
    """:func:`highlight_matches` over the tokens of :func:`token_terms`: ``(start, end, term)`` of each token one of
    whose terms is a query term (``term``: the first that is)."""
    out: list[tuple[int, int, str]] = []
    for s, e, terms in tokens:
        hit = next((t for t in terms if t in query_terms), None)
        if hit is not None:
            out.append((s, e, hit))
    return out


def query_words(text: str, analyzer: Analyzer) -> dict[str, list[str]]:
    """The words of a query text (as written) behind each of its index terms, a compound's parts included."""
    out: dict[str, list[str]] = {}
    stop = stopwords(analyzer.lang) if analyzer.remove_stopwords else frozenset()
    of = analyzer.terms if analyzer.splitter is not None else (lambda tok: (analyzer.term(tok),))
    for s, e, tok in token_spans(text):
        if tok in stop or not (len(tok) > 1 or tok.isdigit()):
            continue
        word = text[s:e]
        for term in of(tok):
            words = out.setdefault(term, [])
            if word not in words:
                words.append(word)
    return out


_SPACES = re.compile(r"\s+")
