"""Arrays as an index folder gives them: memory-mapped files are read-only, arrays built or joined in memory are not.

The compiled kernels (service/retrieval/kernels.py, service/passages/kernels.py) are compiled for both kinds; their
warm-up calls them on a :func:`readonly` view as well as on the array itself.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np


def readonly(a: np.ndarray) -> np.ndarray:
    """A read-only view of ``a`` (memory-mapped arrays are read-only: the kernels are compiled for both kinds)."""
    a = a.view()
    a.flags.writeable = False
    return a


def segment_starts(lengths: Sequence[int]) -> np.ndarray:
    """Each segment's first generation row, and the number of rows last (int64, ``len(lengths) + 1``)."""
    return np.cumsum([0, *lengths]).astype(np.int64)


def locate(starts: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each generation row's segment and its row there (``starts``: :func:`segment_starts`)."""
    seg = np.searchsorted(starts, rows, side="right") - 1
    return seg, rows - starts[seg]


def by_segment(starts: np.ndarray, rows: np.ndarray) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """For each segment holding some of ``rows``: the segment, the positions in ``rows`` of its rows, and those rows
    in the segment (the gather every segmented component does)."""
    seg, local = locate(starts, rows)
    for i in np.unique(seg).tolist():
        here = np.flatnonzero(seg == i)
        yield i, here, local[here]


class SegmentRows:
    """Per-row arrays of a live generation's segments (each mapped where it lies) read by generation row:
    ``rows[r]`` gathers each row from the segment that holds it (row ``r - start`` there), in the order asked;
    ``np.asarray`` joins them (a compaction's copy; nothing else needs one)."""

    def __init__(self, arrays: Sequence[np.ndarray]) -> None:
        if not arrays or len({a.shape[1:] for a in arrays}) != 1:
            raise ValueError("segment arrays need one shape per row, and at least one segment")
        self.arrays = list(arrays)
        self.starts = segment_starts([len(a) for a in arrays])
        self.shape: tuple[int, ...] = (int(self.starts[-1]), *arrays[0].shape[1:])
        self.dtype = np.result_type(*arrays)

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, rows: Any) -> np.ndarray:
        idx = np.asarray(rows, dtype=np.int64)
        flat = idx.reshape(-1)
        if len(flat) and (int(flat.min()) < 0 or int(flat.max()) >= self.shape[0]):
            raise IndexError(f"row out of range 0..{self.shape[0] - 1}")
        out = np.empty((len(flat), *self.shape[1:]), dtype=self.dtype)
        for i, here, local in by_segment(self.starts, flat):
            out[here] = self.arrays[i][local]
        return out.reshape((*idx.shape, *self.shape[1:]))

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        joined = np.concatenate([np.asarray(a) for a in self.arrays])
        return joined if dtype is None else joined.astype(dtype)


__all__ = ["SegmentRows", "by_segment", "locate", "readonly", "segment_starts"]
