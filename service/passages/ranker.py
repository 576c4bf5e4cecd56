"""QSF passage ranking with array operations over the build-time passage index.

The candidate documents of a query (first-stage rows, in rank order) select their rows of the passage
index; every passage is scored with its own text and with context propagated through its document's
tree (Albarede et al., "Passage retrieval in context", 2021). Scores equal the per-record reference
implementation (``lab/benchmarks/passages_reference.py``) within floating-point rounding; a
regression test checks 1e-9 on the real data.

Similarity (:mod:`service.passages.lm`): ``Sim(q, x) = exp(-CE(theta_q || theta_x^Dir))`` with
``theta_x^Dir`` Dirichlet-smoothed by the collection model ``p(w | C)`` of ``x``'s language: all the index's text
in that language (every title, heading and passage; the passage index stores the counts), as Terrier does
for the paper. ``mu`` = 1000 for text in the query's language, ``mu_translated`` (default 100) for text
reached through a translation table (a smaller prior judges such a text by how many of the query's terms it
renders rather than by how often it repeats a few: repetition of one of a term's alternatives is weak evidence;
chosen cross-fitted on the aligned-claims task, docs/RESULTS.md).

Languages on one scale. The query reaches every language a translation route of the index reaches, and each
language's text is scored with the query's *image* there (:class:`service.passages.lm.QueryImage`: the PSQ
translation the first stage's route uses, the query's own terms in its language, with the index's analysis:
compounds split where the index splits them). Images differ in how they spread their probability, so raw
likelihoods of different languages are not comparable; each text is measured against the *ideal text* of its
language (the query's best rendering there: each query term by its most probable translation), and the gap is
stretched to the query language's::

    log Sim'(x) = log(|ideal| + mu_L) - log(|x| + mu_L) + scale_L * (gain(x) - gain(ideal_L))
    gain(x)     = sum_w p(w | q_L) log1p(c(w, x) / (mu_L p(w | C_L)))
    scale_L     = max over the languages L' the query reaches of gain(ideal_L') / gain(ideal_L)

so a text as good as the ideal sits at 0 and a text without any query term at ``-max gain(ideal)`` in every
language (a query language with little text in the index does not squeeze the others); with one language
this is ``Sim`` divided by a constant. A query term the index has no text
with counts as seen once (a miss). A passage whose text holds no query term (in any language the query
reaches) scores 0 and comes after every passage that holds one. ``Sim(q, doc)``: the document's text in one
language, the query language when the document has passages in it, else its language with the most text; the
document component is by default the first stage's (fused) score instead (``doc_score="first_stage"``),
which already merges the languages on one scale.

In a translated text unit (passage, heading, title) the count ``c(w, unit)`` is capped at ``need(w)``, the
occurrences of the query terms ``w`` renders (:attr:`service.passages.lm.QueryImage.need`): a long claim that
repeats a rendering, or renders in several places a word the query has once, gains no more than the short claim
that renders it once; a passage's headings and title still add their counts. Text in the query's own language
keeps the paper's uncapped Dirichlet gain. A text reached through a translation is measured against a share of its
ideal: ``gain(ideal_L)`` above is multiplied by ``rho ** hops`` (``QueryImage.hops``: 1 through one table, 2 for de
<-> fr composed through English; ``rho`` per query language, :data:`service.passages.lm.DEFAULT_RHO`).

The query's own words. A passage whose own text says the query word for word -- its analysed terms hold the query's
own terms one after the other, in the query's order, reference signs aside on both sides
(:func:`service.passages.lm.holds_in_order`) -- ranks above every other passage, then by score as the others
(``components["own_words"]`` says so in its hit; :meth:`PassageScores.top`). Only the passages that hold every query
term as often as the query has it (:func:`holds_all_terms`, from the postings) are read, best first, until ``k`` of
them say it. Without the rule translation buried such a passage (issue 57: the start of EP0640886B1's German claim 1
put that claim 455th among 1,000 passages, first with ``translate: false``), for two reasons the scores do not settle:
a translated language's image spreads a query term over its alternative renderings, and a text that holds several of
them gains on each, far past the level ``rho`` sets (a translated text at ``rho`` of its ideal stands level with an
own-language text that reaches all of its own, but nothing bounds it above that level: English paragraphs that say
"photosensitive member" and "charging" outscored the German claim by 0.9 in ``log Sim'``); and ``beta_translated``
weighs an English passage by its document's score alone where an own-language passage shares that weight with its
context, so that the whole claim as the query, first by its passage score, was 8th behind English paragraphs of its
own document. The parameters were chosen where the query's own words never are the answer (``priorart-lab experiment
xling-passages``: the grant holds another language only), so they cannot see this. Word for word, not every word: a
short query's words scattered over a long paragraph (a DNA sequence listing holding "DNA", "molecule", "claim", "1",
"Z" and "fluorescent") are no sign that it says the query. A document's evidence (:meth:`PassageScores.key`,
:attr:`PassageRanking.best`) stays its best score, so ``/search`` is unchanged. Translation adds passages below the
query's own words; it does not bury them.

Variants (paper equations 3-12; ``_norm`` = min-max over the candidate set):

- ``qsf_v``: ``a * Sim_norm(q, g) + (1 - a) * Sim_norm(q, doc)``.
- ``qsf_v_title``: ``Sim_title(q, g)`` instead, the passage text plus the headings of all its ancestor
  sections and the document title in the passage's language.
- ``qsf_section``: ``a * Sim_title_norm(g) + (1 - a) * (b * Sim_norm(doc) + (1 - b) * Sim_sec_norm(parent))``;
  ``Sim_sec(s)`` is the mean over ``s``'s children that have passages below them (``Sim_title`` of its
  passages, ``Sim_sec`` of its subsections).
- ``qsf_section_propagate``: the context is the mean over the ancestors ``s`` of ``g`` (parent .. root)
  of ``Sim_sec(s) * w(dist(g, s))``.
- ``qsf_passage_propagate``: the context is the mean over the other passages ``g'`` of the document of
  ``Sim_title(g') * w(dist(g, g'))``; a document's only passage gets 0.

``b`` is the request's ``beta`` for a passage in the query's language and ``beta_translated`` of the passage's
language for one reached through a table (:data:`service.passages.lm.DEFAULT_BETA_TRANSLATED`: an English passage
reached through a table weighs its document's score alone).

``w(d) = exp(-d^2 / (2 sigma^2))``; tree distance is the number of edges (siblings: 2). Min-max sets:
passages over all candidate passages, documents over all candidates (also those without passages),
contexts over all passages; a constant set normalises to 0. Ties: candidate order, then passage order
in the document (abstract, description, claims).

How the arrays are used (one query, ``n`` candidates):

1. Gather the candidates' units and sections (ranges of the per-document arrays), pick the abstract
   and claims language per document, mark the *counted* units (the texts a document shows this query).
2. Look the images' terms up in the vocabulary (their collection counts with them); gather the candidates'
   term entries, keep those of query terms, expand them to their postings ``(unit, count)``; the
   log-likelihoods are sums over these postings (``np.bincount``), never over whole texts.
3. ``Sim_title``: heading and title counts are added per section (a heading to its subtree, a title to
   the sections of its language), so the gain of ``Sim_title(g)`` is ``B(sec) + sum over g's postings of
   p(w|q) [f(c + H) - f(H)]`` with ``B(sec) = sum_w p(w|q) f(H(sec, w))`` and the length ``|g| + |titles|``.
4. Section scores bottom-up by depth; ``propag_section`` by walking each section's ancestor chain;
   ``propag_passage`` from per-section sums of the passages directly in each section: subtree sums
   bottom-up, sums over a section's *other* siblings as prefix + suffix sums, one walk up each
   ancestor chain (:func:`_passage_propagate`) -- linear in the sections, sums of non-negative terms
   only, so a dominant passage cannot wipe out the small contributions by cancellation.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypedDict

import numpy as np
import numpy.typing as npt

from service.passages.highlight import highlight_matches
from service.passages.kernels import passage_propagate, query_entries
from service.passages.lm import (
    CONTEXT_VARIANTS,
    DEFAULT_DOC_SCORE,
    DEFAULT_MU,
    DEFAULT_MU_TRANSLATED,
    DOC_SCORES,
    QueryImage,
    QueryModels,
    betas_of,
    check_params,
    gaussian_weight,
    holds_in_order,
    is_reference_sign,
    minmax,
    rho_of,
)
from service.passages.tree import (
    KIND_ABSTRACT,
    KIND_CLAIM,
    KIND_DESCRIPTION,
    KIND_FIELDS,
    KIND_HEADING,
    KIND_TITLE,
    LANG_CODE,
    NO_LANG,
    SEC_ABSTRACT,
    SEC_CLAIMS,
    SEC_DESCRIPTION,
    SEC_HEADING,
    SECTION_LABELS,
    pick_lang,
)
from service.schema import PassageHit, PassageMatch
from service.text.analysis import SUPPORTED_LANGS, Analyzer, get_analyzer

if TYPE_CHECKING:
    from service.passages.arrays import PassageArrays

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

FIELDS: dict[str, int] = {"abstract": KIND_ABSTRACT, "description": KIND_DESCRIPTION, "claims": KIND_CLAIM}
"""The fields of a document whose best passage is evidence of its own (:attr:`PassageRanking.fields`, in this order):
field name -> the unit kind of its passages."""

_N_LANGS = len(SUPPORTED_LANGS)
# _PICK[mask, lang]: the language a query in `lang` reads from a field available in `mask`
_PICK = np.asarray([[pick_lang(m, q) for q in range(_N_LANGS)] for m in range(1 << _N_LANGS)], dtype=np.int64)
# rank of each language code in string order: the reference breaks document-language ties by max((len, lang))
_STR_RANK = np.asarray([sorted(SUPPORTED_LANGS).index(lang) for lang in SUPPORTED_LANGS], dtype=np.float64)
_scratch = threading.local()


def _expand(starts: IntArray, counts: IntArray) -> tuple[IntArray, IntArray]:
    """Concatenated ranges ``[starts[i], starts[i] + counts[i])`` and the range number of each element."""
    counts = np.asarray(counts, dtype=np.int64)
    total = int(counts.sum()) if counts.size else 0
    if total == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    offsets = np.cumsum(counts) - counts
    idx = np.arange(total, dtype=np.int64) + np.repeat(np.asarray(starts, dtype=np.int64) - offsets, counts)
    return idx, np.repeat(np.arange(counts.size, dtype=np.int64), counts)


_QMAP_MAX_TERMS = 1 << 22  # above this vocabulary size, no per-thread lookup array (4 bytes per term)


def term_table(vocab_size: int) -> npt.NDArray[np.int32] | None:
    """This thread's array over the term ids of a vocabulary of ``vocab_size`` terms, all -1 (a caller sets the
    entries it needs and restores them to -1 before it returns); None above :data:`_QMAP_MAX_TERMS` terms (the
    caller searches instead)."""
    if vocab_size > _QMAP_MAX_TERMS:
        return None
    table: npt.NDArray[np.int32] | None = getattr(_scratch, "qmap", None)
    if table is None or table.size < vocab_size:
        table = np.full(max(vocab_size, 1), -1, dtype=np.int32)
        _scratch.qmap = table
    return table


def _query_entries(index: PassageArrays, starts: IntArray, counts: IntArray,
                   qj: IntArray) -> tuple[IntArray, IntArray, IntArray]:
    """The candidates' term entries (``[starts[d], starts[d] + counts[d])``) of the query terms ``qj``: their
    positions in the index, their candidate, the query term each is.

    A per-thread array ``term id -> query term`` (all -1; restored after use) makes each look-up one read; for very
    large vocabularies a binary search over the sorted query ids keeps memory bounded.
    """
    qmap = term_table(len(index.vocab))
    if qmap is None:
        return query_entries(index.term_id, starts, counts, None, qj)
    qmap[qj] = np.arange(qj.size, dtype=np.int32)
    try:
        return query_entries(index.term_id, starts, counts, qmap, qj)
    finally:
        qmap[qj] = -1


@dataclass(frozen=True)
class PassageRanking:
    """The result of :meth:`PassageIndex.rank`: hits, candidates ranked, candidates left out by ``langs``, and
    ``best``: per candidate row given (in their order), the order key of its best passage (:meth:`PassageScores.key`:
    2 + its score in [0, 1] when a passage holds a query term, 0 when none does, -1 when it has no passage in
    ``langs``): the passage evidence by which ``/search`` can order its documents (``None`` with ``alone``);
    ``second`` likewise its second-best passage's, ``matched`` the share of its passages that hold a query term
    (0 without passages): how much of the document the evidence spans, and ``fields`` (one column per
    :data:`FIELDS`) the key of its best passage in each field (features of the learned ranker; with ``spread``
    only, else None)."""

    hits: list[PassageHit]
    documents: int
    skipped: int = 0
    best: FloatArray | None = field(default=None, repr=False)
    second: FloatArray | None = field(default=None, repr=False)
    matched: FloatArray | None = field(default=None, repr=False)
    fields: FloatArray | None = field(default=None, repr=False)

    def evidence(self) -> tuple[FloatArray, FloatArray | None]:
        """``best`` and ``second`` (None without ``spread``) as scores in [0, 1]: the passage's score where it holds a
        query term, else 0 (the inverse of :meth:`PassageScores.key`)."""
        assert self.best is not None, "no per-candidate evidence (a ranking of each candidate alone)"

        return _key_score(self.best), None if self.second is None else _key_score(self.second)

    def field_evidence(self) -> FloatArray | None:
        """``fields`` as scores in [0, 1] (as :meth:`evidence`): per candidate, its best passage's score in each of
        :data:`FIELDS` (0 where none of that field holds a query term); None without ``spread``."""
        return None if self.fields is None else _key_score(self.fields)


def _key_score(key: FloatArray) -> FloatArray:
    """The score of a :meth:`PassageScores.key`: the passage's score where it holds a query term, else 0."""
    return np.where(key >= 2.0, key - 2.0, 0.0)


@dataclass
class PassageScores:
    """Per-passage score components of one query (independent of alpha and beta).

    Arrays are over the candidates' passages in candidate order, then tree order.
    """

    index: PassageArrays
    variant: str
    sigma: float
    query_lang: str
    rows: IntArray  # (n,) candidate rows
    doc_index: IntArray  # (P,) candidate index of each passage
    units: IntArray  # (P,) unit of each passage in the index
    sections: IntArray  # (P,) parent section of each passage in the index
    lang: IntArray  # (P,) language code of each passage
    passage: FloatArray  # normalised Sim (qsf_v) or Sim_title (others)
    doc: FloatArray  # (P,) normalised document score of each passage's document
    context: FloatArray | None  # normalised Sim_sec / propag (context variants)
    first_stage: FloatArray  # (P,) first-stage score of the document (raw)
    matched: npt.NDArray[np.bool_]  # (P,) the passage's own text holds a term of the query's image in its language
    # (P,) the passage's own text holds every term of the query in the query's language (reference signs aside), at
    # least as often as the query has it (:func:`holds_all_terms`): it may say the query word for word (:meth:`top`)
    holds: npt.NDArray[np.bool_]
    images: Mapping[str, QueryImage] = field(default_factory=dict)  # the query per language it reaches
    raw: dict[str, FloatArray] = field(default_factory=dict)  # before min-max: passage, passage_title, doc, context
    own_words: OwnWords | None = field(default=None, repr=False)  # which texts say the query word for word

    def __len__(self) -> int:
        return int(self.passage.size)

    def combine(self, alpha: float, beta: float = 0.5,
                beta_translated: float | Mapping[str, float] | None = None) -> FloatArray:
        """Final passage scores for one (alpha, beta) (paper eq. 3, 6, 8, 10, 12); a passage whose text holds no
        query term (in any language the query reaches) scores 0, below every passage that holds one. ``beta``
        weighs the passages in the query's language, ``beta_translated`` those in the other languages
        (:func:`service.passages.lm.betas_of`)."""
        check_params(self.variant, alpha, beta, self.sigma)
        if self.context is None:
            out = alpha * self.passage + (1.0 - alpha) * self.doc
        else:
            b = np.asarray(betas_of(beta, beta_translated, self.query_lang))[self.lang]
            out = alpha * self.passage + (1.0 - alpha) * (b * self.doc + (1.0 - b) * self.context)
        return np.where(self.matched, out, 0.0)

    @staticmethod
    def order(scores: FloatArray, k: int) -> IntArray:
        """Indices of the ``k`` best passages, best first (ties: lower index first)."""
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

    def alone(self, d: int) -> PassageScores:
        """The scores of candidate ``d``'s passages as if it were the only candidate: its slice of the arrays, each
        component min-max normalised over its passages alone (its document score, one value, becomes 0), as
        :func:`score_passages` with that candidate alone gives them (every raw value is the document's own)."""
        sl = slice(*np.searchsorted(self.doc_index, [d, d + 1]).tolist())
        raw = {name: arr[sl] for name, arr in self.raw.items()}
        return PassageScores(
            index=self.index, variant=self.variant, sigma=self.sigma, query_lang=self.query_lang,
            rows=self.rows[d:d + 1], doc_index=np.zeros(sl.stop - sl.start, dtype=np.int64), units=self.units[sl],
            sections=self.sections[sl], lang=self.lang[sl],
            passage=minmax(raw["passage"] if self.variant == "qsf_v" else raw["passage_title"]),
            doc=minmax(self.doc[sl]), context=None if self.context is None else minmax(raw["context"]),
            first_stage=self.first_stage[sl], matched=self.matched[sl], holds=self.holds[sl], images=self.images,
            raw=raw, own_words=self.own_words,
        )

    def key(self, scores: FloatArray) -> FloatArray:
        """The evidence of the final ``scores`` (of :meth:`combine`) as one value per passage: every passage that holds
        a query term before every one that holds none, then by score (scores are in [0, 1]); a candidate's best key
        is its passage evidence (:attr:`PassageRanking.best`)."""
        return np.where(self.matched, scores + 2.0, scores)

    def word_for_word(self, i: int) -> bool:
        """Whether passage ``i``'s own text says the query word for word (module docstring, "The query's own
        words")."""
        return bool(self.holds[i]) and self.own_words is not None and self.own_words.says(int(self.units[i]))

    def top(self, scores: FloatArray, k: int, among: IntArray | None = None) -> IntArray:
        """Indices of the ``k`` best passages for the final ``scores`` (of :meth:`combine`), best first: those that
        say the query word for word (:meth:`word_for_word`) before every other, then in the order of :meth:`key`
        (ties: lower index first); ``among``: only these indices. Only the passages that hold every query term are
        read, best first, until ``k`` say it."""
        key = self.key(scores)
        sel = np.arange(key.size) if among is None else among
        cand = sel[self.holds[sel]]
        if cand.size and self.own_words is not None:
            lifted = []
            for i in cand[np.lexsort((cand, -key[cand]))].tolist():
                if self.own_words.says(int(self.units[i])):
                    lifted.append(i)
                    if len(lifted) >= k:
                        break
            if lifted:
                key = key.copy()
                key[lifted] += 4.0
        if among is None:
            return self.order(key, k) if key.size else np.zeros(0, dtype=np.int64)
        return among[self.order(key[among], k)] if among.size else among

    def doc_id(self, i: int) -> str:
        """Publication id of passage ``i``."""
        return self.index.doc_id(int(self.rows[self.doc_index[i]]))

    def passage_id(self, i: int) -> str:
        """Full passage id (``DOC/d/3.2/p4``) of passage ``i``."""
        return f"{self.doc_id(i)}/{self.index.pids.text(int(self.units[i]))}"

    def ids(self) -> list[tuple[str, str]]:
        """``(doc_id, passage_id)`` of every scored passage, in score-array order."""
        return [(self.doc_id(i), self.passage_id(i)) for i in range(len(self))]

    def run(self, alpha: float, beta: float = 0.5, k: int = 1500,
            beta_translated: float | Mapping[str, float] | None = None) -> list[tuple[str, str, float]]:
        """``(doc_id, passage_id, score)`` of the top ``k`` passages (for evaluation)."""
        scores = self.combine(alpha, beta, beta_translated)
        top = self.top(scores, k)
        return [(self.doc_id(i), self.passage_id(i), s) for i, s in zip(top.tolist(), scores[top].tolist(),
                                                                       strict=True)]


def check_lang(lang: str) -> None:
    """``ValueError`` for a query language the passages cannot be ranked in."""
    if lang not in SUPPORTED_LANGS:
        raise ValueError(f"unsupported query language {lang!r}; choose one of {', '.join(SUPPORTED_LANGS)}")


def score_passages(
    index: PassageArrays,
    models: QueryModels,
    lang: str,
    rows: npt.ArrayLike,
    first_stage: npt.ArrayLike | None = None,
    *,
    variant: str = "qsf_passage_propagate",
    sigma: float = 1.0,
    doc_score: str = DEFAULT_DOC_SCORE,
    analyzers: Mapping[str, Analyzer] | None = None,
    exclude_claims: npt.ArrayLike | None = None,
    mu: float = DEFAULT_MU,
    mu_translated: float = DEFAULT_MU_TRANSLATED,
    rho: float | None = None,
) -> PassageScores:
    """All score components of every passage of the candidate ``rows`` (module docstring).

    ``models``: the query's images per language (:class:`service.passages.lm.QueryImage`: the engine's, or
    :func:`service.passages.lm.query_models` of a text; :meth:`service.passages.reader.PassageReader.score` makes
    them); ``analyzers``: the analysis of the candidates' own words. ``first_stage``: the candidates' first-stage
    scores (reported, and the document component with ``doc_score="first_stage"``). ``exclude_claims``: per candidate,
    score it as if it had no claims (the tuning proxy queries a document with its own claims).
    """
    check_params(variant, 0.0, 0.0, sigma)
    check_lang(lang)
    if doc_score not in DOC_SCORES:
        raise ValueError(f"unknown doc_score {doc_score!r}; valid: {', '.join(DOC_SCORES)}")
    for name, value in (("mu", mu), ("mu_translated", mu_translated)):
        if not value > 0 or math.isinf(value):
            raise ValueError(f"{name} must be a finite number > 0, got {value}")
    rho = rho_of(rho, lang)
    rows_a = index.check_rows(rows)
    n = int(rows_a.size)
    first = np.zeros(n) if first_stage is None else np.asarray(first_stage, dtype=np.float64).reshape(-1)
    if first.size != n:
        raise ValueError(f"{first.size} first-stage scores for {n} candidate rows")
    excl = np.zeros(n, dtype=bool) if exclude_claims is None else np.asarray(exclude_claims, dtype=bool).reshape(-1)
    if excl.size != n:
        raise ValueError(f"{excl.size} exclude_claims flags for {n} candidate rows")
    L = LANG_CODE[lang]
    ar_n = np.arange(n, dtype=np.int64)

    # 1. units and sections of the candidates; what a query in `lang` sees of each document
    d0 = index.docs[rows_a]
    d1 = index.docs[rows_a + 1]
    cu, cu_doc = _expand(d0[:, 0], d1[:, 0] - d0[:, 0])
    u_cnt = d1[:, 0] - d0[:, 0]
    cu_base = np.cumsum(u_cnt) - u_cnt
    tag = index.unit_tag[cu].astype(np.int64)
    kind, ulang = tag >> 2, tag & 3
    meta = index.doc_meta[rows_a].astype(np.int64)
    desc_lang = meta[:, 1]
    abs_pick = _PICK[meta[:, 2], L]
    claim_pick = np.where(excl, NO_LANG, _PICK[meta[:, 3], L])
    sel = (kind == KIND_DESCRIPTION) | ((kind == KIND_ABSTRACT) & (ulang == abs_pick[cu_doc])) | (
        (kind == KIND_CLAIM) & (ulang == claim_pick[cu_doc]))
    has = np.bincount(cu_doc[sel] * _N_LANGS + ulang[sel], minlength=n * _N_LANGS).reshape(n, _N_LANGS) > 0
    counted = sel | ((kind <= KIND_HEADING) & has[cu_doc, np.minimum(ulang, _N_LANGS - 1)])
    ulen = index.unit_len[cu].astype(np.float64)
    dl_key = cu_doc * _N_LANGS + ulang
    tot = np.bincount(dl_key, weights=np.where(counted, ulen, 0.0), minlength=n * _N_LANGS).reshape(n, _N_LANGS)
    title_len = np.bincount(dl_key, weights=np.where(kind == KIND_TITLE, ulen, 0.0),
                            minlength=n * _N_LANGS).reshape(n, _N_LANGS)
    key = np.where(has, tot * _N_LANGS + _STR_RANK, -1.0)
    doc_lang = np.where(has[:, L], L, np.argmax(key, axis=1)) if n else np.zeros(0, dtype=np.int64)
    doc_lang = np.where(has.any(axis=1), doc_lang, NO_LANG)

    sp = np.flatnonzero(sel)
    n_pass = int(sp.size)
    p_doc, p_lang, p_len, p_unit = cu_doc[sp], ulang[sp], ulen[sp], cu[sp]

    s_cnt = d1[:, 1] - d0[:, 1]
    cs, cs_doc = _expand(d0[:, 1], s_cnt)
    cs_base = np.cumsum(s_cnt) - s_cnt
    n_sec = int(cs.size)
    par_local = index.sec_parent[cs].astype(np.int64)
    s_parent = np.where(par_local >= 0, cs_base[cs_doc] + par_local, -1)
    s_depth = index.sec_depth[cs].astype(np.int64)
    s_kind = index.sec_kind[cs]
    s_lang = np.full(n_sec, NO_LANG, dtype=np.int64)
    s_lang = np.where(s_kind == SEC_ABSTRACT, abs_pick[cs_doc], s_lang)
    s_lang = np.where(s_kind == SEC_CLAIMS, claim_pick[cs_doc], s_lang)
    s_lang = np.where((s_kind == SEC_DESCRIPTION) | (s_kind == SEC_HEADING), desc_lang[cs_doc], s_lang)
    p_sec = cs_base[p_doc] + index.unit_sec[p_unit].astype(np.int64)

    # 2. query images and their terms in the vocabulary
    models = dict(models)
    if lang not in models:
        raise ValueError(f"no query image in the query language {lang!r}")
    q_jid: list[int] = []
    q_prob: list[float] = []
    q_lang: list[int] = []
    q_ideal: list[float] = []
    q_need: list[float] = []
    q_sign: list[bool] = []  # a reference sign of the query's own language (word for word leaves them aside)
    reached = np.zeros(_N_LANGS + 1, dtype=bool)  # languages with an image (NO_LANG never)
    ref_len = np.zeros(_N_LANGS + 1)
    lost: list[tuple[int, float, float]] = []  # ideal-text terms absent from the vocabulary: (language, p, count)
    for plang, image in models.items():
        code = LANG_CODE[plang]
        reached[code] = True
        ref_len[code] = sum(image.ideal.values())
        for (term, p), j in zip(image.probs.items(), index.vocab.lookup_all(plang, image.probs), strict=True):
            if j >= 0:
                q_jid.append(j)
                q_prob.append(p)
                q_lang.append(code)
                q_ideal.append(image.ideal.get(term, 0.0))
                q_need.append(image.need.get(term, math.inf))
                q_sign.append(plang == lang and is_reference_sign(term))
            elif term in image.ideal:
                lost.append((code, p, image.ideal[term]))
    nq = len(q_jid)
    qj = np.asarray(q_jid, dtype=np.int64)
    ql = np.asarray(q_lang, dtype=np.int64)

    # postings of the query terms in the candidates' counted units
    po_q = po_c = po_cu = np.zeros(0, dtype=np.int64)
    if nq and n:
        t_cnt = d1[:, 2] - d0[:, 2]
        em, em_doc, eq = _query_entries(index, d0[:, 2], t_cnt, qj)  # the entries of the query terms
        tend = index.term_end[em].astype(np.int64)
        tstart = np.where(em == d0[em_doc, 2], 0, index.term_end[np.maximum(em - 1, 0)].astype(np.int64))
        pst, pgrp = _expand(d0[em_doc, 3] + tstart, tend - tstart)
        po_doc = em_doc[pgrp]
        po_q = eq[pgrp]
        po_cu = cu_base[po_doc] + index.post_unit[pst].astype(np.int64)
        po_c = index.post_count[pst].astype(np.float64)
        keep = counted[po_cu]
        po_q, po_c, po_cu = po_q[keep], po_c[keep], po_cu[keep]
        # A translated text unit (passage, heading, title) counts each index term at most as often as the query asks
        # for what it renders (``need``: the occurrences of the query terms it translates): a long claim that
        # repeats one rendering, or renders in several places a word the query has once, gains no more than a
        # short claim that renders it once. The query language's own text keeps the paper's Dirichlet gain.
        cap = np.where(ql == L, np.inf, np.asarray(q_need, dtype=np.float64))
        po_c = np.minimum(po_c, cap[po_q])

    # collection model per language: the index's text in that language; a query term the index has no
    # text with counts as seen once (a miss)
    n_tokens = np.maximum(index.lang_tokens.astype(np.float64), 1.0)
    pqw = np.asarray(q_prob, dtype=np.float64)
    p_c = np.maximum(index.vocab_cf[qj].astype(np.float64), 1.0) / n_tokens[ql]
    mu_l = np.full(_N_LANGS + 1, mu_translated)  # the Dirichlet prior per language of the text
    mu_l[LANG_CODE[lang]] = mu
    inv = 1.0 / (mu_l[ql] * p_c)
    # Each language on one scale. A text's log-likelihood gain ``gain(x) = sum_w p(w|q) log1p(c(w, x) / (mu p(w|C)))``
    # is measured against the gain of its language's ideal text (the query's best rendering there, ``ideal``), and
    # every language's gap is stretched to the largest ideal gain among the languages the query reaches: a text
    # as good as the ideal sits at 0, a text without any query term at ``-max ideal``, in every language (an
    # image that spreads over many alternatives no longer squeezes its language's texts near the top, and a
    # query language with little text in the index does not squeeze the others). With one language: the LM.
    # ``log Sim'(x) = log(|ideal| + mu) - log(|x| + mu) + scale(L) * (gain(x) - ideal(L))``,
    # ``scale(L) = max_L' ideal(L') / ideal(L)``
    ideal = np.append(np.bincount(ql, pqw * np.log1p(np.asarray(q_ideal) * inv), minlength=_N_LANGS), 0.0)
    for code, p, count in lost:
        ideal[code] += p * math.log1p(count * n_tokens[code] / mu_l[code])
    # a text reached through one table at rho of its ideal stands level with the ideal; through two (de <-> fr composed
    # through English) at rho squared: each table renders only part of what it is given
    for plang, image in models.items():
        if plang != lang:
            ideal[LANG_CODE[plang]] *= rho ** max(image.hops, 1)
    target = float(ideal[reached].max()) if reached.any() else 0.0
    scale = np.where(reached & (ideal > 0), target / np.where(ideal > 0, ideal, 1.0), 1.0)
    shift = np.where(reached, np.log(ref_len + mu_l), -np.inf)

    # 3. passage log-likelihoods, plain and with titles/headings; documents
    pidx_of = np.full(int(cu.size), -1, dtype=np.int64)
    pidx_of[sp] = np.arange(n_pass)
    po_p = pidx_of[po_cu]
    is_p = po_p >= 0
    pp, pq, pc = po_p[is_p], po_q[is_p], po_c[is_p]
    gain = pqw[pq] * np.log1p(pc * inv[pq])
    plain = shift[p_lang] - np.log(p_len + mu_l[p_lang]) + scale[p_lang] * (np.bincount(pp, gain, minlength=n_pass) -
                                                                   ideal[p_lang])
    matched = np.bincount(pp, minlength=n_pass) > 0  # the passage's own text holds a query term
    own = models[lang]  # the query's own words: which passages hold all its terms (their texts are read in `top`)
    counted_own = (ql == L) & ~np.asarray(q_sign, dtype=bool)
    holds = holds_all_terms(pp, pq, pc, counted_own, np.asarray(q_ideal, dtype=np.float64), n_pass,
                            sum(1 for t, c in own.ideal.items() if c > 0 and not is_reference_sign(t)))
    own_words = OwnWords(index, (analyzers or {}).get(lang) or get_analyzer(lang), own.terms) \
        if own.terms and holds.any() else None

    po_kind = kind[po_cu]
    h = np.flatnonzero(po_kind == KIND_HEADING)
    h_sec = cs_base[cu_doc[po_cu[h]]] + index.unit_sec[cu[po_cu[h]]].astype(np.int64)
    h_end = cs_base[cu_doc[po_cu[h]]] + index.sec_end[cs[h_sec]].astype(np.int64)
    hx, hg = _expand(h_sec, h_end - h_sec)
    t = np.flatnonzero(po_kind == KIND_TITLE)
    t_doc = cu_doc[po_cu[t]]
    tx, tg = _expand(cs_base[t_doc], s_cnt[t_doc])
    t_ok = s_lang[tx] == ulang[po_cu[t]][tg]
    hs_sec = np.concatenate([hx, tx[t_ok]])
    hs_q = np.concatenate([po_q[h][hg], po_q[t][tg][t_ok]])
    hs_c = np.concatenate([po_c[h][hg], po_c[t][tg][t_ok]])
    base = np.zeros(n_sec)
    gain_ext = gain
    if hs_sec.size:
        q_h = np.unique(hs_q)
        n_h = int(q_h.size)
        hd = np.bincount(hs_sec * n_h + np.searchsorted(q_h, hs_q), hs_c, minlength=n_sec * n_h)
        nz = np.flatnonzero(hd)
        qz = q_h[nz % n_h]
        base = np.bincount(nz // n_h, pqw[qz] * np.log1p(hd[nz] * inv[qz]), minlength=n_sec).astype(np.float64)
        qcol = np.full(nq, -1, dtype=np.int64)
        qcol[q_h] = np.arange(n_h)
        col = qcol[pq]
        hq = np.zeros(pq.size)
        w = col >= 0
        hq[w] = hd[p_sec[pp[w]] * n_h + col[w]]
        gain_ext = pqw[pq] * (np.log1p((pc + hq) * inv[pq]) - np.log1p(hq * inv[pq]))
    s_title_len = title_len[cs_doc, np.minimum(s_lang, _N_LANGS - 1)] * (s_lang < NO_LANG)
    head = index.sec_head_len[cs].astype(np.float64) + s_title_len
    ext = shift[p_lang] - np.log(p_len + head[p_sec] + mu_l[p_lang]) + scale[p_lang] * (
        base[p_sec] + np.bincount(pp, gain_ext, minlength=n_pass) - ideal[p_lang])

    in_dl = ulang[po_cu] == doc_lang[cu_doc[po_cu]]
    dkey = cu_doc[po_cu[in_dl]] * max(nq, 1) + po_q[in_dl]
    dc = np.bincount(dkey, po_c[in_dl], minlength=n * max(nq, 1))
    nz = np.flatnonzero(dc)
    dq = nz % max(nq, 1)
    dsum = np.bincount(nz // max(nq, 1), pqw[dq] * np.log1p(dc[nz] * inv[dq]), minlength=n)
    dlen = tot[ar_n, np.minimum(doc_lang, _N_LANGS - 1)] if n else np.zeros(0)
    doc_log = shift[doc_lang] - np.log(dlen + mu_l[doc_lang]) + scale[doc_lang] * (dsum - ideal[doc_lang])

    sim_plain = np.exp(plain)
    sim_title = np.exp(ext)
    sim_doc = np.exp(doc_log)
    doc_norm = minmax(sim_doc) if doc_score == "lm" else minmax(first)

    # 4. context
    context: FloatArray | None = None
    ctx = np.zeros(n_pass)
    if variant in CONTEXT_VARIANTS:
        if n_pass and variant == "qsf_passage_propagate":
            ctx = _passage_propagate(sigma, sim_title, p_sec, p_doc, n, s_parent, s_depth)
        elif n_pass:
            ctx = _section_context(variant, sigma, sim_title, p_sec, s_parent, s_depth)
        context = minmax(ctx)

    raw = {"passage": sim_plain, "passage_title": sim_title, "doc": sim_doc[p_doc]}
    if variant in CONTEXT_VARIANTS:
        raw["context"] = ctx
    return PassageScores(
        index=index, variant=variant, sigma=sigma, query_lang=lang, rows=rows_a, doc_index=p_doc, units=p_unit,
        sections=cs[p_sec], lang=p_lang, passage=minmax(sim_plain if variant == "qsf_v" else sim_title),
        doc=doc_norm[p_doc], context=context, first_stage=first[p_doc], matched=matched, holds=holds,
        images=models, raw=raw, own_words=own_words,
    )


class OwnWords:
    """Which texts of a passage index say a query word for word: a text's analysed terms hold the query's own terms
    (``terms``, :attr:`service.passages.lm.QueryImage.terms`) one after the other (:func:`holds_in_order`). Each text
    is read and analysed once, when asked (only texts that hold every query term are)."""

    def __init__(self, index: PassageArrays, analyze: Analyzer, terms: Sequence[str]) -> None:
        self.index, self.analyze, self.terms = index, analyze, tuple(terms)
        self._said: dict[int, bool] = {}
        # one word (reference signs aside): a text that holds it says it, nothing to read
        self._one = sum(1 for t in self.terms if not is_reference_sign(t)) == 1

    def says(self, unit: int) -> bool:
        """Whether text unit ``unit`` of the index, which holds every query term, says the query word for word."""
        if self._one:
            return True
        got = self._said.get(unit)
        if got is None:
            got = self._said[unit] = holds_in_order(self.analyze(self.index.texts.text(unit)), self.terms)
        return got


def holds_all_terms(rows: IntArray, q: IntArray, counts: IntArray | FloatArray, own: npt.NDArray[np.bool_],
                    ideal: FloatArray, n: int, n_own: int) -> npt.NDArray[np.bool_]:
    """Which of ``n`` texts hold every term of the query's ideal text in its own language, at least as often as the
    query has it (``ideal``): only they can say the query word for word. ``(rows, q, counts)``: the texts' non-zero
    counts of the query terms (one entry per text and term); ``own``: per query term, whether it counts (of the
    query's language, not a reference sign); ``n_own``: how many terms count (one the index has no text with is held
    by no text)."""
    if not n_own:
        return np.zeros(n, dtype=bool)
    hit = own[q] & (ideal[q] > 0) & (counts >= ideal[q])
    return np.bincount(rows[hit], minlength=n) >= n_own  # (each text's terms held: its entries hit)


def _section_context(variant: str, sigma: float, st: FloatArray, p_sec: IntArray, s_parent: IntArray,
                     s_depth: IntArray) -> FloatArray:
    """Un-normalised context of every passage: Sim_sec of its parent, or propagated from its ancestors."""
    n_sec = int(s_parent.size)
    max_depth = int(s_depth.max())
    levels = [np.flatnonzero(s_depth == d) for d in range(max_depth + 1)]
    direct = np.bincount(p_sec, st, minlength=n_sec)
    # Sim_sec: mean over the children with passages below them, bottom-up by depth
    total = direct.copy()
    count = np.bincount(p_sec, minlength=n_sec).astype(np.float64)
    sec = np.zeros(n_sec)
    for d in range(max_depth, -1, -1):
        idx = levels[d]
        idx = idx[count[idx] > 0]
        sec[idx] = total[idx] / count[idx]
        if d > 0 and idx.size:
            par = s_parent[idx]
            total += np.bincount(par, sec[idx], minlength=n_sec)
            count += np.bincount(par, minlength=n_sec)
    if variant == "qsf_section":
        return sec[p_sec]
    w = gaussian_weight(np.arange(max_depth + 3), sigma)
    g = np.zeros(n_sec)
    cur = np.arange(n_sec)
    for j in range(max_depth + 1):
        ok = np.flatnonzero(cur >= 0)
        if not ok.size:
            break
        g[ok] += w[j + 1] * sec[cur[ok]]
        cur[ok] = s_parent[cur[ok]]
    return g[p_sec] / (s_depth[p_sec] + 1)


def _passage_propagate(sigma: float, st: FloatArray, p_sec: IntArray, p_doc: IntArray, n: int, s_parent: IntArray,
                       s_depth: IntArray) -> FloatArray:
    """``sum_{g' != g} Sim_title(g') w(dist(g, g'))``, divided by the document's passages minus one.

    With ``S(x)`` the sum of ``Sim_title`` of the passages directly in section ``x`` and ``a`` the parent of
    ``g``: the passages of ``a`` are 2 edges from ``g``, a passage directly in ``b`` is ``2 + dist(a, b)``.
    Split by the lowest common section ``x_j`` (``j`` levels above ``a``): ``F(c, k) = sum over the sections
    ``b`` of ``c``'s subtree of w(k + depth(b) - depth(c)) S(b)`` bottom-up, and for ``j >= 1`` the other
    children ``c`` of ``x_j`` (sibling-exclusive sums of ``F(c, j + 3)``) plus ``x_j`` itself
    (``w(2 + j) S(x_j)``); ``j = 0`` is ``a``'s own subtree. Linear in the sections, sums of non-negative
    terms only (``S(a) - Sim_title(g)`` is exactly 0 for a passage alone in its section).
    Sections are processed sorted by (depth, parent): a level, and a list of siblings, is a run. Compiled
    (:func:`service.passages.kernels.passage_propagate`); the sums over a section's other siblings are prefix +
    suffix sums.
    """
    width = 2 * int(s_depth.max()) + 6  # k columns: j + 3 <= max_depth + 3 at the top, one more per level below
    return passage_propagate(gaussian_weight(np.arange(width + 2), sigma), st, p_sec, p_doc, n, s_parent, s_depth)


class ScoreOptions(TypedDict, total=False):
    """How a passage is scored: keyword arguments of :func:`score_passages`, their defaults its own (``variant``,
    ``sigma``: the context; ``doc_score``: the document component; ``mu``, ``mu_translated``, ``rho``: the language
    models' smoothing). :meth:`service.passages.reader.PassageReader.score` passes them on."""

    variant: str
    sigma: float
    doc_score: str
    mu: float
    mu_translated: float
    rho: float | None


class RankOptions(ScoreOptions, total=False):
    """How passages are ranked: the keyword arguments of :func:`rank_passages` after the query's, their defaults its
    own (:meth:`service.passages.reader.PassageReader.rank` passes them on): the scoring's (:class:`ScoreOptions`),
    then ``alpha`` and ``beta`` weigh the scores (``beta`` the passages in the query's language, ``beta_translated``
    the others: :func:`service.passages.lm.betas_of`; None: the defaults per language); ``k``: the passages returned;
    ``langs``: candidates without any text in these languages are left out (counted in ``skipped``), and only
    passages in these languages are returned (the other passages of a candidate still shape its scores); ``alone``:
    the ``k`` best passages of each candidate as if it were the only one (its passages normalised among themselves),
    from one scoring of them all (a claim chart's cells); ``spread``: each candidate's second-best passage and share of
    matching passages too (the learned ranker's)."""

    alpha: float
    beta: float
    k: int
    langs: Collection[str] | None
    alone: bool
    beta_translated: float | Mapping[str, float] | None
    spread: bool


def rank_passages(
    index: PassageArrays,
    models: QueryModels,
    lang: str,
    rows: npt.ArrayLike,
    doc_scores: npt.ArrayLike | None = None,
    *,
    analyzers: Mapping[str, Analyzer] | None = None,
    words: Mapping[str, Sequence[str]] | None = None,
    variant: str = "qsf_passage_propagate",
    alpha: float = 0.5,
    beta: float = 0.5,
    sigma: float = 1.0,
    k: int = 1500,
    doc_score: str = DEFAULT_DOC_SCORE,
    langs: Collection[str] | None = None,
    highlight: bool = True,
    mu: float = DEFAULT_MU,
    mu_translated: float = DEFAULT_MU_TRANSLATED,
    rho: float | None = None,
    alone: bool = False,
    beta_translated: float | Mapping[str, float] | None = None,
    spread: bool = False,
) -> PassageRanking:
    """The ``k`` best passages of the candidates ``rows`` of ``index`` (first-stage order, ``doc_scores`` their
    scores) for the query's images ``models`` (:func:`score_passages`); the options: :class:`RankOptions`.
    ``words``: the query words behind each query term (the highlights say which query words a passage word
    renders)."""
    check_params(variant, alpha, beta, sigma)
    betas_of(beta, beta_translated, lang)  # a bad beta_translated is refused before any scoring
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    rows_a = np.asarray(rows, dtype=np.int64).reshape(-1)
    scores_a = np.zeros(rows_a.size) if doc_scores is None else np.asarray(doc_scores, dtype=np.float64).reshape(-1)
    if scores_a.size != rows_a.size:
        raise ValueError(f"{scores_a.size} document scores for {rows_a.size} candidate rows")
    skipped = 0
    if langs is not None:
        bad = sorted(set(langs) - set(SUPPORTED_LANGS))
        if bad:
            raise ValueError(f"unsupported language(s) {bad}; choose from {', '.join(SUPPORTED_LANGS)}")
        index.check_rows(rows_a)
        ok = index.readable(rows_a, langs)
        skipped = int(rows_a.size - np.count_nonzero(ok))
        rows_a, scores_a = rows_a[ok], scores_a[ok]
    given = int(np.asarray(rows, dtype=np.int64).size)
    if not rows_a.size:
        none = None if alone else np.full(given, -1.0)
        return PassageRanking([], 0, skipped, none, none if spread else None,
                              np.zeros(given) if spread and not alone else None,
                              np.full((given, len(FIELDS)), -1.0) if spread and not alone else None)
    analyzers = analyzers or {}
    sc = score_passages(index, models, lang, rows_a, scores_a, variant=variant, sigma=sigma, doc_score=doc_score,
                        analyzers=analyzers, mu=mu, mu_translated=mu_translated, rho=rho)
    ranked: list[tuple[PassageScores, FloatArray, int]] = []  # (scores, final scores, passage) best first
    best = second = share = fields = None
    for part in [sc.alone(d) for d in range(int(rows_a.size))] if alone else [sc]:
        final = part.combine(alpha, beta, beta_translated)
        among = None if langs is None else np.flatnonzero(np.isin(part.lang, [LANG_CODE[x] for x in langs]))
        top = part.top(final, k, among)
        ranked.extend((part, final, i) for i in top.tolist())
        if not alone:
            kinds = (part.index.unit_tag[part.units] >> 2).astype(np.int64) if spread else None
            best, second, share, fields = _per_candidate(part, final, among, given, ok if langs is not None else None,
                                                         spread, kinds)
    if highlight and words is None:
        words = {}
    context_name = "section" if variant == "qsf_section" else "propagated"
    hits: list[PassageHit] = []
    titles: dict[int, str | None] = {}
    for part, final, i in ranked:
        row = int(part.rows[part.doc_index[i]])
        unit = int(part.units[i])
        plang = SUPPORTED_LANGS[int(part.lang[i])]
        text = index.texts.text(unit)
        comps = {"passage": float(part.passage[i]), "doc": float(part.doc[i]),
                 "first_stage": float(part.first_stage[i])}
        if part.context is not None:
            comps[context_name] = float(part.context[i])
        if part.word_for_word(i):  # why it stands above passages with a higher score
            comps["own_words"] = 1.0
        if row not in titles:
            titles[row] = document_title(index, row, lang)
        matches: list[PassageMatch] = []
        if highlight and plang in part.images:
            image = part.images[plang]
            matches = passage_matches(highlight_matches(text, image.probs, analyzers.get(plang) or get_analyzer(plang)),
                                      plang, lang, image, words)
        hits.append(PassageHit(
            doc_id=index.doc_id(row), passage_id=f"{index.doc_id(row)}/{index.pids.text(unit)}",
            section_path=section_path(index, row, int(part.sections[i])), text=text, score=float(final[i]),
            components=comps, highlights=[(m.start, m.end) for m in matches], title=titles[row], lang=plang,
            field=KIND_FIELDS[int(index.unit_tag[unit]) >> 2], matches=matches,
        ))
    return PassageRanking(hits, int(sc.rows.size), skipped, best, second, share, fields)


def _per_candidate(sc: PassageScores, final: FloatArray, among: IntArray | None, given: int,
                   kept: npt.NDArray[np.bool_] | None, spread: bool = True,
                   kinds: IntArray | None = None
                   ) -> tuple[FloatArray, FloatArray | None, FloatArray | None, FloatArray | None]:
    """:attr:`PassageRanking.best`, and with ``spread`` ``second``, ``matched`` and ``fields``: the largest and
    second-largest :meth:`PassageScores.key` of each candidate's passages (those at ``among``, else all; -1 for a
    candidate without one), the share of them that hold a query term, and the largest key among its passages of each
    of :data:`FIELDS` (``kinds``: the unit kind of every passage; None: the fields are not computed); over the
    ``given`` rows, of which ``kept`` were scored.
    No sort of the passages (100,000 passages take ~1.6 ms with the spread, ~0.3 ms without)."""
    key = sc.key(final)
    sel = np.arange(key.size) if among is None else among
    docs, keys = sc.doc_index[sel], key[sel]
    n = sc.rows.size
    best = np.full(n, -1.0)
    np.maximum.at(best, docs, keys)
    if not spread:
        return best if kept is None else _over_given(best, -1.0, given, kept), None, None, None
    at_best = np.flatnonzero(keys == best[docs])  # the second: the largest key once one passage at the best is out
    _, one = np.unique(docs[at_best], return_index=True)
    rest = keys.copy()
    rest[at_best[one]] = -np.inf
    second = np.full(n, -1.0)
    np.maximum.at(second, docs, rest)
    second[~np.isfinite(second)] = -1.0
    count = np.bincount(docs, minlength=n).astype(np.float64)
    hold = np.bincount(docs, weights=(keys >= 2.0).astype(np.float64), minlength=n)
    share = np.divide(hold, count, out=np.zeros(n), where=count > 0)
    fields = np.full((n, len(FIELDS)), -1.0)
    if kinds is not None:
        of_sel = kinds[sel]
        for j, kind in enumerate(FIELDS.values()):
            at = of_sel == kind
            np.maximum.at(fields[:, j], docs[at], keys[at])
    if kept is None:
        return best, second, share, fields
    return (_over_given(best, -1.0, given, kept), _over_given(second, -1.0, given, kept),
            _over_given(share, 0.0, given, kept), _over_given(fields, -1.0, given, kept))


def _over_given(x: FloatArray, fill: float, given: int, kept: npt.NDArray[np.bool_]) -> FloatArray:
    """``x`` (one row per scored candidate) spread over the ``given`` rows, ``fill`` where a row was not scored."""
    out = np.full((given, *x.shape[1:]), fill)
    out[kept] = x
    return out


def passage_matches(found: list[tuple[int, int, str]], plang: str, lang: str, image: QueryImage,
                    words: Mapping[str, Sequence[str]] | None) -> list[PassageMatch]:
    """The highlights of a passage in ``plang`` for a query in ``lang`` from its words whose term is in the query's
    image there (``found``: :func:`~service.passages.highlight.highlight_matches`), translated when ``plang`` is
    not ``lang``, each with the query words (``words``) it renders."""
    rendered: dict[str, list[str]] = {}  # a term's query words, once per term
    for _, _, t in found:
        if t not in rendered:
            rendered[t] = list(dict.fromkeys(w for src in image.sources.get(t, ()) for w in (words or {}).get(src, ())))
    return [PassageMatch(start=s, end=e, term=t, translated=plang != lang, query_words=list(rendered[t]))
            for s, e, t in found]


def section_path(index: PassageArrays, row: int, section: int) -> list[str]:
    """Labels of a section and its ancestors, outermost first, root excluded (headings as written)."""
    sec0, unit0 = int(index.docs[row, 1]), int(index.docs[row, 0])
    out: list[str] = []
    s = section
    while s >= sec0 and int(index.sec_parent[s]) >= 0:
        kind = int(index.sec_kind[s])
        label = SECTION_LABELS[kind]
        out.append(index.texts.text(unit0 + int(index.sec_unit[s])) if kind == SEC_HEADING else str(label))
        s = sec0 + int(index.sec_parent[s])
    return out[::-1]


def document_title(index: PassageArrays, row: int, lang: str) -> str | None:
    """The document title in ``lang``, else English, else the first of en, de, fr it has."""
    u0, u1 = int(index.docs[row, 0]), int(index.docs[row + 1, 0])
    tags = index.unit_tag[u0:min(u1, u0 + _N_LANGS)]  # titles come first
    titles = {int(tag) & 3: u0 + i for i, tag in enumerate(tags.tolist()) if int(tag) >> 2 == KIND_TITLE}
    mask = sum(1 << c for c in titles)
    code = pick_lang(mask, LANG_CODE[lang])
    return index.texts.text(titles[code]) if code in titles else None
