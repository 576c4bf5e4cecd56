"""Per-language text analysis: Unicode normalisation, patent-aware tokenisation, stop words, Snowball.

The tokeniser keeps tokens that matter in patents usable as single terms:
classification codes (``H01F27/14``, ``H01F 27/14``), reference signs (``(4)``), chemical formulas
(``SO2``) and decimal numbers (``1.5``). Everything is case-folded; accents are kept for stemming
(the Snowball stemmers expect them) and folded afterwards so that ``Gerät``/``Geraet`` variants and
missing accents in French meet.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from importlib import resources
from typing import Literal, Protocol, get_args

import Stemmer  # PyStemmer


class Splitter(Protocol):
    """What the analyser needs of a compound splitter (:class:`service.text.compounds.CompoundSplitter`)."""

    lang: str

    def split(self, word: str) -> tuple[str, ...]: ...

    def __len__(self) -> int: ...


Language = Literal["en", "de", "fr"]
"""The languages priorart reads, indexes and translates between: the one definition. Records, analyzers, translation
tables, the build's default and the API's ``lang`` (with ``auto``, service/schema.py) all take it from here."""
SUPPORTED_LANGS: tuple[str, ...] = get_args(Language)
LANG_NAMES: dict[str, str] = {"en": "English", "de": "German", "fr": "French"}
STEMMERS: dict[str, str] = {"en": "english", "de": "german", "fr": "french"}
"""The Snowball stemmer (PyStemmer's name) of each language."""

TOKEN_RE = re.compile(
    r"""
      [a-h]\d{2}[a-z]\s?\d{1,4}\s?/\s?\d{1,6}   # IPC/CPC code: h01f27/14, b05b 7/ 00
    | \(\d{1,4}[a-z]?'?\)                      # reference sign: (4), (12a)
    | \d+(?:[.,]\d+)+                          # decimal or grouped number: 1.5, 0,25
    | [^\W_]+                                  # word: letters and digits (so2, co2, 3d)
    """,
    re.X,
)
_SPACE_RE = re.compile(r"\s+")


def normalise(text: str) -> str:
    """NFKC, case-fold, unify apostrophes and dashes."""
    text = unicodedata.normalize("NFKC", text).casefold()
    return text.replace("\u2019", "'").replace("\u2010", "-").replace("\u2011", "-")


def fold_accents(token: str) -> str:
    """Strip combining marks (é -> e, ü -> u) and expand ß."""
    token = token.replace("ß", "ss")
    decomposed = unicodedata.normalize("NFD", token)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def tokenize(text: str) -> list[str]:
    """Normalised surface tokens (no stop-word removal, no stemming)."""
    out = []
    for m in TOKEN_RE.finditer(normalise(text)):
        tok = m.group(0)
        if "/" in tok:
            tok = _SPACE_RE.sub("", tok)
        out.append(tok)
    return out


@lru_cache(maxsize=8)
def stopwords(lang: str) -> frozenset[str]:
    """The stop-word list of a language (Snowball lists plus patent boilerplate words)."""
    if lang not in SUPPORTED_LANGS:
        raise ValueError(f"unsupported language {lang!r}; choose one of {', '.join(SUPPORTED_LANGS)}")
    text = resources.files("service.text").joinpath(f"stopwords/{lang}.txt").read_text(encoding="utf-8")
    words = {normalise(w) for w in text.split()}
    return frozenset(words | {fold_accents(w) for w in words})


def _is_special(tok: str) -> bool:
    return tok[0] == "(" or "/" in tok or tok[0].isdigit()


class Analyzer:
    """Turns text of one language into index terms. Instances are cheap to share (stateless).

    With a ``splitter`` (:class:`service.text.compounds.CompoundSplitter`) a word that splits into
    known parts gives its own term followed by the terms of its parts (``ausdehnungsgefäß`` ->
    ``ausdehnungsgefass ausdehn gefass``).
    """

    def __init__(
        self,
        lang: str,
        *,
        stem: bool = True,
        remove_stopwords: bool = True,
        splitter: Splitter | None = None,
    ) -> None:
        if lang not in SUPPORTED_LANGS:
            raise ValueError(f"unsupported language {lang!r}; choose one of {', '.join(SUPPORTED_LANGS)}")
        if splitter is not None and splitter.lang != lang:
            raise ValueError(f"a {splitter.lang} compound splitter cannot analyse {lang} text")
        self.lang = lang
        self.stem = stem
        self.remove_stopwords = remove_stopwords
        self.splitter = splitter
        self._stemmer = Stemmer.Stemmer(STEMMERS[lang])
        self._stop = stopwords(lang) if remove_stopwords else frozenset()
        self._part_stop = stopwords(lang)
        self._cache: dict[str, str] = {}
        self._split_cache: dict[str, tuple[str, ...]] = {}

    def term(self, token: str) -> str:
        """Map one normalised token to its index term (stem + accent folding)."""
        cached = self._cache.get(token)
        if cached is not None:
            return cached
        if _is_special(token) or not self.stem:
            term = token
        else:
            term = fold_accents(self._stemmer.stemWord(token))
        if len(self._cache) < 500_000:  # bounded memo: the vocabulary of a corpus, not of the world
            self._cache[token] = term
        return term

    def terms(self, token: str) -> tuple[str, ...]:
        """All index terms of one normalised token: its term, then (with a splitter) its parts' terms."""
        cached = self._split_cache.get(token)
        if cached is not None:
            return cached
        whole = self.term(token)
        parts: tuple[str, ...] = ()
        if self.splitter is not None and not _is_special(token):
            parts = tuple(self.term(p) for p in self.splitter.split(token) if p not in self._part_stop)
        out = (whole, *parts)
        if len(self._split_cache) < 500_000:
            self._split_cache[token] = out
        return out

    def __call__(self, text: str) -> list[str]:
        stop = self._stop
        if self.splitter is None:
            return [self.term(t) for t in tokenize(text) if t not in stop and (len(t) > 1 or t.isdigit())]
        out: list[str] = []
        for t in tokenize(text):
            if t not in stop and (len(t) > 1 or t.isdigit()):
                out.extend(self.terms(t))
        return out

    def groups(self, text: str) -> list[tuple[str, tuple[str, ...]]]:
        """``(term, its parts' terms)`` per kept token (parts empty unless a splitter split the word)."""
        stop = self._stop
        out = []
        for t in tokenize(text):
            if t not in stop and (len(t) > 1 or t.isdigit()):
                whole, *parts = self.terms(t)
                out.append((whole, tuple(parts)))
        return out

    def __repr__(self) -> str:
        extra = f", splitter={len(self.splitter)} words" if self.splitter is not None else ""
        return f"Analyzer(lang={self.lang!r}, stem={self.stem}, remove_stopwords={self.remove_stopwords}{extra})"


@lru_cache(maxsize=8)
def get_analyzer(lang: str) -> Analyzer:
    """Shared default analyzer per language."""
    return Analyzer(lang)


def detect_language(text: str, default: str = "en") -> str:
    """Guess en/de/fr from stop-word hits (enough for whole claims or abstracts; short text -> default)."""
    tokens = tokenize(text[:5000])
    if len(tokens) < 3:
        return default
    scores: dict[str, float] = {lang: sum(1 for t in tokens if t in stopwords(lang)) for lang in SUPPORTED_LANGS}
    # umlauts/eszett and French accents break ties on short text
    scores["de"] += sum(ch in "äöüß" for ch in text[:5000].lower()) * 0.5
    scores["fr"] += sum(ch in "éèêàçù" for ch in text[:5000].lower()) * 0.5
    best = max(scores, key=lambda k: scores[k])
    return best if scores[best] > 0 else default


class CachedAnalyzer:
    """``Analyzer`` output with one dict lookup per token: each distinct surface token is analysed once.

    Tokens are split exactly as ``service.text.analysis.tokenize`` does before it removes the spaces
    inside classification codes; each distinct token is then passed through the analyzer itself, so
    the terms are the analyzer's (a test compares both on real patents). ``max_memo`` bounds memory.
    """

    def __init__(self, analyzer: Analyzer, max_memo: int = 2_000_000) -> None:
        self.analyzer = analyzer
        self.max_memo = max_memo
        self._memo: dict[str, str] = {}  # token -> term, "" when the analyzer drops the token
        self._multi: dict[str, tuple[str, ...]] = {}  # the same with a compound splitter: token -> terms

    def __call__(self, text: str) -> list[str]:
        if self.analyzer.splitter is not None:
            return self._call_multi(text)
        memo = self._memo
        tokens = TOKEN_RE.findall(normalise(text))
        try:
            terms = [memo[t] for t in tokens]
        except KeyError:
            overflow: dict[str, str] = {}
            for t in set(tokens).difference(memo):
                alone = self.analyzer(t)
                if len(alone) > 1:  # never seen; keep exactness by analysing the whole text
                    return self.analyzer(text)
                if len(memo) < self.max_memo:
                    memo[t] = alone[0] if alone else ""
                else:
                    overflow[t] = alone[0] if alone else ""
            if overflow:
                terms = [overflow[t] if t in overflow else memo[t] for t in tokens]
            else:
                terms = [memo[t] for t in tokens]
        return [t for t in terms if t]

    def _call_multi(self, text: str) -> list[str]:
        """With a compound splitter a token may give several terms (the word and its parts)."""
        memo = self._multi
        tokens = TOKEN_RE.findall(normalise(text))
        out: list[str] = []
        for t in tokens:
            terms = memo.get(t)
            if terms is None:
                if len(tokenize(t)) != 1:  # never seen; keep exactness by analysing the whole text
                    return self.analyzer(text)
                terms = tuple(self.analyzer(t))
                if len(memo) < self.max_memo:
                    memo[t] = terms
            out.extend(terms)
        return out
