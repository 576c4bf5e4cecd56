"""The cross-lingual part of ``priorart build``: compound splitters before indexing, tables after.

``priorart build`` with no option makes the index cross-lingual by itself:

1. before indexing, :func:`prepare_analysis` counts the corpus' German words (one light pass over the
   JSONL) and builds the compound splitter; the index's German text (and the queries) are then analysed
   with it, and its word list is stored as ``analysis/compounds-de.json`` (``settings.analysis``);
2. while indexing, :class:`AlignedCollector` keeps the records with claims or titles in several
   languages (at most ``max_aligned_docs``, a seeded reservoir sample: the IBM-1 model's memory grows
   with the pairs);
3. after indexing, :func:`build_index_tables` trains one table per direction into an indexed language:
   ``de-en``, ``fr-en``, ``en-de``, ``en-fr`` from the aligned claims (read in that direction) merged with
   the dictionary lexicons of that direction (``TranslationOptions.lexicons``, FreeDict by default; see
   ``training.translation.lexicons``); ``de-fr``/``fr-de`` go through English, composed by the first
   stage at query time from the stored legs (``service.text.translation.PivotTable``). The report
   names the lexicons each direction used; a missing lexicon leaves the other sources (or aligned-claims-only
   tables) and a warning in the build report; a direction with no resource at all is skipped with a warning.

``--translation DIR`` reuses tables (``<src>-<tgt>.json``, e.g. from ``priorart translate-train``) instead,
``--no-translation`` builds none.
"""

from __future__ import annotations

import json
import logging
import random
from collections import Counter
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from service.corpus.record import PatentRecord
from service.index.parts import write_part
from service.text.analysis import SUPPORTED_LANGS, tokenize
from service.text.compounds import CompoundSplitter
from service.text.translation import PIVOT_LANG, TranslationTable
from training.translation.compounds import COMPOUND_LANGS, MIN_PART, splitter_from_counts
from training.translation.ibm1 import IBM1Model
from training.translation.lexicons import (
    DEFAULT_LEXICONS,
    DEFAULT_SPLITTER_LEXICONS,
    Lexicon,
    load_lexicon,
    parse_lexicons,
)
from training.translation.tables import DIRECT_PAIRS, TableSettings, build_direction

log = logging.getLogger(__name__)

DEFAULT_COMPOUND_LANGS = ("de",)
MAX_ALIGNED_DOCS = 2000


class TranslationBuildError(ValueError):
    """Bad translation options or tables (the message says what to change)."""


@dataclass
class TranslationOptions:
    """How ``priorart build`` makes the index cross-lingual."""

    build: bool = True  # train tables from the corpus + lexicons (ignored when reuse_dir is given)
    reuse_dir: Path | None = None  # copy <src>-<tgt>.json tables from this folder instead
    compounds: tuple[str, ...] = DEFAULT_COMPOUND_LANGS  # languages whose compounds are split
    use_dict: bool = True
    use_aligned: bool = True
    max_aligned_docs: int = MAX_ALIGNED_DOCS
    lexicons: tuple[str, ...] = DEFAULT_LEXICONS  # dictionaries merged into the tables
    splitter_lexicons: tuple[str, ...] = DEFAULT_SPLITTER_LEXICONS  # dictionaries whose headwords the splitter knows
    lexicon_dirs: dict[str, Path] = field(default_factory=dict)  # source name -> folder (default: Debian's)
    table_settings: TableSettings = field(default_factory=lambda: TableSettings(langs=("de", "fr")))

    def __post_init__(self) -> None:
        bad = [lang for lang in self.compounds if lang not in COMPOUND_LANGS]
        if bad:
            raise TranslationBuildError(
                f"no compound splitting for {', '.join(bad)}; choose from {', '.join(COMPOUND_LANGS)} (or none)"
            )
        if self.max_aligned_docs < 1:
            raise TranslationBuildError(f"max_aligned_docs must be >= 1, got {self.max_aligned_docs}")
        try:
            self.lexicons = parse_lexicons(self.lexicons)
            self.splitter_lexicons = parse_lexicons(self.splitter_lexicons)
        except ValueError as exc:
            raise TranslationBuildError(str(exc)) from exc


# ------------------------------------------------------------------------------ 1. analysis (compounds)


def _raw_texts(obj: Mapping[str, Any], lang: str, skip_claims: bool) -> Iterator[str]:
    """The ``lang`` text of a raw corpus JSON record (as ``PatentRecord.text`` would give it)."""
    for key in ("title", "abstract"):
        value = (obj.get(key) or {}).get(lang)
        if isinstance(value, str):
            yield value
    if not skip_claims:
        for claim in (obj.get("claims") or {}).get(lang) or []:
            if isinstance(claim, dict) and isinstance(claim.get("text"), str):
                yield claim["text"]
    if (obj.get("lang") or "en") == lang:
        stack = list(obj.get("description") or [])
        while stack:
            node = stack.pop()
            if not isinstance(node, dict):
                continue
            if isinstance(node.get("heading"), str):
                yield node["heading"]
            yield from (p for p in node.get("paragraphs") or [] if isinstance(p, str))
            stack.extend(node.get("sections") or [])


def count_words(
    corpus: str | Path | Iterable[PatentRecord],
    langs: Sequence[str],
    *,
    exclude_ids: Collection[str] = (),
    min_len: int = MIN_PART,
) -> dict[str, Counter[str]]:
    """Surface word counts per language over the corpus (a JSONL path is read as plain JSON: fast).

    Claims of ``exclude_ids`` records are not counted.
    """
    counts = {lang: Counter[str]() for lang in langs}
    excluded = set(exclude_ids)

    def add(lang: str, text: str) -> None:
        counts[lang].update(t for t in tokenize(text) if len(t) >= min_len and t.isalpha())

    if isinstance(corpus, str | Path):
        import gzip

        path = Path(corpus)
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as fh:
            for line in fh:
                if not line.strip():
                    continue
                obj = json.loads(line)
                for lang in langs:
                    for text in _raw_texts(obj, lang, obj.get("id") in excluded):
                        add(lang, text)
    else:
        for rec in corpus:
            fields: tuple[str, ...] = ("title", "abstract", "description")
            if rec.id not in excluded:
                fields = ("title", "abstract", "claims", "description")
            for lang in langs:
                if lang in rec.languages:
                    add(lang, rec.text(lang, fields))
    return counts


def prepare_analysis(
    corpus: str | Path | Iterable[PatentRecord],
    options: TranslationOptions,
    *,
    exclude_ids: Collection[str] = (),
) -> dict[str, CompoundSplitter]:
    """Compound splitters for ``options.compounds`` (empty when none)."""
    if not options.compounds:
        return {}
    counts = count_words(corpus, options.compounds, exclude_ids=exclude_ids)
    out = {}
    for lang in options.compounds:
        try:
            out[lang] = splitter_from_counts(counts[lang], lang, use_dict=options.use_dict,
                                             lexicons=options.splitter_lexicons, dirs=options.lexicon_dirs)
        except ValueError as exc:
            log.warning("no %s compound splitting: %s", lang, exc)
    return out


def write_analysis(index_dir: Path, splitters: Mapping[str, CompoundSplitter]) -> dict[str, Any] | None:
    """Write the word lists (the registry's index-level part ``analysis``); returns ``settings.analysis`` for
    ``meta.json`` (``None`` without splitters)."""
    result: dict[str, Any] | None = write_part("analysis", index_dir, splitters)
    return result


# ------------------------------------------------------------------------------ 2. aligned records


class AlignedCollector:
    """Keeps (a slim copy of) the records with claims or a title in two or more languages, at most ``cap``."""

    def __init__(self, cap: int = MAX_ALIGNED_DOCS, seed: int = 0) -> None:
        self.cap = cap
        self.seen = 0
        self.records: list[PatentRecord] = []
        self._rng = random.Random(seed)

    def add(self, rec: PatentRecord) -> None:
        langs = {lang for lang, claims in rec.claims.items() if claims} | set(rec.title)
        if len(langs & set(SUPPORTED_LANGS)) < 2:
            return
        slim = rec.model_copy(update={"description": [], "abstract": {}, "citations": []})
        self.seen += 1
        if len(self.records) < self.cap:
            self.records.append(slim)
        else:  # reservoir sampling: every multilingual record has the same chance, memory stays bounded
            j = self._rng.randrange(self.seen)
            if j < self.cap:
                self.records[j] = slim


# ------------------------------------------------------------------------------ 3. tables


def needed_directions(index_langs: Sequence[str]) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(direct pairs to train, pivot pairs to compose) so that every query language reaches every indexed one: every
    pair trained that has its resources (:data:`DIRECT_PAIRS`), and a pair without English (de <-> fr) also composed
    through English at query time, its legs trained too (the service mixes the two: service/retrieval/resources.py)."""
    targets = [t for t in index_langs if t in SUPPORTED_LANGS]
    wanted = [(s, t) for t in targets for s in SUPPORTED_LANGS if s != t]
    pivots = [(s, t) for s, t in wanted if PIVOT_LANG not in (s, t)]
    direct = [p for p in DIRECT_PAIRS if p in wanted]
    for s, t in pivots:
        for leg in ((s, PIVOT_LANG), (PIVOT_LANG, t)):
            if leg not in direct:
                direct.append(leg)
    return direct, pivots


def build_index_tables(
    index_dir: Path,
    records: Sequence[PatentRecord],
    index_langs: Sequence[str],
    target_vocabs: Mapping[str, Collection[str]],
    options: TranslationOptions,
    *,
    exclude_ids: Collection[str] = (),
    lexicons: Mapping[tuple[str, str], Lexicon] | None = None,
    progress: bool | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Train and write the tables into ``index_dir/translation``; returns (meta entries, report).

    ``lexicons`` (per direction, from ``training.translation.lexicons.load_lexicon``) skips loading them
    (experiments share them); otherwise ``options.lexicons`` are loaded. ``report["lexicons"]`` names the
    dictionaries each direction used.
    The aligned-claims models read the claims without compound splitting: trained on split text they
    translated measurably worse in ``priorart-lab experiment xling-tasks`` (the table keys are the words' own
    terms either way, which the split analysis keeps).
    """
    direct, pivots = needed_directions(index_langs)
    settings = options.table_settings
    report: dict[str, Any] = {"mode": "built", "aligned_documents": len(records), "directions": {}, "lexicons": {},
                              "warnings": []}
    if not options.use_dict:
        settings = TableSettings(**{**settings.__dict__, "use_dict": False})
    if not options.use_aligned:
        settings = TableSettings(**{**settings.__dict__, "use_aligned": False})
    built: dict[tuple[str, str], TranslationTable] = {}
    models: dict[tuple[int, bytes], IBM1Model] = {}  # de-en's reverse model is en-de's forward one: trained once
    for src, tgt in direct:
        lexicon = Lexicon(src, tgt, None)
        if settings.use_dict:
            if lexicons is not None and (src, tgt) in lexicons:
                lexicon = lexicons[(src, tgt)]
            else:
                lexicon = load_lexicon(src, tgt, options.lexicons, dirs=options.lexicon_dirs, progress=progress)
            report["lexicons"][f"{src}-{tgt}"] = list(lexicon.sources)
            for w in lexicon.warnings:
                rest = " + ".join(lexicon.sources) if lexicon.sources else "the aligned claims only"
                report["warnings"].append(f"{w}: {src}-{tgt} translates with {rest}")
        try:
            table, info = build_direction(
                records,
                src,
                tgt,
                settings,
                exclude_ids=exclude_ids,
                lexicon=lexicon.entries,
                lexicon_sources=lexicon.sources,
                target_vocab=target_vocabs.get(tgt, ()),
                progress=progress,
                models=models,
                pruned_lexicon=lexicon.pruned(settings.min_prob, settings.max_per_term),
            )
        except ValueError as exc:
            report["warnings"].append(f"no {src}-{tgt} table: {exc}")
            continue
        built[(src, tgt)] = table
        report["directions"][f"{src}-{tgt}"] = info
    for src, tgt in pivots:  # composed at query time from the two stored legs (and mixed with a direct table)
        if (src, PIVOT_LANG) in built and (PIVOT_LANG, tgt) in built:
            if (src, tgt) in built:
                report["directions"][f"{src}-{tgt}"]["mixed"] = (
                    f"half and half with {src}-{PIVOT_LANG} + {PIVOT_LANG}-{tgt}")
            else:
                report["directions"][f"{src}-{tgt}"] = {"sources": [f"pivot:{PIVOT_LANG}"], "composed": "at query time"}
        else:
            report["warnings"].append(f"no {src}-{tgt} translation: no {src}-{PIVOT_LANG} or {PIVOT_LANG}-{tgt} table")
    entries = write_part("translation", index_dir, built.values())  # pivot legs too, into a language not indexed
    for w in report["warnings"]:
        log.warning(w)
    return entries, report


def copy_tables(
    translation_dir: Path, index_dir: Path, index_langs: Sequence[str]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Reuse ``<src>-<tgt>.json`` tables from a folder (translate-train output, another index's ``translation/``)."""
    if not translation_dir.is_dir():
        raise TranslationBuildError(f"translation folder {translation_dir} does not exist")
    found = sorted(p for p in translation_dir.glob("*-*.json") if p.name != "translation-meta.json")
    if not found:
        raise TranslationBuildError(f"no <src>-<tgt>.json translation tables in {translation_dir}")
    tables: list[TranslationTable] = []
    skipped = []
    for path in found:
        try:
            table = TranslationTable.load(path)
        except ValueError as exc:
            raise TranslationBuildError(str(exc)) from exc
        if table.src not in SUPPORTED_LANGS or table.tgt not in SUPPORTED_LANGS or table.src == table.tgt or \
                path.name != f"{table.src}-{table.tgt}.json":
            raise TranslationBuildError(
                f"{path}: table translates {table.src}->{table.tgt}; expected two different languages of "
                f"{', '.join(SUPPORTED_LANGS)} in a file named <src>-<tgt>.json"
            )
        if table.tgt not in index_langs:
            skipped.append(path.name)
            continue
        tables.append(table)
    out = write_part("translation", index_dir, tables)
    report: dict[str, Any] = {"mode": "reused", "from": str(translation_dir), "warnings": []}
    if skipped:
        report["warnings"].append(f"tables into languages this index does not hold were left out: {', '.join(skipped)}")
    return out, report
