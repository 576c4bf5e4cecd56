"""The word index of the query language: every word of every field of every document, with its position.

What a word is (the contract the reference evaluator of the tests reads too): a maximal run of letters and digits
(``[^\\W_]+``) of the text case-folded (``str.casefold``: ``Straße`` is ``strasse``); anything else separates words.

Each document is read field by field (:data:`~service.querylang.syntax.TOKEN_FIELDS`), each field as paragraphs:

- ``ti`` each language's title, ``ab`` each language's abstract, ``cl`` each claim of each language, ``desc`` each
  heading and paragraph of the description, ``pa`` each applicant, ``in`` each inventor: one paragraph each;
- ``pn`` the publication id, ``pc`` the country, ``kind`` the kind code, ``cpc`` and ``ipc`` each code (``h01f27/12``):
  one word each (matched by value, :mod:`service.querylang.evaluate`).

A paragraph's sentences end after ``.``, ``!``, ``?`` or ``;`` followed by white space. Positions count the words of a
field from 0, paragraph after paragraph, with a gap of :data:`PARAGRAPH_GAP` between two paragraphs: no NEAR/n or
ADJ/n (n <= :data:`~service.querylang.syntax.MAX_DISTANCE`) spans two paragraphs (two claims, a title and its
translation).

Layout of ``words/`` in an index folder (a build, a segment, a shard), all little-endian numpy arrays::

    vocab.txt                the distinct words, sorted, one per line (UTF-8)
    vocab.offsets.npy        uint64 [n_words + 1]: where each line starts in vocab.txt
    postings.offsets.npy     uint64 [n_words + 1]: each word's occurrences in the arrays below
    postings.rows.npy        uint32 [n]: the document (local row) of each occurrence
    postings.pos.npy         uint32 [n]: field << 28 | position; by word, then row, field and position
    sentences.npy            uint64: (row * 16 + field) << 32 | position of each sentence's first word, sorted
    paragraphs.npy           uint64: the same for each paragraph
    dates.npy                int32 [n_rows, 3]: publication, filing and earliest priority date, days since
                             1970-01-01 (MISSING_DATE: unknown)
    langs.npy                uint8 [n_words]: the languages whose text has each word (LANG_BITS: en 1, de 2, fr 4)
"""

from __future__ import annotations

import bisect
import re
import sys
import threading
import weakref
from array import array
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from service.corpus.record import PatentRecord
from service.index.store import EPOCH, MISSING_DATE, DocStore  # (the doc store's day numbers: one definition)
from service.querylang.syntax import FIELD_NUMBER, WILDCARD_CLASS, wildcard_regex

WORDS_DIR = "words"
WORDS_VERSION = 1
WORD_RE = re.compile(r"[^\W_]+")
SENTENCE_END = re.compile(r"(?<=[.!?;])\s+")
PARAGRAPH_GAP = 1000
POS_BITS = 28
POS_MASK = (1 << POS_BITS) - 1
LANG_BITS = {"en": 1, "de": 2, "fr": 4}
"""The languages a word's text is in (``langs.npy``): a word is translated from the languages whose text has it, into
the words of the other languages' text."""


def tokens(text: str) -> list[str]:
    """The words of a text (see the module doc)."""
    return WORD_RE.findall(text.casefold())


def paragraphs(record: PatentRecord) -> Iterator[tuple[str, list[tuple[str | None, str]]]]:
    """``(field, [(language, paragraph)])`` of a record's text fields and names, in field order (the language: None
    for names)."""
    yield "ti", [(lang, t) for lang, t in record.title.items() if t]
    yield "ab", [(lang, t) for lang, t in record.abstract.items() if t]
    yield "cl", [(lang, c.text) for lang, claims in record.claims.items() for c in claims if c.text]
    desc: list[tuple[str | None, str]] = []
    for section in record.description:
        for _, node in section.walk():
            if node.heading:
                desc.append((record.lang, node.heading))
            desc.extend((record.lang, p) for p in node.paragraphs if p)
    yield "desc", desc
    yield "pa", [(None, a) for a in record.applicants if a]
    yield "in", [(None, i) for i in record.inventors if i]


def values(record: PatentRecord) -> Iterator[tuple[str, list[str]]]:
    """``(field, words)`` of the fields matched by value."""
    yield "pn", [record.id.casefold()]
    yield "pc", [record.country.casefold()] if record.country else []
    yield "kind", [record.kind.casefold()] if record.kind else []
    yield "cpc", [c.casefold() for c in record.cpc]
    yield "ipc", [c.casefold() for c in record.ipc]


def record_dates(record: PatentRecord) -> tuple[int, int, int]:
    def days(d: date | None) -> int:
        return (d - EPOCH).days if d is not None else MISSING_DATE

    return (days(record.publication_date), days(record.application_date),
            days(min(record.priority_dates)) if record.priority_dates else MISSING_DATE)


class WordIndexWriter:
    """Reads records in row order (:meth:`add`), writes ``words/`` (:meth:`finish`)."""

    def __init__(self, out: Path, *, progress: bool = False) -> None:
        self.out = Path(out)
        self.ids: dict[str, int] = {}
        self.tids, self.rows, self.pos = array("I"), array("I"), array("I")
        self.sentences, self.paragraphs = array("Q"), array("Q")
        self.dates: list[tuple[int, int, int]] = []
        self.langs: dict[int, int] = {}  # word id -> bit mask of the languages whose text has it (LANG_BITS)
        self.progress = progress

    def _word(self, w: str) -> int:
        tid = self.ids.get(w)
        if tid is None:
            tid = self.ids[w] = len(self.ids)
        return tid

    def add(self, record: PatentRecord) -> None:
        row = len(self.dates)
        self.dates.append(record_dates(record))
        word, tids, rows, pos = self._word, self.tids, self.rows, self.pos
        for fname, paras in paragraphs(record):
            f = FIELD_NUMBER[fname]
            key = (row * 16 + f) << 32
            at = 0
            for p, (lang, text) in enumerate(paras):
                if p:
                    at += PARAGRAPH_GAP
                self.paragraphs.append(key | at)
                bit = LANG_BITS.get(lang or "", 0)
                for sentence in SENTENCE_END.split(text):
                    words = tokens(sentence)
                    if not words:
                        continue
                    self.sentences.append(key | at)
                    for w in words:
                        tid = word(w)
                        tids.append(tid)
                        rows.append(row)
                        pos.append(f << POS_BITS | at)
                        at += 1
                        if bit:
                            self.langs[tid] = self.langs.get(tid, 0) | bit
            if at > POS_MASK:
                raise ValueError(f"{record.id}: field {fname} has more than {POS_MASK} positions")
        for fname, vals in values(record):
            f = FIELD_NUMBER[fname]
            for i, v in enumerate(vals):
                tids.append(word(v))
                rows.append(row)
                pos.append(f << POS_BITS | i)

    def finish(self) -> dict[str, Any]:
        d = self.out / WORDS_DIR
        d.mkdir(parents=True, exist_ok=True)
        words = list(self.ids)
        order = sorted(range(len(words)), key=words.__getitem__)  # alphabetical word ids
        rank = np.empty(len(words), dtype=np.uint32)
        rank[np.asarray(order, dtype=np.int64)] = np.arange(len(words), dtype=np.uint32)
        tids = rank[np.frombuffer(self.tids, dtype=np.uint32)] if len(self.tids) else np.zeros(0, np.uint32)
        by_word = np.argsort(tids, kind="stable")  # (occurrences were added in row, field, position order)
        counts = np.bincount(tids, minlength=len(words)) if len(tids) else np.zeros(len(words), np.int64)
        offsets = np.zeros(len(words) + 1, dtype=np.uint64)
        np.cumsum(counts, out=offsets[1:])
        text = "".join(f"{words[i]}\n" for i in order).encode()
        line_starts = np.zeros(len(words) + 1, dtype=np.uint64)
        if words:
            lengths = np.asarray([len(words[i].encode()) + 1 for i in order], dtype=np.uint64)
            np.cumsum(lengths, out=line_starts[1:])
        (d / "vocab.txt").write_bytes(text)
        np.save(d / "vocab.offsets.npy", line_starts)
        np.save(d / "postings.offsets.npy", offsets)
        np.save(d / "postings.rows.npy", np.frombuffer(self.rows, dtype=np.uint32)[by_word] if len(tids)
                else np.zeros(0, np.uint32))
        np.save(d / "postings.pos.npy", np.frombuffer(self.pos, dtype=np.uint32)[by_word] if len(tids)
                else np.zeros(0, np.uint32))
        np.save(d / "sentences.npy", np.sort(np.frombuffer(self.sentences, dtype=np.uint64)))
        np.save(d / "paragraphs.npy", np.sort(np.frombuffer(self.paragraphs, dtype=np.uint64)))
        np.save(d / "dates.npy", np.asarray(self.dates, dtype=np.int32).reshape(-1, 3))
        langs = np.zeros(len(words), dtype=np.uint8)
        for tid, bits in self.langs.items():
            langs[rank[tid]] = bits
        np.save(d / "langs.npy", langs)
        entry = {"dir": WORDS_DIR, "version": WORDS_VERSION, "n_docs": len(self.dates), "n_words": len(words),
                 "occurrences": int(len(tids))}
        self.abort()
        return entry

    def abort(self) -> None:
        self.ids.clear()
        self.langs.clear()
        self.tids, self.rows, self.pos = array("I"), array("I"), array("I")
        self.sentences, self.paragraphs = array("Q"), array("Q")


class _Lines:
    """The sorted vocabulary as a sequence of str (decoded on access): what :mod:`bisect` searches."""

    def __init__(self, blob: bytes, starts: np.ndarray) -> None:
        self.blob, self.starts = blob, starts

    def __len__(self) -> int:
        return len(self.starts) - 1

    def __getitem__(self, i: int) -> str:
        return self.blob[int(self.starts[i]):int(self.starts[i + 1]) - 1].decode()


class WordSegment:
    """The ``words/`` of one folder, mapped read-only."""

    def __init__(self, folder: Path) -> None:
        d = Path(folder) / WORDS_DIR
        if not (d / "vocab.txt").is_file():
            raise FileNotFoundError(f"{folder}: no word index ({WORDS_DIR}/): the query language needs it; rebuild "
                                    "the index with `priorart build`")
        self.blob = (d / "vocab.txt").read_bytes()
        self.vocab = _Lines(self.blob, np.load(d / "vocab.offsets.npy"))
        self.offsets = np.load(d / "postings.offsets.npy", mmap_mode="r")
        self.rows = np.load(d / "postings.rows.npy", mmap_mode="r")
        self.pos = np.load(d / "postings.pos.npy", mmap_mode="r")
        self.sentences = np.load(d / "sentences.npy", mmap_mode="r")
        self.paragraphs = np.load(d / "paragraphs.npy", mmap_mode="r")
        self.dates = np.load(d / "dates.npy", mmap_mode="r")
        self.langs = np.load(d / "langs.npy", mmap_mode="r")
        self.n_rows = int(self.dates.shape[0])
        self._text: str | None = None
        self._stems: dict[str, dict[str, list[int]]] = {}

    def word_id(self, word: str) -> int | None:
        i = bisect.bisect_left(self.vocab, word)
        return i if i < len(self.vocab) and self.vocab[i] == word else None

    def matching(self, pattern: str) -> list[tuple[str, int]]:
        """``(word, id)`` of every word a pattern (the wildcards :data:`~service.querylang.syntax.WILDCARDS`)
        matches, alphabetical."""
        head = re.split(WILDCARD_CLASS, pattern, maxsplit=1)[0]
        if head == pattern:
            i = self.word_id(pattern)
            return [] if i is None else [(pattern, i)]
        rx = re.compile(wildcard_regex(pattern) + r"\Z")
        if head:
            lo = bisect.bisect_left(self.vocab, head)
            hi = bisect.bisect_left(self.vocab, head + "\U0010ffff", lo)
            return [(w, i) for i in range(lo, hi) if rx.match(w := self.vocab[i])]
        if self._text is None:
            self._text = self.blob.decode()
        line = re.compile("^" + rx.pattern[:-2] + "$", re.MULTILINE)
        found = [m.group(0) for m in line.finditer(self._text)]
        return [(w, i) for w in found if (i := self.word_id(w)) is not None]

    def prefixed(self, prefix: str) -> list[tuple[str, int]]:
        lo = bisect.bisect_left(self.vocab, prefix)
        hi = bisect.bisect_left(self.vocab, prefix + "\U0010ffff", lo)
        return [(self.vocab[i], i) for i in range(lo, hi)]

    def occurrences(self, ids: list[int], fields: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        """The occurrences of the words ``ids`` in ``fields``: ``(key, position)`` with key = row * 16 + field, sorted
        by key and position."""
        keys, poss = [], []
        allowed = np.zeros(16, dtype=bool)
        allowed[list(fields)] = True
        for i in ids:
            a, b = int(self.offsets[i]), int(self.offsets[i + 1])
            pos = np.asarray(self.pos[a:b])
            f = pos >> POS_BITS
            keep = allowed[f]
            keys.append(np.asarray(self.rows[a:b], dtype=np.uint64)[keep] * 16 + f[keep].astype(np.uint64))
            poss.append((pos & POS_MASK)[keep].astype(np.int64))
        if not keys:
            return np.zeros(0, np.uint64), np.zeros(0, np.int64)
        k, p = np.concatenate(keys), np.concatenate(poss)
        if len(ids) > 1:
            order = np.lexsort((p, k))
            k, p = k[order], p[order]
        return k, p

    def languages(self, word: str) -> set[str]:
        """The languages whose text in this segment has ``word``."""
        i = self.word_id(word)
        bits = int(self.langs[i]) if i is not None else 0
        return {lang for lang, bit in LANG_BITS.items() if bits & bit}

    def stems(self, lang: str, analyze: Any) -> dict[str, list[int]]:
        """Each stem of ``lang``'s analyzer -> the ids of the words of ``lang``'s text it stems (computed once per
        segment: the words a translation into ``lang`` reaches)."""
        if lang not in self._stems:
            out: dict[str, list[int]] = {}
            bit = LANG_BITS[lang]
            for i in np.flatnonzero(np.asarray(self.langs) & bit).tolist():
                w = self.vocab[i]
                if not w.isalpha():
                    continue
                terms = analyze(w)
                if len(terms) == 1:
                    out.setdefault(terms[0], []).append(i)
            self._stems[lang] = out
        return self._stems[lang]


def word_segments(docs: DocStore) -> list[tuple[WordSegment, int]]:
    """The word index of each segment of a doc store's generation with the segment's first row, kept while the doc
    store is. A segment is read once while something holds it (:func:`service.filecache.load_shared`): a reload after
    ``add`` opens only the new segment's, and the stems of its words, computed at the first translation into each
    language, stay with it."""
    from service.filecache import load_shared

    with _of_store_lock:
        found = _of_store.get(docs)
    if found is not None:
        return found
    out = []
    for d, start in zip(docs.segment_dirs, docs.segment_starts, strict=True):
        vocab = Path(d) / WORDS_DIR / "vocab.txt"
        if not vocab.is_file():
            raise FileNotFoundError(f"{d}: no word index ({WORDS_DIR}/): the query language needs it; rebuild the "
                                    "index with `priorart build`")
        out.append((load_shared(vocab, _open_segment), int(start)))
    with _of_store_lock:
        return _of_store.setdefault(docs, out)


_of_store: weakref.WeakKeyDictionary[DocStore, list[tuple[WordSegment, int]]] = weakref.WeakKeyDictionary()
_of_store_lock = threading.Lock()


def _open_segment(vocab: Path) -> WordSegment:
    return WordSegment(vocab.parent.parent)


def write_words(out: Path, records: Any, *, progress: bool = False) -> dict[str, Any]:
    """``words/`` of ``records`` (row order) in ``out``; its ``meta.json`` entry."""
    w = WordIndexWriter(out, progress=progress)
    for rec in tqdm(records, desc="word index", unit="doc", disable=not progress, file=sys.stderr, mininterval=1):
        w.add(rec)
    return w.finish()


__all__ = ["MISSING_DATE", "PARAGRAPH_GAP", "POS_BITS", "WORDS_DIR", "WORDS_VERSION", "WORD_RE", "WordIndexWriter",
           "WordSegment", "paragraphs", "record_dates", "tokens", "values", "word_segments", "write_words"]
