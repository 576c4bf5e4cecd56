"""``evidence``: the stage after the fusion that orders the first documents by their evidence.

The first ``n`` documents of the fused order are ordered by their best passage, ranked in context as ``/passages``
ranks them (service/passages/), or, where the index has a learned ranker (service/ranker.py) and the query does
not ask for the passage rule, by the ranker's score of their evidence features; the fused order breaks ties and
stands below ``n``. How many, and by what, is the query's (``Query.evidence_docs / evidence_weight / evidence_by``,
None: the settings'), read once by :meth:`EvidenceStep.plan` before the pipeline runs, so that the fusion keeps
``max(k, n)`` candidates for it.

The stage owns what the evidence reads from the index: the passage index, the word vectors of its kernel features,
the code classifier, the code vectors and the ranker. The engine's ``/passages``, the claim chart and the watches
rank passages through it too (:meth:`EvidenceStep.rank_passages`, :meth:`EvidenceStep.passages_of`), so a query's
passages are ranked one way everywhere.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from service.candidates import Candidates
from service.index.components import open_component
from service.index.folder import IndexFolder, IndexFormatError, Layout
from service.index.parts import open_part
from service.kernel_pooling import KernelPooling, kernel_pooling, reads_kernels
from service.passages import DEFAULT_PARAMS, PassageIndexMissingError, PassageReader
from service.passages.lm import QueryImage, betas_of, minmax, rho_of
from service.passages.ranker import PassageRanking
from service.query import Query, QueryError
from service.ranker import CODE_EMBEDDING, FEATURES, Evidence, RankerModel, evidence_features, reads_models
from service.schema import DEFAULT_VARIANT, PassageHit, PassageRequest
from service.settings import Settings
from service.text.analysis import SUPPORTED_LANGS

if TYPE_CHECKING:
    from service.code_classifier import CodeClassifier
    from service.code_vectors import CodeVectors
    from service.index.store import DocStore
    from service.retrieval.first_stage import FirstStage
    from service.retrieval.resources import IndexResources
    from service.text.word_vectors import WordVectors


@dataclass(frozen=True)
class Plan:
    """What the evidence stage does to one query: order its first ``docs`` documents (0: nothing, the fused order
    stands) by the ``ranker``'s score (None: by ``(1 - weight) * fused + weight * best passage``)."""

    docs: int
    weight: float
    ranker: RankerModel | None


class EvidenceStep:
    """Orders the first documents of the fused order by their evidence (see the module doc)."""

    name = "evidence"
    requires = frozenset({"fused"})
    provides = frozenset({"evidence"})

    def __init__(self, folder: IndexFolder, settings: Settings, docs: DocStore, resources: IndexResources | None,
                 first_stage: FirstStage | None) -> None:
        """``folder``: the index (a sharded index's union of shards); ``first_stage``: the one whose index the
        features that read it look up (None: a sharded pipeline, whose rows are the shards' together)."""
        self.settings = settings
        self.docs = docs
        self.resources = resources
        self.first_stage = first_stage
        self.notices: list[str] = []
        self.passages: PassageReader | None = None
        self.missing: str | None = None  # why there is no passage index
        try:
            self.passages = open_component("passages", folder)
        except PassageIndexMissingError as exc:  # an index built before passages were indexed: search still works
            self.missing = str(exc)
            self.notices.append(str(exc))
        # the kernel-pooling features over word vectors of the index's terms (service/kernel_pooling.py), when it has
        # them (the index part word_vectors, written with a ranker that reads them; or use_word_vectors)
        self.kernels: KernelPooling | None = kernel_pooling(self.passages, open_part("word_vectors", folder))
        # the codes of a query from the CPC titles (service/code_classifier.py), where the build had the title list
        self.code_classifier: CodeClassifier | None = open_part("code_classifier", folder)
        # vectors of the index's codes (service/code_vectors.py), where a ranker that reads them was installed
        self.code_vectors: CodeVectors | None = open_part("code_vectors", folder)
        # the learned ranker of the first documents, where one won held out and was installed (service/ranker.py)
        self.ranker: RankerModel | None = None
        part = open_part("ranker", folder)
        if part is not None:
            body, where = part
            try:
                self.ranker = RankerModel.of_part(body, where, settings.device)
            except (ValueError, KeyError, OSError) as exc:
                raise IndexFormatError(f"{folder.path(Layout.RANKER_META)}: {exc}") from exc
            if self.kernels is None and reads_kernels(self.ranker.features):
                self.ranker = None  # its trees would read kernel features of 0: the passage rule orders instead
                self.notices.append("the learned ranker reads kernel features of word vectors this index does not "
                                    "have (too little text, or no passages): its first documents are ordered by "
                                    "their best passage; `priorart install-ranker INDEX` trains the vectors")
            elif self.ranker is not None and CODE_EMBEDDING in self.ranker.features and self.code_vectors is None:
                self.ranker = None  # likewise for the code-embedding feature (service/code_vectors.py)
                self.notices.append("the learned ranker reads the code-embedding feature of code vectors this index "
                                    "does not have (its documents hold no code): its first documents are ordered by "
                                    "their best passage; `priorart install-ranker INDEX` learns the vectors")

    def use_word_vectors(self, vectors: WordVectors) -> None:
        """Compute the kernel-pooling features of the first documents (:mod:`service.kernel_pooling`) with
        ``vectors``, word vectors of this index's terms (:func:`training.word_vectors.train_word_vectors`)."""
        self.kernels = kernel_pooling(self.passages, vectors)

    def use_code_vectors(self, vectors: CodeVectors) -> None:
        """Compute the code-embedding feature of the first documents (:mod:`service.code_vectors`) with ``vectors``,
        vectors of this index's codes (:func:`training.code_vectors.train_code_vectors`)."""
        self.code_vectors = vectors

    # ------------------------------------------------------------------ the stage
    def ranker_for(self, evidence_by: str | None) -> RankerModel | None:
        """The learned ranker that orders the first documents (None: their best passage does), for ``evidence_by``
        (None: the settings')."""
        by = evidence_by or self.settings.evidence_by
        if by == "ranker" and self.ranker is None:
            raise QueryError("evidence_by 'ranker': this index has no learned ranker (it was built with --ranker none, "
                             "or before one was written: `priorart install-ranker INDEX` installs one); use "
                             "'passage' or 'auto'")
        return self.ranker if by != "passage" else None

    def plan(self, query: Query) -> Plan:
        """What this stage does to ``query`` (its ``evidence_*``, else the settings'). A request for the ranker in an
        index without one is refused (``QueryError``); an index without passages keeps the fused order, with a note.
        The learned ranker orders the first documents it learned on, and, where its features are the models' scores,
        asks the pipeline for every component (weighed by the fusion or not)."""
        docs = self.settings.evidence_docs if query.evidence_docs is None else query.evidence_docs
        weight = self.settings.evidence_weight if query.evidence_weight is None else query.evidence_weight
        ranker = self.ranker_for(query.evidence_by)
        if docs and self.passages is None:
            query.note("ranked by the fused scores, not by passage evidence: "
                       + (self.missing or "this index has no passage index"))
            docs = 0
        if docs and ranker is not None:
            docs = ranker.docs
            if reads_models(ranker.features):
                query.every_component = True
        return Plan(docs, weight, ranker if docs else None)

    def reach(self, k: int) -> int:
        """How many documents of the fused order can reach a search's top ``k`` at the settings' evidence: ``k``, or
        the first documents that their evidence orders (the learned ranker's ``docs``, else ``evidence_docs``) when
        there are more (the watches' bound)."""
        if self.passages is None or not self.settings.evidence_docs:
            return k
        ranker = self.ranker_for(None)
        return max(k, ranker.docs if ranker is not None else self.settings.evidence_docs)

    def run(self, query: Query, cands: Candidates) -> Candidates:
        """Order the first ``n`` candidates (the pipeline's, best fused first; :meth:`plan`) by their evidence.
        Each one's best passage is ranked in context among theirs at the passage defaults (as ``/passages`` would
        rank them, had it these documents), its score in [0, 1] (0 for a document whose passages hold no query term,
        or that has none in a language the query reaches). With a ranker they are ordered by its score of their
        features; else by ``(1 - weight) * fused + weight * best passage``, the fused score min-max normalised over
        the first documents. The fused order breaks ties and stands below. ``cands.evidence``: the best passage's
        score of the first documents, NaN below (``cands.ranker`` likewise the ranker's, min-max); ``cands.ordered``:
        the score they were ordered by, in their new order, in [0, 1] (the ranker's min-max over them, or the blend).
        All stay None, and the fused order with them, when there is no candidate or the passages cannot read the
        query (a note says why). Nothing where the plan orders no document (``evidence_docs`` 0, no passages). Why
        these defaults: docs/RESULTS.md, 'Passage evidence in /search'."""
        plan = self.plan(query)  # (again: the pipeline read it to keep max(k, n) candidates; the notes are said once)
        if not plan.docs:
            return cands
        n = min(plan.docs, len(cands))
        detail: dict[str, Any] = {"documents": n, "weight": plan.weight}
        cands.details[self.name] = detail
        ranking: PassageRanking | None = None
        if n:
            try:
                ranking, passages, images = self._first_passages(query, cands, n, spread=plan.ranker is not None)
                detail.update(passages, documents=n)
            except QueryError as exc:
                query.note(f"ranked by the fused scores, not by passage evidence: {exc}")
        if ranking is None or ranking.best is None:
            return cands
        if ranking.skipped:
            query.note(f"passage evidence: {ranking.skipped} of the first {n} documents have no text in "
                       f"{', '.join(detail['readable'])}: they come after those that do")
        best = ranking.evidence()[0]
        learned: np.ndarray | None = None
        ranker = plan.ranker
        if ranker is not None:  # the learned ranker's score of each document's evidence
            ev = self._features(query, cands, n, ranking, images, ranker.features)
            learned = ranker.score(ev.X)
            key = learned
            if not cands.predicted_codes:  # (the rerank stage's, where it predicted them, are the ones shown)
                cands.predicted_codes = [code for code, _ in ev.predicted_codes[:3]]
            detail["ranker"] = {"kind": ranker.kind, "features": ranker.features}
        else:
            fused = minmax(cands.fused[:n]) if cands.fused is not None else np.zeros(n)
            key = (1.0 - plan.weight) * fused + plan.weight * best
        order = np.lexsort((np.arange(n), -key))
        ordered = (minmax(learned) if learned is not None else key)[order]
        cands.take(np.concatenate([order, np.arange(n, len(cands))]))
        cands.evidence = np.full(len(cands), np.nan)
        cands.evidence[:n] = best[order]
        if learned is not None:  # (min-max over the n: what the response shows of it)
            cands.ranker = np.full(len(cands), np.nan)
            cands.ranker[:n] = minmax(learned)[order]
        cands.ordered = ordered
        return cands

    def features(self, query: Query, cands: Candidates, n: int) -> Evidence | None:
        """The evidence features of the first ``n`` of ``cands`` (the fused order; :mod:`service.ranker`): what a
        learned ranker orders them by (``None`` when the index has no passages or they cannot read the query, with a
        note)."""
        n = min(n, len(cands))
        if not n or self.passages is None:
            if self.passages is None:
                query.note(self.missing or "this index has no passage index")
            return None
        try:
            ranking, _, images = self._first_passages(query, cands, n, spread=True)
        except QueryError as exc:
            query.note(f"no passage evidence: {exc}")
            return None
        return self._features(query, cands, n, ranking, images, FEATURES)

    def _first_passages(self, query: Query, cands: Candidates, n: int, *,
                        spread: bool) -> tuple[PassageRanking, dict[str, Any], dict[str, QueryImage]]:
        """The passages of the first ``n`` candidates ranked among theirs at the passage defaults, each document's
        best (and, with ``spread``, what the ranker's spread features read): :meth:`rank_passages` of them."""
        head = Candidates(rows=cands.rows[:n], fused=None if cands.fused is None else cands.fused[:n])
        return self.rank_passages(query, head, None, k=1, highlight=False, spread=spread)

    def _features(self, query: Query, cands: Candidates, n: int, ranking: PassageRanking,
                  images: Mapping[str, QueryImage], features: Collection[str]) -> Evidence:
        """The evidence features ``features`` of the first ``n`` candidates, from their passages' ``ranking`` (the
        kernel features computed only where ``features`` reads them; ``kernels_ms`` their time)."""
        best, second = ranking.evidence()
        started = time.perf_counter()
        kernels = (self.kernels.features(images, cands.rows[:n])
                   if self.kernels is not None and reads_kernels(features) else None)
        kernels_ms = (time.perf_counter() - started) * 1000.0
        ev = evidence_features(self.first_stage, self.docs, query, cands, n, best, features, second,
                               ranking.matched, kernels, ranking.field_evidence(), self.classify(images),
                               self.code_vectors)
        ev.kernels_ms = kernels_ms
        return ev

    def classify(self, images: Mapping[str, QueryImage]) -> dict[str, list[tuple[str, float]]] | None:
        """The code classifier's codes per level for a query of these images (its English one: the CPC titles are
        English); None where the index has no classifier or the query does not reach English."""
        if self.code_classifier is None or "en" not in images:
            return None
        return {level: self.code_classifier.predict(images["en"].probs, level) for level in self.code_classifier.levels}

    # ------------------------------------------------------------------ passages
    def passage_index(self) -> PassageReader:
        """The index's passage index; ``QueryError`` when it has none (an index built before passages were indexed)."""
        if self.passages is None:
            raise QueryError(self.missing or "this index has no passage index")
        return self.passages

    def rank_passages(self, query: Query, cands: Candidates, req: PassageRequest | None, *, k: int,
                      highlight: bool = True,
                      spread: bool = False) -> tuple[PassageRanking, dict[str, Any], dict[str, QueryImage]]:
        """The passages of the pipeline's candidates, ranked in context with the request's parameters (``None``: the
        defaults), what the trace says of them (``readable``: the languages the query reaches, for the callers'
        note on the candidates without text in them), and the query's images they were ranked with."""
        passages = self.passage_index()
        given: dict[str, Any] = {name: getattr(req, name, None)
                                 for name in (*DEFAULT_PARAMS, "rho", "beta_translated")}
        params: dict[str, float] = {name: float(given[name]) if given[name] is not None else default
                                    for name, default in DEFAULT_PARAMS.items()}
        lang = query.r.lang
        params["rho"] = rho_of(given["rho"], lang)  # the query language's default unless given
        betas = betas_of(params["beta"], given["beta_translated"], lang)  # per passage language, defaults unless given
        beta_translated = {pl: b for pl, b in zip(SUPPORTED_LANGS, betas, strict=True) if pl != lang}
        variant = req.variant if req is not None else DEFAULT_VARIANT
        images, words = self.passage_query(query.r.text, lang, translate=query.translate is not False,
                                           words=highlight)
        readable = set(images)
        try:
            ranking = passages.rank(
                images, lang, cands.rows, cands.fused, analyzers=self._resources().analyzers, words=words,
                variant=variant, k=k, langs=readable, alpha=params["alpha"], beta=params["beta"],
                sigma=params["sigma"], mu=params["mu"], mu_translated=params["mu_translated"],
                rho=params["rho"], beta_translated=beta_translated, highlight=highlight, spread=spread)
        except ValueError as exc:
            raise QueryError(str(exc)) from exc
        return ranking, {"variant": variant, **params, "beta_translated": beta_translated,
                         "documents": ranking.documents, "readable": sorted(readable)}, images

    def passages_of(self, text: str, lang: str, rows: list[int], k: int) -> list[PassageHit]:
        """The ``k`` best passages of the documents ``rows`` for ``text`` (ranked among those documents only)."""
        passages = self.passage_index()
        if not rows or k < 1:
            return []
        images, words = self.passage_query(text, lang)
        ranking = passages.rank(images, lang, np.asarray(rows, dtype=np.int64), None,
                                analyzers=self._resources().analyzers, words=words, k=k, langs=set(images))
        return list(ranking.hits)

    def passage_query(self, text: str, lang: str, *, translate: bool = True,
                      words: bool = True) -> tuple[dict[str, QueryImage], dict[str, list[str]]]:
        """What the passage ranker reads of a query: its image in every language it reaches, rendered as the first
        stage's routes render it (the index's analysis and translation tables), and the query words behind each
        of its terms (for the highlights). Raises ``QueryError`` when the query has no index term. The analysis and
        the translation are the first stage's of the same query (:meth:`IndexResources.query_units`, kept for the
        last queries): a search's passages do not analyse or translate it again. ``words``: False where no passage is
        highlighted (the evidence step): none are looked up (empty)."""
        res = self._resources()
        units = res.query_units(text, lang, translate=translate)
        if not units.get(lang):
            raise QueryError("the query has no index terms after analysis (only stop words or punctuation?)")
        images = {tgt: QueryImage.of_units(tgt, u, hops=res.hops(lang, tgt)) for tgt, u in units.items()
                  if any(w > 0 for _, (_, w) in u)}
        if lang in images:  # its own terms in their order: a passage that says them word for word ranks first
            images[lang] = images[lang].with_terms(res.terms(text, lang))
        return images, res.words(text, lang) if words else {}

    def passage_langs(self, lang: str) -> set[str]:
        """Languages whose passages a ``lang`` query reaches: its own, and every language a translation route of
        this index reaches (de/fr <-> en, de <-> fr through English)."""
        return set(self._resources().query_units("", lang)) | {lang}

    def _resources(self) -> IndexResources:
        if self.resources is None:
            raise QueryError("this index's pipeline has no analysis or translation tables to read")
        return self.resources

    def describe(self) -> dict[str, Any]:
        return {"docs": self.settings.evidence_docs, "by": self.settings.evidence_by,
                "weight": self.settings.evidence_weight,
                "ranker": None if self.ranker is None else {"kind": self.ranker.kind, "docs": self.ranker.docs,
                                                            "features": len(self.ranker.features)},
                "passages": None if self.passages is None else self.passages.describe()}
