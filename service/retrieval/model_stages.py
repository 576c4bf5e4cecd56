"""Neural stages of the pipeline: dense retrieval (FAISS) and reranking (ONNX), plus learned fusion weights.

An index built with ``priorart build --models MODELS_DIR`` holds (each registered in ``meta.json``
under ``components`` with a format version; every file is checksummed by the index's ``meta.json``)::

    models/              copy of the models folder (its meta.json, vocabularies, ONNX graphs, split.json;
                         torch checkpoints are left out: the service never reads them)
    models/fusion.json   fusion weights learned on the DEV split, per variant and candidate depth
                         (written by ``priorart fuse`` / ``build --models``; see training/fusion.py)
    dense/               dual-encoder vectors of every doc-store row + FAISS index (service/retrieval/dense.py)
    rerank/<name>.npy    document-side encodings of the rankers, float32 [n_docs, dim], row-aligned:
                         text_doc (text-only ranker), meta_doc (meta-only ranker),
                         joint_doc_text + joint_doc_meta (joint text+meta ranker)

So query time encodes only the query (one small ONNX call per encoder) and runs the ranker MLPs over
the candidates' precomputed vectors; nothing is read from the document text.

Stages (``name``, ``run(query, cands)``, ``describe()``):

- :class:`DenseStep` (``dense``): encodes the query with the dual encoder of its language, takes the
  FAISS top ``query.depth`` rows under the same filters as the first stage (codes, date, the
  query document itself), adds them to the candidates and sets the ``dense`` score of *every*
  candidate to its exact similarity from the stored vectors (BM25-only candidates included).
  Candidates only the dense stage found get BM25 score ``0``: they were not in BM25's top ``depth``,
  and 0 is a lower bound of any BM25 score (a document without a query term scores exactly 0), so they
  rank below every BM25 candidate when the BM25 weight is 1 — which is what makes "BM25 alone" a point
  of the fusion grid that reproduces the first stage's ranking. ``only=True`` replaces the candidates
  by the dense hits (the dense-only system of the evaluation).
- :class:`RerankStep` (``rerank``): ranker scores of every candidate. Which score goes where:

  ===============  ==========================================  ===================================
  mode / use_meta  ``text`` component                          ``meta`` component
  ===============  ==========================================  ===================================
  stacked / True   text-only ranker (CNN over words + MLP)     meta-only ranker (CNN over codes)
  joint / True     joint text+meta ranker (one MLP over both)  not set (the joint score holds it)
  any / False      text-only ranker                            not set
  ===============  ==========================================  ===================================

  With ``stacked`` the fusion weights take the place of the stacking weights (``rankers/stacked.json``
  weights are used only when ``score="stacked"`` asks for the plain stacked score).
- :class:`WeightsStep` (``weights``): when the request gives no weights, sets the fusion weights learned
  for the candidate depth nearest to ``query.depth`` (ties: the smaller depth); the pipeline's
  ``FusionStep`` then combines the min-max normalised components.

:func:`load_model_stages` composes them for :class:`service.engine.Engine`, choosing the device from
``settings.device`` (``auto``/``cpu``/``cuda``; onnxruntime's CUDA execution provider and a FAISS GPU
index when present, else CPU with a logged warning) and reporting what actually ran.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from service.codes import record_codes
from service.corpus.record import PatentRecord
from service.index.store import DocStore, id_shaped, load_meta, looks_like_pub_id
from service.pipeline import Candidates, Query
from service.retrieval.dense import DEVICES, DenseHits, DenseIndex, DenseIndexError
from service.retrieval.encoders import (
    CodeVocabulary,
    ModelsFolderError,
    Vocabulary,
    document_ids,
    pad_batch,
    query_ids,
    read_models_meta,
)
from service.text.analysis import SUPPORTED_LANGS, detect_language

log = logging.getLogger(__name__)

MODELS_DIR = "models"
FUSION_FILE = "models/fusion.json"
FUSION_FORMAT = "priorart-fusion"
FUSION_VERSION = 1
RERANK_DIR = "rerank"
RERANK_VERSION = 1
MODELS_COMPONENT_VERSION = 1
ENCODINGS = ("text_doc", "meta_doc", "joint_doc_text", "joint_doc_meta")
RERANK_MODES = ("joint", "stacked")
VARIANTS = {  # fusion variant -> RerankStep settings and the components it fills
    "stacked": {"mode": "stacked", "use_meta": True},
    "joint": {"mode": "joint", "use_meta": True},
    "text": {"mode": "stacked", "use_meta": False},
}
CPU = "CPUExecutionProvider"
CUDA = "CUDAExecutionProvider"


class ModelStageError(ValueError):
    """The neural part of an index cannot be used (the message names the file and what to do)."""


# --------------------------------------------------------------------------------------------------
# device selection
# --------------------------------------------------------------------------------------------------


def select_providers(device: str, available: Sequence[str]) -> tuple[list[str], str | None]:
    """onnxruntime providers for ``device`` (auto|cpu|cuda) given the available ones; plus a warning or None."""
    if device not in DEVICES:
        raise ModelStageError(f"unknown device {device!r}; valid: {', '.join(DEVICES)}")
    if device == "cpu":
        return [CPU], None
    if CUDA in available:
        return [CUDA, CPU], None
    return [CPU], "onnxruntime has no CUDA execution provider: neural models run on CPU"


def _ort() -> Any:
    try:
        import onnxruntime as ort
    except ImportError as exc:  # pragma: no cover - onnxruntime is a service dependency
        raise ModelStageError("the neural stages need onnxruntime (pip install onnxruntime[-gpu])") from exc
    return ort


class OnnxGraph:
    """One ONNX graph (inputs checked by name); ``providers`` are those the session actually uses."""

    def __init__(self, path: Path, providers: Sequence[str], threads: int = 0) -> None:
        ort = _ort()
        if not path.is_file():
            raise ModelStageError(f"{path}: ONNX graph missing")
        opts = ort.SessionOptions()
        if threads > 0:
            opts.intra_op_num_threads = threads
            opts.inter_op_num_threads = 1
        opts.log_severity_level = 3
        self.path = path
        try:
            self.sess = ort.InferenceSession(str(path), sess_options=opts, providers=list(providers))
        except Exception as exc:  # onnxruntime raises its own exception types
            raise ModelStageError(f"{path}: onnxruntime cannot load it ({exc})") from exc
        self.inputs = sorted(i.name for i in self.sess.get_inputs())
        self.providers: list[str] = list(self.sess.get_providers())

    def __call__(self, **feeds: np.ndarray) -> np.ndarray:
        if sorted(feeds) != self.inputs:
            raise ModelStageError(f"{self.path.name}: expected inputs {self.inputs}, got {sorted(feeds)}")
        return np.asarray(self.sess.run(None, feeds)[0])


# --------------------------------------------------------------------------------------------------
# the models folder, query side and document side
# --------------------------------------------------------------------------------------------------


class Models:
    """Vocabularies and ONNX graphs of a models folder (``side="query"``: query encoders + MLPs only;
    ``side="document"``: the document encoders, for the build)."""

    def __init__(self, root: Path, *, side: str = "query", providers: Sequence[str] = (CPU,), threads: int = 0) -> None:
        if side not in ("query", "document"):
            raise ValueError(f"side must be 'query' or 'document', got {side!r}")
        try:
            self.meta = read_models_meta(root)
        except ModelsFolderError as exc:
            raise ModelStageError(str(exc)) from exc
        self.root = root
        comp = self.meta["components"]
        try:
            self.vocabs = {lang: Vocabulary.load(root / rel) for lang, rel in comp["vocab"]["words"].items()}
            self.codes = CodeVocabulary.load(root / comp["vocab"]["codes"])
            limits = comp.get("limits", {})
            self.query_max_terms = int(limits["query_max_terms"])
            self.doc_max_terms = int(limits["doc_max_terms"])
            self.codes_max = int(limits["codes_max"])
            dual, rk = comp["dual"], comp["rankers"]
            self.dim = int(dual["dim"])
            self.similarity = str(dual.get("similarity", "inner_product"))
            self.stacked_weights = (float(rk["stacked"]["w_text"]), float(rk["stacked"]["w_meta"]))

            def g(rel: str) -> OnnxGraph:
                return OnnxGraph(root / rel, providers, threads)

            self.graphs: dict[str, OnnxGraph] = {}
            self.query_graphs: dict[str, dict[str, OnnxGraph]] = {}
            if side == "query":
                self.query_graphs = {
                    "dual": {lang: g(rel) for lang, rel in dual["query"].items()},
                    "text": {lang: g(rel) for lang, rel in rk["text"]["query"].items()},
                    "joint_text": {lang: g(rel) for lang, rel in rk["joint"]["query_text"].items()},
                }
                self.graphs = {"meta_query": g(rk["meta"]["query"]), "joint_query_meta": g(rk["joint"]["query_meta"]),
                               "text_mlp": g(rk["text"]["mlp"]), "meta_mlp": g(rk["meta"]["mlp"]),
                               "joint_mlp": g(rk["joint"]["mlp"])}
            else:
                self.graphs = {"dual_doc": g(dual["doc"]), "text_doc": g(rk["text"]["doc"]),
                               "meta_doc": g(rk["meta"]["doc"]), "joint_doc_text": g(rk["joint"]["doc_text"]),
                               "joint_doc_meta": g(rk["joint"]["doc_meta"])}
        except (KeyError, TypeError, ValueError, OSError) as exc:
            if isinstance(exc, ModelStageError):
                raise
            raise ModelStageError(f"{root / 'meta.json'}: models folder incomplete or unreadable ({exc!r})") from exc
        first = next(iter(self.graphs.values()))
        self.providers = first.providers

    @property
    def languages(self) -> tuple[str, ...]:
        """Query languages every query model can encode."""
        if not self.query_graphs:
            return ()
        have = set.intersection(*(set(v) for v in self.query_graphs.values())) & set(self.vocabs)
        return tuple(lang for lang in SUPPORTED_LANGS if lang in have)

    # ---- query side -----------------------------------------------------------------------------
    def _one(self, graph: OnnxGraph, ids: np.ndarray) -> np.ndarray:
        x, lengths = pad_batch([ids])
        return np.asarray(graph(ids=x, lengths=lengths)[0], dtype=np.float32)

    def query_term_ids(self, text: str, lang: str) -> np.ndarray:
        return query_ids(text, lang, self.vocabs[lang], self.query_max_terms)

    def encode_query(self, text: str, lang: str) -> np.ndarray:
        """Dual-encoder vector of a query (float32 [dim])."""
        return self._one(self.query_graphs["dual"][lang], self.query_term_ids(text, lang))

    def query_vectors(self, text: str, lang: str, codes: Sequence[str],
                      rankers: Sequence[str] = ("text", "meta", "joint")) -> dict[str, np.ndarray]:
        """Query-side vectors (``text``, ``meta``, ``joint_text``, ``joint_meta``) that ``rankers`` need."""
        ids = self.query_term_ids(text, lang)
        cids = self.codes.code_ids(codes, self.codes_max)
        out: dict[str, np.ndarray] = {}
        if "text" in rankers:
            out["text"] = self._one(self.query_graphs["text"][lang], ids)
        if "meta" in rankers:
            out["meta"] = self._one(self.graphs["meta_query"], cids)
        if "joint" in rankers:
            out["joint_text"] = self._one(self.query_graphs["joint_text"][lang], ids)
            out["joint_meta"] = self._one(self.graphs["joint_query_meta"], cids)
        return out

    def score(self, qv: Mapping[str, np.ndarray], docs: Mapping[str, np.ndarray],
              rankers: Sequence[str] = ("text", "meta", "joint")) -> dict[str, np.ndarray]:
        """Ranker scores of candidates from query vectors and the candidates' document encodings.

        ``rankers``: which of ``text``, ``meta``, ``joint`` to run; ``stacked`` is added when text and meta ran.
        """
        n = len(next(iter(docs.values())))
        if n == 0:
            return {k: np.zeros(0, dtype=np.float32) for k in (*rankers, "stacked")}

        def rep(v: np.ndarray) -> np.ndarray:
            return np.repeat(v[None, :], n, axis=0)

        out: dict[str, np.ndarray] = {}
        if "text" in rankers:
            out["text"] = self.graphs["text_mlp"](query=rep(qv["text"]), doc=np.ascontiguousarray(docs["text_doc"]))
        if "meta" in rankers:
            out["meta"] = self.graphs["meta_mlp"](query=rep(qv["meta"]), doc=np.ascontiguousarray(docs["meta_doc"]))
        if "joint" in rankers:
            out["joint"] = self.graphs["joint_mlp"](
                query_text=rep(qv["joint_text"]), doc_text=np.ascontiguousarray(docs["joint_doc_text"]),
                query_meta=rep(qv["joint_meta"]), doc_meta=np.ascontiguousarray(docs["joint_doc_meta"]),
            )
        if "text" in out and "meta" in out:
            w_text, w_meta = self.stacked_weights
            out["stacked"] = w_text * out["text"] + w_meta * out["meta"]
        return {k: v.astype(np.float32) for k, v in out.items()}

    # ---- document side (build) ------------------------------------------------------------------
    def encode_documents(self, records: Sequence[PatentRecord]) -> dict[str, np.ndarray]:
        """``dual`` vectors and the rankers' document encodings (``ENCODINGS``) of a batch of records."""
        terms = [document_ids(r, self.vocabs["en"], self.doc_max_terms) for r in records]
        codes = [self.codes.code_ids(record_codes(r), self.codes_max) for r in records]
        t_ids, t_len = pad_batch(terms)
        c_ids, c_len = pad_batch(codes)
        out = {"dual": self.graphs["dual_doc"](ids=t_ids, lengths=t_len)}
        for name in ("text_doc", "joint_doc_text"):
            out[name] = self.graphs[name](ids=t_ids, lengths=t_len)
        for name in ("meta_doc", "joint_doc_meta"):
            out[name] = self.graphs[name](ids=c_ids, lengths=c_len)
        return {k: np.asarray(v, dtype=np.float32) for k, v in out.items()}


# --------------------------------------------------------------------------------------------------
# fusion weights
# --------------------------------------------------------------------------------------------------


@dataclass
class FusionWeights:
    """``models/fusion.json`` read back: weights per candidate depth of one variant."""

    variant: str
    by_depth: dict[int, dict[str, float]]
    dev_ndcg: dict[int, float] = field(default_factory=dict)
    bm25_ndcg: dict[int, float] = field(default_factory=dict)
    source: str = ""

    def nearest_depth(self, depth: int) -> int:
        return min(self.by_depth, key=lambda d: (abs(d - depth), d))

    def for_depth(self, depth: int) -> dict[str, float]:
        return dict(self.by_depth[self.nearest_depth(depth)])

    @classmethod
    def load(cls, path: Path, variant: str | None = None) -> FusionWeights:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise ModelStageError(f"{path}: unreadable ({exc}); rerun `priorart fuse`") from exc
        if data.get("format") != FUSION_FORMAT or data.get("version") != FUSION_VERSION:
            raise ModelStageError(
                f"{path}: format {data.get('format')!r} version {data.get('version')!r}, expected {FUSION_FORMAT!r} "
                f"version {FUSION_VERSION}; rerun `priorart fuse`"
            )
        name = variant or data.get("default_variant")
        variants = data.get("variants", {})
        if name not in variants:
            raise ModelStageError(f"{path}: no fusion variant {name!r} (has {', '.join(variants) or 'none'})")
        depths = variants[name].get("depths", {})
        if not depths:
            raise ModelStageError(f"{path}: variant {name!r} has no depths")
        by_depth = {int(d): {k: float(v) for k, v in e["weights"].items()} for d, e in depths.items()}
        dev = {int(d): float(e["dev_ndcg"]) for d, e in depths.items() if "dev_ndcg" in e}
        bm25 = {int(d): float(e["bm25_ndcg"]) for d, e in depths.items() if "bm25_ndcg" in e}
        n = data.get("dev", {}).get("topics")
        return cls(name, by_depth, dev, bm25, f"{FUSION_FILE} (variant {name}, learned on {n} dev topics)")


# --------------------------------------------------------------------------------------------------
# stages
# --------------------------------------------------------------------------------------------------


def query_text_lang(query: Query) -> tuple[str, str]:
    """The text and language the neural models read: a publication-number query's document text, else the query."""
    text = query.resolved_text or query.text
    lang = query.resolved_lang or query.lang or detect_language(text)
    return text, lang


def _note(query: Query, message: str) -> None:
    notes = query.info.setdefault("notes", [])
    if message not in notes:
        notes.append(message)


def filter_mask(docs: DocStore, query: Query) -> np.ndarray | None:
    """The rows the first stage allowed (its ``query.info['filters']``), or, without a first stage, the
    query's own filters; ``None`` when nothing is filtered."""
    filters = query.info.get("filters")
    mask: np.ndarray | None = None
    if filters is not None:
        codes, level, before, exclude = (filters.get("codes"), filters.get("code_level"), filters.get("before"),
                                         filters.get("exclude"))
    else:
        codes = query.codes if query.code_level else None
        level, exclude = query.code_level, query.query_doc
        before = query.before.isoformat() if query.before else None
    if codes and level:
        mask = docs.code_mask(codes, level)
    if before:
        from datetime import date

        dmask = docs.date_mask(date.fromisoformat(str(before)))
        mask = dmask if mask is None else mask & dmask
    if exclude:
        row = docs.find(str(exclude))
        if row is not None:
            if mask is None:
                mask = np.ones(len(docs), dtype=bool)
            mask[row] = False
    return mask


class DenseStep:
    """FAISS nearest documents of the query's dual-encoder vector, unioned with the candidates (see module doc)."""

    name = "dense"

    def __init__(self, models: Models, dense: DenseIndex, docs: DocStore, *, only: bool = False) -> None:
        if len(dense) != len(docs):
            raise ModelStageError(f"dense index has {len(dense)} vectors, the doc store {len(docs)} rows")
        self.models = models
        self.dense = dense
        self.docs = docs
        self.only = only

    def with_only(self, only: bool) -> DenseStep:
        return DenseStep(self.models, self.dense, self.docs, only=only)

    def _resolve_number_query(self, query: Query) -> None:
        """Dense-only use without a first stage: a publication-number query searches with that document."""
        if query.query_doc or query.info.get("filters") is not None:
            return
        if id_shaped(query.text) and (looks_like_pub_id(query.text) or self.docs.find(query.text) is not None):
            rec = self.docs.get(query.text)
            lang = query.lang if query.lang in rec.languages else (rec.lang or "en")
            query.query_doc, query.resolved_lang = rec.id, lang
            query.resolved_text = rec.text(lang, ("title", "abstract", "claims"))
            if not query.codes:
                query.codes = [*rec.ipc, *rec.cpc]

    def search(self, query: Query) -> tuple[np.ndarray, DenseHits] | None:
        """The query vector and its FAISS top ``query.depth`` under the filters; None without an encoder."""
        self._resolve_number_query(query)
        text, lang = query_text_lang(query)
        if lang not in self.models.languages:
            _note(query, f"no {lang} query encoder in the models: dense stage skipped")
            return None
        qv = self.models.encode_query(text, lang)
        return qv, self.dense.search(qv, query.depth, filter_mask(self.docs, query))

    def merge(self, query: Query, cands: Candidates, found: tuple[np.ndarray, DenseHits] | None) -> Candidates:
        """Union the dense hits into the candidates and score every candidate (see the module doc)."""
        if found is None:
            if self.only:
                return Candidates(rows=np.zeros(0, dtype=np.int64), scores={"dense": np.zeros(0)})
            cands.scores["dense"] = np.full(len(cands), np.nan)
            return cands
        qv, hits = found
        if self.only:
            query.info["dense"] = {"hits": len(hits)}
            return Candidates(rows=hits.rows.astype(np.int64), scores={"dense": hits.scores.astype(np.float64)})
        before = len(cands)
        overlap = int(np.isin(hits.rows, cands.rows).sum())
        cands.add_rows(hits.rows.astype(np.int64))
        if "bm25" in cands.scores:
            cands.scores["bm25"][before:] = 0.0  # not in BM25's top depth: 0 is a lower bound of its BM25 score
        cands.scores["dense"] = self.dense.scores(qv, cands.rows)
        query.info["dense"] = {"hits": len(hits), "new": len(cands) - before, "overlap": overlap}
        return cands

    def run(self, query: Query, cands: Candidates) -> Candidates:
        return self.merge(query, cands, self.search(query))

    def describe(self) -> dict[str, Any]:
        return {**self.dense.describe(), "languages": list(self.models.languages), "only": self.only,
                "onnx_providers": self.models.providers}


class RerankStep:
    """Ranker scores of every candidate from precomputed document encodings (see the module doc's table)."""

    name = "rerank"

    def __init__(self, models: Models, encodings: Mapping[str, np.ndarray], *, mode: str = "stacked",
                 use_meta: bool = True) -> None:
        if mode not in RERANK_MODES:
            raise ModelStageError(f"unknown rerank mode {mode!r}; valid: {', '.join(RERANK_MODES)}")
        missing = [n for n in ENCODINGS if n not in encodings]
        if missing:
            raise ModelStageError(f"document encodings missing: {', '.join(missing)}")
        self.models = models
        self.encodings = dict(encodings)
        self.mode = mode
        self.use_meta = use_meta

    def scores(self, text: str, lang: str, codes: Sequence[str], rows: np.ndarray,
               rankers: Sequence[str] = ("text", "meta", "joint")) -> dict[str, np.ndarray]:
        """Ranker scores (``text``, ``meta``, ``joint``; ``stacked`` with text and meta) of ``rows`` (float64)."""
        rows = np.asarray(rows, dtype=np.int64)
        need = {"text": ("text_doc",), "meta": ("meta_doc",), "joint": ("joint_doc_text", "joint_doc_meta")}
        docs = {n: np.asarray(self.encodings[n][rows], dtype=np.float32) for r in rankers for n in need[r]}
        qv = self.models.query_vectors(text, lang, codes, rankers)
        return {k: v.astype(np.float64) for k, v in self.models.score(qv, docs, rankers).items()}

    @property
    def rankers(self) -> tuple[str, ...]:
        """The rankers this step runs (see the module doc's table)."""
        if not self.use_meta:
            return ("text",)
        return ("text", "meta") if self.mode == "stacked" else ("joint",)

    def run(self, query: Query, cands: Candidates) -> Candidates:
        text, lang = query_text_lang(query)
        if lang not in self.models.languages:
            _note(query, f"no {lang} query encoder in the models: rerank skipped")
            cands.scores["text"] = np.full(len(cands), np.nan)
            return cands
        s = self.scores(text, lang, query.codes, cands.rows, self.rankers)
        if self.use_meta and self.mode == "joint":
            cands.scores["text"] = s["joint"]
        else:
            cands.scores["text"] = s["text"]
            if self.use_meta:
                cands.scores["meta"] = s["meta"]
        return cands

    def describe(self) -> dict[str, Any]:
        filled = {"text": "text-only ranker"} if not self.use_meta else (
            {"text": "text-only ranker", "meta": "meta-only ranker"} if self.mode == "stacked"
            else {"text": "joint text+meta ranker"})
        return {"mode": self.mode, "use_meta": self.use_meta, "components": filled,
                "onnx_providers": self.models.providers}


class WeightsStep:
    """Sets the fusion weights learned for the depth nearest to ``query.depth`` (unless the request set weights)."""

    name = "weights"

    def __init__(self, fusion: FusionWeights) -> None:
        self.fusion = fusion

    def run(self, query: Query, cands: Candidates) -> Candidates:
        if query.weights is None:
            depth = self.fusion.nearest_depth(query.depth)
            query.weights = self.fusion.for_depth(depth)
            query.info["fusion"] = {"variant": self.fusion.variant, "depth": depth, "weights": query.weights}
        else:
            query.info["fusion"] = {"variant": "request", "weights": dict(query.weights)}
        return cands

    def describe(self) -> dict[str, Any]:
        return {"variant": self.fusion.variant, "source": self.fusion.source,
                "weights": {str(d): w for d, w in sorted(self.fusion.by_depth.items())},
                "dev_ndcg": {str(d): v for d, v in sorted(self.fusion.dev_ndcg.items())},
                "bm25_dev_ndcg": {str(d): v for d, v in sorted(self.fusion.bm25_ndcg.items())}}


# --------------------------------------------------------------------------------------------------
# loading
# --------------------------------------------------------------------------------------------------


def load_encodings(
    index_dir: Path, component: Mapping[str, Any], n_docs: int, *, mmap: bool = True
) -> dict[str, np.ndarray]:
    """The rankers' document encodings of an index (``components.rerank``), shapes checked."""
    if component.get("version") != RERANK_VERSION:
        raise ModelStageError(f"{index_dir / 'meta.json'}: rerank format version {component.get('version')!r}, "
                              f"expected {RERANK_VERSION}; rebuild with --models")
    out: dict[str, np.ndarray] = {}
    for name in ENCODINGS:
        rel = component.get("files", {}).get(name)
        if rel is None:
            raise ModelStageError(f"{index_dir / 'meta.json'}: rerank encoding {name!r} not listed")
        path = index_dir / rel
        try:
            arr = np.load(path, mmap_mode="r" if mmap else None)
        except (OSError, ValueError) as exc:
            raise ModelStageError(f"{path}: unreadable ({exc})") from exc
        if arr.dtype != np.float32 or arr.ndim != 2 or arr.shape[0] != n_docs:
            raise ModelStageError(f"{path}: expected float32 [{n_docs}, dim], got {arr.dtype} {list(arr.shape)}")
        out[name] = arr
    return out


def _providers(device: str, notices: list[str]) -> list[str]:
    available = list(_ort().get_available_providers())
    providers, warning = select_providers(device, available)
    if warning:
        log.warning(warning)
        if device == "cuda":
            notices.append(f"device cuda asked for, but {warning}")
    return providers


def load_model_stages(index_dir: str | Path, settings: Any) -> dict[str, Any]:
    """Dense + rerank stages and fusion weights of an index built with ``--models`` (the Engine's contract).

    Returns ``{"stages", "weights", "weight_source", "device", "extra": {"models": ...}, "notices"}``.
    Parts that are missing degrade with a notice (e.g. no ``fusion.json``: BM25 weights only).
    """
    root = Path(index_dir)
    device = str(getattr(settings, "device", "auto") or "auto")
    if device not in DEVICES:
        raise ModelStageError(f"settings.device is {device!r}; valid: {', '.join(DEVICES)}")
    meta = load_meta(root, verify=False)  # the engine's FirstStage.load verified every checksum already
    comps = meta.components
    notices: list[str] = []
    providers = _providers(device, notices)
    threads = int(getattr(settings, "onnx_threads", 0) or 0)
    models = Models(root / MODELS_DIR, side="query", providers=providers, threads=threads)
    onnx_on_cuda = CUDA in models.providers
    log.info("neural models: onnxruntime providers %s (device setting %s)", models.providers, device)
    docs = DocStore.load(root)
    stages: list[Any] = []
    extra: dict[str, Any] = {"onnx_providers": models.providers, "languages": list(models.languages),
                             "trained": models.meta.get("created"), "models_component": comps.get("models", {})}
    if "dense" in comps:
        try:
            dense = DenseIndex.load(root, device=device)
        except DenseIndexError as exc:
            raise ModelStageError(str(exc)) from exc
        notices.extend(dense.notes)
        stages.append(DenseStep(models, dense, docs))
        extra["dense"] = dense.describe()
    else:
        notices.append("no dense/ in this index: dense stage skipped (rebuild with --models)")
    fusion: FusionWeights | None = None
    if (root / FUSION_FILE).is_file():
        fusion = FusionWeights.load(root / FUSION_FILE)
    variant = fusion.variant if fusion else "stacked"
    if "rerank" in comps:
        enc = load_encodings(root, comps["rerank"], len(docs))
        cfg = VARIANTS[variant]
        stages.append(RerankStep(models, enc, mode=str(cfg["mode"]), use_meta=bool(cfg["use_meta"])))
    else:
        notices.append("no rerank/ document encodings in this index: rerank skipped (rebuild with --models)")
    missing_langs = [lang for lang in SUPPORTED_LANGS if lang not in models.languages]
    if missing_langs:
        notices.append(f"no query encoders for {', '.join(missing_langs)}: such queries use BM25 only")
    if fusion is None:
        weights = {"bm25": 1.0}
        source = "default (BM25 only): no models/fusion.json"
        notices.append("no learned fusion weights in this index (run `priorart fuse INDEX`): BM25 weight only; "
                       "dense/text/meta scores are computed and shown but not fused")
    else:
        stages.append(WeightsStep(fusion))
        default_depth = int(getattr(settings, "default_depth", 1000))
        weights = fusion.for_depth(default_depth)
        source = fusion.source
        extra["fusion"] = {"variant": fusion.variant, "depths": sorted(fusion.by_depth)}
    faiss_gpu = extra.get("dense", {}).get("device") == "cuda"
    used = "cuda" if (onnx_on_cuda or faiss_gpu) else "cpu"
    extra["faiss_device"] = extra.get("dense", {}).get("device")
    log.info("model stages %s on %s (onnx %s, faiss %s)", [s.name for s in stages], used, models.providers,
             extra["faiss_device"])
    return {"stages": stages, "weights": weights, "weight_source": source, "device": used,
            "extra": {"models": extra}, "notices": notices}


def iter_rows(docs: DocStore, batch: int) -> Iterable[list[PatentRecord]]:
    """Records of a doc store in row order, in batches."""
    n = len(docs)
    for start in range(0, n, batch):
        yield [docs.get_row(r) for r in range(start, min(n, start + batch))]


__all__ = [
    "DenseStep", "FusionWeights", "Models", "ModelStageError", "OnnxGraph", "RerankStep", "WeightsStep",
    "filter_mask", "load_encodings", "load_model_stages", "select_providers"
]
