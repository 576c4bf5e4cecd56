"""``priorart-lab experiment feedback``: relevance feedback (Rocchio, service/retrieval/feedback.py) on the real data.

The real tasks have one relevant document per topic, so feedback has nothing left to find. This task has
several, by classification: a topic is a document's first English claim (reference signs stripped), and
the relevant documents are the *other* documents of the corpus that share its first classification code's
main group (CPC first, then IPC: ``service.codes.record_codes``). Topics need at least ``min_relevant``
of them. The topic's own document is removed from every ranking (it would be found by its own words).

Per topic: search (BM25 with translation, the engine's pipeline, top ``depth``; in the fused order, ``evidence_docs``
0 unless given, so that the Rocchio runs and the first stage's pseudo feedback are compared on one ranking); the
first relevant hit
is marked relevant (the analyst's first find) and the search runs again with that feedback. Measured
on the *residual* ranking (the marked document removed from both runs): reciprocal rank of the first
remaining relevant document and recall@depth of the remaining relevant documents, before and after, with
the paired randomisation test. Topics with no relevant document in the first ranking get no feedback and
are counted, not measured.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from service.codes import record_codes
from service.corpus.record import PatentRecord
from service.schema import FeedbackRequest, SearchRequest
from training.evaluation import randomisation_test
from training.tasks import strip_reference_signs


@dataclass
class FeedbackResult:
    topics: int
    measured: int
    no_relevant_found: int
    mean_relevant: float
    before: dict[str, float]
    after: dict[str, float]
    p: dict[str, float]
    depth: int
    terms: int
    min_relevant: int
    added_example: dict[str, Any] = field(default_factory=dict)
    # pseudo-relevance feedback (no mark: the top N documents taken as relevant), per N: measure -> value / p vs before
    prf: dict[str, dict[str, float]] = field(default_factory=dict)
    prf_p: dict[str, dict[str, float]] = field(default_factory=dict)


def main_group(code: str) -> str:
    return code.split("/")[0]


def feedback_topics(records: Sequence[PatentRecord], min_relevant: int = 3) -> list[tuple[PatentRecord, set[str]]]:
    """(topic record, ids of the other documents sharing its first code's main group), English claims only."""
    by_group: dict[str, set[str]] = {}
    for rec in records:
        for code in {main_group(c) for c in record_codes(rec)}:
            by_group.setdefault(code, set()).add(rec.id)
    out = []
    for rec in sorted(records, key=lambda r: r.id):
        codes = record_codes(rec)
        if not codes or not rec.claims.get("en"):
            continue
        rel = by_group[main_group(codes[0])] - {rec.id}
        if len(rel) >= min_relevant:
            out.append((rec, rel))
    return out


def run_feedback(records: Sequence[PatentRecord], *, depth: int = 100, terms: int = 10, min_relevant: int = 3,
                 index_dir: Path | None = None, prf: Sequence[int] = (), evidence_docs: int = 0) -> FeedbackResult:
    from service.engine import Engine
    from training.build import build_index

    with tempfile.TemporaryDirectory(prefix="priorart-feedback-") as tmp:
        idx = index_dir or Path(tmp) / "index"
        if index_dir is None:
            # (word match alone: the experiment measures the first stage's feedback, as documented)
            build_index(list(records), idx, progress=False, ranker="none", dense=False)
        engine = Engine.load(idx, verify=False)
        topics = feedback_topics(records, min_relevant)
        rr0: list[float] = []
        rr1: list[float] = []
        rc0: list[float] = []
        rc1: list[float] = []
        rr_prf: dict[int, list[float]] = {n: [] for n in prf}
        rc_prf: dict[int, list[float]] = {n: [] for n in prf}
        skipped = 0
        example: dict[str, Any] = {}
        n_rel = 0
        for rec, rel in topics:
            first = min(rec.claims["en"], key=lambda c: c.num)
            req = SearchRequest(query=strip_reference_signs(first.text), lang="en", k=depth + 1,
                                collapse_families=False, evidence_docs=evidence_docs)
            before = [h.id for h in engine.search(req).results if h.id != rec.id][:depth]
            marked = next((d for d in before if d in rel), None)
            if marked is None:
                skipped += 1
                continue
            resp = engine.search(req.model_copy(update={"feedback": FeedbackRequest(relevant=[marked], terms=terms)}))
            after = [h.id for h in resp.results if h.id != rec.id][:depth]
            if not example and resp.query.feedback is not None:
                example = {"topic": rec.id, "marked": marked, "added": resp.query.feedback.added_terms.get("en", [])}
            remaining = rel - {marked}
            n_rel += len(remaining)
            runs = [(before, rr0, rc0), (after, rr1, rc1)]
            for n in prf:  # the first stage's pseudo feedback from the top n documents (the topic's own left out)
                runs.append((_pseudo_feedback_run(engine, req.query, rec.id, n, depth), rr_prf[n], rc_prf[n]))
            for run, rr, rc in runs:
                residual = [d for d in run if d != marked]
                rank = next((i for i, d in enumerate(residual, 1) if d in remaining), None)
                rr.append(1.0 / rank if rank else 0.0)
                rc.append(len(remaining & set(residual[:depth])) / len(remaining))
        n = len(rr0)
        if n == 0:
            raise ValueError("no topic had a relevant document in its first ranking: nothing to measure")

        def mean(xs: list[float]) -> float:
            return sum(xs) / len(xs)

        return FeedbackResult(
            topics=len(topics), measured=n, no_relevant_found=skipped, mean_relevant=n_rel / n,
            before={"MRR": mean(rr0), f"R@{depth}": mean(rc0)}, after={"MRR": mean(rr1), f"R@{depth}": mean(rc1)},
            p={"MRR": randomisation_test(rr1, rr0), f"R@{depth}": randomisation_test(rc1, rc0)},
            depth=depth, terms=terms, min_relevant=min_relevant, added_example=example,
            prf={str(n): {"MRR": mean(rr_prf[n]), f"R@{depth}": mean(rc_prf[n])} for n in prf},
            prf_p={str(n): {"MRR": randomisation_test(rr_prf[n], rr0), f"R@{depth}": randomisation_test(rc_prf[n], rc0)}
                   for n in prf})


def _pseudo_feedback_run(engine: Any, text: str, own: str, n: int, depth: int) -> list[str]:
    """The first stage's ranking after pseudo-relevance feedback from its top ``n`` documents other than the topic's
    own (which a new application's claim would not find in the index), the own document removed."""
    from service.query import Query, resolve

    fs = engine.pipeline.first_stage
    own_row = fs.docs.row(own)
    q = Query(text=text, lang="en", k=depth + 1, depth=depth + 1, explain=False)
    resolve(q, fs.docs)
    rows = fs.run_pseudo_feedback(q, n, skip=(own_row,)).rows
    return [fs.docs.ids[int(r)] for r in rows if int(r) != own_row][:depth]


def format_feedback(r: FeedbackResult) -> str:
    lines = [f"feedback on the first relevant hit: {r.measured} of {r.topics} topics measured "
             f"({r.no_relevant_found} had no relevant document in the top {r.depth}); "
             f"{r.mean_relevant:.1f} remaining relevant documents per topic; {r.terms} expansion terms",
             f"{'measure':10s} {'before':>8s} {'after':>8s} {'p':>8s}"]
    for m in r.before:
        lines.append(f"{m:10s} {r.before[m]:8.4f} {r.after[m]:8.4f} {r.p[m]:8.4f}")
    if r.added_example:
        lines.append(f"e.g. {r.added_example['topic']}, marked {r.added_example['marked']}: added "
                     f"{', '.join(r.added_example['added'])}")
    for n, figures in r.prf.items():
        lines.append(f"pseudo feedback from the top {n} (no mark): " + ", ".join(
            f"{k} {v:.4f} (p {r.prf_p[n][k]:.4f})" for k, v in figures.items()))
    return "\n".join(lines)
