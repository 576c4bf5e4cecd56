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


_NON_ASCII_RE = re.compile(r"[^\x00-\x7f]+")


def _normalised_with_positions(text: str) -> tuple[str, list[int], list[int]]:
    """``normalise(text)`` computed per character cluster, and each output character's cluster span.

    ASCII characters are their own clusters and map one to one (lower case); only the runs of
    non-ASCII characters (with the ASCII letter a combining mark may follow) are normalised cluster by
    cluster.
    """
    parts: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    pos = 0
    for m in _NON_ASCII_RE.finditer(text):
        a, b = m.span()
        if a > pos and unicodedata.combining(text[a]):
            a -= 1  # the mark belongs to the cluster of the preceding ASCII letter
        if a > pos:
            parts.append(text[pos:a].lower())
            starts.extend(range(pos, a))
            ends.extend(range(pos + 1, a + 1))
        for ca, cb in _clusters(text[a:b]):
            piece = normalise(text[a + ca: a + cb])
            parts.append(piece)
            starts.extend([a + ca] * len(piece))
            ends.extend([a + cb] * len(piece))
        pos = b
    if pos < len(text):
        parts.append(text[pos:].lower())
        starts.extend(range(pos, len(text)))
        ends.extend(range(pos + 1, len(text) + 1))
    return "".join(parts), starts, ends


def token_spans(text: str) -> list[tuple[int, int, str]]:
    """``(start, end, token)`` for every token of :func:`~service.text.analysis.tokenize`, spans in ``text``.

    The text is normalised cluster by cluster (a base character and its combining marks), so every
    normalised character points back to the characters it came from.
    """
    orig_start: list[int] | None = None
    orig_end: list[int] | None = None
    if text.isascii():  # NFKC is the identity on ASCII and casefold == lower
        norm = text.lower()
    else:
        norm, orig_start, orig_end = _normalised_with_positions(text)
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
