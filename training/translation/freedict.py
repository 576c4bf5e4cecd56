"""FreeDict lexicons between English, German and French (Debian ``dict-freedict-deu-eng``, ``-fra-eng``,
``-eng-deu``, ``-eng-fra``, ``-deu-fra``, ``-fra-deu``): German/French -> English, English -> German/French, and
German <-> French.

The files are in dictd format: ``NAME.index`` holds one line per headword (``headword TAB
base64-offset TAB base64-length``) pointing into ``NAME.dict.dz``, a gzip-readable text file of
entries converted from TEI. An entry looks like::

    Gehäuse /ɡəhˈɔøzə/ <neut, n, sg>
    case <n>, casing box <n>, housing <n>, chassis <n>, cladding <n>
          "Gehäuse für den Außenbereich"  - outdoor housing
       Synonym: {Umhüllung}
     see: {Gehäuse}, {Umhüllungen}, {Metallgehäuse}, {robustes Gehäuse}

The first line is the headword with pronunciation and grammar; the next lines, up to the first
example, note, synonym or cross-reference line, are the translations: comma-separated, with
``<grammar>``, ``[domain]`` and ``(comment)`` marks and placeholders like ``sth.``/``sb.``. The
German lexicon has one entry per sense (the same headword repeats); the French one numbers its
senses (``1. abasement``, ``2. decrease, lowering``) inside one entry.

Turning entries into ``p(target term | source term)`` over *index terms* (conventions shared with every lexicon
source, in :mod:`training.translation.dictionary`; the English -> German/French
lexicons have the same format and are read the same way, with the languages swapped):

* the headword is analysed with ``get_analyzer(src)``; headwords that are phrases (more than one
  content term after stop words: ``sich drehen`` counts as ``dreh``) or affixes (``…fach``,
  ``Fach…``) are skipped: a table maps single terms;
* every translation is analysed with ``get_analyzer(tgt)``; a single-content-word translation gives
  its term; within a sense, multi-word translations (``turning moment``) are used only when the sense
  has no single-word one, and then only through their head, the last content word (English noun
  compounds are head-final: ``rack bay`` -> ``bay``, ``water wave`` -> ``wave``; so are German
  adjective + noun phrases, ``elektrische Spannung`` -> ``spannung``);
* the German <-> French lexicons are WikDict editions (made from Wiktionary) with another layout: after the
  headword line, the first line and every line that starts with a sense number (``1. bac``, ``2. récipient,
  réservoir``) are translations; the other lines are definitions in the *source* language (``Gefäß mit einem
  hinreichenden Innenvolumen ...``) and are skipped (:data:`GLOSSED`);
* each sense carries the same mass, shared uniformly by its distinct terms; the masses of all senses
  of all entries of a source term are summed and normalised. A term that translates many senses
  (``Schicht``: layer in three of them) therefore outranks a one-off sense (``shift``). Dictionary
  order is not a usable signal (the German file lists senses in no particular order).
"""

from __future__ import annotations

import functools
import gzip
import logging
import re
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from service.text.analysis import normalise
from training.translation.dictionary import (
    MARKS_RE,
    LexiconNotFoundError,
    SenseMasses,
    SourceTerms,
    cached_json,
    cached_table,
    file_stamp,
    target_terms,
)

log = logging.getLogger(__name__)

DICTD_DIR = Path("/usr/share/dictd")
# (source, target) -> dictd name; the Debian package is "dict-" + name
LEXICONS = {
    ("de", "en"): "freedict-deu-eng",
    ("fr", "en"): "freedict-fra-eng",
    ("en", "de"): "freedict-eng-deu",
    ("en", "fr"): "freedict-eng-fra",
    ("de", "fr"): "freedict-deu-fra",
    ("fr", "de"): "freedict-fra-deu",
}
GLOSSED = frozenset({("de", "fr"), ("fr", "de")})
"""The WikDict lexicons, whose entries mix translations with source-language definitions (see above)."""
LEXICON_NAMES = {src: name for (src, tgt), name in LEXICONS.items() if tgt == "en"}  # src -> English ones
DEBIAN_PACKAGES = {pair: f"dict-{name}" for pair, name in LEXICONS.items()}

_B64 = {c: i for i, c in enumerate("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")}
_NOT_TRANSLATION_RE = re.compile(r'^\s*(?:"|Note:|Synonyms?:|see:|Antonyms?:|Example|Usage:)')
_SENSE_NUM_RE = re.compile(r"^\s*\d+\.\s+")
_SENSE_NUM_START_RE = re.compile(r"^\s*\d+\.(?:\s|$)")
_TRAILING_NUM_RE = re.compile(r"\s+\d+\.$")
_PRON_RE = re.compile(r"\s/[^/]*/")


def decode_b64_number(text: str) -> int:
    """Decode dictd's base64 numbers (most significant digit first, no padding)."""
    n = 0
    for ch in text:
        try:
            n = n * 64 + _B64[ch]
        except KeyError:
            raise ValueError(f"not a dictd base64 number: {text!r}") from None
    return n


def _check_pair(src: str, tgt: str) -> str:
    if (src, tgt) not in LEXICONS:
        if tgt == "en":
            raise ValueError(f"no FreeDict lexicon configured for {src!r}; choose one of {', '.join(LEXICON_NAMES)}")
        valid = ", ".join(f"{s}-{t}" for s, t in LEXICONS)
        raise ValueError(f"no FreeDict lexicon configured for {src}-{tgt}; choose one of {valid}")
    return LEXICONS[(src, tgt)]


def lexicon_paths(src: str, dictd_dir: str | Path = DICTD_DIR, *, tgt: str = "en") -> tuple[Path, Path]:
    """``(index, dict)`` paths of the FreeDict ``src``-``tgt`` lexicon (the dict may be ``.dict`` or ``.dict.dz``)."""
    base = Path(dictd_dir) / _check_pair(src, tgt)
    index = base.with_name(base.name + ".index")
    data = base.with_name(base.name + ".dict.dz")
    if not data.exists() and base.with_name(base.name + ".dict").exists():
        data = base.with_name(base.name + ".dict")
    return index, data


def read_dictd(index_path: str | Path, dict_path: str | Path) -> Iterator[tuple[str, str]]:
    """Yield ``(index headword, entry text)`` per entry, skipping the ``00-database-*`` info entries.

    An entry listed under several index headwords is yielded once (for its first index line).
    """
    index_path, dict_path = Path(index_path), Path(dict_path)
    for p in (index_path, dict_path):
        if not p.exists():
            raise LexiconNotFoundError(f"dictd file {p} not found")
    opener = gzip.open if dict_path.suffix == ".dz" else open
    with opener(dict_path, "rb") as fh:
        data = fh.read()
    seen: set[int] = set()
    with open(index_path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 3:
                raise ValueError(f"{index_path}:{lineno}: expected 'headword<TAB>offset<TAB>length', got {line!r}")
            head, off, length = parts[0], decode_b64_number(parts[1]), decode_b64_number(parts[2])
            if head.startswith("00database") or head.startswith("00-database") or off in seen:
                continue
            seen.add(off)
            yield head, data[off : off + length].decode("utf-8", errors="replace")


@dataclass(frozen=True)
class DictEntry:
    """One parsed entry: the headword as printed and its senses (each a list of translation strings)."""

    headword: str
    senses: tuple[tuple[str, ...], ...]


def parse_headword(first_line: str) -> str:
    """The headword of an entry's first line (without pronunciation and grammar); ``''`` if none."""
    first = _PRON_RE.sub(" ", " " + first_line).strip()
    return re.split(r"\s+(?:<|\(\[|\()", first, maxsplit=1)[0].strip()


def parse_entry(text: str, *, glossed: bool = False) -> DictEntry | None:
    """Parse the text of one dictd entry; ``None`` when it has no headword or no translation.

    ``glossed``: a WikDict entry (:data:`GLOSSED`), whose translations are the first line and the numbered ones."""
    lines = text.split("\n")
    headword = parse_headword(lines[0])
    senses: list[tuple[str, ...]] = []
    for i, line in enumerate(lines[1:]):
        if not line.strip():
            break  # the translation block ends at the first blank line
        if _NOT_TRANSLATION_RE.match(line):
            continue  # examples, notes, synonyms, cross-references
        if glossed:
            if i > 0 and not _SENSE_NUM_START_RE.match(line):
                continue  # a definition in the source language
            line = _TRAILING_NUM_RE.sub("", _SENSE_NUM_START_RE.sub("", line))  # "2. Baum 2.", " 3." (no translation)
        line = _SENSE_NUM_RE.sub("", line)
        cleaned = MARKS_RE.sub(" ", line)
        alts = tuple(a for a in (re.sub(r"\s+", " ", x).strip(" .;:") for x in re.split(r"[,;]", cleaned)) if a)
        if alts:
            senses.append(alts)
    if not headword or not senses:
        return None
    return DictEntry(headword=headword, senses=tuple(senses))


def lexicon_table(
    src: str,
    *,
    tgt: str = "en",
    dictd_dir: str | Path = DICTD_DIR,
    only: Collection[str] | None = None,
    progress: bool | None = None,
) -> dict[str, dict[str, float]]:
    """``{source index term: {target index term: p}}`` from the installed FreeDict lexicon.

    ``only``: build just the rows of these source terms (the same rows, less work; e.g. the terms of a
    topic set). Raises ``LexiconNotFoundError`` when the lexicon is not installed (see ``load_lexicon``).
    """
    index, data = lexicon_paths(src, dictd_dir, tgt=tgt)
    if not index.exists() or not data.exists():
        raise LexiconNotFoundError(
            f"FreeDict lexicon {index.with_suffix('')} not found; install {DEBIAN_PACKAGES[(src, tgt)]} "
            "(scripts/setup.sh)"
        )
    source_term = SourceTerms(src)
    masses = SenseMasses()
    n_entries = 0
    for _head, text in tqdm(
        read_dictd(index, data),
        desc=f"FreeDict {src}-{tgt}",
        unit=" entries",
        disable=None if progress is None else not progress,
    ):
        s = source_term(parse_headword(text.split("\n", 1)[0]))
        if s is None or (only is not None and s not in only):
            continue
        entry = parse_entry(text, glossed=(src, tgt) in GLOSSED)
        if entry is None:
            continue
        n_entries += 1
        for sense in entry.senses:
            masses.add(s, target_terms(sense, tgt))
    table = masses.table()
    log.info("FreeDict %s-%s: %d entries -> %d source terms", src, tgt, n_entries, len(table))
    return table


def load_lexicon(
    src: str,
    *,
    tgt: str = "en",
    dictd_dir: str | Path = DICTD_DIR,
    only: Collection[str] | None = None,
    progress: bool | None = None,
) -> dict[str, dict[str, float]] | None:
    """Like ``lexicon_table`` but logs a warning and returns ``None`` when the lexicon is not installed."""
    try:
        return lexicon_table(src, tgt=tgt, dictd_dir=dictd_dir, only=only, progress=progress)
    except LexiconNotFoundError:
        index, _ = lexicon_paths(src, dictd_dir, tgt=tgt)
        log.warning(
            "FreeDict lexicon %s not found; install %s (scripts/setup.sh) — using aligned-claims-only translation",
            index,
            DEBIAN_PACKAGES[(src, tgt)],
        )
        return None


def freedict_headwords(lang: str, dictd_dir: str | Path = DICTD_DIR, *, min_len: int = 4) -> set[str]:
    """Single-word headwords (letters only, at least ``min_len``) of the FreeDict ``lang``-English lexicon, read
    from its ``.index`` (for the compound splitter); empty for English. Raises ``LexiconNotFoundError`` when
    the lexicon is not installed."""
    name = LEXICONS.get((lang, "en"))
    if name is None:
        return set()
    index = Path(dictd_dir) / f"{name}.index"
    if not index.is_file():
        raise LexiconNotFoundError(f"FreeDict index {index} not found; install {DEBIAN_PACKAGES[(lang, 'en')]}")
    st = index.stat()
    return set(_headwords(str(index.resolve()), st.st_size, st.st_mtime_ns, min_len))


HEADWORDS_CACHE_VERSION = 1  # bump when what counts as a headword (or ``normalise``) changes


@functools.lru_cache(maxsize=8)
def _headwords(index: str, size: int, mtime_ns: int, min_len: int) -> frozenset[str]:
    """The headwords of one ``.index`` file, kept for this process while the file is unchanged (size and mtime in
    the key), and on disk for the next one (:func:`~training.translation.dictionary.cached_json`): every build with
    compound splitting needs them, and reading the 520k German lines takes about 3 s."""

    def read() -> list[str]:
        words: set[str] = set()
        with open(index, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                head = normalise(line.split("\t", 1)[0]).strip()
                if len(head) >= min_len and head.isalpha():  # one word of letters only (a token of its own)
                    words.add(head)
        return sorted(words)

    key = f"{HEADWORDS_CACHE_VERSION}|{file_stamp([Path(index)])}|{min_len}"
    return frozenset(cached_json(f"{Path(index).stem}-headwords", key, read))


LEXICON_CACHE_VERSION = 1  # bump when the parsing or the analysers change what a lexicon table holds


def cached_lexicon(
    src: str,
    *,
    tgt: str = "en",
    dictd_dir: str | Path = DICTD_DIR,
    progress: bool | None = None,
) -> dict[str, dict[str, float]] | None:
    """``load_lexicon`` for the whole lexicon, cached on disk (parsing the German one takes ~25 s, reading the
    cache ~1 s). The cache key is the dictd files' size and mtime and ``LEXICON_CACHE_VERSION``; an
    unwritable cache folder only costs the parse."""
    index, data = lexicon_paths(src, dictd_dir, tgt=tgt)
    if not index.exists() or not data.exists():
        return load_lexicon(src, tgt=tgt, dictd_dir=dictd_dir, progress=progress)  # warns, returns None
    return cached_table(
        LEXICONS[(src, tgt)],
        (index, data),
        LEXICON_CACHE_VERSION,
        lambda: lexicon_table(src, tgt=tgt, dictd_dir=dictd_dir, progress=progress),
    )
