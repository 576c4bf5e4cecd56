"""Reference oracle: the passage ranker as it was before the build-time passage index (issue 14).

**Not used by the service.** ``service/passages/`` ranks passages from arrays written at build time;
this module keeps the previous implementation, which parses every candidate record at query time,
unchanged, for two uses only:

- the regression test (``tests/service/passages/test_passage_regression.py``) that checks that the array
  ranker gives the same scores on the real data (within 1e-9), and
- ``priorart-lab bench passages``, which times "today's" per-query cost in the same run as the new one.

It is the definition the array ranker is checked against: a change of the scoring changes both, in one
commit (issue 28 did: every language a query reaches is measured against the query's ideal text in that
language, query terms no candidate text has count as seen once instead of being dropped, and a passage
without any query term scores 0, below every passage with one). The scalar
:func:`lm_similarity` and :class:`BackgroundModel` live only here (tests use them).

Given the first-stage candidate documents of a query, every passage of every candidate is scored with
its own text and with context propagated through the document's structure; the best ``k`` passages
(1000 documents -> 1500 passages in the paper) are returned with their score components and the
character spans of their query-term matches.

Document model
--------------
Each :class:`~service.corpus.record.PatentRecord` becomes a tree whose inner nodes are *sections*
and whose leaves are *passages*::

    root (title = the document title)
    +-- "Abstract"     -> one passage: the abstract                 id  DOC/abstract
    +-- "Description"  -> headed sections (nested as in the record) -> paragraphs
    |                                                               id  DOC/d/3.2/p4
    +-- "Claims"       -> one passage per claim                     id  DOC/claims/1

Passage ids (they appear in the API and in passage qrels, keep them stable):

- ``DOC/d/I.J.../pK``: the K-th paragraph (1-based, counted in ``Section.paragraphs`` including blank
  ones, which are skipped but keep their number) of the record's description section reached by
  taking section ``I`` of ``record.description`` (1-based), then its ``J``-th nested section, ...
  ``EP0640886B1/d/3.2/p4`` is paragraph 4 of the 2nd subsection of the 3rd top-level section. The id
  depends only on the record's description tree, not on the query language or the ranker options.
- ``DOC/claims/N``: claim number ``N``; the same id in every language (EP claims are aligned claim by
  claim, so a judgment on a claim holds across languages). A repeated claim number gets
  ``DOC/claims/N_P`` with ``P`` its 1-based position in the claim list.
- ``DOC/abstract``: the abstract.

Description sections without a heading (the paragraphs before the first heading) are not tree nodes:
their paragraphs and subsections hang from the nearest headed ancestor (or from "Description").
"Abstract", "Description" and "Claims" are structural labels: they appear in ``section_path`` but are
not title text (they are not part of the document and are in English whatever the language).
Claims and abstract are taken in the query language when the record has them, else English, else
the first language available; the description is in the record's language (``record.lang``).

Tree distance is the number of edges between two nodes (siblings: 2; a passage and its direct
parent section: 1).

Similarity
----------
``Sim(q, x) = exp(-CE(theta_q^MLE || theta_x^Dir))`` with
``p_Dir(w | x) = (c(w, x) + mu * p(w | C)) / (|x| + mu)``, ``mu = 1000`` (paper, Zhai & Lafferty).
Texts are analysed with the indexing :class:`~service.text.analysis.Analyzer` of their own language.

- Collection model ``p(w | C)``: by default the candidate set in that language (all passages plus
  headings and titles of the candidate documents, each text counted once); with ``background`` a
  :class:`BackgroundModel` per language (a term missing from it gets half a count).
- Query terms that occur in no candidate text of a language are dropped and the query model is
  renormalised (they would score ``log 0`` for every text). If no query term is left, every text of
  that language gets ``Sim = 0``.
- Cross-language texts (an English description under a German query): the query model in the
  passage's language is the PSQ translation of the query model when a translation table for that
  pair is given (``translations={"de": table_de_en}``), else the query text analysed with the other
  language's analyzer (codes, numbers, formulas and names still match). Scores of different
  languages are not strictly comparable; this is the main limitation for mixed candidate sets.
- ``Sim(q, doc)``: the document's text in one language: the query language if the document has any
  text in it, else the language holding most of its text.

Variants (paper equations 3-12; ``Sim_norm`` = min-max over the candidate set)
------------------------------------------------------------------------------
- ``qsf_v``: ``a * Sim_norm(q, g) + (1 - a) * Sim_norm(q, doc)`` (eq. 3).
- ``qsf_v_title``: ``a * Sim_title_norm(q, g) + (1 - a) * Sim_norm(q, doc)`` (eq. 5-6), where
  ``Sim_title(q, g)`` scores the passage text concatenated with the titles of all its ancestor sections
  up to and including the root (the document title in the passage's language).
- ``qsf_section``: ``a * Sim_title_norm(g) + (1 - a) * (b * Sim_norm(doc) + (1 - b) * Sim_sec_norm(parent))``
  (eq. 7-8); ``Sim_sec(s)`` is the average of the scores of ``s``'s direct children (``Sim_title`` of
  its passages, ``Sim_sec`` of its subsections; sections without passages below them are left out).
- ``qsf_section_propagate``: as ``qsf_section`` with ``propag_section_norm(g)`` where
  ``propag_section(g) = mean over ancestors s of g (parent .. root) of Sim_sec(s) * w(dist(g, s))``
  (eq. 9-10).
- ``qsf_passage_propagate``: as ``qsf_section`` with ``propag_passage_norm(g)`` where
  ``propag_passage(g) = mean over the other passages g' of the document of Sim_title(g') * w(dist(g, g'))``
  (eq. 11-12; the paper writes ``distance(g, s)`` there, a typo for ``distance(g, g')``).

``w(d) = exp(-d^2 / (2 sigma^2))`` (eq. 13). Decisions where the paper leaves room:

- "average" (the paper's AVG aggregation) is the plain mean of the weighted values, divided by the
  number of propagating elements, not a weight-normalised mean (the paper aggregates the products).
  A document's only passage gets ``propag_passage = 0``.
- Min-max sets: passage scores over all passages of all candidates (``G_init``); document scores over
  the candidate documents; ``Sim_sec``/``propag`` over all passages (each passage's value). When all
  values of a set are equal, the normalised values are 0.
- The document component is ``Sim(q, doc)`` as in the paper; ``doc_score="first_stage"`` uses the
  first-stage score of the candidate instead (also min-max normalised).
- Ties are broken by candidate order, then by passage order in the document (abstract, description,
  claims).
"""

from __future__ import annotations

import logging
import math
import re
import threading
import unicodedata
from collections import Counter, OrderedDict
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
from scipy import sparse

from service.corpus.record import PatentRecord, Section
from service.passages.lm import (
    DEFAULT_DOC_SCORE,
    DEFAULT_MU,
    DEFAULT_MU_TRANSLATED,
    QueryImage,
    betas_of,
    holds_in_order,
    is_reference_sign,
    query_models,
    rho_of,
)
from service.passages.reader import PassageReader
from service.passages.tree import layout
from service.text.analysis import SUPPORTED_LANGS, TOKEN_RE, Analyzer, get_analyzer, normalise, stopwords

if TYPE_CHECKING:
    from service.text.translation import TranslationTable

logger = logging.getLogger(__name__)

VARIANTS = ("qsf_v", "qsf_v_title", "qsf_section", "qsf_section_propagate", "qsf_passage_propagate")
"""Valid ``variant`` names, in the paper's order."""
PAPER_SIGMAS = (0.5, 1.0, 2.0, 5.0)
PAPER_PARAMS: dict[str, tuple[float, float | None]] = {
    "qsf_v": (0.8, None),
    "qsf_v_title": (0.9, None),
    "qsf_section": (0.6, 0.1),
    "qsf_section_propagate": (0.6, 0.3),
    "qsf_passage_propagate": (0.5, 0.2),
}
"""(alpha, beta) the paper learned on CLEF-IP 2012 training queries (its Table 4; sigma not reported)."""
DOC_SCORES = ("lm", "first_stage")
ABSTRACT_LABEL, DESCRIPTION_LABEL, CLAIMS_LABEL = "Abstract", "Description", "Claims"

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
I32Array = npt.NDArray[np.int32]
F32Array = npt.NDArray[np.float32]
_MAX_DIST = 255  # distances are stored as uint8; deeper trees are clipped (never seen in patents)


# --------------------------------------------------------------------------------------------- model


@dataclass(frozen=True)
class Passage:
    """One leaf of a document tree."""

    doc_id: str
    passage_id: str
    section_path: tuple[str, ...]  # ancestor section labels/headings, outermost first (root excluded)
    text: str
    lang: str
    kind: str  # "abstract" | "description" | "claim"
    depth: int  # edges from the root


@dataclass(frozen=True)
class PassageHit:
    """A ranked passage with the parts of its score and the character spans of its query-term matches."""

    doc_id: str
    passage_id: str
    section_path: list[str]
    text: str
    score: float
    components: dict[str, float]
    highlights: list[tuple[int, int]]
    title: str | None = None
    lang: str | None = None


def gaussian_weight(distance: float | npt.ArrayLike, sigma: float) -> FloatArray:
    """``exp(-d^2 / (2 sigma^2))`` (paper eq. 13), element-wise."""
    if not sigma > 0:
        raise ValueError(f"sigma must be > 0, got {sigma}")
    d = np.asarray(distance, dtype=np.float64)
    return np.asarray(np.exp(-(d * d) / (2.0 * sigma * sigma)), dtype=np.float64)


def lm_similarity(
    query_terms: Sequence[str], text_terms: Sequence[str], collection: Mapping[str, float], mu: float = 1000.0
) -> float:
    """Reference (unvectorised) ``exp(-CE(query MLE || text Dirichlet))`` for analysed term lists.

    ``collection`` maps a term to ``p(w | C)``; query terms with ``p(w | C) = 0`` are dropped and the
    query model renormalised (as in :class:`PassageRanker`). Returns 0 when no query term is left.
    """
    if mu <= 0:
        raise ValueError(f"mu must be > 0, got {mu}")
    q = Counter(t for t in query_terms if collection.get(t, 0.0) > 0)
    total_q = sum(q.values())
    if not total_q:
        return 0.0
    tf = Counter(text_terms)
    length = len(text_terms)
    ce = 0.0
    for term, n in q.items():
        p = (tf.get(term, 0) + mu * collection[term]) / (length + mu)
        ce -= (n / total_q) * math.log(p)
    return math.exp(-ce)


def minmax(values: npt.ArrayLike) -> FloatArray:
    """Min-max normalise to [0, 1]; a constant (or empty) vector becomes zeros."""
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        return v.copy()
    lo, hi = float(v.min()), float(v.max())
    if not hi > lo:
        return np.zeros_like(v)
    return (v - lo) / (hi - lo)


class BackgroundModel:
    """A unigram collection model for one language: ``p(w | C) = cf(w) / N`` (unseen: seen once, ``1 / N``)."""

    def __init__(self, counts: Mapping[str, int], lang: str) -> None:
        if lang not in SUPPORTED_LANGS:
            raise ValueError(f"unsupported language {lang!r}; choose one of {', '.join(SUPPORTED_LANGS)}")
        self.lang = lang
        self.counts = dict(counts)
        self.total = float(sum(self.counts.values()))
        if self.total <= 0:
            raise ValueError("background model has no term counts")

    @classmethod
    def from_records(cls, records: Iterable[PatentRecord], lang: str) -> BackgroundModel:
        """Count the analysed text of ``records`` in ``lang`` (title, abstract, claims, description)."""
        analyzer = get_analyzer(lang)
        counts: Counter[str] = Counter()
        for rec in records:
            counts.update(analyzer(rec.text(lang)))
        return cls(counts, lang)

    def prob(self, term: str) -> float:
        return self.counts.get(term, 1) / self.total


def background_of(records: Iterable[PatentRecord]) -> dict[str, BackgroundModel]:
    """Background models of every text of ``records``: each title, heading, abstract, claim and description
    paragraph in every language, analysed with the default analyzers (what a passage index of those records
    counts)."""
    counts: dict[str, Counter[str]] = {lang: Counter() for lang in SUPPORTED_LANGS}
    for rec in records:
        for unit in layout(rec).units:
            lang = SUPPORTED_LANGS[unit.lang]
            counts[lang].update(get_analyzer(lang)(unit.text))
    return {lang: BackgroundModel(c, lang) for lang, c in counts.items() if c}


def background_of_index(index: PassageReader) -> dict[str, BackgroundModel]:
    """A passage index's collection statistics (every title, heading and passage of a language; a generation's summed
    over its segments) as background models: the reference then scores with the collection model the array ranker
    reads."""
    counts: dict[str, dict[str, int]] = {lang: {} for lang in SUPPORTED_LANGS}
    for part in index.parts:
        for i in range(len(part.vocab)):
            lang, term = part.vocab.text(i).split("\0", 1)
            counts[lang][term] = counts[lang].get(term, 0) + int(part.vocab_cf[i])
    return {lang: BackgroundModel(c, lang) for lang, c in counts.items() if c}


# ------------------------------------------------------------------------------------ tree building


def _pick_lang(available: Iterable[str], lang: str) -> str | None:
    langs = [x for x in available]
    if not langs:
        return None
    if lang in langs:
        return lang
    if "en" in langs:
        return "en"
    order = {lang: i for i, lang in enumerate(SUPPORTED_LANGS)}
    return sorted(langs, key=lambda x: (order.get(x, len(order)), x))[0]


def description_passage_ids(record: PatentRecord) -> Iterator[tuple[str, tuple[str, ...], str]]:
    """``(passage id, heading path, text)`` of every non-blank description paragraph, in document order."""

    def visit(sec: Section, idx: tuple[int, ...], path: tuple[str, ...]) -> Iterator[tuple[str, tuple[str, ...], str]]:
        here = (*path, sec.heading) if sec.heading else path
        key = ".".join(str(i) for i in idx)
        for k, para in enumerate(sec.paragraphs, 1):
            if para.strip():
                yield f"{record.id}/d/{key}/p{k}", here, para
        for j, child in enumerate(sec.sections, 1):
            yield from visit(child, (*idx, j), here)

    for i, top in enumerate(record.description, 1):
        yield from visit(top, (i,), ())


def claim_passage_ids(record: PatentRecord, lang: str) -> list[tuple[str, str]]:
    """``(passage id, text)`` of the claims in ``lang`` (ids as in the module docstring)."""
    out: list[tuple[str, str]] = []
    seen: set[int] = set()
    for pos, claim in enumerate(record.claims.get(lang, []), 1):
        if not claim.text.strip():
            continue
        pid = f"{record.id}/claims/{claim.num}" if claim.num not in seen else f"{record.id}/claims/{claim.num}_{pos}"
        seen.add(claim.num)
        out.append((pid, claim.text))
    return out


@dataclass
class _Node:
    parent: int
    depth: int
    label: str | None  # shown in section_path (None for root and passages)
    title: str | None  # title text (headings, document title); None for structural labels
    title_lang: str | None
    passage: int = -1  # index into passages for leaves


@dataclass
class _LangBlock:
    """Term counts of one language's texts of one document (global term ids of that language)."""

    rows: IntArray  # doc passage index of each passage row
    p_rows: I32Array  # COO of passage-term counts
    p_cols: I32Array
    p_cnt: F32Array
    p_len: FloatArray
    h_rows: I32Array  # COO of title rows (headings + document title)
    h_cols: I32Array
    h_cnt: F32Array
    h_len: FloatArray
    anc_p: I32Array  # (passage row, title row) pairs: the title row is an ancestor of the passage
    anc_h: I32Array
    total_len: float  # analysed length of all the document's text in this language


@dataclass
class _DocTree:
    doc_id: str
    title: str | None
    passages: list[Passage]
    blocks: dict[str, _LangBlock]
    parent_sec: IntArray  # (n,) section row of each passage's direct parent
    sec_agg: FloatArray  # (n_sec, n): Sim_sec = sec_agg @ Sim_title
    anc_dist: npt.NDArray[np.uint8]  # (n, n_sec) distance to each ancestor section, 0 elsewhere
    depth: FloatArray  # (n,) number of ancestor sections
    pass_dist: npt.NDArray[np.uint8]  # (n, n) tree distance between passages

    def doc_lang(self, query_lang: str) -> str | None:
        if query_lang in self.blocks:
            return query_lang
        if not self.blocks:
            return None
        return max(self.blocks, key=lambda lang: (self.blocks[lang].total_len, lang))


def _count_rows(
    texts: Sequence[str], analyzer: Analyzer, vocab: dict[str, int]
) -> tuple[I32Array, I32Array, F32Array, FloatArray]:
    rows: list[int] = []
    cols: list[int] = []
    cnts: list[float] = []
    lens: list[float] = []
    for r, text in enumerate(texts):
        terms = analyzer(text)
        lens.append(float(len(terms)))
        for term, n in Counter(terms).items():
            tid = vocab.get(term)
            if tid is None:
                tid = vocab[term] = len(vocab)
            rows.append(r)
            cols.append(tid)
            cnts.append(float(n))
    return (
        np.asarray(rows, dtype=np.int32),
        np.asarray(cols, dtype=np.int32),
        np.asarray(cnts, dtype=np.float32),
        np.asarray(lens, dtype=np.float64),
    )


def build_tree(
    record: PatentRecord,
    lang: str,
    *,
    include_abstract: bool = True,
    include_claims: bool = True,
    vocabs: dict[str, dict[str, int]] | None = None,
) -> _DocTree:
    """Parse one record into its passage tree for a query in ``lang`` (see the module docstring)."""
    vocabs = {} if vocabs is None else vocabs
    nodes: list[_Node] = []
    passages: list[Passage] = []
    pnode: list[int] = []  # node of each passage

    def add(parent: int, label: str | None, title: str | None, title_lang: str | None) -> int:
        depth = nodes[parent].depth + 1 if parent >= 0 else 0
        nodes.append(_Node(parent, depth, label, title, title_lang))
        return len(nodes) - 1

    def path_of(node: int) -> tuple[str, ...]:
        labels: list[str] = []
        while node > 0:
            label = nodes[node].label
            if label is not None:
                labels.append(label)
            node = nodes[node].parent
        return tuple(reversed(labels))

    def add_passage(parent: int, pid: str, text: str, plang: str, kind: str) -> None:
        node = add(parent, None, None, None)
        nodes[node].passage = len(passages)
        passages.append(Passage(record.id, pid, path_of(parent), text, plang, kind, nodes[node].depth))
        pnode.append(node)

    # root: its title is the document title (per language, chosen per passage below)
    add(-1, None, None, None)
    desc_lang = record.lang if record.lang in SUPPORTED_LANGS else "en"

    abs_lang = _pick_lang([k for k, v in record.abstract.items() if v.strip() and k in SUPPORTED_LANGS], lang)
    if include_abstract and abs_lang is not None:
        sec = add(0, ABSTRACT_LABEL, None, None)
        add_passage(sec, f"{record.id}/abstract", record.abstract[abs_lang], abs_lang, "abstract")

    if record.description and (record.lang is None or record.lang in SUPPORTED_LANGS):  # as service/passages/tree.py
        dsec = add(0, DESCRIPTION_LABEL, None, None)

        def visit(sec: Section, idx: tuple[int, ...], parent: int) -> None:
            node = add(parent, sec.heading, sec.heading, desc_lang) if sec.heading else parent
            key = ".".join(str(i) for i in idx)
            for k, para in enumerate(sec.paragraphs, 1):
                if para.strip():
                    add_passage(node, f"{record.id}/d/{key}/p{k}", para, desc_lang, "description")
            for j, child in enumerate(sec.sections, 1):
                visit(child, (*idx, j), node)

        for i, top in enumerate(record.description, 1):
            visit(top, (i,), dsec)

    claim_lang = _pick_lang([k for k, v in record.claims.items() if v and k in SUPPORTED_LANGS], lang)
    if include_claims and claim_lang is not None:
        csec = add(0, CLAIMS_LABEL, None, None)
        for pid, text in claim_passage_ids(record, claim_lang):
            add_passage(csec, pid, text, claim_lang, "claim")

    n = len(passages)
    sec_nodes = [i for i, nd in enumerate(nodes) if nd.passage < 0]
    sec_row = {node: r for r, node in enumerate(sec_nodes)}

    # ancestors of each passage (sections only), nearest first
    ancestors: list[list[int]] = []
    for node in pnode:
        chain: list[int] = []
        cur = nodes[node].parent
        while cur >= 0:
            chain.append(cur)
            cur = nodes[cur].parent
        ancestors.append(chain)

    # Sim_sec(s) = mean of the defined scores of s's direct children -> linear in passage scores
    vecs: dict[int, FloatArray] = {}
    children: dict[int, list[int]] = {}
    for i, nd in enumerate(nodes):
        if nd.parent >= 0:
            children.setdefault(nd.parent, []).append(i)
    for i in range(len(nodes) - 1, -1, -1):
        nd = nodes[i]
        if nd.passage >= 0:
            v = np.zeros(n)
            v[nd.passage] = 1.0
            vecs[i] = v
            continue
        kids = [vecs[c] for c in children.get(i, []) if c in vecs]
        if kids:
            vecs[i] = np.mean(kids, axis=0)
    sec_agg = np.zeros((len(sec_nodes), n))
    for node, r in sec_row.items():
        if node in vecs:
            sec_agg[r] = vecs[node]

    parent_sec = np.asarray([sec_row[nodes[node].parent] for node in pnode], dtype=np.int64)
    anc_dist = np.zeros((n, len(sec_nodes)), dtype=np.uint8)
    for g, chain in enumerate(ancestors):
        for d, s in enumerate(chain, 1):
            anc_dist[g, sec_row[s]] = min(d, _MAX_DIST)
    depth = np.asarray([len(chain) for chain in ancestors], dtype=np.float64)

    # passage-passage distance: depth_a + depth_b - 2 * depth(lca)
    if n:
        max_depth = max(len(c) for c in ancestors)
        paths = np.full((n, max_depth + 1), -1, dtype=np.int64)
        for g, chain in enumerate(ancestors):
            root_first = list(reversed(chain))
            paths[g, : len(root_first)] = root_first
        same = paths[:, None, :] == paths[None, :, :]
        same &= paths[:, None, :] >= 0
        common = np.cumprod(same, axis=2).sum(axis=2)  # number of shared ancestors = depth(lca) + 1
        pdepth = np.asarray([nodes[node].depth for node in pnode], dtype=np.int64)
        dist = pdepth[:, None] + pdepth[None, :] - 2 * (common - 1)
        np.fill_diagonal(dist, 0)
        pass_dist = np.minimum(dist, _MAX_DIST).astype(np.uint8)
    else:
        pass_dist = np.zeros((0, 0), dtype=np.uint8)

    # term counts per language: passages + title rows (headings of that language + document title)
    blocks: dict[str, _LangBlock] = {}
    for plang in sorted({p.lang for p in passages}):
        vocab = vocabs.setdefault(plang, {})
        analyzer = get_analyzer(plang)
        rows = [i for i, p in enumerate(passages) if p.lang == plang]
        local = {g: r for r, g in enumerate(rows)}
        title_nodes = [i for i, nd in enumerate(nodes) if nd.title and nd.title_lang == plang]
        doc_title = record.title.get(plang, "").strip()
        head_texts = [nodes[i].title or "" for i in title_nodes]
        if doc_title:
            head_texts.append(doc_title)
        head_row = {node: r for r, node in enumerate(title_nodes)}
        anc_p: list[int] = []
        anc_h: list[int] = []
        for g in rows:
            for s in ancestors[g]:
                if s in head_row:
                    anc_p.append(local[g])
                    anc_h.append(head_row[s])
            if doc_title:
                anc_p.append(local[g])
                anc_h.append(len(title_nodes))
        pr, pc, pn, pl = _count_rows([passages[g].text for g in rows], analyzer, vocab)
        hr, hc, hn, hl = _count_rows(head_texts, analyzer, vocab)
        blocks[plang] = _LangBlock(
            rows=np.asarray(rows, dtype=np.int64),
            p_rows=pr, p_cols=pc, p_cnt=pn, p_len=pl,
            h_rows=hr, h_cols=hc, h_cnt=hn, h_len=hl,
            anc_p=np.asarray(anc_p, dtype=np.int32), anc_h=np.asarray(anc_h, dtype=np.int32),
            total_len=float(pl.sum() + hl.sum()),
        )

    title_lang = _pick_lang([k for k, v in record.title.items() if v.strip()], lang)
    return _DocTree(
        doc_id=record.id,
        title=record.title[title_lang] if title_lang else None,
        passages=passages,
        blocks=blocks,
        parent_sec=parent_sec,
        sec_agg=sec_agg,
        anc_dist=anc_dist,
        depth=depth,
        pass_dist=pass_dist,
    )


# ----------------------------------------------------------------------------------------- highlights


def _clusters(text: str) -> Iterator[tuple[int, int]]:
    """Spans of a base character plus its combining marks."""
    start = 0
    for i in range(1, len(text) + 1):
        if i == len(text) or not unicodedata.combining(text[i]):
            yield start, i
            start = i


def token_spans(text: str) -> list[tuple[int, int, str]]:
    """``(start, end, token)`` for every token of :func:`~service.text.analysis.tokenize`, spans in ``text``."""
    if text.isascii():  # NFKC is the identity on ASCII and casefold == lower
        norm = text.lower()
        orig_start: list[int] | None = None
        orig_end: list[int] | None = None
    else:
        parts: list[str] = []
        orig_start, orig_end = [], []
        for a, b in _clusters(text):
            piece = normalise(text[a:b])
            parts.append(piece)
            orig_start.extend([a] * len(piece))
            orig_end.extend([b] * len(piece))
        norm = "".join(parts)
    out: list[tuple[int, int, str]] = []
    for m in TOKEN_RE.finditer(norm):
        tok = m.group(0)
        if "/" in tok:
            tok = re.sub(r"\s+", "", tok)
        s, e = m.span()
        if orig_start is not None and orig_end is not None:
            s, e = orig_start[s], orig_end[e - 1]
        out.append((s, e, tok))
    return out


def analysed_spans(text: str, analyzer: Analyzer) -> list[tuple[int, int, str]]:
    """``(start, end, term)`` for every token the analyzer keeps (same terms, same order as ``analyzer(text)``)."""
    stop = stopwords(analyzer.lang) if analyzer.remove_stopwords else frozenset()
    return [
        (s, e, analyzer.term(tok))
        for s, e, tok in token_spans(text)
        if tok not in stop and (len(tok) > 1 or tok.isdigit())
    ]


def highlight_spans(text: str, query_terms: Collection[str], analyzer: Analyzer) -> list[tuple[int, int]]:
    """Character spans of the tokens of ``text`` whose analysed term is one of ``query_terms``."""
    if not query_terms:
        return []
    return [(s, e) for s, e, term in analysed_spans(text, analyzer) if term in query_terms]


# ------------------------------------------------------------------------------------------- ranking


def _check_params(variant: str, alpha: float, beta: float, sigma: float) -> None:
    if variant not in VARIANTS:
        raise ValueError(f"unknown passage variant {variant!r}; valid: {', '.join(VARIANTS)}")
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    if not 0.0 <= beta <= 1.0:
        raise ValueError(f"beta must be in [0, 1], got {beta}")
    if not sigma > 0 or math.isinf(sigma):
        raise ValueError(f"sigma must be a finite number > 0, got {sigma}")


@dataclass
class PassageScores:
    """Per-passage score components of one query (independent of alpha and beta)."""

    variant: str
    sigma: float
    trees: list[_DocTree]
    doc_index: IntArray  # (P,) candidate index of each passage
    local_index: IntArray  # (P,) passage index inside its document
    passage: FloatArray  # normalised Sim (qsf_v) or Sim_title (others)
    doc: FloatArray  # (P,) normalised document score of each passage's document
    context: FloatArray | None  # normalised Sim_sec / propag (qsf_section*, qsf_passage_propagate)
    first_stage: FloatArray  # (P,) first-stage score of the document (raw)
    matched: npt.NDArray[np.bool_]  # (P,) the passage's own text holds a query term of its language
    # (P,) the passage's own text says the query word for word (its own terms in order, reference signs aside)
    verbatim: npt.NDArray[np.bool_]
    images: dict[str, QueryImage] = field(default_factory=dict)  # the query per language it reaches
    raw: dict[str, FloatArray] = field(default_factory=dict)  # before min-max: passage, passage_title, doc, context
    query_lang: str = "en"
    _ids: list[tuple[str, str]] | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return int(self.passage.size)

    @property
    def query_terms(self) -> dict[str, set[str]]:
        """Passage language -> the query's index terms in it."""
        return {lg: set(image.probs) for lg, image in self.images.items()}

    def combine(self, alpha: float, beta: float = 0.5,
                beta_translated: float | Mapping[str, float] | None = None) -> FloatArray:
        """Final passage scores for one (alpha, beta) (paper eq. 3, 6, 8, 10, 12); 0 for a passage without any
        query term. A passage in another language than the query's weighs its document by ``beta_translated``."""
        _check_params(self.variant, alpha, beta, self.sigma)
        if self.context is None:
            out = alpha * self.passage + (1.0 - alpha) * self.doc
        else:
            by_lang = dict(zip(SUPPORTED_LANGS, betas_of(beta, beta_translated, self.query_lang), strict=True))
            b = np.array([by_lang[self.trees[int(d)].passages[int(i)].lang]
                          for d, i in zip(self.doc_index, self.local_index, strict=True)], dtype=np.float64)
            out = alpha * self.passage + (1.0 - alpha) * (b * self.doc + (1.0 - b) * self.context)
        return np.where(self.matched, out, 0.0)

    def top(self, scores: FloatArray, k: int) -> IntArray:
        """The ``k`` best for ``scores``: the passages that say the query word for word first, then those with a query
        term, then by score (ties: lower index)."""
        return self.order(np.where(self.verbatim, scores + 4.0, np.where(self.matched, scores + 2.0, scores)), k)

    def order(self, scores: FloatArray, k: int) -> IntArray:
        """Indices of the ``k`` best passages, best first (ties: candidate order, then passage order)."""
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        n = int(scores.size)
        if k >= n:
            return np.argsort(-scores, kind="stable")
        kth = scores[np.argpartition(-scores, k - 1)[k - 1]]  # the k-th best value
        above = np.flatnonzero(scores > kth)
        tied = np.flatnonzero(scores == kth)[: k - above.size]  # lowest indices first: stable
        sel = np.concatenate([above, tied])
        return sel[np.lexsort((sel, -scores[sel]))]

    def ids(self) -> list[tuple[str, str]]:
        """``(doc_id, passage_id)`` of every scored passage, in score-array order."""
        if self._ids is None:
            self._ids = [(p.doc_id, p.passage_id) for t in self.trees for p in t.passages]
        return self._ids

    def run(self, alpha: float, beta: float = 0.5, k: int = 1500) -> list[tuple[str, str, float]]:
        """``(doc_id, passage_id, score)`` of the top ``k`` passages (for evaluation)."""
        scores = self.combine(alpha, beta)
        ids = self.ids()
        top = self.top(scores, k)
        return [(*ids[i], s) for i, s in zip(top.tolist(), scores[top].tolist(), strict=True)]


def _matched(
    qmap: I32Array, rows_l: list[I32Array], cols_l: list[I32Array], cnt_l: list[F32Array], row_off: IntArray
) -> tuple[IntArray, IntArray, FloatArray, IntArray]:
    """The (global row, query term, count, block) entries of concatenated COO blocks that hit a query term."""
    nnz = np.asarray([c.size for c in cols_l], dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(nnz)]).astype(np.int64)
    cols = np.concatenate(cols_l)
    qi = qmap[cols]
    m = np.flatnonzero(qi >= 0)
    blk = np.searchsorted(starts, m, side="right") - 1
    rows = np.concatenate(rows_l)[m] + row_off[blk]
    return rows, qi[m].astype(np.int64), np.concatenate(cnt_l)[m].astype(np.float64), blk


@dataclass
class _Lang:
    """One language's query weights, collection probabilities and place on the common scale."""

    pqw: FloatArray
    p_c: FloatArray
    mu: float
    shift: float
    scale: float
    ideal: float

    def loglik(self, rows: IntArray, qi: IntArray, cnt: FloatArray, lengths: FloatArray) -> FloatArray:
        """``log Sim'`` of every row from its non-zero counts: ``shift - log(|x| + mu) + scale * (gain - ideal)``
        with ``gain = sum_q p(q) log1p(c / (mu p_C))`` -- measured against the language's ideal text, the gap
        stretched to the query language's."""
        gain = np.bincount(rows, self.pqw[qi] * np.log1p(cnt / (self.mu * self.p_c[qi])), minlength=lengths.size)
        return self.shift - np.log(lengths + self.mu) + self.scale * (gain - self.ideal)


class PassageRanker:
    """Scores every passage of the candidate documents and returns the best ones (QSF variants).

    ``background``: per-language :class:`BackgroundModel` used as collection model instead of the
    candidate set. ``translations``: PSQ tables by source language (``{"de": table}`` with
    ``table.tgt == "en"``) to score English text under a German query. Parsed trees and term counts
    are kept in an LRU of ``cache_size`` entries keyed by (document id, query language, the record's
    shape: numbers of description sections, claim languages, abstract and title languages); a record
    is otherwise assumed not to change under the same id. A tree takes roughly 50-100 KB (about 70 KB
    measured for synthetic 60-passage documents). Building a tree (text analysis) costs far more than
    scoring it, so warm the cache with :meth:`prepare` where the candidate documents are known.
    ``max_vocab`` bounds the per-language term-id tables: above it, tables and cache are reset.
    """

    def __init__(
        self,
        mu: float = DEFAULT_MU,
        *,
        mu_translated: float = DEFAULT_MU_TRANSLATED,
        rho: float | None = None,
        background: Mapping[str, BackgroundModel] | None = None,
        translations: Mapping[str, TranslationTable] | None = None,
        include_abstract: bool = True,
        include_claims: bool = True,
        cache_size: int = 4096,
        max_vocab: int = 2_000_000,
    ) -> None:
        for name, value in (("mu", mu), ("mu_translated", mu_translated)):
            if not value > 0 or math.isinf(value):
                raise ValueError(f"{name} must be a finite number > 0, got {value}")
        self.mu_translated = float(mu_translated)
        if rho is not None:
            rho_of(rho, "en")  # raises when out of range
        self.rho = rho  # None: the query language's default
        if cache_size < 0:
            raise ValueError(f"cache_size must be >= 0, got {cache_size}")
        self.mu = float(mu)
        self.background = dict(background or {})
        for lang, model in self.background.items():
            if model.lang != lang:
                raise ValueError(f"background model for {lang!r} is a {model.lang!r} model")
        self.translations = dict(translations or {})
        self.include_abstract = include_abstract
        self.include_claims = include_claims
        self.cache_size = cache_size
        self.max_vocab = max_vocab
        self._lock = threading.Lock()
        self._cache: OrderedDict[tuple[object, ...], _DocTree] = OrderedDict()
        self._vocabs: dict[str, dict[str, int]] = {}
        self._generation = 0

    # -- cache ------------------------------------------------------------------------------------

    @staticmethod
    def _signature(rec: PatentRecord) -> tuple[int, int, int, int]:
        """Cheap shape of a record, so that a copy with e.g. its claims removed gets its own cache entry."""
        return len(rec.description), len(rec.claims), len(rec.abstract), len(rec.title)

    def _trees(
        self, records: Sequence[PatentRecord], lang: str
    ) -> tuple[list[_DocTree], dict[str, dict[str, int]]]:
        with self._lock:
            if sum(len(v) for v in self._vocabs.values()) > self.max_vocab:
                logger.info("passage vocabulary above %d terms: clearing the tree cache", self.max_vocab)
                self._vocabs = {}
                self._cache.clear()
                self._generation += 1
            vocabs, gen = self._vocabs, self._generation
            out: list[_DocTree] = []
            for rec in records:
                key = (gen, lang, rec.id, self._signature(rec))
                tree = self._cache.get(key)
                if tree is None:
                    tree = build_tree(
                        rec, lang, include_abstract=self.include_abstract,
                        include_claims=self.include_claims, vocabs=vocabs,
                    )
                    if self.cache_size:
                        self._cache[key] = tree
                        while len(self._cache) > self.cache_size:
                            self._cache.popitem(last=False)
                else:
                    self._cache.move_to_end(key)
                out.append(tree)
            return out, vocabs

    def prepare(self, records: Iterable[PatentRecord], lang: str) -> int:
        """Parse and cache the trees of ``records`` for queries in ``lang``; returns how many."""
        recs = list(records)
        self._trees(recs, lang)
        return len(recs)

    def passages(self, record: PatentRecord, lang: str = "en") -> list[Passage]:
        """The passages of one record as the ranker sees them for a query in ``lang``."""
        return list(build_tree(record, lang, include_abstract=self.include_abstract,
                               include_claims=self.include_claims).passages)

    # -- query models -----------------------------------------------------------------------------

    def _query_models(self, query: str | Mapping[str, QueryImage], lang: str) -> dict[str, QueryImage]:
        if not isinstance(query, str):
            return dict(query)
        return query_models(query, lang, self.translations)

    # -- scoring ----------------------------------------------------------------------------------

    def score(
        self,
        query: str | Mapping[str, QueryImage],
        lang: str,
        candidates: Sequence[tuple[PatentRecord, float]],
        *,
        variant: str = "qsf_passage_propagate",
        sigma: float = 1.0,
        doc_score: str = DEFAULT_DOC_SCORE,
    ) -> PassageScores:
        """All score components of every candidate passage (the expensive part of :meth:`rank`)."""
        _check_params(variant, 0.0, 0.0, sigma)
        if lang not in SUPPORTED_LANGS:
            raise ValueError(f"unsupported query language {lang!r}; choose one of {', '.join(SUPPORTED_LANGS)}")
        if doc_score not in DOC_SCORES:
            raise ValueError(f"unknown doc_score {doc_score!r}; valid: {', '.join(DOC_SCORES)}")
        records: list[PatentRecord] = []
        first: list[float] = []
        seen: set[str] = set()
        for i, cand in enumerate(candidates):
            if not (isinstance(cand, tuple | list) and len(cand) == 2 and isinstance(cand[0], PatentRecord)):
                raise ValueError(f"candidate {i} is not a (PatentRecord, score) pair: {type(cand).__name__}")
            rec, s = cand
            if rec.id in seen:
                raise ValueError(f"document {rec.id} appears twice among the candidates")
            seen.add(rec.id)
            records.append(rec)
            first.append(float(s))
        trees, vocabs = self._trees(records, lang)
        return self._score_trees(query, lang, records, trees, vocabs, np.asarray(first, dtype=np.float64),
                                 variant=variant, sigma=sigma, doc_score=doc_score)

    def _score_trees(
        self,
        query: str | Mapping[str, QueryImage],
        lang: str,
        records: Sequence[PatentRecord],
        trees: list[_DocTree],
        vocabs: dict[str, dict[str, int]],
        first: FloatArray,
        *,
        variant: str,
        sigma: float,
        doc_score: str,
    ) -> PassageScores:
        mu = self.mu
        sizes = np.asarray([len(t.passages) for t in trees], dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        total = int(offsets[-1])
        doc_index = np.repeat(np.arange(len(trees), dtype=np.int64), sizes)
        local_index = np.arange(total, dtype=np.int64) - offsets[doc_index]
        langs = sorted({lg for t in trees for lg in t.blocks})
        models = self._query_models(query, lang)

        log_plain = np.full(total, -np.inf)
        log_title = np.full(total, -np.inf)
        log_doc = np.full(len(trees), -np.inf)
        matched = np.zeros(total, dtype=bool)
        verbatim = np.zeros(total, dtype=bool)
        doc_langs = [t.doc_lang(lang) for t in trees]

        # the collection model per language: the background models (the index's: background_of_index), else every
        # text of the candidates (the same when the candidates are the whole index)
        background = self.background or background_of(records)
        ideal_of: dict[str, float] = {}
        for plang, image in models.items():  # each language's ideal text (the stretch needs the query language's)
            bg = background.get(plang)
            if bg is None:
                continue
            mu_l = mu if plang == lang else self.mu_translated
            ideal_of[plang] = sum(image.probs[t] * math.log1p(c / (mu_l * bg.prob(t)))
                                  for t, c in image.ideal.items() if t in image.probs)
            if plang != lang:  # a translated text at rho (rho squared through two tables) of its ideal: level
                ideal_of[plang] *= rho_of(self.rho, lang) ** max(image.hops, 1)
        target = max(ideal_of.values(), default=0.0)  # the common scale: the largest ideal gain among them

        for plang in langs:
            lang_image = models.get(plang)
            bg = background.get(plang)
            if lang_image is None or bg is None:
                continue  # a language the query does not reach: Sim = 0 (log -inf) for every text of it
            mu_l = mu if plang == lang else self.mu_translated
            ideal_gain = ideal_of[plang]
            scale = target / ideal_gain if ideal_gain > 0 else 1.0
            shift = math.log(sum(lang_image.ideal.values()) + mu_l)
            vocab = vocabs.get(plang, {})
            qterms = [(t, vocab[t], p) for t, p in lang_image.probs.items() if t in vocab]
            which = [i for i, t in enumerate(trees) if plang in t.blocks]
            blocks = [trees[i].blocks[plang] for i in which]
            prow_n = np.asarray([b.rows.size for b in blocks], dtype=np.int64)
            hrow_n = np.asarray([b.h_len.size for b in blocks], dtype=np.int64)
            p_off = np.concatenate([[0], np.cumsum(prow_n)]).astype(np.int64)
            h_off = np.concatenate([[0], np.cumsum(hrow_n)]).astype(np.int64)
            n_p, n_h = int(p_off[-1]), int(h_off[-1])
            global_rows = np.concatenate([b.rows + offsets[i] for i, b in zip(which, blocks, strict=True)])
            p_len = np.concatenate([b.p_len for b in blocks])
            h_len = np.concatenate([b.h_len for b in blocks])
            nq = len(qterms)
            qids = np.asarray([q for _, q, _ in qterms], dtype=np.int64)
            qmap = np.full(max(len(vocab), 1), -1, dtype=np.int32)
            qmap[qids] = np.arange(nq)
            pr, pq, pc, pb = _matched(qmap, [b.p_rows for b in blocks], [b.p_cols for b in blocks],
                                      [b.p_cnt for b in blocks], p_off)
            hr, hq, hc, hb = _matched(qmap, [b.h_rows for b in blocks], [b.h_cols for b in blocks],
                                      [b.h_cnt for b in blocks], h_off)
            if plang != lang:  # a translated unit counts each term at most as often as the query asks for it
                cap = np.asarray([lang_image.need.get(t, math.inf) for t, _, _ in qterms], dtype=np.float64)
                pc, hc = np.minimum(pc, cap[pq]), np.minimum(hc, cap[hq])
            p_c = np.asarray([bg.prob(t) for t, _, _ in qterms], dtype=np.float64)
            pqw = np.asarray([p for _, _, p in qterms], dtype=np.float64)

            lm = _Lang(pqw, p_c, mu_l, shift, scale, ideal_gain)
            log_plain[global_rows] = lm.loglik(pr, pq, pc, p_len)
            matched[global_rows] = np.bincount(pr, minlength=n_p) > 0
            if plang == lang and lang_image.terms:  # the query's own words, said word for word (reference signs aside)
                want = {t: c for t, c in lang_image.ideal.items() if c > 0 and not is_reference_sign(t)}
                held: list[set[str]] = [set() for _ in range(n_p)]
                for r, qi, c in zip(pr.tolist(), pq.tolist(), pc.tolist(), strict=True):
                    term = qterms[qi][0]
                    if c >= want.get(term, math.inf):
                        held[r].add(term)
                for r, g in enumerate(global_rows.tolist()):
                    if want and len(held[r]) == len(want):
                        text = trees[int(doc_index[g])].passages[int(local_index[g])].text
                        verbatim[g] = holds_in_order(get_analyzer(plang)(text), lang_image.terms)

            c_plain = sparse.csr_matrix((pc, (pr, pq)), shape=(n_p, nq))
            c_head = sparse.csr_matrix((hc, (hr, hq)), shape=(n_h, nq))
            anc_n = np.asarray([b.anc_p.size for b in blocks], dtype=np.int64)
            anc_rows = np.concatenate([b.anc_p for b in blocks]) + np.repeat(p_off[:-1], anc_n)
            anc_cols = np.concatenate([b.anc_h for b in blocks]) + np.repeat(h_off[:-1], anc_n)
            anc = sparse.csr_matrix((np.ones(anc_rows.size), (anc_rows, anc_cols)), shape=(n_p, n_h))
            ext = sparse.coo_matrix(c_plain + anc @ c_head)
            ext_len = p_len + anc @ h_len
            log_title[global_rows] = lm.loglik(ext.row.astype(np.int64), ext.col.astype(np.int64), ext.data, ext_len)

            # documents whose scoring language is this one: all their passages + title rows
            dsel = np.asarray([doc_langs[i] == plang for i in which], dtype=bool)
            if dsel.any():
                nb = len(blocks)
                counts = np.bincount(pb * nq + pq, pc, minlength=nb * nq) + np.bincount(hb * nq + hq, hc,
                                                                                       minlength=nb * nq)
                nz = np.flatnonzero(counts)
                dlen = np.asarray([b.total_len for b in blocks])
                dlog = lm.loglik(nz // max(nq, 1), nz % max(nq, 1), np.asarray(counts[nz], dtype=np.float64),
                                 dlen.astype(np.float64))
                widx = np.asarray(which, dtype=np.int64)
                log_doc[widx[dsel]] = dlog[dsel]

        sim_plain = np.exp(log_plain)
        sim_title = np.exp(log_title)
        if doc_score == "lm":
            doc_norm = minmax(np.exp(log_doc))
        else:
            doc_norm = minmax(first)

        context: FloatArray | None = None
        if variant in ("qsf_section", "qsf_section_propagate", "qsf_passage_propagate"):
            ctx = np.zeros(total)
            wtab = gaussian_weight(np.arange(_MAX_DIST + 1), sigma)
            wtab[0] = 0.0  # distance 0: the passage itself (or "not an ancestor")
            for i, t in enumerate(trees):
                n = len(t.passages)
                if not n:
                    continue
                st = sim_title[offsets[i]: offsets[i + 1]]
                if variant == "qsf_section":
                    ctx[offsets[i]: offsets[i + 1]] = (t.sec_agg @ st)[t.parent_sec]
                elif variant == "qsf_section_propagate":
                    sec = t.sec_agg @ st
                    ctx[offsets[i]: offsets[i + 1]] = (wtab[t.anc_dist] @ sec) / t.depth
                elif n > 1:
                    ctx[offsets[i]: offsets[i + 1]] = (wtab[t.pass_dist] @ st) / (n - 1)
            context = minmax(ctx)

        passage_norm = minmax(sim_plain if variant == "qsf_v" else sim_title)
        raw = {"passage": sim_plain, "passage_title": sim_title, "doc": np.exp(log_doc)[doc_index]}
        if context is not None:
            raw["context"] = ctx
        return PassageScores(
            variant=variant,
            sigma=sigma,
            trees=trees,
            doc_index=doc_index,
            local_index=local_index,
            passage=passage_norm,
            doc=doc_norm[doc_index],
            context=context,
            first_stage=first[doc_index],
            matched=matched,
            verbatim=verbatim,
            images=models,
            raw=raw,
            query_lang=lang,
        )

    def rank(
        self,
        query: str | Mapping[str, QueryImage],
        lang: str,
        candidates: Sequence[tuple[PatentRecord, float]],
        *,
        variant: str = "qsf_passage_propagate",
        alpha: float = 0.5,
        beta: float = 0.5,
        sigma: float = 1.0,
        k: int = 1500,
        doc_score: str = DEFAULT_DOC_SCORE,
        highlight: bool = True,
        langs: Collection[str] | None = None,
        beta_translated: float | Mapping[str, float] | None = None,
    ) -> list[PassageHit]:
        """Rank the passages of ``candidates`` (first-stage documents with their scores) for ``query``.

        Highlights cost about 0.1 ms per returned hit; pass ``highlight=False`` for evaluation runs.
        ``langs``: return only passages in these languages (e.g. the query language plus English when a
        translation table reaches it); passages in other languages still shape their documents' scores.
        """
        _check_params(variant, alpha, beta, sigma)
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        if not candidates:
            return []
        scores = self.score(query, lang, candidates, variant=variant, sigma=sigma, doc_score=doc_score)
        final = scores.combine(alpha, beta, beta_translated)
        context_name = "section" if variant == "qsf_section" else "propagated"
        hits: list[PassageHit] = []
        for i in scores.top(final, k if langs is None else len(final)):
            tree = scores.trees[int(scores.doc_index[i])]
            p = tree.passages[int(scores.local_index[i])]
            if langs is not None and p.lang not in langs:
                continue
            if len(hits) >= k:
                break
            comps = {
                "passage": float(scores.passage[i]),
                "doc": float(scores.doc[i]),
                "first_stage": float(scores.first_stage[i]),
            }
            if scores.context is not None:
                comps[context_name] = float(scores.context[i])
            if scores.verbatim[i]:
                comps["own_words"] = 1.0
            spans = highlight_spans(p.text, scores.query_terms.get(p.lang, set()), get_analyzer(p.lang)) \
                if highlight else []
            hits.append(PassageHit(
                doc_id=p.doc_id, passage_id=p.passage_id, section_path=list(p.section_path), text=p.text,
                score=float(final[i]), components=comps, highlights=spans, title=tree.title, lang=p.lang,
            ))
        return hits
