"""Word vectors of an index's own terms, per language (issue 33 item 4: what the kernel-pooling features compare).

One vector per ``lang \\0 term`` key (the passage index's vocabulary keys, :class:`service.passages.arrays.Vocabulary`),
unit length, float32, each language in its own space: a query reaches another language through the translation
tables (its image there, :class:`service.passages.lm.QueryImage`) and is compared with that language's terms in that
language's space. Trained by :func:`training.word_vectors.train_word_vectors` (word2vec over the index's own analysed
passages: no query, no judgement). Stored as a folder: ``keys.bin`` / ``keys.npy`` (sorted UTF-8 keys and their
offsets, as the passage index's blobs) and ``vectors.npy``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

KEYS = "keys"  # .bin + .npy
VECTORS = "vectors.npy"


class WordVectors:
    """Sorted ``lang \\0 term`` keys and their unit-length vectors (row ``i`` of ``vectors`` is key ``i``'s)."""

    def __init__(self, keys: Sequence[str], vectors: npt.ArrayLike, *, ready: bool = False) -> None:
        """``ready``: the keys are sorted and the vectors of unit length already (as :meth:`save` wrote them)."""
        v = np.ascontiguousarray(vectors, dtype=np.float32)
        if v.ndim != 2 or v.shape[0] != len(keys):
            raise ValueError(f"{v.shape} vectors for {len(keys)} keys")
        if ready:
            self.keys, self.vectors = list(keys), v
        else:
            order = sorted(range(len(keys)), key=lambda i: keys[i].encode("utf-8"))
            self.keys = [keys[i] for i in order]
            norms = np.linalg.norm(v, axis=1, keepdims=True)
            self.vectors = np.ascontiguousarray(v[order] / np.where(norms > 0, norms, 1.0)[order], dtype=np.float32)
        self._index = {k: i for i, k in enumerate(self.keys)}

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1])

    def __len__(self) -> int:
        return len(self.keys)

    def rows(self, keys: Sequence[str]) -> npt.NDArray[np.int64]:
        """Each key's row (-1: no vector)."""
        return np.array([self._index.get(k, -1) for k in keys], dtype=np.int64)

    def save(self, folder: str | Path) -> None:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        blobs = [k.encode("utf-8") for k in self.keys]
        (folder / f"{KEYS}.bin").write_bytes(b"".join(blobs))
        np.save(folder / f"{KEYS}.npy", np.concatenate([[0], np.cumsum([len(b) for b in blobs])]).astype(np.int64))
        np.save(folder / VECTORS, self.vectors)

    @classmethod
    def load(cls, folder: str | Path) -> WordVectors:
        folder = Path(folder)
        data = (folder / f"{KEYS}.bin").read_bytes()
        off = np.load(folder / f"{KEYS}.npy").tolist()
        keys = [data[a:b].decode("utf-8") for a, b in zip(off[:-1], off[1:], strict=True)]
        return cls(keys, np.load(folder / VECTORS), ready=True)


__all__ = ["WordVectors"]
