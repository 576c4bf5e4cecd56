"""Classification codes for a query that brings none, voted by the documents the first stage ranks highest.

A pasted claim rarely carries codes, so the code features and the rankers that read codes (meta, joint) do not
apply to it. The documents a search ranks first are mostly of the query's field: each of the top ``depth``
documents votes ``1 / rank`` for every code it holds at the asked level (once per code), and the codes are ranked
by their share of the votes. How often the first predicted code is one of a document's own codes is measured by
``priorart-lab experiment code-prediction`` (docs/RESULTS.md, "Codes predicted for a query").
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from service.codes import check_level, codes_at

DEFAULT_DEPTH = 10
"""Top documents that vote."""


def predict_codes(ranked: Sequence[Iterable[str]], level: str = "subclass", *,
                  depth: int = DEFAULT_DEPTH) -> list[tuple[str, float]]:
    """The codes at ``level`` voted by ``ranked`` (each document's codes, best document first), best first, each with
    its share of the votes (summing to 1; ties in the order the codes were first met). Documents without a code at
    ``level`` vote for nothing; no votes: an empty list."""
    check_level(level)
    if depth < 1:
        raise ValueError(f"depth must be >= 1, got {depth}")
    votes: dict[str, float] = {}
    for rank, codes in enumerate(ranked[:depth], 1):
        for code in codes_at(codes, level):  # (distinct)
            votes[code] = votes.get(code, 0.0) + 1.0 / rank
    total = sum(votes.values())
    if not total:
        return []
    order = sorted(votes.items(), key=lambda kv: -kv[1])  # stable: ties keep their first-met order
    return [(code, v / total) for code, v in order]


__all__ = ["DEFAULT_DEPTH", "predict_codes"]
