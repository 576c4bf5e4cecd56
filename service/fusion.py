"""Fusion: how the component scores of a candidate set become one ranking. One module for every method.

Components (:data:`COMPONENTS`) are the scores the stages put on candidates, each named by what it is:
``bm25`` (first stage), ``dense`` (dual encoder), ``text`` (text-only ranker), ``meta`` (meta-only
ranker over classification codes), ``joint`` (joint text+meta ranker), ``wordpair`` and ``domain``
(learning-to-rank models). A component counts only where its input exists (:data:`REQUIRES`): the stage
that computes it records why it did not apply to a query (no codes, no encoder for the language), and
the fusion weights are renormalised over the components that apply, per request. The names of the components and
of the methods are defined in service/schema.py (``COMPONENTS``, ``FusionMethod``), the lowest module that needs them.

Methods (:data:`METHODS`), all over one candidate set (NaN where a component did not score a row):

- ``linear``: ``sum_c w_c * minmax(s_c) / sum_c w_c`` over the components that apply (the weighted
  combination of the meta-text-embeddings paper; weights learned per candidate depth and per query
  profile by ``priorart fuse`` / ``build --models``, see training/fusion.py);
- ``borda``: Borda-count voting (Aslam and Montague 2001, as used by Schamoni et al. 2014): each
  component hands out one unit of points in proportion to its scores shifted to start at 0,
  ``fused = sum_c w_c * p_c``; for two systems ``w = (kappa, 1 - kappa)``;
- ``linlearn``: a pairwise linear learner over every component (Schamoni et al. 2014):
  ``fused = sum_c w_c * minmax(s_c)``, weights may be negative (``priorart train-ltr``).

Profiles (:data:`PROFILES`): ``codes`` when the query carries classification codes (given, or those of
a publication-number query's document), else ``nocodes``. Linear weights are learned and installed per
profile: a profile whose learned weights did not beat BM25 on held-out dev topics ranks by BM25 alone,
and says so.

The weights file (``INDEX/fusion.json``, format ``priorart-fusion`` version 2) holds every method::

    {"format": "priorart-fusion", "version": 2, "created": ..., "default_method": "linear",
     "linear": {"nocodes": {"installed": false, "reason": "...", "depths": {"40": {"bm25": 1.0}, ...},
                            "learned": {"40": {...}}},
                "codes":   {"installed": true, "reason": "...", "depths": {"40": {"bm25": 0.6, "meta": 0.4}}}},
     "borda": {"weights": {"bm25": 0.7, "domain": 0.3}, "source": "..."} | null,
     "linlearn": {"weights": {...}, "source": "..."} | null,
     "learning": {what the weights were learned on, the cross-validated table}}
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args

import numpy as np

from service.candidates import CANDIDATES, Candidates
from service.index.folder import IndexFolder, IndexFormatError, Layout
from service.index.parts import FUSION_FORMAT, FUSION_VERSION, open_part
from service.query import QueryError
from service.schema import COMPONENTS, FusionInfo, FusionMethod
from service.versioned import read_versioned, write_versioned

if TYPE_CHECKING:
    from service.query import Query

log = logging.getLogger(__name__)

METHODS: tuple[str, ...] = get_args(FusionMethod)
PROFILES = ("nocodes", "codes")
REQUIRES = {
    "bm25": "index terms in the query",
    "dense": "a dense encoder for the query language (the pretrained multilingual one, or a trained dual encoder)",
    "text": "a text ranker trained for the query language",
    "meta": "classification codes in the query",
    "joint": "classification codes and a text encoder for the query language",
    "wordpair": "a word-pair model trained for the query language",
    "domain": "classification codes or a publication-number query",
}
"""What each component needs from the query to count."""
BM25_ONLY: dict[str, float] = {"bm25": 1.0}
PRETRAINED_DENSE_WEIGHTS: dict[str, float] = {"bm25": 0.5, "dense": 0.5}
"""The linear weights of an index built with the pretrained encoder's dense stage (:meth:`FusionModel.pretrained_dense`:
BM25 and the dense cosine, min-max over the candidates, half and half)."""
REQUEST_WEIGHTS = "the request's weights"
"""The ``source`` of a request's own weights (the explanations say them as asked for, not as a fallback)."""


class FusionError(ValueError):
    """Fusion weights that cannot be used, or learned (``priorart fuse``, training/fusion.py); the message says why
    and what to do."""


# --------------------------------------------------------------------------------------------------
# normalisation and the combination methods
# --------------------------------------------------------------------------------------------------


def _scored(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``x`` as float64, zeros of its shape, and where it has a score (not NaN: the component scored the row)."""
    x = np.asarray(x, dtype=np.float64)
    return x, np.zeros_like(x), ~np.isnan(x)


def minmax(x: np.ndarray) -> np.ndarray:
    """Min-max normalise over the candidate set; NaN (component did not score the row) -> 0; constant -> 1."""
    x, out, ok = _scored(x)
    if not ok.any():
        return out
    lo, hi = float(x[ok].min()), float(x[ok].max())
    out[ok] = (x[ok] - lo) / (hi - lo) if hi > lo else 1.0
    return out


def sum_normalise(x: np.ndarray) -> np.ndarray:
    """Borda points: scores shifted to start at 0 and divided by their sum (NaN -> 0 points)."""
    x, out, ok = _scored(x)
    if not ok.any():
        return out
    shifted = x[ok] - x[ok].min()
    total = shifted.sum()
    if total > 0:
        out[ok] = shifted / total
    return out


def linear_grid(normalised: Sequence[np.ndarray], grid: np.ndarray, *, divide: bool = True) -> np.ndarray:
    """Fused scores ``[n, points]`` of every weight vector of ``grid`` (``[points, c]``) over ``c``
    normalised score columns: ``sum_j w_j x_j`` component by component, then divided by ``sum_j w_j``.

    The one implementation of the weighted sum: a request is the grid of one point, so learning and
    serving rank with the same floating-point operations (exact ties come out the same).
    """
    grid = np.atleast_2d(np.asarray(grid, dtype=np.float64))
    if grid.shape[1] != len(normalised):
        raise ValueError(f"grid has {grid.shape[1]} components, {len(normalised)} score columns given")
    n = len(normalised[0]) if normalised else 0
    fused = np.zeros((n, len(grid)))
    for j, col in enumerate(normalised):
        fused += np.asarray(col, dtype=np.float64)[:, None] * grid[None, :, j]  # a zero weight adds exactly 0
    if divide:
        total = grid.sum(axis=1)
        fused = np.divide(fused, total[None, :], out=fused, where=total[None, :] > 0)
    return fused


def fuse_linear(scores: Mapping[str, np.ndarray], comps: Sequence[str], grid: np.ndarray) -> np.ndarray:
    """Linear fusion ``[n, points]`` of every weight vector of ``grid`` (``[points, len(comps)]``).

    Components of ``comps`` missing from ``scores`` (they did not apply to the query) are left out and
    the weights renormalise over the rest; a weight vector with no positive weight on a present
    component ranks by BM25 alone. This is the service's linear fusion (a request is the grid of one
    point) and the one training evaluates over its grid.
    """
    grid = np.atleast_2d(np.asarray(grid, dtype=np.float64))
    present = [j for j, c in enumerate(comps) if c in scores]
    n = len(next(iter(scores.values()))) if scores else 0
    if not present:
        fused = np.zeros((n, len(grid)))
        dead: np.ndarray = np.ones(len(grid), dtype=bool)
    else:
        sub = grid[:, present]
        fused = linear_grid([minmax(scores[comps[j]]) for j in present], sub)
        dead = np.asarray(~(sub > 0).any(axis=1))
    if dead.any():
        fused[:, dead] = minmax(scores["bm25"])[:, None] if "bm25" in scores else 0.0
    return fused


def fuse(method: str, scores: Mapping[str, np.ndarray], weights: Mapping[str, float]) -> np.ndarray:
    """One fused score per candidate with ``method`` over the weighted components present in ``scores``."""
    if method not in METHODS:
        raise ValueError(f"unknown fusion method {method!r}; valid: {', '.join(METHODS)}")
    lengths = {len(a) for a in scores.values()}
    if len(lengths) > 1:
        raise ValueError(f"score arrays differ in length: {sorted(lengths)}")
    names = list(weights)
    w = np.asarray([[float(weights[c]) for c in names]]) if names else np.zeros((1, 0))
    if method == "linear":
        return fuse_linear(scores, names, w)[:, 0]
    n = lengths.pop() if lengths else 0
    present = [c for c in names if c in scores]
    if not present:
        return np.zeros(n)
    norm = sum_normalise if method == "borda" else minmax
    return linear_grid([norm(scores[c]) for c in present], np.asarray([[float(weights[c]) for c in present]]),
                       divide=False)[:, 0]


# --------------------------------------------------------------------------------------------------
# the weights file
# --------------------------------------------------------------------------------------------------


@dataclass
class ProfileWeights:
    """Linear weights of one query profile: installed per depth, or BM25 alone with the reason."""

    installed: bool
    reason: str
    depths: dict[int, dict[str, float]] = field(default_factory=dict)  # what the service uses
    learned: dict[int, dict[str, float]] = field(default_factory=dict)  # what learning chose (when not installed)

    def nearest_depth(self, depth: int) -> int | None:
        return min(self.depths, key=lambda d: (abs(d - depth), d)) if self.depths else None

    def for_depth(self, depth: int) -> tuple[dict[str, float], int | None]:
        d = self.nearest_depth(depth)
        return (dict(self.depths[d]) if d is not None else dict(BM25_ONLY)), d

    def to_json(self) -> dict[str, Any]:
        return {"installed": self.installed, "reason": self.reason,
                "depths": {str(d): w for d, w in sorted(self.depths.items())},
                "learned": {str(d): w for d, w in sorted(self.learned.items())}}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ProfileWeights:
        def depths(key: str) -> dict[int, dict[str, float]]:
            return {int(d): _weights(w, f"linear depth {d}") for d, w in (data.get(key) or {}).items()}

        return cls(bool(data.get("installed")), str(data.get("reason", "")), depths("depths"), depths("learned"))


def _weights(w: Any, what: str) -> dict[str, float]:
    if not isinstance(w, Mapping):
        raise FusionError(f"{what}: weights must be an object, got {type(w).__name__}")
    bad = [c for c in w if c not in COMPONENTS]
    if bad:
        raise FusionError(f"{what}: unknown component(s) {bad}; valid: {', '.join(COMPONENTS)}")
    return {str(c): float(v) for c, v in w.items()}


@dataclass
class FusionModel:
    """The fusion weights of an index (``fusion.json``), or BM25 alone when there are none."""

    linear: dict[str, ProfileWeights]
    borda: dict[str, float] | None = None
    linlearn: dict[str, float] | None = None
    default_method: str = "linear"
    sources: dict[str, str] = field(default_factory=dict)  # method -> where its weights come from
    learning: dict[str, Any] = field(default_factory=dict)
    created: str = ""
    path: Path | None = None

    def __post_init__(self) -> None:
        if self.default_method not in self.methods:
            raise FusionError(f"default fusion method {self.default_method!r} has no weights "
                              f"(have {', '.join(self.methods)})")

    @classmethod
    def bm25_only(cls, reason: str) -> FusionModel:
        return cls({p: ProfileWeights(False, reason) for p in PROFILES}, sources={"linear": reason})

    @classmethod
    def pretrained_dense(cls) -> FusionModel:
        """The weights a build with the pretrained encoder's dense stage installs: :data:`PRETRAINED_DENSE_WEIGHTS`
        for both profiles (not learned per index, nor tuned: the plain weighted sum issue 59 measured; what it gives
        held out: docs/RESULTS.md, "Dense stage on the default path")."""
        reason = ("BM25 and the pretrained multilingual encoder, min-max normalised and weighed "
                  + ", ".join(f"{c} {w:g}" for c, w in PRETRAINED_DENSE_WEIGHTS.items()))
        return cls({p: ProfileWeights(True, reason, {1000: dict(PRETRAINED_DENSE_WEIGHTS)}) for p in PROFILES},
                   sources={"linear": reason})

    @property
    def methods(self) -> list[str]:
        return [m for m in METHODS if m == "linear" or getattr(self, m) is not None]

    def weights(self, method: str, profile: str, depth: int) -> tuple[dict[str, float], str, int | None]:
        """``(weights, source, depth learned for)`` of ``method`` for a query of ``profile`` at ``depth``."""
        if method not in self.methods:
            raise QueryError(f"fusion method {method!r} is not available for this index; it has "
                             f"{', '.join(self.methods)} (borda and linlearn need `priorart train-ltr --install`)")
        if method != "linear":
            return dict(getattr(self, method)), self.sources.get(method, method), None
        pw = self.linear.get(profile) or ProfileWeights(False, "no weights for this profile")
        w, d = pw.for_depth(depth)
        if not pw.installed:
            return dict(BM25_ONLY), f"BM25 only: {pw.reason}", None
        return w, pw.reason, d

    # ---- file ------------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {
            "created": self.created or datetime.now(UTC).isoformat(timespec="seconds"),
            "default_method": self.default_method,
            "linear": {p: pw.to_json() for p, pw in self.linear.items()},
            "borda": None if self.borda is None else {"weights": self.borda, "source": self.sources.get("borda", "")},
            "linlearn": None if self.linlearn is None else {"weights": self.linlearn,
                                                            "source": self.sources.get("linlearn", "")},
            "sources": self.sources,
            "learning": self.learning,
        }

    def save(self, path: str | Path) -> Path:
        return write_versioned(path, FUSION_FORMAT, FUSION_VERSION, self.to_json())

    @classmethod
    def load(cls, path: str | Path) -> FusionModel:
        p = Path(path)
        return cls.from_json(read_versioned(p, FUSION_FORMAT, FUSION_VERSION, error=FusionError,
                                            fix="relearn it with `priorart fuse INDEX`"), p)

    @classmethod
    def from_json(cls, data: Mapping[str, Any], p: Path | None = None) -> FusionModel:
        """The model of a ``fusion.json`` body (``p``: the file, named in errors)."""
        try:
            linear = {str(prof): ProfileWeights.from_json(v) for prof, v in (data.get("linear") or {}).items()}
            bad = [prof for prof in linear if prof not in PROFILES]
            if bad:
                raise FusionError(f"unknown profile(s) {bad}; valid: {', '.join(PROFILES)}")
            borda = _weights(data["borda"]["weights"], "borda") if data.get("borda") else None
            linlearn = _weights(data["linlearn"]["weights"], "linlearn") if data.get("linlearn") else None
            return cls(linear, borda, linlearn, str(data.get("default_method", "linear")),
                       {str(k): str(v) for k, v in (data.get("sources") or {}).items()},
                       dict(data.get("learning") or {}), str(data.get("created", "")), p)
        except (KeyError, TypeError, ValueError) as exc:
            raise FusionError(f"{p or 'fusion weights'}: {exc}; relearn it with `priorart fuse INDEX`") from exc

    @classmethod
    def of_folder(cls, folder: IndexFolder) -> FusionModel:
        """The index's fusion weights (the registry's index-level part ``fusion``); BM25 alone (with the reason) when
        it has none."""
        body = open_part("fusion", folder)
        if body is None:
            reason = ("no learned fusion weights in this index" if folder.has("models") or folder.has("dense")
                      else "no dense stage in this index")
            return cls.bm25_only(reason)
        try:
            return cls.from_json(body, folder.path(Layout.FUSION))
        except FusionError as exc:
            raise IndexFormatError(str(exc)) from exc


# --------------------------------------------------------------------------------------------------
# the stage
# --------------------------------------------------------------------------------------------------


class FusionStep:
    """Final stage: fuse the component scores with the request's method and the index's (or its own) weights."""

    name = "fusion"
    requires = frozenset({CANDIDATES})
    provides = frozenset({"fused"})

    def __init__(self, model: FusionModel) -> None:
        self.model = model

    def weights_for(self, query: Query) -> tuple[str, str, dict[str, float], str, int | None]:
        """``(method, profile, weights, source, depth)`` a query is fused with, before applicability."""
        method = query.fusion or self.model.default_method
        profile = "codes" if query.r.has_codes else "nocodes"
        if query.weights is not None:
            if method not in self.model.methods:
                self.model.weights(method, profile, query.depth)  # raises the QueryError
            return method, profile, _weights(query.weights, "request weights"), REQUEST_WEIGHTS, None
        weights, source, depth = self.model.weights(method, profile, query.depth)
        return method, profile, weights, source, depth

    def run(self, query: Query, cands: Candidates) -> Candidates:
        method, profile, weights, source, depth = self.weights_for(query)
        fate: dict[str, str] = {}
        use: dict[str, float] = {}
        for c, w in weights.items():
            if not w:
                continue
            if c in cands.skipped:
                fate[c] = f"not applied: {cands.skipped[c]}"
            elif c not in cands.scores:
                fate[c] = "not applied: no such stage in this index"
            else:
                use[c] = float(w)
                fate[c] = "applied"
        for c, why in cands.skipped.items():
            fate.setdefault(c, f"not applied: {why}")
        for c in cands.scores:
            fate.setdefault(c, "computed, weight 0")
        fallback = None
        if not any(w > 0 for w in use.values()):  # the linear rule of fuse_linear, said in the response
            fallback = "none of the weighted components applies to this query: ranked by BM25 alone"
            query.note(fallback)
            use = dict(BM25_ONLY)
            fate["bm25"] = "applied (fallback)"
        cands.fused = fuse(method, cands.scores, use)
        cands.normalised = {name: minmax(arr) for name, arr in cands.scores.items()}
        total = sum(use.values()) if method == "linear" else 1.0
        cands.fusion = FusionInfo(method=method, profile=profile, depth=depth,
                                  weights={c: w / total for c, w in use.items()}, source=source, components=fate,
                                  fallback=fallback)
        return cands

    def describe(self) -> dict[str, Any]:
        m = self.model
        return {"default_method": m.default_method, "methods": m.methods, "file": str(m.path) if m.path else None,
                "linear": {p: {"installed": pw.installed, "reason": pw.reason,
                               "depths": {str(d): w for d, w in sorted(pw.depths.items())}}
                           for p, pw in m.linear.items()},
                "borda": m.borda, "linlearn": m.linlearn}


__all__ = ["BM25_ONLY", "COMPONENTS", "METHODS", "PROFILES", "REQUEST_WEIGHTS",
           "REQUIRES", "FusionError", "FusionModel", "FusionStep", "ProfileWeights", "fuse", "linear_grid",
           "minmax", "sum_normalise"]
