"""Which bilingual dictionaries feed the translation tables and the compound splitter: the registry of lexicon
sources, and how the tables of several sources are combined.

Sources (each a Debian package, read where Debian installs it):

* ``freedict``: the FreeDict dictd lexicons de->en, fr->en, en->de, en->fr (``dict-freedict-*``,
  :mod:`training.translation.freedict`);
* ``ding``: the Ding German-English dictionary, de->en and en->de (``trans-de-en``,
  :mod:`training.translation.ding`). FreeDict's German lexicons are themselves converted from an older Ding
  release (1.9-fd1, 2022), so the two overlap heavily; Ding adds the newer entries and groups a word's senses
  differently (a line per sense with its compounds, where FreeDict splits the sub-entries into entries);
* ``pivot``: English -> French through German, FreeDict's en-de composed with its de-fr (WikDict, 47k headwords):
  FreeDict's own English-French lexicon has 6k rows, the composition 31k.

A missing package is a warning, never a failure: the direction then uses the other sources (or the aligned
claims alone). Where several sources have a row for a term, :func:`combine` averages their rows (each
dictionary an equal voice, whatever its size or how finely it splits senses).
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from service.text.translation import PivotTable, TranslationTable
from training.translation import ding, freedict
from training.translation.dictionary import (
    Entries,
    LexiconNotFoundError,
    cached_json,
    file_stamp,
    kept,
    on_forget,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LexiconSource:
    """One dictionary: the directions it has, where it is installed, how to read it."""

    name: str  # in build reports and the tables' ``sources``
    label: str
    pairs: tuple[tuple[str, str], ...]
    default_dir: Path
    # the whole table of a direction, cached (src, tgt, folder, progress); LexiconNotFoundError when absent
    table: Callable[[str, str, Path, bool | None], Entries]
    # single-word headwords of a language (lang, folder, min_len); LexiconNotFoundError when absent
    headwords: Callable[[str, Path, int], set[str]]
    package: Callable[[str, str], str]  # the Debian package of a direction
    reads: str = ""  # the source whose installed files it reads (its folder), when not its own


def _freedict_table(src: str, tgt: str, folder: Path, progress: bool | None) -> Entries:
    index, data = freedict.lexicon_paths(src, folder, tgt=tgt)
    if not index.exists() or not data.exists():
        raise LexiconNotFoundError(f"FreeDict lexicon {index.with_suffix('')} not found")
    table = freedict.cached_lexicon(src, tgt=tgt, dictd_dir=folder, progress=progress)
    if table is None:  # removed in between
        raise LexiconNotFoundError(f"FreeDict lexicon {index.with_suffix('')} not found")
    return table


LEXICON_PIVOT = "de"
"""The language the ``pivot`` source goes through (FreeDict's largest lexicons: German <-> English and the WikDict
German <-> French editions)."""
PIVOT_CACHE_VERSION = 1  # bump when the composition changes (the legs' own changes are in their cache version)


def compose(first: Entries, second: Entries, *, src: str, tgt: str) -> Entries:
    """``first`` (``src`` -> pivot) composed with ``second`` (pivot -> ``tgt``) as :class:`PivotTable` composes
    tables (p(t|s) = sum_d p(d|s) p(t|d) over each leg's pruned alternatives); a pivot word ``second`` does not know
    is dropped, not passed through as a ``tgt`` word."""
    known = {s: kept for s, row in first.items() if (kept := {d: p for d, p in row.items() if d in second})}
    head = TranslationTable(known, src=src, tgt=LEXICON_PIVOT)
    composed = PivotTable(head, TranslationTable(second, src=LEXICON_PIVOT, tgt=tgt))
    return {s: row for s in head.entries if (row := dict(composed.lookup(s)))}


def _legs(src: str, tgt: str) -> tuple[tuple[str, str], tuple[str, str]]:
    """The two FreeDict directions the ``pivot`` source composes for ``src``-``tgt``."""
    return (src, LEXICON_PIVOT), (LEXICON_PIVOT, tgt)


def _pivot_table(src: str, tgt: str, folder: Path, progress: bool | None) -> Entries:
    """FreeDict's ``src``-de lexicon composed with its de-``tgt`` one (:func:`compose`), cached on disk like the
    lexicons; ``LexiconNotFoundError`` when a leg is not installed."""
    legs = _legs(src, tgt)
    files = [path for s, t in legs for path in freedict.lexicon_paths(s, folder, tgt=t)]
    missing = [str(path) for path in files if not path.exists()]
    if missing:
        raise LexiconNotFoundError(f"FreeDict lexicon {missing[0]} not found")
    key = f"{PIVOT_CACHE_VERSION}|{freedict.LEXICON_CACHE_VERSION}|{file_stamp(files)}"
    return cached_json(f"pivot-{src}-{LEXICON_PIVOT}-{tgt}", key, lambda: compose(
        *(_freedict_table(s, t, folder, progress) for s, t in legs), src=src, tgt=tgt), keep=True)


SOURCES: dict[str, LexiconSource] = {
    "freedict": LexiconSource(
        name="freedict",
        label="FreeDict",
        pairs=tuple(freedict.LEXICONS),
        default_dir=freedict.DICTD_DIR,
        table=_freedict_table,
        headwords=lambda lang, folder, min_len: freedict.freedict_headwords(lang, folder, min_len=min_len),
        package=lambda src, tgt: freedict.DEBIAN_PACKAGES[(src, tgt)],
    ),
    "ding": LexiconSource(
        name="ding",
        label="Ding",
        pairs=ding.PAIRS,
        default_dir=ding.TRANS_DIR,
        table=lambda src, tgt, folder, progress: ding.cached_ding_table(src, tgt=tgt, trans_dir=folder,
                                                                        progress=progress),
        headwords=lambda lang, folder, min_len: ding.ding_headwords(lang, folder, min_len=min_len),
        package=lambda src, tgt: ding.DEBIAN_PACKAGE,
    ),
    "pivot": LexiconSource(
        name="pivot",
        label="FreeDict through German",
        pairs=(("en", "fr"),),  # fr -> en through German was measured and lost on fr-de (docs/RESULTS.md)
        default_dir=freedict.DICTD_DIR,
        table=_pivot_table,
        reads="freedict",  # FreeDict's dictd files: its folder (``lexicon_dirs["freedict"]``)
        headwords=lambda lang, folder, min_len: set(),  # the legs' headwords are FreeDict's own
        package=lambda src, tgt: " and ".join(freedict.DEBIAN_PACKAGES[leg] for leg in _legs(src, tgt)),
    ),
}
DEFAULT_LEXICONS: tuple[str, ...] = ("freedict", "pivot")
"""Lexicons of the translation tables by default (``docs/RESULTS.md``: Translation coverage)."""
DEFAULT_SPLITTER_LEXICONS: tuple[str, ...] = ("freedict",)
"""Lexicons whose headwords the compound splitter knows by default."""

LexiconDirs = Mapping[str, Path]  # source name -> folder (missing names: the source's default folder)


def parse_lexicons(value: str | Sequence[str]) -> tuple[str, ...]:
    """``"freedict,ding"`` (or a sequence) -> validated names in the given order; ``""`` -> none."""
    names = [v.strip() for v in (value.split(",") if isinstance(value, str) else value) if v.strip()]
    bad = [n for n in names if n not in SOURCES]
    if bad:
        raise ValueError(f"unknown lexicon(s) {', '.join(bad)}; choose from {', '.join(SOURCES)}")
    return tuple(dict.fromkeys(names))


def _folder(name: str, dirs: LexiconDirs | None) -> Path:
    """The folder a source reads: the one given for it, or for the source whose files it reads, else the default."""
    owner = SOURCES[name].reads or name
    return Path((dirs or {}).get(owner, SOURCES[owner].default_dir))


def combine(tables: Sequence[Mapping[str, Mapping[str, float]]]) -> Entries:
    """One table from several: a term's row is the mean of the rows the tables have for it (an equal voice per
    table that knows the term); a term only one table knows keeps that row."""
    if len(tables) == 1:  # one source (the default): its rows as they are, shared (no caller changes a row)
        return {s: row for s, row in tables[0].items() if row}  # type: ignore[misc]
    rows: dict[str, list[Mapping[str, float]]] = {}
    for table in tables:
        for s, row in table.items():
            if row:
                rows.setdefault(s, []).append(row)
    out: Entries = {}
    for s, found in rows.items():
        if len(found) == 1:
            out[s] = dict(found[0])
            continue
        merged: dict[str, float] = {}
        for row in found:
            for t, p in row.items():
                merged[t] = merged.get(t, 0.0) + p / len(found)
        out[s] = merged
    return out


@dataclass
class Lexicon:
    """The dictionary table of one direction and where it came from."""

    src: str
    tgt: str
    entries: Entries | None  # None: no source of this direction is installed (or none was asked for)
    sources: list[str] = field(default_factory=list)  # names of the sources in ``entries``
    warnings: list[str] = field(default_factory=list)  # the asked-for sources that are not installed
    _pruned: dict[tuple[float, int], Entries] = field(default_factory=dict, init=False, repr=False, compare=False)

    def restricted(self, terms: set[str]) -> Lexicon:
        """The same lexicon with only the rows of ``terms`` (experiments: the rows their topics need)."""
        if self.entries is None:
            return self
        return Lexicon(self.src, self.tgt, {s: r for s, r in self.entries.items() if s in terms}, list(self.sources),
                       list(self.warnings))

    def pruned(self, min_prob: float, max_per_term: int) -> Entries | None:
        """:func:`training.translation.tables.prune` of the whole table, worked out once per pruning: a table's rows
        of the terms the aligned claims do not have (:func:`training.translation.tables.build_direction`)."""
        if self.entries is None:
            return None
        from training.translation.tables import prune

        key = (min_prob, max_per_term)
        if key not in self._pruned:
            ordered = dict(sorted(self.entries.items()))  # (in term order: a build merges its few rows into it)
            self._pruned[key] = prune(ordered, min_prob=min_prob, max_per_term=max_per_term)
        return self._pruned[key]


LOADED_MAX = 12
"""Lexicons kept within ``dictionary.keeping`` (:func:`load_lexicon`): a build's directions, twice over."""
_loaded: OrderedDict[tuple[object, ...], tuple[list[Entries], Lexicon]] = OrderedDict()
_loaded_lock = threading.Lock()
on_forget(_loaded.clear)


def load_lexicon(
    src: str,
    tgt: str,
    names: Sequence[str] = DEFAULT_LEXICONS,
    *,
    dirs: LexiconDirs | None = None,
    progress: bool | None = None,
) -> Lexicon:
    """The combined table of the sources ``names`` that have the direction ``src``-``tgt`` (a source without
    that direction, such as Ding for French, is left out silently; one not installed, with a warning).

    Within :func:`training.translation.dictionary.keeping`, the same :class:`Lexicon` again while its sources give
    the same tables (each source's table is kept while its cache file is unchanged: ``cached_json``): the next build
    of the process neither combines nor prunes it again (:meth:`Lexicon.pruned`). It is shared: callers do not change
    it."""
    tables: dict[str, Entries] = {}
    warnings = []
    for name in parse_lexicons(names):
        source = SOURCES[name]
        if (src, tgt) not in source.pairs:
            continue
        try:
            tables[name] = source.table(src, tgt, _folder(name, dirs), progress)
        except LexiconNotFoundError:
            warnings.append(f"{source.label} {src}-{tgt} lexicon not installed ({source.package(src, tgt)}, "
                            "scripts/setup.sh)")
    # the tables themselves (by identity: a source's kept table is the same object while its file is unchanged) and
    # the missing ones' warnings make the lexicon; the memory holds the tables, so no other object takes their ids
    key = (src, tgt, tuple((name, id(table)) for name, table in tables.items()), tuple(warnings))
    with _loaded_lock:
        hit = _loaded.get(key)
        if hit is not None:
            _loaded.move_to_end(key)
            return hit[1]
    entries = combine(list(tables.values())) if tables else None
    lexicon = Lexicon(src, tgt, entries, list(tables), warnings)
    if not kept():
        return lexicon
    with _loaded_lock:
        _loaded[key] = (list(tables.values()), lexicon)
        while len(_loaded) > LOADED_MAX:
            _loaded.popitem(last=False)
    return lexicon


def dictionary_headwords(
    lang: str,
    names: Sequence[str] = DEFAULT_SPLITTER_LEXICONS,
    *,
    dirs: LexiconDirs | None = None,
    min_len: int = 4,
) -> tuple[set[str], list[str], list[str]]:
    """Single-word headwords of ``lang`` in the sources ``names``: (words, sources used, warnings)."""
    words: set[str] = set()
    used: list[str] = []
    warnings = []
    for name in parse_lexicons(names):
        source = SOURCES[name]
        if not any(lang in pair for pair in source.pairs):
            continue
        try:
            words |= source.headwords(lang, _folder(name, dirs), min_len)
        except LexiconNotFoundError:
            pair = (lang, "en") if (lang, "en") in source.pairs else next(p for p in source.pairs if lang in p)
            warnings.append(f"{source.label} {lang} headwords not installed ({source.package(*pair)}, "
                            "scripts/setup.sh)")
        else:
            used.append(name)
    return words, used, warnings
