"""Compound splitting for German (and optionally French) index terms: corpus- and dictionary-driven.

German writes most technical concepts as one word (``Hochspannungsanordnung``, ``Ausdehnungsgefäß``):
such a word is rarely in a bilingual dictionary, and an English query translated word by word
(``high voltage`` -> ``hoch``, ``spannung``) never meets it in a German index. A splitter cuts the word
into known parts so that the parts can be translated and matched.

Method (Koehn & Knight 2003, "Empirical methods for compound splitting"): a word is split into parts
that are all *known words* -- surface forms seen in the corpus (with their counts) or headwords of the
dictionary (count + 1) -- optionally joined by a linking element (German "Fugen": ``-s-``, ``-es-``,
``-n-``, ``-en-``, ``-e-``, ``-er-``, ``-ens-``) or with a dropped final ``e`` (``Schul|buch`` from
``Schule``; ``Kühl|mittel`` from ``kühlen``). The segmentation with the fewest parts (at least
``min_part`` letters each, no stop word; parts shorter than 5 letters must occur in the corpus) wins,
ties by the highest geometric mean of the part counts; parts are split again the same way. A word the
dictionary knows (also in an inflected form: same Snowball stem as a headword) is split only when that
mean exceeds its own count, as in Koehn & Knight -- ``Hochspannung`` splits, ``Kombination`` does not
-- while a word the dictionary does not know, the domain compound the issue is about, is split whenever
it segments into known parts. The last part must be a known word as it stands (it carries the
inflection), the others may be known in a base form. The analyser keeps the whole word's term as well,
so a split only adds terms.

The analyser (``service.text.analysis.Analyzer(lang, splitter=...)``) keeps the whole word's term and
adds the terms of its parts, on the index side and the query side alike, so an index built with a
splitter must be searched with the same one: the index folder stores the splitter's word list
(``analysis/compounds-<lang>.json``) and records it in ``meta.json`` ``settings.analysis``.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import Stemmer  # PyStemmer

from service.filecache import load_shared
from service.text.analysis import STEMMERS

if TYPE_CHECKING:
    from service.text.analysis import Analyzer

COMPOUNDS_FORMAT = "priorart-compounds"
COMPOUNDS_VERSION = 2
"""Version 2 stores the dictionary's stems beside its words (stemming ~280k headwords took 1.5 s of every load);
version 1 files are still read, their stems computed at load."""

GERMAN_LINKERS = ("", "s", "es", "n", "en", "e", "er", "ens")
LINKERS = {"de": GERMAN_LINKERS, "fr": ("",)}
SHORT_PART = 5  # parts shorter than this must occur in the corpus itself
# last "parts" that are inflection endings of participles and adjectives (schwimm|enden, geradkett|iges)
INFLECTION_ENDINGS = {
    "de": frozenset(
        {"ende", "enden", "endes", "ender", "endem", "ige", "iges", "igen", "iger", "igem", "lich", "isch"}
    ),
}


@functools.lru_cache(maxsize=4)
def _stems(stemmer: str, words: frozenset[str]) -> frozenset[str]:
    """The stems of a dictionary's headwords, kept for the next splitter of the same words in this process (every
    build makes one: stemming the 280k German headwords takes about 2 s)."""
    return frozenset(Stemmer.Stemmer(stemmer).stemWords(list(words)))


class CompoundSplitter:
    """Splits words (normalised surface tokens) into known parts; stateless apart from a bounded memo.

    ``corpus``: surface word -> count in the corpus; ``dictionary``: the dictionary's single-word
    headwords. A word counts ``corpus count + 1`` if the dictionary has it.
    """

    def __init__(
        self,
        corpus: Mapping[str, int],
        dictionary: Iterable[str] = (),
        *,
        lang: str = "de",
        min_part: int = 4,
        max_parts: int = 4,
        linkers: Iterable[str] | None = None,
        stop: Iterable[str] = (),
        sources: Iterable[str] = (),
        dictionary_stems: Iterable[str] | None = None,
    ) -> None:
        if min_part < 2 or max_parts < 2:
            raise ValueError(f"min_part must be >= 2 and max_parts >= 2, got {min_part} and {max_parts}")
        self.lang = lang
        self.min_part = min_part
        self.max_parts = max_parts
        self.linkers = tuple(linkers) if linkers is not None else LINKERS.get(lang, ("",))
        self.corpus: dict[str, int] = {w: int(c) for w, c in corpus.items() if c > 0}
        self.dictionary: frozenset[str] = frozenset(dictionary)
        self.stop = frozenset(stop)
        self.endings = INFLECTION_ENDINGS.get(lang, frozenset())
        self.sources = list(sources)
        self._stemmer = Stemmer.Stemmer(STEMMERS.get(lang, "porter"))
        # a surface form whose stem is a dictionary headword's stem is a dictionary word ("schwimmenden"); a saved
        # splitter gives the stems it stored (the same stemmer's, of the same words)
        self._dict_stems = (_stems(STEMMERS.get(lang, "porter"), self.dictionary) if dictionary_stems is None
                            else frozenset(dictionary_stems))
        self._memo: dict[str, tuple[str, ...]] = {}

    def __len__(self) -> int:
        return len(self.corpus.keys() | self.dictionary)

    def count(self, word: str) -> int:
        """Corpus count, plus 1 when the dictionary knows the word (0: unknown)."""
        return self.corpus.get(word, 0) + (word in self.dictionary)

    def in_dictionary(self, word: str) -> bool:
        return word in self.dictionary or self._stemmer.stemWord(word) in self._dict_stems

    def _known(self, word: str) -> int:
        """Count of a word usable as a part (0: not usable): known, no stop word, short ones seen in the corpus."""
        if word in self.stop or len(word) < self.min_part:
            return 0
        if len(word) < SHORT_PART and not self.corpus.get(word):
            return 0  # short dictionary-only words ("ente", "met") cut too many words by accident
        return self.count(word)

    def _base(self, piece: str) -> tuple[str, int] | None:
        """The known base form of a non-final piece, in this order of preference: the piece itself, the piece
        without a linking element, the piece with ``-e``/``-en`` restored (``Schul|buch``, ``Kühl|mittel``)."""
        for link in self.linkers:
            if link and not piece.endswith(link):
                continue
            base = piece[: len(piece) - len(link)] if link else piece
            if base in self.stop:
                return None  # a function word ("unter", "über") is no part, whatever follows it
            if c := self._known(base):
                return base, c
        if self.lang == "de":
            for restored in (piece + "e", piece + "en"):
                if c := self._known(restored):
                    return restored, c
        return None

    def _segmentations(self, word: str, n_parts: int) -> list[tuple[float, list[str]]]:
        """(mean log count, parts) of every segmentation of ``word`` into exactly ``n_parts`` known parts."""
        out: list[tuple[float, list[str]]] = []

        def walk(start: int, left: int, score: float, parts: list[str]) -> None:
            if left == 1:
                rest = word[start:]
                if rest not in self.endings and (c := self._known(rest)):
                    out.append(((score + math.log(c)) / n_parts, [*parts, rest]))
                return
            for end in range(start + self.min_part, len(word) - self.min_part * (left - 1) + 1):
                found = self._base(word[start:end])
                if found is not None:
                    walk(end, left - 1, score + math.log(found[1]), [*parts, found[0]])

        walk(0, n_parts, 0.0, [])
        return out

    def split(self, word: str) -> tuple[str, ...]:
        """The parts of ``word`` (a normalised token), parts of parts included; ``()`` when it is not split.

        The segmentation with the fewest parts wins (ties: highest geometric mean of the part counts).
        A word the dictionary knows is split only when that mean exceeds its own count (Koehn & Knight);
        a word it does not know -- the domain compounds -- whenever it segments into known parts.
        """
        cached = self._memo.get(word)
        if cached is not None:
            return cached
        parts: tuple[str, ...] = ()
        if len(word) >= 2 * self.min_part and word.isalpha():
            for n in range(2, self.max_parts + 1):
                segs = self._segmentations(word, n)
                if segs:
                    mean, best = max(segs, key=lambda s: s[0])
                    if not self.in_dictionary(word) or math.exp(mean) > self.count(word):
                        flat: list[str] = []
                        for p in best:
                            flat.append(p)
                            flat.extend(self.split(p))
                        parts = tuple(flat)
                    break
        if len(self._memo) < 200_000:
            self._memo[word] = parts
        return parts

    # ---------------------------------------------------------------------------- persistence

    def to_json(self) -> dict[str, object]:
        return {
            "format": COMPOUNDS_FORMAT,
            "version": COMPOUNDS_VERSION,
            "lang": self.lang,
            "min_part": self.min_part,
            "max_parts": self.max_parts,
            "linkers": list(self.linkers),
            "sources": self.sources,
            "corpus": dict(sorted(self.corpus.items())),
            "dictionary": sorted(self.dictionary),
            "dictionary_stems": sorted(self._dict_stems),
        }

    def settings(self) -> dict[str, object]:
        """What ``meta.json`` records about this splitter (everything but the word list)."""
        return {
            "lang": self.lang,
            "min_part": self.min_part,
            "max_parts": self.max_parts,
            "linkers": list(self.linkers),
            "corpus_words": len(self.corpus),
            "dictionary_words": len(self.dictionary),
        }

    def save(self, path: str | Path) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_json(), ensure_ascii=False, separators=(",", ":")), encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> CompoundSplitter:
        """Read a word list written by ``save`` (``ValueError`` naming the file when it is not one)."""
        from service.text.analysis import stopwords

        path = Path(path)
        try:
            data = orjson.loads(path.read_bytes())
        except (OSError, orjson.JSONDecodeError) as exc:
            raise ValueError(f"cannot read compound word list {path}: {exc}") from exc
        if not isinstance(data, dict) or data.get("format") != COMPOUNDS_FORMAT or data.get("version") not in (
            1,
            COMPOUNDS_VERSION,
        ):
            found = (data.get("format"), data.get("version")) if isinstance(data, dict) else type(data).__name__
            raise ValueError(f"{path} is not a {COMPOUNDS_FORMAT} v1-v{COMPOUNDS_VERSION} file (found {found!r})")
        corpus, dictionary = data.get("corpus"), data.get("dictionary")
        if not isinstance(corpus, dict) or not all(isinstance(c, int) for c in corpus.values()):
            raise ValueError(f"{path}: 'corpus' must map each corpus word to its count")
        if not isinstance(dictionary, list):
            raise ValueError(f"{path}: 'dictionary' must list the dictionary's words")
        stems = data.get("dictionary_stems") if data["version"] >= 2 else None
        if data["version"] >= 2 and not isinstance(stems, list):
            raise ValueError(f"{path}: 'dictionary_stems' must list the stems of the dictionary's words")
        lang = str(data.get("lang"))
        return cls(
            corpus,
            dictionary,
            lang=lang,
            min_part=int(data["min_part"]),
            max_parts=int(data["max_parts"]),
            linkers=data.get("linkers"),
            stop=stopwords(lang),
            sources=data.get("sources", ()),
            dictionary_stems=stems,
        )


# ---------------------------------------------------------------------------- index analysis settings

ANALYSIS_VERSION = 1
"""Version of ``meta.json`` ``settings.analysis``: ``{"version": 1, "compounds": {lang: {"file": ..., ...}}}``."""


def check_analysis(value: object) -> dict[str, Any]:
    """Validate ``settings.analysis`` of an index (``ValueError`` naming what is wrong and what to do)."""
    if not isinstance(value, dict):
        raise ValueError(f"setting 'analysis' must be an object, got {value!r}")
    if value.get("version") != ANALYSIS_VERSION:
        raise ValueError(
            f"setting 'analysis' has version {value.get('version')!r}; this priorart analyses text with version "
            f"{ANALYSIS_VERSION}: rebuild the index with `priorart build` (its terms would not match the queries')"
        )
    unknown = sorted(set(value) - {"version", "compounds"})
    if unknown:
        raise ValueError(f"setting 'analysis' has unknown key(s) {unknown}; known: version, compounds")
    compounds = value.get("compounds", {})
    if not isinstance(compounds, dict):
        raise ValueError(f"setting 'analysis.compounds' must map a language to its splitter, got {compounds!r}")
    for lang, spec in compounds.items():
        if lang not in LINKERS:
            raise ValueError(f"setting 'analysis.compounds' names language {lang!r}; valid: {', '.join(LINKERS)}")
        if not isinstance(spec, dict) or not isinstance(spec.get("file"), str):
            raise ValueError(f"setting 'analysis.compounds.{lang}' must be an object with the word list 'file'")
    return json.loads(json.dumps(value))


def load_analyzers(index_dir: str | Path, analysis: Mapping[str, Any] | None) -> dict[str, Analyzer]:
    """The analyzers an index was built with: one per language with a compound splitter (others: default)."""
    from service.text.analysis import Analyzer

    out: dict[str, Analyzer] = {}
    if not analysis:
        return out
    for lang, spec in check_analysis(dict(analysis)).get("compounds", {}).items():
        path = Path(index_dir) / spec["file"]
        splitter = load_shared(path, CompoundSplitter.load)  # a reload of the index reuses it (service/filecache.py)
        if splitter.lang != lang:
            raise ValueError(f"{path} is a {splitter.lang} word list, meta.json names it for {lang}")
        out[lang] = Analyzer(lang, splitter=splitter)
    return out
