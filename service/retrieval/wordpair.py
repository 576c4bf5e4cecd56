"""Sparse word-pair ranking model (Bai et al. 2010; Schamoni et al. 2014 "VW"): scoring with numpy only.

Model. ``score(q, d) = sum_{i in q} sum_{j in d} w[h(i, j)]`` over the *distinct* analysed terms of the
query ``q`` (its language's :class:`~service.text.analysis.Analyzer`) and of the document side ``d``;
``w`` is a vector of ``2**bits`` weights (feature hashing, Shi et al. 2009), learned by
``training.ltr.wordpair`` with the l1-regularised pairwise hinge loss, and sparse (most weights are
exactly 0). A query term and a document term are different features even when they are the same
string: the model learns translations and associations, not matching.

Hashing (deterministic across processes and machines):

- term hashes: the first 8 bytes (little endian) of ``blake2b`` of ``"q\\x1f<lang>\\x1f<term>"`` for a
  query term and ``"d\\x1f<term>"`` for a document term (documents are nearly always English; the
  document side is not split by language);
- bucket of a pair: ``((hq XOR hd) * 0x9E3779B97F4A7C15 mod 2**64) >> (64 - bits)`` (multiply-shift
  over the XOR of the two term hashes). Being a function of ``hq XOR hd``, the buckets of one query
  against many documents are computed as one outer operation over the distinct document terms.

Document side (the choice that keeps scoring fast and training consistent): the *neural rankers'*
document text, :func:`service.retrieval.encoders.document_text` (English claims; else English title +
abstract; else the first language's claims or title + abstract), its first ``doc_max_terms`` (500)
analysed terms, de-duplicated. The claims start with the first (independent) claim, so the cap keeps
the first claims; titles are left out as the rankers leave them out (training pairs a patent's title +
abstract with its own claims). Query side: the first ``query_max_terms`` (200) analysed terms,
de-duplicated (the rankers' cap).

Fast path. :class:`DocTermStore` holds every indexed document's distinct term ids (CSR, rows aligned
with the index doc store) and the term hashes, written next to the model by ``priorart train-ltr``, so
that scoring 1000 candidates needs no record parsing or text analysis: gather the candidates' term ids,
take the distinct terms ``U``, compute the ``|q| x |U|`` bucket matrix in blocks, sum each column, and
add the column sums up per candidate (``np.bincount``).

Files (``<dir>/wordpair.json`` settings, ``wordpair.indices.npy`` int64 sorted bucket numbers with a
non-zero weight, ``wordpair.values.npy`` float32 weights).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import numpy as np

from service.corpus.record import PatentRecord
from service.retrieval.encoders import DOC_MAX_TERMS, QUERY_MAX_TERMS, document_text
from service.text.analysis import get_analyzer
from service.versioned import read_versioned

WORDPAIR_FORMAT = "priorart-wordpair"
WORDPAIR_VERSION = 1
TERMSTORE_FORMAT = "priorart-docterms"
TERMSTORE_VERSION = 1
DEFAULT_BITS = 20
MIX = np.uint64(0x9E3779B97F4A7C15)
_SEP = "\x1f"
_BLOCK = 1 << 20  # bucket-matrix entries computed at once (bounded memory: 8 MiB of uint64)


class WordPairFormatError(ValueError):
    """A word-pair model or term store folder that cannot be used (the message names the file)."""


# --------------------------------------------------------------------------------------------------
# hashing
# --------------------------------------------------------------------------------------------------


@lru_cache(maxsize=1 << 18)
def _key_hash(key: str) -> int:
    return int.from_bytes(hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest(), "little")


def query_term_hashes(terms: Iterable[str], lang: str) -> np.ndarray:
    """uint64 hashes of query terms of language ``lang``."""
    return np.fromiter((_key_hash(f"q{_SEP}{lang}{_SEP}{t}") for t in terms), dtype=np.uint64)


def doc_term_hashes(terms: Iterable[str]) -> np.ndarray:
    """uint64 hashes of document-side terms."""
    return np.fromiter((_key_hash(f"d{_SEP}{t}") for t in terms), dtype=np.uint64)


def pair_buckets(hq: np.ndarray, hd: np.ndarray, bits: int) -> np.ndarray:
    """Bucket of every (query term, document term) pair: int64 ``[len(hq), len(hd)]``."""
    if not 1 <= bits <= 40:
        raise ValueError(f"bits must be in 1..40, got {bits}")
    x = np.bitwise_xor(hq.astype(np.uint64)[:, None], hd.astype(np.uint64)[None, :])
    x *= MIX  # wraps modulo 2**64 (unsigned integer arithmetic)
    x >>= np.uint64(64 - bits)
    return x.view(np.int64)  # < 2**bits after the shift: the same numbers, no copy


# --------------------------------------------------------------------------------------------------
# text -> terms (shared with training)
# --------------------------------------------------------------------------------------------------


def query_terms(text: str, lang: str, max_terms: int = QUERY_MAX_TERMS) -> list[str]:
    """Distinct analysed terms among the first ``max_terms`` terms of a query, in order of appearance."""
    return list(dict.fromkeys(get_analyzer(lang)(text)[:max_terms]))


def doc_terms(record: PatentRecord, max_terms: int = DOC_MAX_TERMS) -> tuple[list[str], int]:
    """``(distinct terms among the first max_terms, number of analysed terms)`` of the document side."""
    text, lang = document_text(record)
    if not text:
        return [], 0
    terms = get_analyzer(lang)(text)
    return list(dict.fromkeys(terms[:max_terms])), len(terms)


# --------------------------------------------------------------------------------------------------
# document term store (rows aligned with a doc store, or with a list of records)
# --------------------------------------------------------------------------------------------------


def gather_csr(indptr: np.ndarray, values: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Entries of CSR ``rows``: ``(position of the row in rows, value)`` per entry, in row order."""
    rows = np.asarray(rows, dtype=np.int64)
    starts = indptr[rows]
    counts = (indptr[rows + 1] - starts).astype(np.int64)
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64), values[:0]
    pos = np.repeat(np.arange(len(rows), dtype=np.int64), counts)
    first = np.cumsum(counts) - counts
    offsets = np.arange(total, dtype=np.int64) - np.repeat(first, counts) + np.repeat(starts, counts)
    return pos, values[offsets]


@dataclass
class DocTermStore:
    """Distinct document-side term ids per row (CSR), the sorted term vocabulary and its hashes."""

    vocab: list[str]  # sorted
    hashes: np.ndarray  # uint64 [V]
    indptr: np.ndarray  # int64 [n + 1]
    ids: np.ndarray  # int32 term ids
    lengths: np.ndarray  # int32 analysed terms per row (whole document text, before the cap)
    max_terms: int = DOC_MAX_TERMS

    def __len__(self) -> int:
        return len(self.indptr) - 1

    @classmethod
    def from_terms(cls, rows: Sequence[tuple[Sequence[str], int]], max_terms: int = DOC_MAX_TERMS) -> DocTermStore:
        """Build from ``(distinct terms, length)`` per row."""
        vocab = sorted({t for terms, _ in rows for t in terms})
        index = {t: i for i, t in enumerate(vocab)}
        indptr = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum([len(terms) for terms, _ in rows], out=indptr[1:])
        ids = np.fromiter((index[t] for terms, _ in rows for t in terms), dtype=np.int32, count=int(indptr[-1]))
        lengths = np.asarray([n for _, n in rows], dtype=np.int32)
        return cls(vocab, doc_term_hashes(vocab), indptr, ids, lengths, max_terms)

    @classmethod
    def from_records(cls, records: Iterable[PatentRecord], max_terms: int = DOC_MAX_TERMS) -> DocTermStore:
        return cls.from_terms([doc_terms(r, max_terms) for r in records], max_terms)

    def term_ids(self, terms: Iterable[str]) -> np.ndarray:
        """Ids of the terms that are in the vocabulary (unknown terms dropped), int32."""
        vocab = self.vocab
        out: list[int] = []
        for t in terms:
            i = _bisect(vocab, t)
            if i is not None:
                out.append(i)
        return np.asarray(out, dtype=np.int32)

    def gather(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return gather_csr(self.indptr, self.ids, rows)

    def save(self, folder: str | Path) -> dict[str, Any]:
        d = Path(folder)
        d.mkdir(parents=True, exist_ok=True)
        np.save(d / "terms.indptr.npy", self.indptr)
        np.save(d / "terms.ids.npy", self.ids)
        np.save(d / "terms.lengths.npy", self.lengths)
        np.save(d / "terms.hashes.npy", self.hashes)
        (d / "terms.vocab.json").write_text(json.dumps(self.vocab, ensure_ascii=False), encoding="utf-8")
        info = {"format": TERMSTORE_FORMAT, "version": TERMSTORE_VERSION, "rows": len(self),
                "terms": len(self.vocab), "entries": int(len(self.ids)), "max_terms": self.max_terms}
        (d / "terms.json").write_text(json.dumps(info, indent=1), encoding="utf-8")
        return info

    @classmethod
    def load(cls, folder: str | Path, *, mmap: bool = True) -> DocTermStore:
        d = Path(folder)
        info = read_versioned(d / "terms.json", TERMSTORE_FORMAT, TERMSTORE_VERSION, error=WordPairFormatError,
                              fix="rerun `priorart train-ltr`")
        try:
            mode: Literal["r"] | None = "r" if mmap else None
            store = cls(
                vocab=json.loads((d / "terms.vocab.json").read_text(encoding="utf-8")),
                hashes=np.load(d / "terms.hashes.npy"),
                indptr=np.load(d / "terms.indptr.npy", mmap_mode=mode),
                ids=np.load(d / "terms.ids.npy", mmap_mode=mode),
                lengths=np.load(d / "terms.lengths.npy"),
                max_terms=int(info["max_terms"]),
            )
        except (OSError, ValueError, KeyError) as exc:
            if isinstance(exc, WordPairFormatError):
                raise
            raise WordPairFormatError(f"document term store in {d} is unreadable: {exc}") from exc
        if len(store.hashes) != len(store.vocab) or len(store.lengths) != len(store) or int(store.indptr[-1]) != len(
            store.ids
        ):
            raise WordPairFormatError(f"document term store in {d} is inconsistent (vocab/hashes/rows/entries)")
        return store


def _bisect(vocab: list[str], term: str) -> int | None:
    lo, hi = 0, len(vocab)
    while lo < hi:
        mid = (lo + hi) // 2
        if vocab[mid] < term:
            lo = mid + 1
        else:
            hi = mid
    return lo if lo < len(vocab) and vocab[lo] == term else None


# --------------------------------------------------------------------------------------------------
# the model
# --------------------------------------------------------------------------------------------------


def column_sums(w: np.ndarray, hq: np.ndarray, hd: np.ndarray, bits: int) -> np.ndarray:
    """``s[u] = sum_i w[h(q_i, d_u)]`` for each document term ``u`` (float64), in bounded blocks."""
    out = np.zeros(len(hd), dtype=np.float64)
    if len(hq) == 0 or len(hd) == 0:
        return out
    step = max(1, _BLOCK // len(hq))
    for start in range(0, len(hd), step):
        buckets = pair_buckets(hq, hd[start : start + step], bits)
        out[start : start + step] = w[buckets].sum(axis=0, dtype=np.float64)
    return out


class WordPairModel:
    """Hashed word-pair weights, dense in memory (``2**bits`` float32), stored sparse."""

    def __init__(self, indices: np.ndarray, values: np.ndarray, settings: dict[str, Any]) -> None:
        self.settings = dict(settings)
        self.bits = int(settings.get("bits", DEFAULT_BITS))
        self.query_max_terms = int(settings.get("query_max_terms", QUERY_MAX_TERMS))
        self.doc_max_terms = int(settings.get("doc_max_terms", DOC_MAX_TERMS))
        indices = np.asarray(indices, dtype=np.int64)
        values = np.asarray(values, dtype=np.float32)
        if indices.shape != values.shape:
            raise WordPairFormatError(f"indices {indices.shape} and values {values.shape} differ in shape")
        if len(indices) and (indices.min() < 0 or indices.max() >= 1 << self.bits):
            raise WordPairFormatError(f"bucket numbers outside 0..2**{self.bits}")
        self.w = np.zeros(1 << self.bits, dtype=np.float32)
        self.w[indices] = values
        self.nnz = int(np.count_nonzero(self.w))

    @classmethod
    def from_dense(cls, w: np.ndarray, settings: dict[str, Any]) -> WordPairModel:
        idx = np.flatnonzero(w)
        return cls(idx, np.asarray(w)[idx], {**settings, "bits": int(np.log2(len(w)))})

    # ---- files ------------------------------------------------------------------------------------

    def save(self, folder: str | Path) -> dict[str, Any]:
        d = Path(folder)
        d.mkdir(parents=True, exist_ok=True)
        idx = np.flatnonzero(self.w).astype(np.int64)
        np.save(d / "wordpair.indices.npy", idx)
        np.save(d / "wordpair.values.npy", self.w[idx].astype(np.float32))
        settings = {
            **self.settings,
            "format": WORDPAIR_FORMAT,
            "version": WORDPAIR_VERSION,
            "bits": self.bits,
            "query_max_terms": self.query_max_terms,
            "doc_max_terms": self.doc_max_terms,
            "nnz": int(len(idx)),
            "hash": "blake2b-64('q\\x1f<lang>\\x1f<term>'), blake2b-64('d\\x1f<term>'); "
            "bucket = ((hq ^ hd) * 0x9E3779B97F4A7C15 mod 2^64) >> (64 - bits)",
            "document_side": "encoders.document_text, first doc_max_terms analysed terms, distinct",
        }
        (d / "wordpair.json").write_text(json.dumps(settings, indent=1), encoding="utf-8")
        return settings

    @classmethod
    def load(cls, folder: str | Path) -> WordPairModel:
        d = Path(folder)
        path = d / "wordpair.json"
        settings = read_versioned(path, WORDPAIR_FORMAT, WORDPAIR_VERSION, error=WordPairFormatError,
                                  fix="rerun `priorart train-ltr`")
        try:
            indices = np.load(d / "wordpair.indices.npy")
            values = np.load(d / "wordpair.values.npy")
        except (OSError, ValueError) as exc:
            raise WordPairFormatError(f"word-pair model in {d} is unreadable: {exc}") from exc
        return cls(indices, values, settings)

    # ---- scoring ----------------------------------------------------------------------------------

    def query_hashes(self, text: str, lang: str) -> np.ndarray:
        return query_term_hashes(query_terms(text, lang, self.query_max_terms), lang)

    def score_entries(self, hq: np.ndarray, pos: np.ndarray, ids: np.ndarray, hashes: np.ndarray, n: int) -> np.ndarray:
        """Scores of ``n`` documents given their term entries (``pos``: document, ``ids``: term id)."""
        if len(ids) == 0 or len(hq) == 0:
            return np.zeros(n, dtype=np.float64)
        uniq, inv = np.unique(ids, return_inverse=True)
        sums = column_sums(self.w, hq, hashes[uniq], self.bits)
        return np.bincount(pos, weights=sums[inv], minlength=n)

    def score_rows(self, query_text: str, lang: str, store: DocTermStore, rows: np.ndarray) -> np.ndarray:
        """Scores of store rows (the fast path: precomputed document terms)."""
        rows = np.asarray(rows, dtype=np.int64)
        pos, ids = store.gather(rows)
        return self.score_entries(self.query_hashes(query_text, lang), pos, ids, store.hashes, len(rows))

    def score(self, query_text: str, lang: str, records: Sequence[PatentRecord]) -> np.ndarray:
        """Scores of records (analyses each record's document side; see :meth:`score_rows` for speed)."""
        store = DocTermStore.from_records(records, self.doc_max_terms)
        return self.score_rows(query_text, lang, store, np.arange(len(records)))

    def top_pairs(self, query_text: str, lang: str, record: PatentRecord, k: int = 10) -> list[tuple[str, str, float]]:
        """The ``k`` (query term, document term, weight) pairs that add most to a document's score."""
        q = query_terms(query_text, lang, self.query_max_terms)
        d, _ = doc_terms(record, self.doc_max_terms)
        if not q or not d:
            return []
        weights = self.w[pair_buckets(query_term_hashes(q, lang), doc_term_hashes(d), self.bits)]
        flat = np.argsort(-np.abs(weights), axis=None)[:k]
        out = []
        for f in flat:
            i, j = divmod(int(f), len(d))
            if weights[i, j] != 0:
                out.append((q[i], d[j], float(weights[i, j])))
        return out
