"""Dense stage storage and search: the document vectors of an index and their FAISS index.

Files (written by ``priorart build --models``, described under ``components.dense`` of the index's
``meta.json``)::

    dense/vectors.npy    float32 [n_docs, dim], row i = the dual-encoder vector of doc-store row i
    dense/index.faiss    FAISS index over those vectors: ``flat`` (exact), ``hnsw`` or ``ivf`` (approximate)

Similarity. The dual encoder documents its similarity in the models folder (``components.dual.similarity``):
``inner_product`` (the vectors are already scaled so that the inner product *is* the smooth cosine of the
training loss: do not normalise them), ``cosine`` (vectors are L2-normalised at build and query time, then
inner product) or ``l2`` (FAISS L2 distance; the score is the negated squared distance, so higher is
better everywhere).

Search. :meth:`DenseSegment.search` returns the ``k`` best rows with their scores. Scores are always
recomputed exactly from the stored vectors (an approximate index only chooses the rows), so a dense
score means the same whatever index found the row, and :meth:`DenseSegment.scores` gives the same
number for any row (BM25-only candidates). Filters (the first stage's code/date filters and the
excluded query document) are a boolean ``mask`` over rows:

- few allowed rows (``<= exact_filter_max`` or ``<= k``): exact scores of the allowed rows only (numpy);
- otherwise on CPU: FAISS's ``IDSelectorBitmap`` inside the search (exact on ``flat``, approximate on
  ``hnsw``/``ivf``);
- otherwise on GPU (GPU indexes take no selector): over-fetch ``4k``, ``16k``, ... (at most 2048, the
  GPU limit) and keep the allowed rows until ``k`` are found; past the limit, exact scores of the
  allowed rows.

Device. ``device="auto"`` puts ``flat`` and ``ivf`` indexes on the first GPU when faiss was built with
GPU support and sees one (``faiss.StandardGpuResources`` + ``index_cpu_to_gpu``), else CPU with a
logged warning; ``"cuda"`` asks for the GPU (CPU with a warning when there is none); ``"cpu"`` never
uses it. FAISS has no GPU HNSW: an ``hnsw`` index stays on CPU (logged). :attr:`DenseSegment.device`
says where searches run.

Segments. :class:`DenseIndex` reads an index of any shape as its segments (:class:`DenseSegment`): a build (or a
compacted generation, ``IndexFolder.one_build``) is one, searched as it is; a live generation's are searched in
place: the first segment's FAISS index as loaded alone (device included), each added segment's vectors mapped and
searched exactly, the hits merged by score.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from service.filecache import load_shared
from service.index.arrays import SegmentRows, by_segment, segment_starts
from service.index.folder import IndexFolder, IndexFormatError, Layout
from service.settings import DEVICES

log = logging.getLogger(__name__)

DENSE_FORMAT_VERSION = 1
INDEX_KINDS = ("flat", "hnsw", "ivf")
METRICS = ("inner_product", "cosine", "l2")
DEFAULT_HNSW_M = 32
DEFAULT_EF_CONSTRUCTION = 200
DEFAULT_EF_SEARCH = 128
DEFAULT_NPROBE = 16
EXACT_FILTER_MAX = 50_000
GPU_MAX_K = 2048  # largest k a FAISS GPU search takes


def _read_faiss(path: Path) -> Any:
    """A FAISS index file read whole (shared across reloads: service/filecache.py; searching does not change it, and
    its search parameters are set below from the key's ``nprobe``/``ef_search`` and the folder's settings alike)."""
    import faiss

    return faiss.read_index(str(path))


class DenseIndexError(ValueError):
    """A dense index that cannot be built or loaded (the message names the file and the problem)."""


def _faiss() -> Any:
    try:
        import faiss
    except ImportError as exc:  # pragma: no cover - faiss is a service dependency
        raise DenseIndexError("the dense stage needs faiss (pip install faiss-cpu, or faiss-gpu)") from exc
    return faiss


def _metric_code(metric: str) -> int:
    faiss = _faiss()
    if metric not in METRICS:
        raise DenseIndexError(f"unknown similarity {metric!r}; valid: {', '.join(METRICS)}")
    return int(faiss.METRIC_L2 if metric == "l2" else faiss.METRIC_INNER_PRODUCT)


def prepare_vectors(vectors: np.ndarray, metric: str) -> np.ndarray:
    """Vectors as FAISS and the scorer use them: float32, C-contiguous, L2-normalised for ``cosine``."""
    out = np.ascontiguousarray(vectors, dtype=np.float32)
    if out.ndim == 1:
        out = out[None, :]
    if metric == "cosine":
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        out = out / np.maximum(norms, 1e-12)
    return np.ascontiguousarray(out, dtype=np.float32)


EXACT_KEPT_BYTES = 16 << 20
"""The most memory an added segment's vectors take when kept as scored (float64): 5,461 vectors of 384 dimensions (a
week's add of 1 % to 100,000 documents takes 3 MB; a live index holds at most ``max_segments`` such segments). A larger
one is read from its memory map at each search, as the build's segment is."""


def _is_all(rows: np.ndarray) -> bool:
    """Whether ``rows`` (as many as the segment has) are 0, 1, ..., n - 1."""
    return bool(rows[0] == 0 and rows[-1] == len(rows) - 1 and np.all(np.diff(rows) == 1))


def ivf_nlist(n: int) -> int:
    """IVF lists for ``n`` vectors: ~4 sqrt(n), at most n / 39 (FAISS wants >= 39 training points a list)."""
    return max(1, min(int(4 * np.sqrt(max(n, 1))), n // 39))


def build_faiss_index(
    vectors: np.ndarray,
    kind: str = "flat",
    metric: str = "inner_product",
    *,
    hnsw_m: int = DEFAULT_HNSW_M,
    ef_construction: int = DEFAULT_EF_CONSTRUCTION,
    nlist: int | None = None,
    seed: int = 13,
) -> tuple[Any, dict[str, Any]]:
    """A CPU FAISS index over ``vectors`` (already :func:`prepare_vectors`-ed) and its description.

    ``flat``: ``IndexFlatIP`` / ``IndexFlatL2`` (exact). ``hnsw``: ``IndexHNSWFlat`` with ``hnsw_m`` links
    per node. ``ivf``: ``IndexIVFFlat`` with ``nlist`` lists (default :func:`ivf_nlist`) trained by k-means.
    """
    faiss = _faiss()
    if kind not in INDEX_KINDS:
        raise DenseIndexError(f"unknown dense index kind {kind!r}; valid: {', '.join(INDEX_KINDS)}")
    x = prepare_vectors(vectors, "inner_product" if metric == "cosine" else metric)  # already normalised
    n, dim = x.shape
    code = _metric_code(metric)
    params: dict[str, Any] = {}
    if kind == "flat":
        index = faiss.IndexFlatL2(dim) if metric == "l2" else faiss.IndexFlatIP(dim)
    elif kind == "hnsw":
        index = faiss.IndexHNSWFlat(dim, hnsw_m, code)
        index.hnsw.efConstruction = ef_construction
        params = {"M": hnsw_m, "efConstruction": ef_construction, "efSearch": DEFAULT_EF_SEARCH}
    else:
        lists = nlist if nlist is not None else ivf_nlist(n)
        if lists < 1 or lists > max(n, 1):
            raise DenseIndexError(f"ivf needs 1 <= nlist <= n_docs ({n}), got {lists}")
        quantizer = faiss.IndexFlatL2(dim) if metric == "l2" else faiss.IndexFlatIP(dim)
        index = faiss.IndexIVFFlat(quantizer, dim, lists, code)
        index.cp.seed = seed
        if n:
            index.train(x)
        params = {"nlist": lists, "nprobe": min(DEFAULT_NPROBE, lists)}
    if n:
        index.add(x)
    return index, {"kind": kind, "metric": metric, "dim": dim, "n": n, "params": params}


@dataclass(frozen=True)
class DenseHits:
    """Rows (doc-store rows, best first) and their exact scores."""

    rows: np.ndarray
    scores: np.ndarray

    def __len__(self) -> int:
        return len(self.rows)


def choose_faiss_device(requested: str, kind: str, num_gpus: int, has_gpu_api: bool) -> tuple[str, str | None]:
    """``("gpu"|"cpu", reason for CPU or None)``: where a FAISS index of ``kind`` should search."""
    if requested not in DEVICES:
        raise DenseIndexError(f"unknown device {requested!r}; valid: {', '.join(DEVICES)}")
    if requested == "cpu":
        return "cpu", None
    if not has_gpu_api or num_gpus <= 0:
        return "cpu", "faiss sees no GPU (faiss-cpu build or no CUDA device): dense search on CPU"
    if kind == "hnsw":
        return "cpu", "FAISS has no GPU HNSW index: dense search on CPU (build with --dense-index flat or ivf)"
    return "gpu", None


class DenseSegment:
    """One segment's dense stage: its stored vectors (exact scores) and, for a build's, its FAISS index (candidate
    search; an added segment has none: searched exactly). Rows are the segment's own."""

    def __init__(
        self,
        vectors: np.ndarray,
        index: Any,
        info: dict[str, Any],
        *,
        device: str = "cpu",
        exact_filter_max: int = EXACT_FILTER_MAX,
        notes: list[str] | None = None,
        gpu_resources: Any = None,
    ) -> None:
        self.vectors = vectors
        self.index = index
        self.info = dict(info)
        self.kind = str(info.get("kind", "flat"))
        self.metric = str(info.get("metric", "inner_product"))
        self.device = device
        self.exact_filter_max = exact_filter_max
        self.notes = list(notes or [])
        self._gpu_resources = gpu_resources  # keep alive as long as the GPU index
        self._rows = np.asarray(vectors)  # (a memory map's rows gathered without np.memmap's per-call overhead)
        self._exact: np.ndarray | None = None  # an added segment's vectors as scored, once (:meth:`_scored_rows`)
        if index is not None and int(index.ntotal) != len(vectors):
            raise DenseIndexError(f"FAISS index holds {index.ntotal} vectors, {Layout.DENSE_VECTORS} {len(vectors)}")

    # ------------------------------------------------------------------ scoring
    def __len__(self) -> int:
        return len(self.vectors)

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1])

    def _query(self, query_vec: np.ndarray) -> np.ndarray:
        q = np.asarray(query_vec, dtype=np.float32).reshape(-1)
        if q.shape[0] != self.dim:
            raise DenseIndexError(f"query vector has {q.shape[0]} dimensions, the index {self.dim}")
        return prepare_vectors(q, self.metric)[0]

    def scores(self, query_vec: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Exact similarity (higher is better) of the query to each row (float64)."""
        rows = np.asarray(rows, dtype=np.int64)
        if len(rows) == 0:
            return np.zeros(0, dtype=np.float64)
        q = self._query(query_vec)
        docs = self._scored_rows(rows)
        q64 = q.astype(np.float64)
        if self.metric == "l2":
            diff = docs - q64[None, :]
            return -np.einsum("ij,ij->i", diff, diff)
        return docs @ q64

    def _scored_rows(self, rows: np.ndarray) -> np.ndarray:
        """The vectors of ``rows`` as they are scored: normalised for the metric, in float64 (a float32 product's last
        bits depend on how many rows are multiplied at once, BLAS blocking, and a row's score must not depend on the
        rows beside it: a shard's, a segment's, a live index's candidates). Each row's values depend on that row
        alone, so the vectors of a segment searched exactly (an added one: no FAISS index, at most
        :data:`EXACT_KEPT_BYTES` as scored) are prepared once and their rows taken from that copy, the same values."""
        if self._exact is None and self.index is None and len(self) * self.dim * 8 <= EXACT_KEPT_BYTES:
            self._exact = prepare_vectors(self._rows, self.metric).astype(np.float64)
        if self._exact is not None:
            return self._exact if len(rows) == len(self._exact) and _is_all(rows) else self._exact[rows]
        if len(rows) < 2 or bool(np.all(np.diff(rows) > 0)):
            docs = self._rows[rows]
        else:  # fancy indexing of a memory map reads fastest in row order
            order = np.argsort(rows, kind="stable")
            docs = np.empty((len(rows), self.dim), dtype=np.float32)
            docs[order] = self._rows[rows[order]]
        return prepare_vectors(docs, self.metric).astype(np.float64)

    def _exact_top(self, q: np.ndarray, rows: np.ndarray, k: int) -> DenseHits:
        s = self.scores(q, rows)
        k = min(k, len(rows))
        if k == 0:
            return DenseHits(np.zeros(0, dtype=np.int64), np.zeros(0))
        part = np.argpartition(-s, k - 1)[:k] if k < len(s) else np.arange(len(s))
        order = part[np.lexsort((rows[part], -s[part]))]
        return DenseHits(rows[order].astype(np.int64), s[order])

    def _faiss_search(self, q: np.ndarray, k: int, params: Any = None) -> np.ndarray:
        x = q[None, :].astype(np.float32)
        if params is None:
            _, ids = self.index.search(x, k)
        else:
            _, ids = self.index.search(x, k, params=params)
        found = ids[0]
        return found[found >= 0].astype(np.int64)

    def _selector_params(self, mask: np.ndarray) -> Any:
        faiss = _faiss()
        bits = np.packbits(mask.astype(np.uint8), bitorder="little")
        sel = faiss.IDSelectorBitmap(len(mask), faiss.swig_ptr(bits))
        if self.kind == "hnsw":
            params = faiss.SearchParametersHNSW(sel=sel, efSearch=int(self.index.hnsw.efSearch))
        elif self.kind == "ivf":
            params = faiss.SearchParametersIVF(sel=sel, nprobe=int(self.index.nprobe))
        else:
            params = faiss.SearchParameters(sel=sel)
        params._keep = (bits, sel)  # the selector reads these buffers during the search
        return params

    def search(self, query_vec: np.ndarray, k: int, mask: np.ndarray | None = None) -> DenseHits:
        """The ``k`` best rows (exact scores, ties by row) among those allowed by ``mask`` (bool [n_docs])."""
        if k < 1:
            raise DenseIndexError(f"k must be >= 1, got {k}")
        n = len(self)
        q = self._query(query_vec)
        if n == 0:
            return DenseHits(np.zeros(0, dtype=np.int64), np.zeros(0))
        if mask is not None:
            mask = np.asarray(mask, dtype=bool)
            if mask.shape != (n,):
                raise DenseIndexError(f"filter mask has shape {mask.shape}, the index has {n} rows")
            allowed = int(mask.sum())
            if allowed == 0:
                return DenseHits(np.zeros(0, dtype=np.int64), np.zeros(0))
            if allowed < n:
                if self.index is None or allowed <= max(k, self.exact_filter_max):
                    return self._exact_top(q, np.flatnonzero(mask), k)
                if self.device == "cpu":
                    return self._rescore(q, self._faiss_search(q, k, self._selector_params(mask)), k)
                found = self._overfetch(lambda kk: self._faiss_search(q, kk), mask, k, GPU_MAX_K)
                if found is None:  # a very selective filter: exact scores of the allowed rows
                    return self._exact_top(q, np.flatnonzero(mask), k)
                return self._rescore(q, found, k)
        if self.index is None or (self.kind == "flat" and k >= n):  # no FAISS index: an added segment's vectors
            return self._exact_top(q, np.arange(n, dtype=np.int64), k)
        if self.device == "cuda" and k > GPU_MAX_K:
            return self._exact_top(q, np.arange(n, dtype=np.int64), k)
        return self._rescore(q, self._faiss_search(q, min(k, n)), k)

    @staticmethod
    def _overfetch(search: Callable[[int], np.ndarray], mask: np.ndarray, k: int, max_fetch: int) -> np.ndarray | None:
        """Allowed rows among ever larger unfiltered searches; None when ``k`` need more than ``max_fetch``."""
        n = len(mask)
        fetch = min(n, 4 * k, max_fetch)
        while True:
            found = search(fetch)
            keep = found[mask[found]]
            if len(keep) >= k or fetch >= n:
                return keep
            if fetch >= max_fetch:
                return None
            fetch = min(n, fetch * 4, max_fetch)

    def _rescore(self, q: np.ndarray, rows: np.ndarray, k: int) -> DenseHits:
        if len(rows) == 0:
            return DenseHits(np.zeros(0, dtype=np.int64), np.zeros(0))
        rows = np.unique(rows)
        return self._exact_top(q, rows, k)

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "metric": self.metric, "dim": self.dim, "documents": len(self),
                "device": self.device, "params": self.info.get("params", {})}


class DenseIndex:
    """The dense stage of an index, whatever its shape: its segments (:class:`DenseSegment`; a build is one), rows
    the generation's (a segment's rows shifted by its first row). One segment is searched as it is; several each
    search their rows (the first with its FAISS index, on the device it was loaded for; the added ones exactly, their
    vectors mapped) and the hits are merged by exact score, ties by row: for ``flat`` indexes the same rows and scores
    as one index of every vector. Nothing is copied at open; deleted rows are excluded by the filter ``mask``, as in
    one index."""

    def __init__(self, segments: list[DenseSegment]) -> None:
        if not segments:
            raise DenseIndexError("a dense index needs at least one segment")
        self.segments = segments
        first = segments[0]
        self.vectors = first.vectors if len(segments) == 1 else SegmentRows([p.vectors for p in segments])
        self.starts = segment_starts([len(p) for p in segments])  # each segment's first row, and the rows last
        self.info = dict(first.info) if len(segments) == 1 else {**first.info, "segments": len(segments)}
        self.kind = first.kind
        self.metric = first.metric
        self.device = first.device
        self.notes = first.notes

    @property
    def index(self) -> Any:
        """The first segment's FAISS index (a build's; the added segments have none)."""
        return self.segments[0].index

    # ------------------------------------------------------------------ loading
    @classmethod
    def _load_live(cls, folder: IndexFolder, *, device: str, exact: bool, nprobe: int | None,
                   ef_search: int | None) -> DenseIndex:
        """A generation of several segments, searched in place: the first segment's FAISS index (a build's or a
        compaction's) as it is loaded alone, the vectors of the others (stored, without an index) mapped and searched
        exactly."""
        first, *rest = folder.segments
        base = cls._load_build(IndexFolder(first.folder.root, first.folder.meta), device=device, exact=exact,
                               nprobe=nprobe, ef_search=ef_search, mmap=True)
        parts: list[DenseSegment] = [base]
        for seg in rest:
            try:
                comp = seg.folder.component("dense", DENSE_FORMAT_VERSION, fix="add the segment again")
                vecs = np.load(seg.folder.path(comp.get("vectors", Layout.DENSE_VECTORS)), mmap_mode="r")
            except (IndexFormatError, OSError, ValueError) as exc:
                raise DenseIndexError(f"segment {seg.folder.root}: dense vectors unusable ({exc})") from exc
            if vecs.dtype != np.float32 or vecs.ndim != 2 or vecs.shape != (seg.n_rows, base.dim):
                raise DenseIndexError(f"segment {seg.folder.root}: dense vectors of shape {list(vecs.shape)}, expected "
                                      f"[{seg.n_rows}, {base.dim}]")
            parts.append(DenseSegment(vecs, None, {**base.info, "kind": "flat", "params": {}}))
        return cls(parts)

    @classmethod
    def load(
        cls,
        folder: IndexFolder | str | Path,
        *,
        device: str = "auto",
        exact: bool = False,
        nprobe: int | None = None,
        ef_search: int | None = None,
        mmap: bool = True,
    ) -> DenseIndex:
        """Load ``dense/`` of an opened index folder (a path is opened without re-hashing its files), whatever its
        shape: a build (or a compacted generation) is one segment, a live generation its segments.

        ``exact=True`` ignores an approximate index and searches a flat one built from the vectors.
        ``nprobe`` (ivf) and ``ef_search`` (hnsw) override the build's search parameters.
        """
        try:
            if not isinstance(folder, IndexFolder):
                folder = IndexFolder.open(folder, verify=False)
        except IndexFormatError as exc:
            raise DenseIndexError(str(exc)) from exc
        whole = folder.one_build
        if whole is None:
            return cls._load_live(folder, device=device, exact=exact, nprobe=nprobe, ef_search=ef_search)
        return cls([cls._load_build(whole, device=device, exact=exact, nprobe=nprobe, ef_search=ef_search,
                                    mmap=mmap)])

    @staticmethod
    def _load_build(folder: IndexFolder, *, device: str, exact: bool, nprobe: int | None, ef_search: int | None,
                    mmap: bool) -> DenseSegment:
        """A build's segment (or the one segment of a compacted generation): its FAISS index, on any device."""
        faiss = _faiss()
        try:
            comp = folder.component("dense", DENSE_FORMAT_VERSION, fix="rebuild with `priorart build --models`")
        except IndexFormatError as exc:
            raise DenseIndexError(str(exc)) from exc
        vec_path = folder.path(comp.get("vectors", Layout.DENSE_VECTORS))
        try:
            vectors = np.load(vec_path, mmap_mode="r" if mmap else None)
        except (OSError, ValueError) as exc:
            raise DenseIndexError(f"{vec_path}: unreadable ({exc})") from exc
        if vectors.dtype != np.float32 or vectors.ndim != 2 or vectors.shape[1] != comp.get("dim"):
            raise DenseIndexError(
                f"{vec_path}: expected float32 [n, {comp.get('dim')}], got {vectors.dtype} {list(vectors.shape)}"
            )
        info = {"kind": comp.get("kind", "flat"), "metric": comp.get("metric", "inner_product"),
                "dim": int(comp["dim"]), "params": dict(comp.get("params", {}))}
        notes: list[str] = []
        if exact and info["kind"] != "flat":
            index, _ = build_faiss_index(np.asarray(vectors), "flat", info["metric"])
            info = {**info, "kind": "flat", "params": {}, "built_at_load": True}
        else:
            faiss_path = folder.path(comp.get("index", Layout.DENSE_FAISS))
            try:  # the index this process read already while the file is unchanged: a reload reads no vectors again
                index = load_shared(faiss_path, _read_faiss, nprobe, ef_search)
            except RuntimeError as exc:
                raise DenseIndexError(f"{faiss_path}: not a readable FAISS index ({exc})") from exc
        params = info["params"]
        if info["kind"] == "ivf":
            probe = nprobe if nprobe is not None else int(params.get("nprobe", DEFAULT_NPROBE))
            index.nprobe = max(1, probe)
            params["nprobe"] = int(index.nprobe)
        elif info["kind"] == "hnsw":
            ef = ef_search if ef_search is not None else int(params.get("efSearch", DEFAULT_EF_SEARCH))
            index.hnsw.efSearch = max(1, ef)
            params["efSearch"] = int(index.hnsw.efSearch)
        where, reason = choose_faiss_device(
            device, info["kind"], int(faiss.get_num_gpus()), hasattr(faiss, "StandardGpuResources")
        )
        resources = None
        if where == "gpu":
            resources = faiss.StandardGpuResources()
            index = faiss.index_cpu_to_gpu(resources, 0, index)
            if info["kind"] == "ivf" and hasattr(index, "nprobe"):
                index.nprobe = params["nprobe"]
            log.info("dense index (%s, %d vectors) on GPU 0", info["kind"], index.ntotal)
        else:
            if reason and device == "cuda":
                log.warning(reason)
                notes.append(f"device cuda asked for, but {reason}")
            elif reason and device != "cpu":  # auto without a GPU: CPU as asked (the pipeline's log names it)
                log.debug(reason)
            log.debug("dense index (%s, %d vectors) on CPU", info["kind"], index.ntotal)
        return DenseSegment(vectors, index, info, device="cuda" if where == "gpu" else "cpu", notes=notes,
                            gpu_resources=resources)

    # ------------------------------------------------------------------ scoring
    def __len__(self) -> int:
        return int(self.starts[-1])

    @property
    def dim(self) -> int:
        return self.segments[0].dim

    def scores(self, query_vec: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Exact similarity (higher is better) of the query to each row (float64), each scored by its segment."""
        if len(self.segments) == 1:
            return self.segments[0].scores(query_vec, rows)
        rows = np.asarray(rows, dtype=np.int64)
        out = np.zeros(len(rows), dtype=np.float64)
        for i, here, local in by_segment(self.starts, rows):
            out[here] = self.segments[i].scores(query_vec, local)
        return out

    def search(self, query_vec: np.ndarray, k: int, mask: np.ndarray | None = None) -> DenseHits:
        """The ``k`` best rows (exact scores, ties by row) among those allowed by ``mask`` (bool [n_docs]): each
        segment's best ``k``, merged."""
        if len(self.segments) == 1:
            return self.segments[0].search(query_vec, k, mask)
        if k < 1:
            raise DenseIndexError(f"k must be >= 1, got {k}")
        if mask is not None:
            mask = np.asarray(mask, dtype=bool)
            if mask.shape != (len(self),):
                raise DenseIndexError(f"filter mask has shape {mask.shape}, the index has {len(self)} rows")
        rows, scores = [], []
        for part, lo, hi in zip(self.segments, self.starts[:-1].tolist(), self.starts[1:].tolist(), strict=True):
            if hi == lo or (mask is not None and not mask[lo:hi].any()):
                continue
            hits = part.search(query_vec, k, None if mask is None else mask[lo:hi])
            rows.append(hits.rows + lo)
            scores.append(hits.scores)
        if not rows:
            return DenseHits(np.zeros(0, dtype=np.int64), np.zeros(0))
        r, sc = np.concatenate(rows), np.concatenate(scores)
        order = np.lexsort((r, -sc))[:k]
        return DenseHits(r[order].astype(np.int64), sc[order])

    def describe(self) -> dict[str, Any]:
        out = {"kind": self.kind, "metric": self.metric, "dim": self.dim, "documents": len(self),
               "device": self.device, "params": self.info.get("params", {})}
        return out if len(self.segments) == 1 else {**out, "segments": len(self.segments)}
