"""The retrieval pipeline: one visible definition composed from what the index folder holds.

    query analysis -> first stage (BM25 + PSQ translation + filters)
                   -> dense stage (FAISS; union of candidates)        [when the index has dense/]
                   -> rerank (ONNX text/meta encoders + ranker MLP)   [when the index has models/]
                   -> weighted fusion of min-max normalised scores    [learned weights, or BM25 only]
                   -> top k

Every stage is an object with ``name`` and ``run(query, candidates) -> candidates`` (pyterrier
style). Candidates carry one raw score array per component (``bm25``, ``dense``, ``text``,
``meta``), so every result can explain its rank.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import date
from typing import Any, Protocol

import numpy as np

from service.retrieval.first_stage import FirstStage

COMPONENTS = ("bm25", "dense", "text", "meta", "wordpair", "domain")


@dataclass
class Query:
    """A request as the stages see it. First-stage fields are filled in by :class:`FirstStageStep`."""

    text: str
    lang: str | None = None
    codes: list[str] = field(default_factory=list)
    code_level: str | None = None  # None: codes describe the query but do not filter
    before: date | None = None
    k: int = 10
    depth: int = 1000
    translate: bool = True
    weights: dict[str, float] | None = None
    fusion: str | None = None  # linear | borda | linlearn (None: the index's default)
    # resolved by the first stage
    resolved_lang: str | None = None
    resolved_text: str | None = None  # the document text when the query was a publication number
    query_doc: str | None = None
    info: dict[str, Any] = field(default_factory=dict)


@dataclass
class Candidates:
    """Candidate rows with per-component raw scores (NaN where a component did not score a row)."""

    rows: np.ndarray
    scores: dict[str, np.ndarray] = field(default_factory=dict)
    matched_terms: dict[int, list[str]] = field(default_factory=dict)
    routes: dict[int, str] = field(default_factory=dict)  # first-stage route that matched a row best
    fused: np.ndarray | None = None
    normalised: dict[str, np.ndarray] = field(default_factory=dict)  # min-max over the candidate set
    weights: dict[str, float] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.rows)

    def add_rows(self, new_rows: np.ndarray) -> None:
        """Union with rows from another stage; existing components get NaN for the new rows."""
        fresh = np.setdiff1d(new_rows, self.rows, assume_unique=False)
        if len(fresh) == 0:
            return
        self.rows = np.concatenate([self.rows, fresh])
        for name, arr in self.scores.items():
            self.scores[name] = np.concatenate([arr, np.full(len(fresh), np.nan)])


class Stage(Protocol):
    name: str

    def run(self, query: Query, cands: Candidates) -> Candidates: ...

    def describe(self) -> dict[str, Any]: ...


class FirstStageStep:
    """BM25 / tf-idf with cross-lingual PSQ translation and filters: the candidate generator."""

    name = "bm25"

    def __init__(self, first_stage: FirstStage) -> None:
        self.fs = first_stage

    def run(self, query: Query, cands: Candidates) -> Candidates:
        res = self.fs.search(
            query.text,
            lang=query.lang,
            k=min(query.k, query.depth),
            depth=query.depth,
            codes=query.codes if query.code_level else (),
            code_level=query.code_level or "subclass",
            before=query.before,
            translate=query.translate,
        )
        info = res.info
        query.resolved_lang = info.lang
        query.query_doc = info.query_doc
        if info.query_doc is not None:
            rec = self.fs.docs.get(info.query_doc)
            query.resolved_text = rec.text(info.lang, ("title", "abstract", "claims"))
            if not query.codes:
                query.codes = [*rec.ipc, *rec.cpc]
        query.info = {
            "lang": info.lang,
            "lang_detected": info.lang_detected,
            "translated": info.translation is not None,
            "translation": info.translation,
            "terms": info.query_terms,
            "terms_before_reduction": info.n_terms_before_reduction,
            "filters": info.filters,
            "query_doc": info.query_doc,
            "routes": [r.name for r in info.routes],
            "route_tables": {r.name: r.table for r in info.routes if r.table},  # e.g. "de:psq": "en-de"
            "route_merge": info.combine,
            "notes": info.notes,
        }
        rows = np.array([h.row for h in res.hits], dtype=np.int64)
        return Candidates(
            rows=rows,
            scores={"bm25": np.array([h.score for h in res.hits], dtype=np.float64)},
            matched_terms={h.row: h.matched_terms for h in res.hits},
            routes={h.row: h.route for h in res.hits if h.route},
        )

    def describe(self) -> dict[str, Any]:
        s = self.fs.meta.settings
        return {"scoring": s.get("scoring"), "langs": s.get("index_langs"), "translation": sorted(self.fs.tables)}


def minmax(x: np.ndarray) -> np.ndarray:
    """Min-max normalise over the candidate set; NaN (component did not score the row) -> 0."""
    out = np.zeros_like(x, dtype=np.float64)
    ok = ~np.isnan(x)
    if not ok.any():
        return out
    lo, hi = float(x[ok].min()), float(x[ok].max())
    out[ok] = (x[ok] - lo) / (hi - lo) if hi > lo else 1.0
    return out


class FusionStep:
    """Weighted linear combination of min-max normalised component scores (weights from training)."""

    name = "fusion"

    def __init__(self, weights: dict[str, float], source: str) -> None:
        self.weights = weights
        self.source = source

    def run(self, query: Query, cands: Candidates) -> Candidates:
        weights = query.weights if query.weights is not None else self.weights
        cands.normalised = {name: minmax(arr) for name, arr in cands.scores.items()}
        fused = np.zeros(len(cands), dtype=np.float64)
        for name, w in weights.items():
            if w and name in cands.normalised:
                fused += w * cands.normalised[name]
        total = sum(w for n, w in weights.items() if n in cands.scores)
        cands.fused = fused / total if total > 0 else fused
        cands.weights = {n: w for n, w in weights.items() if n in cands.scores}
        return cands

    def describe(self) -> dict[str, Any]:
        return {"weights": self.weights, "source": self.source}


@dataclass
class Pipeline:
    stages: list[Stage]

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.stages]

    def run(self, query: Query) -> tuple[Candidates, list[dict[str, Any]]]:
        cands = Candidates(rows=np.zeros(0, dtype=np.int64))
        trace: list[dict[str, Any]] = []
        for stage in self.stages:
            started = time.perf_counter()
            cands = stage.run(query, cands)
            trace.append({"name": stage.name, "ms": (time.perf_counter() - started) * 1000.0,
                          "candidates": len(cands), "detail": {}})
        if cands.fused is None:
            raise RuntimeError("the pipeline must end with a fusion stage")
        order = np.lexsort((cands.rows, -cands.fused))[: query.k]
        cands.rows = cands.rows[order]
        cands.fused = cands.fused[order]
        cands.scores = {n: a[order] for n, a in cands.scores.items()}
        cands.normalised = {n: a[order] for n, a in cands.normalised.items()}
        return cands, trace
