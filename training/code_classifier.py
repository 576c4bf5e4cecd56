"""The code classifier of an index (:mod:`service.code_classifier`): profiles from the CPC title list.

``priorart build`` gives an index the classifier when it has a CPC title list (``--cpc``; default: the service's
``PRIORART_CPC_TITLES``, else the shared data folder's) and an English index, and when most of the corpus' subclass
codes are in the list (a synthetic corpus has codes of its own: the real list would predict codes none of its
documents holds). The profiles' term counts depend only on the list and the English analysis, so they are made once
per machine and cached (``~/.cache/priorart/lexicons``, as the lexicons are: 15 s for the 260,000 entries).
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path

from service.classification import ClassificationError, ClassificationScheme
from service.code_classifier import LEVELS, CodeClassifier
from service.codes import codes_at, syntactic_level
from service.text.compounds import ANALYSIS_VERSION
from training.translation.dictionary import cached_json, file_stamp

log = logging.getLogger(__name__)

PROFILES_VERSION = 1
"""Bump when what a profile holds changes (the cache key)."""

MIN_KNOWN = 0.5
"""The least share of the corpus' subclass codes the title list must hold for the index to get the classifier."""


def default_cpc_path() -> Path | None:
    """The CPC title list of the shared data folder (``PRIORART_DATA`` or ``../shared/data``), if present."""
    base = Path(os.environ.get("PRIORART_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
    path = base / "cpc" / "cpc-titles-2025-05.tsv.gz"
    return path if path.is_file() else None


def cpc_list(cpc: str | Path | None = "auto") -> Path | None:
    """The CPC title list ``cpc`` names: None for none, ``"auto"`` for the service's ``PRIORART_CPC_TITLES`` or else
    the shared data folder's (:func:`default_cpc_path`), else the path given (``priorart build --cpc``)."""
    if cpc is None:
        return None
    if cpc != "auto":
        return Path(cpc)
    from service.settings import Settings

    return Settings().cpc_titles or default_cpc_path()


def profile_counts(scheme: ClassificationScheme,
                   analyzer: Callable[[str], list[str]]) -> dict[str, dict[str, dict[str, int]]]:
    """``{level: {code: {term: count}}}``: every entry's title, analysed, counted in the profile of its subclass
    and of its main group (an entry above a level counts in none of that level's)."""
    out: dict[str, dict[str, Counter[str]]] = {level: {} for level in LEVELS}
    for code in scheme:
        title = scheme.title(code)
        if not title:
            continue
        terms = analyzer(title)
        if not terms:
            continue
        for level in LEVELS:
            try:
                at = scheme.truncate(code, level)
            except ClassificationError:  # a section or class: above the level
                continue
            out[level].setdefault(at, Counter()).update(terms)
    return {level: {c: dict(n) for c, n in profiles.items()} for level, profiles in out.items()}


def cached_profiles(cpc: Path, analyzer: Callable[[str], list[str]]) -> dict[str, dict[str, dict[str, int]]]:
    """:func:`profile_counts` of the list ``cpc``, cached on disk (key: the file, its size and time, the analysis)."""
    return cached_json("cpc-profiles", f"{PROFILES_VERSION}|{ANALYSIS_VERSION}|{file_stamp([cpc])}",
                       lambda: profile_counts(ClassificationScheme.load(cpc), analyzer))


def cached_subclasses(cpc: Path) -> list[str]:
    """The subclass symbols of the list ``cpc``, cached on disk as :func:`cached_profiles` is (what an index's
    corpus is checked against before the profiles are read)."""
    return cached_json("cpc-subclasses", f"{PROFILES_VERSION}|{file_stamp([cpc])}",
                       lambda: [c for c in ClassificationScheme.load(cpc) if syntactic_level(c) == "subclass"])


def index_classifier(cpc: Path | None, analyzer: Callable[[str], list[str]] | None,
                     corpus_codes: Iterable[str]) -> tuple[CodeClassifier | None, str]:
    """The classifier of an index whose documents hold ``corpus_codes`` (each document's codes, any level), and a
    line that says what it is or why there is none."""
    if cpc is None:
        return None, "no CPC title list (--cpc): codes of a query are predicted by its first documents' vote only"
    if analyzer is None:
        return None, "no English index: the CPC titles are English, so no code classifier"
    if not cpc.is_file():
        return None, f"CPC title list {cpc} not found: no code classifier"
    subclasses = set(codes_at(list(corpus_codes), "subclass"))
    known = len(subclasses & set(cached_subclasses(cpc))) / len(subclasses) if subclasses else 0.0
    if known < MIN_KNOWN:
        return None, (f"{known:.0%} of the corpus' {len(subclasses)} subclasses are in {cpc.name} (a corpus with "
                      "codes of its own?): no code classifier")
    clf = CodeClassifier.from_counts(cached_profiles(cpc, analyzer))
    return clf, (f"code classifier from {cpc.name}: {len(clf.levels['subclass'][0])} subclass and "
                 f"{len(clf.levels['main_group'][0])} main group profiles ({known:.0%} of the corpus' subclasses "
                 "known)")


__all__ = ["MIN_KNOWN", "cached_profiles", "cached_subclasses", "cpc_list", "default_cpc_path", "index_classifier",
           "profile_counts"]
