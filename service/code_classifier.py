"""Classification codes for a query from the CPC titles: BM25 over one profile per code (issue 33 item 2).

A pasted claim brings no codes. The documents a search ranks first vote for theirs
(:mod:`service.retrieval.code_prediction`), but in a small or uneven corpus a code is held by one or two documents,
and the first documents are of neighbouring fields. The classification itself describes every code: the CPC title
list has a title for each of its 260,000 entries. Each subclass and each main group gets a *profile*, the English
index terms of its own title and of every entry below it, and a query is classified by its BM25 score against each
profile (``k1`` 1.2, ``b`` 0.75, the profiles being the documents), every query term weighed by its probability in
the query's English image (:class:`service.passages.lm.QueryImage`: a German or French query through the index's
translation tables). The shares of the best :data:`TOP` scores are the prediction. Nothing is learned from the
corpus, so no document (and no topic of an experiment) shaped it.

Measured by ``priorart-lab experiment code-prediction`` against the vote (docs/RESULTS.md, "Codes predicted for a
query"). The build writes the classifier into an index (the part ``code_classifier``, service/index/parts.py) from
the CPC title list when most of the corpus' codes are in it (:func:`training.code_classifier.index_classifier`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from numba import njit
from scipy import sparse

from service.codes import check_level

LEVELS = ("subclass", "main_group")
"""The levels the classifier predicts."""

TOP = 20
"""The best-scoring codes whose shares are the prediction."""

TERMS = "terms.json"


class CodeClassifier:
    """Per level, the codes and their profiles' BM25 weights (codes x terms, CSR) over one vocabulary of English
    index terms."""

    def __init__(self, terms: Sequence[str], levels: Mapping[str, tuple[Sequence[str], sparse.csr_matrix]]) -> None:
        self.terms = list(terms)
        self._column = {t: j for j, t in enumerate(self.terms)}
        self.levels: dict[str, tuple[list[str], sparse.csc_matrix]] = {}
        self._columns: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        for level, (codes, weights) in levels.items():
            check_level(level)
            if weights.shape != (len(codes), len(self.terms)):
                raise ValueError(f"{level}: {weights.shape} weights for {len(codes)} codes and {len(self.terms)} terms")
            csc = weights.tocsc()  # (a query reads a few columns)
            self.levels[level] = (list(codes), csc)
            # its arrays as the prediction's loop reads them (of one type, whatever scipy chose: one compiled variant)
            self._columns[level] = (csc.indptr.astype(np.int64, copy=False), csc.indices.astype(np.int64, copy=False),
                                    csc.data.astype(np.float64, copy=False))

    @classmethod
    def from_counts(cls, counts: Mapping[str, Mapping[str, Mapping[str, int]]], *, k1: float = 1.2,
                    b: float = 0.75) -> CodeClassifier:
        """From each level's profiles (``{level: {code: {term: count}}}``): BM25 weights with the profiles as the
        documents (idf ``log(1 + (N - n + 0.5) / (n + 0.5))`` over the level's profiles)."""
        terms = sorted({t for profiles in counts.values() for counted in profiles.values() for t in counted})
        column = {t: j for j, t in enumerate(terms)}
        levels: dict[str, tuple[list[str], sparse.csr_matrix]] = {}
        for level, profiles in counts.items():
            codes = sorted(c for c, counted in profiles.items() if counted)
            rows, cols, tfs = [], [], []
            for i, code in enumerate(codes):
                for t, n in profiles[code].items():
                    rows.append(i)
                    cols.append(column[t])
                    tfs.append(float(n))
            tf = sparse.csr_matrix((tfs, (rows, cols)), shape=(len(codes), len(terms)))
            lengths = np.asarray(tf.sum(axis=1)).ravel()
            df = np.bincount(tf.indices, minlength=len(terms)).astype(np.float64)
            n_codes = len(codes)
            idf = np.log1p((n_codes - df + 0.5) / (df + 0.5))
            norm = k1 * (1.0 - b + b * lengths / max(float(lengths.mean()) if n_codes else 1.0, 1e-9))
            tf = tf.tocoo()
            w = idf[tf.col] * tf.data * (k1 + 1.0) / (tf.data + norm[tf.row])
            levels[level] = (codes, sparse.csr_matrix((w, (tf.row, tf.col)), shape=tf.shape))
        return cls(terms, levels)

    def __len__(self) -> int:
        return sum(len(codes) for codes, _ in self.levels.values())

    def predict(self, probs: Mapping[str, float], level: str = "subclass", *,
                top: int = TOP) -> list[tuple[str, float]]:
        """The codes at ``level`` for a query of English index terms weighed ``probs``, best first, each with its
        share of the best ``top`` scores (summing to 1; ties in code order). No query term in any profile: empty."""
        check_level(level)
        if level not in self.levels:
            raise ValueError(f"the classifier has no {level} profiles (it has {', '.join(self.levels)})")
        codes = self.levels[level][0]
        cols = [(self._column[t], p) for t, p in probs.items() if p > 0 and t in self._column]
        if not cols:
            return []
        j = np.array([c for c, _ in cols], dtype=np.int64)
        p = np.array([w for _, w in cols], dtype=np.float64)
        scores = _column_scores(*self._columns[level], j, p, len(codes))
        hit = np.flatnonzero(scores > 0)
        if not hit.size:
            return []
        if hit.size > top:  # the codes of the best ``top`` scores, every tie of the last included, before the sort
            s = scores[hit]
            hit = hit[s >= np.partition(s, hit.size - top)[hit.size - top]]
        best = hit[np.lexsort((hit, -scores[hit]))][:top]
        total = float(scores[best].sum())
        return [(codes[i], float(scores[i]) / total) for i in best]

    # ---- files -----------------------------------------------------------------------------------
    def save(self, folder: str | Path) -> None:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / TERMS).write_text(json.dumps(self.terms, ensure_ascii=False), encoding="utf-8")
        for level, (codes, weights) in self.levels.items():
            w = weights.tocsr()
            np.savez(folder / f"{level}.npz", codes=np.array(codes, dtype=str), data=w.data.astype(np.float32),
                     indices=w.indices.astype(np.int32), indptr=w.indptr.astype(np.int64),
                     shape=np.array(w.shape, dtype=np.int64))

    @classmethod
    def load(cls, folder: str | Path) -> CodeClassifier:
        folder = Path(folder)
        terms = json.loads((folder / TERMS).read_text(encoding="utf-8"))
        levels: dict[str, tuple[list[str], sparse.csr_matrix]] = {}
        for level in LEVELS:
            path = folder / f"{level}.npz"
            if path.is_file():
                with np.load(path) as z:
                    shape = tuple(int(x) for x in z["shape"])
                    levels[level] = (z["codes"].tolist(), sparse.csr_matrix(
                        (z["data"].astype(np.float64), z["indices"], z["indptr"]), shape=shape))
        if not levels:
            raise ValueError(f"{folder}: no profiles ({', '.join(f'{lv}.npz' for lv in LEVELS)})")
        return cls(terms, levels)


@njit(cache=True, nogil=True)
def _column_scores(indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, cols: np.ndarray, p: np.ndarray,
                   n: int) -> np.ndarray:
    """``weights[:, cols] @ p`` of a CSC matrix's arrays, summed column by column in ``cols``' order (as scipy's
    product of the selected columns sums them: the same scores, bit for bit), without selecting the columns first
    (a new sparse matrix per query: the prediction 0.17 -> 0.10 ms a query of the load mix, both levels)."""
    out = np.zeros(n)
    for c in range(len(cols)):
        w = p[c]
        for k in range(indptr[cols[c]], indptr[cols[c] + 1]):
            out[indices[k]] += data[k] * w
    return out


def warm() -> None:
    """Compile (or load from numba's cache) the prediction's loop for the arrays a loaded classifier gives it
    (service/startup.py ``KERNEL_MODULES``)."""
    one = np.zeros(1, dtype=np.int64)
    _column_scores(np.array([0, 1], dtype=np.int64), one, np.ones(1), one, np.ones(1), 1)


def code_agreement(predicted: Sequence[tuple[str, float]], held: Sequence[Sequence[str]]) -> np.ndarray:
    """Per document (its codes at the prediction's level), the predicted share of the codes it holds (0 to 1)."""
    share = dict(predicted)
    return np.array([min(1.0, sum(share.get(c, 0.0) for c in dict.fromkeys(codes))) for codes in held])


__all__ = ["LEVELS", "TOP", "CodeClassifier", "code_agreement"]
