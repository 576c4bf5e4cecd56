"""What the pipeline's stages exchange: the candidate set with one score array per component, the stage
protocol, and a stage's trace (service/pipeline.py composes the stages)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from service.query import Query

if TYPE_CHECKING:
    from service.retrieval.first_stage import SearchInfo


@dataclass
class FusionExplanation:
    """How a ranking was made: method, query profile, depth, weights used, and each component's fate."""

    method: str
    profile: str
    depth: int | None
    weights: dict[str, float]  # renormalised over the components that applied (linear: sum 1)
    source: str
    components: dict[str, str]  # component -> "applied" or why it did not count
    fallback: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"method": self.method, "profile": self.profile, "depth": self.depth, "weights": self.weights,
                "source": self.source, "components": self.components, "fallback": self.fallback}

    @property
    def shaped_by(self) -> list[str]:
        """Components with a non-zero weight in this ranking."""
        return [c for c, w in self.weights.items() if w]


@dataclass
class Candidates:
    """Candidate rows with per-component raw scores (NaN where a component did not score a row)."""

    rows: np.ndarray
    scores: dict[str, np.ndarray] = field(default_factory=dict)
    matched_terms: dict[int, list[str]] = field(default_factory=dict)
    # matched terms of rows that matched_terms lacks, on demand (the local first stage's; None from shards)
    more_matched_terms: Callable[[Sequence[int]], list[list[str]]] | None = None
    routes: dict[int, str] = field(default_factory=dict)  # first-stage route that gave a row its bm25 score
    in_first: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))  # returned by the first stage
    in_dense: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))  # returned by the dense search
    skipped: dict[str, str] = field(default_factory=dict)  # component -> why it did not apply to this query
    details: dict[str, Any] = field(default_factory=dict)  # stage name -> what it did (for explanations)
    first_info: SearchInfo | None = None
    fused: np.ndarray | None = None
    normalised: dict[str, np.ndarray] = field(default_factory=dict)  # min-max over the candidate set
    fusion: FusionExplanation | None = None
    missing_shards: list[str] = field(default_factory=list)  # shards of a sharded index that did not answer

    def __len__(self) -> int:
        return len(self.rows)

    @classmethod
    def empty(cls) -> Candidates:
        return cls(rows=np.zeros(0, dtype=np.int64))

    def add_rows(self, new_rows: np.ndarray) -> int:
        """Union with rows from another stage; existing components get NaN for the new rows. Returns how many."""
        fresh = np.setdiff1d(new_rows, self.rows, assume_unique=False)
        if len(fresh) == 0:
            return 0
        self.rows = np.concatenate([self.rows, fresh])
        for name, arr in self.scores.items():
            self.scores[name] = np.concatenate([arr, np.full(len(fresh), np.nan)])
        self.in_first = np.concatenate([self.in_first, np.zeros(len(fresh), dtype=bool)])
        self.in_dense = np.concatenate([self.in_dense, np.zeros(len(fresh), dtype=bool)])
        return len(fresh)

    def skip(self, component: str, reason: str) -> None:
        """Record that ``component`` does not apply to this query (its scores are left out)."""
        self.skipped[component] = reason
        self.scores.pop(component, None)

    def take(self, order: np.ndarray) -> None:
        """Keep the candidates at ``order`` (indices), in that order."""
        self.rows = self.rows[order]
        self.scores = {n: a[order] for n, a in self.scores.items()}
        self.normalised = {n: a[order] for n, a in self.normalised.items()}
        self.in_first, self.in_dense = self.in_first[order], self.in_dense[order]
        if self.fused is not None:
            self.fused = self.fused[order]


class Stage(Protocol):
    name: str

    def run(self, query: Query, cands: Candidates) -> Candidates: ...

    def describe(self) -> dict[str, Any]: ...


@dataclass
class StageTrace:
    name: str
    ms: float
    candidates: int
    detail: dict[str, Any] = field(default_factory=dict)


__all__ = ["Candidates", "FusionExplanation", "Stage", "StageTrace"]
