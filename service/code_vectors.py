"""Vectors of classification codes, and the code-embedding similarity of a query and a document (seed 000, the
meta-text embeddings paper, as a feature of the learned ranker: issue 59 item 4).

A code's vector is learned by DeepWalk over the classification tree of an index's codes (the CPC list's hierarchy
where the build has it, else the codes' own shapes; :func:`training.code_vectors.train_code_vectors`): codes close in
the tree get close vectors, so two documents whose main groups share a class but no subclass are similar where the
code features that count shared subclasses or main groups (service/ranker.py ``code_subclass``, ``class_group``...)
see nothing in common.

- A document's vector: the mean of its main groups' vectors (a main group the vectors lack counts as its nearest
  ancestor that they hold), unit length.
- A query's vector: the mean of its predicted codes' vectors weighted by their shares (the code classifier's main
  groups where it predicted them, else the first documents' vote: service/ranker.py ``evidence_features``), unit
  length.
- The feature: their cosine, 0 where either has no vector.

Stored as an index part (``code_vectors/``: ``codes.json``, the codes in row order, and ``vectors.npy``, float32
unit rows), written by the build where the installed ranker reads the feature (service/index/parts.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from service.codes import code_fallbacks, codes_at

CODES = "codes.json"
VECTORS = "vectors.npy"


class CodeVectors:
    """Unit-length vectors of normalised codes (row ``i`` is ``codes[i]``'s)."""

    def __init__(self, codes: Sequence[str], vectors: npt.ArrayLike, *, ready: bool = False) -> None:
        """``ready``: the vectors are of unit length already (as :meth:`save` wrote them)."""
        v = np.asarray(vectors, dtype=np.float32)
        if v.ndim != 2 or v.shape[0] != len(codes):
            raise ValueError(f"{v.shape} vectors for {len(codes)} codes")
        if not ready:
            norms = np.linalg.norm(v, axis=1, keepdims=True)
            v = (v / np.where(norms > 0, norms, 1.0)).astype(np.float32)
        self.codes = list(codes)
        self.vectors = np.ascontiguousarray(v, dtype=np.float32)
        self._row = {c: i for i, c in enumerate(self.codes)}

    def __len__(self) -> int:
        return len(self.codes)

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1])

    def row(self, code: str) -> int:
        """The row of ``code``, or of its nearest ancestor that has one (-1: none)."""
        for c in code_fallbacks(code):
            r = self._row.get(c)
            if r is not None:
                return r
        return -1

    def mean(self, weighted: Iterable[tuple[str, float]]) -> np.ndarray | None:
        """The unit-length weighted mean of the codes' vectors (None: no code has one, or the mean is 0)."""
        total = np.zeros(self.dim, dtype=np.float64)
        for code, w in weighted:
            r = self.row(code)
            if r >= 0 and w > 0:
                total += w * self.vectors[r]
        norm = float(np.linalg.norm(total))
        return total / norm if norm > 0 else None

    def document(self, codes: Iterable[str]) -> np.ndarray | None:
        """A document's vector: the mean of its main groups' (of its codes where it has none at that level)."""
        groups = codes_at(list(codes), "main_group") or list(codes)
        return self.mean((c, 1.0) for c in groups)

    def similarity(self, query: Iterable[tuple[str, float]], documents: Sequence[Iterable[str]]) -> np.ndarray:
        """The cosine of the query's predicted codes (code, share) and each document's codes (0 where either has no
        vector)."""
        out = np.zeros(len(documents))
        q = self.mean(query)
        if q is None:
            return out
        for i, codes in enumerate(documents):
            d = self.document(codes)
            if d is not None:
                out[i] = float(q @ d)
        return out

    def save(self, folder: str | Path) -> None:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / CODES).write_text(json.dumps(self.codes), encoding="utf-8")
        np.save(folder / VECTORS, self.vectors)

    @classmethod
    def load(cls, folder: str | Path) -> CodeVectors:
        folder = Path(folder)
        return cls(json.loads((folder / CODES).read_text(encoding="utf-8")), np.load(folder / VECTORS), ready=True)


__all__ = ["CodeVectors"]
