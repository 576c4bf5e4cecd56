"""Merge the aligned-claims model and the FreeDict lexicons into PSQ translation tables (``<src>-en.json``).

p(t|s) = lambda(s) * p_aligned(t|s) + (1 - lambda(s)) * p_dict(t|s) for a source term both resources know,
otherwise whichever knows it; lambda(s) = lambda * n(s) / (n(s) + K) grows with the n(s) occurrences the aligned model
saw of s (K = ``aligned_prior``): a row learned from one sentence pair (``machine`` -> ``grass, gather, machine``
from one claim about a grass-gathering machine) weighs little beside the dictionary's. Rows are then pruned for
storage (``min_prob``, ``max_per_term``; query-time pruning is ``TranslationTable.translate_term``'s job) and,
optionally, a source term that is also an English index term of the collection keeps some probability of translating
to itself (cognates: ``motor``, ``system``, ``element``, ``laser``); terms without an entry (numbers,
codes, formulas, unknown words) are passed through unchanged by ``TranslationTable`` anyway.
"""

from __future__ import annotations

import json
import logging
import operator
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from service.corpus.record import PatentRecord
from service.text.analysis import get_analyzer
from service.text.translation import TranslationTable
from training.translation.freedict import DICTD_DIR, LEXICON_NAMES, cached_lexicon, lexicon_paths
from training.translation.ibm1 import IBM1Model, train_aligned_table

if TYPE_CHECKING:
    from service.text.compounds import CompoundSplitter

log = logging.getLogger(__name__)

Entries = dict[str, dict[str, float]]
META_FILE = "translation-meta.json"
SOURCE_ALIGNED = "aligned-claims"
SOURCE_DICT = "freedict"  # the default dictionary's name (others: ``training.translation.lexicons.SOURCES``)


@dataclass
class TableSettings:
    """How translation tables are built (saved in ``translation-meta.json``)."""

    langs: tuple[str, ...] = ("de", "fr")
    use_aligned: bool = True  # IBM model 1 on aligned EP claims (+ titles)
    use_dict: bool = True  # dictionary lexicons (which ones: ``training.translation.lexicons``)
    lam: float = 0.5  # weight of the aligned model where both resources know a term (when it saw the term often) ...
    aligned_prior: float = 5.0  # ... times n / (n + aligned_prior) for a term it saw n times (0: lam for every term)
    iterations: int = 10  # EM iterations
    symmetric: bool = True  # combine with the reverse alignment model
    titles: bool = True  # aligned titles as extra sentence pairs
    function_words: bool = True  # train with stop words kept; drop rows that mostly translate to them
    min_content: float = 0.5  # ... i.e. rows with less content-word mass than this
    min_prob: float = 0.005  # storage pruning: drop p below this ...
    max_per_term: int = 20  # ... and keep at most this many translations per source term
    self_weight: float = 0.1  # probability of self-translation for source terms that are English terms too
    target_filter: bool = False  # drop dictionary translations that never occur in the English collection
    extra: dict[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        bad = [lang for lang in self.langs if lang not in LEXICON_NAMES]
        if bad:
            raise ValueError(f"unsupported source language(s) {bad}; choose from {', '.join(LEXICON_NAMES)}")
        if not (self.use_aligned or self.use_dict):
            raise ValueError("nothing to build: both the aligned-claims model and the dictionary are switched off")
        if not 0.0 <= self.lam <= 1.0:
            raise ValueError(f"lam must be in [0, 1], got {self.lam}")
        if not self.aligned_prior >= 0.0:
            raise ValueError(f"aligned_prior must be >= 0, got {self.aligned_prior}")
        if not 0.0 <= self.self_weight < 1.0:
            raise ValueError(f"self_weight must be in [0, 1), got {self.self_weight}")
        if not 0.0 <= self.min_prob < 1.0 or self.max_per_term < 1:
            raise ValueError(
                f"bad pruning: min_prob={self.min_prob} (need [0, 1)), max_per_term={self.max_per_term} (need >= 1)"
            )


def merge(
    aligned: Mapping[str, Mapping[str, float]] | None,
    dictionary: Mapping[str, Mapping[str, float]] | None,
    *,
    lam: float = 0.5,
    counts: Mapping[str, int] | None = None,
    prior: float = 0.0,
) -> dict[str, Mapping[str, float]]:
    """Linear interpolation of two tables where both have a row, the row of the one that has it elsewhere (that row
    itself, not a copy: :func:`prune` makes the table's rows). The aligned row's weight is ``lam``, or with ``counts``
    (how often the aligned model saw each source term) and ``prior`` > 0, ``lam * n / (n + prior)``."""
    if prior < 0.0 or (prior > 0.0 and counts is None):
        raise ValueError(f"an aligned prior ({prior}) needs the aligned model's term counts and must be >= 0")
    aligned = aligned or {}
    dictionary = dictionary or {}
    out: dict[str, Mapping[str, float]] = {}
    for s in sorted(aligned.keys() | dictionary.keys()):
        a, d = aligned.get(s), dictionary.get(s)
        if a and d:
            w = lam
            if prior > 0.0 and counts is not None:
                n = counts.get(s, 0)
                w = lam * n / (n + prior)
            mixed = {t: w * p for t, p in a.items()}
            for t, p in d.items():
                mixed[t] = mixed.get(t, 0.0) + (1.0 - w) * p
            out[s] = mixed
        elif a or d:
            out[s] = a or d  # type: ignore[assignment]  # one of them is a non-empty row
    return out


_probability = operator.itemgetter(1)


def prune(entries: Mapping[str, Mapping[str, float]], *, min_prob: float = 0.005, max_per_term: int = 20) -> Entries:
    """Keep the ``max_per_term`` most probable translations with p >= ``min_prob`` (at least the best); renormalise."""
    out: Entries = {}
    for s, row in entries.items():
        if len(row) == 1:  # most dictionary rows: the one translation kept, p / p (the general path's 1.0)
            ((t, p),) = row.items()
            if p > 0:
                out[s] = {t: p / p}
            continue
        # most probable first, ties in term order: a sort by term, then a stable one by p, highest first (two sorts
        # in C, without a key function per entry: the same order as the key (-p, term))
        ranked = sorted(sorted(row.items()), key=_probability, reverse=True)
        kept = [(t, p) for t, p in ranked[:max_per_term] if p >= min_prob] or ranked[:1]
        total = sum(p for _, p in kept)
        if total > 0:
            out[s] = {t: p / total for t, p in kept}
    return out


def add_self_translation(
    entries: Mapping[str, Mapping[str, float]], vocabulary: Collection[str], weight: float
) -> Entries:
    """Give source terms that are also target-language terms probability ``weight`` of translating to themselves
    (the other rows are ``entries``' own, not copies: ``TranslationTable`` copies its rows)."""
    out: Entries = {}
    for s, row in entries.items():
        if weight > 0 and s in vocabulary:
            new = {t: (1.0 - weight) * p for t, p in row.items()}
            new[s] = new.get(s, 0.0) + weight
            out[s] = new
        else:
            out[s] = row  # type: ignore[assignment]  # (a row as given; no caller changes it)
    return out


def restrict_targets(entries: Mapping[str, Mapping[str, float]], vocabulary: Collection[str]) -> Entries:
    """Drop translations outside ``vocabulary`` (rows left empty keep their original translations)."""
    out: Entries = {}
    for s, row in entries.items():
        kept = {t: p for t, p in row.items() if t in vocabulary}
        total = sum(kept.values())
        out[s] = {t: p / total for t, p in kept.items()} if total > 0 else dict(row)
    return out


def english_vocabulary(records: Iterable[PatentRecord], lang: str = "en") -> set[str]:
    """Index terms of all ``lang`` text of the records (title, abstract, claims, description)."""
    analyzer = get_analyzer(lang)
    vocab: set[str] = set()
    for rec in records:
        vocab.update(analyzer(rec.text(lang)))
    return vocab


def build_tables(
    records: Iterable[PatentRecord],
    settings: TableSettings | None = None,
    *,
    exclude_ids: Collection[str] = (),
    lexicons: Mapping[str, Mapping[str, Mapping[str, float]] | None] | None = None,
    target_vocab: Collection[str] | None = None,
    dictd_dir: str | Path = DICTD_DIR,
    progress: bool | None = None,
) -> tuple[dict[str, TranslationTable], dict[str, object]]:
    """Build one ``TranslationTable`` per source language; returns them and a metadata dict.

    ``exclude_ids``: records whose claims the aligned model must not see (evaluation topics).
    ``lexicons``: already-loaded dictionary tables per language (to share across folds); missing ones
    are read from ``dictd_dir`` (a missing lexicon logs a warning and is left out).
    ``target_vocab``: English index terms of the collection, for ``self_weight`` / ``target_filter``;
    computed from ``records`` when needed and not given.
    """
    settings = settings or TableSettings()
    need_vocab = (settings.self_weight > 0 or settings.target_filter) and target_vocab is None
    kept: list[PatentRecord] = []
    vocab: set[str] = set()
    en = get_analyzer("en")
    for rec in records:
        if any(rec.claims.get(lang) or lang in rec.title for lang in settings.langs):
            kept.append(rec)
        if need_vocab:
            vocab.update(en(rec.text("en")))
    if target_vocab is None:
        target_vocab = vocab
    tables: dict[str, TranslationTable] = {}
    meta: dict[str, object] = {
        "settings": {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(settings).items()},
        "excluded_ids": sorted(exclude_ids),
        "languages": {},
    }
    lang_meta: dict[str, object] = {}
    for lang in settings.langs:
        dictionary: Mapping[str, Mapping[str, float]] | None = None
        if settings.use_dict:
            if lexicons is not None and lang in lexicons:
                dictionary = lexicons[lang]
            else:
                dictionary = cached_lexicon(lang, dictd_dir=dictd_dir, progress=progress)  # parsed once, then read
        table, info = build_direction(kept, lang, "en", settings, exclude_ids=exclude_ids, lexicon=dictionary,
                                      target_vocab=target_vocab, progress=progress)
        if dictionary is not None:
            index, data = lexicon_paths(lang, dictd_dir)
            info["dictionary"] = {"index": str(index), "dict": str(data), **info.get("dictionary", {})}
        lang_meta[lang] = info
        tables[lang] = table
        log.info("%s-en table: %d source terms from %s", lang, len(table), " + ".join(table.sources))
    meta["languages"] = lang_meta
    return tables, meta


def write_tables(out_dir: str | Path, tables: Mapping[str, TranslationTable], meta: Mapping[str, object]) -> list[Path]:
    """Write ``<src>-en.json`` per table and ``translation-meta.json``; returns the paths written."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for lang, table in sorted(tables.items()):
        path = out / f"{lang}-{table.tgt}.json"
        table.save(path)
        written.append(path)
    meta_path = out / META_FILE
    meta_path.write_text(json.dumps(dict(meta), ensure_ascii=False, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    written.append(meta_path)
    return written


# ----------------------------------------------------------------------------------- every direction

DIRECT_PAIRS = (("de", "en"), ("fr", "en"), ("en", "de"), ("en", "fr"), ("de", "fr"), ("fr", "de"))
"""Directions with their own resources: FreeDict lexicons and aligned claims (read in either direction)."""


def _merged_and_pruned(aligned: Mapping[str, Mapping[str, float]], dictionary: Mapping[str, Mapping[str, float]] | None,
                       settings: TableSettings, counts: Mapping[str, int],
                       pruned_dictionary: Mapping[str, Mapping[str, float]] | None) -> Entries:
    """``prune(merge(aligned, dictionary))``, row for row and in its order (the terms sorted), with the rows of the
    terms that only the dictionary has taken from ``pruned_dictionary`` (``prune(dictionary)``; None: pruned here):
    such a row is the dictionary's alone, whatever the aligned model learned. Only the aligned terms' rows are mixed
    and pruned for each build (merging and pruning every dictionary row of the six directions again took 1 s of a
    3.3 s build of 150 synthetic documents, the lexicons read: docs/RESULTS.md, "Translation tables kept")."""
    def pruned(entries: Mapping[str, Mapping[str, float]]) -> Entries:
        return prune(entries, min_prob=settings.min_prob, max_per_term=settings.max_per_term)

    if not dictionary:
        return pruned(merge(aligned, None, lam=settings.lam, counts=counts, prior=settings.aligned_prior))
    if pruned_dictionary is None:
        pruned_dictionary = pruned(dictionary)
    shared = {s: row for s in aligned if (row := dictionary.get(s))}
    mixed = pruned(merge(aligned, shared, lam=settings.lam, counts=counts, prior=settings.aligned_prior))
    terms = list(pruned_dictionary)
    terms.extend(s for s in aligned if s not in pruned_dictionary)
    terms.sort()  # (``Lexicon.pruned`` comes in term order: one sorted run and the aligned model's few terms)
    out: Entries = {}
    for s in terms:
        row = mixed.get(s) if s in aligned else pruned_dictionary[s]
        if row is not None:
            out[s] = row  # type: ignore[assignment]  # (prune's rows: dicts; shared, TranslationTable copies them)
    return out


def build_direction(
    records: Sequence[PatentRecord],
    src: str,
    tgt: str,
    settings: TableSettings,
    *,
    exclude_ids: Collection[str] = (),
    lexicon: Mapping[str, Mapping[str, float]] | None = None,
    lexicon_sources: Sequence[str] = (SOURCE_DICT,),
    target_vocab: Collection[str] = (),
    splitters: Mapping[str, CompoundSplitter] | None = None,
    progress: bool | None = None,
    models: dict[tuple[int, bytes], IBM1Model] | None = None,
    pruned_lexicon: Mapping[str, Mapping[str, float]] | None = None,
) -> tuple[TranslationTable, dict[str, Any]]:
    """One direct table ``src``-``tgt``: IBM-1 on the aligned claims of ``records`` (read in that direction)
    merged with the dictionary ``lexicon`` (``None``: not available; ``lexicon_sources``: the names of the
    dictionaries it combines, for the table's ``sources``), pruned, cognates self-translated. ``models``: the
    alignment models a build's directions share (``ibm1.trained_once``). ``pruned_lexicon``: ``lexicon`` pruned
    alone with the settings' pruning (``Lexicon.pruned``, worked out once for a process' builds), the rows of the
    terms the aligned claims do not have; None: pruned here.

    Raises ``ValueError`` when neither resource gives anything.
    """
    info: dict[str, Any] = {}
    sources: list[str] = []
    aligned: Entries | None = None
    counts: dict[str, int] = {}
    if settings.use_aligned:
        try:
            aligned, summary = train_aligned_table(
                records,
                src,
                tgt,
                exclude_ids=exclude_ids,
                iterations=settings.iterations,
                symmetric=settings.symmetric,
                titles=settings.titles,
                function_words=settings.function_words,
                min_content=settings.min_content,
                progress=progress,
                splitters=splitters,
                models=models,
            )
        except ValueError as exc:
            log.warning("%s-%s aligned-claims model not trained: %s", src, tgt, exc)
            info["aligned_skipped"] = str(exc)
        else:
            sources.append(SOURCE_ALIGNED)
            counts = summary["source_counts"]
            leaked = set(exclude_ids) & set(summary["document_ids"])
            if leaked:  # a guard on the honesty of cross-fitted numbers, not an input check
                raise RuntimeError(f"the {src}-{tgt} aligned model saw excluded records {sorted(leaked)[:5]}")
            info["aligned"] = {k: v for k, v in summary.items()
                               if k not in ("log_likelihood", "document_ids", "source_counts")}
    dictionary = lexicon if settings.use_dict else None
    if dictionary is not None:
        if settings.target_filter and target_vocab:
            dictionary = restrict_targets(dictionary, target_vocab)
        sources.extend(lexicon_sources)
        info["dictionary"] = {"source_terms": len(dictionary), "lexicons": list(lexicon_sources)}
    if not sources:
        raise ValueError(
            f"no translation resource for {src}-{tgt}: no aligned {src}/{tgt} claims to train on and the "
            f"dictionary is {'off' if not settings.use_dict else 'not installed'}"
        )
    entries = _merged_and_pruned(aligned or {}, dictionary, settings, counts,
                                 pruned_lexicon if dictionary is lexicon else None)
    if settings.self_weight > 0 and target_vocab:
        entries = add_self_translation(entries, target_vocab, settings.self_weight)
        sources.append("self")
    table = TranslationTable(entries, src=src, tgt=tgt, sources=sources)
    info.update(sources=sources, source_terms=len(table), pairs=sum(len(r) for r in entries.values()))
    return table, info
