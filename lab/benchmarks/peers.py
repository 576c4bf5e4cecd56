"""Other BM25 engines, fed our analyser's tokens, for ``priorart-lab bench first-stage``.

Every peer indexes the same documents as token ids of one shared vocabulary (the English tokens our
analyser produced for the bench's corpus: same stemming, stop words, compounds) and answers a query
given as token ids with repetition (a term twice in the claim counts twice, as in our first stage).
A peer whose library is not installed is skipped with the reason (``unavailable``); the ``bench``
extra of ``pyproject.toml`` installs them.

BM25 variants (what each peer allows; ours reproduces rank-bm25's ``BM25Okapi``:
``idf = ln((N - df + 0.5) / (df + 0.5))``, negative values replaced by ``0.25 * mean idf``):

- ``rank-bm25``: ``BM25Okapi``, the same formula: the exactness oracle (identical top-10 expected).
- ``bm25s``: ``method="robertson"`` (Robertson idf and tf part; terms in more than half of the
  documents get idf 0 instead of the floor; scores in float32; the constant ``k1 + 1`` left out),
  retrieved through ``BM25.retrieve``; ``bm25s-numba`` is the same index with ``backend="numba"``
  (compiled scoring and selection; needs numba, compiled in the warm-up).
- ``pisa``: PISA through pyterrier-pisa (C++, block-max WAND over compressed postings; index built by
  its ``toks_indexer`` from the term counts, raw tf kept with ``scale=1``): PISA's BM25 has the
  Lucene idf ``ln(1 + (N - df + 0.5) / (df + 0.5))`` (always positive) and float32 scores; query
  term weights are the counts (``query_weighted``). Timed through ``PisaRetrieve.transform`` on a
  one-query data frame, the library's Python interface (pandas included); ``pisa-core`` times the
  same index through the native call that ``transform`` makes (``_pisathon.retrieve``, a private
  binding: skipped when a version lacks it), the engine without the data frame.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

PEER_NAMES = ("rank-bm25", "bm25s", "bm25s-numba", "pisa", "pisa-core")


class Peer:
    """One engine: ``build`` the index once, then ``search`` token ids -> document indexes, best first."""

    name = ""
    variant = ""
    modules: tuple[str, ...] = ()

    def __init__(self, k1: float, b: float) -> None:
        self.k1, self.b = k1, b
        self.build_s = 0.0

    def unavailable(self) -> str | None:
        """Why this peer cannot run here (a library not installed), or None."""
        missing = [m for m in self.modules if importlib.util.find_spec(m) is None]
        if missing:
            return f"{', '.join(missing)} not installed (pip install -e '.[bench]')"
        return None

    def build(self, docs: Sequence[np.ndarray], vocab: Sequence[str], work: Path) -> None:
        raise NotImplementedError

    def search(self, ids: list[int], k: int) -> list[int]:
        raise NotImplementedError

    def scores(self, ids: list[int]) -> np.ndarray | None:
        """Score of every document (only the exactness oracle has them)."""
        return None


class RankBM25(Peer):
    name = "rank-bm25"
    variant = "BM25Okapi (our formula: epsilon floor 0.25 x mean idf)"
    modules = ("rank_bm25",)

    def build(self, docs: Sequence[np.ndarray], vocab: Sequence[str], work: Path) -> None:
        from rank_bm25 import BM25Okapi

        t = time.perf_counter()
        self._vocab = list(vocab)
        self._bm25 = BM25Okapi(_as_terms(docs, self._vocab), k1=self.k1, b=self.b)
        self.build_s = time.perf_counter() - t

    def scores(self, ids: list[int]) -> np.ndarray:
        return np.asarray(self._bm25.get_scores([self._vocab[i] for i in ids]))

    def search(self, ids: list[int], k: int) -> list[int]:
        if not ids:
            return []
        s = self.scores(ids)
        return [int(i) for i in np.argsort(-s, kind="stable")[:k]]


class BM25S(Peer):
    name = "bm25s"
    variant = "bm25s robertson (idf 0 for df > N/2, float32)"
    modules: tuple[str, ...] = ("bm25s",)
    backend = "numpy"

    def build(self, docs: Sequence[np.ndarray], vocab: Sequence[str], work: Path) -> None:
        import bm25s

        logging.getLogger("bm25s").setLevel(logging.WARNING)  # it logs every build at DEBUG
        t = time.perf_counter()
        self._bm25 = bm25s.BM25(k1=self.k1, b=self.b, method="robertson", backend=self.backend)
        # token ids of our vocabulary (bm25s adds its empty-query token after them)
        self._bm25.index(([d.tolist() for d in docs], {t: i for i, t in enumerate(vocab)}), show_progress=False)
        self.build_s = time.perf_counter() - t

    def search(self, ids: list[int], k: int) -> list[int]:
        if not ids:  # no known term: every score 0 (bm25s' empty-query token is not in an index built from ids)
            return []
        docs, _ = self._bm25.retrieve([ids], k=k, show_progress=False, n_threads=0)
        return [int(i) for i in docs[0]]


class BM25SNumba(BM25S):
    name = "bm25s-numba"
    variant = "as bm25s, numba backend (compiled scoring and top-k)"
    modules = ("bm25s", "numba")
    backend = "numba"


class Pisa(Peer):
    name = "pisa"
    variant = "PISA BM25 (Lucene idf, float32), block-max WAND, via pyterrier-pisa"
    modules = ("pyterrier_pisa",)

    def build(self, docs: Sequence[np.ndarray], vocab: Sequence[str], work: Path) -> None:
        import pandas as pd
        from pyterrier_pisa import PisaIndex

        t = time.perf_counter()
        index = PisaIndex(str(work / self.name), stemmer="none", stops="none", threads=1, overwrite=True)
        with _quiet_native():  # PISA logs every indexing step
            index.toks_indexer(scale=1.0).index(
                {"docno": str(i), "toks": {vocab[t]: c for t, c in Counter(d.tolist()).items()}}
                for i, d in enumerate(docs)
            )
            self._retr = index.bm25(k1=self.k1, b=self.b, num_results=10, threads=1, query_weighted=True,
                                    toks_scale=1.0)
        self._vocab, self._pd = list(vocab), pd
        self.build_s = time.perf_counter() - t

    def search(self, ids: list[int], k: int) -> list[int]:
        if not ids:
            return []
        if k != self._retr.num_results:
            self._retr.num_results = k
        toks = {self._vocab[t]: float(c) for t, c in Counter(ids).items()}
        res = self._retr.transform(self._pd.DataFrame({"qid": ["q"], "query_toks": [toks]}))
        return [int(d) for d in res["docno"]]


class PisaCore(Pisa):
    name = "pisa-core"
    variant = "as pisa, PISA's C++ retrieval called alone (pyterrier-pisa's private binding, no data frame)"

    def unavailable(self) -> str | None:
        reason = super().unavailable()
        if reason is None:
            from pyterrier_pisa import _pisathon

            if not hasattr(_pisathon, "retrieve"):
                return "this pyterrier-pisa has no _pisathon.retrieve binding"
        return reason

    def search(self, ids: list[int], k: int) -> list[int]:
        from pyterrier_pisa import _pisathon

        if not ids:
            return []
        r = self._retr
        qidx, docnos = np.empty(k, np.int32), np.empty(k, object)
        ranks, scores = np.empty(k, np.int32), np.empty(k, np.float32)
        toks = {self._vocab[t]: float(c) for t, c in Counter(ids).items()}
        # what PisaRetrieve.transform runs for a data frame of queries, for one query
        size = _pisathon.retrieve(r._ctxt, r.query_algorithm.value, [(0, toks)], k=k, threads=1, query_weighted=1,
                                  pretokenised=True, result_qidxs=qidx, result_docnos=docnos, result_ranks=ranks,
                                  result_scores=scores)
        return [int(d) for d in docnos[:size]]


PEERS: dict[str, Callable[[float, float], Peer]] = {
    "rank-bm25": RankBM25,
    "bm25s": BM25S,
    "bm25s-numba": BM25SNumba,
    "pisa": Pisa,
    "pisa-core": PisaCore,
}


def make_peers(names: Sequence[str], k1: float, b: float) -> tuple[list[Peer], dict[str, str]]:
    """The peers that can run here, and for the others the reason they were skipped."""
    unknown = [n for n in names if n not in PEERS]
    if unknown:
        raise ValueError(f"unknown peer(s) {', '.join(unknown)}; valid: {', '.join(PEERS)}")
    peers, skipped = [], {}
    for name in names:
        peer = PEERS[name](k1, b)
        reason = peer.unavailable()
        if reason:
            skipped[name] = reason
        else:
            peers.append(peer)
    return peers, skipped


@contextlib.contextmanager
def _quiet_native() -> Iterator[None]:
    """File descriptors 1 and 2 to /dev/null (native libraries write there directly)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 1)
            os.dup2(null.fileno(), 2)
            yield
    finally:
        for fd, copy in ((1, saved[0]), (2, saved[1])):
            os.dup2(copy, fd)
            os.close(copy)


def _as_terms(docs: Sequence[np.ndarray], vocab: Sequence[str]) -> Iterator[list[str]]:
    for d in docs:
        yield [vocab[t] for t in d.tolist()]


def top10_overlap(a: Sequence[int], b: Sequence[Any]) -> float:
    """Fraction of ``a``'s top 10 found in ``b``'s top 10."""
    x, y = set(list(a)[:10]), set(list(b)[:10])
    return len(x & y) / max(1, min(10, len(x)))
