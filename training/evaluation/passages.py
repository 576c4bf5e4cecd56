"""Passage-level measures inside relevant documents: MAP(D) and PREC(D) (CLEF-IP 2012/2013).

As defined in the passage-retrieval paper (``shared/seeds/passage-retrieval-in-context-patents``):
a relevant document is a document with at least one relevant passage.

- MAP(D): the average precision *inside* each relevant document — the run's passages of that
  document, in run order, judged against the document's relevant passages — averaged over the
  query's relevant documents, then over queries.
- PREC(D): the precision inside each relevant document (relevant retrieved passages of the document
  divided by its retrieved passages), averaged the same way.

A relevant document of which the run retrieves no passage scores 0 on both. With
``retrieved_only=True`` the per-query average runs only over the relevant documents the run
retrieved passages from (a query with none scores 0). Queries without relevant passages are not
evaluated; judged queries missing from the run score 0.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path

from training.evaluation.measures import EvalReport

PassageHit = tuple[str, str, float]
"""``(doc_id, passage_id, score)``: one retrieved passage."""
PassageRun = Mapping[str, Iterable[PassageHit]]
"""Query id -> retrieved passages (any order; ranked by descending score, stable for ties)."""
PassageQrels = Mapping[str, Mapping[str, Collection[str]]]
"""Query id -> document id -> ids of its relevant passages."""

PASSAGE_MEASURES = ("map(d)", "prec(d)")


class PassageReport(EvalReport):
    """Mean MAP(D) and PREC(D) over the evaluated queries, and each query's values."""


def average_precision_in_document(ranked_passages: Sequence[str], relevant: Collection[str]) -> float:
    """AP of one document's passages in run order against its relevant passages (0 if none relevant)."""
    rel = set(relevant)
    if not rel:
        return 0.0
    hits = 0
    total = 0.0
    for rank, pid in enumerate(ranked_passages, 1):
        if pid in rel:
            hits += 1
            total += hits / rank
    return total / len(rel)


def precision_in_document(ranked_passages: Sequence[str], relevant: Collection[str]) -> float:
    """Share of the document's retrieved passages that are relevant (0 if none retrieved)."""
    if not ranked_passages:
        return 0.0
    rel = set(relevant)
    return sum(1 for pid in ranked_passages if pid in rel) / len(ranked_passages)


def _by_document(hits: Iterable[PassageHit], qid: str) -> dict[str, list[str]]:
    ordered = sorted(hits, key=lambda h: -float(h[2]))  # stable: ties keep the run's order
    per_doc: dict[str, list[str]] = {}
    seen: set[tuple[str, str]] = set()
    for doc, pid, _ in ordered:
        if (doc, pid) in seen:
            raise ValueError(f"passage {pid} of document {doc} appears twice for query {qid}")
        seen.add((doc, pid))
        per_doc.setdefault(doc, []).append(pid)
    return per_doc


def evaluate_passages(run: PassageRun, qrels: PassageQrels, *, retrieved_only: bool = False) -> PassageReport:
    """MAP(D) and PREC(D) of a passage run (see the module docstring)."""
    judged = {qid: {doc: set(pids) for doc, pids in docs.items() if pids} for qid, docs in qrels.items()}
    judged = {qid: docs for qid, docs in judged.items() if docs}
    if not judged:
        raise ValueError("no query in the passage qrels has a relevant passage; nothing to evaluate")
    per_query: dict[str, dict[str, float]] = {}
    for qid, rel_docs in judged.items():
        per_doc = _by_document(run.get(qid, ()), qid)
        docs = [d for d in rel_docs if d in per_doc] if retrieved_only else list(rel_docs)
        if not docs:
            per_query[qid] = {"map(d)": 0.0, "prec(d)": 0.0}
            continue
        ap = [average_precision_in_document(per_doc.get(d, []), rel_docs[d]) for d in docs]
        prec = [precision_in_document(per_doc.get(d, []), rel_docs[d]) for d in docs]
        per_query[qid] = {"map(d)": sum(ap) / len(docs), "prec(d)": sum(prec) / len(docs)}
    aggregate = {m: sum(v[m] for v in per_query.values()) / len(per_query) for m in PASSAGE_MEASURES}
    return PassageReport(aggregate=aggregate, per_query=per_query)


def passage_doc(passage_id: str) -> str:
    """The publication id a passage id belongs to (``EP0640886B1/d/2/p3`` -> ``EP0640886B1``)."""
    doc, sep, _ = passage_id.partition("/")
    if not sep or not doc:
        raise ValueError(f"not a passage id: {passage_id!r} (expected DOC/..., e.g. EP0640886B1/claims/1)")
    return doc


def read_passage_run(path: str | Path) -> PassageRun:
    """A TREC run whose document column holds passage ids (``qid Q0 DOC/... rank score tag``)."""
    from training.evaluation.trec import read_run

    return {qid: [(passage_doc(pid), pid, score) for pid, score in scores.items()]
            for qid, scores in read_run(path).items()}


def read_passage_qrels(path: str | Path) -> PassageQrels:
    """TREC qrels over passage ids (``qid 0 DOC/... rel``); passages with rel > 0 are relevant."""
    from training.evaluation.trec import read_qrels

    out: dict[str, dict[str, set[str]]] = {}
    for qid, judged in read_qrels(path).items():
        for pid, rel in judged.items():
            docs = out.setdefault(qid, {})
            docs.setdefault(passage_doc(pid), set())
            if rel > 0:
                docs[passage_doc(pid)].add(pid)
    return out
