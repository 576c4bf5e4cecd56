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
``meta``    meta-only ranker (CNN over codes + MLP)    the query has classification codes
``joint``   joint text+meta ranker (one MLP over both)  codes, and a joint text encoder for the language
==========  =========================================  ================================================

Without codes the meta encoders see an empty sequence and return a constant vector: the meta and joint
rankers were never trained on that input, so their scores there are noise and are not used.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from service.candidates import CANDIDATES, Candidates
from service.index.arrays import SegmentRows
from service.query import Query
from service.retrieval.neural import ENCODINGS, RANKERS, Models

NEEDS = {"text": ("text_doc",), "meta": ("meta_doc",), "joint": ("joint_doc_text", "joint_doc_meta")}


class RerankStep:
    name = "rerank"
    requires = frozenset({CANDIDATES})
    provides = frozenset({"text", "meta", "joint"})

    def __init__(self, models: Models, encodings: Mapping[str, np.ndarray | SegmentRows]) -> None:
        missing = [n for n in ENCODINGS if n not in encodings]
        if missing:
            raise ValueError(f"document encodings missing: {', '.join(missing)}")
        self.models = models
        self.encodings = encodings

    def applicable(self, query: Query) -> dict[str, str | None]:
        """Per ranker: ``None`` when it applies to the query, else why not."""
        r = query.r
        out: dict[str, str | None] = {}
        for kind in RANKERS:
            if kind in ("meta", "joint") and not r.has_codes:
                out[kind] = "the query has no classification codes"
            elif kind in ("text", "joint") and r.lang not in self.models.languages_of(kind):
                out[kind] = f"no {kind} ranker for {r.lang} queries in the models"
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

    def run(self, query: Query, cands: Candidates) -> Candidates:
        r = query.r
        fit = self.applicable(query)
        for kind, why in fit.items():
            if why is not None:
                cands.skip(kind, why)
        use = [k for k, why in fit.items() if why is None]
        if use:
            cands.scores.update(self.scores(r.text, r.lang, r.codes, cands.rows, use))
        cands.details[self.name] = {"rankers": use}
        return cands

    def describe(self) -> dict[str, Any]:
        langs = {k: list(self.models.languages_of(k)) for k in ("text", "joint")}
        return {"rankers": list(RANKERS), "languages": langs, "onnx_providers": self.models.providers}
