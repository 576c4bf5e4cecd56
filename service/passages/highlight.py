"""Highlights: character spans, in the original text, of the tokens whose analysed term is a query term.

Spans are computed for the returned passages only (about 0.1 ms per passage), from the passage text
stored in the passage index; the analysed terms are exactly the analyzer's (a test checks this).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Collection, Iterator

from service.text.analysis import TOKEN_RE, Analyzer, normalise, stopwords


def _clusters(text: str) -> Iterator[tuple[int, int]]:
    """Spans of a base character plus its combining marks."""
    start = 0
    for i in range(1, len(text) + 1):
        if i == len(text) or not unicodedata.combining(text[i]):
            yield start, i
            start = i


def token_spans(text: str) -> list[tuple[int, int, str]]:
    """``(start, end, token)`` for every token of :func:`~service.text.analysis.tokenize`, spans in ``text``."""
    if text.isascii():  # NFKC is the identity on ASCII and casefold == lower
        norm = text.lower()
        orig_start: list[int] | None = None
        orig_end: list[int] | None = None
    else:
        parts: list[str] = []
        orig_start, orig_end = [], []
        for a, b in _clusters(text):
            piece = normalise(text[a:b])
            parts.append(piece)
            orig_start.extend([a] * len(piece))
            orig_end.extend([b] * len(piece))
        norm = "".join(parts)
    out: list[tuple[int, int, str]] = []
    for m in TOKEN_RE.finditer(norm):
        tok = m.group(0)
        if "/" in tok:
            tok = re.sub(r"\s+", "", tok)
        s, e = m.span()
        if orig_start is not None and orig_end is not None:
            s, e = orig_start[s], orig_end[e - 1]
        out.append((s, e, tok))
    return out


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
    if not query_terms:
        return []
    return [(s, e) for s, e, term in analysed_spans(text, analyzer) if term in query_terms]
