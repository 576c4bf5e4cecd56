"""The last two stages, which shape the results shown: ``collapse`` (families grouped) and ``explain`` (each result's
matched words).

``collapse`` groups a search's candidates by family, application and priority (:mod:`service.corpus.families`)
where the query asks (``Query.collapse``: the first so many groups are shown, each head with its members), and
says which candidates are shown (``Candidates.shown``). ``explain`` looks up the matched terms of the candidates
shown (all of them where nothing collapsed) in the first stage's sparse indexes, and maps them back to the query's
words as written (``Candidates.matched_words``); a sharded index's shards send their candidates' matched terms
with them (the ingress has no sparse index of the whole collection), and the ingress maps them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from service.candidates import CANDIDATES, Candidates
from service.corpus.families import group as family_groups
from service.query import Query

if TYPE_CHECKING:
    from service.index.store import DocStore
    from service.retrieval.resources import IndexResources


FAMILY_ROOM = 3
"""Candidates a collapsing search keeps per group it shows: room for the members that fold into the groups."""


def collapse_to(query: Query, groups: int) -> None:
    """Ask ``query`` for its first ``groups`` family groups, with room for the members that fold into them."""
    query.k, query.collapse = min(query.depth, groups * FAMILY_ROOM), groups


class CollapseStep:
    """Families grouped where the query asks (see the module doc)."""

    name = "collapse"
    requires = frozenset({"fused"})
    provides = frozenset({"groups"})

    def __init__(self, docs: DocStore) -> None:
        self.docs = docs

    def run(self, query: Query, cands: Candidates) -> Candidates:
        """Every candidate's record groups (``cands.groups``); the first ``query.collapse`` groups are shown, with
        their members (``cands.shown``: their positions, in order). Nothing where the query does not collapse."""
        if not query.collapse:
            return cands
        groups = family_groups([self.docs.header_row(row) for row in cands.rows.tolist()])
        cands.groups = groups
        cands.shown = sorted({i for g in groups[:query.collapse] for i in (g.head, *g.members)})
        cands.details[self.name] = {"groups": len(groups), "shown": query.collapse}
        return cands

    def describe(self) -> dict[str, Any]:
        return {"by": "family, application, priority"}


class ExplainStep:
    """The matched words of the candidates shown (see the module doc)."""

    name = "explain"
    requires = frozenset({CANDIDATES})
    provides = frozenset({"matched"})

    def __init__(self, resources: IndexResources | None) -> None:
        self.resources = resources

    def run(self, query: Query, cands: Candidates) -> Candidates:
        """With ``query.explain``: the shown candidates' matched terms looked up where the first stage found them and
        they have none yet, and each shown row's matched words (per query word as written, itself or through a
        translation, the index terms it matched as; a term with no query word behind it, one relevance feedback
        added, stands for itself)."""
        if not query.explain:
            return cands
        rows = cands.rows.tolist() if cands.shown is None else [int(cands.rows[i]) for i in cands.shown]
        looked = self.lookup(cands, np.asarray(rows, dtype=np.int64))
        if looked:
            cands.details[self.name] = {"documents": looked}  # (their matched terms looked up)
        if not cands.matched_terms or self.resources is None:
            return cands
        translate = query.translate if isinstance(query.translate, bool) else True
        words = self.resources.term_words(query.r.text, query.r.lang, translate=translate)
        for row in rows:
            mine: dict[str, list[str]] = {}
            for term in cands.matched_terms.get(row, []):
                for word in words.get(term, (term,)):
                    stems = mine.setdefault(word, [])
                    if term not in stems:
                        stems.append(term)
            cands.matched_words[row] = mine
        return cands

    def lookup(self, cands: Candidates, rows: np.ndarray | None = None) -> int:
        """Look up the matched terms of the first stage's rows among ``rows`` (default: every candidate) that have
        none yet; returns how many were looked up (none where the candidates hold no first-stage route: a sharded
        index's ingress)."""
        if self.resources is None or not cands.route_terms:
            return 0
        wanted = cands.rows if rows is None else rows
        first = set(cands.rows[cands.in_first].tolist())
        lacking = [r for r in wanted.tolist() if r in first and r not in cands.matched_terms]
        if lacking:
            cands.matched_terms.update(zip(lacking, self.resources.matched_terms(cands.route_terms, lacking),
                                           strict=True))
        return len(lacking)

    def describe(self) -> dict[str, Any]:
        return {"looks up": "the matched words of the results shown"}
