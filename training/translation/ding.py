"""The Ding German-English dictionary (Debian ``trans-de-en``, ``/usr/share/trans/de-en``): German -> English
and, read the other way, English -> German.

One entry per line, the German side and the English side separated by ``::``; each side has the same
number of sub-entries separated by ``|`` (sub-entry *i* of one side translates sub-entry *i* of the
other: the word, its plural or verb forms, compounds and phrases built on it), each sub-entry holds
alternatives separated by ``;``::

    Gehäuse {n}; Umhüllung {f} [techn.] | Gehäuse {pl}; Umhüllungen {pl} | Metallgehäuse {n} :: case;
    casing box; housing | cases; casing boxes; housings | metal casing

Marks: grammar ``{n}``, domains and usage ``[techn.]``, comments ``(eines Ventils)``, spelling variants
``<Abschluß>``, abbreviations ``/ABS/``, see-also references ``~Wort``. Lines starting with ``#`` are
comments (version, copyright).

Turned into ``p(target index term | source index term)`` with the conventions shared with FreeDict
(:mod:`training.translation.dictionary`): in each sub-entry, every alternative of the source side that is
one content term is a headword, and the sub-entry's alternatives on the other side are its translations
(single-content-word ones, else the heads of multi-word ones). A line is one sense: for each source term,
the distinct target terms of the line's sub-entries where it is a headword (``Gehäuse`` and its plural
``Gehäuse``) share one unit of mass; the senses of all lines are summed and normalised.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from service.text.analysis import normalise
from training.translation.dictionary import (
    MARKS_RE,
    Entries,
    LexiconNotFoundError,
    SenseMasses,
    SourceTerms,
    cached_table,
    target_terms,
)

log = logging.getLogger(__name__)

TRANS_DIR = Path("/usr/share/trans")
FILE_NAME = "de-en"
DEBIAN_PACKAGE = "trans-de-en"
PAIRS = (("de", "en"), ("en", "de"))
CACHE_VERSION = 1  # bump when the parsing or the analysers change what a Ding table holds

_ABBREV_RE = re.compile(r"(?<!\S)/[^/\s]+/(?!\S)")  # "/ABS/" (not "er/sie")
_SEE_RE = re.compile(r"~[^;|]*")  # "~Prozesskostenhilfe": a reference to the end of the alternative


@dataclass(frozen=True)
class DingEntry:
    """One line: per sub-entry, the (German alternatives, English alternatives), marks removed."""

    subentries: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...]

    def side(self, lang: str) -> Iterator[tuple[tuple[str, ...], tuple[str, ...]]]:
        """``(source alternatives, target alternatives)`` per sub-entry, reading from ``lang``."""
        for de, en in self.subentries:
            yield (de, en) if lang == "de" else (en, de)


def _alternatives(subentry: str) -> tuple[str, ...]:
    cleaned = _ABBREV_RE.sub(" ", MARKS_RE.sub(" ", _SEE_RE.sub(" ", subentry)))
    return tuple(a for a in (re.sub(r"\s+", " ", x).strip(" .,:") for x in cleaned.split(";")) if a)


def parse_line(line: str) -> DingEntry | None:
    """Parse one line of the Ding file; ``None`` for comments, blank lines and lines whose two sides do not
    have the same number of sub-entries (they cannot be aligned)."""
    line = line.strip()
    if not line or line.startswith("#"):
        return None
    de_side, sep, en_side = line.partition(" :: ")
    if not sep:
        return None
    de_subs, en_subs = de_side.split("|"), en_side.split("|")
    if len(de_subs) != len(en_subs):
        return None
    subs = tuple((_alternatives(d), _alternatives(e)) for d, e in zip(de_subs, en_subs, strict=True))
    subs = tuple((d, e) for d, e in subs if d and e)
    return DingEntry(subs) if subs else None


def check_pair(src: str, tgt: str) -> None:
    if (src, tgt) not in PAIRS:
        valid = ", ".join(f"{s}-{t}" for s, t in PAIRS)
        raise ValueError(f"the Ding dictionary has no {src}-{tgt} direction; choose one of {valid}")


def ding_path(trans_dir: str | Path = TRANS_DIR) -> Path:
    return Path(trans_dir) / FILE_NAME


def read_lines(path: str | Path) -> Iterator[str]:
    path = Path(path)
    if not path.is_file():
        raise LexiconNotFoundError(f"Ding dictionary {path} not found; install {DEBIAN_PACKAGE} (scripts/setup.sh)")
    with open(path, encoding="utf-8", errors="replace") as fh:
        yield from fh


def ding_entries_table(
    lines: Iterable[str], src: str, tgt: str, *, only: Collection[str] | None = None
) -> Entries:
    """``{source index term: {target index term: p}}`` from Ding lines (see the module docstring)."""
    check_pair(src, tgt)
    source_term = SourceTerms(src)
    masses = SenseMasses()
    lines_used = skipped = 0
    for line in lines:
        entry = parse_line(line)
        if entry is None:
            skipped += line.strip() != "" and not line.startswith("#")
            continue
        sense: dict[str, dict[str, None]] = {}  # source term -> its target terms on this line (ordered set)
        for sources, targets in entry.side(src):
            terms = [s for s in (source_term(a) for a in sources) if s is not None and (only is None or s in only)]
            if not terms:
                continue
            translated = target_terms(targets, tgt)
            for s in terms:
                sense.setdefault(s, {}).update(dict.fromkeys(translated))
        for s, ts in sense.items():
            if ts:
                masses.add(s, list(ts))
        lines_used += bool(sense)
    table = masses.table()
    log.info("Ding %s-%s: %d lines -> %d source terms (%d lines not parsed)", src, tgt, lines_used, len(table),
             skipped)
    return table


def ding_table(
    src: str,
    *,
    tgt: str = "en",
    trans_dir: str | Path = TRANS_DIR,
    only: Collection[str] | None = None,
    progress: bool | None = None,
) -> Entries:
    """The table of one direction from the installed file; raises ``LexiconNotFoundError`` when it is absent."""
    check_pair(src, tgt)
    lines = read_lines(ding_path(trans_dir))
    bar = tqdm(lines, desc=f"Ding {src}-{tgt}", unit=" lines", disable=None if progress is None else not progress)
    return ding_entries_table(bar, src, tgt, only=only)


def cached_ding_table(
    src: str, *, tgt: str = "en", trans_dir: str | Path = TRANS_DIR, progress: bool | None = None
) -> Entries:
    """``ding_table`` of the whole file, cached on disk like the FreeDict lexicons."""
    check_pair(src, tgt)
    path = ding_path(trans_dir)
    if not path.is_file():
        raise LexiconNotFoundError(f"Ding dictionary {path} not found; install {DEBIAN_PACKAGE} (scripts/setup.sh)")
    return cached_table(f"ding-{src}-{tgt}", (path,), CACHE_VERSION,
                        lambda: ding_table(src, tgt=tgt, trans_dir=trans_dir, progress=progress))


def ding_headwords(lang: str, trans_dir: str | Path = TRANS_DIR, *, min_len: int = 4) -> set[str]:
    """Single words (letters only, at least ``min_len``) among the ``lang`` alternatives, normalised like
    FreeDict's index headwords (for the compound splitter). Raises ``LexiconNotFoundError`` when absent."""
    words: set[str] = set()
    for line in read_lines(ding_path(trans_dir)):
        entry = parse_line(line)
        if entry is None:
            continue
        for sources, _ in entry.side(lang):
            for alt in sources:
                word = normalise(alt).strip()
                if len(word) >= min_len and word.isalpha():
                    words.add(word)
    return words
