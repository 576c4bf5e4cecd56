"""Dirichlet language-model similarity pieces shared by the passage ranker: query images, weights, norms.

``Sim(q, x) = exp(-CE(theta_q || theta_x^Dir))`` with
``p_Dir(w | x) = (c(w, x) + mu * p(w | C)) / (|x| + mu)``, ``mu = 1000`` (paper, Zhai & Lafferty) in the query's
language; ``theta_q`` is the query's image in ``x``'s language (:class:`QueryImage`).
In log form, summed over the query terms ``w`` with ``p(w | q) > 0``::

    log Sim(q, x) = sum_w p(w|q) log(mu p(w|C)) - log(|x| + mu) + sum_{w in x} p(w|q) log1p(c(w, x) / (mu p(w|C)))

so only the query terms that occur in ``x`` cost anything (the ranker sums the last term over postings).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, get_args

import numpy as np
import numpy.typing as npt

from service.schema import Variant
from service.text.analysis import SUPPORTED_LANGS, get_analyzer

if TYPE_CHECKING:
    from service.text.translation import TranslationTable

FloatArray = npt.NDArray[np.float64]

VARIANTS: tuple[str, ...] = get_args(Variant)
"""Valid ``variant`` names, in the paper's order (named in service/schema.py ``Variant``)."""
CONTEXT_VARIANTS = ("qsf_section", "qsf_section_propagate", "qsf_passage_propagate")
DOC_SCORES = ("lm", "first_stage")
DEFAULT_DOC_SCORE = "first_stage"
"""The document component: the first stage's (fused) score, which merges the languages on one scale; ``lm``: the
paper's ``Sim(q, doc)``."""
DEFAULT_MU = 1000.0
DEFAULT_MU_TRANSLATED = 100.0
"""The Dirichlet prior of text reached through a translation (``mu`` of the query language's text stays the
paper's): a smaller prior judges a text by how many of the query's terms it renders rather than by how often it
repeats a few (a translated term spreads over alternatives, so repetition is weak evidence). Chosen by
``priorart-lab experiment xling-passages --mu-translated ...``, cross-fitted (docs/RESULTS.md)."""
DEFAULT_RHO: Mapping[str, float] = MappingProxyType({"de": 0.6, "en": 0.5, "fr": 0.6})
"""``rho`` per query language: the share of its ideal gain a text reached through one translation table must reach
to stand level with a text in the query's language that reaches all of its own (a true translation renders only part
of the query's best rendering there; 1 measures every language against its full ideal); through two tables (de <->
fr composed through English) rho squared. Chosen per query language by ``priorart-lab experiment xling-passages --sweep
rho=1,0.85,0.7,0.6,0.5`` with :data:`DEFAULT_BETA_TRANSLATED`, cross-fitted: both halves of the grants chose 0.5 for
English; for German they chose 0.6 and 0.5 (0.6, the value before, is kept), for French 0.6 and 0.7 (0.6: the higher
MRR over all French topics). docs/RESULTS.md has the figures."""
DEFAULT_BETA_TRANSLATED: Mapping[str, float] = MappingProxyType({"de": 0.5, "en": 1.0, "fr": 0.5})
"""``beta`` of a passage reached through a translation, per passage language (a passage in the query's own language
keeps ``beta``): the weight of its document's score against its context (the section or the neighbouring passages).
Chosen per passage language by ``priorart-lab experiment xling-passages --sweep beta_translated=0.25,0.5,0.75,1``,
cross-fitted: both halves of the grants chose 1 for English (an English passage reached through a table weighs its
document's score alone; in a claim chart, where the document's score is one value, its own score decides). For German
they chose 0.25 and 1, for French 0.25 (MRR within 0.005 of 0.5); both keep the paper's 0.5, with which a twin claim
stays above a paragraph of its document that renders two of its terms (tests/service/passages/test_passages_xling.py).
docs/RESULTS.md has the figures."""
DEFAULT_PARAMS: dict[str, float] = {"alpha": 0.5, "beta": 0.5, "sigma": 1.0, "mu": DEFAULT_MU,
                                    "mu_translated": DEFAULT_MU_TRANSLATED}
"""The service's defaults (``priorart-lab experiment passages`` reports them against tuned values)."""
PAPER_SIGMAS = (0.5, 1.0, 2.0, 5.0)
PAPER_PARAMS: dict[str, tuple[float, float | None]] = {
    "qsf_v": (0.8, None),
    "qsf_v_title": (0.9, None),
    "qsf_section": (0.6, 0.1),
    "qsf_section_propagate": (0.6, 0.3),
    "qsf_passage_propagate": (0.5, 0.2),
}
"""(alpha, beta) the paper learned on CLEF-IP 2012 training queries (its Table 4; sigma not reported)."""


def check_params(variant: str, alpha: float, beta: float, sigma: float) -> None:
    """Raise ``ValueError`` naming the bad parameter (unknown variant, alpha/beta outside [0, 1], sigma)."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown passage variant {variant!r}; valid: {', '.join(VARIANTS)}")
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    if not 0.0 <= beta <= 1.0:
        raise ValueError(f"beta must be in [0, 1], got {beta}")
    if not sigma > 0 or math.isinf(sigma):
        raise ValueError(f"sigma must be a finite number > 0, got {sigma}")


def rho_of(rho: float | None, lang: str) -> float:
    """``rho`` as given, or the query language's default (:data:`DEFAULT_RHO`); ``ValueError`` unless in (0, 1]."""
    value = DEFAULT_RHO.get(lang, 1.0) if rho is None else float(rho)
    if not 0.0 < value <= 1.0:
        raise ValueError(f"rho must be in (0, 1], got {rho}")
    return value


def betas_of(beta: float, beta_translated: float | Mapping[str, float] | None, lang: str) -> tuple[float, ...]:
    """``beta`` of a passage in each of :data:`SUPPORTED_LANGS` (in that order) for a query in ``lang``: ``beta`` in
    the query's language; in the others ``beta_translated``, one value for all or one per passage language (missing
    ones and None: :data:`DEFAULT_BETA_TRANSLATED`). ``ValueError`` unless each is in [0, 1]."""
    if beta_translated is None or isinstance(beta_translated, Mapping):
        table = {**DEFAULT_BETA_TRANSLATED, **(beta_translated or {})}
    else:
        table = dict.fromkeys(SUPPORTED_LANGS, float(beta_translated))
    out = tuple(float(beta) if pl == lang else float(table.get(pl, beta)) for pl in SUPPORTED_LANGS)
    for pl, value in zip(SUPPORTED_LANGS, out, strict=True):
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"beta of {pl} passages must be in [0, 1], got {value}")
    return out


def gaussian_weight(distance: float | npt.ArrayLike, sigma: float) -> FloatArray:
    """``exp(-d^2 / (2 sigma^2))`` (paper eq. 13), element-wise."""
    if not sigma > 0:
        raise ValueError(f"sigma must be > 0, got {sigma}")
    d = np.asarray(distance, dtype=np.float64)
    return np.asarray(np.exp(-(d * d) / (2.0 * sigma * sigma)), dtype=np.float64)


def minmax(values: npt.ArrayLike) -> FloatArray:
    """Min-max normalise to [0, 1]; a constant (or empty) vector becomes zeros."""
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        return v.copy()
    lo, hi = float(v.min()), float(v.max())
    if not hi > lo:
        return np.zeros_like(v)
    return (v - lo) / (hi - lo)


@dataclass(frozen=True)
class QueryImage:
    """A query in one language: ``p(w | q)`` over that language's index terms (summing to 1), the term counts of
    its *ideal text* there (each query term rendered once per occurrence by its most probable translation; in the
    query's own language, the query itself), and the query terms each index term renders (for highlights and
    claim charts). The ranker measures a text against the ideal text of its language, which puts every
    language on one scale (module :mod:`service.passages.ranker`)."""

    lang: str
    probs: Mapping[str, float]
    ideal: Mapping[str, float]
    sources: Mapping[str, tuple[str, ...]]
    # per index term: the weight of the query units it renders (how often the query asks for it); the ranker counts
    # a translated text's occurrences of the term up to this
    need: Mapping[str, float] = field(default_factory=dict)
    # the tables the query went through to reach this language: 0 its own, 1 one table, 2 composed through a pivot
    hops: int = 0
    # in the query's own language: its index terms in the order it has them (what a passage holds word for word to
    # rank first, :func:`holds_in_order`); empty in a translated language (and where the caller does not know them)
    terms: tuple[str, ...] = ()

    @classmethod
    def of_units(cls, lang: str, units: Iterable[tuple[str, tuple[Mapping[str, float], float]]], *,
                 hops: int = 0) -> QueryImage:
        """The image of weighted query units ``(query term, ({index term: p}, weight))`` (a PSQ route's units;
        ``{term: 1.0}`` for an untranslated term), reached through ``hops`` tables. Raises ``ValueError`` when there
        is no unit with a weight."""
        items = [(src, mapping, float(w)) for src, (mapping, w) in units if w > 0 and mapping]
        total = sum(w for _, _, w in items)
        if not total > 0:
            raise ValueError("the query has no index terms after analysis (only stop words or punctuation?)")
        probs: dict[str, float] = {}
        ideal: dict[str, float] = {}
        sources: dict[str, list[str]] = {}
        need: dict[str, float] = {}
        for src, mapping, w in items:
            mass = sum(mapping.values())
            for term, p in mapping.items():
                probs[term] = probs.get(term, 0.0) + w * p / (mass * total)
                need[term] = need.get(term, 0.0) + w
                if src not in sources.setdefault(term, []):
                    sources[term].append(src)
            best = min(mapping.items(), key=lambda kv: (-kv[1], kv[0]))[0]
            ideal[best] = ideal.get(best, 0.0) + w
        return cls(lang, probs, ideal, {t: tuple(v) for t, v in sources.items()}, need, hops)

    def with_terms(self, terms: Iterable[str]) -> QueryImage:
        """This image with the query's own index terms in their order (:attr:`terms`)."""
        return replace(self, terms=tuple(terms))

    @classmethod
    def of_terms(cls, lang: str, terms: Iterable[str]) -> QueryImage:
        """The maximum-likelihood model of analysed query terms (the query in its own language), with the terms in
        their order."""
        ordered = tuple(terms)
        counts = Counter(ordered)
        return cls.of_units(lang, [(t, ({t: 1.0}, float(n))) for t, n in counts.items()]).with_terms(ordered)


def is_reference_sign(term: str) -> bool:
    """A drawing's reference sign, ``(4)`` or ``(12a)`` (the only tokens in parentheses,
    :data:`service.text.analysis.TOKEN_RE`): claims put them between the words, queries leave them out."""
    return term.startswith("(")


def holds_in_order(text_terms: Sequence[str], query_terms: Sequence[str]) -> bool:
    """Whether a text's analysed terms hold the query's, one after the other, in its order (reference signs aside on
    both sides): the text says the query word for word. An empty query is held by no text."""
    want = [t for t in query_terms if not is_reference_sign(t)]
    if not want:
        return False
    have = [t for t in text_terms if not is_reference_sign(t)]
    first, m = want[0], len(want)
    return any(have[i] == first and have[i:i + m] == want for i in range(len(have) - m + 1))


QueryModels = Mapping[str, QueryImage]
"""A query's image per language it reaches (:meth:`service.retrieval.first_stage.FirstStage.query_units` gives the
units an engine turns into images)."""


Tables = Mapping[str, "TranslationTable"] | Mapping[tuple[str, str], "TranslationTable"]
"""Translation tables by ``(source, target)``, or by source language (a table into its ``tgt``)."""


def query_models(
    query: str,
    lang: str,
    translations: Tables | None = None,
    analyzers: Mapping[str, Callable[[str], list[str]]] | None = None,
) -> dict[str, QueryImage]:
    """The images of a query text without an index's routes (tests, experiments): its own language analysed with
    ``analyzers[lang]`` (default analyzer otherwise), and each language a table of ``translations`` translates it
    into, term by term (keys ``(src, tgt)``, or a source language for a table into ``table.tgt``).
    Raises ``ValueError`` when the query has no index term in ``lang``."""
    analyze = (analyzers or {}).get(lang) or get_analyzer(lang)
    terms = analyze(query)
    if not terms:
        raise ValueError("the query has no index terms after analysis (only stop words or punctuation?)")
    own = QueryImage.of_terms(lang, terms)
    models = {lang: own}
    for key, table in (translations or {}).items():
        src = key[0] if isinstance(key, tuple) else key
        if src != lang or table.tgt == lang or table.tgt in models:
            continue
        counts = Counter(terms)
        models[table.tgt] = QueryImage.of_units(table.tgt, [(t, (table.translate_term(t), float(n)))
                                                            for t, n in counts.items()],
                                                hops=table.hops)
    return models
