"""Passage evidence in the document ranking of ``/search``, on the hard real tasks (``priorart-lab experiment
ranking``).

``/search`` orders its first ``N`` documents with their best passage, ranked in context as ``/passages`` ranks them
(``SearchRequest.evidence_docs`` and ``evidence_weight`` w: by ``(1 - w) * fused + w * best passage``;
:class:`service.stages.evidence.EvidenceStep`); below ``N`` the fused order stands. This experiment runs the same
requests in the fused order (``fusion``: BM25 + PSQ on an index without models) and with every ``N`` of ``values``
and w of ``weights`` (a system ``N=<n> w=<w>`` each), through :class:`service.engine.Engine` (the API's path), and
ranks the first ``learned_docs`` documents of the fused order by learned rankers (:mod:`training.ranker`, a system
``learned <kind>`` each, on the features an installed ranker reads; ``learned <kind> with <extra>`` adds an extra
feature group, measured, never chosen), each learned cross-fitted on the topics' evidence
(:func:`training.ranker.first_evidence`). Its indexes hold no ranker (``ranker="none"``). Tasks:

* ``claims`` -- every claim of a grant in ``S`` against the grant holding only ``T`` text, six directions (the
  relevant document is the grant);
* ``titles`` -- the grant's title in ``S`` against the grant holding only ``T`` text (a short query);
* ``own language`` -- the grant's first claim in ``T`` against the grant holding ``T`` text (known item in the
  query's language: the ceiling task, where nothing may be lost);
* ``main group`` -- an English first claim against the other documents of its first code's main group (the feedback
  experiment's task, :func:`lab.experiments.feedback.feedback_topics`; several relevant documents, the topic's
  own document removed from every ranking), on fold 0's English index: topical similarity of whole documents, where
  one well-matching passage is weak evidence;
* ``synthetic`` -- prior-art topics of a synthetic corpus (:func:`synthetic_engine`).

The grant tasks run on the held-out indexes of the cross-lingual experiments
(:func:`lab.experiments.xling_passages.fold_engines`: per fold and target language, the fold's trilingual grants
hold only their target text, and no table or compound list saw them). Reference signs are stripped from the claims.
Rankings are of publications (``collapse_families`` off), the top ``depth``. Measures per topic from
:func:`training.evaluation.measures.evaluate_run`: MRR, nDCG, recall@100, S@1.

The system chosen held out (row ``cross-fitted``): the topics' folds are their grants' (other tasks: topic ``i`` in
fold ``i % folds``); for each fold, a system is chosen on the other folds (:func:`_choose`: the largest mean MRR gain
over the tasks among the systems under which no task's MRR or nDCG is significantly below the fused order's) and
that fold's topics are measured with it. ``install``: the system the same choice picks on every topic, when the
cross-fitted figures pass the fusion's install rule (:func:`_install`: some task significantly better, none
significantly worse): a rule sets the server's default (``Settings.evidence_docs``, ``evidence_weight``), a learned
system is learned again on every topic and written by ``--ranker-out`` (training/rankers/default, which ``priorart
build`` installs).

p-values: the paired randomisation test on per-*group* means (a grant for the grant tasks, the topic otherwise), so
that the many claims of one grant count as one unit. Latency: each system's ``/search`` times (ms, median and p99)
on the same queries, in the same process.

With ``models`` (``--models``) the indexes also have neural models: per fold, :func:`trained_models` trains them
(``priorart train``) on every record but the fold's grants and their families (and, for fold 0, whose English index
the main group runs on, the main group's topic documents; for the synthetic corpus its topic documents), and
:func:`with_models` adds them to copies of the fold's indexes (``<work>/with-models``). No fusion is learned, so the
fused order is BM25 + PSQ's, with the dense search's other hits after BM25's matches (BM25 score 0). Every ranker is
scored for every query (``Query.every_component``; meta and joint on the codes the first documents predict), and each
learned ranker is also learned ``with models``: the dense cosine and the text, meta and joint scores as features
(:data:`service.ranker.MODEL_FEATURES`), measured, never chosen (the default build has no models).

Nothing else is learned: the passage parameters are the service's defaults (``mu_translated``, ``rho`` and
``beta_translated`` were chosen cross-fitted on the claim task of these grants, docs/RESULTS.md, so ``claims`` is not
a clean held-out figure for them; the other tasks had no part in that choice).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from collections.abc import Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from tqdm import tqdm

from lab.experiments import ExperimentError
from lab.experiments.output import commit, write_result
from lab.experiments.xling import first_claim, trilingual_grants
from lab.experiments.xling_passages import DIRECTIONS, claim_topics, fold_engines
from service.corpus.record import PatentRecord, family_key
from service.index.folder import Layout
from service.kernel_pooling import KERNEL_FEATURES, reads_kernels
from service.ranker import CODE_EMBEDDING, FEATURES, RANKER_KINDS
from training.evaluation.measures import evaluate_run
from training.evaluation.significance import format_p, randomisation_test
from training.fusion import ALPHA
from training.ranker import (
    ABLATED_FEATURES,
    EXTRA_FEATURES,
    RANKER_DOCS,
    RANKER_FEATURES,
    TopicEvidence,
    first_evidence,
    grades_of,
    learn,
    ranker_part,
    ranking,
    scores,
    write_ranker,
)

if TYPE_CHECKING:
    from service.code_vectors import CodeVectors
    from service.engine import Engine
    from service.query import Query
    from service.text.word_vectors import WordVectors
    from training.models.train import TrainConfig

TASKS = ("claims", "titles", "own language", "main group", "synthetic")
MEASURES = ("mrr", "ndcg", "recall@100", "success@1")
FUSION = "fusion"
CROSS_FITTED = "cross-fitted"
LEARNED = "learned"  # the systems "learned gbm", "learned mlp": the first documents ordered by a learned ranker
EVIDENCE = "evidence features"  # (latency: the pipeline, the first documents' passages and their features)
FEEDBACK = "feedback search"  # (latency: the feedback feature's search, part of the evidence features')
KERNELS = "kernel features"  # (latency: the kernel features, part of the evidence features')
SCHEME = "scheme.tsv.gz"  # the synthetic corpus' classification (training.synth: CPC title-list format)
KNRM = "knrm"  # the text model alone: kernel pooling and a network on pairs (issue 33 item 4), never installed


@dataclass
class RankingSettings:
    folds: int = 5
    depth: int = 100  # documents per ranking
    folders: str = "all"  # the shared data's folders read (training.ingest.shared_records: all = patents, marec, ops)
    tasks: tuple[str, ...] = TASKS
    values: tuple[int, ...] = (10, 50, 1000)  # evidence_docs run
    weights: tuple[float, ...] = (0.25, 0.5, 1.0)  # evidence_weight run (a system "N=<value> w=<weight>" each)
    max_claims: int = 0  # claims per grant and direction (0: all; tests use a few)
    synthetic: int = 20_000  # documents of the synthetic corpus (task "synthetic")
    synthetic_topics: int = 600
    min_relevant: int = 1  # main group: topics with at least this many other documents in the group (feedback uses 3:
    # it marks one and needs more; a ranking needs one, and the more topics the surer the "no task loses" check)
    learned: tuple[str, ...] = ("gbm", "mlp")  # learned rankers over the first documents' evidence (training/ranker.py)
    learned_docs: int = RANKER_DOCS  # the first documents they order
    extra: tuple[str, ...] = tuple(e for e in EXTRA_FEATURES if e != "models")  # each learned ranker also learned
    # with each of these features (measured, not installed: training/ranker.py EXTRA_FEATURES)
    models: bool = False  # the indexes get neural models trained without the topics (trained_models), and the learned
    # rankers are also learned with their scores (the extra "models")
    doc_maps: str | None = None  # a folder of per-fold document maps (experiment adapter --maps-out: fold-N.npz, and
    # all.npz for the synthetic corpus) the indexes are built with; None: the frozen encoder

    def __post_init__(self) -> None:
        if self.folds < 2:
            raise ExperimentError(f"folds must be >= 2 (the grants are held out fold by fold), got {self.folds}")
        if self.depth < 10:
            raise ExperimentError(f"depth must be >= 10, got {self.depth}")
        if not self.values or any(v < 1 for v in self.values):
            raise ExperimentError(f"values of evidence_docs must be >= 1, got {self.values}")
        if not self.weights or any(not 0 < w <= 1 for w in self.weights):
            raise ExperimentError(f"evidence weights must be in (0, 1], got {self.weights}")
        bad = [t for t in self.tasks if t not in TASKS]
        if bad:
            raise ExperimentError(f"unknown task(s) {bad}; valid: {', '.join(TASKS)}")
        bad = [k for k in self.learned if k not in RANKER_KINDS]
        if bad:
            raise ExperimentError(f"unknown learned ranker(s) {bad}; valid: {', '.join(RANKER_KINDS)}")
        if self.learned and self.learned_docs < 2:
            raise ExperimentError(f"learned rankers order at least 2 documents, got {self.learned_docs}")
        bad = [f for f in self.extra if f not in EXTRA_FEATURES]
        if bad:
            raise ExperimentError(f"unknown extra feature(s) {bad}; valid: {', '.join(EXTRA_FEATURES)}")
        if "models" in self.extra and not self.models:
            raise ExperimentError("the extra features 'models' are the neural components' scores: they need indexes "
                                  "with models (models=True, --models)")
        if self.models and "models" not in self.extra:
            self.extra = (*self.extra, "models")
        if self.doc_maps is not None:
            want = [f"fold-{f}.npz" for f in range(self.folds)]  # (all.npz: asked for where the synthetic index is
            # built)
            lacking = [w for w in want if not (Path(self.doc_maps) / w).is_file()]
            if lacking:
                raise ExperimentError(f"{self.doc_maps}: no {', '.join(lacking)} (`priorart-lab experiment adapter "
                                      "--maps-out` writes them)")


@dataclass
class RankTopic:
    qid: str
    task: str
    part: str  # direction (de-en) or query language
    group: str  # the unit of the significance test: the grant, or the topic itself
    fold: int  # the held-out fold (cross-fitting of the system)
    lang: str
    text: str
    qrels: dict[str, int]  # relevant documents and their grades
    own: str | None = None  # removed from the ranking (main group: the topic's own document)
    before: date | None = None  # only documents published before (synthetic: the topic document's date)


@dataclass
class RankingResult:
    settings: dict[str, Any]
    rows: dict[str, dict[str, dict[str, dict[str, float]]]]  # task -> part (or "all") -> system -> measure -> mean
    p_values: dict[str, dict[str, dict[str, dict[str, float]]]]  # task -> part -> system -> measure -> p vs fusion
    chosen: list[str]  # cross-fitted: the system chosen per fold (fusion: the fused order)
    install: str  # the system installed: the choice on every topic, when the cross-fitted figures pass the rule
    install_reason: str
    topics: dict[str, dict[str, int]]  # task -> part -> topics
    groups: dict[str, dict[str, int]]  # task -> part -> groups (units of the test)
    latency_ms: dict[str, dict[str, float]]  # system -> p50 / p99 / mean (ms)
    per_query: dict[str, dict[str, dict[str, float]]] = field(repr=False)  # system -> qid -> measure
    skipped: int = 0  # topics the engine refused (no index term)
    seconds: dict[str, float] = field(default_factory=dict)
    commit: str | None = None
    ranker: dict[str, Any] | None = None  # the learned ranker written (--ranker-out), when one was installed

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def grant_topics(held: Sequence[PatentRecord], fold: int, tgt: str, tasks: Sequence[str],
                 max_claims: int = 0) -> list[RankTopic]:
    """The grant tasks' topics of one held-out index (fold ``fold``'s grants hold only their ``tgt`` text)."""
    from training.tasks import strip_reference_signs

    out: list[RankTopic] = []
    for g in held:
        rel = {g.id: 1}
        for src, dst in DIRECTIONS:
            if dst != tgt:
                continue
            if "claims" in tasks:
                out += [RankTopic(f"claims:{t.qid}", "claims", f"{src}-{dst}", g.id, fold, src, t.text, rel)
                        for t in claim_topics(g, src, dst, max_claims=max_claims)]
            title = (g.title.get(src) or "").strip()
            if "titles" in tasks and title:
                out.append(RankTopic(f"titles:{g.id}-{src}-{dst}", "titles", f"{src}-{dst}", g.id, fold, src,
                                     title, rel))
        if "own language" in tasks and g.claims.get(tgt):
            text = strip_reference_signs(first_claim(g, tgt))
            if text.strip():
                out.append(RankTopic(f"own:{g.id}-{tgt}", "own language", tgt, g.id, fold, tgt, text, rel))
    return out


def group_topics(records: Sequence[PatentRecord], min_relevant: int, folds: int) -> list[RankTopic]:
    """The ``main group`` task's topics (:func:`lab.experiments.feedback.feedback_topics`), topic ``i`` in fold
    ``i % folds``."""
    from lab.experiments.feedback import feedback_topics
    from training.tasks import strip_reference_signs

    out: list[RankTopic] = []
    for rec, rel in feedback_topics(records, min_relevant):
        text = strip_reference_signs(first_claim(rec, "en"))
        if text.strip():
            out.append(RankTopic(f"group:{rec.id}", "main group", "en", rec.id, len(out) % folds, "en", text,
                                 dict.fromkeys(rel, 1), rec.id))
    return out


def synthetic_engine(work: Path, s: RankingSettings, progress: bool | None) -> tuple[Engine, list[RankTopic]]:
    """The ``synthetic`` task: a corpus of ``s.synthetic`` synthetic patents (``priorart synth``), its index (the plain
    build: BM25 en/de/fr, translation tables of every direction, passages; kept in ``work/synthetic-N``), and
    ``s.synthetic_topics`` prior-art topics (:func:`training.synth.synth_topics`: English title and abstract, or a
    German/French title and first claim; relevant the documents the topic document cites, X grade 2, Y and A 1; only
    documents published before it; the topic document removed), topic ``i`` in fold ``i % folds``. The corpus' own
    classification (``scheme.tsv.gz``, in the CPC title-list format) gives the index its code classifier and the
    models their code graph."""
    from service.corpus.jsonl import read_corpus
    from service.engine import Engine
    from service.settings import Settings
    from training.build import build_index
    from training.synth import SynthConfig, synth_topics, write_synthetic

    folder = work / f"synthetic-{s.synthetic}"
    corpus, index, scheme = folder / "corpus.jsonl", folder / "index", folder / SCHEME
    if not corpus.is_file() or not scheme.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        write_synthetic(corpus, SynthConfig(n=s.synthetic, seed=0), scheme_path=scheme, progress=progress)
    if not (index / "meta.json").is_file():
        build_index(corpus, index, overwrite=True, progress=progress, ranker="none", cpc=scheme,
                    doc_maps=None if s.doc_maps is None else Path(s.doc_maps) / "all.npz")
    topics, qrels = synth_topics(read_corpus(corpus), s.synthetic_topics, seed=0)
    out = [RankTopic(f"synthetic:{t['qid']}", "synthetic", t["lang"], t["qid"], i % s.folds, t["lang"], t["text"],
                     dict(qrels[t["qid"]]), t["source_id"], date.fromisoformat(t["before"]))
           for i, t in enumerate(topics)]
    return Engine.load(index, settings=Settings(index_dir=index), verify=False), out


def run_ranking(
    data: str | Path,
    settings: RankingSettings | None = None,
    *,
    records: Sequence[PatentRecord] | None = None,
    out: str | Path | None = None,
    work: str | Path | None = None,
    progress: bool | None = None,
    command: str | None = None,
    ranker_out: str | Path | None = None,
    train_config: TrainConfig | None = None,
) -> RankingResult:
    """Run the experiment (module docstring); ``work``: keep the held-out indexes there (shared with ``priorart
    experiment xling-passages --work``); ``out``: write the result JSON there; ``ranker_out``: when the system
    installed is a learned ranker, write it there, learned on every topic (the folder ``priorart build --ranker``
    reads; the project's default is :data:`training.ranker.DEFAULT_RANKER`); ``train_config``: how the models of
    ``settings.models`` are trained (None: ``priorart train``'s defaults)."""
    from service.query import QueryError
    from service.schema import SearchRequest
    from training.ingest import shared_records

    s = settings or RankingSettings()
    t0 = time.perf_counter()
    systems = {FUSION: (0, 1.0), **{f"N={v} w={w:g}": (v, w) for v in s.values for w in s.weights}}
    learners = learned_systems(s)  # name -> (kind, features)
    learned = list(learners)
    eligible = [*systems, *(name for name in learned if " with" not in name and name != KNRM)]  # what may be
    # chosen and installed: not the extras, the ablations, nor the text model alone
    ranked: dict[str, dict[str, list[str]]] = {name: {} for name in [*systems, *learned]}  # system -> qid -> ids
    ms: dict[str, list[float]] = {name: [] for name in [*systems, EVIDENCE, FEEDBACK, KERNELS]}
    evidence: dict[str, TopicEvidence] = {}
    topics: list[RankTopic] = []
    skipped = 0
    t_run = 0.0

    def query(engine: Engine, topic: RankTopic) -> Query:
        """The topic's query, resolved, its own document (when it has one in the index) left out of every search: a
        real query's own application is never among the documents searched, nor its codes among their votes."""
        from service.query import resolve

        q = engine.query(SearchRequest(query=topic.text, lang=topic.lang, k=s.depth, before=topic.before,
                                       collapse_families=False))
        q.explain = False
        q.every_component = s.models  # (the rankers' scores are features, whatever the fusion weighs)
        resolve(q, engine.docs)
        own = engine.row(topic.own) if topic.own else None
        if own is not None:
            mask = q.r.allowed(len(engine.docs)).copy()
            mask[own] = False
            q.r.mask = mask
        return q

    def run(engine: Engine, todo: list[RankTopic], desc: str) -> None:
        nonlocal skipped, t_run
        vectors = (word_vectors(engine, work is not None, progress)
                   if any(reads_kernels(features) for _, features in learners.values()) else None)
        if vectors is not None:
            engine.evidence.use_word_vectors(vectors)
        if any(CODE_EMBEDDING in features for _, features in learners.values()):
            engine.evidence.use_code_vectors(code_vectors(engine))
        t_start = time.perf_counter()
        for topic in tqdm(todo, desc=desc, file=sys.stderr, leave=False,
                          disable=None if progress is None else not progress):
            try:
                for name, (n, w) in systems.items():
                    started = time.perf_counter()
                    q = query(engine, topic)
                    q.evidence_docs, q.evidence_weight = n, w
                    res = engine.run(q)
                    ms[name].append((time.perf_counter() - started) * 1000.0)
                    ranked[name][topic.qid] = [h.id for h in res.results][: s.depth]
                if learned:
                    started = time.perf_counter()
                    cands, ev = first_evidence(engine, query(engine, topic), s.learned_docs)
                    ms[EVIDENCE].append((time.perf_counter() - started) * 1000.0)
                    ms[FEEDBACK].append(ev.feedback_ms if ev is not None else 0.0)
                    ms[KERNELS].append(ev.kernels_ms if ev is not None else 0.0)
                    ids = [engine.docs.ids[int(r)] for r in cands.rows[: s.depth]]
                    n = 0 if ev is None else len(ev.X)
                    evidence[topic.qid] = TopicEvidence(
                        topic.qid, ids[:n], ev.X if ev is not None else np.zeros((0, 0)),
                        grades_of(ids[:n], topic.qrels), ids[n:])
            except QueryError:
                skipped += 1
                continue
            topics.append(topic)
        t_run += time.perf_counter() - t_start

    tmp = tempfile.TemporaryDirectory(prefix="priorart-ranking-")
    scratch = Path(work) if work is not None else Path(tmp.name)
    try:
        grant_tasks = [t for t in s.tasks if t != "synthetic"]
        if grant_tasks:
            if records is None:
                records = shared_records(data, progress=progress, folders=s.folders)
            grants = trilingual_grants(records)
            if len(grants) < s.folds:
                raise ExperimentError(f"{len(grants)} trilingual EP grants found; need at least {s.folds} (one per "
                                      "fold)")
            group_todo = group_topics(records, s.min_relevant, s.folds) if "main group" in grant_tasks else []
            for fold, tgt, held, engine in fold_engines(records, grants, s.folds, ("de", "en", "fr"), work=work,
                                                        doc_maps=s.doc_maps,
                                                        progress=progress):
                todo = grant_topics(held, fold, tgt, grant_tasks, s.max_claims)
                if fold == 0 and tgt == "en":
                    todo += group_todo
                if not s.models:
                    run(engine, todo, f"fold {fold} {tgt}")
                    continue
                # the fold's models never see its grants, nor (fold 0, whose English index the main group runs
                # on) the main group's topic documents
                own = {g.id for g in held} | ({t.own for t in group_todo if t.own} if fold == 0 else set())
                models = trained_models(scratch / "with-models" / f"models-{fold}", records,
                                        {family_key(r) for r in records if r.id in own}, progress, train_config)
                with with_models(engine, models, scratch / "with-models", progress) as modelled:
                    run(modelled, todo, f"fold {fold} {tgt} with models")
        if "synthetic" in s.tasks:
            engine, todo = synthetic_engine(scratch, s, progress)
            try:
                if not s.models:
                    run(engine, todo, f"synthetic {s.synthetic}")
                else:
                    from service.corpus.jsonl import read_corpus

                    corpus = engine.index_dir.parent / "corpus.jsonl"
                    own = {t.own for t in todo if t.own}
                    models = trained_models(engine.index_dir.parent / "models", read_corpus(corpus),
                                            {family_key(r) for r in read_corpus(corpus) if r.id in own}, progress,
                                            train_config, engine.index_dir.parent / SCHEME)
                    with with_models(engine, models, engine.index_dir.parent / "with-models", progress) as modelled:
                        run(modelled, todo, f"synthetic {s.synthetic} with models")
            finally:
                engine.close()
    finally:
        tmp.cleanup()
    if not topics:
        raise ExperimentError("no topic was run (every query was refused)")
    t_learn = time.perf_counter()
    weights = _weights(topics)
    for t in topics:
        if t.qid in evidence:
            evidence[t.qid].weight = weights[t.qid]
    for name, (kind, features) in learners.items():  # cross-fitted: each fold ranked by the other folds' model
        for f in range(s.folds):
            train = [evidence[t.qid].only(features) for t in topics if t.fold != f and t.qid in evidence]
            model = learn(kind, train)
            for t in topics:
                if t.fold == f and t.qid in evidence:
                    e = evidence[t.qid].only(features)
                    ranked[name][t.qid] = ranking(e, scores(kind, model, e.X) if len(e.ids) else np.zeros(0))
    t_learn = time.perf_counter() - t_learn
    names = [*systems, *learned]
    per_query = {name: _measures(topics, ranked[name]) for name in names}
    chosen = [_choose(per_query, [t for t in topics if t.fold != f], eligible) for f in range(s.folds)]
    per_query[CROSS_FITTED] = {t.qid: per_query[chosen[t.fold]][t.qid] for t in topics}
    install, reason = _install(per_query, topics, _choose(per_query, topics, eligible), s.tasks)
    rows: dict[str, dict[str, dict[str, dict[str, float]]]] = {}
    p_values: dict[str, dict[str, dict[str, dict[str, float]]]] = {}
    counts: dict[str, dict[str, int]] = {}
    groups: dict[str, dict[str, int]] = {}
    for task in s.tasks:
        mine = [t for t in topics if t.task == task]
        parts = sorted({t.part for t in mine}, key=_part_order)
        for part in [*parts, "all"] if len(parts) > 1 else parts:
            sel = [t for t in mine if part in ("all", t.part)]
            counts.setdefault(task, {})[part] = len(sel)
            groups.setdefault(task, {})[part] = len({t.group for t in sel})
            rows.setdefault(task, {})[part] = {name: {m: _mean(per_query, name, sel, m) for m in MEASURES}
                                               for name in per_query}
            p_values.setdefault(task, {})[part] = {name: {m: _p(per_query, name, sel, m) for m in MEASURES}
                                                   for name in per_query if name != FUSION}
    latency = {name: {"p50": float(np.percentile(v, 50)), "p99": float(np.percentile(v, 99)),
                      "mean": float(np.mean(v))} for name, v in ms.items() if v}
    for name, (_kind, features) in learners.items():  # the pipeline, the passages, the features (the score: ~0.1 ms)
        spent = (np.asarray(ms[EVIDENCE]) - (0.0 if "feedback" in features else np.asarray(ms[FEEDBACK]))
                 - (0.0 if reads_kernels(features) else np.asarray(ms[KERNELS])))
        latency[name] = {"p50": float(np.percentile(spent, 50)), "p99": float(np.percentile(spent, 99)),
                         "mean": float(np.mean(spent))}
    written: dict[str, Any] | None = None
    if ranker_out is not None and install in learners:  # the winner, learned on every topic
        kind, features = learners[install]
        model = learn(kind, [evidence[t.qid].only(features) for t in topics if t.qid in evidence])
        pooled = {task: parts["all"] if "all" in parts else next(iter(parts.values())) for task, parts in rows.items()}
        summary = {task: {"mrr": by[CROSS_FITTED]["mrr"], "mrr fusion": by[FUSION]["mrr"]}
                   for task, by in pooled.items()}
        report = {"chosen by": command or "priorart-lab experiment ranking", "commit": commit(), "system": install,
                  "why": reason, "held out (cross-fitted MRR per task)": summary, "topics": len(topics)}
        write_ranker(Path(ranker_out), ranker_part(kind, model, docs=s.learned_docs, report=report,
                                                   features=features))
        written = {"folder": str(ranker_out), "kind": kind, "features": list(features), "docs": s.learned_docs}
    result = RankingResult(
        settings=asdict(s), rows=rows, p_values=p_values, chosen=chosen, install=install, install_reason=reason,
        topics=counts,
        groups=groups, latency_ms=latency, per_query=per_query, skipped=skipped,
        seconds={"queries": t_run, "learning": t_learn, "indexes": time.perf_counter() - t0 - t_run - t_learn,
                 "total": time.perf_counter() - t0},
        commit=commit(), ranker=written)
    if out is not None:
        write_result(result.to_dict(), out, command=command)
    return result


def trained_models(folder: Path, records: Iterable[PatentRecord], exclude: Collection[str],
                   progress: bool | None, config: TrainConfig | None = None, cpc: Path | None = None) -> Path:
    """The neural models (:func:`training.models.train.train_models`; ``config``: ``priorart train``'s defaults) of
    ``records`` but those of the families ``exclude`` (:func:`service.corpus.record.family_key`: a held-out grant and
    its application): no text, pair or code of a topic's documents is learned. Kept in ``folder`` and read from there
    again (its ``meta.json`` is written last); ``cpc``: the CPC title list of the code graph (None: ``priorart
    train``'s default)."""
    from service.corpus.jsonl import write_corpus
    from training.models.train import TrainConfig, train_models

    if (folder / "meta.json").is_file():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    corpus = folder.parent / f"{folder.name}.jsonl"
    write_corpus((r for r in records if family_key(r) not in exclude), corpus)
    train_models(corpus, folder, cpc=cpc, config=config or TrainConfig(progress=bool(progress)))
    corpus.unlink()
    return folder


@contextmanager
def with_models(engine: Engine, models: Path, folder: Path, progress: bool | None) -> Iterator[Engine]:
    """An engine on a copy of ``engine``'s index (and its word vectors) in ``folder`` with the neural parts of
    ``models`` added (:func:`training.build.add_models`: dense vectors of every document, the rerankers; no fusion is
    learned, so the fused order stays BM25 + PSQ's); the copy is kept and reused."""
    from service.engine import Engine
    from service.settings import Settings
    from training.build import add_models

    idx = folder / engine.index_dir.name
    if not (idx / "meta.json").is_file() or not (idx / Layout.DENSE).exists():
        if idx.exists():
            shutil.rmtree(idx)
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copytree(engine.index_dir, idx)
        add_models(idx, models, progress=progress)
    vectors = engine.index_dir.parent / f"{engine.index_dir.name}.word-vectors"
    if vectors.is_dir() and not (folder / vectors.name).exists():
        shutil.copytree(vectors, folder / vectors.name)
    out = Engine.load(idx, settings=Settings(index_dir=idx), verify=False)
    try:
        yield out
    finally:
        out.close()


def code_vectors(engine: Engine) -> CodeVectors:
    """Code vectors of the engine's documents (:func:`training.code_vectors.train_code_vectors`: their codes, no
    topic), over the synthetic corpus' own scheme beside its index, else the CPC title list a build reads."""
    from training.code_classifier import cpc_list
    from training.code_vectors import store_codes, train_code_vectors

    own = engine.index_dir.parent / SCHEME
    return train_code_vectors(store_codes(engine.docs), own if own.is_file() else cpc_list())


def word_vectors(engine: Engine, keep: bool, progress: bool | None) -> WordVectors | None:
    """Word vectors of the engine's index (:func:`training.word_vectors.train_word_vectors`: its own passages, no
    topic), kept beside the index folder (``<index>.word-vectors``) when ``keep``, and read from there again; None
    when it has too little text (its kernel features are then 0, as an installed ranker's would not be: it is not
    used there)."""
    from service.text.word_vectors import WordVectors
    from training.word_vectors import TooLittleText, index_word_vectors

    where = engine.index_dir.parent / f"{engine.index_dir.name}.word-vectors"
    if keep and (where / "vectors.npy").is_file():
        return WordVectors.load(where)
    try:
        vectors = index_word_vectors(engine.index_dir, progress=progress)
    except TooLittleText:
        return None
    if keep:
        vectors.save(where)
    return vectors


def _install(per_query: dict[str, dict[str, dict[str, float]]], topics: Sequence[RankTopic], choice: str,
             tasks: Sequence[str]) -> tuple[str, str]:
    """The install rule, on the cross-fitted figures: ``choice`` (the system chosen on every topic) is installed when
    some task's cross-fitted MRR is significantly above the fused order's and no task's MRR or nDCG is significantly
    below; else the fused order, with the reason."""
    by_task = {task: [t for t in topics if t.task == task] for task in tasks}
    by_task = {task: ts for task, ts in by_task.items() if ts}
    worse = [task for task, ts in by_task.items() for m in ("mrr", "ndcg") if _worse(per_query, CROSS_FITTED, ts, m)]
    better = [task for task, ts in by_task.items() if _mean(per_query, CROSS_FITTED, ts, "mrr") >
              _mean(per_query, FUSION, ts, "mrr") and _p(per_query, CROSS_FITTED, ts, "mrr") < ALPHA]
    if choice == FUSION:
        return FUSION, "no system gains on every topic without a task significantly worse"
    if worse:
        return FUSION, f"held out, worse than the fused order on {', '.join(sorted(set(worse)))} (p < {ALPHA})"
    if not better:
        return FUSION, f"held out, no task significantly better than the fused order (p < {ALPHA})"
    return choice, (f"held out, MRR significantly above the fused order on {', '.join(better)} (p < {ALPHA}) and "
                    "no task significantly below")


def _choose(per_query: dict[str, dict[str, dict[str, float]]], topics: Sequence[RankTopic],
            systems: Sequence[str]) -> str:
    """The choice of a system on ``topics``: the largest mean MRR gain over the tasks among the systems under which no
    task's MRR or nDCG is significantly below the fused order's (p < ALPHA, by group, as the fusion's install rule);
    the fused order when none gains."""
    tasks = sorted({t.task for t in topics})
    by_task = {task: [t for t in topics if t.task == task] for task in tasks}
    best, best_gain = FUSION, 0.0
    for name in systems:
        if name == FUSION:
            continue
        if any(_worse(per_query, name, by_task[task], m) for task in tasks for m in ("mrr", "ndcg")):
            continue
        gain = float(np.mean([_mean(per_query, name, ts, "mrr") - _mean(per_query, FUSION, ts, "mrr")
                              for ts in by_task.values()]))
        if gain > best_gain + 1e-12:
            best, best_gain = name, gain
    return best


def learned_systems(s: RankingSettings) -> dict[str, tuple[str, tuple[str, ...]]]:
    """The learned systems of the settings: ``learned <kind>`` on the features an installed ranker reads
    (:data:`training.ranker.RANKER_FEATURES`), ``learned <kind> with <extra>`` with each extra feature group and
    ``learned <kind> without <group>`` without each ablated group (what they add, measured; never chosen nor
    installed), and ``knrm``, the text model alone (a network on the kernel features only, issue 33 item 4); name ->
    (kind, features)."""
    out: dict[str, tuple[str, tuple[str, ...]]] = {}
    if "mlp" in s.learned:
        out[KNRM] = ("mlp", KERNEL_FEATURES)
    for kind in s.learned:
        out[f"{LEARNED} {kind}"] = (kind, RANKER_FEATURES)
        for group, left_out in ABLATED_FEATURES.items():
            out[f"{LEARNED} {kind} without {group}"] = (kind, tuple(f for f in RANKER_FEATURES if f not in left_out))
        for extra in s.extra:
            with_extra = set(RANKER_FEATURES) | set(EXTRA_FEATURES[extra])
            out[f"{LEARNED} {kind} with {extra}"] = (kind, tuple(f for f in FEATURES if f in with_extra))
    return out


def _weights(topics: Sequence[RankTopic]) -> dict[str, float]:
    """Each topic's weight in learning: every task weighs the same, and within a task every group (a grant's topics,
    or one topic) the same, so that the claims of 25 grants do not outweigh everything else."""
    tasks = {t.task for t in topics}
    groups: dict[tuple[str, str], int] = {}
    for t in topics:
        groups[(t.task, t.group)] = groups.get((t.task, t.group), 0) + 1
    per_task = {task: len({g for (tk, g) in groups if tk == task}) for task in tasks}
    scale = len(topics) / len(tasks)
    return {t.qid: scale / (per_task[t.task] * groups[(t.task, t.group)]) for t in topics}


def _mean(per_query: dict[str, dict[str, dict[str, float]]], name: str, topics: Sequence[RankTopic], m: str) -> float:
    return float(np.mean([per_query[name][t.qid][m] for t in topics]))


def _group_means(per_query: dict[str, dict[str, dict[str, float]]], name: str, topics: Sequence[RankTopic],
                 m: str) -> dict[str, float]:
    """Per group (grant, or topic), the mean of measure ``m`` of system ``name`` over its topics."""
    by_group: dict[str, list[float]] = {}
    for t in topics:
        by_group.setdefault(t.group, []).append(per_query[name][t.qid][m])
    return {g: float(np.mean(v)) for g, v in by_group.items()}


def _p(per_query: dict[str, dict[str, dict[str, float]]], name: str, topics: Sequence[RankTopic], m: str) -> float:
    """p of the paired randomisation test of system ``name`` against the fused order, on the group means."""
    return randomisation_test(_group_means(per_query, name, topics, m), _group_means(per_query, FUSION, topics, m))


def _worse(per_query: dict[str, dict[str, dict[str, float]]], name: str, topics: Sequence[RankTopic], m: str) -> bool:
    """Is system ``name`` below the fused order on ``topics`` in measure ``m``, significantly?"""
    return (_mean(per_query, name, topics, m) < _mean(per_query, FUSION, topics, m)
            and _p(per_query, name, topics, m) < ALPHA)


def _part_order(part: str) -> tuple[int, str]:
    """Directions in :data:`DIRECTIONS` order, then query languages, then ``all``."""
    names = [f"{a}-{b}" for a, b in DIRECTIONS]
    return (names.index(part), part) if part in names else (len(names) + (part == "all"), part)


def _system_order(name: str) -> tuple[int, float, float]:
    """The fused order first, then ``N=<n> w=<w>`` by ``n`` and ``w``, the learned rankers, the cross-fitted last."""
    if name == FUSION:
        return (0, 0.0, 0.0)
    if name == CROSS_FITTED:
        return (3, 0.0, 0.0)
    if name == KNRM:
        return (2, -1.0, 0.0)
    if name.startswith(LEARNED):
        if " without " in name:
            return (2, float(RANKER_KINDS.index(name.split()[1])), 0.5)
        extra = name.split(" with ", 1)[1] if " with " in name else ""
        return (2, float(RANKER_KINDS.index(name.split()[1])), float(list(EXTRA_FEATURES).index(extra) + 1
                                                                    if extra else 0))
    n, w = (float(x.split("=", 1)[1]) for x in name.split())
    return (1, n, w)


def _measures(topics: Sequence[RankTopic], ranked: dict[str, list[str]]) -> dict[str, dict[str, float]]:
    """Per topic, :data:`MEASURES` of its ranking (rank order given as descending scores)."""
    run = {t.qid: {doc: float(len(ids) - i) for i, doc in enumerate(ids)}
           for t in topics for ids in [ranked.get(t.qid, [])]}
    qrels = {t.qid: dict(t.qrels) for t in topics}
    report = evaluate_run(run, qrels, MEASURES)
    return {t.qid: dict(report.per_query.get(t.qid, dict.fromkeys(MEASURES, 0.0))) for t in topics}


def format_table(result: RankingResult) -> str:
    """Markdown: per task and part, the fused order against the cross-fitted system (MRR and its gain and p by group,
    nDCG and its p, R@100); then each system's MRR per task (all parts) and latency; the choices and the install."""
    head = ["task", "part", "topics (groups)", "MRR fusion", "MRR cross-fitted", "gain", "p", "nDCG fusion / "
            "cross-fitted", "p", "R@100 fusion / cross-fitted"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    tasks = sorted(result.rows, key=lambda t: (TASKS.index(t) if t in TASKS else len(TASKS), t))
    for task in tasks:
        parts = result.rows[task]
        for part in sorted(parts, key=_part_order):
            by_sys = parts[part]
            f, c = by_sys[FUSION], by_sys[CROSS_FITTED]
            p = result.p_values[task][part][CROSS_FITTED]
            lines.append(f"| {task} | {part} | {result.topics[task][part]} ({result.groups[task][part]}) | "
                         f"{f['mrr']:.3f} | {c['mrr']:.3f} | {c['mrr'] - f['mrr']:+.3f} | {format_p(p['mrr'])} | "
                         f"{f['ndcg']:.3f} / {c['ndcg']:.3f} | {format_p(p['ndcg'])} | "
                         f"{f['recall@100']:.3f} / {c['recall@100']:.3f} |")
    pooled = {task: parts.get("all") or next(iter(parts.values())) for task, parts in result.rows.items()}
    head = ["system (all topics)", *(f"MRR {t}" for t in tasks), "/search ms p50 / p99"]
    lines += ["", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name in sorted(pooled[tasks[0]], key=_system_order):
        lat = result.latency_ms.get(name)
        shown = f"**{name}**" if name == result.install else name
        lines.append(f"| {shown} | " + " | ".join(f"{pooled[t][name]['mrr']:.3f}" for t in tasks)
                     + (f" | {lat['p50']:.1f} / {lat['p99']:.1f} |" if lat else " | – |"))
    lines.append("")
    lines.append(f"Chosen per fold (on the other folds): {', '.join(result.chosen)}; installed: {result.install} "
                 f"({result.install_reason}).")
    if result.skipped:
        lines.append(f"Topics without index terms (not run): {result.skipped}.")
    return "\n".join(lines)
