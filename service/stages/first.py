"""``bm25``: the first stage as a pipeline stage (candidate generator; service/retrieval/first_stage.py)."""

from __future__ import annotations

from typing import Any

import numpy as np

from service.candidates import CANDIDATES, Candidates
from service.query import Query
from service.retrieval.first_stage import FirstStage
from service.stages.resolve import RESOLVED


class FirstStageStep:
    """BM25 / tf-idf with cross-lingual PSQ translation and the resolved filters: the ``bm25`` component."""

    name = "bm25"
    requires = frozenset({RESOLVED})
    provides = frozenset({CANDIDATES, "bm25"})

    def __init__(self, first_stage: FirstStage) -> None:
        self.fs = first_stage

    def run(self, query: Query, cands: Candidates) -> Candidates:
        res = self.fs.run(query)
        for note in res.info.notes:
            query.note(note)
        rows = res.rows.astype(np.int64, copy=False)
        row_list = rows.tolist()
        names, won = res.route_names, res.winner.tolist()
        out = Candidates(
            rows=rows,
            scores={"bm25": res.scores.astype(np.float64, copy=False)},
            route_terms=res.route_terms,
            routes={row: names[w] for row, w in zip(row_list, won, strict=True) if w >= 0},
            in_first=np.ones(len(rows), dtype=bool),
            in_dense=np.zeros(len(rows), dtype=bool),
            first_info=res.info,
        )
        if not res.info.query_terms:
            out.skip("bm25", "the query has no index terms after analysis")
        out.details[self.name] = {
            "routes": [{"route": r.name, "kind": r.kind, "table": r.table, "matched": r.n_matched}
                       for r in res.info.routes],
            "terms": len(res.info.query_terms), "combine": res.info.combine,
        }
        return out

    def describe(self) -> dict[str, Any]:
        s = self.fs.meta.settings
        return {"scoring": s.scoring, "langs": list(s.index_langs), "translation": sorted(self.fs.tables)}
