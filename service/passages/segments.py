"""The passage indexes of a live generation searched in place: one per segment, mapped where it lies.

A generation (:class:`service.index.folder.IndexFolder` with segments) is opened by mapping each segment's
passage folder; nothing is joined or copied at open, and a segment already open in this process (the previous
generation of a running server) is reused. A query reads only its candidates: :meth:`PassageGeneration.view`
gathers their units, sections and the postings of the query's terms from their segments into a small in-memory
:class:`~service.passages.arrays.PassageArrays` (rows in segment order), whose collection statistics are the
generation's (each query term's count summed over the segments, each language's tokens likewise: what a join of
the segments holds). The ranker (:mod:`service.passages.ranker`) then scores that view exactly as it scores one
folder: the results equal those of the segments joined into one folder (``tests/service/passages``), and a
document's entries keep their order (each segment's vocabulary is sorted like a joined one), so the sums run in
the same order too.

Deleted rows are never candidates (the first stage masks them); like a join, the collection statistics still
count their text until a merge or ``compact`` rewrites the segments.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

import service.passages.format as fmt
from service.index.arrays import by_segment, locate, segment_starts
from service.passages.arrays import Blob, PassageArrays, check_rows
from service.passages.reader import PassageReader
from service.text.analysis import SUPPORTED_LANGS

if TYPE_CHECKING:
    from service.passages.lm import QueryModels

IntArray = npt.NDArray[np.int64]

_open_parts: weakref.WeakValueDictionary[tuple[str, int, int], PassageArrays] = weakref.WeakValueDictionary()
_open_lock = threading.Lock()


def open_part(folder: Path, info: Mapping[str, Any]) -> PassageArrays:
    """A segment's passage folder, mapped; the same object while this process holds it (keyed by the folder and
    its ``docs.npy``: a segment's files never change once committed, and a rewritten one is a new file)."""
    st = (folder / fmt.DOCS).stat()
    key = (str(folder.resolve()), st.st_ino, st.st_mtime_ns)
    with _open_lock:
        part = _open_parts.get(key)
        if part is None:
            part = PassageArrays.open(folder, mmap=True, info=info)
            _open_parts[key] = part
        return part


class _Keys:
    """The view's vocabulary: the query's terms that some segment holds, by ``(lang, term)``."""

    def __init__(self, keys: Sequence[tuple[str, str]]) -> None:
        self._ids = {k: i for i, k in enumerate(keys)}

    def __len__(self) -> int:
        return len(self._ids)

    def lookup(self, lang: str, term: str) -> int:
        return self._ids.get((lang, term), -1)

    def lookup_all(self, lang: str, terms: Collection[str]) -> list[int]:
        return [self._ids.get((lang, term), -1) for term in terms]


class _Strings:
    """Strings of the view (a row's publication id, a unit's text or passage id), read from their segment's blob."""

    def __init__(self, blobs: Sequence[Blob], segment: IntArray, local: IntArray) -> None:
        self._blobs, self._segment, self._local = blobs, segment, local

    def __len__(self) -> int:
        return int(self._segment.size)

    def text(self, i: int) -> str:
        return self._blobs[int(self._segment[i])].text(int(self._local[i]))


class _View(PassageArrays):
    """Candidates gathered from the segments (:meth:`PassageGeneration.view`): the arrays the ranker reads."""

    def __init__(self, arrays: Mapping[str, npt.NDArray[Any]], doc_ids: _Strings, texts: _Strings, pids: _Strings,
                 vocab: _Keys) -> None:  # PassageArrays' attributes, set from the gathered arrays
        self.folder = Path("<candidates>")
        self.info = {}
        a = arrays
        self.docs = a[fmt.DOCS]
        self.doc_meta = a[fmt.DOC_META]
        self.unit_tag, self.unit_len, self.unit_sec = a[fmt.UNIT_TAG], a[fmt.UNIT_LEN], a[fmt.UNIT_SEC]
        self.sec_parent, self.sec_depth, self.sec_kind = a[fmt.SEC_PARENT], a[fmt.SEC_DEPTH], a[fmt.SEC_KIND]
        self.sec_end, self.sec_unit, self.sec_head_len = a[fmt.SEC_END], a[fmt.SEC_UNIT], a[fmt.SEC_HEAD_LEN]
        self.term_id, self.term_end = a[fmt.TERM_ID], a[fmt.TERM_END]
        self.post_unit, self.post_count = a[fmt.POST_UNIT], a[fmt.POST_COUNT]
        self.vocab_cf, self.lang_tokens = a[fmt.VOCAB_CF], a[fmt.LANG_TOKENS]
        self.doc_ids, self.texts, self.pids = doc_ids, texts, pids  # type: ignore[assignment]
        self.vocab = vocab  # type: ignore[assignment]
        self._check()


_UNIT_ARRAYS = (fmt.UNIT_TAG, fmt.UNIT_LEN, fmt.UNIT_SEC)
_SECTION_ARRAYS = (fmt.SEC_PARENT, fmt.SEC_DEPTH, fmt.SEC_KIND, fmt.SEC_END, fmt.SEC_UNIT, fmt.SEC_HEAD_LEN)


def _attr(name: str) -> str:
    return name.removesuffix(".npy")


def term_counts(part: PassageArrays, rows: npt.ArrayLike) -> tuple[IntArray, IntArray, npt.NDArray[np.float64]]:
    """Every term entry of the ``rows`` of a segment, rows in their order: the entry's row (its index in ``rows``), its
    joint term id and its count in the row's text (the sum of its postings)."""
    from service.passages.ranker import _expand

    r = np.asarray(rows, dtype=np.int64).reshape(-1)
    d0 = part.docs[r].astype(np.int64)
    cnt = part.docs[r + 1].astype(np.int64) - d0
    entries, entry_doc = _expand(d0[:, 2], cnt[:, 2])
    postings, _ = _expand(d0[:, 3], cnt[:, 3])
    if not entries.size:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
    # each entry's postings: the postings of a row lie in its entries' order, each entry ending at term_end (within
    # the row); an entry's are those from the previous entry's end to its own, in the rows' postings taken one after
    # another, summed as differences of their running total (integers: exact)
    start = np.cumsum(cnt[:, 3]) - cnt[:, 3]
    ends = start[entry_doc] + part.term_end[entries].astype(np.int64)
    total = np.zeros(postings.size + 1, dtype=np.int64)
    np.cumsum(part.post_count[postings], out=total[1:])
    per_entry = total[ends] - total[np.concatenate(([0], ends[:-1]))]
    return entry_doc, part.term_id[entries].astype(np.int64), per_entry.astype(np.float64)


def deleted_counts(part: PassageArrays, rows: npt.ArrayLike) -> tuple[IntArray, IntArray, IntArray]:
    """What the ``rows`` of a segment add to its collection statistics (``vocab_cf``, ``lang_tokens``): the joint ids of
    their terms (sorted, distinct) with their counts, and their tokens per language. A generation subtracts these for
    its deleted rows, so that its collection model is that of its live documents, as one build of them has."""
    from service.passages.ranker import _expand

    r = np.unique(np.asarray(rows, dtype=np.int64))
    d0 = part.docs[r].astype(np.int64)
    cnt = part.docs[r + 1].astype(np.int64) - d0
    units, _ = _expand(d0[:, 0], cnt[:, 0])
    tokens = np.bincount(part.unit_tag[units].astype(np.int64) & 3, weights=part.unit_len[units].astype(np.float64),
                         minlength=len(SUPPORTED_LANGS) + 1)[: len(SUPPORTED_LANGS)].astype(np.int64)
    _, term_ids, per_entry = term_counts(part, r)
    if not term_ids.size:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), tokens
    ids, inverse = np.unique(term_ids, return_inverse=True)
    counts = np.bincount(inverse, weights=per_entry, minlength=ids.size).astype(np.int64)
    return ids, counts, tokens


class PassageGeneration(PassageReader):
    """The passage index of a generation of several segments (module docstring), ranked through
    :class:`service.passages.index.PassageReader` as one build is. ``deleted``: per segment, its rows deleted in this
    generation; they are never candidates, and their text leaves the collection model (:func:`deleted_counts`)."""

    def __init__(self, parts: Sequence[PassageArrays], deleted: Sequence[npt.ArrayLike] | None = None) -> None:
        if not parts:
            raise ValueError("a passage index needs at least one segment")
        self.parts = list(parts)
        self.starts = segment_starts([p.n_docs for p in self.parts])  # each segment's first row
        gone = ([np.asarray(d, dtype=np.int64) for d in deleted] if deleted is not None
                else [np.zeros(0, dtype=np.int64)] * len(self.parts))
        if len(gone) != len(self.parts):
            raise ValueError(f"{len(gone)} deleted-row lists for {len(self.parts)} segments")
        self._deleted = [deleted_counts(p, d) if d.size else None for p, d in zip(self.parts, gone, strict=True)]
        self.lang_tokens = np.sum([p.lang_tokens.astype(np.int64) for p in self.parts], axis=0).astype(np.int64)
        for gone_counts in self._deleted:
            if gone_counts is not None:
                self.lang_tokens -= gone_counts[2]
        summed = ("n_docs", "n_passages", "n_units", "bytes")
        self.info: dict[str, Any] = {k: sum(int(p.info.get(k, 0)) for p in self.parts) for k in summed
                                     if all(k in p.info for p in self.parts)}
        self.info.update({k: self.parts[0].info[k] for k in ("format", "version") if k in self.parts[0].info})
        self.info["segments"] = len(self.parts)
        # per (lang, term) of a query: its id in each segment (-1: absent) and its live count in the generation,
        # remembered (bounded) so that a term of earlier queries is not looked up in every segment again
        self._terms: dict[tuple[str, str], tuple[tuple[int, ...], int]] = {}
        self._terms_lock = threading.Lock()

    _TERMS_CACHE = 1 << 16

    def _term_stats(self, keys: Sequence[tuple[str, str]]) -> tuple[IntArray, IntArray]:
        """Each key's id in each segment (segments x keys; -1: absent) and its count in the generation's collection
        model (the segments' counts summed, the deleted rows' taken out)."""
        cache = self._terms
        found: dict[tuple[str, str], tuple[tuple[int, ...], int]] = {}
        missing: list[tuple[str, str]] = []
        for k in keys:
            hit = cache.get(k)
            if hit is None:
                missing.append(k)
            else:
                found[k] = hit
        if missing:
            ids = np.asarray([[p.vocab.lookup(lang, t) for lang, t in missing] for p in self.parts],
                             dtype=np.int64).reshape(len(self.parts), len(missing))
            cf = np.zeros(len(missing), dtype=np.int64)
            for p, pid, gone in zip(self.parts, ids, self._deleted, strict=True):
                has = pid >= 0
                cf[has] += p.vocab_cf[pid[has]].astype(np.int64)
                if gone is not None and gone[0].size:  # the deleted rows' counts leave the collection model
                    at = np.minimum(np.searchsorted(gone[0], pid[has]), gone[0].size - 1)
                    hit = gone[0][at] == pid[has]
                    cf[np.flatnonzero(has)[hit]] -= gone[1][at[hit]]
            for j, key in enumerate(missing):
                found[key] = (tuple(ids[:, j].tolist()), int(cf[j]))
            with self._terms_lock:
                if len(cache) + len(missing) > self._TERMS_CACHE:
                    cache.clear()
                cache.update((k, found[k]) for k in missing)
        got = [found[k] for k in keys]
        ids_all = np.asarray([g[0] for g in got], dtype=np.int64).reshape(len(keys), len(self.parts)).T
        return np.ascontiguousarray(ids_all), np.asarray([g[1] for g in got], dtype=np.int64)

    # ------------------------------------------------------------------ lookups
    @property
    def n_docs(self) -> int:
        return int(self.starts[-1])

    def __len__(self) -> int:
        return self.n_docs

    def describe(self) -> dict[str, Any]:
        """Counts and sizes summed over the segments (for /health and logs)."""
        return dict(self.info)

    def locate(self, rows: IntArray) -> tuple[IntArray, IntArray]:
        """Each generation row's segment and its row there."""
        return locate(self.starts, rows)

    def doc_id(self, row: int) -> str:
        (s,), (r,) = self.locate(np.asarray([row], dtype=np.int64))
        return self.parts[int(s)].doc_id(int(r))

    def check_rows(self, rows: npt.ArrayLike) -> IntArray:
        """``rows`` as an int64 array; ``ValueError`` for a row out of range or given twice (as one folder says)."""
        return check_rows(rows, self.n_docs, self.doc_id)

    def readable(self, rows: npt.ArrayLike, langs: Collection[str]) -> npt.NDArray[np.bool_]:
        """Which of ``rows`` have any text in one of ``langs``."""
        r = self.check_rows(rows)
        out = np.zeros(r.size, dtype=bool)
        for s, at, local in by_segment(self.starts, r):
            out[at] = self.parts[s].readable(local, langs)
        return out

    # ------------------------------------------------------------------ the candidates of a query
    def view(self, rows: npt.ArrayLike, models: QueryModels) -> tuple[PassageArrays, IntArray]:
        """The candidates ``rows`` gathered from their segments, with the postings of the terms of ``models`` (the
        query's images), and each candidate's row in that view (the view holds the rows segment by segment)."""
        r = self.check_rows(rows)
        keys = sorted({(plang, t) for plang, image in models.items() for t in (*image.probs, *image.ideal)})
        ids, key_cf = self._term_stats(keys)
        held = (ids >= 0).any(axis=0)
        view_id = np.where(held, np.cumsum(held) - 1, -1)
        cf = key_cf[held]

        view_row = np.empty(r.size, dtype=np.int64)
        pieces: list[dict[str, npt.NDArray[Any]]] = []
        segs: list[int] = []  # the segments holding candidates, in the view's order
        done = 0
        for s, at, local in by_segment(self.starts, r):
            segs.append(s)
            view_row[at] = done + np.arange(at.size, dtype=np.int64)
            done += int(at.size)
            pieces.append(self._gather(self.parts[s], local, ids[s], view_id))

        def cat(name: str, dtype: Any) -> npt.NDArray[Any]:
            arrays = [p[name] for p in pieces]
            return np.concatenate(arrays).astype(dtype, copy=False) if arrays else np.zeros(0, dtype=dtype)

        counts = np.concatenate([p["counts"] for p in pieces]) if pieces else np.zeros((0, fmt.DOC_COLUMNS), np.int64)
        docs = np.zeros((r.size + 1, fmt.DOC_COLUMNS), dtype=np.int64)
        np.cumsum(counts, axis=0, out=docs[1:])
        arrays: dict[str, npt.NDArray[Any]] = {
            fmt.DOCS: docs,
            fmt.DOC_META: np.concatenate([p[fmt.DOC_META] for p in pieces]) if pieces else np.zeros((0, 4), np.uint8),
            fmt.UNIT_TAG: cat(fmt.UNIT_TAG, np.uint8),
            **{name: cat(name, np.int64) for name in (*_UNIT_ARRAYS[1:], *_SECTION_ARRAYS)},
            fmt.SEC_KIND: cat(fmt.SEC_KIND, np.uint8),
            fmt.TERM_ID: cat(fmt.TERM_ID, np.int32),
            **{name: cat(name, np.int64) for name in (fmt.TERM_END, fmt.POST_UNIT, fmt.POST_COUNT)},
            fmt.VOCAB_CF: cf,
            fmt.LANG_TOKENS: self.lang_tokens,
        }
        seg_of_row = np.repeat(np.asarray(segs, dtype=np.int64), [int(p["rows"].size) for p in pieces])
        seg_of_unit = np.repeat(np.asarray(segs, dtype=np.int64), [int(p["units"].size) for p in pieces])
        rows_local, units_local = cat("rows", np.int64), cat("units", np.int64)
        view = _View(arrays,
                     _Strings([p.doc_ids for p in self.parts], seg_of_row, rows_local),
                     _Strings([p.texts for p in self.parts], seg_of_unit, units_local),
                     _Strings([p.pids for p in self.parts], seg_of_unit, units_local),
                     _Keys([keys[i] for i in np.flatnonzero(held).tolist()]))
        return view, view_row

    @staticmethod
    def _gather(part: PassageArrays, lr: IntArray, ids: IntArray, view_id: IntArray) -> dict[str, npt.NDArray[Any]]:
        """One segment's share of a view: the rows ``lr`` (its own rows), their units and sections, and the term
        entries and postings of the query terms (``ids``: each query key's id in the segment, -1 when absent;
        ``view_id``: its id in the view)."""
        from service.passages.ranker import _expand, _query_entries

        d0 = part.docs[lr].astype(np.int64)
        cnt = part.docs[lr + 1].astype(np.int64) - d0
        units, _ = _expand(d0[:, 0], cnt[:, 0])
        sections, _ = _expand(d0[:, 1], cnt[:, 1])
        out: dict[str, npt.NDArray[Any]] = {"rows": lr, "units": units, fmt.DOC_META: part.doc_meta[lr]}
        for name in _UNIT_ARRAYS:
            out[name] = getattr(part, _attr(name))[units]
        for name in _SECTION_ARRAYS:
            out[name] = getattr(part, _attr(name))[sections]
        here = ids >= 0
        qj, qv = ids[here], view_id[here]
        if qj.size and lr.size:
            em, em_doc, eq = _query_entries(part, d0[:, 2], cnt[:, 2], qj)
        else:
            em = em_doc = eq = np.zeros(0, dtype=np.int64)
        tend = part.term_end[em].astype(np.int64)
        tstart = np.where(em == d0[em_doc, 2], 0, part.term_end[np.maximum(em - 1, 0)].astype(np.int64))
        plen = tend - tstart
        postings, _ = _expand(d0[em_doc, 3] + tstart, plen)
        n_entries = np.bincount(em_doc, minlength=lr.size).astype(np.int64)
        n_postings = np.bincount(em_doc, weights=plen, minlength=lr.size).astype(np.int64)
        before = np.cumsum(n_postings) - n_postings  # the postings of the documents before each one, in this share
        out[fmt.TERM_ID] = qv[eq]
        out[fmt.TERM_END] = np.cumsum(plen) - before[em_doc]
        out[fmt.POST_UNIT] = part.post_unit[postings]
        out[fmt.POST_COUNT] = part.post_count[postings]
        counts = np.empty((lr.size, fmt.DOC_COLUMNS), dtype=np.int64)
        counts[:, :2] = cnt[:, :2]
        counts[:, 2] = n_entries
        counts[:, 3] = n_postings
        out["counts"] = counts
        return out
