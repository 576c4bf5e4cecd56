"""The retrieval pipeline, composed in one place (:func:`compose`) from an index folder and the settings.

    resolve   the query once (language, text, query document, codes, filters)  service/stages/resolve.py
      -> bm25     first stage: BM25 + PSQ translation routes + filters      service/stages/first.py
      -> dense    FAISS nearest documents, unioned; dense score of all       service/stages/dense.py   [models/ dense/]
      -> rerank   ONNX rankers: text, meta, joint scores of every candidate  service/stages/rerank.py  [models/ rerank/]
      -> wordpair, domain  learning-to-rank scores                          service/stages/ltr.py     [ltr/]
      -> fusion   weighted combination (linear / borda / linlearn)          service/fusion.py         [fusion.json]
      -> top max(k, n) of the fused order
      -> evidence the first n by the learned ranker or best passage  service/stages/evidence.py [passages/ ranker/]
      -> top k
      -> collapse families grouped (where the query asks)               service/stages/results.py
      -> explain  the matched words of the results shown                 service/stages/results.py

Every stage has ``name``, ``run(query, candidates) -> candidates`` and ``describe()`` (pyterrier
style). Candidates carry one raw score array per component, so each result explains its rank; a
stage that cannot score a component for this query (no codes, no encoder for the language) records
why in ``candidates.skipped`` and the fusion leaves that component out.

The same :class:`Pipeline` object serves the API (:class:`service.engine.Engine`), ``priorart search``,
``priorart evaluate`` (a system is a set of request weights, :data:`SYSTEMS`), the shards' ingress, the watches
and fusion learning:
:meth:`Pipeline.features` runs every scoring stage and returns the whole candidate set with every
component's score, which training/fusion.py consumes (there is no second scorer).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from service.candidates import Candidates, Stage, StageTrace, best_first
from service.fusion import FusionModel, FusionStep
from service.index.components import open_component
from service.index.folder import IndexFolder, IndexFormatError, Layout, ShardSet
from service.index.store import DocStore, UnknownDocumentError
from service.query import Query, QueryError
from service.settings import Settings
from service.stages.evidence import EvidenceStep
from service.stages.resolve import ResolveStep
from service.stages.results import CollapseStep, ExplainStep

if TYPE_CHECKING:
    from service.retrieval.first_stage import FirstStage
    from service.retrieval.resources import IndexResources
    from service.retrieval.sparse import CollectionStats
    from service.shards import Shard, Submit

log = logging.getLogger(__name__)

SYSTEMS: dict[str, dict[str, float] | None] = {
    "fusion": None,  # the index's learned weights
    "bm25": {"bm25": 1.0},
    "dense": {"dense": 1.0},
    "rerank": {"joint": 1.0},
    "rerank-text": {"text": 1.0},
    "rerank-meta": {"meta": 1.0},
}
"""Evaluation systems as request weights over the one pipeline (``rerank``: plain reranking by the joint ranker)."""


@dataclass
class Pipeline:
    """Stages in order, ending with the fusion; the doc store they share and the index's resources (analysis,
    translation tables, routes: what the engine reads for passages); what loading noticed.

    :meth:`run` runs every stage, keeps the top ``query.k`` and, when the query asks to explain, looks up the
    matched terms of those rows (the first stage's ``route_terms`` in the resources' sparse indexes; a sharded
    pipeline's shards send theirs with their candidates)."""

    stages: list[Stage]
    docs: DocStore
    notices: list[str] = field(default_factory=list)
    device: str = "cpu"
    resources: IndexResources | None = None  # None: no local sparse index (a pipeline over remote shards)

    def __post_init__(self) -> None:
        at = [i for i, s in enumerate(self.stages) if isinstance(s, FusionStep)]
        tail = [type(s) for s in self.stages[at[0] + 1:]] if at else None
        begins = bool(self.stages) and isinstance(self.stages[0], ResolveStep)
        if not begins or tail not in ([ExplainStep], [EvidenceStep, CollapseStep, ExplainStep]):
            raise ValueError("a pipeline begins with the query's resolution and ends with the fusion, then the "
                             "evidence and the collapse (but for a shard's), then the explanation")
        self._fusion_at = at[0]
        explain = self.stages[-1]
        assert isinstance(explain, ExplainStep)
        self._explain = explain
        check_stages(self.stages)

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.stages]

    @property
    def fusion(self) -> FusionStep:
        step = self.stages[self._fusion_at]
        assert isinstance(step, FusionStep)
        return step

    @property
    def evidence(self) -> EvidenceStep | None:
        """The stage after the fusion that orders the first documents by their evidence (None: a shard's pipeline,
        whose ingress orders)."""
        step = self.stages[self._fusion_at + 1]
        return step if isinstance(step, EvidenceStep) else None

    @property
    def scoring(self) -> list[Stage]:
        """The stages up to the fusion, itself included: what gives the fused order."""
        return self.stages[:self._fusion_at + 1]

    @property
    def generator(self) -> Stage:
        """The stage after the query's resolution that gives the candidates: ``bm25``, or a sharded index's fan-out
        ``shards``."""
        return self.stages[1]

    @property
    def first_stage(self) -> FirstStage:
        """The first stage (a sharded pipeline's: one shard's)."""
        from service.stages.first import FirstStageStep

        step = self.generator
        fs = step.fs if isinstance(step, FirstStageStep) else getattr(step, "first_stage", None)
        if fs is None:
            raise TypeError(f"the pipeline's first stage {step.name!r} has no first stage")
        return fs

    def stage(self, name: str) -> Stage | None:
        return next((s for s in self.stages if s.name == name), None)

    def _run(self, query: Query, stages: list[Stage]) -> tuple[Candidates, list[StageTrace]]:
        try:
            cands = Candidates.empty()
            trace: list[StageTrace] = []
            for stage in stages:
                if stage is self.fusion:
                    self._filtered_out(query, cands)
                started = time.perf_counter()
                cands = stage.run(query, cands)
                trace.append(StageTrace(stage.name, (time.perf_counter() - started) * 1000.0, len(cands),
                                        cands.details.get(stage.name, {})))
        except UnknownDocumentError as exc:
            raise QueryError(str(exc)) from exc
        return cands, trace

    def run(self, query: Query, *, ran: tuple[Candidates, list[StageTrace]] | None = None,
            ) -> tuple[Candidates, list[StageTrace]]:
        """The order ``/search`` returns: the top ``query.k`` candidates and each stage's trace. The stages up to the
        fusion give the fused order (ties: by document id), whose first ``max(k, n)`` the evidence stage receives,
        ``n`` the documents it orders for this query (:meth:`EvidenceStep.plan`; ``cands.ordered``: the score it
        ordered them by); then the first ``k`` remain, grouped by family where the query collapses, and the shown
        ones' matched words are looked up where it explains. ``/search``, ``priorart search`` and ``evaluate``, the
        claim chart, the experiments, the sharded index's ingress and the watches all rank through here. ``ran``: the
        fused order this query gave already (the candidates and trace of a run with ``evidence_docs`` 0 at the same
        ``k``: the watches' bound), used instead of running the stages again where the evidence needs nothing
        more."""
        evidence = self.evidence
        plan = evidence.plan(query) if evidence is not None else None
        keep = query.k
        query.k = max(keep, min(plan.docs, query.depth)) if plan is not None else keep
        try:
            if ran is not None and not query.every_component and len(ran[0]) <= query.k:
                cands, trace = ran
            else:
                cands, trace = self._run(query, self.scoring)
                self._cut(query, cands)
            for stage in self.stages[self._fusion_at + 1:]:
                started = time.perf_counter()
                cands = stage.run(query, cands)
                detail = cands.details.get(stage.name)
                if detail is not None:  # (a stage that did something for this query: the documents it worked on)
                    trace.append(StageTrace(stage.name, (time.perf_counter() - started) * 1000.0,
                                            detail.get("documents", len(cands)), detail))
                if stage is evidence:
                    cands.take(np.arange(min(keep, len(cands))))
        finally:
            query.k = keep
        return cands, trace

    def _cut(self, query: Query, cands: Candidates) -> None:
        """The fused order's top ``query.k`` (ties: by document id)."""
        assert cands.fused is not None and cands.fusion is not None
        word_match_only = {c for c, w in cands.fusion.weights.items() if w > 0} == {"bm25"}
        if len(cands) and not cands.in_first.any() and word_match_only:
            # ranked by word match alone, and no candidate contains a query term: the dense stage's nearest documents
            # would all tie at one score (min-max of zeros), in row order
            query.note("no document contains a query term, and word match alone ranks this query: the documents "
                       "nearest in meaning are not listed")
            cands.take(np.zeros(0, dtype=np.int64))
        cands.take(best_first(cands.fused, cands.rows, self.docs.ids, query.k))

    def explain(self, cands: Candidates, rows: np.ndarray | None = None) -> int:
        """Look up the matched terms of the first stage's rows among ``rows`` (default: every candidate) that have
        none yet (:meth:`ExplainStep.lookup`: a shard's candidates, sent with them); returns how many."""
        return self._explain.lookup(cands, rows)

    def _filtered_out(self, query: Query, cands: Candidates) -> None:
        """Before the fusion: when the filters leave no document that contains a query term (no candidate of the
        first stage), no candidate is ranked (the dense stage's nearest documents match nothing, and ranked by
        word match they would all tie), and a note says which filter emptied the search: the first stage is run
        again at depth 1 without each filter in turn."""
        r = query.r
        if not r.filter_masks or "bm25" in cands.skipped or bool(cands.in_first.any()):
            return
        if "query" in r.filter_masks:  # the query language's filter decides the set: what passes it is listed
            return
        first = self.generator

        def matches(mask: np.ndarray | None) -> bool:
            probe = replace(query, k=1, depth=1, explain=False, notes=[], resolved=replace(r, mask=mask))
            return bool(first.run(probe, Candidates.empty()).in_first.any())

        names = list(r.filter_masks)
        if not matches(r.mask_without(*names)):
            query.note("no document contains a query term (with or without the filters)")
        else:
            culprits = [n for n in names if matches(r.mask_without(n))] if len(names) > 1 else names
            named = culprits or names
            said = " and ".join(_filter_phrase(r.filters, n) for n in named)
            passing = int(np.logical_and.reduce([r.filter_masks[n] for n in named]).sum())
            count = ("no document passes" if passing == 0 else "1 document passes" if passing == 1
                     else f"{passing} documents pass") + (" that filter" if len(named) == 1 else " those filters")
            without = ("without it" if len(culprits) == 1 else "without either of them" if culprits
                       else "without both")
            query.note(f"filtered out: no document {said} contains a query term ({count}); {without}, documents match")
        cands.take(np.zeros(0, dtype=np.int64))

    def features(self, query: Query) -> Candidates:
        """Every candidate (first stage top depth united with the dense top depth, in that order) with every
        component's raw score and ``skipped`` for the ones that do not apply: what fusion learning reads."""
        query.every_component = True
        cands, _ = self._run(query, self.scoring[:-1])
        return cands

    def describe(self) -> dict[str, Any]:
        return {s.name: s.describe() for s in self.stages}


def _filter_phrase(filters: Mapping[str, Any], name: str) -> str:
    """A filter of the resolved query's ``filters`` in words: 'published before 2000-01-01'."""
    if name == "before":
        return f"published before {filters['before']}"
    if name == "query":
        return f"matching {filters['query']['parsed']}"
    level = str(filters.get("code_level", "subclass")).replace("_", " ")
    return f"sharing a {level} code with {', '.join(filters.get('codes') or [])}"


def check_stages(stages: Sequence[Stage]) -> None:
    """Each stage's ``requires`` provided by the stages before it, each name once, the fusion last; a
    ``ValueError`` that names what is missing and who could provide it."""
    provided: set[str] = set()
    seen: set[str] = set()
    for i, stage in enumerate(stages):
        if stage.name in seen:
            raise ValueError(f"two stages are named {stage.name!r}")
        seen.add(stage.name)
        missing = sorted(set(stage.requires) - provided)
        if missing:
            before = " -> ".join(s.name for s in stages[:i]) or "nothing"
            raise ValueError(f"stage {stage.name!r} requires {', '.join(missing)}, which no stage before it "
                             f"provides ({before})")
        provided |= set(stage.provides)


def compose(index: IndexFolder | ShardSet, settings: Settings, docs: DocStore | None = None, *,
            ltr: Sequence[Stage] | None = None, neural: bool = True,
            stats: Mapping[str, CollectionStats] | None = None, submit: Sequence[Submit] | None = None,
            shard: bool = False) -> Pipeline:
    """The pipeline of an opened index folder or a sharded index (the one place stages are chosen; see the
    module doc).

    ``docs``: the folder's doc store when already open. ``ltr``: word-pair/domain stages to use instead of
    the folder's ``ltr/`` (``priorart train-ltr`` scores its dev topics with the stages it just trained).
    ``neural=False`` leaves the dense and rerank stages out. ``stats``: the global collection statistics per
    language when ``folder`` is a shard. ``shard``: a shard's pipeline, without the evidence and collapse stages
    (the ingress orders and groups the merged candidates). A :class:`ShardSet`: a fan-out stage over ``submit`` (one
    per shard; default: every shard composed in this process with the global statistics, service/shards.py) in
    place of the first stage and the models' stages, then the fusion and the stages after it.
    """
    if isinstance(index, ShardSet):
        return _compose_sharded(index, settings, docs, submit)
    from service.retrieval.dense import DenseIndexError
    from service.retrieval.first_stage import FirstStage
    from service.stages.first import FirstStageStep

    folder = index
    docs = docs if docs is not None else open_component("docstore", folder)
    notices: list[str] = []
    first = FirstStage.from_folder(folder, docs, indexes=open_component("bm25", folder, stats=stats))
    stages: list[Stage] = [ResolveStep(docs, first.resources), FirstStageStep(first)]
    fusion = FusionStep(FusionModel.of_folder(folder))  # (the rerank stage asks it what a query is fused with)
    device = "cpu"
    if folder.pretrained_dense and neural:  # the pretrained encoder's dense stage
        from service.retrieval.pretrained import load_pretrained
        from service.stages.dense import DenseStep

        try:
            encoder = load_pretrained(folder.path(Layout.ENCODER), device=settings.device,
                                      threads=settings.onnx_threads)
            dense = open_component("dense", folder, device=settings.device)
        except (DenseIndexError, ValueError) as exc:  # (ModelsFolderError is a ValueError)
            raise IndexFormatError(str(exc)) from exc
        if encoder.device_warning and settings.device == "cuda":
            notices.append(f"device cuda asked for, but {encoder.device_warning}")
        notices.extend(dense.notes)
        stages.append(DenseStep(encoder, dense, docs, kind="pretrained"))
        device = "cuda" if encoder.on_cuda or dense.device == "cuda" else "cpu"
    elif folder.has("models") and neural:
        from service.retrieval.neural import Models
        from service.stages.dense import DenseStep, DualQueries
        from service.stages.rerank import RerankStep

        models = Models(folder.path(Layout.MODELS), sides=("query",), device=settings.device,
                        threads=settings.onnx_threads)
        if models.device_warning and settings.device == "cuda":
            notices.append(f"device cuda asked for, but {models.device_warning}")
        on_cuda = models.on_cuda
        if folder.has("dense"):
            try:
                dense = open_component("dense", folder, device=settings.device)
            except DenseIndexError as exc:
                raise IndexFormatError(str(exc)) from exc
            notices.extend(dense.notes)
            on_cuda = on_cuda or dense.device == "cuda"
            stages.append(DenseStep(DualQueries(models), dense, docs))
        else:
            notices.append("no dense/ in this index: dense stage skipped (rebuild with --models)")
        if folder.has("rerank"):
            stages.append(RerankStep(models, open_component("rerank", folder), docs, fusion.weights_for))
        else:
            notices.append("no rerank/ document encodings in this index: rerank skipped (rebuild with --models)")
        device = "cuda" if on_cuda else "cpu"
    elif neural:
        notices.append("no dense stage in this index: BM25 only (built with --no-dense)")
    if ltr is not None:
        stages.extend(ltr)
    elif folder.has("ltr"):
        from service.stages.ltr import load_ltr_stages

        stages.extend(load_ltr_stages(folder, docs))
    for profile, pw in fusion.model.linear.items():
        if not pw.installed and folder.has("models"):
            notices.append(f"queries {'with' if profile == 'codes' else 'without'} classification codes are ranked "
                           f"by BM25 alone: {pw.reason}")
    stages.append(fusion)
    if not shard:
        step = EvidenceStep(folder, settings, docs, first.resources, first)
        notices.extend(step.notices)
        stages += [step, CollapseStep(docs)]
    stages.append(ExplainStep(first.resources))
    log.info("pipeline %s on %s", " -> ".join(s.name for s in stages), device)
    return Pipeline(stages, docs, notices, device, first.resources)


def load_shard(shards: ShardSet, number: int, settings: Settings,
               stats: Mapping[str, CollectionStats] | None = None) -> Shard:
    """One shard of a sharded index with its pipeline composed with the global statistics (computed over every
    shard when not given), without learning-to-rank stores (not served from shards)."""
    from service.shards import Shard, global_stats

    folder = shards.shards[number]
    if folder.has("ltr"):
        raise IndexFormatError(f"{folder.root}: learning-to-rank stores (ltr/) are not served from shards")
    stats = stats if stats is not None else global_stats(shards)
    return Shard(number, folder, compose(folder, settings, stats=stats, shard=True))


def _compose_sharded(shards: ShardSet, settings: Settings, docs: DocStore | None,
                     submit: Sequence[Submit] | None) -> Pipeline:
    """A sharded index's pipeline: the fan-out stage over ``submit`` (default: every shard loaded in this process
    with the global statistics), the fusion, and the evidence stage over the whole collection's passages (the
    shards' in turn). The shards' matched terms come with their candidates (the
    fan-out has no sparse index of the whole collection: ``resources`` is one shard's, for the query's analysis
    and translation)."""
    from service.retrieval.first_stage import FirstStage
    from service.shards import ShardFanOut, global_stats, local_submit

    union = shards.union()
    docs = docs if docs is not None else open_component("docstore", union)
    local: list[Shard] = []
    if submit is None:
        stats = global_stats(shards)
        local = [load_shard(shards, i, settings, stats) for i in range(shards.n_shards)]
        submit = [local_submit(s) for s in local]
        shard0 = local[0].pipeline
        assert isinstance(shard0, Pipeline)
        first, notices, device = shard0.first_stage, list(shard0.notices), shard0.device
    else:
        first = FirstStage.from_folder(shards.shards[0], open_component("docstore", shards.shards[0]))
        notices, device = [], "cpu"
    fan = ShardFanOut(submit, [f.n_rows for f in shards.shards], first, timeout_s=settings.shard_timeout_s,
                      generations=[f.generation for f in shards.shards], owned=local)
    # (the evidence stage has no first stage of the whole collection: the features that read one are the shards' to
    # give; the explanation maps the matched terms the shards send)
    evidence = EvidenceStep(union, settings, docs, first.resources, None)
    notices.extend(evidence.notices)
    stages: list[Stage] = [ResolveStep(docs, first.resources), fan, FusionStep(FusionModel.of_folder(shards.shards[0])),
                           evidence, CollapseStep(docs), ExplainStep(first.resources)]
    return Pipeline(stages, docs, notices, device, first.resources)


__all__ = ["SYSTEMS", "Candidates", "Pipeline", "Stage", "StageTrace", "check_stages", "compose", "load_shard"]
