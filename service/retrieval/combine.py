"""Combination of systems' scores (numpy only): weighted linear, Borda-style interpolation, LinLearn.

Every method reads per-component raw score arrays over one candidate set (NaN where a component did not
score a row) and returns one fused score per candidate:

- ``linear``: ``sum_k w_k * minmax(s_k) / sum_k w_k`` over the components present: the service's
  existing weighted fusion (:class:`service.pipeline.FusionStep`).
- ``borda``: Borda-count style voting (Aslam and Montague 2001, as used by Schamoni et al. 2014):
  each system hands out one unit of points over the candidates in proportion to its scores shifted to
  start at 0 (``p_k(d) = (s_k(d) - min s_k) / sum_d' (s_k(d') - min s_k)``; an unscored row gets 0
  points), and ``fused = sum_k w_k p_k``. For two systems ``w = (kappa, 1 - kappa)`` is the paper's
  ``kappa f1 / sum f1 + (1 - kappa) f2 / sum f2``; ``kappa`` is tuned on a dev split.
- ``linlearn``: one pairwise linear learner over every system's score as a feature (Schamoni et al.
  2014, "LinLearn"): ``fused = sum_k w_k * minmax(s_k)``, with ``w`` learned (may be negative; no
  division), trained by ``training.ltr.linlearn`` on dev-split candidate lists of the real systems.

:class:`CombineStep` is the pipeline stage (``name = "fusion"``, so it replaces
:class:`~service.pipeline.FusionStep` at the end of a pipeline); it holds the weights of every
available method and picks one per query (``query.fusion`` when the request set it, else its default).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from service.pipeline import Candidates, Query, minmax
from service.retrieval.first_stage import QueryError

METHODS = ("linear", "borda", "linlearn")
COMBINE_FORMAT = "priorart-combine"
COMBINE_VERSION = 1


def sum_normalise(x: np.ndarray) -> np.ndarray:
    """Borda points: scores shifted to start at 0 and divided by their sum (NaN -> 0 points)."""
    x = np.asarray(x, dtype=np.float64)
    out = np.zeros_like(x)
    ok = ~np.isnan(x)
    if not ok.any():
        return out
    shifted = x[ok] - x[ok].min()
    total = shifted.sum()
    if total > 0:
        out[ok] = shifted / total
    return out


def linear(scores: Mapping[str, np.ndarray], weights: Mapping[str, float]) -> np.ndarray:
    """Weighted mean of min-max normalised scores over the components present (FusionStep's formula)."""
    n = _length(scores)
    fused = np.zeros(n)
    total = 0.0
    for name, w in weights.items():
        if name in scores:
            total += w
            if w:
                fused += w * minmax(scores[name])
    return fused / total if total > 0 else fused


def borda(scores: Mapping[str, np.ndarray], weights: Mapping[str, float]) -> np.ndarray:
    """Weighted sum of Borda points (:func:`sum_normalise`)."""
    fused = np.zeros(_length(scores))
    for name, w in weights.items():
        if name in scores and w:
            fused += w * sum_normalise(scores[name])
    return fused


def linlearn(scores: Mapping[str, np.ndarray], weights: Mapping[str, float]) -> np.ndarray:
    """Learned linear combination of min-max normalised scores (missing components count 0)."""
    fused = np.zeros(_length(scores))
    for name, w in weights.items():
        if name in scores and w:
            fused += w * minmax(scores[name])
    return fused


COMBINERS = {"linear": linear, "borda": borda, "linlearn": linlearn}


def combine(method: str, scores: Mapping[str, np.ndarray], weights: Mapping[str, float]) -> np.ndarray:
    """Fuse with one of :data:`METHODS`."""
    try:
        fn = COMBINERS[method]
    except KeyError:
        raise ValueError(f"unknown fusion method {method!r}; valid: {', '.join(METHODS)}") from None
    return fn(scores, weights)


def _length(scores: Mapping[str, np.ndarray]) -> int:
    lengths = {len(a) for a in scores.values()}
    if len(lengths) > 1:
        raise ValueError(f"score arrays differ in length: {sorted(lengths)}")
    return lengths.pop() if lengths else 0


@dataclass
class CombineConfig:
    """The ``combine.json`` of an ltr folder: weights per method, the default method, dev figures."""

    methods: dict[str, dict[str, float]]
    default: str = "linlearn"
    info: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        bad = [m for m in self.methods if m not in METHODS]
        if bad:
            raise ValueError(f"unknown fusion method(s) {bad}; valid: {', '.join(METHODS)}")
        if self.default not in self.methods:
            raise ValueError(f"default method {self.default!r} has no weights (have {', '.join(self.methods)})")

    def to_json(self) -> dict[str, Any]:
        return {"format": COMBINE_FORMAT, "version": COMBINE_VERSION, "default": self.default,
                "methods": self.methods, **self.info}

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_json(), indent=1), encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> CombineConfig:
        p = Path(path)
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ValueError(f"{p}: unreadable combination weights ({exc})") from exc
        if data.get("format") != COMBINE_FORMAT or data.get("version") != COMBINE_VERSION:
            raise ValueError(f"{p}: format {data.get('format')!r} v{data.get('version')!r}, expected "
                             f"{COMBINE_FORMAT!r} v{COMBINE_VERSION}")
        methods = {m: {k: float(v) for k, v in w.items()} for m, w in data["methods"].items()}
        info = {k: v for k, v in data.items() if k not in ("format", "version", "default", "methods")}
        return cls(methods, str(data["default"]), info)


class CombineStep:
    """Final pipeline stage: fuse the component scores with ``linear``, ``borda`` or ``linlearn``.

    ``methods`` maps each available method to its weights (component -> weight; for ``borda`` the
    interpolation weights of the two systems). The method of a query is ``query.fusion`` when set
    (an attribute the engine may add to :class:`~service.pipeline.Query`), else ``default``.
    ``query.weights`` are the ``linear`` method's weights when set (a request's explicit weights, or
    those the models' ``WeightsStep`` chose for the query's depth); ``borda`` and ``linlearn`` always use
    their learned weights (a request that wants its own weights asks for ``linear``).
    Sets ``cands.fused``, ``cands.normalised`` (min-max, for display) and ``cands.weights`` like
    :class:`~service.pipeline.FusionStep`, and records the method in ``query.info["fusion"]`` (merged
    with what an earlier stage put there).
    """

    name = "fusion"

    def __init__(self, methods: Mapping[str, Mapping[str, float]], default: str, source: str = "") -> None:
        bad = [m for m in methods if m not in METHODS]
        if bad:
            raise ValueError(f"unknown fusion method(s) {bad}; valid: {', '.join(METHODS)}")
        if default not in methods:
            raise ValueError(f"default fusion method {default!r} not among {', '.join(methods)}")
        self.methods = {m: dict(w) for m, w in methods.items()}
        self.default = default
        self.source = source

    def method_for(self, query: Query) -> str:
        asked = getattr(query, "fusion", None)
        if asked is None:
            return self.default
        if asked not in self.methods:
            raise QueryError(f"fusion method {asked!r} is not available; this index has {', '.join(self.methods)}")
        return str(asked)

    def run(self, query: Query, cands: Candidates) -> Candidates:
        method = self.method_for(query)
        if method == "linear" and query.weights is not None:
            weights = dict(query.weights)
        else:
            weights = self.methods[method]
        cands.normalised = {name: minmax(arr) for name, arr in cands.scores.items()}
        cands.fused = combine(method, cands.scores, weights)
        cands.weights = {n: w for n, w in weights.items() if n in cands.scores}
        missing = sorted(n for n, w in weights.items() if w and n not in cands.scores)
        info = dict(query.info.get("fusion") or {})
        if method != "linear" and "weights" in info:
            info["linear_weights"] = info.pop("weights")
        info.update({"method": method, "weights": cands.weights, "missing_components": missing})
        query.info["fusion"] = info
        return cands

    def describe(self) -> dict[str, Any]:
        return {"methods": self.methods, "default": self.default, "source": self.source}
