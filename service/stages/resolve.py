"""``resolve``: the pipeline's first stage, the query resolved once against the index (service/query.py: its
language, its text, the publication it names, its codes, the filters' mask, a query in the query language)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from service.candidates import Candidates
from service.query import Query, resolve

if TYPE_CHECKING:
    from service.index.store import DocStore
    from service.retrieval.resources import IndexResources

RESOLVED = "query"
"""What the resolve stage provides: ``query.resolved``, which every stage after it reads."""


class ResolveStep:
    """The query resolved, where it is not yet (a shard receives it resolved by the ingress)."""

    name = "resolve"
    requires: frozenset[str] = frozenset()
    provides = frozenset({RESOLVED})

    def __init__(self, docs: DocStore, resources: IndexResources | None) -> None:
        self.docs = docs
        self.resources = resources

    def run(self, query: Query, cands: Candidates) -> Candidates:
        if query.resolved is None:
            resolve(query, self.docs, self.resources)
        return cands

    def describe(self) -> dict[str, Any]:
        return {"query language": self.resources is not None}
