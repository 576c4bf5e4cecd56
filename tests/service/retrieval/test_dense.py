"""service.retrieval.dense: FAISS flat/HNSW/IVF search against numpy brute force, filters, device choice."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

faiss = pytest.importorskip("faiss")

from service.index.folder import Layout, write_meta  # noqa: E402
from service.retrieval import dense as dense_mod  # noqa: E402
from service.retrieval.dense import (  # noqa: E402
    DENSE_FORMAT_VERSION,
    DenseIndex,
    DenseIndexError,
    DenseSegment,
    build_faiss_index,
    choose_faiss_device,
    prepare_vectors,
)

SETTINGS = {"fields": ["claims"], "index_langs": ["en"], "scoring": "bm25", "k1": 1.2, "b": 0.75, "epsilon": 0.25}


def _vectors(n: int = 600, dim: int = 16, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    v = rng.normal(size=(n, dim)).astype(np.float32)
    return v / (np.linalg.norm(v, axis=1, keepdims=True) + 1.0)  # like the dual encoder: |v| / (|v| + l)


def _write(root: Path, vectors: np.ndarray, kind: str = "flat", metric: str = "inner_product") -> Path:
    (root / "dense").mkdir(parents=True, exist_ok=True)
    np.save(root / Layout.DENSE_VECTORS, vectors)
    index, info = build_faiss_index(prepare_vectors(vectors, metric), kind, metric)
    faiss.write_index(index, str(root / Layout.DENSE_FAISS))
    comp = {"version": DENSE_FORMAT_VERSION, "vectors": Layout.DENSE_VECTORS, "index": Layout.DENSE_FAISS,
            "dim": vectors.shape[1],
            "kind": kind, "metric": metric, "params": info["params"]}
    write_meta(root, SETTINGS, {"dense": comp})
    return root


def _brute(vectors: np.ndarray, q: np.ndarray, k: int, allowed: np.ndarray | None = None) -> list[int]:
    s = vectors.astype(np.float64) @ q.astype(np.float64)
    rows = np.arange(len(vectors)) if allowed is None else np.flatnonzero(allowed)
    order = rows[np.lexsort((rows, -s[rows]))]
    return order[:k].tolist()


def test_flat_search_equals_brute_force(tmp_path: Path) -> None:
    v = _vectors()
    idx = DenseIndex.load(_write(tmp_path, v), device="cpu")
    assert idx.device == "cpu" and idx.kind == "flat" and len(idx) == len(v)
    rng = np.random.default_rng(1)
    for _ in range(5):
        q = np.asarray(rng.normal(size=(v.shape[1],)), dtype=np.float32)
        hits = idx.search(q, 25)
        assert hits.rows.tolist() == _brute(v, q, 25)
        np.testing.assert_allclose(hits.scores, v[hits.rows] @ q, rtol=1e-5, atol=1e-6)
        assert np.all(np.diff(hits.scores) <= 0)
    # k beyond the collection: every row, still ordered
    assert sorted(idx.search(q, 10_000).rows.tolist()) == list(range(len(v)))


def test_scores_of_any_rows_match_search(tmp_path: Path) -> None:
    v = _vectors()
    idx = DenseIndex.load(_write(tmp_path, v), device="cpu")
    q = np.asarray(np.random.default_rng(2).normal(size=(v.shape[1],)), dtype=np.float32)
    rows = np.array([500, 3, 77, 3, 250])  # unsorted, repeated
    np.testing.assert_allclose(idx.scores(q, rows), v[rows].astype(np.float64) @ q, rtol=1e-5, atol=1e-6)
    hits = idx.search(q, 10)
    np.testing.assert_allclose(idx.scores(q, hits.rows), hits.scores, rtol=1e-6)
    assert idx.scores(q, np.zeros(0, dtype=np.int64)).shape == (0,)


@pytest.mark.parametrize("path", ["exact", "selector", "overfetch"])
def test_filters_are_honoured(tmp_path: Path, path: str) -> None:
    v = _vectors()
    idx = DenseIndex.load(_write(tmp_path, v), device="cpu")
    rng = np.random.default_rng(3)
    mask = rng.random(len(v)) < 0.3
    if path != "exact":
        idx.exact_filter_max = 0  # force FAISS with a selector (CPU) or over-fetching (GPU path)
    if path == "overfetch":
        idx.device = "cuda"  # GPU indexes take no selector: the search over-fetches and filters
    for _ in range(3):
        q = np.asarray(rng.normal(size=(v.shape[1],)), dtype=np.float32)
        hits = idx.search(q, 20, mask)
        assert hits.rows.tolist() == _brute(v, q, 20, mask)
        assert mask[hits.rows].all()
    assert len(idx.search(q, 5, np.zeros(len(v), dtype=bool))) == 0
    with pytest.raises(DenseIndexError, match="mask has shape"):
        idx.search(q, 5, np.ones(3, dtype=bool))


def test_segments_searched_in_place_equal_one_flat_index(tmp_path: Path) -> None:
    """A live generation's dense stage: the build's segment (its FAISS index) and two added segments (vectors only,
    searched exactly), merged by score: the same rows and scores as one flat index of every vector, with and without
    a filter; ``scores`` and ``vectors[rows]`` read each row from its segment."""
    v = _vectors(700)
    base = DenseIndex.load(_write(tmp_path / "base", v[:500]), device="cpu")
    assert [len(p) for p in base.segments] == [500] and "segments" not in base.describe()  # a build: one segment
    added = [DenseSegment(v[lo:hi], None, {**base.info, "kind": "flat", "params": {}}) for lo, hi in ((500, 620),
                                                                                                    (620, 700))]
    seg = DenseIndex([*base.segments, *added])
    one = DenseIndex.load(_write(tmp_path / "one", v), device="cpu")
    assert len(seg) == 700 and seg.describe()["segments"] == 3
    rng = np.random.default_rng(7)
    mask = rng.random(len(v)) < 0.4
    for _ in range(4):
        q = np.asarray(rng.normal(size=(v.shape[1],)), dtype=np.float32)
        for k, m in ((25, None), (25, mask), (1000, None), (10, mask & (np.arange(700) >= 600))):
            got, want = seg.search(q, k, m), one.search(q, k, m)
            assert got.rows.tolist() == want.rows.tolist() == _brute(v, q, k, m)
            np.testing.assert_allclose(got.scores, want.scores, rtol=1e-6)
        rows = np.array([650, 3, 510, 3, 699, 499])
        np.testing.assert_allclose(seg.scores(q, rows), one.scores(q, rows), rtol=1e-6)
    np.testing.assert_array_equal(seg.vectors[np.array([[5, 600], [699, 0]])], v[np.array([[5, 600], [699, 0]])])
    np.testing.assert_array_equal(np.asarray(seg.vectors), v)
    assert len(seg.search(q, 5, np.zeros(700, dtype=bool))) == 0
    with pytest.raises(DenseIndexError, match="mask has shape"):
        seg.search(q, 5, np.ones(3, dtype=bool))


@pytest.mark.parametrize("kind", ["hnsw", "ivf"])
def test_approximate_indexes_find_the_exact_neighbours(tmp_path: Path, kind: str) -> None:
    v = _vectors(n=2000, dim=16, seed=4)
    idx = DenseIndex.load(_write(tmp_path, v, kind=kind), device="cpu")
    assert idx.kind == kind
    rng = np.random.default_rng(5)
    recall = []
    for _ in range(20):
        q = np.asarray(rng.normal(size=(v.shape[1],)), dtype=np.float32)
        got = set(idx.search(q, 10).rows.tolist())
        recall.append(len(got & set(_brute(v, q, 10))) / 10)
    assert np.mean(recall) >= 0.9, recall
    mask = rng.random(len(v)) < 0.5
    idx.exact_filter_max = 0
    hits = idx.search(q, 10, mask)
    assert len(hits) == 10 and mask[hits.rows].all()
    # the search parameters are settable at load
    tuned = DenseIndex.load(tmp_path, device="cpu", nprobe=3, ef_search=7)
    key, want = ("nprobe", 3) if kind == "ivf" else ("efSearch", 7)
    assert tuned.info["params"][key] == want
    # a second load of the unchanged file (a reload) shares the FAISS index read by the first; other search
    # parameters get their own, and the first keeps its own parameters
    assert DenseIndex.load(tmp_path, device="cpu").index is idx.index and tuned.index is not idx.index
    assert idx.info["params"][key] != want and DenseIndex.load(tmp_path, device="cpu").info["params"][key] != want
    exact = DenseIndex.load(tmp_path, device="cpu", exact=True)
    assert exact.kind == "flat" and exact.search(q, 10).rows.tolist() == _brute(v, q, 10)


@pytest.mark.parametrize("metric", ["cosine", "l2"])
def test_other_similarities(tmp_path: Path, metric: str) -> None:
    v = _vectors(seed=6) * np.random.default_rng(7).uniform(0.5, 3, size=(600, 1)).astype(np.float32)
    idx = DenseIndex.load(_write(tmp_path, v, metric=metric), device="cpu")
    q = np.asarray(np.random.default_rng(8).normal(size=(v.shape[1],)), dtype=np.float32)
    if metric == "cosine":
        want = (v / np.linalg.norm(v, axis=1, keepdims=True)) @ (q / np.linalg.norm(q))
    else:
        want = -((v - q) ** 2).sum(axis=1)
    hits = idx.search(q, 15)
    expected = np.argsort(-want, kind="stable")[:15]
    assert hits.rows.tolist() == expected.tolist()
    np.testing.assert_allclose(hits.scores, want[expected], rtol=1e-4, atol=1e-4)


def test_device_choice() -> None:
    assert choose_faiss_device("cpu", "flat", 4, True) == ("cpu", None)
    where, why = choose_faiss_device("auto", "flat", 0, True)
    assert where == "cpu" and why is not None and "no GPU" in why
    assert choose_faiss_device("auto", "flat", 1, False)[0] == "cpu"  # faiss-cpu build
    assert choose_faiss_device("auto", "ivf", 1, True) == ("gpu", None)
    assert choose_faiss_device("cuda", "flat", 2, True) == ("gpu", None)
    where, why = choose_faiss_device("cuda", "hnsw", 2, True)
    assert where == "cpu" and why is not None and "HNSW" in why
    with pytest.raises(DenseIndexError, match="unknown device"):
        choose_faiss_device("tpu", "flat", 0, True)


def test_gpu_path_is_taken_when_faiss_sees_a_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    v = _vectors()
    _write(tmp_path, v)
    calls: list[Any] = []

    class FakeResources:
        pass

    def to_gpu(res: Any, device: int, index: Any) -> Any:
        calls.append((type(res).__name__, device, index.ntotal))
        return index  # stands in for the GPU copy: same search API

    monkeypatch.setattr(faiss, "get_num_gpus", lambda: 1)
    monkeypatch.setattr(faiss, "StandardGpuResources", FakeResources, raising=False)
    monkeypatch.setattr(faiss, "index_cpu_to_gpu", to_gpu, raising=False)
    idx = DenseIndex.load(tmp_path, device="auto")
    assert idx.device == "cuda" and calls == [("FakeResources", 0, len(v))]
    q = np.ones(v.shape[1], dtype=np.float32)
    mask = np.arange(len(v)) % 3 == 0
    idx.exact_filter_max = 0
    assert idx.search(q, 10, mask).rows.tolist() == _brute(v, q, 10, mask)  # over-fetch path
    assert DenseIndex.load(tmp_path, device="cpu").device == "cpu"  # cpu never takes the GPU
    assert len(calls) == 1


def test_cuda_without_gpu_falls_back_with_a_note(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _write(tmp_path, _vectors())
    monkeypatch.setattr(faiss, "get_num_gpus", lambda: 0)
    idx = DenseIndex.load(tmp_path, device="cuda")
    assert idx.device == "cpu" and any("cuda asked for" in n for n in idx.notes)


def test_load_errors(tmp_path: Path) -> None:
    with pytest.raises(DenseIndexError, match="meta.json is missing"):
        DenseIndex.load(tmp_path)
    write_meta(tmp_path, SETTINGS, {})
    with pytest.raises(DenseIndexError, match="no 'dense' component"):
        DenseIndex.load(tmp_path)
    root = _write(tmp_path, _vectors())
    meta = json.loads((root / "meta.json").read_text())
    meta["components"]["dense"]["version"] = 99
    (root / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(DenseIndexError, match="dense format version 99"):
        DenseIndex.load(root)
    meta["components"]["dense"].update(version=DENSE_FORMAT_VERSION, dim=5)
    (root / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(DenseIndexError, match=r"vectors\.npy: expected float32 \[n, 5\]"):
        DenseIndex.load(root)
    with pytest.raises(DenseIndexError, match="unknown dense index kind"):
        build_faiss_index(_vectors(), "lsh")
    assert dense_mod.ivf_nlist(100) == 2 and dense_mod.ivf_nlist(1_000_000) == 4000
