"""Dirichlet language-model similarity pieces shared by the passage ranker: query models, weights, norms.

``Sim(q, x) = exp(-CE(theta_q^MLE || theta_x^Dir))`` with
``p_Dir(w | x) = (c(w, x) + mu * p(w | C)) / (|x| + mu)``, ``mu = 1000`` (paper, Zhai & Lafferty).
In log form, summed over the query terms ``w`` with ``p(w | q) > 0``::

    log Sim(q, x) = sum_w p(w|q) log(mu p(w|C)) - log(|x| + mu) + sum_{w in x} p(w|q) log1p(c(w, x) / (mu p(w|C)))

so only the query terms that occur in ``x`` cost anything (the ranker sums the last term over postings).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from service.text.analysis import get_analyzer

if TYPE_CHECKING:
    from service.retrieval.translate import TranslationTable

FloatArray = npt.NDArray[np.float64]

VARIANTS = ("qsf_v", "qsf_v_title", "qsf_section", "qsf_section_propagate", "qsf_passage_propagate")
"""Valid ``variant`` names, in the paper's order."""
CONTEXT_VARIANTS = ("qsf_section", "qsf_section_propagate", "qsf_passage_propagate")
DOC_SCORES = ("lm", "first_stage")
DEFAULT_MU = 1000.0
DEFAULT_PARAMS: dict[str, float] = {"alpha": 0.5, "beta": 0.5, "sigma": 1.0}
"""The service's defaults (``priorart experiment passages`` reports them against tuned values)."""
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


def query_models(
    query: str, lang: str, langs: Iterable[str], translations: Mapping[str, TranslationTable] | None = None
) -> dict[str, dict[str, float]]:
    """Maximum-likelihood query model in ``lang`` and, for every other language of ``langs``, its image.

    The image in another language is the PSQ translation of the model when ``translations[lang]``
    translates into that language (``sum_s p(s|q) p(t|s)``), else the query text analysed with that
    language's analyzer (codes, numbers, formulas and names still match; an empty model when nothing
    is left). Raises ``ValueError`` when the query has no index term in ``lang``.
    """
    terms = get_analyzer(lang)(query)
    if not terms:
        raise ValueError("the query has no index terms after analysis (only stop words or punctuation?)")
    base = {t: n / len(terms) for t, n in Counter(terms).items()}
    models = {lang: base}
    tables = translations or {}
    for other in langs:
        if other == lang:
            continue
        table = tables.get(lang)
        if table is not None and table.tgt == other:
            model: dict[str, float] = {}
            for src, p in base.items():
                for tgt, pt in table.translate_term(src).items():
                    model[tgt] = model.get(tgt, 0.0) + p * pt
            models[other] = model
        else:
            oterms = get_analyzer(other)(query)
            models[other] = {t: n / len(oterms) for t, n in Counter(oterms).items()} if oterms else {}
    return models
