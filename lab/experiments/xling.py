"""Cross-lingual known-item experiment: German/French first claims -> the English text of the same grant.

Setup (``priorart-lab experiment xling --data DATA``):

* corpus: every EP and US publication under ``DATA/patents/{ep,us}`` (read with ``training.ingest``);
* index: English only (``index_langs=en``), so a German or French query reaches its grant only
  through translation or through strings both languages share (numbers, reference signs, formulas,
  cognates);
* topics: the first claim, in German and in French, of every EP grant with claims in all three
  languages (qid ``<id>-de`` / ``<id>-fr``); qrels: that grant, relevance 1;
* rows: ``none`` (the untranslated source terms searched in the English index), ``dict`` (FreeDict),
  ``aligned`` (IBM model 1 on aligned claims) and ``both`` (interpolated);
* honesty: the aligned-claims model that translates a topic never saw its grant: topics are split
  into ``folds`` folds (grants sorted by id, grant ``i`` in fold ``i % folds``) and the model for a fold is
  trained with that fold's grants excluded (k-fold cross-fitting). The dictionary does not depend on
  the fold.

Reported per row, for all topics and per language: MRR, success@1, success@10, plus the paired
randomisation-test p-value of each translated row's MRR against ``none``.
"""

from __future__ import annotations

import logging
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from tqdm import tqdm

from lab.experiments import ExperimentError
from lab.experiments.output import write_result
from service.corpus.record import PatentRecord
from service.retrieval.first_stage import FirstStage
from service.text.analysis import get_analyzer, tokenize
from service.text.translation import TranslationTable
from training.evaluation.measures import evaluate_run
from training.evaluation.significance import randomisation_test
from training.evaluation.trec import write_qrels, write_run
from training.translation.freedict import DICTD_DIR, load_lexicon
from training.translation.ibm1 import train_aligned_table
from training.translation.tables import TableSettings, add_self_translation, merge, prune, restrict_targets

log = logging.getLogger(__name__)

ROWS = ("none", "dict", "aligned", "both")
LANGS = ("de", "fr")
MEASURES = ("mrr", "success@1", "success@10")


@dataclass
class XlingSettings:
    """Settings of the cross-lingual experiment (all saved in the result JSON)."""

    folds: int = 5
    depth: int = 100  # run depth per topic
    folders: str = "all"  # the shared data's folders read (training.ingest.shared_records: all = patents, marec, ops)
    max_query_terms: int | None = None  # FirstStage query reduction (None: its default, 100)
    lam: float = 0.5  # weight of the aligned model in the "both" row ...
    aligned_prior: float = TableSettings.aligned_prior  # ... scaled by n / (n + this) for a term seen n times
    iterations: int = 10  # IBM-1 EM iterations
    symmetric: bool = True  # combine with the reverse alignment model
    titles: bool = True  # aligned titles as extra sentence pairs
    function_words: bool = True  # train with stop words kept; drop rows that mostly translate to them
    min_content: float = 0.5
    self_weight: float = 0.1  # self-translation mass for source terms that are English index terms too
    target_filter: bool = False  # drop dictionary translations absent from the English index
    store_min_prob: float = 0.005  # storage pruning of the tables
    store_max_per_term: int = 20
    max_alternatives: int = 5  # query-time pruning (TranslationTable)
    cumulative: float = 0.9
    min_prob: float = 0.01
    words_only: bool = False  # diagnostic: drop numbers, reference signs and codes from the topics
    reference_signs: bool = False  # keep drawing reference signs "(12)" in the topics (see tasks.strip_reference_signs)
    dictd_dir: str = str(DICTD_DIR)

    def __post_init__(self) -> None:
        if self.folds < 2:
            raise ExperimentError(f"folds must be >= 2 (cross-fitting needs held-out grants), got {self.folds}")
        if self.depth < 10:
            raise ExperimentError(f"depth must be >= 10 (success@10 is reported), got {self.depth}")


@dataclass
class XlingResult:
    """Measures per row (``all``/``de``/``fr``), per-query values, p-values vs ``none``, timings."""

    settings: dict[str, Any]
    topics: int
    grants: list[str]
    folds: dict[str, int]
    rows: dict[str, dict[str, dict[str, float]]]
    p_values: dict[str, float]
    per_query: dict[str, dict[str, float]] = field(repr=False)
    resources: dict[str, Any] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def trilingual_grants(records: Sequence[PatentRecord]) -> list[PatentRecord]:
    """EP grants with claims in en, de and fr, sorted by id."""
    out = [
        r
        for r in records
        if r.country == "EP" and r.kind.startswith("B") and all(r.claims.get(lang) for lang in ("en", *LANGS))
    ]
    return sorted(out, key=lambda r: r.id)


def first_claim(rec: PatentRecord, lang: str) -> str:
    """Text of the lowest-numbered claim in ``lang``."""
    return min(rec.claims[lang], key=lambda c: c.num).text


def words_only(text: str) -> str:
    """The text's word tokens, without numbers, reference signs and classification codes.

    Those strings are the same in every language, so they match the English twin without any
    translation; dropping them measures what translation alone contributes.
    """
    return " ".join(t for t in tokenize(text) if not (t[0] == "(" or t[0].isdigit() or "/" in t))


def _table(
    entries: Mapping[str, Mapping[str, float]], lang: str, sources: list[str], s: XlingSettings, vocab: set[str]
) -> TranslationTable:
    rows = prune(entries, min_prob=s.store_min_prob, max_per_term=s.store_max_per_term)
    if s.self_weight > 0:
        rows = add_self_translation(rows, vocab, s.self_weight)
        sources = [*sources, "self"]
    return TranslationTable(
        rows,
        src=lang,
        sources=sources,
        max_alternatives=s.max_alternatives,
        cumulative=s.cumulative,
        min_prob=s.min_prob,
    )


def run_xling(
    data: str | Path,
    settings: XlingSettings | None = None,
    *,
    out_dir: str | Path | None = None,
    records: Sequence[PatentRecord] | None = None,
    progress: bool | None = None,
    write_runs: bool = True,
    command: str | None = None,
) -> XlingResult:
    """Run the experiment; with ``out_dir`` write ``xling.json`` (the result, with the commit and ``command``:
    :func:`lab.experiments.output.write_result`) and, with ``write_runs``, ``runs/<row>.run`` and ``qrels.txt``.

    ``records`` may be passed to skip reading ``data`` (e.g. an already ingested corpus).
    """
    from training.build import build_index
    from training.ingest import shared_records
    from training.tasks import strip_reference_signs

    s = settings or XlingSettings()
    seconds: dict[str, float] = {}
    t0 = time.perf_counter()
    if records is None:
        records = shared_records(data, progress=progress, folders=s.folders)
    seconds["ingest"] = time.perf_counter() - t0
    grants = trilingual_grants(records)
    if len(grants) < s.folds:
        raise ExperimentError(f"{len(grants)} trilingual EP grants found; need at least {s.folds} (one per fold)")
    fold_of = {g.id: i % s.folds for i, g in enumerate(grants)}
    topics = [(f"{g.id}-{lang}", g.id, lang, first_claim(g, lang)) for lang in LANGS for g in grants]
    if not s.reference_signs:
        topics = [(qid, gid, lang, strip_reference_signs(text)) for qid, gid, lang, text in topics]
    if s.words_only:
        topics = [(qid, gid, lang, words_only(text)) for qid, gid, lang, text in topics]
    qrels = {qid: {gid: 1} for qid, gid, _, _ in topics}

    with tempfile.TemporaryDirectory(prefix="xling-index-") as tmp:
        t = time.perf_counter()
        index_dir = Path(tmp) / "index"
        # the experiment brings its own cross-fitted tables: no tables, no compound splitting from the build
        build_index(records, index_dir, index_langs="en", translation=False, compounds="", progress=progress,
                    ranker="none")
        base = FirstStage.load(index_dir)
        seconds["index"] = time.perf_counter() - t
        en_vocab = set(base.indexes["en"].vocab)

        # dictionary rows for the topics' terms (identical to the full lexicon's rows for these terms)
        t = time.perf_counter()
        query_terms = {
            lang: {term for _, _, ql, text in topics if ql == lang for term in get_analyzer(lang)(text)}
            for lang in LANGS
        }
        lexicons: dict[str, dict[str, dict[str, float]] | None] = {
            lang: load_lexicon(lang, dictd_dir=s.dictd_dir, only=query_terms[lang], progress=progress) for lang in LANGS
        }
        if s.target_filter:
            lexicons = {lang: restrict_targets(lex, en_vocab) if lex else lex for lang, lex in lexicons.items()}
        seconds["dictionary"] = time.perf_counter() - t
        rows_run = list(ROWS)
        notes: list[str] = []
        missing_lex = [lang for lang, lex in lexicons.items() if lex is None]
        if missing_lex:
            rows_run = [r for r in ROWS if r not in ("dict", "both")]
            notes.append(
                f"FreeDict lexicon(s) for {', '.join(missing_lex)} not installed: rows dict and both "
                "skipped (install them with scripts/setup.sh)"
            )
            log.warning(notes[-1])

        # aligned-claims model per fold, trained without the fold's grants
        t = time.perf_counter()
        aligned: dict[tuple[int, str], dict[str, dict[str, float]]] = {}
        counts: dict[tuple[int, str], dict[str, int]] = {}
        aligned_info: dict[str, Any] = {}
        for fold in range(s.folds):
            held_out = {gid for gid, f in fold_of.items() if f == fold}
            for lang in LANGS:
                table, summary = train_aligned_table(
                    records,
                    lang,
                    exclude_ids=held_out,
                    iterations=s.iterations,
                    symmetric=s.symmetric,
                    titles=s.titles,
                    function_words=s.function_words,
                    min_content=s.min_content,
                    progress=False,
                )
                leaked = held_out & set(summary["document_ids"])
                if leaked:  # a guard on the honesty of the numbers, not an input check
                    raise RuntimeError(f"fold {fold}: the {lang} aligned model saw held-out grants {sorted(leaked)}")
                aligned[(fold, lang)] = table
                counts[(fold, lang)] = summary["source_counts"]
                aligned_info[f"fold{fold}-{lang}"] = {
                    k: summary[k] for k in ("documents", "sentence_pairs", "source_terms")
                }
        seconds["aligned"] = time.perf_counter() - t

        def tables_for(row: str, fold: int) -> dict[str, TranslationTable]:
            out = {}
            for lang in LANGS:
                lex = lexicons[lang]
                if row == "aligned":
                    out[lang] = _table(aligned[(fold, lang)], lang, ["aligned-claims"], s, en_vocab)
                elif lex is None:  # rows_run leaves dict/both out when a lexicon is missing
                    raise RuntimeError(f"row {row} needs the {lang}-en lexicon")
                elif row == "dict":
                    out[lang] = _table(lex, lang, ["freedict"], s, en_vocab)
                else:
                    both = merge(aligned[(fold, lang)], lex, lam=s.lam, counts=counts[(fold, lang)],
                                 prior=s.aligned_prior)
                    out[lang] = _table(both, lang, ["aligned-claims", "freedict"], s, en_vocab)
            return out

        t = time.perf_counter()
        runs: dict[str, dict[str, dict[str, float]]] = {}
        max_terms = s.max_query_terms
        bar = tqdm(
            total=len(rows_run) * len(topics),
            desc="xling",
            unit="q",
            file=sys.stderr,
            disable=None if progress is None else not progress,
        )
        for row in rows_run:
            run: dict[str, dict[str, float]] = {}
            for fold in range(s.folds):
                if row == "none":
                    stage = base
                else:
                    stage = FirstStage(
                        base.meta, base.docs, base.indexes, tables_for(row, fold), max_query_terms=base.max_query_terms
                    )
                for qid, gid, lang, text in topics:
                    if fold_of[gid] != fold:
                        continue
                    res = stage.search(text, lang=lang, k=s.depth, translate=row != "none", max_query_terms=max_terms)
                    if row != "none" and not any(r.kind == "psq" for r in res.info.routes):
                        raise RuntimeError(f"{qid}: row {row} did not search through a translation table")
                    run[qid] = {h.doc_id: h.score for h in res.hits}
                    bar.update(1)
            runs[row] = run
        bar.close()
        seconds["search"] = time.perf_counter() - t

    results: dict[str, dict[str, dict[str, float]]] = {}
    per_query: dict[str, dict[str, float]] = {}
    for row, run in runs.items():
        report = evaluate_run(run, qrels, MEASURES)
        results[row] = {"all": {m: report.aggregate[m] for m in MEASURES}}
        for lang in LANGS:
            sub = {q: v for q, v in report.per_query.items() if q.endswith(f"-{lang}")}
            results[row][lang] = {m: sum(v[m] for v in sub.values()) / len(sub) for m in MEASURES}
        per_query[row] = report.measure("mrr")
    p_values = {row: randomisation_test(per_query[row], per_query["none"]) for row in rows_run if row != "none"}
    seconds["total"] = time.perf_counter() - t0

    resources = {
        "dictionary": {lang: (len(lex) if lex is not None else None) for lang, lex in lexicons.items()},
        "aligned": aligned_info,
        "index_terms_en": len(en_vocab),
        "documents": len(records),
    }
    result = XlingResult(
        settings=asdict(replace(s)),
        topics=len(topics),
        grants=[g.id for g in grants],
        folds={g: f for g, f in fold_of.items()},
        rows=results,
        p_values=p_values,
        per_query=per_query,
        resources=resources,
        seconds=seconds,
        notes=notes,
    )
    if out_dir is not None:
        out = Path(out_dir)
        if write_runs:
            for row, run in runs.items():
                write_run(run, out / "runs" / f"xling-{row}.run", tag=f"xling-{row}")
            write_qrels(qrels, out / "qrels.txt")
        write_result(result.to_dict(), out / "xling.json", command=command)
    return result


def format_table(result: XlingResult) -> str:
    """A plain-text table: one line per row, MRR / success@1 / success@10 for all topics and per language."""
    head = (
        f"{'row':<8} {'MRR':>6} {'S@1':>5} {'S@10':>5} | "
        + " | ".join(f"{lang} {'MRR':>6} {'S@1':>5} {'S@10':>5}" for lang in LANGS)
        + " | p(MRR vs none)"
    )
    lines = [head, "-" * len(head)]
    for row, res in result.rows.items():
        a = res["all"]
        parts = [f"{row:<8} {a['mrr']:>6.3f} {a['success@1']:>5.2f} {a['success@10']:>5.2f}"]
        for lang in LANGS:
            r = res[lang]
            parts.append(f"{'':>2} {r['mrr']:>6.3f} {r['success@1']:>5.2f} {r['success@10']:>5.2f}")
        p = result.p_values.get(row)
        lines.append(" | ".join(parts) + (f" | {p:.4f}" if p is not None else " |"))
    lines.append(
        f"{result.topics} topics ({len(result.grants)} grants x {len(LANGS)} languages), "
        f"{result.settings['folds']} folds, {result.seconds['total']:.1f} s"
    )
    lines.extend(f"note: {n}" for n in result.notes)
    return "\n".join(lines)
