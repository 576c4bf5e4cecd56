"""Build-time passage index: every record's passage tree as arrays (format in :mod:`service.passages.format`).

:class:`PassageIndexBuilder` takes records one at a time (constant memory apart from the vocabulary:
the arrays stream to raw files and are converted to compact ``.npy`` files by :meth:`finish`).
:func:`build_passage_index` runs it over the doc store of an index folder (``priorart build`` calls
it after writing the doc store) and returns the ``meta.json`` component. :func:`concat_passage_indexes`
joins folders built for consecutive batches of documents into one (segments, sharding).
"""

from __future__ import annotations

import logging
import shutil
import sys
import time
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import numpy.typing as npt
from tqdm import tqdm

import service.passages.format as fmt
from service.corpus.record import PatentRecord
from service.passages.tree import KIND_ABSTRACT, layout
from service.text.analysis import SUPPORTED_LANGS, get_analyzer

log = logging.getLogger(__name__)

Analyze = Callable[[str], list[str]]

# raw stream name -> array typecode (converted to a compact dtype by finish)
_STREAMS = {
    fmt.DOCS: "q", fmt.DOC_META: "B", fmt.UNIT_TAG: "B", fmt.UNIT_LEN: "I", fmt.UNIT_SEC: "i",
    fmt.SEC_PARENT: "i", fmt.SEC_DEPTH: "I", fmt.SEC_KIND: "B", fmt.SEC_END: "I", fmt.SEC_UNIT: "i",
    fmt.SEC_HEAD_LEN: "I", fmt.TERM_ID: "I", fmt.TERM_END: "I",
    fmt.POST_UNIT: "I", fmt.POST_COUNT: "I",
    **{f"{b}.npy": "q" for b in fmt.BLOBS if b != fmt.VOCAB},
}
_KEEP_DTYPE = {fmt.DOCS: np.int64, fmt.TERM_ID: np.int32, **{f"{b}.npy": np.int64 for b in fmt.BLOBS}}
_FLUSH = 1 << 16  # entries buffered per stream before writing


class PassageIndexBuildError(ValueError):
    """The passage index cannot be built from this input (the message says why)."""


def compact(values: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """``values`` in the smallest integer dtype that holds them (unsigned when none is negative)."""
    if values.size == 0:
        return np.asarray(values, dtype=np.uint8)
    lo, hi = int(values.min()), int(values.max())
    kinds = (np.uint8, np.uint16, np.uint32, np.uint64) if lo >= 0 else (np.int8, np.int16, np.int32, np.int64)
    for dt in kinds:
        info = np.iinfo(dt)
        if info.min <= lo and hi <= info.max:
            return np.asarray(values, dtype=dt)
    raise PassageIndexBuildError(f"values {lo}..{hi} do not fit a 64-bit integer")


class PassageIndexBuilder:
    """Streams records into a passage index folder (rows in the order of :meth:`add`).

    ``analyzers`` maps a language to a function ``text -> index terms`` that must equal
    ``service.text.analysis.get_analyzer(lang)`` (``training.build.CachedAnalyzer`` is a faster one).
    """

    def __init__(self, out_dir: str | Path, *, analyzers: Mapping[str, Analyze] | None = None) -> None:
        self.out = Path(out_dir)
        self.out.mkdir(parents=True, exist_ok=True)
        if any(self.out.iterdir()):
            raise PassageIndexBuildError(f"{self.out} is not empty: build a passage index into a new folder")
        given = dict(analyzers or {})
        self._analyze: list[Analyze] = [given.get(lang) or get_analyzer(lang) for lang in SUPPORTED_LANGS]
        # term -> provisional id (order of first sight)
        self._vocab: list[dict[str, int]] = [{} for _ in SUPPORTED_LANGS]
        self._n_terms = 0
        self._cf = array("q")  # per provisional id, the term's count (the collection model)
        self._tokens = [0] * len(SUPPORTED_LANGS)
        self._files: dict[str, BinaryIO] = {}
        self._bufs: dict[str, array[int]] = {}
        for name, code in _STREAMS.items():
            self._files[name] = open(self.out / f"{name}.raw", "wb")  # noqa: SIM115 - closed in finish()
            self._bufs[name] = array(code)
        self._blobs: dict[str, BinaryIO] = {
            b: open(self.out / f"{b}.bin", "wb")  # noqa: SIM115 - closed in finish()
            for b in fmt.BLOBS if b != fmt.VOCAB
        }
        self._blob_pos = {b: 0 for b in self._blobs}
        for b in self._blobs:
            self._bufs[f"{b}.npy"].append(0)
        self._totals = [0] * fmt.DOC_COLUMNS
        self._bufs[fmt.DOCS].extend(self._totals)
        self.n_docs = 0
        self.n_passages = 0
        self._finished = False

    def __len__(self) -> int:
        return self.n_docs

    def _blob(self, name: str, text: str) -> None:
        data = text.encode("utf-8")
        self._blobs[name].write(data)
        self._blob_pos[name] += len(data)
        self._bufs[f"{name}.npy"].append(self._blob_pos[name])

    def add(self, record: PatentRecord) -> int:
        """Append one record; returns its row."""
        if self._finished:
            raise RuntimeError("PassageIndexBuilder already finished")
        lay = layout(record)
        b = self._bufs
        n_units, n_secs = len(lay.units), len(lay.sec_parent)
        self._blob(fmt.DOC_IDS, record.id)
        b[fmt.DOC_META].extend((lay.langs_mask, lay.desc_lang, lay.abstract_mask, lay.claims_mask))

        lens: list[int] = []
        entries: dict[int, list[int]] = {}  # provisional term id -> [unit, count, unit, count, ...]
        for ui, unit in enumerate(lay.units):
            terms = self._analyze[unit.lang](unit.text)
            lens.append(len(terms))
            self._tokens[unit.lang] += len(terms)
            vocab = self._vocab[unit.lang]
            cf = self._cf
            for term, n in Counter(terms).items():
                tid = vocab.get(term)
                if tid is None:
                    tid = vocab[term] = self._n_terms
                    self._n_terms += 1
                    cf.append(0)
                cf[tid] += n
                lst = entries.get(tid)
                if lst is None:
                    entries[tid] = [ui, n]
                else:
                    lst += (ui, n)
            b[fmt.UNIT_TAG].append(unit.kind << 2 | unit.lang)
            b[fmt.UNIT_SEC].append(unit.section)
            self._blob(fmt.TEXT, unit.text)
            self._blob(fmt.PID, unit.pid)
            self.n_passages += unit.kind >= KIND_ABSTRACT
        b[fmt.UNIT_LEN].extend(lens)

        head_len = [0] * n_secs
        for s in range(n_secs):
            parent, hu = lay.sec_parent[s], lay.sec_unit[s]
            head_len[s] = (head_len[parent] if parent >= 0 else 0) + (lens[hu] if hu >= 0 else 0)
        b[fmt.SEC_PARENT].extend(lay.sec_parent)
        b[fmt.SEC_DEPTH].extend(lay.sec_depth)
        b[fmt.SEC_KIND].extend(lay.sec_kind)
        b[fmt.SEC_END].extend(lay.sec_end)
        b[fmt.SEC_UNIT].extend(lay.sec_unit)
        b[fmt.SEC_HEAD_LEN].extend(head_len)

        end = 0
        for tid, lst in entries.items():
            b[fmt.TERM_ID].append(tid)
            b[fmt.POST_UNIT].extend(lst[0::2])
            b[fmt.POST_COUNT].extend(lst[1::2])
            end += len(lst) // 2
            b[fmt.TERM_END].append(end)
        t = self._totals
        t[0] += n_units
        t[1] += n_secs
        t[2] += len(entries)
        t[3] += end
        b[fmt.DOCS].extend(t)
        self.n_docs += 1
        if len(b[fmt.POST_UNIT]) >= _FLUSH:
            self._flush()
        return self.n_docs - 1

    def _flush(self) -> None:
        for name, buf in self._bufs.items():
            if buf:
                buf.tofile(self._files[name])
                del buf[:]

    def finish(self) -> dict[str, Any]:
        """Write the ``.npy`` files; returns the ``meta.json`` component (sizes, counts, bytes per document)."""
        if self._finished:
            raise RuntimeError("PassageIndexBuilder already finished")
        self._finished = True
        self._flush()
        for fh in (*self._files.values(), *self._blobs.values()):
            fh.close()
        # vocabulary: sorted "lang\0term" keys; a term's joint id is its rank
        keyed = sorted(
            (f"{SUPPORTED_LANGS[code]}\0{term}".encode(), tid) for code, vocab in enumerate(self._vocab)
            for term, tid in vocab.items()
        )
        self._vocab = [{} for _ in SUPPORTED_LANGS]
        remap = np.empty(len(keyed), dtype=np.int32)
        offsets = np.zeros(len(keyed) + 1, dtype=np.int64)
        with open(self.out / f"{fmt.VOCAB}.bin", "wb") as fh:
            pos = 0
            for rank, (key, tid) in enumerate(keyed):
                fh.write(key)
                pos += len(key)
                offsets[rank + 1] = pos
                remap[tid] = rank
        np.save(self.out / f"{fmt.VOCAB}.npy", offsets)
        del keyed
        cf = np.zeros(len(remap), dtype=np.int64)
        cf[remap] = np.frombuffer(self._cf, dtype=np.int64) if len(self._cf) else cf
        np.save(self.out / fmt.VOCAB_CF, compact(cf))
        np.save(self.out / fmt.LANG_TOKENS, np.asarray(self._tokens, dtype=np.int64))
        del self._cf[:]
        for name, code in _STREAMS.items():
            raw = self.out / f"{name}.raw"
            values = np.fromfile(raw, dtype=np.dtype(code))
            if name == fmt.TERM_ID:
                values = remap[values]
            elif name == fmt.DOCS or name == fmt.DOC_META:
                values = values.reshape(self.n_docs + 1, fmt.DOC_COLUMNS) if name == fmt.DOCS else \
                    values.reshape(self.n_docs, 4)
            keep = _KEEP_DTYPE.get(name)
            np.save(self.out / name, values.astype(keep) if keep is not None else compact(values))
            del values
            raw.unlink()
        return self.describe()

    def describe(self) -> dict[str, Any]:
        """The ``meta.json`` component of the finished folder."""
        return describe_folder(self.out)

    def abort(self) -> None:
        """Close the files of an unfinished build (the caller removes the folder)."""
        if not self._finished:
            self._finished = True
            for fh in (*self._files.values(), *self._blobs.values()):
                fh.close()


def describe_folder(folder: Path) -> dict[str, Any]:
    """Component entry for ``meta.json``: format, version, counts and bytes (total, per document)."""
    docs = np.load(folder / fmt.DOCS, mmap_mode="r")
    n = int(docs.shape[0] - 1)
    totals = [int(x) for x in docs[-1]]
    tags = np.load(folder / fmt.UNIT_TAG, mmap_mode="r")
    n_passages = int(np.count_nonzero((np.asarray(tags) >> 2) >= KIND_ABSTRACT))
    sizes = {name: (folder / name).stat().st_size for name in fmt.files()}
    total = sum(sizes.values())
    scoring = sum(sizes[name] for name in fmt.SCORING_ARRAYS)
    vocab = np.load(folder / f"{fmt.VOCAB}.npy", mmap_mode="r")
    return {
        "format": fmt.PASSAGES_FORMAT,
        "version": fmt.PASSAGES_VERSION,
        "dir": folder.name,
        "n_docs": n,
        "n_units": totals[0],
        "n_passages": n_passages,
        "n_sections": totals[1],
        "n_term_entries": totals[2],
        "n_postings": totals[3],
        "n_terms": int(vocab.shape[0] - 1),
        "bytes": total,
        "bytes_per_doc": total / n if n else 0.0,
        "scoring_bytes_per_doc": scoring / n if n else 0.0,
        "text_bytes_per_doc": (sizes[f"{fmt.TEXT}.bin"] + sizes[f"{fmt.TEXT}.npy"]) / n if n else 0.0,
    }


def build_passage_index(
    index_dir: str | Path,
    *,
    records: Iterable[PatentRecord] | None = None,
    analyzers: Mapping[str, Analyze] | None = None,
    progress: bool | None = None,
) -> dict[str, Any]:
    """Write ``<index_dir>/passages/`` from the index's doc store (rows in doc-store order).

    ``records`` replaces the doc store as input (it must hold the doc store's records in row order).
    Returns the ``meta.json`` component (``components["passages"]``), with the build's wall and CPU seconds.
    """
    from service.index.store import DocStore

    index_dir = Path(index_dir)
    out = index_dir / fmt.PASSAGES_DIR
    if out.exists():
        shutil.rmtree(out)
    started, cpu0 = time.perf_counter(), time.process_time()
    docs: DocStore | None = None
    n: int | None = None
    source: Iterable[PatentRecord]
    if records is None:
        store = docs = DocStore.load(index_dir)
        n = len(store)
        source = (store.get_row(r) for r in range(len(store)))
    else:
        source = records
    show = sys.stderr.isatty() if progress is None else progress
    builder = PassageIndexBuilder(out, analyzers=analyzers)
    try:
        for rec in tqdm(source, total=n, desc="passage index", unit="doc", disable=not show, file=sys.stderr,
                        mininterval=1):
            builder.add(rec)
        info = builder.finish()
    except BaseException:
        builder.abort()
        shutil.rmtree(out, ignore_errors=True)
        raise
    finally:
        if docs is not None:
            docs.close()
    if n is not None and info["n_docs"] != n:
        raise PassageIndexBuildError(f"passage index holds {info['n_docs']} documents, the doc store {n}")
    info["seconds"] = round(time.perf_counter() - started, 3)
    info["cpu_s"] = round(time.process_time() - cpu0, 3)  # wall time suffers on a shared machine
    log.info("passage index: %d documents, %d passages, %.0f bytes per document, %.1f s (%.1f CPU s)",
             info["n_docs"], info["n_passages"], info["bytes_per_doc"], info["seconds"], info["cpu_s"])
    return info


def concat_passage_indexes(parts: Sequence[str | Path], out_dir: str | Path) -> dict[str, Any]:
    """Join passage index folders (rows of ``parts[0]``, then ``parts[1]``, ...) into ``out_dir``.

    Per-document arrays are concatenated as they are (they are relative to their document); the
    document pointers are offset, and term ids are mapped into the merged sorted vocabulary.
    """
    if not parts:
        raise PassageIndexBuildError("nothing to concatenate")
    folders = [Path(p) for p in parts]
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if any(out.iterdir()):
        raise PassageIndexBuildError(f"{out} is not empty: concatenate into a new folder")
    keys: list[list[bytes]] = []
    for f in folders:
        data = np.fromfile(f / f"{fmt.VOCAB}.bin", dtype=np.uint8).tobytes()
        off = np.load(f / f"{fmt.VOCAB}.npy")
        keys.append([data[off[i]: off[i + 1]] for i in range(off.size - 1)])
    merged = sorted(set().union(*keys))
    rank = {k: i for i, k in enumerate(merged)}
    offsets = np.zeros(len(merged) + 1, dtype=np.int64)
    np.cumsum([len(k) for k in merged], out=offsets[1:])
    (out / f"{fmt.VOCAB}.bin").write_bytes(b"".join(merged))
    np.save(out / f"{fmt.VOCAB}.npy", offsets)
    for b in fmt.BLOBS:
        if b == fmt.VOCAB:
            continue
        blobs = [np.fromfile(f / f"{b}.bin", dtype=np.uint8) for f in folders]
        offs = [np.load(f / f"{b}.npy") for f in folders]
        base = np.cumsum([0] + [x.size for x in blobs[:-1]])
        with open(out / f"{b}.bin", "wb") as fh:
            for x in blobs:
                fh.write(x.tobytes())
        np.save(out / f"{b}.npy", np.concatenate([offs[0], *(o[1:] + s for o, s in zip(offs[1:], base[1:],
                                                                                      strict=True))]))
    cf = np.zeros(len(merged), dtype=np.int64)
    for f, ks in zip(folders, keys, strict=True):
        np.add.at(cf, np.asarray([rank[k] for k in ks], dtype=np.int64), np.load(f / fmt.VOCAB_CF).astype(np.int64))
    np.save(out / fmt.VOCAB_CF, compact(cf))
    np.save(out / fmt.LANG_TOKENS, np.sum([np.load(f / fmt.LANG_TOKENS) for f in folders], axis=0).astype(np.int64))
    for name in fmt.ARRAYS:
        arrays = [np.load(f / name) for f in folders]
        if name == fmt.DOCS:
            starts = np.cumsum([np.zeros(fmt.DOC_COLUMNS, np.int64)] + [a[-1] for a in arrays[:-1]], axis=0)
            joined = np.concatenate([arrays[0], *(a[1:] + s for a, s in zip(arrays[1:], starts[1:], strict=True))])
            np.save(out / name, joined.astype(np.int64))
        elif name == fmt.TERM_ID:
            maps = [np.asarray([rank[k] for k in ks], dtype=np.int32) for ks in keys]
            np.save(out / name, np.concatenate([m[a] for m, a in zip(maps, arrays, strict=True)]).astype(np.int32))
        elif name == fmt.DOC_META:
            np.save(out / name, np.concatenate(arrays).astype(np.uint8))
        else:
            np.save(out / name, compact(np.concatenate([a.astype(np.int64) for a in arrays])))
    return describe_folder(out)
