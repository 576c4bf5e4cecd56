"""Bilingual dictionaries as ``p(target index term | source index term)``: the conventions every lexicon source
follows (FreeDict in :mod:`training.translation.freedict`, Ding in :mod:`training.translation.ding`), and the
on-disk cache of the parsed tables.

A source's parser only finds, per entry, the headwords and the senses (each a tuple of translation strings
with the grammar and comment marks removed); the rest is shared:

* :class:`SourceTerms`: a headword counts when it is one content term under ``get_analyzer(src)`` (phrases
  such as ``zur Schau stellen``, stop words and affixes such as ``…fach`` are skipped: a table maps single
  terms; ``sich drehen`` counts as ``dreh``);
* :func:`target_terms`: a sense translates to the terms of its single-content-word translations; only when
  it has none, to the heads (last content word) of its multi-word ones (``turning moment`` -> ``moment``;
  English noun compounds and German adjective + noun phrases are head-final); argument placeholders
  (``sth.``, ``sb.``, ``etw.``, ``jdn.``) are no content;
* :class:`SenseMasses`: each sense carries the same mass, shared uniformly by its distinct terms; the masses
  of all senses of a source term are summed and normalised, so a term that translates many senses outranks a
  one-off sense (dictionary order is not a usable signal).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import threading
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar, cast

import orjson

from service.settings import cache_dir
from service.text.analysis import get_analyzer, stopwords, tokenize

log = logging.getLogger(__name__)

T = TypeVar("T")

Entries = dict[str, dict[str, float]]

# grammar <...>, domains [...], comments (...), cross-references {...}
MARKS_RE = re.compile(r"<[^>]*>|\[[^\]]*\]|\([^)]*\)|\{[^}]*\}")
# placeholders for arguments ("hitch sth.", "grip sb./sth.", "one's", "etw. drehen", "jds.") that are no content
PLACEHOLDERS = frozenset({"sth", "sb", "so", "one", "oneself", "someone", "something", "s", "etw", "jdn", "jdm"})


class LexiconNotFoundError(FileNotFoundError):
    """The files of a lexicon are not installed."""


def is_affix(headword: str) -> bool:
    """``…fach``, ``Fach...``: a part of words, not a word."""
    return "…" in headword or "..." in headword


class SourceTerms:
    """``headword -> its one content term or None`` in a language (memoised: dictionaries repeat headwords)."""

    def __init__(self, lang: str) -> None:
        self._analyzer = get_analyzer(lang)
        self._stop = stopwords(lang)
        self._memo: dict[str, str | None] = {}

    def __call__(self, headword: str) -> str | None:
        try:
            return self._memo[headword]
        except KeyError:
            pass
        term = None
        if headword and not is_affix(headword):
            terms = self._analyzer(headword)
            if len(terms) == 1 and sum(1 for tok in tokenize(headword) if tok not in self._stop) == 1:
                term = terms[0]
        self._memo[headword] = term
        return term


def target_terms(sense: Iterable[str], tgt: str) -> list[str]:
    """Index terms a sense translates to (single-word translations, else heads of multi-word ones)."""
    analyzer = get_analyzer(tgt)
    single: list[str] = []
    heads: list[str] = []
    for alt in sense:
        terms = [t for t in analyzer(alt) if t not in PLACEHOLDERS]
        if len(terms) == 1:
            single.append(terms[0])
        elif terms:
            heads.append(terms[-1])
    return list(dict.fromkeys(single or heads))


class SenseMasses:
    """Sums the senses of each source term: a sense carries mass 1, shared by its distinct target terms."""

    def __init__(self) -> None:
        self._mass: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))

    def add(self, source: str, terms: Sequence[str]) -> None:
        for t in terms:
            self._mass[source][t] += 1.0 / len(terms)

    def table(self) -> Entries:
        """``{source: {target: p}}``, each row normalised."""
        out: Entries = {}
        for s, row in self._mass.items():
            total = sum(row.values())
            out[s] = {t: v / total for t, v in row.items()}
        return out


def cached_table(name: str, files: Sequence[Path], version: int, build: Callable[[], Entries]) -> Entries:
    """``build()``, cached on disk as ``lexicons/<name>-<key>.json``; the key is ``version`` and the ``files``'
    size and mtime (bump a source's version when its parsing or the analysers change what a table holds). An
    unwritable cache folder only costs the parse. Kept in memory within :func:`keeping` (:func:`cached_json`'s
    ``keep``): every build of a process reads the same tables."""
    return cached_json(name, f"{version}|{file_stamp(files)}", build, keep=True)


def file_stamp(files: Sequence[Path]) -> str:
    """The files' resolved paths, sizes and mtimes: a cache key part that changes when a file is replaced."""
    return "|".join(f"{p.resolve()}:{p.stat().st_size}:{p.stat().st_mtime_ns}" for p in files)


KEPT_MAX = 12
"""Cache files kept in memory (:func:`cached_json`'s ``keep``, within :func:`keeping`): the lexicon tables of every
direction a build translates (six FreeDict directions and the pivot's, Ding's two), the least recently read dropped
first."""
_kept: OrderedDict[Path, tuple[tuple[int, int], Any]] = OrderedDict()
_kept_lock = threading.Lock()
_keeping = 0  # how many `keeping` blocks are open (in any thread)
_forget: list[Callable[[], None]] = [_kept.clear]  # what the last block to close empties (`on_forget`)


@contextlib.contextmanager
def keeping() -> Iterator[None]:
    """Within: the lexicons a build reads stay in memory for the next build of the process (the cache files' tables,
    :func:`cached_json`'s ``keep``; each direction's combined and pruned table, ``lexicons.load_lexicon``), instead
    of being read, combined and pruned again for every build; emptied when the last open block closes.

    For a process that builds many indexes: the lab's CLI (experiments cross-fit over folds) and the test run. Off
    elsewhere: a single ``priorart build`` gains nothing from it, and the kept tables (about 220 MB more at the peak
    of a 150-document build: 640 against 420 MB) would stay for the rest of the build (docs/RESULTS.md, "Translation
    tables kept")."""
    global _keeping
    with _kept_lock:
        _keeping += 1
    try:
        yield
    finally:
        with _kept_lock:
            _keeping -= 1
            last = _keeping == 0
        if last:
            for forget in _forget:
                forget()


def kept() -> bool:
    """Whether a :func:`keeping` block is open."""
    return _keeping > 0


def on_forget(forget: Callable[[], None]) -> None:
    """Call ``forget`` when the last :func:`keeping` block closes (a memory of its own built on the kept tables)."""
    _forget.append(forget)


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


def cached_json(name: str, key: str, build: Callable[[], T], *, keep: bool = False) -> T:
    """``build()`` (a JSON value), cached on disk as ``lexicons/<name>-<sha256 of key>.json``: the next process
    with the same ``key`` reads it instead of building it. An unwritable cache folder only costs the build.

    ``keep``: within :func:`keeping`, the value read is also kept in memory (at most :data:`KEPT_MAX` files), and
    given again while the cache file has the same size and modification time: the next build of the process does not
    parse it again (a build's six lexicons took 0.5 s to parse, each time). The value is then shared: a caller must
    not change it (the tables' callers make new rows: ``merge``, ``prune``, ``restrict_targets``)."""
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    path = cache_dir() / "lexicons" / f"{name}-{digest}.json"
    keep = keep and kept()
    if keep:
        stamp = _stamp(path)
        with _kept_lock:
            hit = _kept.get(path)
            if hit is not None and stamp is not None and hit[0] == stamp:
                _kept.move_to_end(path)
                return cast(T, hit[1])
    try:
        value: T = orjson.loads(path.read_bytes())
    except (OSError, ValueError):
        value = build()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
            tmp.write_bytes(orjson.dumps(value))
            os.replace(tmp, path)
        except OSError as exc:
            log.warning("cannot cache %s in %s: %s", name, path.parent, exc)
    if keep and (stamp := _stamp(path)) is not None:  # (no cache file: nothing to tell a changed one by)
        with _kept_lock:
            _kept[path] = (stamp, value)
            _kept.move_to_end(path)
            while len(_kept) > KEPT_MAX:
                _kept.popitem(last=False)
    return value
