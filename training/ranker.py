"""Learning the ranker over evidence (issue 33 item 1): LambdaMART (LightGBM) and a network trained on pairs with the
hinge loss (torch, exported to ONNX), on the features of :mod:`service.ranker`.

A training set is the first ``N`` documents of many topics: their features (:func:`first_evidence`),
each document's grade (the topic's qrels) and the topic's weight. ``priorart-lab experiment ranking`` learns both models
cross-fitted (each fold's topics ranked by the models learned on the other folds) and compares them with the fused
order and the passage-evidence rule; :func:`write_ranker` writes the one that won to a ranker folder, which
``priorart build`` (or :func:`install_into`, ``priorart install-ranker``, for an index already built) writes into an
index as its part ``ranker``, where the engine orders its first documents with it.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from service.kernel_pooling import KERNEL_FEATURES
from service.ranker import (
    CLASSIFIER_FEATURES,
    CODE_EMBEDDING,
    FEATURES,
    FIELD_FEATURES,
    MODEL_FEATURES,
    RANKER_KINDS,
    RankerModel,
    TreeEnsemble,
)

if TYPE_CHECKING:
    from service.candidates import Candidates
    from service.engine import Engine
    from service.query import Query
    from service.ranker import Evidence

log = logging.getLogger(__name__)

RANKER_DOCS = 20
"""The first documents of the fused order a ranker orders (and learns from)."""

EXTRA_FEATURES: dict[str, tuple[str, ...]] = {
    "feedback": ("feedback",),
    "language": ("own_route", "doc_query_lang"),
    "models": tuple(f for f in MODEL_FEATURES if f != "dense"),
    "codes": (CODE_EMBEDDING,),
}
"""Features measured but left out of the rankers that are installed (docs/RESULTS.md, "Passage evidence in
/search"): the feedback search costs ~30 ms a query and adds nothing held out; whether a document matched in the
query's own language lets a model learn how two of the tasks are built (their relevant grant holds only the other
language) rather than what makes a document relevant; the neural components' scores exist only in an index built
with models (``priorart-lab experiment ranking --models`` measures them on indexes with models trained per fold); the
code-embedding similarity (seed 000's code vectors, issue 59 item 4) until it wins held out."""

RANKER_FEATURES: tuple[str, ...] = tuple(f for f in FEATURES if not any(f in g for g in EXTRA_FEATURES.values()))
"""The features of an installed ranker."""

ABLATED_FEATURES: dict[str, tuple[str, ...]] = {"kernels": KERNEL_FEATURES, "fields": FIELD_FEATURES,
                                                 "classifier": CLASSIFIER_FEATURES, "dense": ("dense",)}
"""Groups of :data:`RANKER_FEATURES` that the ranking experiment also leaves out (``learned <kind> without
<group>``): what each adds, measured held out (docs/RESULTS.md, "Passage evidence in /search")."""


def first_evidence(engine: Engine, query: Query, n: int) -> tuple[Candidates, Evidence | None]:
    """The fused order of ``query`` (the pipeline with ``evidence_docs`` 0) and the evidence features of its first
    ``n`` (:meth:`service.stages.evidence.EvidenceStep.features`): what a ranker learns from and orders by."""
    query.evidence_docs = 0
    query.k = max(query.k, min(n, query.depth))
    cands, _ = engine.pipeline.run(query)
    return cands, engine.evidence.features(query, cands, n)


@dataclass
class TopicEvidence:
    """One topic's first documents: their ids (the fused order), features (one row each) and grades; the rest of the
    fused order after them (kept, so a ranking of the topic is whole); the topic's weight in learning."""

    qid: str
    ids: list[str]
    X: np.ndarray
    grades: np.ndarray
    rest: list[str] = field(default_factory=list)
    weight: float = 1.0

    def only(self, features: Sequence[str]) -> TopicEvidence:
        """The topic with the columns of ``features`` only (a ranker learned without the others)."""
        cols = [FEATURES.index(f) for f in features]
        return TopicEvidence(self.qid, self.ids, self.X[:, cols] if len(self.ids) else self.X, self.grades, self.rest,
                             self.weight)


def grades_of(ids: Sequence[str], qrels: Mapping[str, int]) -> np.ndarray:
    return np.array([float(qrels.get(i, 0)) for i in ids])


def ranking(topic: TopicEvidence, scores: np.ndarray) -> list[str]:
    """The topic's documents with its first ones ordered by ``scores`` (ties: the fused order), the rest after."""
    order = np.lexsort((np.arange(len(topic.ids)), -np.asarray(scores)))
    return [topic.ids[i] for i in order.tolist()] + topic.rest


# ---------------------------------------------------------------------------- LambdaMART


@dataclass
class GbmSettings:
    trees: int = 200
    leaves: int = 15
    learning_rate: float = 0.05
    min_leaf: int = 20
    feature_fraction: float = 0.9
    seed: int = 0


def train_gbm(topics: Sequence[TopicEvidence], s: GbmSettings | None = None) -> TreeEnsemble:
    """LambdaMART over the topics' first documents (LightGBM's ``lambdarank``, NDCG gains of the grades); the trees as
    the service evaluates them."""
    import lightgbm as lgb

    s = s or GbmSettings()
    used = [t for t in topics if len(t.ids)]
    if not used:
        raise ValueError("no topic with documents to learn from")
    X = np.concatenate([t.X for t in used])
    y = np.concatenate([t.grades for t in used]).astype(int)
    w = np.concatenate([np.full(len(t.ids), t.weight) for t in used])
    params = {"objective": "lambdarank", "num_leaves": s.leaves, "learning_rate": s.learning_rate,
              "min_data_in_leaf": s.min_leaf, "feature_fraction": s.feature_fraction, "seed": s.seed,
              "deterministic": True, "force_row_wise": True,  # (else LightGBM picks row/column-wise by timing)
              "num_threads": 1, "verbose": -1, "label_gain": [0, 1, 3]}
    data = lgb.Dataset(X, y, weight=w, group=[len(t.ids) for t in used], params={"verbose": -1})
    booster = lgb.train(params, data, num_boost_round=s.trees)
    return TreeEnsemble.from_lightgbm(booster.dump_model())


# ---------------------------------------------------------------------------- the network on pairs


@dataclass
class MlpSettings:
    hidden: int = 32
    epochs: int = 40
    batch: int = 512
    learning_rate: float = 3e-3
    margin: float = 1.0
    weight_decay: float = 1e-4
    seed: int = 0


class _Mlp:
    """Standardised features -> a hidden layer -> one score (torch, built lazily: training only)."""

    def __init__(self, n_in: int, s: MlpSettings, mean: np.ndarray, std: np.ndarray) -> None:
        import torch

        torch.manual_seed(s.seed)
        self.mean = torch.tensor(mean, dtype=torch.float32)
        self.std = torch.tensor(std, dtype=torch.float32)
        self.net = torch.nn.Sequential(torch.nn.Linear(n_in, s.hidden), torch.nn.ReLU(),
                                       torch.nn.Linear(s.hidden, 1))

    def module(self) -> Any:
        import torch

        mean, std, net = self.mean, self.std, self.net

        class Scorer(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.register_buffer("mean", mean)
                self.register_buffer("std", std)
                self.net = net

            def forward(self, features: Any) -> Any:
                return self.net((features - self.mean) / self.std).squeeze(-1)

        return Scorer()


def _pairs(topics: Sequence[TopicEvidence]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every (better, worse) pair of documents of one topic (grades differ): their rows in the stacked features, and
    each pair's weight (the topic's, shared by its pairs)."""
    hi, lo, w = [], [], []
    start = 0
    for t in topics:
        g = t.grades
        a, b = np.nonzero(g[:, None] > g[None, :])
        if len(a):
            hi.append(a + start)
            lo.append(b + start)
            w.append(np.full(len(a), t.weight / len(a)))
        start += len(t.ids)
    if not hi:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
    return np.concatenate(hi), np.concatenate(lo), np.concatenate(w)


def train_mlp(topics: Sequence[TopicEvidence], s: MlpSettings | None = None) -> _Mlp:
    """The network trained with the pairwise hinge loss ``max(0, margin - (s(better) - s(worse)))`` (the seeds'
    ranking loss), Adam, pairs weighted by their topic's weight."""
    import torch

    s = s or MlpSettings()
    used = [t for t in topics if len(t.ids)]
    if not used:
        raise ValueError("no topic with documents to learn from")
    X = np.concatenate([t.X for t in used])
    mean, std = X.mean(axis=0), X.std(axis=0)
    std = np.where(std > 1e-9, std, 1.0)
    model = _Mlp(X.shape[1], s, mean, std)
    scorer = model.module()
    hi, lo, w = _pairs(used)
    if not len(hi):
        return model
    xt = torch.tensor(X, dtype=torch.float32)
    hit, lot, wt = torch.tensor(hi), torch.tensor(lo), torch.tensor(w / w.mean(), dtype=torch.float32)
    opt = torch.optim.Adam(scorer.parameters(), lr=s.learning_rate, weight_decay=s.weight_decay)
    gen = torch.Generator().manual_seed(s.seed)
    for _ in range(s.epochs):
        perm = torch.randperm(len(hi), generator=gen)
        for at in range(0, len(hi), s.batch):
            idx = perm[at: at + s.batch]
            margin = scorer(xt[hit[idx]]) - scorer(xt[lot[idx]])  # (only the batch's documents are scored)
            loss = (torch.clamp(s.margin - margin, min=0.0) * wt[idx]).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    return model


def mlp_scores(model: _Mlp, X: np.ndarray) -> np.ndarray:
    import torch

    with torch.no_grad():
        return model.module()(torch.tensor(X, dtype=torch.float32)).numpy().astype(np.float64)


def export_onnx(model: _Mlp, path: Path) -> Path:
    """The network as an ONNX graph: input ``features`` (documents x its features, float32), output the scores."""
    import torch

    from training.models.export import _export  # the one ONNX export (opset, checks)

    _export(model.module(), (torch.zeros((2, len(model.mean)), dtype=torch.float32),), ["features"], "scores", path,
            {"features": {0: "docs"}, "scores": {0: "docs"}})
    return path


# ---------------------------------------------------------------------------- learning and installing


def learn(kind: str, topics: Sequence[TopicEvidence]) -> Any:
    """The model of ``kind`` learned on ``topics``."""
    if kind == "gbm":
        return train_gbm(topics)
    if kind == "mlp":
        return train_mlp(topics)
    raise ValueError(f"unknown ranker kind {kind!r}; valid: {', '.join(RANKER_KINDS)}")


def scores(kind: str, model: Any, X: np.ndarray) -> np.ndarray:
    return model.score(X) if kind == "gbm" else mlp_scores(model, X)


DEFAULT_RANKER = Path(__file__).resolve().parent / "rankers" / "default"
"""The ranker ``priorart build`` installs into every index with the dense stage (``--ranker``): the one ``priorart
experiment ranking --ranker-out`` learned on all its topics where it won held out (its report says so); absent when
none won."""
BM25_RANKER = Path(__file__).resolve().parent / "rankers" / "bm25"
"""The default ranker of an index built without the dense stage (``--no-dense``): learned the same way on indexes
without it (its features do not read the dense cosine)."""


def ranker_part(kind: str, model: Any, *, docs: int, report: Mapping[str, Any],
                features: Sequence[str] = RANKER_FEATURES) -> dict[str, Any]:
    """What the index part ``ranker`` is written from: ``{"body": ranker.json, "files": {name: bytes}}``."""
    import tempfile

    body: dict[str, Any] = {"kind": kind, "features": list(features), "docs": int(docs), "report": dict(report)}
    files: dict[str, bytes] = {}
    if kind == "gbm":
        body["trees"] = model.to_json()
    elif kind == "mlp":
        with tempfile.TemporaryDirectory() as tmp:
            files["model.onnx"] = export_onnx(model, Path(tmp) / "model.onnx").read_bytes()
        body["onnx"] = "model.onnx"
    else:
        raise ValueError(f"unknown ranker kind {kind!r}; valid: {', '.join(RANKER_KINDS)}")
    return {"body": body, "files": files}


def write_ranker(folder: Path, part: Mapping[str, Any]) -> Path:
    """A ranker folder (``ranker.json`` and its files) outside an index: what ``priorart build --ranker`` reads."""
    from service.index.parts import RANKER_FORMAT, RANKER_VERSION
    from service.versioned import write_versioned

    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.iterdir():
        old.unlink()
    for name, data in part["files"].items():
        (folder / name).write_bytes(data)
    write_versioned(folder / "ranker.json", RANKER_FORMAT, RANKER_VERSION, part["body"], indent=None)
    return folder


def read_ranker(folder: str | Path) -> dict[str, Any]:
    """A ranker folder (:func:`write_ranker`) as the index part is written from; ``ValueError`` naming what is wrong."""
    from service.index.parts import RANKER_FORMAT, RANKER_VERSION
    from service.versioned import read_versioned

    d = Path(folder)
    if not (d / "ranker.json").is_file():
        raise ValueError(f"{d} holds no ranker.json (a folder written by priorart-lab experiment ranking --ranker-out)")
    body = dict(read_versioned(d / "ranker.json", RANKER_FORMAT, RANKER_VERSION, error=ValueError,
                               fix="write it again with priorart-lab experiment ranking --ranker-out"))
    files = {p.name: p.read_bytes() for p in sorted(d.iterdir()) if p.name != "ranker.json"}
    RankerModel.of_part(body, d)  # the service can read it
    return {"body": body, "files": files}


def resolve(ranker: str | Path | None, *, dense: bool = True) -> tuple[str, dict[str, Any]] | None:
    """The ranker ``ranker`` names, as (its source, the part to write): ``"default"`` the project's
    (:data:`DEFAULT_RANKER` for an index with the dense stage, :data:`BM25_RANKER` without: ``dense``; None when it was
    never written), a ranker folder, or None / ``"none"`` (None); ``ValueError`` for a folder without a ranker."""
    if ranker is None or str(ranker) == "none":
        return None
    if str(ranker) == "default":
        folder = DEFAULT_RANKER if dense else BM25_RANKER
        if not (folder / "ranker.json").is_file():
            log.info("no default ranker (%s): the first documents are ordered by their best passage", folder)
            return None
        return "default" if dense else "default (without the dense stage)", read_ranker(folder)
    return str(ranker), read_ranker(Path(ranker))


def _code_vectors(roots: Sequence[Path]) -> Any:
    """The code vectors of an index built already, one set for every shard of a sharded one (the codes of all its
    documents, the settings' CPC title list; None where its documents hold no code)."""
    from service.index.store import DocStore
    from training.code_classifier import cpc_list
    from training.code_vectors import NoCodes, store_codes, train_code_vectors

    codes: set[str] = set()
    for root in roots:
        docs = DocStore.load(root)
        try:
            codes.update(store_codes(docs))
        finally:
            docs.close()
    try:
        return train_code_vectors(sorted(codes), cpc_list())
    except NoCodes:
        return None


def _word_vectors(roots: Sequence[Path]) -> tuple[Any, str | None]:
    """The word vectors of an index built already, one set for every shard of a sharded one (learned from all their
    passages), and None with the reason where there can be none (the engine then orders by the passage rule)."""
    from training.word_vectors import NoWordVectors, index_word_vectors

    try:
        return index_word_vectors(*roots), None
    except NoWordVectors as exc:
        return None, f"none ({exc}): the first documents are ordered by their best passage"


def install_into(index_dir: str | Path, ranker: str | Path = "default") -> list[dict[str, Any]]:
    """Write the ranker ``ranker`` names (:func:`resolve`) into an index already built, every shard of a sharded one
    (and, for a ranker that reads the kernel features, the index's word vectors where it has none: trained once on
    every shard's passages, training/word_vectors.py; for one that reads the code-embedding feature, its code
    vectors likewise, learned once from every shard's documents: training/code_vectors.py), each under its writers'
    lock (refused while an add, delete or compact runs there); a running server orders by it from its next load
    (``POST /admin/reload``, or the reload of the next generation). Returns the entries written; ``ValueError`` when
    there is no ranker to write."""
    from service.index.folder import IndexFolder, Layout, ShardSet, is_sharded
    from service.index.parts import open_part, write_part
    from service.kernel_pooling import reads_kernels

    roots = ([f.root for f in ShardSet.open(index_dir, verify=False).shards] if is_sharded(index_dir)
             else [Path(index_dir)])
    got = resolve(ranker, dense=IndexFolder.open(roots[0], verify=False).has("dense"))
    if got is None:
        raise ValueError(f"no ranker to install ({ranker}): give a folder written by priorart-lab experiment ranking "
                         "--ranker-out")
    source, part = got
    written: list[dict[str, Any]] = []
    # learned once, from every shard (the same vectors in each), at the first shard that lacks them: from the index
    # as it is, before the ranker's files change
    shared_words = functools.cache(lambda: _word_vectors(roots))
    shared_codes = functools.cache(lambda: _code_vectors(roots))
    for root in roots:
        with IndexFolder.open(root, verify=False).writer_lock(wait=False):
            folder = IndexFolder.open(root, verify=False)  # as it is under the lock
            vectors, none_why = None, None
            if reads_kernels(part["body"]["features"]) and not folder.has("word_vectors"):
                vectors, none_why = shared_words()
            codes = None
            if CODE_EMBEDDING in part["body"]["features"] and not folder.has("code_vectors"):
                codes = shared_codes()
            entry = {**write_part("ranker", folder.root, part), "source": source}
            parts, changed = {"ranker": entry}, [Layout.RANKER]
            if vectors is not None:
                parts["word_vectors"] = write_part("word_vectors", folder.root, vectors)
                changed.append(Layout.WORD_VECTORS)
            if codes is not None:
                parts["code_vectors"] = write_part("code_vectors", folder.root, codes)
                changed.append(Layout.CODE_VECTORS)
            if none_why is not None:
                entry["word_vectors"] = none_why
            folder.register(parts, changed=changed)
        got_back = open_part("ranker", IndexFolder.open(root, verify=True))  # checksummed with the rest
        assert got_back is not None
        RankerModel.of_part(*got_back)  # the service reads what was written
        written.append(entry)
    return written


__all__ = ["ABLATED_FEATURES", "BM25_RANKER", "DEFAULT_RANKER", "EXTRA_FEATURES", "RANKER_DOCS", "RANKER_FEATURES",
           "GbmSettings",
           "MlpSettings", "TopicEvidence", "export_onnx", "grades_of", "install_into", "learn", "mlp_scores",
           "ranker_part", "ranking", "read_ranker", "resolve", "scores", "train_gbm", "train_mlp", "write_ranker"]
