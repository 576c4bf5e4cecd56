"""Cross-lingual tasks in every direction, with and without compound splitting (``priorart-lab experiment
xling-tasks``).

Three known-item tasks over the real data (every EP and US publication under ``DATA/patents``); the
relevant document of a topic is its own grant, one of the EP grants whose claims are published in
English, German and French:

* ``descriptions`` -- the German and French first claims against an index of the **descriptions** only
  (``--fields description``, every language indexed): most descriptions are English, some German or
  French, so a German claim must reach English text (de->en) or French text (de->fr, composed through
  English), and a French one likewise;
* ``reverse`` -- the English first claim against an index where those grants hold **only their German
  and French text** (their English title, abstract, claims and English description are removed, the
  way a German- or French-only EP application looks), among all the other (mostly English) documents:
  the grant is reachable only through en->de and en->fr, and its translated-route score must compete
  with the English documents' own-language scores (the merge of routes on one scale);
* ``mate`` -- the German and French first claims against an English-only index (the original xling task).

Rows (each task): ``none`` (no translation: the query's own language, and untranslated terms in the
English index), one row per table direction alone, ``all`` (every table, no compound splitting) and
``all+compounds``; the ``reverse`` task adds ``all, max merge`` (the older per-route normalisation by the
best score found, for comparison with the query-weight merge).

Honesty, as in ``lab/experiments/xling.py``: grants are split into ``folds`` folds; the aligned-claims
models *and the compound splitter* used for a fold's topics never saw the claims of that fold's grants
(the splitter's word counts leave them out too, so the German index of that fold is analysed with that
fold's splitter). The dictionaries do not depend on the fold (``lexicons``: those of the tables,
``splitter_lexicons``: those whose headwords the splitter knows; ``training.translation.lexicons``).
Drawing reference signs ``(12)`` are stripped from the topics; ``words_only`` also drops numbers and
codes. p-values: paired randomisation test on MRR against ``none`` and, for ``all+compounds``, against
``all``.
"""

from __future__ import annotations

import logging
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from lab.experiments import ExperimentError
from lab.experiments.output import write_result
from lab.experiments.xling import first_claim, trilingual_grants, words_only
from service.corpus.record import PatentRecord
from service.retrieval.first_stage import DEFAULT_COMBINE, PARTS_MAX_TERMS, FirstStage
from service.text.analysis import SUPPORTED_LANGS, Analyzer, get_analyzer
from service.text.compounds import CompoundSplitter
from service.text.translation import TranslationTable
from training.evaluation.measures import evaluate_run
from training.evaluation.significance import randomisation_test
from training.evaluation.trec import write_qrels, write_run
from training.translation.compounds import build_splitter
from training.translation.ding import TRANS_DIR
from training.translation.freedict import DICTD_DIR
from training.translation.index_step import TranslationOptions, build_index_tables
from training.translation.lexicons import (
    DEFAULT_LEXICONS,
    DEFAULT_SPLITTER_LEXICONS,
    Lexicon,
    load_lexicon,
    parse_lexicons,
)
from training.translation.tables import DIRECT_PAIRS, TableSettings

log = logging.getLogger(__name__)

TASKS = ("descriptions", "reverse", "mate", "titles")
MEASURES = ("mrr", "success@1", "success@10")
PARTS = {"all+compounds, no parts": 0, "all+compounds, parts always": 1_000_000}  # else the default
TASK_SETUP: dict[str, dict[str, Any]] = {
    "descriptions": {"topic_langs": ("de", "fr"), "index_langs": SUPPORTED_LANGS, "fields": ("description",)},
    "reverse": {"topic_langs": ("en",), "index_langs": SUPPORTED_LANGS, "fields": None},
    "mate": {"topic_langs": ("de", "fr"), "index_langs": ("en",), "fields": None},
    "titles": {"topic_langs": ("de", "fr"), "index_langs": ("en",), "fields": ("abstract", "claims", "description")},
}


@dataclass
class XlingTaskSettings:
    folds: int = 5
    depth: int = 100
    words_only: bool = False
    folders: str = "all"  # the shared data's folders read (training.ingest.shared_records: all = patents, marec, ops)
    compounds: tuple[str, ...] = ("de",)
    lexicons: tuple[str, ...] = DEFAULT_LEXICONS  # dictionaries of the tables
    splitter_lexicons: tuple[str, ...] = DEFAULT_SPLITTER_LEXICONS  # dictionaries of the compound splitter
    combines: tuple[str, ...] = ()  # other route merges, each a row "all+compounds, <merge> merge"
    prf: tuple[int, ...] = ()  # pseudo-relevance feedback from the top N documents, each a row "all+compounds, prf N"
    dictd_dir: str = str(DICTD_DIR)
    trans_dir: str = str(TRANS_DIR)

    def __post_init__(self) -> None:
        self.lexicons = parse_lexicons(self.lexicons)
        self.splitter_lexicons = parse_lexicons(self.splitter_lexicons)
        if self.folds < 2:
            raise ExperimentError(f"folds must be >= 2 (cross-fitting needs held-out grants), got {self.folds}")
        if self.depth < 10:
            raise ExperimentError(f"depth must be >= 10 (success@10 is reported), got {self.depth}")


@dataclass
class XlingTaskResult:
    task: str
    settings: dict[str, Any]
    topics: int
    grants: list[str]
    rows: dict[str, dict[str, dict[str, float]]]  # row -> all / per topic language -> measure
    p_values: dict[str, dict[str, float]]  # row -> {"vs none": p, "vs all": p}
    routes: dict[str, dict[str, int]]  # row -> route that gave the relevant document its score -> count
    per_query: dict[str, dict[str, float]] = field(repr=False)
    seconds: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _strip_english(rec: PatentRecord) -> PatentRecord:
    """The grant as a German/French-only publication: no English title, abstract, claims or description."""
    update: dict[str, Any] = {
        "title": {k: v for k, v in rec.title.items() if k != "en"},
        "abstract": {k: v for k, v in rec.abstract.items() if k != "en"},
        "claims": {k: v for k, v in rec.claims.items() if k != "en"},
    }
    if (rec.lang or "en") == "en":
        update["description"] = []
    return rec.model_copy(update=update)


def _row_tables(task: str, tables: Mapping[tuple[str, str], TranslationTable]) -> dict[str, list[tuple[str, str]]]:
    """Rows with translation (besides ``none``): name -> the table directions it uses."""
    every = sorted(p for p in tables if p[0] in TASK_SETUP[task]["topic_langs"] or task == "descriptions")
    if task == "reverse":
        rows = {f"{s}-{t} only": [(s, t)] for s, t in every}
    elif task == "descriptions":
        rows = {"x-en only": [p for p in every if p[1] == "en"]}
    else:
        rows = {}
    rows["all"] = every
    return rows


def run_xling_task(
    data: str | Path,
    task: str,
    settings: XlingTaskSettings | None = None,
    *,
    out_dir: str | Path | None = None,
    records: Sequence[PatentRecord] | None = None,
    progress: bool | None = None,
    write_runs: bool = True,
    command: str | None = None,
) -> XlingTaskResult:
    """Run one task (see the module docstring); with ``out_dir`` write ``<task>.json`` (the result, with the commit
    and ``command``: :func:`lab.experiments.output.write_result`) and, with ``write_runs``, runs and qrels."""
    from training.build import build_index
    from training.ingest import shared_records
    from training.tasks import strip_reference_signs

    if task not in TASKS:
        raise ExperimentError(f"unknown task {task!r}; choose from {', '.join(TASKS)}")
    s = settings or XlingTaskSettings()
    setup = TASK_SETUP[task]
    seconds: dict[str, float] = {}
    t0 = time.perf_counter()
    if records is None:
        records = shared_records(data, progress=progress, folders=s.folders)
    grants = trilingual_grants(records)
    if len(grants) < s.folds:
        raise ExperimentError(f"{len(grants)} trilingual EP grants found; need at least {s.folds} (one per fold)")
    fold_of = {g.id: i % s.folds for i, g in enumerate(grants)}
    topics = []
    for lang in setup["topic_langs"]:
        for g in grants:
            text = g.title.get(lang, "") if task == "titles" else strip_reference_signs(first_claim(g, lang))
            if not text.strip():
                continue
            topics.append((f"{g.id}-{lang}", g.id, lang, words_only(text) if s.words_only else text))
    qrels = {qid: {gid: 1} for qid, gid, _, _ in topics}
    index_records = list(records)
    if task == "reverse":
        strip = {g.id for g in grants}
        index_records = [_strip_english(r) if r.id in strip else r for r in records]
    multilingual = [r for r in records if len({k for k, v in r.claims.items() if v} | set(r.title)) >= 2]

    # compound splitters per fold: their word counts never include the claims of the fold's grants
    t = time.perf_counter()
    dirs = {"freedict": Path(s.dictd_dir), "ding": Path(s.trans_dir)}
    splitters: dict[int, dict[str, CompoundSplitter]] = {}
    for fold in range(s.folds):
        held = {gid for gid, f in fold_of.items() if f == fold}
        splitters[fold] = {
            lang: build_splitter(records, lang, exclude_ids=held, lexicons=s.splitter_lexicons, dirs=dirs)
            for lang in s.compounds
        }
    seconds["splitters"] = time.perf_counter() - t

    # dictionaries: the rows of the topics' terms (under any fold's analysis), whole lexicons of pivot legs
    t = time.perf_counter()
    qterms: dict[str, set[str]] = {lang: set() for lang in SUPPORTED_LANGS}
    for _, _, lang, text in topics:
        qterms[lang].update(get_analyzer(lang)(text))
        for fold in range(s.folds):
            if lang in splitters[fold]:
                qterms[lang].update(Analyzer(lang, splitter=splitters[fold][lang])(text))
    lexicons: dict[tuple[str, str], Lexicon] = {}
    for src, tgt in DIRECT_PAIRS:
        full = load_lexicon(src, tgt, s.lexicons, dirs=dirs, progress=progress)
        keep_all = src == "en" and "en" not in setup["topic_langs"]  # a pivot leg: rows of pivot terms
        lexicons[(src, tgt)] = full if keep_all else full.restricted(qterms[src])
    seconds["dictionary"] = time.perf_counter() - t
    notes = [f"{w}: {a}-{b} without it" for (a, b), lex in lexicons.items() for w in lex.warnings]
    notes += [f"{a}-{b}: aligned claims only" for (a, b), lex in lexicons.items() if lex.entries is None]

    runs: dict[str, dict[str, dict[str, float]]] = {}
    won: dict[str, dict[str, int]] = {}
    t_index = t_tables = t_search = 0.0
    with tempfile.TemporaryDirectory(prefix=f"xling-{task}-") as tmp:
        bar = tqdm(total=s.folds, desc=f"xling {task} folds", file=sys.stderr,
                   disable=None if progress is None else not progress)
        for fold in range(s.folds):
            held = {gid for gid, f in fold_of.items() if f == fold}
            fold_topics = [tp for tp in topics if fold_of[tp[1]] == fold]
            for compounds in (False, True):
                if compounds and not s.compounds:
                    continue
                sp = splitters[fold] if compounds else {}
                tag = "c" if compounds else "p"
                t = time.perf_counter()
                # the index depends on the fold only through a splitter of an indexed language
                own = compounds and any(lang in setup["index_langs"] for lang in sp)
                idx_dir = Path(tmp) / (f"index-{fold}-{tag}" if own else "index-plain")
                if not idx_dir.exists():
                    build_index(index_records, idx_dir, index_langs=setup["index_langs"],
                                fields=setup["fields"] or ("title", "abstract", "claims", "description"),
                                translation=False, compounds="", splitters=sp if own else {}, progress=False,
                                ranker="none")
                base = FirstStage.load(idx_dir)
                t_index += time.perf_counter() - t
                t = time.perf_counter()
                vocabs = {lang: set(ix.vocab) for lang, ix in base.indexes.items()}
                tdir = Path(tmp) / f"tables-{fold}-{tag}"
                entries, report = build_index_tables(
                    tdir, multilingual, setup["index_langs"], vocabs,
                    TranslationOptions(compounds=tuple(sp), lexicons=s.lexicons, lexicon_dirs=dirs,
                                       table_settings=TableSettings(langs=("de", "fr"))),
                    exclude_ids=held, lexicons=lexicons, progress=False,
                )
                tables = {(e["src"], e["tgt"]): TranslationTable.load(tdir / e["file"]) for e in entries}
                t_tables += time.perf_counter() - t
                t = time.perf_counter()
                analyzers = {lang: Analyzer(lang, splitter=x) for lang, x in sp.items()}
                row_tables = _row_tables(task, tables)
                # (row, tables, route merge, pseudo-feedback documents)
                configs: list[tuple[str, list[tuple[str, str]] | None, str, int]] = []
                if compounds:
                    configs.append(("all+compounds", row_tables["all"], DEFAULT_COMBINE, 0))
                    configs.append(("all+compounds, no parts", row_tables["all"], DEFAULT_COMBINE, 0))
                    configs.append(("all+compounds, parts always", row_tables["all"], DEFAULT_COMBINE, 0))
                    configs += [(f"all+compounds, {c} merge", row_tables["all"], c, 0) for c in s.combines]
                    configs += [(f"all+compounds, prf {n}", row_tables["all"], DEFAULT_COMBINE, n) for n in s.prf]
                else:
                    configs.append(("none", None, DEFAULT_COMBINE, 0))
                    configs += [(name, pairs, DEFAULT_COMBINE, 0) for name, pairs in row_tables.items()]
                    if task == "reverse":  # other ways to merge routes, for comparison
                        configs.append(("all, reference merge", row_tables["all"], "reference", 0))
                        configs.append(("all, query-weight merge", row_tables["all"], "weight", 0))
                        configs.append(("all, max merge", row_tables["all"], "max", 0))
                for row, pairs, combine, prf in configs:
                    stage = FirstStage(base.meta, base.docs, base.indexes, {p: tables[p] for p in pairs or []},
                                       analyzers=analyzers, combine=combine,
                                       compound_parts=PARTS.get(row, PARTS_MAX_TERMS))
                    run = runs.setdefault(row, {})
                    via = won.setdefault(row, {})
                    for qid, gid, lang, text in fold_topics:
                        res = stage.search(text, lang=lang, k=s.depth, translate=pairs is not None,
                                           pseudo_feedback=prf)
                        run[qid] = {h.doc_id: h.score for h in res.hits}
                        hit = next((h for h in res.hits if h.doc_id == gid), None)
                        key = (hit.route or "-") if hit else "not found"
                        via[key] = via.get(key, 0) + 1
                t_search += time.perf_counter() - t
            bar.update(1)
        bar.close()
    seconds.update(index=t_index, tables=t_tables, search=t_search)

    rows: dict[str, dict[str, dict[str, float]]] = {}
    per_query: dict[str, dict[str, float]] = {}
    for row, run in runs.items():
        rep = evaluate_run(run, qrels, MEASURES)
        rows[row] = {"all": {m: rep.aggregate[m] for m in MEASURES}}
        for lang in setup["topic_langs"]:
            sub = [v for q, v in rep.per_query.items() if q.endswith(f"-{lang}")]
            rows[row][lang] = {m: sum(v[m] for v in sub) / len(sub) for m in MEASURES}
        per_query[row] = rep.measure("mrr")
    p_values: dict[str, dict[str, float]] = {}
    for row in runs:
        if row == "none":
            continue
        p_values[row] = {"vs none": randomisation_test(per_query[row], per_query["none"])}
        if row != "all":
            p_values[row]["vs all"] = randomisation_test(per_query[row], per_query["all"])
    seconds["total"] = time.perf_counter() - t0
    result = XlingTaskResult(
        task=task,
        settings=asdict(s),
        topics=len(topics),
        grants=[g.id for g in grants],
        rows=rows,
        p_values=p_values,
        routes=won,
        per_query=per_query,
        seconds=seconds,
        notes=notes,
    )
    if out_dir is not None:
        out = Path(out_dir)
        if write_runs:
            for row, run in runs.items():
                safe = row.replace(" ", "_").replace(",", "").replace("<->", "-").replace("+", "_")
                write_run(run, out / "runs" / f"{task}-{safe}.run", tag=f"{task}-{safe}")
            write_qrels(qrels, out / f"{task}-qrels.txt")
        write_result(result.to_dict(), out / f"{task}.json", command=command)
    return result


def format_task_table(result: XlingTaskResult) -> str:
    """Plain-text table: MRR, S@1, S@10 (all and per topic language), p-values, routes of the found grants."""
    langs = [k for k in next(iter(result.rows.values())) if k != "all"]
    head = (f"{'row':<24} {'MRR':>6} {'S@1':>5} {'S@10':>5} | " + " | ".join(f"{x} MRR" for x in langs)
            + " | p vs none | p vs all | routes of the relevant document")
    lex = "+".join(result.settings.get("lexicons", ())) or "none"
    split_lex = "+".join(result.settings.get("splitter_lexicons", ())) or "none"
    lines = [f"task {result.task}: {result.topics} topics, {len(result.grants)} grants, "
             f"{result.settings['folds']} folds, lexicons {lex} (splitter: {split_lex}), "
             f"{result.seconds.get('total', 0):.0f} s", head, "-" * len(head)]
    for row, res in result.rows.items():
        a = res["all"]
        p = result.p_values.get(row, {})
        routes = ", ".join(f"{k} {v}" for k, v in sorted(result.routes.get(row, {}).items(), key=lambda kv: -kv[1]))
        cells = " | ".join(f"{res[x]['mrr']:>6.3f}" for x in langs)
        pn = f"{p['vs none']:.4f}" if "vs none" in p else "-"
        pa = f"{p['vs all']:.4f}" if "vs all" in p else "-"
        lines.append(f"{row:<24} {a['mrr']:>6.3f} {a['success@1']:>5.2f} {a['success@10']:>5.2f} | {cells} | "
                     f"{pn:>9} | {pa:>8} | {routes}")
    lines.extend(f"note: {n}" for n in result.notes)
    return "\n".join(lines)
