"""The learned ranker over evidence (issue 33 item 1): the features of ``/search``'s first documents, and the model
that orders them by those features.

After the fusion the evidence stage orders the first ``N`` documents (:class:`service.stages.evidence.EvidenceStep`).
Without a ranker in the index they are ordered by their best passage, the fixed rule chosen held out (docs/RESULTS.md,
"Passage evidence in /search"). With one (the index part ``ranker``, service/index/parts.py, installed by ``priorart
build --ranker``: by default the project's, written by ``priorart-lab experiment ranking --ranker-out`` where it won
held out) and unless ``evidence_by`` asks for the passage rule they are ordered by the model's score of each document's
:data:`FEATURES`, best first; below ``N`` the fused order stands.

The features of a document are the evidence a search has of it, each on a scale that does not depend on the
collection (so that a model learned on some indexes applies to another):

- the fused score (min-max over the ``N``), its rank, and the first stage's score (over the ``N``'s best);
- whether its best route is the query's own language (matched without translation), and whether it has text in it;
- its best passage's score (ranked in context among the ``N``'s, as ``/passages`` ranks them) and its rank by it,
  its second-best passage's score, and the share of its passages that hold a query term (how much of it matches);
- its best passage's score in each field, abstract, description and claims (``passage_<field>``: the per-field
  evidence of item 1, from the passage index, which holds the fields apart; 0 where none of the field matches);
- the query's codes predicted from the first documents (issue 33 item 2: each of the first ten votes ``1 / rank``
  for its codes, :func:`service.retrieval.code_prediction.predict_codes`): the share of the *other* documents' votes
  that go to the subclasses, and to the main groups, it holds;
- the query's codes predicted from the CPC titles (issue 33 item 2, :mod:`service.code_classifier`, where the index
  has the classifier and the query reaches English): the predicted share of the subclasses, and of the main groups,
  it holds (``class_subclass``, ``class_group``; 0 without a classifier);
- its score in the search expanded by pseudo-relevance feedback (issue 33 item 3: Rocchio from the first
  ``FEEDBACK_DOCS`` documents on every route, service/retrieval/feedback.py), over the ``N``'s best there;
- of the query: its index terms (log) and whether it was searched through translation;
- kernel pooling of the query's and the document's word vectors (issue 33 item 4, :mod:`service.kernel_pooling`:
  exact and soft matches, through the translation tables), where the index has word vectors;
- the cosine of the query's predicted codes' vectors and the document's codes' (``code_embedding``: seed 000's
  classification-code embeddings, :mod:`service.code_vectors`; 0 where the index has no code vectors);
- the neural components' scores (:data:`MODEL_FEATURES`: the dense cosine and the text, meta and joint rankers',
  min-max over the ``N`` that they scored, 0 where one did not apply), where the index has models: the rerank stage
  then scores every ranker for a query, whatever the fusion weighs (:func:`reads_models`).

Models (``kind``): ``gbm``, LambdaMART trees (LightGBM, trained by the training package; evaluated here from their
dump: no LightGBM in the service), or ``mlp``, a network trained on pairs with the hinge loss and exported to ONNX
(onnxruntime, :class:`service.retrieval.neural.OnnxGraph`).
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numba import njit

from service.code_classifier import code_agreement
from service.codes import codes_at, record_codes
from service.kernel_pooling import KERNEL_FEATURES
from service.passages.ranker import FIELDS
from service.retrieval.code_prediction import DEFAULT_DEPTH as VOTERS
from service.retrieval.code_prediction import predict_codes
from service.retrieval.feedback import Feedback

if TYPE_CHECKING:
    from service.candidates import Candidates
    from service.code_vectors import CodeVectors
    from service.index.store import DocStore
    from service.query import Query
    from service.retrieval.first_stage import FirstStage

FIELD_FEATURES: tuple[str, ...] = tuple(f"passage_{name}" for name in FIELDS)
"""The best passage's score in each field of the document (:data:`service.passages.ranker.FIELDS`)."""

MODEL_FEATURES: tuple[str, ...] = ("dense", "text", "meta", "joint")
"""The neural components' scores (service/stages: the dense stage and the rerank stage's rankers), named as the
components are."""

CLASSIFIER_FEATURES: tuple[str, ...] = ("class_subclass", "class_group")
"""The code classifier's share of the document's subclasses and main groups (:mod:`service.code_classifier`)."""

CODE_EMBEDDING = "code_embedding"
"""The cosine of the query's predicted codes' vectors and the document's (:mod:`service.code_vectors`)."""

FEATURES: tuple[str, ...] = (
    "fused", "rank", "bm25", "own_route", "doc_query_lang", "passage", "passage_rank", "passage_second",
    "passage_matched", "code_subclass", "code_group", "feedback", "query_terms", "translated", *KERNEL_FEATURES,
    *FIELD_FEATURES, *MODEL_FEATURES, *CLASSIFIER_FEATURES, CODE_EMBEDDING,
)
"""The features of a document, in the model's column order (see the module docstring)."""

FEEDBACK_DOCS = 3
"""The first documents taken as relevant for the pseudo-relevance feedback feature."""

RANKER_KINDS = ("gbm", "mlp")


@dataclass
class Evidence:
    """The features of a search's first documents (``X``: one row each, :data:`FEATURES` columns, those not
    ``computed`` 0) and the query's predicted subclasses with their shares, for the response (the code classifier's
    where it predicted them, else the first documents' vote)."""

    X: np.ndarray
    predicted_codes: list[tuple[str, float]]
    feedback_ms: float = 0.0  # the time of the feedback search (the costliest feature)
    kernels_ms: float = 0.0  # the time of the kernel features (EvidenceStep.features sets it)
    computed: tuple[str, ...] = FEATURES  # the columns of X computed (the others are 0), in FEATURES' order


def _scaled(x: np.ndarray) -> np.ndarray:
    """``x`` over its largest value (0 where it is not finite; all 0 when none is positive)."""
    x = np.where(np.isfinite(x), x, 0.0)
    top = float(x.max()) if x.size else 0.0
    return x / top if top > 0 else np.zeros_like(x)


def _minmax(x: np.ndarray) -> np.ndarray:
    lo, hi = float(x.min()), float(x.max())
    return (x - lo) / (hi - lo) if hi > lo else np.ones_like(x)


def reads_models(features: Collection[str]) -> bool:
    """Does a ranker of these features read the rerank stage's scores (text, meta, joint: scored only where the fusion
    weighs them unless every component is asked for)? The dense cosine is scored for every candidate anyway."""
    return bool(set(features) & (set(MODEL_FEATURES) - {"dense"}))


def _component(scores: np.ndarray) -> np.ndarray:
    """A component's scores of the first documents, min-max over those it scored (1 when they are equal), 0 where it
    scored none (NaN)."""
    x = np.asarray(scores, dtype=np.float64)
    out = np.zeros(len(x))
    ok = np.isfinite(x)
    if ok.any():
        out[ok] = _minmax(x[ok])
    return out


def _code_shares(at_level: Sequence[Sequence[str]]) -> np.ndarray:
    """Per document, the share of the other voters' votes (the first :data:`VOTERS`, ``1 / rank`` each, once per code
    at a level) that go to codes it holds: how well it agrees with the codes the query is predicted to have.
    ``at_level``: each document's codes at the level (:func:`service.codes.codes_at`: distinct, in order: a set's
    order, and so the sums' last bit, would change with the process's string hashing, and a learned model with it)."""
    votes: dict[str, float] = {}
    for rank, held in enumerate(at_level[:VOTERS], 1):
        for c in held:
            votes[c] = votes.get(c, 0.0) + 1.0 / rank
    total = sum(votes.values())
    out = np.zeros(len(at_level))
    for i, held in enumerate(at_level):
        own = 1.0 / (i + 1) if i < VOTERS else 0.0  # its own vote is left out
        rest = total - own * len(held)
        if rest > 0:
            out[i] = sum(votes.get(c, 0.0) - own for c in held) / rest
    return np.clip(out, 0.0, 1.0)


def evidence_features(fs: FirstStage | None, docs: DocStore, query: Query, cands: Candidates, n: int,
                      passage: np.ndarray, features: Collection[str] = FEATURES, second: np.ndarray | None = None,
                      matched: np.ndarray | None = None, kernels: np.ndarray | None = None,
                      fields: np.ndarray | None = None,
                      classified: Mapping[str, Sequence[tuple[str, float]]] | None = None,
                      code_vectors: CodeVectors | None = None) -> Evidence:
    """The :data:`FEATURES` of the first ``n`` candidates (the fused order) that ``features`` names (those a model
    reads; default all, as learning reads them): ``X`` has every :data:`FEATURES` column, those not named 0, and
    ``computed`` says which were. ``passage``: their best passage's scores in [0, 1], ``second`` their second-best's
    (0 where none), ``matched`` the share of their passages that hold a query term
    (:class:`service.passages.PassageRanking`; None: 0), ``kernels`` their
    :data:`~service.kernel_pooling.KERNEL_FEATURES` (None: 0), ``fields`` their best passage's score in each field
    (:meth:`service.passages.PassageRanking.field_evidence`, :data:`FIELD_FEATURES`; None: 0), ``classified`` the
    code classifier's prediction per level (:meth:`service.stages.evidence.EvidenceStep.classify`; None: 0),
    ``code_vectors`` the
    index's code vectors (:mod:`service.code_vectors`; None: the code-embedding feature is 0). ``fs``: the first
    stage, for the features that read the index (None: a sharded pipeline, those are 0). The feedback search, the
    costly feature, runs only when ``feedback`` is named. The predicted codes are the response's whatever is named."""
    assert cands.fused is not None
    rows = cands.rows[:n].astype(np.int64)
    X = np.zeros((len(rows), len(FEATURES)))
    col = {name: j for j, name in enumerate(FEATURES)}
    want = set(features)
    unknown = want - set(col)
    if unknown:
        raise ValueError(f"features unknown to this code: {sorted(unknown)}")
    computed = [name for name in FEATURES if name in want]
    lang = query.r.lang
    if "fused" in want:
        X[:, col["fused"]] = _minmax(cands.fused[:n])
    if "rank" in want:
        X[:, col["rank"]] = 1.0 / np.log2(np.arange(len(rows)) + 2.0)
    if "bm25" in want:
        X[:, col["bm25"]] = _scaled(np.asarray(cands.scores.get("bm25", np.zeros(len(cands))),
                                               dtype=np.float64)[:n])
    if "own_route" in want:
        X[:, col["own_route"]] = [1.0 if cands.routes.get(int(r)) == lang else 0.0 for r in rows]
    if "doc_query_lang" in want and fs is not None and lang in fs.indexes:
        X[:, col["doc_query_lang"]] = np.asarray(fs.indexes[lang].doc_len)[rows] > 0
    if "passage" in want:
        X[:, col["passage"]] = passage
    if "passage_rank" in want:
        order = np.lexsort((np.arange(len(rows)), -passage))
        place = np.empty(len(rows), dtype=np.int64)
        place[order] = np.arange(len(rows))
        X[:, col["passage_rank"]] = 1.0 / np.log2(place + 2.0)
    if second is not None and "passage_second" in want:
        X[:, col["passage_second"]] = second
    if matched is not None and "passage_matched" in want:
        X[:, col["passage_matched"]] = matched
    codes = [record_codes(docs.header_row(int(r))) for r in rows]  # (the predicted codes are the response's too)
    at = {level: [codes_at(c, level) for c in codes] for level in ("subclass", "main_group")}
    for name, level in (("code_subclass", "subclass"), ("code_group", "main_group")):
        if name in want:
            X[:, col[name]] = _code_shares(at[level])
    feedback_ms = 0.0
    if fs is not None and len(rows) and "feedback" in want:
        started = time.perf_counter()
        X[:, col["feedback"]] = _feedback_scores(fs, query, rows)
        feedback_ms = (time.perf_counter() - started) * 1000.0
    info = cands.first_info
    if "query_terms" in want:
        X[:, col["query_terms"]] = math.log1p(len(info.query_terms) if info is not None else 0)
    if "translated" in want:
        X[:, col["translated"]] = float(info is not None and any(r.kind != "mono" for r in info.routes))
    if kernels is not None:
        for j, name in enumerate(KERNEL_FEATURES):
            if name in want:
                X[:, col[name]] = kernels[:, j]
    if fields is not None:
        for j, name in enumerate(FIELD_FEATURES):
            if name in want:
                X[:, col[name]] = fields[:, j]
    for name in MODEL_FEATURES:
        if name in want and name in cands.scores:
            X[:, col[name]] = _component(cands.scores[name][:n])
    voted = predict_codes(codes, "subclass")
    if classified:
        for name, level in (("class_subclass", "subclass"), ("class_group", "main_group")):
            if name in want and classified.get(level):
                X[:, col[name]] = code_agreement(classified[level], at[level])
    if code_vectors is not None and CODE_EMBEDDING in want:  # the classifier's main groups, else the vote
        query_codes = (classified.get("main_group") or classified.get("subclass") if classified else None) or voted
        X[:, col[CODE_EMBEDDING]] = code_vectors.similarity(query_codes, codes)
    return Evidence(X, list(classified["subclass"]) if classified and classified.get("subclass") else voted,
                    feedback_ms, computed=tuple(computed))


def _feedback_scores(fs: FirstStage, query: Query, rows: np.ndarray) -> np.ndarray:
    """Each row's score in the query's search expanded from its first :data:`FEEDBACK_DOCS` rows (0 where it is not
    among the expanded search's top ``depth``), over the best of ``rows``."""
    q = copy.copy(query)
    q.notes = []
    q.explain = False
    q.feedback = Feedback(relevant=[int(r) for r in rows[:FEEDBACK_DOCS]])
    res = fs.run(q)
    got = dict(zip(res.rows.tolist(), res.scores.tolist(), strict=True))
    return _scaled(np.array([got.get(int(r), 0.0) for r in rows], dtype=np.float64))


# ---------------------------------------------------------------------------- the models


class TreeEnsemble:
    """LambdaMART trees as arrays (one row per tree, padded): a node's split feature, threshold and children; a leaf is
    its own child both ways (so every tree is walked ``depth`` steps at once, vectorised over documents and trees),
    its value in ``value``. ``missing``: LightGBM's missing-value handling per node (0 none, 1 zero, 2 NaN) and
    ``default_left`` where such a value goes. The score of a document is the sum of its leaves' values."""

    def __init__(self, feature: np.ndarray, threshold: np.ndarray, left: np.ndarray, right: np.ndarray,
                 value: np.ndarray, missing: np.ndarray, default_left: np.ndarray, depth: int) -> None:
        self.feature, self.threshold, self.left, self.right = feature, threshold, left, right
        self.value, self.missing, self.default_left, self.depth = value, missing, default_left, depth

    @classmethod
    def from_lightgbm(cls, dump: Mapping[str, Any]) -> TreeEnsemble:
        """From LightGBM's ``Booster.dump_model()``: numerical splits (``<=``) only."""
        flat = [_flatten(t["tree_structure"]) for t in dump["tree_info"]]
        depth = max((d for _, d in flat), default=1)
        flat_nodes = [nodes for nodes, _ in flat]
        width = max((len(n) for n in flat_nodes), default=1)
        shape = (len(flat_nodes), width)
        arrays = {"feature": np.zeros(shape, np.int64), "threshold": np.full(shape, np.inf),
                  "left": np.zeros(shape, np.int64), "right": np.zeros(shape, np.int64), "value": np.zeros(shape),
                  "missing": np.zeros(shape, np.int64), "default_left": np.ones(shape, bool)}
        for t, nodes in enumerate(flat_nodes):
            for i, (f, thr, lft, rgt, val, miss, dflt) in enumerate(nodes):
                arrays["feature"][t, i], arrays["threshold"][t, i] = f, thr
                arrays["left"][t, i], arrays["right"][t, i], arrays["value"][t, i] = lft, rgt, val
                arrays["missing"][t, i], arrays["default_left"][t, i] = miss, dflt
        return cls(**arrays, depth=depth)

    def to_json(self) -> dict[str, Any]:
        return {"feature": self.feature.tolist(), "threshold": [[float(x) if np.isfinite(x) else None for x in row]
                                                                for row in self.threshold],
                "left": self.left.tolist(), "right": self.right.tolist(), "value": self.value.tolist(),
                "missing": self.missing.tolist(), "default_left": self.default_left.tolist(), "depth": self.depth}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TreeEnsemble:
        thr = np.array([[np.inf if x is None else float(x) for x in row] for row in data["threshold"]])
        return cls(np.asarray(data["feature"], np.int64), thr, np.asarray(data["left"], np.int64),
                   np.asarray(data["right"], np.int64), np.asarray(data["value"], np.float64),
                   np.asarray(data["missing"], np.int64), np.asarray(data["default_left"], bool), int(data["depth"]))

    def score(self, X: np.ndarray) -> np.ndarray:
        """The sum of each row's leaves (a compiled walk: 200 trees over 20 documents take ~0.05 ms, the vectorised
        numpy walk before it 1.7 ms)."""
        if X.shape[0] == 0 or self.feature.shape[0] == 0:
            return np.zeros(X.shape[0])
        return np.asarray(_walk_trees(np.ascontiguousarray(X, dtype=np.float64), self.feature, self.threshold,
                                      self.left, self.right, self.value, self.missing, self.default_left,
                                      self.depth))


@njit(cache=True, nogil=True)
def _walk_trees(X: np.ndarray, feature: np.ndarray, threshold: np.ndarray, left: np.ndarray, right: np.ndarray,
                value: np.ndarray, missing: np.ndarray, default_left: np.ndarray, depth: int) -> np.ndarray:
    """Each row's sum over the trees of its leaf's value: from the root, ``depth`` steps at most, left where the
    feature is ``<=`` the threshold (or, for a value LightGBM counts as missing, where ``default_left`` says), a
    leaf its own child both ways. The trees are summed in their order, as LightGBM does."""
    n, n_trees = X.shape[0], feature.shape[0]
    out = np.zeros(n)
    for i in range(n):
        total = 0.0
        for t in range(n_trees):
            node = 0
            for _ in range(depth):
                lo, hi = left[t, node], right[t, node]
                if lo == node and hi == node:
                    break
                x = X[i, feature[t, node]]
                m = missing[t, node]
                if (m == 2 and np.isnan(x)) or (m == 1 and (x == 0.0 or np.isnan(x))):
                    node = lo if default_left[t, node] else hi
                else:
                    node = lo if x <= threshold[t, node] else hi
            total += value[t, node]
        out[i] = total
    return out


_warm = False


def warm() -> None:
    """Compile (or load from numba's cache) the tree walk for the arrays an installed ranker gives it, so that a
    process's first search does not wait for the compiler (service/startup.py ``KERNEL_MODULES``). Once per process."""
    global _warm
    if _warm:
        return
    one = np.zeros((1, 1), dtype=np.int64)
    TreeEnsemble(one, np.full((1, 1), np.inf), one, one.copy(), np.ones((1, 1)), one.copy(),
                 np.ones((1, 1), dtype=bool), 1).score(np.zeros((1, 1)))
    _warm = True


_Node = tuple[int, float, int, int, float, int, bool]  # feature, threshold, left, right, value, missing, default left


def _flatten(root: Mapping[str, Any]) -> tuple[list[_Node], int]:
    """One LightGBM tree's nodes in preorder (a leaf its own child both ways) and its depth."""
    nodes: list[_Node] = []
    depth = 1
    stack: list[tuple[Mapping[str, Any], int, int | None, bool]] = [(root, 1, None, False)]
    while stack:
        node, d, parent, is_right = stack.pop()
        depth = max(depth, d)
        at = len(nodes)
        if parent is not None:
            f, thr, left, right, val, miss, dflt = nodes[parent]
            nodes[parent] = (f, thr, left, at, val, miss, dflt) if is_right else (f, thr, at, right, val, miss, dflt)
        if "leaf_value" in node:
            nodes.append((0, math.inf, at, at, float(node["leaf_value"]), 0, True))
            continue
        if node.get("decision_type", "<=") != "<=":
            raise ValueError(f"unsupported split {node.get('decision_type')!r} (numerical <= only)")
        miss = {"None": 0, "Zero": 1, "NaN": 2}[str(node.get("missing_type", "None"))]
        nodes.append((int(node["split_feature"]), float(node["threshold"]), at, at, 0.0, miss,
                      bool(node.get("default_left", True))))
        stack.append((node["right_child"], d + 1, at, True))
        stack.append((node["left_child"], d + 1, at, False))
    return nodes, depth


class RankerModel:
    """An installed ranker: its kind, the features it reads (by name: an index whose ranker reads a feature this code
    does not compute is refused), how many first documents it orders, and its scorer."""

    def __init__(self, kind: str, features: Sequence[str], docs: int, scorer: Any, info: Mapping[str, Any]) -> None:
        unknown = [f for f in features if f not in FEATURES]
        if kind not in RANKER_KINDS or unknown or docs < 1:
            raise ValueError(f"ranker of kind {kind!r} (valid: {', '.join(RANKER_KINDS)}), docs {docs}, features "
                             f"unknown to this code: {unknown}")
        self.kind, self.features, self.docs, self.info = kind, list(features), int(docs), dict(info)
        self._cols = [FEATURES.index(f) for f in self.features]
        self._scorer = scorer

    def score(self, X: np.ndarray) -> np.ndarray:
        """The model's score of each row of ``X`` (:data:`FEATURES` columns)."""
        x = np.ascontiguousarray(X[:, self._cols])
        if self.kind == "gbm":
            return np.asarray(self._scorer.score(x))
        out = self._scorer(features=x.astype(np.float32))
        return np.asarray(out, dtype=np.float64).reshape(-1)

    @classmethod
    def of_part(cls, meta: Mapping[str, Any], folder: Path, device: str = "cpu") -> RankerModel:
        """From the index part ``ranker`` (its ``ranker.json`` body and folder)."""
        kind = str(meta.get("kind"))
        if kind == "gbm":
            scorer: Any = TreeEnsemble.from_json(meta["trees"])
        elif kind == "mlp":
            from service.retrieval.neural import OnnxGraph, providers_for

            scorer = OnnxGraph(folder / str(meta["onnx"]), providers_for(device)[0])
        else:
            raise ValueError(f"unknown ranker kind {kind!r}; valid: {', '.join(RANKER_KINDS)}")
        return cls(kind, meta["features"], int(meta["docs"]), scorer,
                   {k: v for k, v in meta.items() if k not in ("trees",)})


__all__ = ["CLASSIFIER_FEATURES", "CODE_EMBEDDING", "FEATURES", "FIELD_FEATURES", "FEEDBACK_DOCS", "MODEL_FEATURES",
           "RANKER_KINDS", "Evidence", "RankerModel", "TreeEnsemble", "evidence_features", "reads_models"]
