"""Kernel pooling over the query-document similarity of word vectors (issue 33 item 4; K-NRM, Xiong et al. 2017,
with the index's own frozen word vectors): features of the first documents that a learned ranker reads.

For each language a query reaches, its image there (:class:`service.passages.lm.QueryImage`: the query through the
translation tables, its own language untranslated) gives query terms ``q`` with weights ``p(q)`` (its
:data:`QUERY_TERMS` most probable, weights renormalised). Each term ``t`` of a document in that language (all of its
text, counted ``c(t)``: the passage index's postings) is compared with each query term: similarity 1 for the same
term, else the cosine of their word vectors (:class:`service.text.word_vectors.WordVectors`; 0 where either has
none). A kernel ``k`` (mean ``mu``, width ``sigma``, :data:`KERNELS`) turns similarities into a soft count,

    soft_k(q, d) = sum_t c(t) exp(-(sim(q, t) - mu)^2 / (2 sigma^2)),

and a document's feature ``k`` is ``sum_q p(q) log(1 + SCALE * soft_k(q, d) / len(d))`` (``len(d)`` its terms in
that language: a density, so that a long description does not win by length), the largest over the languages.
The first kernel (``mu`` 1, K-NRM's width 1e-3: computed as the indicator of the same term) counts exact matches;
the others, matches of similar words: what BM25 and the passages cannot see. Bilingual through the tables: a German
query meets an English document as its English image, compared in the English vectors' space.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from service.passages.segments import SegmentedPassageIndex, term_counts
from service.text.analysis import SUPPORTED_LANGS

if TYPE_CHECKING:
    from service.passages.arrays import PassageArrays
    from service.passages.lm import QueryImage
    from service.text.word_vectors import WordVectors

KERNELS: tuple[tuple[float, float], ...] = ((1.0, 1e-3), (0.9, 0.1), (0.7, 0.1), (0.5, 0.1), (0.3, 0.1))
"""(mu, sigma) of each kernel: exact matches, then similar words at decreasing similarity."""

KERNEL_FEATURES: tuple[str, ...] = tuple("kernel_exact" if mu == 1.0 else f"kernel_{mu:g}" for mu, _ in KERNELS)
"""Their names among the ranker's features (service/ranker.py)."""

def reads_kernels(features: Collection[str]) -> bool:
    """Does a ranker of these features read the kernel features (and so need the index's word vectors)?"""
    return bool(set(features) & set(KERNEL_FEATURES))


QUERY_TERMS = 48
"""The most probable terms of a query's image that are compared."""

SCALE = 1000.0  # soft counts per thousand terms of the document


class KernelPooling:
    """The kernel features of documents of one passage index (plain or segmented) against query images, with the
    word vectors of its terms (each segment's vocabulary mapped to vector rows once, at its first use)."""

    def __init__(self, passages: PassageArrays | SegmentedPassageIndex, vectors: WordVectors) -> None:
        self.passages, self.vectors = passages, vectors
        self._maps: dict[int, tuple[npt.NDArray[np.int64], npt.NDArray[np.int8]]] = {}

    def _map(self, part: PassageArrays) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int8]]:
        """The segment's joint term ids -> vector rows (-1: none) and languages (index in SUPPORTED_LANGS)."""
        got = self._maps.get(id(part))
        if got is None:
            raw, off = bytes(part.vocab.data), np.asarray(part.vocab.offsets).tolist()
            keys = [raw[a:b].decode("utf-8") for a, b in zip(off[:-1], off[1:], strict=True)]
            code = {lang: i for i, lang in enumerate(SUPPORTED_LANGS)}
            langs = np.array([code[k.split("\0", 1)[0]] for k in keys], dtype=np.int8)
            got = self._maps[id(part)] = (self.vectors.rows(keys), langs)
        return got

    def features(self, images: Mapping[str, QueryImage], rows: npt.ArrayLike) -> np.ndarray:
        """The :data:`KERNEL_FEATURES` of ``rows`` (one row each; 0 for a document with no text in a language the
        query reaches). Cost: the distinct terms of the documents against the query's terms, one matrix product and
        one exponential per kernel (~5 ms for 20 long patents and a claim's 48 terms)."""
        r = np.asarray(rows, dtype=np.int64).reshape(-1)
        out = np.zeros((len(r), len(KERNELS)))
        if not len(r) or not images:
            return out
        if isinstance(self.passages, SegmentedPassageIndex):
            seg, local = self.passages.locate(r)
            parts = [(self.passages.parts[int(s)], np.flatnonzero(seg == s)) for s in np.unique(seg)]
        else:
            local, parts = r, [(self.passages, np.arange(len(r)))]
        for part, at in parts:
            out[at] = self._part_features(part, images, local[at])
        return out

    def _part_features(self, part: PassageArrays, images: Mapping[str, QueryImage], rows: np.ndarray) -> np.ndarray:
        vec_row, term_lang = self._map(part)
        doc_of, all_ids, all_counts = term_counts(part, rows)
        best = np.zeros((len(rows), len(KERNELS)))
        for lang, image in images.items():
            phi = self._language(part, lang, image, vec_row, term_lang, doc_of, all_ids, all_counts, len(rows))
            if phi is not None:
                best = np.maximum(best, phi)
        return best

    def _language(self, part: PassageArrays, lang: str, image: QueryImage, vec_row: np.ndarray,
                  term_lang: np.ndarray, doc_of: np.ndarray, ids: np.ndarray, counts: np.ndarray,
                  n: int) -> np.ndarray | None:
        sel = term_lang[ids] == SUPPORTED_LANGS.index(lang)
        if not sel.any():
            return None
        d, t, c = doc_of[sel], ids[sel], counts[sel].astype(np.float32)
        terms = sorted(image.probs.items(), key=lambda kv: (-kv[1], kv[0]))[:QUERY_TERMS]
        p = np.array([w for _, w in terms])
        p = p / p.sum()
        q_id = np.array([part.vocab.lookup(lang, term) for term, _ in terms], dtype=np.int64)
        q_row = self.vectors.rows([f"{lang}\0{term}" for term, _ in terms])
        uniq, u_of = np.unique(t, return_inverse=True)
        u_row = vec_row[uniq]
        V = self.vectors.vectors
        qv = np.where((q_row >= 0)[:, None], V[np.maximum(q_row, 0)], np.float32(0.0))
        uv = np.where((u_row >= 0)[:, None], V[np.maximum(u_row, 0)], np.float32(0.0))
        same = uniq[:, None] == q_id[None, :]  # (distinct document terms, query terms): the same term
        sim = np.where(same, np.float32(1.0), uv @ qv.T)
        # per kernel, each distinct term's value for each query term, summed per document with its counts (C: the
        # documents' counts of the distinct terms; a term is one entry of a document)
        values = [same.astype(np.float32)]  # the exact kernel: the same term (its width 1e-3 makes it that)
        values += [np.exp(np.square(sim - np.float32(mu)) * np.float32(-0.5 / (sigma * sigma)))
                   for mu, sigma in KERNELS[1:]]
        C = np.zeros((n, len(uniq)), dtype=np.float32)
        C[d, u_of] = c
        soft = (C @ np.concatenate(values, axis=1)).reshape(n, len(KERNELS), len(terms))
        doc_len = C.sum(axis=1)
        dens = np.float32(SCALE) * soft / np.where(doc_len > 0, doc_len, np.float32(1.0))[:, None, None]
        return (np.log1p(dens) @ p.astype(np.float32)).astype(np.float64)


def kernel_pooling(passages: Any, vectors: WordVectors | None) -> KernelPooling | None:
    """The kernel features of an index's passages (None without word vectors or passages)."""
    return KernelPooling(passages, vectors) if passages is not None and vectors is not None else None


__all__ = ["KERNELS", "KERNEL_FEATURES", "QUERY_TERMS", "KernelPooling", "kernel_pooling", "reads_kernels"]
