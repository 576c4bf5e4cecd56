"""Build the compound splitter's word list (``service.text.compounds.CompoundSplitter``) from a corpus.

Known words are the surface tokens of the corpus' text in the language (every field, counted), plus
the single-word headwords of the chosen lexicons in that language (count 1 each, when installed; FreeDict
by default, Ding too on request: ``training.translation.lexicons``): the corpus knows the domain's words and
how often they occur, the dictionary knows the general vocabulary the corpus is too small to have seen.
Claims of ``exclude_ids`` records are not counted (evaluation topics: the splitter must not have seen the
query text).
"""

from __future__ import annotations

import hashlib
import logging
from collections import Counter
from collections.abc import Collection, Iterable, Sequence

import Stemmer

from service.corpus.record import PatentRecord
from service.text.analysis import STEMMERS, stopwords, tokenize
from service.text.compounds import LINKERS, CompoundSplitter
from training.translation.dictionary import cached_json
from training.translation.lexicons import DEFAULT_SPLITTER_LEXICONS, LexiconDirs, dictionary_headwords

log = logging.getLogger(__name__)

COMPOUND_LANGS = ("de", "fr")
DEFAULT_COMPOUND_LANGS = ("de",)
MIN_PART = 4


def _word(token: str, min_len: int) -> bool:
    return len(token) >= min_len and token.isalpha()


class WordCounter:
    """Counts the surface words of one language over records, one record at a time (for a streaming build)."""

    def __init__(self, lang: str, *, exclude_ids: Collection[str] = (), min_len: int = MIN_PART) -> None:
        self.lang = lang
        self.exclude = set(exclude_ids)
        self.min_len = min_len
        self.counts: Counter[str] = Counter()
        self.records = 0

    def add(self, rec: PatentRecord) -> None:
        if self.lang not in rec.languages:
            return
        if rec.id in self.exclude:
            fields: tuple[str, ...] = ("title", "abstract", "description")
        else:
            fields = ("title", "abstract", "claims", "description")
        text = rec.text(self.lang, fields)
        if text:
            self.records += 1
            self.counts.update(t for t in tokenize(text) if _word(t, self.min_len))


def splitter_from_counts(
    counts: Counter[str],
    lang: str,
    *,
    use_dict: bool = True,
    lexicons: Sequence[str] = DEFAULT_SPLITTER_LEXICONS,
    dirs: LexiconDirs | None = None,
    min_part: int = MIN_PART,
) -> CompoundSplitter:
    """A splitter knowing ``counts`` (corpus words) plus the headwords of ``lexicons`` (count 1 each); a lexicon
    that is not installed is left out with a warning (``sources`` says which ones were used)."""
    if lang not in COMPOUND_LANGS:
        raise ValueError(f"no compound splitting for {lang!r}; choose from {', '.join(COMPOUND_LANGS)}")
    sources = ["corpus"] if counts else []
    extra: set[str] = set()
    if use_dict:
        extra, used, warnings = dictionary_headwords(lang, lexicons, dirs=dirs, min_len=min_part)
        for w in warnings:
            log.warning("%s: the %s compound splitter does without it", w, lang)
        sources += used
    if not counts and not extra:
        raise ValueError(f"no {lang} words to build a compound splitter from (no {lang} text and no dictionary)")
    return CompoundSplitter(
        counts, extra, lang=lang, min_part=min_part, linkers=LINKERS[lang], stop=stopwords(lang), sources=sources,
        dictionary_stems=dictionary_stems(extra, lang),
    )


def dictionary_stems(words: Collection[str], lang: str) -> list[str]:
    """The stems of a dictionary's headwords under ``lang``'s stemmer (what ``CompoundSplitter`` computes when not
    given them), cached on disk by the words' content: stemming the 280k German headwords takes about 1.5 s of every
    build, reading them back 0.1 s."""
    stemmer = STEMMERS.get(lang, "porter")
    ordered = sorted(words)
    key = f"{stemmer}|{hashlib.sha256(chr(10).join(ordered).encode()).hexdigest()}"
    return cached_json(f"stems-{lang}", key, lambda: sorted(set(Stemmer.Stemmer(stemmer).stemWords(ordered))))


def build_splitter(
    records: Iterable[PatentRecord],
    lang: str = "de",
    *,
    exclude_ids: Collection[str] = (),
    use_dict: bool = True,
    lexicons: Sequence[str] = DEFAULT_SPLITTER_LEXICONS,
    dirs: LexiconDirs | None = None,
    min_part: int = MIN_PART,
) -> CompoundSplitter:
    """Count the words of ``records`` in ``lang`` and build a splitter (see the module docstring)."""
    counter = WordCounter(lang, exclude_ids=exclude_ids, min_len=min_part)
    for rec in records:
        counter.add(rec)
    return splitter_from_counts(counter.counts, lang, use_dict=use_dict, lexicons=lexicons, dirs=dirs,
                                min_part=min_part)
