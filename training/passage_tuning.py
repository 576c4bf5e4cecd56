"""Tuning of the passage ranker (alpha, beta, sigma by grid search) and its proxy judgments.

Used by ``priorart-lab experiment passages`` and the tests, never by the service.

Grid search (the paper's Table 1): alpha and beta from 0 to 1 in steps of 0.1, sigma in
{0.5, 1, 2, 5}, maximising MAP(D) on training queries. beta is searched only for the variants
that use it, sigma only for the propagation variants. Every (query, sigma) is scored once by the
array ranker (:meth:`service.passages.PassageIndex.score`); each (alpha, beta) is then a linear
combination of the stored components, and MAP(D) is computed on arrays (equal to
:func:`training.evaluation.passages.evaluate_passages`, which a custom ``metric`` uses instead).

Proxy judgments (no passage qrels exist in the shared data)
-----------------------------------------------------------
:func:`reference_sign_queries` derives passage judgments from *reference signs*: European claims
carry the reference numerals of the drawings in parentheses (Rule 43(7) EPC: "a housing (4) ..."),
and the description paragraphs that describe those elements name the same numerals ("the housing 4").
For a claim with signs, the query is the claim text **with the signs removed**, and the relevant
passages are the description paragraphs of the same document that mention at least
``min(2, number of signs)`` of the claim's signs. The judgment comes from the drafter's numbering,
not from any text similarity, so it is not circular with the scorer. :func:`proxy_tuning_queries`
turns these into :class:`TuningQuery` objects over a passage index of all given records; the
query's own document is scored without its claims (so the query cannot find itself).

Weaknesses, to keep in mind when reading tuned values:

- It is an intra-document task (the relevant document is the query's own), unlike CLEF-IP (claims
  -> passages of *cited* documents). MAP(D) only looks inside relevant documents, so the document
  component only matters through the ``k`` cut-off; ``alpha`` and ``beta`` are weakly identified.
- Paragraphs that describe a drawn element share vocabulary with the claim (lexical bias), and they
  cluster in the "detailed description" sections, which favours structural context.
- Sign detection in paragraphs is heuristic (a number after a non-stop word, not after "Fig.",
  "claim", units ...): some numbers that are not signs count, some signs are missed.
- Few documents: only publications whose claims carry signs; claims of one document are correlated.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from service.corpus.record import PatentRecord
from service.passages import PAPER_SIGMAS, PassageIndex, PassageScores
from service.passages.lm import Tables, check_params
from service.passages.tree import claim_passage_ids, description_passage_ids
from service.text.analysis import SUPPORTED_LANGS, get_analyzer, normalise, stopwords

Run = Mapping[str, list[tuple[str, str, float]]]
Qrels = Mapping[str, Mapping[str, Collection[str]]]
Metric = Callable[[Run, Qrels], float]


@dataclass(frozen=True)
class TuningQuery:
    """A training query: its candidate rows (in candidate order) and judgments (doc id -> relevant passage ids)."""

    qid: str
    query: str
    lang: str
    rows: Sequence[int]
    relevant: Mapping[str, Collection[str]]
    first_stage: Sequence[float] | None = None
    exclude_claims: Sequence[bool] | None = None  # per candidate: score it without its claims


@dataclass(frozen=True)
class TuneResult:
    """Best parameters of one variant and the value of every grid point (alpha, beta, sigma, metric)."""

    variant: str
    alpha: float
    beta: float | None
    sigma: float | None
    value: float
    grid: list[tuple[float, float | None, float | None, float]]


class _Judged:
    """One scored query prepared for fast MAP(D): candidate index and relevance of every passage."""

    def __init__(self, scores: PassageScores, relevant: Mapping[str, Collection[str]]) -> None:
        self.scores = scores
        cand_of = {scores.index.doc_id(int(r)): i for i, r in enumerate(scores.rows.tolist())}
        # (candidate index, number of relevant passages, the document's passages)
        self.docs: list[tuple[int, int, npt.NDArray[np.int64]]] = []
        self.rel = np.zeros(len(scores), dtype=bool)
        for doc, pids in relevant.items():
            want = set(pids)
            if not want:
                continue
            cand = cand_of.get(doc, -1)
            idx = np.flatnonzero(scores.doc_index == cand) if cand >= 0 else np.zeros(0, dtype=np.int64)
            self.docs.append((cand, len(want), idx))
            for i in idx.tolist():
                if scores.passage_id(i) in want:
                    self.rel[i] = True

    def map_d(self, alpha: float, beta: float, k: int) -> float:
        """MAP(D) of this query's top ``k`` passages (as :func:`evaluate_passages` computes it).

        Only the relevant documents' passages are ordered: a passage is in the top ``k`` when its score
        beats the k-th best, or ties it at a low enough index (the ranker's tie order).
        """
        sc = self.scores
        scores = sc.key(sc.combine(alpha, beta))  # the ranker's order: passages with a query term first
        n = int(scores.size)
        kth = -np.inf
        room = n
        tied = np.zeros(0, dtype=np.int64)
        if k < n:
            kth = float(-np.partition(-scores, k - 1)[k - 1])
            room = k - int(np.count_nonzero(scores > kth))
            tied = np.flatnonzero(scores == kth)
        ap: list[float] = []
        for cand, n_rel, idx in self.docs:
            if cand < 0 or not idx.size:
                ap.append(0.0)
                continue
            s_doc = scores[idx]
            keep = s_doc > kth
            if k < n:
                keep |= (s_doc == kth) & (np.searchsorted(tied, idx) < room)
            ranked = idx[keep][np.lexsort((idx[keep], -s_doc[keep]))]
            hits = self.rel[ranked]
            if not hits.any():
                ap.append(0.0)
                continue
            rank = np.flatnonzero(hits) + 1.0
            ap.append(float(np.sum(np.arange(1, rank.size + 1) / rank)) / n_rel)
        return sum(ap) / len(ap) if ap else 0.0


def _grid_values(step: float) -> list[float]:
    steps = round(1.0 / step)
    return sorted({round(min(1.0, i * step), 10) for i in range(steps + 1)} | {1.0})


def score_queries(
    index: PassageIndex, queries: Sequence[TuningQuery], *, variant: str, sigma: float, doc_score: str = "lm",
    translations: Tables | None = None,
) -> list[PassageScores]:
    """Score every query once (the expensive part; alpha and beta only recombine the components)."""
    return [index.score(q.query, q.lang, q.rows, q.first_stage, variant=variant, sigma=sigma, doc_score=doc_score,
                        translations=translations, exclude_claims=q.exclude_claims) for q in queries]


def tune(
    index: PassageIndex,
    queries: Sequence[TuningQuery],
    grid_step: float = 0.1,
    *,
    variant: str = "qsf_passage_propagate",
    sigmas: Sequence[float] = PAPER_SIGMAS,
    k: int = 1500,
    doc_score: str = "lm",
    metric: Metric | None = None,
    translations: Tables | None = None,
) -> TuneResult:
    """Grid search of alpha, beta (step ``grid_step``) and sigma maximising ``metric`` (default MAP(D)).

    ``metric(run, qrels)`` takes ``{qid: [(doc_id, passage_id, score), ...]}`` and
    ``{qid: {doc_id: relevant passage ids}}``. Ties keep the first grid point (sigmas in the given
    order, then alpha, then beta, ascending).
    """
    if not queries:
        raise ValueError("tune needs at least one training query")
    if not 0 < grid_step <= 1:
        raise ValueError(f"grid_step must be in (0, 1], got {grid_step}")
    check_params(variant, 0.0, 0.0, 1.0)
    values = _grid_values(grid_step)
    betas: list[float | None] = list(values) if variant not in ("qsf_v", "qsf_v_title") else [None]
    sigma_grid: list[float | None] = list(sigmas) if variant.endswith("propagate") else [None]
    qrels = {q.qid: q.relevant for q in queries}
    judged = [q for q in queries if any(q.relevant.values())]
    if not judged:
        raise ValueError("no training query has a relevant passage")
    grid: list[tuple[float, float | None, float | None, float]] = []
    for sig in sigma_grid:
        scored = score_queries(index, queries, variant=variant, sigma=sig or 1.0, doc_score=doc_score,
                               translations=translations)
        prepared = [_Judged(s, q.relevant) for s, q in zip(scored, queries, strict=True) if any(q.relevant.values())]
        for a, b in itertools.product(values, betas):
            beta = 0.5 if b is None else b
            if metric is None:
                value = sum(j.map_d(a, beta, k) for j in prepared) / len(prepared)
            else:
                run = {q.qid: s.run(a, beta, k) for q, s in zip(queries, scored, strict=True)}
                value = float(metric(run, qrels))
            grid.append((a, b, sig, value))
    best = max(grid, key=lambda g: g[3])  # max() keeps the first of equal values
    return TuneResult(variant=variant, alpha=best[0], beta=best[1], sigma=best[2], value=best[3], grid=grid)


def evaluate_params(
    index: PassageIndex, queries: Sequence[TuningQuery], *, variant: str, alpha: float, beta: float | None,
    sigma: float | None, k: int = 1500, doc_score: str = "lm",
    translations: Tables | None = None,
) -> dict[str, float]:
    """MAP(D) per judged query for one parameter setting (query id -> value)."""
    scored = score_queries(index, queries, variant=variant, sigma=sigma or 1.0, doc_score=doc_score,
                           translations=translations)
    return {q.qid: _Judged(s, q.relevant).map_d(alpha, 0.5 if beta is None else beta, k)
            for s, q in zip(scored, queries, strict=True) if any(q.relevant.values())}


# ------------------------------------------------------------------------- proxy judgments (tuning)

_SIGN_GROUP_RE = re.compile(
    r"\(\s*(\d{1,4}[a-z]?'?(?:\s*(?:,|;|-|and|und|et|or|oder|ou)\s*\d{1,4}[a-z]?'?)*)\s*\)"
)
_SIGN_RE = re.compile(r"\d{1,4}[a-z]?")
_MENTION_RE = re.compile(
    r"([^\W\d_]{2,})\.?\s*\(?\s*(\d{1,4}[a-z]?)(?![\w,.]\d|\s*(?:%|°|mm\b|cm\b|µm\b|nm\b|m\b|g\b|kg\b|mg\b|ml\b|"
    r"l\b|s\b|min\b|h\b|bar\b|v\b|hz\b|w\b|k\b|mol\b))",
    re.IGNORECASE,
)
_NOT_SIGN_WORDS = frozenset({
    "fig", "figs", "figure", "figures", "figur", "figuren", "abb", "abbildung", "abbildungen", "claim", "claims",
    "anspruch", "ansprüche", "anspruchs", "revendication", "revendications", "example", "examples", "beispiel",
    "beispiele", "exemple", "exemples", "table", "tables", "tabelle", "tabellen", "tableau", "tableaux", "page",
    "pages", "seite", "seiten", "line", "lines", "zeile", "zeilen", "column", "columns", "spalte", "spalten", "no",
    "nr", "number", "nummer", "numéro", "step", "schritt", "étape", "about", "approximately", "approx", "etwa", "ca",
    "environ", "than", "als", "que", "to", "bis", "à", "and", "und", "et", "or", "oder", "ou", "of", "von", "de",
})


def claim_signs(text: str) -> tuple[set[str], str]:
    """Reference signs in parentheses in a claim, and the claim text with them removed."""
    signs: set[str] = set()
    for m in _SIGN_GROUP_RE.finditer(text):
        signs.update(s.lower() for s in _SIGN_RE.findall(m.group(1)))
    stripped = re.sub(r"\s+([,.;:])", r"\1", _SIGN_GROUP_RE.sub(" ", text))
    stripped = re.sub(r"\s{2,}", " ", stripped).strip()
    return signs, stripped


def paragraph_signs(text: str, lang: str) -> set[str]:
    """Numbers a paragraph uses as reference signs (heuristic: after a word that is no stop word)."""
    stop = stopwords(lang) if lang in SUPPORTED_LANGS else frozenset()
    out: set[str] = set()
    for m in _MENTION_RE.finditer(text):
        word = normalise(m.group(1))
        if word in _NOT_SIGN_WORDS or word in stop:
            continue
        out.add(m.group(2).lower())
    return out


@dataclass(frozen=True)
class ProxyQuery:
    """A claim (signs removed) and the description passages of its own document that share its signs."""

    qid: str
    doc_id: str
    query: str
    lang: str
    relevant: frozenset[str]
    signs: frozenset[str]


def reference_sign_queries(
    record: PatentRecord, *, min_terms: int = 5, max_relevant_share: float = 0.5
) -> list[ProxyQuery]:
    """Proxy passage judgments from reference signs (see the module docstring), one per usable claim.

    A claim is used when it has signs, at least ``min_terms`` analysed terms once the signs are
    removed, and its relevant paragraphs are at most ``max_relevant_share`` of the description.
    """
    lang = record.lang if record.lang in SUPPORTED_LANGS else None
    if lang is None or not record.description or not record.claims.get(lang):
        return []
    paragraphs = [(pid, paragraph_signs(text, lang)) for pid, _, text in description_passage_ids(record)]
    if not paragraphs:
        return []
    analyzer = get_analyzer(lang)
    out: list[ProxyQuery] = []
    for pid, text in claim_passage_ids(record, lang):
        signs, stripped = claim_signs(text)
        if not signs or len(analyzer(stripped)) < min_terms:
            continue
        need = min(2, len(signs))
        relevant = frozenset(p for p, ps in paragraphs if len(ps & signs) >= need)
        if not relevant or len(relevant) > max_relevant_share * len(paragraphs):
            continue
        claim_no = pid.rsplit("/", 1)[1]
        out.append(ProxyQuery(f"{record.id}-c{claim_no}", record.id, stripped, lang, relevant, frozenset(signs)))
    return out


def proxy_tuning_queries(
    records: Sequence[PatentRecord], *, max_per_doc: int | None = 3, index: PassageIndex | None = None,
    min_terms: int = 5, max_relevant_share: float = 0.5,
) -> tuple[PassageIndex, list[TuningQuery]]:
    """A passage index of ``records`` and the :func:`reference_sign_queries` over them.

    Candidates are all records (first-stage score 0), the query's own document without its claims.
    ``max_per_doc`` keeps the first claims of each document (claim 1 first). ``index``: a passage
    index already built from ``records`` (same rows).
    """
    index = index if index is not None else PassageIndex.from_records(records)
    if index.n_docs != len(records):
        raise ValueError(f"the passage index holds {index.n_docs} documents, {len(records)} records given")
    rows = list(range(len(records)))
    out: list[TuningQuery] = []
    for row, rec in enumerate(records):
        queries = reference_sign_queries(rec, min_terms=min_terms, max_relevant_share=max_relevant_share)
        if max_per_doc is not None:
            queries = queries[:max_per_doc]
        exclude = [r == row for r in rows]
        for q in queries:
            out.append(TuningQuery(q.qid, q.query, q.lang, rows, {q.doc_id: q.relevant}, exclude_claims=exclude))
    return index, out
