"""Relevance feedback: Rocchio over the BM25 terms (and over dense vectors when the index has models).

Stateless: a request carries the ids the analyst marked relevant / not relevant (``SearchRequest.feedback``);
the engine turns them into rows (:class:`Feedback` on the pipeline :class:`service.query.Query`), and

- the first stage (service/retrieval/first_stage.py) adds, in every route, the ``terms`` best expansion
  terms of that route's language: the Rocchio centroid ``beta * mean(relevant) - gamma * mean(non-relevant)``
  of the marked documents' length-normalised term frequencies (their text in that language, analysed as
  the index was), ranked by centroid weight x idf, terms the route already searches left out. An added term's
  query weight is its centroid weight times the query's total term count (Rocchio on length-normalised
  vectors; the query's own terms keep theirs: alpha = 1), capped at the query's largest term count, so an
  added term never outweighs the query's own strongest term;
- the dense stage (service/stages/dense.py) moves the query vector: ``q + beta * mean(relevant vectors) -
  gamma * mean(non-relevant vectors)``, renormalised.

What was added is recorded on the feedback object and returned in ``query.feedback`` of the response.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

BETA = 0.75
GAMMA = 0.15
TERMS = 10


@dataclass
class Feedback:
    """Marked rows of one request, and what the stages did with them."""

    relevant: list[int]
    nonrelevant: list[int] = field(default_factory=list)
    terms: int = TERMS
    beta: float = BETA
    gamma: float = GAMMA
    added: dict[str, dict[str, float]] = field(default_factory=dict)  # language -> added term -> weight
    dense: str | None = None  # what the dense stage did ("moved ...", or why not)
    notes: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.relevant and not self.nonrelevant


def term_vector(terms: Iterable[str]) -> dict[str, float]:
    """Length-normalised term frequencies (sum 1) of an analysed text."""
    counts = Counter(terms)
    total = sum(counts.values())
    return {t: c / total for t, c in counts.items()} if total else {}


def centroid(relevant: Sequence[Mapping[str, float]], nonrelevant: Sequence[Mapping[str, float]], *,
             beta: float = BETA, gamma: float = GAMMA) -> dict[str, float]:
    """``beta * mean(relevant) - gamma * mean(nonrelevant)`` over term vectors (empty lists count as zero)."""
    out: dict[str, float] = {}
    for docs, w in ((relevant, beta), (nonrelevant, -gamma)):
        if not docs:
            continue
        for vec in docs:
            for t, v in vec.items():
                out[t] = out.get(t, 0.0) + w * v / len(docs)
    return out


def expansion_terms(cent: Mapping[str, float], idf: Callable[[str], float], exclude: Iterable[str], *,
                    n: int, scale: float, cap: float = 1.0) -> dict[str, float]:
    """The ``n`` terms of highest ``centroid x idf`` (positive, known to the index, not in ``exclude``), with
    query weight ``centroid x scale`` capped at ``cap``, best first (ties: alphabetical)."""
    skip = set(exclude)
    scored = [(w * idf(t), t, w) for t, w in cent.items() if w > 0 and t not in skip]
    scored = [x for x in scored if x[0] > 0]
    scored.sort(key=lambda x: (-x[0], x[1]))
    return {t: min(w * scale, cap) for _, t, w in scored[:n]}


def move_vector(query: np.ndarray, relevant: np.ndarray, nonrelevant: np.ndarray, *,
                beta: float = BETA, gamma: float = GAMMA) -> np.ndarray:
    """Rocchio on dense vectors (rows of ``relevant`` / ``nonrelevant``), renormalised to the query's norm."""
    q = np.asarray(query, dtype=np.float32).reshape(-1)
    out = q.copy()
    if relevant.size:
        out += beta * np.asarray(relevant, dtype=np.float32).reshape(-1, q.size).mean(axis=0)
    if nonrelevant.size:
        out -= gamma * np.asarray(nonrelevant, dtype=np.float32).reshape(-1, q.size).mean(axis=0)
    norm, qn = float(np.linalg.norm(out)), float(np.linalg.norm(q))
    return (out * (qn / norm) if norm > 0 else q).astype(np.float32).reshape(np.shape(query))


__all__ = ["BETA", "GAMMA", "TERMS", "Feedback", "centroid", "expansion_terms", "move_vector", "term_vector"]
