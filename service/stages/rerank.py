"""``rerank``: the ONNX rankers' scores of every candidate, from precomputed document encodings.

An index built with ``--models`` holds ``rerank/<encoding>.npy`` (float32 ``[n_docs, dim]``, row-aligned;
:data:`service.retrieval.neural.ENCODINGS`): the document side of the text-only, meta-only and joint
rankers, encoded once at build time. A query is encoded once per ranker and the rankers' MLPs score
the candidates' stored encodings; no document text is read at query time.

Components, each only where its input exists:

==========  =========================================  ================================================
component   ranker                                     applies when
==========  =========================================  ================================================
``text``    text-only ranker (CNN over words + MLP)    the models have a text encoder for the language
``meta``    meta-only ranker (CNN over codes + MLP)    the query has classification codes, or its first
                                                       documents predict some
``joint``   joint text+meta ranker (one MLP over both)  codes (likewise), and a joint text encoder for the
                                                       language
==========  =========================================  ================================================

Without codes the meta encoders see an empty sequence and return a constant vector: the meta and joint
rankers were never trained on that input, so their scores there are noise. A query that brings no codes (a
pasted claim: issue 33 item 2) is therefore given the codes its first documents predict: the first stage's
top :data:`~service.retrieval.code_prediction.DEFAULT_DEPTH` vote for their main groups
(:func:`~service.retrieval.code_prediction.predict_codes`) and the :data:`PREDICTED_CODES` best are what the meta
and joint rankers read (a code the models do not know falls back to its subclass). The response lists them
(``query.predicted_codes``) and this stage's detail says the codes were predicted. Whether the fusion weighs
those scores is learned as for any component: the profile without codes is learned on queries that bring none,
with the codes predicted for them (docs/RESULTS.md, "Codes predicted for a query"). The codes are predicted only
where the query is fused with a weight on meta or joint (the index's weights, or the request's), or every component
is asked for (fusion learning): elsewhere the two rankers' scores would be computed for nothing.
Likewise a ranker the fusion gives no weight for the query is not scored (its skip reason says so). On the synthetic
corpus, this took the stage from 12-13 ms (all three rankers scored) to 2.5 ms (docs/RESULTS.md).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from service.candidates import CANDIDATES, Candidates
from service.codes import record_codes
from service.index.arrays import SegmentRows
from service.index.store import DocStore
from service.query import Query
from service.retrieval.code_prediction import DEFAULT_DEPTH, predict_codes
from service.retrieval.neural import ENCODINGS, RANKERS, Models

NEEDS = {"text": ("text_doc",), "meta": ("meta_doc",), "joint": ("joint_doc_text", "joint_doc_meta")}

PREDICTED_CODES = 3
"""The predicted main groups the meta and joint rankers read for a query without codes."""

CODE_RANKERS = ("meta", "joint")


class RerankStep:
    name = "rerank"
    requires = frozenset({CANDIDATES})
    provides = frozenset({"text", "meta", "joint"})

    def __init__(self, models: Models, encodings: Mapping[str, np.ndarray | SegmentRows],
                 docs: DocStore | None = None,
                 fused_with: Callable[[Query], tuple[str, str, dict[str, float], str, int | None]] | None = None,
                 ) -> None:
        """``docs``: the candidates' records, whose codes are voted for a query without codes (None: such a query is
        not scored by the meta and joint rankers); ``fused_with``: what a query is fused with
        (:meth:`service.fusion.FusionStep.weights_for`; None: codes are predicted for every query without them)."""
        missing = [n for n in ENCODINGS if n not in encodings]
        if missing:
            raise ValueError(f"document encodings missing: {', '.join(missing)}")
        self.models = models
        self.encodings = encodings
        self.docs = docs
        self.fused_with = fused_with

    def weighs(self, query: Query, kinds: Sequence[str]) -> bool:
        """Will the scores of any of the rankers ``kinds`` count for this query (a weight above 0 in what it is fused
        with), or are all components asked for?"""
        if query.every_component or self.fused_with is None:
            return True
        weights = self.fused_with(query)[2]
        return any(weights.get(k, 0.0) > 0 for k in kinds)

    def weighs_codes(self, query: Query) -> bool:
        """Will the meta or joint scores count for this query (or are all components asked for)?"""
        return self.weighs(query, CODE_RANKERS)

    def applicable(self, query: Query, predicted: Sequence[str] = ()) -> dict[str, str | None]:
        """Per ranker: ``None`` when it applies to the query (given the codes ``predicted`` for it), else why not."""
        r = query.r
        out: dict[str, str | None] = {}
        for kind in RANKERS:
            if kind in CODE_RANKERS and not r.has_codes and not predicted:
                out[kind] = "the query has no classification codes" if self.docs is None else (
                    "the query has no classification codes and its first documents predict none"
                    if self.weighs_codes(query) else
                    "the query has no classification codes (none predicted: the fusion does not weigh this ranker)")
            elif kind in ("text", "joint") and r.lang not in self.models.languages_of(kind):
                out[kind] = f"no {kind} ranker for {r.lang} queries in the models"
            elif not self.weighs(query, (kind,)):
                out[kind] = "the fusion gives it no weight for this query (not scored)"
            else:
                out[kind] = None
        return out

    def scores(self, text: str, lang: str, codes: Sequence[str], rows: np.ndarray,
               rankers: Sequence[str] = RANKERS) -> dict[str, np.ndarray]:
        """Scores (float64) of ``rows`` by ``rankers``."""
        rows = np.asarray(rows, dtype=np.int64)
        docs = {n: np.asarray(self.encodings[n][rows], dtype=np.float32) for k in rankers for n in NEEDS[k]}
        qv = self.models.query_vectors(text, lang, codes, rankers)
        out = self.models.score(qv, docs, rankers)
        return {k: out[k].astype(np.float64) for k in rankers}

    def predict(self, cands: Candidates) -> list[str]:
        """The :data:`PREDICTED_CODES` main groups voted by the candidates the first stage ranks highest."""
        if self.docs is None or not len(cands):
            return []
        first = np.nan_to_num(np.asarray(cands.scores.get("bm25", np.zeros(len(cands))), dtype=np.float64), nan=-1.0)
        top = np.lexsort((np.arange(first.size), -first))[:DEFAULT_DEPTH]
        codes = [record_codes(self.docs.header_row(int(cands.rows[i]))) for i in top if first[i] > 0]
        return [code for code, _ in predict_codes(codes, "main_group")[:PREDICTED_CODES]]

    def run(self, query: Query, cands: Candidates) -> Candidates:
        r = query.r
        codes: Sequence[str] = r.codes
        predicted: list[str] = []
        readers = [k for k in CODE_RANKERS if k != "joint" or r.lang in self.models.languages_of(k)]
        if not r.has_codes and readers and self.docs is not None and self.weighs_codes(query):
            predicted = self.predict(cands)
            codes = predicted
        fit = self.applicable(query, predicted)
        for kind, why in fit.items():
            if why is not None:
                cands.skip(kind, why)
        use = [k for k, why in fit.items() if why is None]
        if use:
            cands.scores.update(self.scores(r.text, r.lang, codes, cands.rows, use))
        cands.details[self.name] = {"rankers": use}
        if predicted:
            cands.predicted_codes = predicted
            cands.details[self.name]["predicted_codes"] = predicted
        return cands

    def describe(self) -> dict[str, Any]:
        langs = {k: list(self.models.languages_of(k)) for k in ("text", "joint")}
        return {"rankers": list(RANKERS), "languages": langs, "onnx_providers": self.models.providers}
