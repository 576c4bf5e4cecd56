"""Own-language documents under the translated routes (``priorart-lab experiment route-merge``).

A query is searched in its own language and, translated, in every other indexed language; the routes are merged
on one scale (service/retrieval/first_stage.py). The routes may add documents a query reaches only through a
translation, but they must not push down the documents it finds in its own language. This experiment measures
that on the real data:

* topics: the title of every publication in each language ``L`` in which it also has other text (abstract,
  claims or description in ``L``): English titles of the US grants and of the EP publications, German and French
  titles of the EP publications that have German or French claims or text; the relevant document is the
  publication itself;
* index: every publication under ``DATA/patents/{ep,us}``, trilingual (en, de, fr), fields abstract, claims and
  description (titles are left out, so a topic never matches its own words verbatim there);
* rows: ``own route only`` (no translation table: the query's own index alone) against ``all routes`` (the
  default: every table, the routes merged), and the other merges (``combines``) and knees of the default merge
  (``knees``) when asked;
* honesty: cross-fitted in ``folds`` folds by document: the tables and the German compound splitter that serve a
  fold's topics never saw that fold's documents (the tables are trained without their aligned claims and titles).

Reported per language: MRR, S@1, S@10, and how many topics' relevant document the routes moved down or up
(its rank with all routes against its rank with its own route only).
"""

from __future__ import annotations

import logging
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from lab.experiments import ExperimentError
from service.corpus.record import PatentRecord
from service.text.analysis import SUPPORTED_LANGS
from training.evaluation.significance import randomisation_test

log = logging.getLogger(__name__)

LANGS = SUPPORTED_LANGS
FIELDS = ("abstract", "claims", "description")
OWN = "own route only"
ALL = "all routes"


@dataclass
class RouteMergeSettings:
    folds: int = 5
    depth: int = 100
    combines: tuple[str, ...] = ()  # other merges to compare (service.retrieval.first_stage.COMBINES)
    knees: tuple[float, ...] = ()  # other knees of the aligned merge (service.retrieval.first_stage.ceiling_slope)
    prf: tuple[int, ...] = ()  # pseudo-relevance feedback from the top N documents (rows "all routes, prf N")


@dataclass
class RouteMergeResult:
    settings: dict[str, Any]
    topics: dict[str, int]  # language -> topics
    rows: dict[str, dict[str, dict[str, float]]]  # row -> language ("all" too) -> measure -> value
    moved: dict[str, dict[str, dict[str, int]]]  # row -> language -> {"down": n, "up": n} against the own route
    p_values: dict[str, float] = field(default_factory=dict)  # row -> paired p of MRR against the own route only
    per_query: dict[str, dict[str, int]] = field(default_factory=dict, repr=False)  # row -> qid -> rank (0: missed)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def own_language_topics(records: Sequence[PatentRecord]) -> list[tuple[str, str, str, str]]:
    """``(qid, doc id, lang, title)`` for every title in a language the publication has other text in."""
    from training.tasks import strip_reference_signs

    out = []
    for rec in records:
        for lang in LANGS:
            title = strip_reference_signs(rec.title.get(lang, "")).strip()
            if not title:
                continue
            if any(rec.text(lang, (f,)).strip() for f in FIELDS):
                out.append((f"{rec.id}-{lang}", rec.id, lang, title))
    return out


def run_route_merge(data: str | Path, settings: RouteMergeSettings | None = None, *,
                    records: Sequence[PatentRecord] | None = None, progress: bool | None = None) -> RouteMergeResult:
    """Run the experiment (module docstring)."""
    from service.retrieval.first_stage import ALIGN_KNEE, COMBINES, DEFAULT_COMBINE, FirstStage
    from service.text.analysis import Analyzer
    from service.text.translation import TranslationTable
    from training.build import build_index
    from training.ingest import shared_records
    from training.translation.compounds import build_splitter
    from training.translation.index_step import TranslationOptions, build_index_tables
    from training.translation.tables import TableSettings

    s = settings or RouteMergeSettings()
    bad = [c for c in s.combines if c not in COMBINES]
    if bad:
        raise ExperimentError(f"unknown route merge(s) {bad}; valid: {', '.join(COMBINES)}")
    t0 = time.perf_counter()
    if records is None:
        records = shared_records(data, progress=progress)
    topics = own_language_topics(records)
    ids = sorted({doc for _, doc, _, _ in topics})
    fold_of = {doc: i % s.folds for i, doc in enumerate(ids)}
    multilingual = [r for r in records if len({k for k, v in r.claims.items() if v} | set(r.title)) >= 2]
    rows = [OWN, ALL, *(f"all routes, {c} merge" for c in s.combines if c != DEFAULT_COMBINE),
            *(f"all routes, knee {k:g}" for k in s.knees), *(f"all routes, prf {n}" for n in s.prf)]
    ranks: dict[str, dict[str, int]] = {row: {} for row in rows}
    bar = tqdm(total=s.folds, desc="route-merge folds", file=sys.stderr,
               disable=None if progress is None else not progress)
    with tempfile.TemporaryDirectory(prefix="route-merge-") as tmp:
        for fold in range(s.folds):
            held = {doc for doc, f in fold_of.items() if f == fold}
            splitters = {"de": build_splitter(records, "de", exclude_ids=held)}
            idx = Path(tmp) / f"index-{fold}"
            build_index(records, idx, fields=FIELDS, translation=False, splitters=splitters, progress=False,
                        ranker="none")
            base = FirstStage.load(idx)
            vocabs = {lang: set(ix.vocab) for lang, ix in base.indexes.items()}
            entries, _ = build_index_tables(
                Path(tmp) / f"tables-{fold}", multilingual, LANGS, vocabs,
                TranslationOptions(compounds=("de",), table_settings=TableSettings(langs=("de", "fr"))),
                exclude_ids=held, progress=False)
            tables = {(e["src"], e["tgt"]): TranslationTable.load(Path(tmp) / f"tables-{fold}" / e["file"])
                      for e in entries}
            analyzers = {lang: Analyzer(lang, splitter=x) for lang, x in splitters.items()}
            stages = {OWN: FirstStage(base.meta, base.docs, base.indexes, {}, analyzers=analyzers),
                      ALL: FirstStage(base.meta, base.docs, base.indexes, tables, analyzers=analyzers)}
            for c in s.combines:
                if c != DEFAULT_COMBINE:
                    stages[f"all routes, {c} merge"] = FirstStage(base.meta, base.docs, base.indexes, tables,
                                                                  analyzers=analyzers, combine=c)
            for k in s.knees:
                stages[f"all routes, knee {k:g}"] = FirstStage(base.meta, base.docs, base.indexes, tables,
                                                               analyzers=analyzers, knee=k)
            for qid, doc, lang, text in topics:
                if fold_of[doc] != fold:
                    continue
                for row, stage in stages.items():
                    hits = stage.search(text, lang=lang, k=s.depth, explain=False).hits
                    ranks[row][qid] = next((h.rank for h in hits if h.doc_id == doc), 0)
                for n in s.prf:
                    hits = stages[ALL].search(text, lang=lang, k=s.depth, explain=False, pseudo_feedback=n).hits
                    ranks[f"all routes, prf {n}"][qid] = next((h.rank for h in hits if h.doc_id == doc), 0)
            bar.update(1)
        bar.close()

    lang_of = {qid: lang for qid, _, lang, _ in topics}
    result_rows: dict[str, dict[str, dict[str, float]]] = {}
    moved: dict[str, dict[str, dict[str, int]]] = {}
    p_values: dict[str, float] = {}
    rr = {row: {q: (1.0 / r if r else 0.0) for q, r in by_q.items()} for row, by_q in ranks.items()}
    for row in rows:
        result_rows[row] = {}
        moved[row] = {}
        for lang in ("all", *LANGS):
            qids = [q for q in ranks[row] if lang == "all" or lang_of[q] == lang]
            if not qids:
                continue
            result_rows[row][lang] = {
                "mrr": sum(rr[row][q] for q in qids) / len(qids),
                "success@1": sum(ranks[row][q] == 1 for q in qids) / len(qids),
                "success@10": sum(0 < ranks[row][q] <= 10 for q in qids) / len(qids),
            }
            if row != OWN:
                moved[row][lang] = {"down": sum(rr[row][q] < rr[OWN][q] for q in qids),
                                    "up": sum(rr[row][q] > rr[OWN][q] for q in qids)}
        if row != OWN:
            p_values[row] = randomisation_test(rr[row], rr[OWN])
    return RouteMergeResult(
        settings={**asdict(s), "default_knee": ALIGN_KNEE},
        topics={lang: sum(1 for q in lang_of.values() if q == lang) for lang in LANGS},
        rows=result_rows, moved=moved, p_values=p_values, per_query=ranks, seconds=time.perf_counter() - t0)


def format_route_merge(result: RouteMergeResult) -> str:
    """Markdown table: per row and language, MRR, S@1, S@10 and the topics moved down / up by the routes."""
    lines = ["| row | language | topics | MRR | S@1 | S@10 | moved down | moved up | p vs own route |",
             "|---|---|---|---|---|---|---|---|---|"]
    for row, by_lang in result.rows.items():
        for lang, m in by_lang.items():
            n = sum(result.topics.values()) if lang == "all" else result.topics[lang]
            mv = result.moved.get(row, {}).get(lang)
            p = result.p_values.get(row) if lang == "all" else None
            lines.append(f"| {row} | {lang} | {n} | {m['mrr']:.3f} | {m['success@1']:.2f} | {m['success@10']:.2f} | "
                         f"{mv['down'] if mv else '-'} | {mv['up'] if mv else '-'} | "
                         f"{f'{p:.4f}' if p is not None else '-'} |")
    return "\n".join(lines)
