"""What the pipeline's stages exchange: the candidate set with one score array per component, the stage
protocol, and a stage's trace (service/pipeline.py composes the stages)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from service.query import Query

if TYPE_CHECKING:
    from service.corpus.families import Group as FamilyGroup
    from service.retrieval.first_stage import SearchInfo
    from service.schema import FusionInfo


TIE = 1e-12  # scores within this relative distance are a tie (a sharded index sums in another order: ulps apart)


def best_first(scores: np.ndarray, rows: np.ndarray, ids: Sequence[str], k: int) -> np.ndarray:
    """The positions of the ``k`` best ``scores``, best first; tied scores (within :data:`TIE`) by document id
    (``ids[row]``), so that one index and its shards, whose rows are numbered differently, give one order. The ids
    are read only where a tie reaches the first ``k``."""
    order = np.lexsort((rows, -scores))
    s = scores[order]
    ties = np.abs(np.diff(s)) <= TIE * np.maximum(1.0, np.abs(s[1:]))
    if not ties[:k].any():
        return order[:k]
    end = min(k, len(s))
    while end < len(s) and ties[end - 1]:  # the run of ties across the cut-off, whole
        end += 1
    head = order[:end]
    # a run of ties takes its first member's score as its key, so that the ids order the whole run
    run_start = np.concatenate(([0], np.flatnonzero(~ties[: end - 1]) + 1))
    key = np.repeat(s[run_start], np.diff(np.concatenate((run_start, [end]))))
    named = np.array([ids[int(r)] for r in rows[head]])
    return head[np.lexsort((named, -key))][:k]


@dataclass
class Candidates:
    """Candidate rows with per-component raw scores (NaN where a component did not score a row)."""

    rows: np.ndarray
    scores: dict[str, np.ndarray] = field(default_factory=dict)
    matched_terms: dict[int, list[str]] = field(default_factory=dict)  # the rows explained (the pipeline's last step)
    # per route of the first stage, the index language it searched and its target terms: what rows' matched
    # terms are looked up in (IndexResources.matched_terms)
    route_terms: list[tuple[str, list[str]]] = field(default_factory=list)
    routes: dict[int, str] = field(default_factory=dict)  # first-stage route that gave a row its bm25 score
    in_first: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))  # returned by the first stage
    in_dense: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))  # returned by the dense search
    skipped: dict[str, str] = field(default_factory=dict)  # component -> why it did not apply to this query
    details: dict[str, Any] = field(default_factory=dict)  # stage name -> what it did (for explanations)
    first_info: SearchInfo | None = None
    fused: np.ndarray | None = None
    normalised: dict[str, np.ndarray] = field(default_factory=dict)  # min-max over the candidate set
    fusion: FusionInfo | None = None  # how the fusion combined the components (the response's, as it is)
    missing_shards: list[str] = field(default_factory=list)  # shards of a sharded index that did not answer
    evidence: np.ndarray | None = None  # ordered by passage evidence: each row's best passage score (evidence stage)
    ranker: np.ndarray | None = None  # ordered by the learned ranker: its score of the first rows, min-max (NaN below)
    # the score the evidence stage ordered the first len(ordered) documents by, in [0, 1], non-increasing (the
    # ranker's min-max, or the passage blend): the order /search returns (service/stages/evidence.py); None: the
    # fused order. Counted before the cut to k (how many it reordered), so take() leaves it as it is
    ordered: np.ndarray | None = None
    # the results shown (service/stages/results.py): the family groups of every candidate where the query collapses,
    # the positions shown (None: every candidate), and each shown row's matched words (query word -> index terms)
    groups: list[FamilyGroup] | None = None
    shown: list[int] | None = None
    matched_words: dict[int, dict[str, list[str]]] = field(default_factory=dict)
    # the codes voted by the first documents for a query without codes: the main groups the meta and joint rankers read
    # (service/stages/rerank.py), else the subclasses the learned ranker agrees with (service/engine.py)
    predicted_codes: list[str] = field(default_factory=list)

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
        if self.evidence is not None:
            self.evidence = self.evidence[order]
        if self.ranker is not None:
            self.ranker = self.ranker[order]


CANDIDATES = "candidates"
"""What a candidate generator provides (rows); a scorer requires it. The other names are the score components
(``bm25``, ``dense``, ``text``, ...) and ``fused``."""


class Stage(Protocol):
    """One step of the pipeline (service/pipeline.py composes them, and checks that each stage's ``requires`` is
    provided by the stages before it)."""

    name: str
    requires: frozenset[str]  # what the candidates must hold when the stage runs
    provides: frozenset[str]  # what it adds: "candidates" (rows), its score components, "fused"

    def run(self, query: Query, cands: Candidates) -> Candidates: ...

    def describe(self) -> dict[str, Any]: ...


@dataclass
class StageTrace:
    name: str
    ms: float
    candidates: int
    detail: dict[str, Any] = field(default_factory=dict)


__all__ = ["CANDIDATES", "Candidates", "Stage", "StageTrace"]
