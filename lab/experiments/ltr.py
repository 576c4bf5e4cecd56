"""``priorart-lab experiment ltr``: single systems, Borda pairs and LinLearn on the real tasks, cross-fitted.

Tasks (:mod:`training.tasks`):

- ``xling`` (the main one): the German and French first claims (reference signs stripped) of the 25
  trilingual EP grants; the relevant document is the grant; English-only index over every EP and US
  publication (all fields), as :mod:`lab.experiments.xling`;
- ``known-item``: English title + abstract of US utility grants; the grant is relevant; English index of
  claims + description only.

Systems, each scoring *every* indexed document for a topic (the corpus is small; candidates = all):

- ``bm25``: BM25 with the untranslated query terms (xling's ``none`` row; for known-item plain BM25);
- ``psq`` (xling only): BM25 through PSQ translation tables = FreeDict lexicon merged with the IBM-1
  model of the aligned claims (xling's ``both`` row), that model trained without the fold's test *and*
  dev grants;
- ``wordpair``: the sparse word-pair model (:mod:`training.ltr.wordpair`);
- ``domain``: the domain-knowledge model (:mod:`training.ltr.domain`); the query side knows the topic's
  text, and with ``topic_codes`` also its IPC/CPC codes (the task files carry them). Off by default: in a
  known-item task the codes are the target's own, and on this corpus the full code set of a grant nearly
  identifies it (domain alone reaches MRR 1.0 on xling with codes), which measures the task, not the model.

Honesty: k-fold cross-fitting over the task's documents (sorted by id, document ``i`` in fold
``i % folds``). For fold ``f``: its documents (and their publication groups) are *test*, those of fold
``f + 1`` are *dev*, the other task documents *train*; every other publication keeps its part of the
fixed split (:func:`training.models.pairs.make_split`, so its test publications are never trained on).
The word-pair and domain models are trained on the training pairs of that split (the neural rankers'
topics and sampler, :mod:`training.ltr.data`), early-stopped on its dev topics; Borda's ``kappa`` (per
pair, grid step 0.05, dev MAP) and the LinLearn weights are fitted on the dev fold's *task* topics
scored by those systems; the test fold's topics are then scored and combined. No test topic, its
grant or its translation ever reaches a model or a weight that scores it.

Protocol ``fixed`` instead: one round on the fixed split itself (``make_split``, or the ``split.json``
of ``--models``): the task documents of its test part are evaluated, those of its dev part fit the
combinations, the train part trains. With ``--models MODELS_DIR`` (``priorart train``'s folder) the
neural systems join: ``dense`` (dual-encoder inner product), ``text`` and ``meta`` (ONNX rankers,
:class:`service.retrieval.neural.Models`); they were trained on that split, so the protocol is
``fixed`` (on xling: 8 test grants, 16 topics; 5 dev grants fit the combinations).

Rows: each single system, ``borda(A+B)`` for every pair, ``linlearn(all)`` and ``linlearn(wordpair+domain)``
(the paper's DK+VW). Measures: MRR (= MAP, one relevant document per topic), success@1, success@10,
nDCG, recall@100, per language for xling; paired randomisation test of MRR against the best single
system. Runs (top ``depth``), qrels, a JSON and a markdown report, and the orthogonality report of the
single systems (:mod:`training.ltr.orthogonality`) are written to ``--out``.
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from lab.experiments import ExperimentError
from service.codes import record_codes
from service.corpus.record import PatentRecord
from service.fusion import fuse
from service.retrieval.domain import FEATURES as FEATURES_ALL
from service.retrieval.domain import DomainModel, DomainStore
from service.retrieval.encoders import ModelsLayout
from service.retrieval.first_stage import FirstStage
from service.retrieval.wordpair import DocTermStore, WordPairModel
from service.text.analysis import get_analyzer
from service.text.translation import TranslationTable
from training.evaluation.measures import evaluate_run
from training.evaluation.significance import randomisation_test
from training.evaluation.trec import Qrels, Run, Topic, write_qrels, write_run
from training.ltr.data import LtrConfig, make_query_side, prepare_ltr_data
from training.ltr.domain import DomainConfig, train_domain
from training.ltr.linlearn import CandidateList, LinLearnConfig, borda_weights, train_linlearn, tune_borda
from training.ltr.wordpair import WordPairConfig, train_wordpair
from training.models.pairs import Split, doc_info, group_key, make_split

log = logging.getLogger(__name__)

TASKS = ("xling", "known-item")
MEASURES = ("mrr", "success@1", "success@10", "ndcg", "recall@100")


@dataclass
class LtrExperimentSettings:
    task: str = "xling"
    protocol: str = "folds"  # folds (k-fold cross-fitting) | fixed (the fixed split, as the neural models)
    folds: int = 5
    models_dir: str | None = None  # neural models (their split.json is used: protocol fixed)
    depth: int = 100  # documents written per topic in the runs (and evaluated)
    known_item_n: int = 200
    topic_codes: bool = False  # the domain model's query side knows the topic's codes (train and test)
    borda_step: float = 0.05
    borda_measure: str = "map"
    permutations: int = 10_000
    ltr: LtrConfig = field(default_factory=LtrConfig)
    wordpair: WordPairConfig = field(default_factory=WordPairConfig)
    domain: DomainConfig = field(default_factory=DomainConfig)
    linlearn: LinLearnConfig = field(default_factory=LinLearnConfig)
    # PSQ tables (xling), as the xling experiment's "both" row
    lam: float = 0.5
    self_weight: float = 0.1
    dictd_dir: str | None = None  # FreeDict lexicons (None: the system's /usr/share/dictd)

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise ExperimentError(f"unknown task {self.task!r}; valid: {', '.join(TASKS)}")
        if self.protocol not in ("folds", "fixed"):
            raise ExperimentError(f"unknown protocol {self.protocol!r}; valid: folds, fixed")
        if self.models_dir is not None:
            self.protocol = "fixed"
        if self.folds < 3:
            raise ExperimentError(f"folds must be >= 3 (test, dev and train folds), got {self.folds}")
        if self.depth < 10:
            raise ExperimentError(f"depth must be >= 10 (success@10 is reported), got {self.depth}")
        # the domain model is trained with the query side it is tested with
        meta = tuple(m for m in self.ltr.query_meta if m != "codes")
        self.ltr = replace(self.ltr, query_meta=(*meta, "codes") if self.topic_codes else meta)


@dataclass
class LtrExperimentResult:
    settings: dict[str, Any]
    task: str
    topics: int
    systems: list[str]
    rows: dict[str, dict[str, dict[str, float]]]  # row -> all/<lang> -> measure -> value
    p_values: dict[str, float]  # row -> p (MRR vs best single)
    best_single: str
    per_query: dict[str, dict[str, float]] = field(repr=False)
    folds: list[dict[str, Any]] = field(default_factory=list)
    timing_ms: dict[str, float] = field(default_factory=dict)  # mean ms per topic per system
    seconds: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# --------------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------------


def fold_split(base: Split, records: Sequence[PatentRecord], fold_of: Mapping[str, int], test_fold: int,
               dev_fold: int) -> Split:
    """The fixed split with the task documents' groups re-assigned: test fold -> test, dev fold -> dev, rest train."""
    group_part: dict[str, str] = {}
    for rec in records:
        f = fold_of.get(rec.id)
        if f is not None:
            group_part[group_key(rec)] = "test" if f == test_fold else "dev" if f == dev_fold else "train"
    part = dict(base.part)
    for rec in records:
        p = group_part.get(group_key(rec))
        if p is not None:
            part[rec.id] = p
    return Split(part, set(base.trilingual), base.ratios, base.trilingual_ratios)


def _scores_array(hits: Sequence[Any], n: int) -> np.ndarray:
    out = np.full(n, np.nan)
    for h in hits:
        out[h.row] = h.score
    return out


def _run_of(scores: np.ndarray, ids: Sequence[str], depth: int) -> dict[str, float]:
    ok = np.flatnonzero(~np.isnan(scores))
    if not len(ok):
        return {}
    order = ok[np.lexsort((-ok, -scores[ok]))][:depth]  # trec_eval-like ties do not matter here
    return {ids[i]: float(scores[i]) for i in order}


def _psq_tables(records: Sequence[PatentRecord], topics: Sequence[Topic], exclude: set[str], en_vocab: set[str],
                s: LtrExperimentSettings, lexicons: Mapping[str, Any]) -> dict[str, TranslationTable]:
    from lab.experiments.xling import XlingSettings, _table
    from training.translation.ibm1 import train_aligned_table
    from training.translation.tables import merge

    xs = XlingSettings(lam=s.lam, self_weight=s.self_weight)
    out: dict[str, TranslationTable] = {}
    for lang in sorted({t.lang for t in topics if t.lang}):
        table, summary = train_aligned_table(records, lang, exclude_ids=exclude, iterations=xs.iterations,
                                             symmetric=xs.symmetric, titles=xs.titles,
                                             function_words=xs.function_words, min_content=xs.min_content,
                                             progress=False)
        leaked = exclude & set(summary["document_ids"])
        if leaked:  # a guard on the honesty of the numbers
            raise RuntimeError(f"the {lang} aligned model saw held-out grants {sorted(leaked)}")
        lex = lexicons.get(lang)
        if lex is not None:
            both = merge(table, lex, lam=xs.lam, counts=summary["source_counts"], prior=xs.aligned_prior)
            out[lang] = _table(both, lang, ["aligned-claims", "freedict"], xs, en_vocab)
        else:
            out[lang] = _table(table, lang, ["aligned-claims"], xs, en_vocab)
    return out


def _format_table(res: LtrExperimentResult) -> str:
    langs = [k for k in next(iter(res.rows.values())) if k != "all"]
    head = f"| row | MRR | S@1 | S@10 | nDCG | R@100 | {' | '.join(f'MRR {lang}' for lang in langs)}" + \
        f"{' | ' if langs else ''}p (MRR vs {res.best_single}) |"
    lines = [head, "|" + "---|" * (7 + len(langs))]  # row, 5 measures, per-language MRR, p
    for row, v in res.rows.items():
        a = v["all"]
        p = res.p_values.get(row)
        cells = [row, f"{a['mrr']:.3f}", f"{a['success@1']:.2f}", f"{a['success@10']:.2f}", f"{a['ndcg']:.3f}",
                 f"{a['recall@100']:.2f}", *[f"{v[lang]['mrr']:.3f}" for lang in langs],
                 "best single" if row == res.best_single else (f"{p:.4f}" if p is not None else "")]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def format_report(res: LtrExperimentResult) -> str:
    how = (f"{res.settings['folds']}-fold cross-fitting" if res.settings["protocol"] == "folds"
           else "fixed split (train / dev / test)")
    lines = [f"# LTR combination, task {res.task}: {res.topics} topics, {how}",
             "", _format_table(res), ""]
    lines.append("Mean scoring time per topic over all indexed documents (ms): "
                 + ", ".join(f"{k} {v:.1f}" for k, v in res.timing_ms.items()))
    lines.append("Seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in res.seconds.items()))
    lines.append("")
    lines.append("Per round (folds: dev = the next fold's task topics; fixed: the split's dev task topics):")
    for f in res.folds:
        lines.append(f"- {f['round']}: wordpair l1={f['wordpair']['l1']:g}, epoch {f['wordpair']['best_epoch']}, "
                     f"{f['wordpair']['nnz']} non-zero weights, dev ndcg {f['wordpair']['dev_ndcg']:.3f}; "
                     f"domain dev ndcg {f['domain']['dev_ndcg']:.3f}; LinLearn "
                     + ", ".join(f"{k} {w:+.3f}" for k, w in f['linlearn']['all'].items())
                     + "; Borda kappa " + ", ".join(f"{k} {v['kappa']:.2f}" for k, v in f['borda'].items()))
    lines.extend(f"note: {n}" for n in res.notes)
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------------
# the experiment
# --------------------------------------------------------------------------------------------------


@dataclass
class _Round:
    """One train/dev/test assignment: a cross-fitting fold, or the fixed split."""

    name: str
    split: Split
    test: set[str]  # task documents whose topics are evaluated in this round
    dev: set[str]  # task documents whose topics fit Borda / LinLearn


def _rounds(s: LtrExperimentSettings, records: Sequence[PatentRecord], docs: list[str],
            fixed: Split | None) -> list[_Round]:
    if fixed is not None:
        test = {d for d in docs if fixed.part.get(d) == "test"}
        dev = {d for d in docs if fixed.part.get(d) == "dev"}
        if not test or not dev:
            raise ExperimentError(f"the fixed split has {len(test)} test and {len(dev)} dev task documents; "
                                     "need both")
        return [_Round("fixed", fixed, test, dev)]
    if len(docs) < s.folds:
        raise ExperimentError(f"{len(docs)} task documents; need at least {s.folds} (one per fold)")
    fold_of = {d: i % s.folds for i, d in enumerate(docs)}
    base = make_split(doc_info(r) for r in records)
    out = []
    for f in range(s.folds):
        dev_fold = (f + 1) % s.folds
        out.append(_Round(f"fold{f}", fold_split(base, records, fold_of, f, dev_fold),
                          {d for d, g in fold_of.items() if g == f}, {d for d, g in fold_of.items() if g == dev_fold}))
    return out


def run_ltr_experiment(
    data: str | Path | None,
    settings: LtrExperimentSettings | None = None,
    *,
    out_dir: str | Path | None = None,
    records: Sequence[PatentRecord] | None = None,
    progress: bool | None = None,
) -> LtrExperimentResult:
    """Run the experiment (module docstring); with ``out_dir`` write runs, qrels, reports."""
    from training.build import build_index
    from training.ingest import shared_records
    from training.tasks import known_item_task, xling_task

    s = settings or LtrExperimentSettings()
    seconds: dict[str, float] = {}
    notes: list[str] = []
    t0 = time.perf_counter()
    if records is None:
        if data is None:
            raise ExperimentError("give the data folder (--data) or the records")
        records = shared_records(data, progress=progress)
    seconds["ingest"] = time.perf_counter() - t0
    task = xling_task(records) if s.task == "xling" else known_item_task(records, n=s.known_item_n)
    qrels: Qrels = task.qrels
    source = {t.qid: next(iter(qrels[t.qid])) for t in task.topics}
    docs = sorted(set(source.values()))
    bundle = None
    fixed: Split | None = None
    if s.models_dir is not None:
        from service.retrieval.neural import Models

        models = Path(s.models_dir)
        fixed = Split.load(models / ModelsLayout.SPLIT)
        bundle = Models(models, device="auto", verify=True)
        notes.append(f"neural systems from {models}: evaluated on the topics of its split's test part only, "
                     "combination weights fitted on its dev part, word-pair/domain trained on its train part")
    elif s.protocol == "fixed":
        fixed = make_split(doc_info(r) for r in records)
    rounds = _rounds(s, records, docs, fixed)
    evaluated = set().union(*(r.test for r in rounds))
    topics = [t for t in task.topics if source[t.qid] in evaluated]
    qrels = {t.qid: qrels[t.qid] for t in topics}
    systems = ["bm25", "psq"] if s.task == "xling" else ["bm25"]
    systems += ["dense", "text", "meta"] if bundle is not None else []
    systems += ["wordpair", "domain"]

    scores: dict[str, dict[str, np.ndarray]] = {}  # "<round>:<qid>" -> system -> scores over all rows
    timing: dict[str, list[float]] = {name: [] for name in systems}
    round_info: list[dict[str, Any]] = []
    fused: dict[str, dict[str, np.ndarray]] = {}  # row -> qid -> fused scores
    with tempfile.TemporaryDirectory(prefix="ltr-exp-") as tmp:
        t = time.perf_counter()
        index_dir = Path(tmp) / "index"
        fields = ("title", "abstract", "claims", "description") if s.task == "xling" else ("claims", "description")
        # cross-fitted translation comes from the experiment itself: the build makes none (and splits nothing)
        build_index(records, index_dir, index_langs="en", fields=fields, translation=False, compounds="",
                    progress=progress)
        fs = FirstStage.load(index_dir)
        n = len(fs.docs)
        ids = fs.docs.ids
        index_records = [fs.docs.get_row(i) for i in range(n)]
        terms = DocTermStore.from_records(index_records, s.ltr.doc_max_terms)
        domain_store = DomainStore.from_records(index_records, terms)
        all_rows = np.arange(n)
        doc_vectors = _dual_vectors(bundle, index_records) if bundle is not None else None
        seconds["index"] = time.perf_counter() - t
        lexicons: dict[str, Any] = {}
        if "psq" in systems:
            from training.translation.freedict import load_lexicon

            qterms = {lang: {x for tp in task.topics if tp.lang == lang for x in get_analyzer(lang)(tp.text)}
                      for lang in {tp.lang for tp in task.topics if tp.lang}}
            t = time.perf_counter()
            kw: dict[str, Any] = {"dictd_dir": s.dictd_dir} if s.dictd_dir else {}
            lexicons = {lang: load_lexicon(lang, only=q, progress=progress, **kw) for lang, q in qterms.items()}
            seconds["lexicon"] = time.perf_counter() - t
            if any(v is None for v in lexicons.values()):
                notes.append("a FreeDict lexicon is not installed: psq uses the aligned-claims model alone")
        en_vocab = set(fs.indexes["en"].vocab)
        depth = min(n, 1000)  # every document of the corpus, at most 1000 candidates

        for rnd in rounds:
            tf = time.perf_counter()
            ltr = prepare_ltr_data(records, rnd.split, s.ltr)
            held = rnd.test | rnd.dev
            leaked = [q.source for q in (*ltr.train_q, *ltr.dev_q) if q.source in rnd.test]
            leaked += [i for i in ltr.ranking.pool.ids if i in rnd.test]
            leaked += [q.source for q in ltr.train_q if q.source in rnd.dev]
            if leaked:  # a guard on the honesty of the numbers
                raise RuntimeError(f"{rnd.name}: held-out documents in the training data: {sorted(set(leaked))[:5]}")
            wp = train_wordpair(ltr, s.wordpair)
            wp_model: WordPairModel = wp.model()
            dom = train_domain(ltr, s.domain)
            dom_model: DomainModel = dom.model
            stage_psq = None
            if "psq" in systems:
                tables = _psq_tables(records, task.topics, held, en_vocab, s, lexicons)
                stage_psq = FirstStage(fs.meta, fs.docs, fs.indexes, tables, max_query_terms=fs.max_query_terms)
            for tp in task.topics:
                if source[tp.qid] not in held:
                    continue
                lang = tp.lang or "en"
                codes = tp.codes if s.topic_codes else []
                row: dict[str, np.ndarray] = {}
                ts = time.perf_counter()
                row["bm25"] = _scores_array(fs.search(tp.text, lang=lang, k=depth, translate=False).hits, n)
                timing["bm25"].append(time.perf_counter() - ts)
                if stage_psq is not None:
                    ts = time.perf_counter()
                    res = stage_psq.search(tp.text, lang=lang, k=depth, translate=True)
                    if not any(r.kind == "psq" for r in res.info.routes):
                        raise RuntimeError(f"{tp.qid}: psq did not search through a translation table")
                    row["psq"] = _scores_array(res.hits, n)
                    timing["psq"].append(time.perf_counter() - ts)
                if bundle is not None and doc_vectors is not None:
                    ts = time.perf_counter()
                    row["dense"] = (doc_vectors @ bundle.encode_query(tp.text, lang)).astype(np.float64)
                    timing["dense"].append(time.perf_counter() - ts)
                    ts = time.perf_counter()
                    rr = bundle.rerank_records(tp.text, lang, codes, index_records)
                    row["text"], row["meta"] = rr["text"].astype(np.float64), rr["meta"].astype(np.float64)
                    timing["text"].append(time.perf_counter() - ts)  # text + meta rankers together
                ts = time.perf_counter()
                row["wordpair"] = wp_model.score_rows(tp.text, lang, terms, all_rows)
                timing["wordpair"].append(time.perf_counter() - ts)
                ts = time.perf_counter()
                q = make_query_side(tp.qid, None, lang, tp.text, s.ltr, codes=codes)
                row["domain"] = dom_model.score(domain_store.features(q.meta, all_rows))
                timing["domain"].append(time.perf_counter() - ts)
                scores[f"{rnd.name}:{tp.qid}"] = row

            def lists(part: set[str], rnd_name: str) -> list[CandidateList]:
                out = []
                for tp in task.topics:
                    if source[tp.qid] not in part:
                        continue
                    row = scores[f"{rnd_name}:{tp.qid}"]
                    rels = np.asarray([task.qrels[tp.qid].get(i, 0) for i in ids], dtype=np.int64)
                    out.append(CandidateList(tp.qid, list(ids), dict(row), rels,
                                             sum(1 for g in task.qrels[tp.qid].values() if g > 0)))
                return out

            dev_lists, test_lists = lists(rnd.dev, rnd.name), lists(rnd.test, rnd.name)
            info: dict[str, Any] = {
                "round": rnd.name, "test_topics": len(test_lists), "dev_topics": len(dev_lists),
                "split": rnd.split.summary(), "data": ltr.summary(),
                "wordpair": {"l1": wp.l1, "best_epoch": wp.best_epoch, "dev_ndcg": wp.dev_ndcg, "nnz": wp.nnz,
                             "grid": wp.grid, "seconds": wp.seconds},
                "domain": {"best_epoch": dom.best_epoch, "dev_ndcg": dom.dev_ndcg, "seconds": dom.seconds,
                           "weights": {k: float(w) for k, w in zip(dom_model.features, dom_model.weights, strict=True)
                                       if w}},
                "borda": {}, "linlearn": {},
            }
            for a, b in itertools.combinations(systems, 2):
                kappa, val, _ = tune_borda(dev_lists, a, b, step=s.borda_step, measure=s.borda_measure)
                info["borda"][f"{a}+{b}"] = {"kappa": kappa, "dev": val}
                weights = borda_weights(kappa, a, b)
                for c in test_lists:
                    fused.setdefault(f"borda({a}+{b})", {})[c.qid] = fuse("borda", c.scores, weights)
            for name, feats in (("all", systems), ("wordpair+domain", ["wordpair", "domain"])):
                ll = train_linlearn(dev_lists, feats, s.linlearn)
                info["linlearn"][name] = ll.weights
                info["linlearn"][f"{name}_dev"] = ll.dev
                for c in test_lists:
                    fused.setdefault(f"linlearn({name})", {})[c.qid] = fuse("linlearn", c.scores, ll.weights)
            info["seconds"] = time.perf_counter() - tf
            round_info.append(info)
            log.info("%s done in %.1f s", rnd.name, info["seconds"])
        seconds["rounds"] = sum(fi["seconds"] for fi in round_info)

    test_round = {d: r.name for r in rounds for d in r.test}
    runs: dict[str, Run] = {}
    for name in systems:
        runs[name] = {tp.qid: _run_of(scores[f"{test_round[source[tp.qid]]}:{tp.qid}"][name], ids, s.depth)
                      for tp in topics}
    for name, per_q in fused.items():
        runs[name] = {qid: _run_of(v, ids, s.depth) for qid, v in per_q.items()}
    rows: dict[str, dict[str, dict[str, float]]] = {}
    per_query: dict[str, dict[str, float]] = {}
    langs = sorted({tp.lang for tp in topics if tp.lang}) if s.task == "xling" else []
    lang_of = {tp.qid: tp.lang for tp in topics}
    for name, run in runs.items():
        rep = evaluate_run(run, qrels, MEASURES)
        rows[name] = {"all": dict(rep.aggregate)}
        for lang in langs:
            sub = [v for q, v in rep.per_query.items() if lang_of[q] == lang]
            rows[name][lang] = {m: float(np.mean([v[m] for v in sub])) for m in MEASURES}
        per_query[name] = rep.measure("mrr")
    best = max(systems, key=lambda x: rows[x]["all"]["mrr"])
    p_values = {name: randomisation_test(per_query[name], per_query[best], permutations=s.permutations)
                for name in runs if name != best}
    seconds["total"] = time.perf_counter() - t0
    result = LtrExperimentResult(
        settings=_jsonable(asdict(s)), task=s.task, topics=len(topics), systems=systems, rows=rows,
        p_values=p_values, best_single=best, per_query=per_query, folds=_jsonable(round_info),
        timing_ms={k: 1000.0 * float(np.mean(v)) for k, v in timing.items() if v}, seconds=seconds, notes=notes,
    )
    if out_dir is not None:
        out = Path(out_dir)
        for name, run in runs.items():
            write_run(run, out / "runs" / f"{_file_name(name)}.run", tag=_file_name(name))
        write_qrels(qrels, out / "qrels.txt")
        (out / "ltr.json").write_text(json.dumps(result.to_dict(), indent=1, sort_keys=True) + "\n", encoding="utf-8")
        (out / "ltr.md").write_text(format_report(result), encoding="utf-8")
        from training.ltr.orthogonality import orthogonality, write_report

        report = orthogonality({name: runs[name] for name in systems}, qrels, depth=s.depth, k=min(100, s.depth))
        write_report(report, out / "orthogonality", title=f"Orthogonality of single systems, task {s.task}")
    return result


def _file_name(row: str) -> str:
    return row.replace("(", "-").replace(")", "").replace("+", "_")


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_jsonable(v) for v in x]
    if isinstance(x, float) and math.isnan(x):
        return None
    if isinstance(x, np.generic):
        return x.item()
    return x


# --------------------------------------------------------------------------------------------------
# scoring speed
# --------------------------------------------------------------------------------------------------


def bench_scoring(n_docs: int = 5000, candidates: int = 1000, repeats: int = 20, nnz: int = 20_000,
                  seed: int = 0, corpus: str | Path | None = None) -> dict[str, Any]:
    """Query-time cost of the word-pair and domain stages on synthetic patents (ms per query, median).

    ``n_docs`` synthetic records (:mod:`training.synth`) give the document-side stores; a word-pair
    model with ``nnz`` random non-zero weights (speed does not depend on the values); every query is the
    title + abstract of a record (analysed at query time, as in the service) against ``candidates``
    random rows. Also timed: the records path (:meth:`WordPairModel.score`, which analyses each record).
    With ``corpus`` (a JSONL corpus) its records are used instead of synthetic ones; when it has fewer
    than ``candidates`` records, candidate rows are drawn with replacement.
    """
    from service.retrieval.domain import query_meta
    from service.retrieval.wordpair import DEFAULT_BITS
    from training.synth import generate

    rng = np.random.default_rng(seed)
    t = time.perf_counter()
    if corpus is not None:
        from service.corpus.jsonl import read_corpus

        records = list(read_corpus(corpus))
        n_docs = len(records)
    else:
        records = list(generate(n_docs, seed=seed))
    terms = DocTermStore.from_records(records)
    store = DomainStore.from_records(records, terms)
    build_s = time.perf_counter() - t
    w = np.zeros(1 << DEFAULT_BITS, dtype=np.float32)
    w[rng.choice(len(w), nnz, replace=False)] = rng.normal(size=nnz)
    model = WordPairModel.from_dense(w, {})
    dom = DomainModel(list(FEATURES_ALL), np.zeros(len(FEATURES_ALL)), np.ones(len(FEATURES_ALL)),
                      rng.normal(size=len(FEATURES_ALL)))
    k = candidates if corpus is not None else min(candidates, n_docs)
    out: dict[str, list[float]] = {"wordpair_rows": [], "domain_rows": [], "wordpair_records": []}
    entries = []
    for i in range(repeats):
        rec = records[int(rng.integers(n_docs))]
        lang = rec.languages[0] if rec.languages else "en"
        text = rec.text(lang, ("title", "abstract"))
        rows = rng.choice(n_docs, k, replace=k > n_docs)
        t = time.perf_counter()
        model.score_rows(text, lang, terms, rows)
        out["wordpair_rows"].append(time.perf_counter() - t)
        entries.append(int(terms.indptr[rows + 1].sum() - terms.indptr[rows].sum()))
        t = time.perf_counter()
        dom.score(store.features(query_meta(text, lang, codes=record_codes(rec)), rows))
        out["domain_rows"].append(time.perf_counter() - t)
        if i < 3:  # the slow path, a few times
            t = time.perf_counter()
            model.score(text, lang, [records[int(r)] for r in rows])
            out["wordpair_records"].append(time.perf_counter() - t)
    return {"corpus": str(corpus) if corpus else "synthetic", "docs": n_docs, "candidates": k, "repeats": repeats,
            "nnz": nnz, "store_build_s": build_s,
            "doc_terms_per_candidate": float(np.mean(entries)) / k,
            **{f"{name}_ms_median": 1000.0 * float(np.median(v)) for name, v in out.items()}}


def _dual_vectors(models: Any, records: Sequence[PatentRecord], batch: int = 256) -> np.ndarray:
    """Dual-encoder vectors of every record (float32 [n, dim])."""
    parts = [models.encode_documents(records[i:i + batch])["dual"] for i in range(0, len(records), batch)]
    return np.concatenate(parts) if parts else np.zeros((0, models.dim), dtype=np.float32)
