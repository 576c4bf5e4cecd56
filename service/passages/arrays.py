"""The arrays of a passage index folder, memory-mapped, with their shape checks and lookups.

:class:`PassageArrays` is what the ranker reads (:mod:`service.passages.ranker`); the index folder
entry point with loading, building in memory and ranking is :class:`service.passages.index.PassageIndex`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any, Self

import numpy as np
import numpy.typing as npt

import service.passages.format as fmt
from service.index.folder import IndexFormatError
from service.passages.kernels import warm as warm_kernels
from service.passages.tree import lang_mask
from service.text.analysis import SUPPORTED_LANGS


class PassageIndexError(IndexFormatError):
    """A passage index folder that cannot be used (missing files, other format version, inconsistent)."""


class PassageIndexMissingError(PassageIndexError):
    """The index folder has no passage index (built before passages were indexed at build time)."""


class Blob:
    """Strings stored as one UTF-8 blob plus ``n + 1`` byte offsets (memory-mapped)."""

    def __init__(self, data: npt.NDArray[np.uint8], offsets: npt.NDArray[np.int64]) -> None:
        self.data = data
        self.offsets = offsets

    def __len__(self) -> int:
        return int(self.offsets.shape[0]) - 1

    def __getitem__(self, i: int) -> bytes:  # bytes, so that bisect compares keys byte-wise
        return self.data[int(self.offsets[i]): int(self.offsets[i + 1])].tobytes()

    def text(self, i: int) -> str:
        return self[i].decode("utf-8")


class Vocabulary(Blob):
    """Sorted ``lang \\0 term`` keys; the joint term id is the rank (binary search, recent lookups cached)."""

    CACHE = 1 << 16  # lookups remembered (bounded; the vocabulary itself stays memory-mapped)

    def __init__(self, data: npt.NDArray[np.uint8], offsets: npt.NDArray[np.int64]) -> None:
        super().__init__(data, offsets)
        self._bytes = np.ascontiguousarray(data).data  # memoryviews: plain ints and bytes, no numpy scalars
        self._offsets = np.ascontiguousarray(offsets, dtype=np.int64).data
        self._cache: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()

    def lookup_all(self, lang: str, terms: Collection[str]) -> list[int]:
        """:meth:`lookup` of each of ``terms`` (one call for a query's terms: most are remembered)."""
        get = self._cache.get
        found = [get((lang, term), -2) for term in terms]
        if -2 in found:
            found = [self.lookup(lang, term) if j == -2 else j for term, j in zip(terms, found, strict=True)]
        return found

    def lookup(self, lang: str, term: str) -> int:
        """Joint id of ``term`` in ``lang``, ``-1`` when absent."""
        key = (lang, term)
        found = self._cache.get(key)
        if found is not None:
            return found
        want = f"{lang}\0{term}".encode()
        data, off = self._bytes, self._offsets
        lo, hi = 0, len(off) - 1
        while lo < hi:  # bisect_left over the sorted keys
            mid = (lo + hi) // 2
            if data[off[mid]: off[mid + 1]].tobytes() < want:
                lo = mid + 1
            else:
                hi = mid
        found = lo if lo < len(off) - 1 and data[off[lo]: off[lo + 1]].tobytes() == want else -1
        with self._lock:
            if len(self._cache) >= self.CACHE:
                self._cache.clear()
            self._cache[key] = found
        return found


def _load_array(path: Path, mmap: bool) -> npt.NDArray[Any]:
    try:
        arr = np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise PassageIndexError(f"{path} is unreadable: {exc}; rebuild the index with `priorart build`") from exc
    return arr.view(np.ndarray) if isinstance(arr, np.memmap) else arr


def _load_blob(folder: Path, name: str, mmap: bool) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]]:
    path = folder / f"{name}.bin"
    try:
        if path.stat().st_size == 0:
            data = np.zeros(0, dtype=np.uint8)
        elif mmap:
            data = np.memmap(path, dtype=np.uint8, mode="r").view(np.ndarray)
        else:
            data = np.fromfile(path, dtype=np.uint8)
    except (OSError, ValueError) as exc:
        raise PassageIndexError(f"{path} is unreadable: {exc}; rebuild the index with `priorart build`") from exc
    offsets = _load_array(folder / f"{name}.npy", mmap)
    if offsets.ndim != 1 or offsets.size < 1 or int(offsets[-1]) != data.size:
        raise PassageIndexError(f"{path}: offsets do not match the blob ({data.size} bytes); rebuild the index")
    return data, offsets


def check_rows(rows: npt.ArrayLike, n_docs: int, doc_id: Callable[[int], str]) -> npt.NDArray[np.int64]:
    """Candidate ``rows`` of a passage index of ``n_docs`` documents as an int64 array; ``ValueError`` for a row out
    of range or given twice (named by ``doc_id``)."""
    r = np.asarray(rows, dtype=np.int64).reshape(-1)
    if r.size and (int(r.min()) < 0 or int(r.max()) >= n_docs):
        bad = int(r[(r < 0) | (r >= n_docs)][0])
        raise ValueError(f"row {bad} is not in the passage index ({n_docs} documents)")
    if r.size > 1:
        s = np.sort(r)
        dup = s[1:][s[1:] == s[:-1]]
        if dup.size:
            raise ValueError(f"document {doc_id(int(dup[0]))} appears twice among the candidates")
    return r


class PassageArrays:
    """Passage trees of every document of an index, as flat arrays (see :mod:`service.passages.format`)."""

    def __init__(self, folder: Path, arrays: Mapping[str, npt.NDArray[Any]],
                 blobs: Mapping[str, tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]]],
                 info: Mapping[str, Any] | None = None) -> None:
        warm_kernels()  # compiled (or read from numba's cache) now, not at the first query
        self.folder = folder
        self.info = dict(info or {})
        a = arrays
        self.docs: npt.NDArray[np.int64] = a[fmt.DOCS]
        self.doc_meta: npt.NDArray[np.uint8] = a[fmt.DOC_META]
        self.unit_tag = a[fmt.UNIT_TAG]
        self.unit_len = a[fmt.UNIT_LEN]
        self.unit_sec = a[fmt.UNIT_SEC]
        self.sec_parent = a[fmt.SEC_PARENT]
        self.sec_depth = a[fmt.SEC_DEPTH]
        self.sec_kind = a[fmt.SEC_KIND]
        self.sec_end = a[fmt.SEC_END]
        self.sec_unit = a[fmt.SEC_UNIT]
        self.sec_head_len = a[fmt.SEC_HEAD_LEN]
        self.term_id = a[fmt.TERM_ID]
        self.term_end = a[fmt.TERM_END]
        self.post_unit = a[fmt.POST_UNIT]
        self.post_count = a[fmt.POST_COUNT]
        self.vocab_cf = a[fmt.VOCAB_CF]
        self.lang_tokens: npt.NDArray[np.int64] = a[fmt.LANG_TOKENS]
        self.doc_ids = Blob(*blobs[fmt.DOC_IDS])
        self.texts = Blob(*blobs[fmt.TEXT])
        self.pids = Blob(*blobs[fmt.PID])
        self.vocab = Vocabulary(*blobs[fmt.VOCAB])
        self._check()

    def _check(self) -> None:
        n = self.n_docs
        totals = [int(x) for x in self.docs[-1]] if self.docs.ndim == 2 and self.docs.shape[0] else []
        where = self.folder
        if self.docs.ndim != 2 or self.docs.shape[1] != fmt.DOC_COLUMNS or len(totals) != fmt.DOC_COLUMNS:
            raise PassageIndexError(f"{where}/{fmt.DOCS}: expected shape (n + 1, {fmt.DOC_COLUMNS}), "
                                    f"got {self.docs.shape}")
        expect = {
            fmt.DOC_META: (self.doc_meta.shape, (n, 4)), fmt.UNIT_TAG: (self.unit_tag.shape, (totals[0],)),
            fmt.UNIT_LEN: (self.unit_len.shape, (totals[0],)), fmt.UNIT_SEC: (self.unit_sec.shape, (totals[0],)),
            fmt.SEC_PARENT: (self.sec_parent.shape, (totals[1],)), fmt.SEC_DEPTH: (self.sec_depth.shape, (totals[1],)),
            fmt.SEC_KIND: (self.sec_kind.shape, (totals[1],)), fmt.SEC_END: (self.sec_end.shape, (totals[1],)),
            fmt.SEC_UNIT: (self.sec_unit.shape, (totals[1],)), fmt.SEC_HEAD_LEN: (self.sec_head_len.shape,
                                                                                   (totals[1],)),
            fmt.TERM_ID: (self.term_id.shape, (totals[2],)), fmt.TERM_END: (self.term_end.shape, (totals[2],)),
            fmt.POST_UNIT: (self.post_unit.shape, (totals[3],)), fmt.POST_COUNT: (self.post_count.shape,
                                                                                  (totals[3],)),
            f"{fmt.DOC_IDS}.npy": ((len(self.doc_ids),), (n,)), f"{fmt.TEXT}.npy": ((len(self.texts),),
                                                                                  (totals[0],)),
            f"{fmt.PID}.npy": ((len(self.pids),), (totals[0],)),
            fmt.VOCAB_CF: (self.vocab_cf.shape, (len(self.vocab),)),
            fmt.LANG_TOKENS: (self.lang_tokens.shape, (len(SUPPORTED_LANGS),)),
        }
        for name, (got, want) in expect.items():
            if tuple(got) != tuple(want):
                raise PassageIndexError(f"{where}/{name}: shape {tuple(got)}, expected {tuple(want)}; the passage "
                                        "index is inconsistent, rebuild the index with `priorart build`")

    @classmethod
    def open(cls, folder: str | Path, *, mmap: bool = True, info: Mapping[str, Any] | None = None) -> Self:
        """Map a passage index folder itself (no ``meta.json`` check)."""
        folder = Path(folder)
        if not folder.is_dir():
            raise PassageIndexError(f"passage index folder {folder} is missing; rebuild with `priorart build`")
        arrays = {name: _load_array(folder / name, mmap) for name in (*fmt.ARRAYS, *fmt.COLLECTION)}
        blobs = {name: _load_blob(folder, name, mmap) for name in fmt.BLOBS}
        return cls(folder, arrays, blobs, info)
    # ------------------------------------------------------------------ lookups
    @property
    def n_docs(self) -> int:
        return int(self.docs.shape[0]) - 1

    def __len__(self) -> int:
        return self.n_docs

    def describe(self) -> dict[str, Any]:
        """Counts and sizes (for /health and logs)."""
        keys = ("format", "version", "n_docs", "n_passages", "n_units", "n_terms", "bytes", "bytes_per_doc")
        return {k: self.info[k] for k in keys if k in self.info} or {"n_docs": self.n_docs}

    def doc_id(self, row: int) -> str:
        return self.doc_ids.text(row)

    def check_rows(self, rows: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """``rows`` as an int64 array; ``ValueError`` for a row out of range or given twice."""
        return check_rows(rows, self.n_docs, self.doc_id)

    def readable(self, rows: npt.ArrayLike, langs: Collection[str]) -> npt.NDArray[np.bool_]:
        """Which of ``rows`` have any text (title, abstract, claims, description) in one of ``langs``."""
        r = np.asarray(rows, dtype=np.int64).reshape(-1)
        return np.asarray((self.doc_meta[r, 0] & lang_mask(langs)) != 0, dtype=bool)
