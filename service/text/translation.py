"""Translation tables for probabilistic structured queries (PSQ).

A table maps a source-language *index term* (the output of ``Analyzer(src)``) to weighted English
index terms. BM25 then scores each source term with expected term/document frequencies
(tf = sum_t p(t|s) tf(t, d), df = sum_t p(t|s) df(t)). Tables are trained offline
(``training/translation``) and stored as JSON in the index folder (``translation/<src>-en.json``).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

PIVOT_LANG = "en"
"""The language de <-> fr go through: composed at query time (:class:`PivotTable`, the index's routes) from the legs
the build trains (training/translation/tables.py)."""
TABLE_FORMAT = "priorart-translation-table"
TABLE_VERSION = 1


class TranslationTable:
    """p(target term | source term) for one language pair, pruned for query time."""

    hops = 1  # the tables a term goes through (the passage ranker measures such text against rho ** hops)

    def __init__(
        self,
        entries: Mapping[str, Mapping[str, float]],
        *,
        src: str,
        tgt: str = "en",
        sources: Sequence[str] = (),
        max_alternatives: int = 5,
        cumulative: float = 0.9,
        min_prob: float = 0.01,
    ) -> None:
        if max_alternatives < 1 or not 0.0 < cumulative <= 1.0 or not 0.0 <= min_prob < 1.0:
            raise ValueError(
                f"bad pruning settings max_alternatives={max_alternatives} (need >= 1), "
                f"cumulative={cumulative} (need (0, 1]), min_prob={min_prob} (need [0, 1))"
            )
        self.src = src
        self.tgt = tgt
        self.sources = list(sources)  # e.g. ["freedict", "aligned-claims"]
        self.max_alternatives = max_alternatives
        self.cumulative = cumulative
        self.min_prob = min_prob
        self.entries: dict[str, dict[str, float]] = {s: dict(t) for s, t in entries.items()}

    def __len__(self) -> int:
        return len(self.entries)

    def __contains__(self, term: object) -> bool:
        return term in self.entries

    def lookup(self, term: str) -> list[tuple[str, float]]:
        """All translations of one source term, most probable first (unpruned)."""
        return _ranked(self.entries.get(term, {}))

    def translate_term(self, term: str) -> dict[str, float]:
        """Pruned, renormalised translations of one term.

        Pruning keeps the most probable alternatives until ``cumulative`` mass or
        ``max_alternatives`` is reached (Darwish & Oard style PSQ). A term without an entry
        (numbers, codes, chemical formulas, cognates) is passed through unchanged with p = 1.
        """
        alts = self.lookup(term)
        if not alts:
            return {term: 1.0}
        kept: list[tuple[str, float]] = []
        mass = 0.0
        for tgt, p in alts:
            if p < self.min_prob and kept:
                break
            kept.append((tgt, p))
            mass += p
            if mass >= self.cumulative or len(kept) >= self.max_alternatives:
                break
        total = sum(p for _, p in kept)
        return {t: p / total for t, p in kept}

    def translate_terms(self, terms: Sequence[str]) -> list[dict[str, float]]:
        """``translate_term`` for each term, in order."""
        return [self.translate_term(t) for t in terms]

    def to_json(self) -> dict[str, object]:
        """The JSON document ``save`` writes."""
        return {
            "format": TABLE_FORMAT,
            "version": TABLE_VERSION,
            "src": self.src,
            "tgt": self.tgt,
            "sources": self.sources,
            "entries": self.entries,
        }

    def save(self, path: str | Path) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(orjson.dumps(self.to_json(), option=orjson.OPT_SORT_KEYS))  # UTF-8; 10x json.dumps

    @classmethod
    def load(cls, path: str | Path, **pruning: float) -> TranslationTable:
        """Read a table written by ``save``; ``pruning`` overrides the query-time pruning settings."""
        path = Path(path)
        try:
            data = orjson.loads(path.read_bytes())
        except (OSError, orjson.JSONDecodeError) as exc:
            raise ValueError(f"cannot read translation table {path}: {exc}") from exc
        if not isinstance(data, dict):
            raise ValueError(f"{path} is not a {TABLE_FORMAT} v{TABLE_VERSION} file (found a {type(data).__name__})")
        if data.get("format") != TABLE_FORMAT or data.get("version") != TABLE_VERSION:
            raise ValueError(
                f"{path} is not a {TABLE_FORMAT} v{TABLE_VERSION} file "
                f"(found format={data.get('format')!r}, version={data.get('version')!r})"
            )
        entries = data.get("entries")
        # every row a dict, every value a number (the types of all values gathered in one pass: a table holds
        # hundreds of thousands of rows, and this is part of every server's start)
        if not isinstance(entries, dict) or not all(type(row) is dict for row in entries.values()) or not set(
            map(type, itertools.chain.from_iterable(row.values() for row in entries.values()))
        ) <= {int, float}:
            raise ValueError(f"{path}: 'entries' must map each source term to {{target term: probability}}")
        table = cls({}, src=data["src"], tgt=data["tgt"], sources=data.get("sources", ()), **pruning)  # type: ignore[arg-type]
        table.entries = entries  # checked above, and read here only: no copy of every row
        return table


def table_path(path: str | Path, src: str, tgt: str = "en") -> Path:
    """Locate the ``src``-``tgt`` table: ``path`` itself when it is a file, else ``<src>-<tgt>.json`` in the folder
    ``path`` or in its ``translation/`` subfolder (an index folder)."""
    path = Path(path)
    if path.is_file():
        return path
    name = f"{src}-{tgt}.json"
    for candidate in (path / "translation" / name, path / name):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(
        f"no {src}-{tgt} translation table at {path} (looked for {path}/translation/{name} and {path}/{name}); "
        "build one with `priorart translate-train`"
    )


class QueryTimeTable(TranslationTable):
    """A table made at query time from other tables (:class:`PivotTable`, :class:`MixedTable`): nothing is stored,
    and each source term's pruned translations are memoised (a bounded memo: the query vocabulary)."""

    def __init__(self, entries: Mapping[str, Mapping[str, float]], **kwargs: Any) -> None:
        super().__init__(entries, **kwargs)
        self._memo: dict[str, dict[str, float]] = {}

    def translate_term(self, term: str) -> dict[str, float]:
        cached = self._memo.get(term)
        if cached is None:
            cached = super().translate_term(term)
            if len(self._memo) < 100_000:
                self._memo[term] = cached
        return cached

    def to_json(self) -> dict[str, object]:
        raise TypeError(f"a {type(self).__name__} is made at query time and not saved; save the tables it is made of")


def _ranked(probs: Mapping[str, float]) -> list[tuple[str, float]]:
    """``probs`` as ``lookup`` gives them: most probable first, ties by term."""
    return sorted(probs.items(), key=lambda kv: (-kv[1], kv[0]))


class PivotTable(QueryTimeTable):
    """``src`` -> ``tgt`` through a pivot language, composed at query time from two tables (``de-en`` and
    ``en-fr`` give ``de-fr``): p(t|s) = sum_e p(e|s) p(t|e) over the query-time-pruned alternatives of
    both legs, then pruned the same way. Nothing is stored; a term the first table does not know passes
    through both legs unchanged (numbers, codes, cognates)."""

    hops = 2

    def __init__(self, first: TranslationTable, second: TranslationTable) -> None:
        if first.tgt != second.src or first.src == second.tgt:
            raise ValueError(f"cannot compose {first.src}-{first.tgt} with {second.src}-{second.tgt}")
        super().__init__(
            {},
            src=first.src,
            tgt=second.tgt,
            sources=[f"pivot:{first.tgt}"],
            max_alternatives=first.max_alternatives,
            cumulative=first.cumulative,
            min_prob=first.min_prob,
        )
        self.first, self.second, self.pivot = first, second, first.tgt

    def __len__(self) -> int:
        return len(self.first)

    def __contains__(self, term: object) -> bool:
        return term in self.first

    def lookup(self, term: str) -> list[tuple[str, float]]:
        mixed: dict[str, float] = {}
        for e, p in self.first.translate_term(term).items():
            for t, q in self.second.translate_term(e).items():
                mixed[t] = mixed.get(t, 0.0) + p * q
        return _ranked(mixed)


class MixedTable(QueryTimeTable):
    """Two tables of one direction mixed at query time: p(t|s) = w p_a(t|s) + (1 - w) p_b(t|s) over each one's pruned
    alternatives, then pruned the same way (a term one table does not know keeps the other's translations; one that
    neither knows passes through). Nothing is stored. ``hops`` is the larger of the two (the average, 1.5 for a direct
    table mixed with a composed one, measured worse for fr-de: docs/RESULTS.md)."""

    def __init__(self, a: TranslationTable, b: TranslationTable, weight: float = 0.5) -> None:
        if (a.src, a.tgt) != (b.src, b.tgt) or not 0.0 <= weight <= 1.0:
            raise ValueError(f"cannot mix {a.src}-{a.tgt} with {b.src}-{b.tgt} at weight {weight}")
        super().__init__({}, src=a.src, tgt=a.tgt, sources=[*a.sources, *b.sources],
                         max_alternatives=a.max_alternatives, cumulative=a.cumulative, min_prob=a.min_prob)
        self.a, self.b, self.weight = a, b, weight
        self.hops = max(a.hops, b.hops)

    def __len__(self) -> int:
        return max(len(self.a), len(self.b))  # the source terms of the larger table (at least this many known)

    def __contains__(self, term: object) -> bool:
        return term in self.a or term in self.b

    def lookup(self, term: str) -> list[tuple[str, float]]:
        known = [(t, w) for t, w in ((self.a, self.weight), (self.b, 1.0 - self.weight)) if term in t]
        if not known:
            return []
        total = sum(w for _, w in known)
        mixed: dict[str, float] = {}
        for table, w in known:
            for t, p in table.translate_term(term).items():
                mixed[t] = mixed.get(t, 0.0) + p * w / total
        return _ranked(mixed)
