"""The neural models at inference time: onnxruntime over a models folder, query side and document side.

One class, :class:`Models`, serves every use: the service's dense and rerank stages (query side, with
the documents' encodings precomputed at build time), the build (document side: every document
encoded once), and training/evaluation code that scores records directly (:meth:`Models.rerank_records`).
What the models read (vocabularies, document text, codes, caps) is defined once in
:mod:`service.retrieval.encoders`; the folder layout is described there too.

Device: :func:`select_providers` picks onnxruntime's execution providers for ``auto|cpu|cuda``. With
``auto`` or ``cuda`` and a CUDA provider present, CUDA first (then CPU); otherwise CPU and a warning
(logged, and returned so the caller can say it in ``/health`` and the build report). ``Models.providers``
says what the sessions actually use.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from service.codes import record_codes
from service.corpus.record import PatentRecord
from service.index.arrays import SegmentRows
from service.index.folder import IndexFolder, IndexFormatError
from service.retrieval.encoders import (
    CodeVocabulary,
    ModelsFolderError,
    UnsupportedLanguageError,
    Vocabulary,
    document_ids,
    pad_batch,
    query_ids,
    read_models_meta,
    verify_models_files,
)
from service.settings import DEVICES
from service.text.analysis import SUPPORTED_LANGS

log = logging.getLogger(__name__)

CPU = "CPUExecutionProvider"
CUDA = "CUDAExecutionProvider"
SIDES = ("query", "document")
RANKERS = ("text", "meta", "joint")
ENCODINGS = ("text_doc", "meta_doc", "joint_doc_text", "joint_doc_meta")
RERANK_VERSION = 1
"""Version of the ``rerank`` component: the encodings above, stored as ``rerank/<encoding>.npy``."""
"""The rankers' document-side encodings, precomputed per index row at build time (``rerank/<name>.npy``)."""


def select_providers(device: str, available: Sequence[str]) -> tuple[list[str], str | None]:
    """onnxruntime providers for ``device`` (auto|cpu|cuda) given the available ones; plus a warning or None."""
    if device not in DEVICES:
        raise ModelsFolderError(f"unknown device {device!r}; valid: {', '.join(DEVICES)}")
    if device == "cpu":
        return [CPU], None
    if CUDA in available:
        return [CUDA, CPU], None
    return [CPU], "onnxruntime has no CUDA execution provider: neural models run on CPU"


def _ort() -> Any:
    try:
        import onnxruntime as ort
    except ImportError as exc:  # pragma: no cover - onnxruntime is a service dependency
        raise ModelsFolderError("the neural stages need onnxruntime (pip install onnxruntime[-gpu])") from exc
    return ort


def providers_for(device: str) -> tuple[list[str], str | None]:
    """:func:`select_providers` over what this onnxruntime offers; the warning is logged as one when ``cuda`` was
    asked for (``auto`` on a machine without CUDA is what was asked: the pipeline's log line names the device)."""
    providers, warning = select_providers(device, list(_ort().get_available_providers()))
    if warning:
        log.log(logging.WARNING if device == "cuda" else logging.DEBUG, warning)
    return providers, warning


class OnnxGraph:
    """One ONNX graph (inputs checked by name); ``providers`` are those the session actually uses.

    ``threads``: onnxruntime's intra-op threads; 0 is onnxruntime's own default, one spinning thread per core. The
    default is one thread, for every graph (the server's query side takes ``Settings.onnx_threads``, also 1): a build
    or an add usually runs beside a server or another encoding process, and there onnxruntime's spinning threads take
    the cores from each other (two encoding processes each took twice as long: docs/RESULTS.md, "ONNX threads"). A
    large build scales out by processes (the Ray Data encoding job, one thread a worker), not by threads."""

    def __init__(self, path: Path, providers: Sequence[str], threads: int = 1) -> None:
        ort = _ort()
        if not path.is_file():
            raise ModelsFolderError(f"{path}: ONNX graph missing")
        opts = ort.SessionOptions()
        if threads > 0:
            opts.intra_op_num_threads = threads
            opts.inter_op_num_threads = 1
        opts.log_severity_level = 3
        self.path = path
        try:
            self.sess = ort.InferenceSession(str(path), sess_options=opts, providers=list(providers))
        except Exception as exc:  # onnxruntime raises its own exception types
            raise ModelsFolderError(f"{path}: onnxruntime cannot load it ({exc})") from exc
        self.inputs = sorted(i.name for i in self.sess.get_inputs())
        self.providers: list[str] = list(self.sess.get_providers())

    def __call__(self, **feeds: np.ndarray) -> np.ndarray:
        if sorted(feeds) != self.inputs:
            raise ModelsFolderError(f"{self.path.name}: expected inputs {self.inputs}, got {sorted(feeds)}")
        return np.asarray(self.sess.run(None, feeds)[0])


class Models:
    """Vocabularies and ONNX graphs of a models folder.

    ``sides``: which graphs to load, ``"query"`` (query encoders and ranker MLPs: the service) and/or
    ``"document"`` (document encoders: the build). ``device``: auto|cpu|cuda (:func:`select_providers`).
    """

    def __init__(self, root: str | Path, *, sides: Sequence[str] = SIDES, device: str = "auto", threads: int = 1,
                 verify: bool = False) -> None:
        bad = [s for s in sides if s not in SIDES]
        if bad or not sides:
            raise ValueError(f"sides must be among {', '.join(SIDES)}, got {list(sides)}")
        root = Path(root)
        self.meta = read_models_meta(root)
        if verify:
            verify_models_files(root, self.meta)
        self.root = root
        self.sides = tuple(sides)
        providers, self.device_warning = providers_for(device)
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

            self.query_graphs: dict[str, dict[str, OnnxGraph]] = {}
            self.graphs: dict[str, OnnxGraph] = {}
            if "query" in sides:
                self.query_graphs = {
                    "dual": {lang: g(rel) for lang, rel in dual["query"].items()},
                    "text": {lang: g(rel) for lang, rel in rk["text"]["query"].items()},
                    "joint_text": {lang: g(rel) for lang, rel in rk["joint"]["query_text"].items()},
                }
                self.graphs.update({
                    "meta_query": g(rk["meta"]["query"]), "joint_query_meta": g(rk["joint"]["query_meta"]),
                    "text_mlp": g(rk["text"]["mlp"]), "meta_mlp": g(rk["meta"]["mlp"]),
                    "joint_mlp": g(rk["joint"]["mlp"]),
                })
            if "document" in sides:
                self.graphs.update({"dual_doc": g(dual["doc"]), "text_doc": g(rk["text"]["doc"]),
                                    "meta_doc": g(rk["meta"]["doc"]), "joint_doc_text": g(rk["joint"]["doc_text"]),
                                    "joint_doc_meta": g(rk["joint"]["doc_meta"])})
        except (KeyError, TypeError, ValueError, OSError) as exc:
            if isinstance(exc, ModelsFolderError):
                raise
            raise ModelsFolderError(f"{root / 'meta.json'}: models folder incomplete or unreadable ({exc!r})") from exc
        self.providers = next(iter(self.graphs.values())).providers
        log.debug("models loaded from %s (%s); onnxruntime providers %s", root, "+".join(sides), self.providers)

    @property
    def on_cuda(self) -> bool:
        return CUDA in self.providers

    def languages_of(self, kind: str) -> tuple[str, ...]:
        """Query languages the ``dual``, ``text`` or ``joint`` query encoder can read."""
        graphs = self.query_graphs.get({"joint": "joint_text"}.get(kind, kind), {})
        return tuple(lang for lang in SUPPORTED_LANGS if lang in graphs and lang in self.vocabs)

    @property
    def languages(self) -> tuple[str, ...]:
        """Query languages every query model can encode."""
        common = set(self.languages_of("dual")) & set(self.languages_of("text")) & set(self.languages_of("joint"))
        return tuple(lang for lang in SUPPORTED_LANGS if lang in common)

    # ---- query side -----------------------------------------------------------------------------
    def _one(self, graph: OnnxGraph, ids: np.ndarray) -> np.ndarray:
        x, lengths = pad_batch([ids])
        return np.asarray(graph(ids=x, lengths=lengths)[0], dtype=np.float32)

    def query_term_ids(self, text: str, lang: str) -> np.ndarray:
        return query_ids(text, lang, self.vocabs[lang], self.query_max_terms)

    def code_ids(self, codes: Iterable[str]) -> np.ndarray:
        return self.codes.code_ids(codes, self.codes_max)

    def encode_query(self, text: str, lang: str) -> np.ndarray:
        """Dual-encoder vector of a query (float32 [dim]; inner product with a document vector = smooth cosine)."""
        if lang not in self.languages_of("dual"):
            raise UnsupportedLanguageError(
                f"no {lang} query encoder in {self.root} (has {', '.join(self.languages_of('dual'))})")
        return self._one(self.query_graphs["dual"][lang], self.query_term_ids(text, lang))

    def query_vectors(self, text: str, lang: str, codes: Sequence[str],
                      rankers: Sequence[str] = RANKERS) -> dict[str, np.ndarray]:
        """Query-side vectors (``text``, ``meta``, ``joint_text``, ``joint_meta``) that ``rankers`` need."""
        ids = self.query_term_ids(text, lang) if {"text", "joint"} & set(rankers) else None
        cids = self.code_ids(codes)
        out: dict[str, np.ndarray] = {}
        if "text" in rankers and ids is not None:
            out["text"] = self._one(self.query_graphs["text"][lang], ids)
        if "meta" in rankers:
            out["meta"] = self._one(self.graphs["meta_query"], cids)
        if "joint" in rankers and ids is not None:
            out["joint_text"] = self._one(self.query_graphs["joint_text"][lang], ids)
            out["joint_meta"] = self._one(self.graphs["joint_query_meta"], cids)
        return out

    def score(self, qv: Mapping[str, np.ndarray], docs: Mapping[str, np.ndarray],
              rankers: Sequence[str] = RANKERS) -> dict[str, np.ndarray]:
        """Ranker scores (float32 [n]) of candidates from query vectors and their document encodings.

        ``rankers``: which of ``text``, ``meta``, ``joint`` to run; ``stacked`` (the stacked model,
        ``w_text * text + w_meta * meta``) is added when text and meta ran.
        """
        n = len(next(iter(docs.values()))) if docs else 0
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
        return {k: np.asarray(v, dtype=np.float32) for k, v in out.items()}

    # ---- document side --------------------------------------------------------------------------
    def encode_documents(self, records: Sequence[PatentRecord]) -> dict[str, np.ndarray]:
        """``dual`` vectors and the rankers' document encodings (:data:`ENCODINGS`) of a batch of records."""
        if "document" not in self.sides:
            raise ModelsFolderError("these models were loaded without the document side (sides=('query',))")
        terms = [document_ids(r, self.vocabs["en"], self.doc_max_terms) for r in records]
        codes = [self.code_ids(record_codes(r)) for r in records]
        t_ids, t_len = pad_batch(terms)
        c_ids, c_len = pad_batch(codes)
        out = {"dual": self.graphs["dual_doc"](ids=t_ids, lengths=t_len)}
        for name in ("text_doc", "joint_doc_text"):
            out[name] = self.graphs[name](ids=t_ids, lengths=t_len)
        for name in ("meta_doc", "joint_doc_meta"):
            out[name] = self.graphs[name](ids=c_ids, lengths=c_len)
        return {k: np.asarray(v, dtype=np.float32) for k, v in out.items()}

    def rerank_records(self, text: str, lang: str, codes: Sequence[str], records: Sequence[PatentRecord],
                       batch_size: int = 256) -> dict[str, np.ndarray]:
        """``text``, ``meta``, ``joint`` and ``stacked`` scores of records (encoded here, in batches)."""
        if not records:
            return {k: np.zeros(0, dtype=np.float32) for k in (*RANKERS, "stacked")}
        parts = [self.encode_documents(records[i:i + batch_size]) for i in range(0, len(records), batch_size)]
        docs = {name: np.concatenate([p[name] for p in parts]) for name in ENCODINGS}
        return self.score(self.query_vectors(text, lang, codes), docs)

    def describe(self) -> dict[str, Any]:
        return {"root": str(self.root), "providers": self.providers, "languages": {
            k: list(self.languages_of(k)) for k in ("dual", "text", "joint")}, "trained": self.meta.get("created")}


def load_encodings(folder: IndexFolder, n_docs: int, *, mmap: bool = True) -> dict[str, np.ndarray | SegmentRows]:
    """The rankers' document encodings of an index (``components.rerank``), shapes checked; of a generation of
    several segments, each segment's mapped where it lies and read by generation row (:class:`SegmentRows`)."""
    whole = folder.one_build
    if whole is None:
        parts = [load_encodings(IndexFolder(s.folder.root, s.folder.meta), s.n_rows, mmap=mmap)
                 for s in folder.segments]
        joined = {name: SegmentRows([np.asarray(p[name]) for p in parts]) for name in ENCODINGS}
        if any(len(a) != n_docs for a in joined.values()):
            raise IndexFormatError(f"{folder.root}: rerank encodings of the segments do not add up to {n_docs} rows")
        return dict(joined)
    folder = whole
    comp = folder.component("rerank", RERANK_VERSION, fix="rebuild with --models")
    out: dict[str, np.ndarray | SegmentRows] = {}
    for name in ENCODINGS:
        rel = comp.get("files", {}).get(name)
        if rel is None:
            raise IndexFormatError(f"{folder.path('meta.json')}: rerank encoding {name!r} not listed; rebuild")
        path = folder.path(rel)
        try:
            arr = np.load(path, mmap_mode="r" if mmap else None)
        except (OSError, ValueError) as exc:
            raise IndexFormatError(f"{path}: unreadable ({exc})") from exc
        if arr.dtype != np.float32 or arr.ndim != 2 or arr.shape[0] != n_docs:
            raise IndexFormatError(f"{path}: expected float32 [{n_docs}, dim], got {arr.dtype} {list(arr.shape)}")
        out[name] = arr
    return out


__all__ = ["CPU", "CUDA", "ENCODINGS", "RANKERS", "RERANK_VERSION", "Models", "OnnxGraph", "load_encodings",
           "providers_for", "select_providers"]
