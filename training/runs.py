"""Topics through the index's engine: a TREC run per system (``priorart evaluate``, the experiments).

``search`` (the default) is what ``/search`` returns: the pipeline, then the first documents ordered by their
evidence (the learned ranker or the passage rule), through :meth:`service.pipeline.Pipeline.run`, the method
``/search`` itself ranks with. The other systems are views of one component or of the fused order, the evidence
step off: a set of request weights over the one pipeline (:data:`service.pipeline.SYSTEMS`; ``fusion``: the
index's own weights). Runs are written with score ``k - rank`` so that trec_eval (which breaks ties by document
id) sees exactly the engine's order.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from service.engine import Engine
    from training.evaluation.trec import Run, Topic

SEARCH = "search"  # the system /search serves (the default)


def systems() -> list[str]:
    """The systems a run can be of: ``search``, then the pipeline's weight sets."""
    from service.pipeline import SYSTEMS

    return [SEARCH, *SYSTEMS]


def run_topics(
    engine: Engine,
    topics: Sequence[Topic],
    *,
    system: str = SEARCH,
    k: int = 1000,
    depth: int = 1000,
    translate: bool = True,
    codes: bool = True,
    filter_codes: bool = False,
    progress: bool | None = None,
) -> tuple[Run, dict[str, list[float]], Counter[str]]:
    """Every topic through ``engine`` as ``system`` ranks it: the run (score ``k - rank``), each stage's times (ms)
    and how the topics were fused (``profile: source`` counts)."""
    from tqdm import tqdm

    from service.pipeline import SYSTEMS
    from service.query import Query

    if system not in systems():
        raise ValueError(f"unknown system {system!r}; choose from {', '.join(systems())}")
    if k < 1 or depth < 1:
        raise ValueError(f"k and depth must be >= 1, got k={k}, depth={depth}")
    run: dict[str, dict[str, float]] = {}
    times: dict[str, list[float]] = {}
    how: Counter[str] = Counter()
    ids = engine.docs.ids
    bar = tqdm(topics, desc="topics", unit="q", file=sys.stderr, disable=None if progress is None else not progress)
    for topic in bar:
        qcodes = topic.codes if codes else []
        query = Query(text=topic.text, lang=topic.lang, codes=qcodes,
                      code_level="subclass" if filter_codes and qcodes else None, before=topic.before, k=k,
                      depth=max(depth, k), translate=translate, weights=SYSTEMS.get(system), explain=False,
                      evidence_docs=None if system == SEARCH else 0)
        try:
            cands, trace = engine.pipeline.run(query)
        except ValueError as exc:
            raise ValueError(f"topic {topic.qid}: {exc}") from exc
        n = len(cands.rows)
        run[topic.qid] = {ids[int(r)]: float(n - i) for i, r in enumerate(cands.rows)}
        for t in trace:
            times.setdefault(t.name, []).append(float(t.ms))
        f = cands.fusion
        if f is not None:
            how[f"{f.profile}: {f.fallback or f.source}"] += 1
    return run, times, how


__all__ = ["SEARCH", "run_topics", "systems"]
