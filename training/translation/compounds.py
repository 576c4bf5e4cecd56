"""Build the compound splitter's word list (``service.text.compounds.CompoundSplitter``) from a corpus.

Known words are the surface tokens of the corpus' text in the language (every field, counted), plus
the headwords of the FreeDict lexicon from that language (count 1 each, when installed): the corpus
knows the domain's words and how often they occur, the dictionary knows the general vocabulary the
corpus is too small to have seen. Claims of ``exclude_ids`` records are not counted (evaluation
topics: the splitter must not have seen the query text).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Collection, Iterable
from pathlib import Path

from service.corpus.record import PatentRecord
from service.text.analysis import normalise, stopwords, tokenize
from service.text.compounds import LINKERS, CompoundSplitter
from training.translation.freedict import DICTD_DIR, LEXICONS

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


def dictionary_words(lang: str, dictd_dir: str | Path = DICTD_DIR, *, min_len: int = MIN_PART) -> set[str]:
    """Single-word headwords of the FreeDict ``lang``-English lexicon (read from its ``.index``); empty if absent."""
    name = LEXICONS.get((lang, "en"))
    if name is None:
        return set()
    index = Path(dictd_dir) / f"{name}.index"
    if not index.is_file():
        log.warning("FreeDict index %s not found: the %s compound splitter knows the corpus' words only", index, lang)
        return set()
    words: set[str] = set()
    with open(index, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            head = normalise(line.split("\t", 1)[0]).strip()
            if _word(head, min_len):  # one word of letters only (a token of its own)
                words.add(head)
    return words


def splitter_from_counts(
    counts: Counter[str],
    lang: str,
    *,
    use_dict: bool = True,
    dictd_dir: str | Path = DICTD_DIR,
    min_part: int = MIN_PART,
) -> CompoundSplitter:
    """A splitter knowing ``counts`` (corpus words) plus the dictionary's headwords (count 1 each)."""
    if lang not in COMPOUND_LANGS:
        raise ValueError(f"no compound splitting for {lang!r}; choose from {', '.join(COMPOUND_LANGS)}")
    sources = ["corpus"] if counts else []
    extra: set[str] = set()
    if use_dict:
        extra = dictionary_words(lang, dictd_dir, min_len=min_part)
        if extra:
            sources.append("freedict")
    if not counts and not extra:
        raise ValueError(f"no {lang} words to build a compound splitter from (no {lang} text and no dictionary)")
    return CompoundSplitter(
        counts, extra, lang=lang, min_part=min_part, linkers=LINKERS[lang], stop=stopwords(lang), sources=sources
    )


def build_splitter(
    records: Iterable[PatentRecord],
    lang: str = "de",
    *,
    exclude_ids: Collection[str] = (),
    use_dict: bool = True,
    dictd_dir: str | Path = DICTD_DIR,
    min_part: int = MIN_PART,
) -> CompoundSplitter:
    """Count the words of ``records`` in ``lang`` and build a splitter (see the module docstring)."""
    counter = WordCounter(lang, exclude_ids=exclude_ids, min_len=min_part)
    for rec in records:
        counter.add(rec)
    return splitter_from_counts(counter.counts, lang, use_dict=use_dict, dictd_dir=dictd_dir, min_part=min_part)
