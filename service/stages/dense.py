"""``dense``: FAISS nearest documents of the query's vector, unioned with the candidates.

The query's encoder (:class:`QueryEncoder`) is the index's: the pretrained multilingual encoder
(:class:`service.retrieval.pretrained.PretrainedEncoder`, every query language, the default build) or the dual encoder
of a models folder (:class:`DualQueries`, one per language, ``build --models``). The stage encodes the resolved query
text, takes the FAISS top
``query.depth`` rows under the resolved filter mask, adds them to the candidates and sets the ``dense``
score of *every* candidate to its exact similarity from the stored vectors (first-stage candidates
included). Candidates only the dense stage found get BM25 score ``0``: they were not in BM25's top
``depth``, and 0 is a lower bound of any BM25 score (a document without a query term scores exactly
0), so with the BM25 weight alone they rank below every BM25 candidate: "BM25 alone" is a point of the
fusion grid that reproduces the first stage's ranking. With the request weights ``{"dense": 1}`` the
top of the union is the dense search's top (exact for a flat index): the dense-only system.

The component applies only when the encoder reads the query language.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from service.candidates import CANDIDATES, Candidates
from service.index.store import DocStore
from service.query import Query
from service.retrieval.dense import DenseIndex
from service.retrieval.feedback import move_vector
from service.retrieval.neural import Models


class QueryEncoder(Protocol):
    """What the dense stage asks of a query encoder."""

    @property
    def query_languages(self) -> tuple[str, ...]: ...

    @property
    def providers(self) -> list[str]: ...

    def encode_query(self, text: str, lang: str, *, remember: bool = False) -> np.ndarray: ...


class DualQueries:
    """The query side of a models folder's dual encoder (one graph per language) as a :class:`QueryEncoder`."""

    def __init__(self, models: Models) -> None:
        self.models = models

    @property
    def query_languages(self) -> tuple[str, ...]:
        return self.models.languages_of("dual")

    @property
    def providers(self) -> list[str]:
        return list(self.models.providers)

    def encode_query(self, text: str, lang: str, *, remember: bool = False) -> np.ndarray:
        return self.models.encode_query(text, lang)  # (a models folder's graphs: nothing kept)


class DenseStep:
    name = "dense"
    requires = frozenset({CANDIDATES})  # the first stage's rows: the dense hits are unioned with them
    provides = frozenset({CANDIDATES, "dense"})

    def __init__(self, encoder: QueryEncoder, dense: DenseIndex, docs: DocStore, *,
                 kind: str = "dual") -> None:
        if len(dense) != len(docs):
            raise ValueError(f"dense index has {len(dense)} vectors, the doc store {len(docs)} rows")
        self.encoder = encoder
        self.kind = kind  # "pretrained" or "dual": which encoder the index's vectors come from
        self.dense = dense
        self.docs = docs

    def run(self, query: Query, cands: Candidates) -> Candidates:
        r = query.r
        if r.lang not in self.encoder.query_languages:
            cands.skip("dense", f"no {self.kind} encoder for {r.lang} queries in this index")
            return cands
        qv = self.encoder.encode_query(r.text, r.lang, remember=query.remember_vector)
        fb = query.feedback
        if fb is not None and not fb.empty:
            rel, non = np.asarray(fb.relevant, dtype=np.int64), np.asarray(fb.nonrelevant, dtype=np.int64)
            qv = move_vector(qv, np.asarray(self.dense.vectors[rel]), np.asarray(self.dense.vectors[non]),
                             beta=fb.beta, gamma=fb.gamma)
            fb.dense = (f"query vector moved towards {len(rel)} relevant"
                        + (f" and away from {len(non)} non-relevant" if len(non) else "") + " document vectors")
        hits = self.dense.search(qv, query.depth, r.mask)
        before = len(cands)
        overlap = int(np.isin(hits.rows, cands.rows).sum())
        cands.add_rows(hits.rows.astype(np.int64))
        if "bm25" in cands.scores:
            cands.scores["bm25"][before:] = 0.0  # not in BM25's top depth: 0 is a lower bound of its BM25 score
        cands.in_dense = np.isin(cands.rows, hits.rows)
        # the hits' scores are exact already (a row's score does not depend on the rows scored beside it): only the
        # other candidates' vectors are read
        scores = np.empty(len(cands), dtype=np.float64)
        by_row = np.argsort(hits.rows, kind="stable")
        scores[cands.in_dense] = hits.scores[by_row[np.searchsorted(hits.rows[by_row], cands.rows[cands.in_dense])]]
        rest = ~cands.in_dense
        scores[rest] = self.dense.scores(qv, cands.rows[rest])
        cands.scores["dense"] = scores
        cands.details[self.name] = {"hits": len(hits), "new": len(cands) - before, "overlap": overlap}
        return cands

    def describe(self) -> dict[str, Any]:
        return {**self.dense.describe(), "encoder": self.kind, "languages": list(self.encoder.query_languages),
                "onnx_providers": list(self.encoder.providers)}
