"""Index components: what an index folder (a build, a segment, a shard) holds for its documents, one class each, in
one registry (:data:`COMPONENTS`) that the build, ``add``, the merges and compaction, the shard builder and the
engine's loader all go through.

A component has

- ``name``: its key in ``meta.json``'s ``components``, and ``version``: its format version;
- ``writer(out, ctx)``: writes it into the folder ``out`` from records. The writer's ``add`` sees every record in
  row order; then the writers ``finish`` in registry order, each returning its ``meta.json`` entry. A component
  listed after ``docstore`` may read the records back from the doc store written in ``out`` (the passage index,
  the encodings) instead of holding them;
- ``merge(src, out, rows, ctx)``: the live ``rows`` of the opened folder (generation) ``src`` into ``out`` (a merge
  of segments, a compaction). By default the component is written again from the rows' records, the way
  ``writer`` writes it; the encodings copy their rows instead of running the models again;
- ``open(folder, **options)``: the component of an opened folder, memory-mapped and read-only; of a generation of
  several segments, each segment's mapped where it lies (the format is read by the component's own module: the
  sparse index by :mod:`service.retrieval.first_stage`, the passages by :mod:`service.passages.index`, ...);
- ``applies(ctx)`` / ``present(folder)``: whether a write holds it (the encodings only with models) and whether
  an opened folder has it.

Adding a kind of per-document component is one class here and its line in :data:`COMPONENTS`; the stage that reads
it opens it through the registry.

The parts of the index as a whole (:data:`INDEX_PARTS`: the translation tables, the compound word lists, the fusion
weights) are learned once from the whole corpus by the training package's steps and shared by every segment (a
segment is analysed with the index's word lists). Each is one class too, with its name and format version:
``write(out, value)`` writes what the training step learned at the top of a folder and returns its ``meta.json``
entry, ``open(folder)`` reads it back (a reload reuses an unchanged file's object), ``copy(src, out)`` gives another
folder of the index (a shard) the same part. Their ``merge`` is to keep them: a merge or a compaction writes segments,
and the index-level files stay at the top of the folder. The build, the shard builder, the learning steps and the
loaders go through :func:`write_part`, :func:`copy_part` and :func:`open_part` (they live in
:mod:`service.index.parts`, below the retrieval layer that opens them; this module is the registry's front). (The
models folder is copied by ``add_models`` and opened by the pipeline; it is not in this registry.)
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from tqdm import tqdm

from service.corpus.record import PatentRecord
from service.index.folder import BuildSettings, FolderPart, IndexFolder, Layout
from service.index.parts import INDEX_PARTS, IndexPart, copy_part, open_part, write_part
from service.index.store import DocStore, DocStoreWriter

log = logging.getLogger(__name__)

ENCODE_BATCH = 256
"""Documents encoded per call of the models' document side."""

DOCSTORE_VERSION = 1


class EmptyBatchError(ValueError):
    """A batch without records."""


# ------------------------------------------------------------------------------------------ writing context


@dataclass
class WriteContext:
    """What the writers of one folder share: the index's settings and analyzers, and for the encodings the models.

    ``models``: the models folder whose document side writes the encodings (None: no encodings written).
    ``encoder``: the pretrained encoder's folder (the index's ``encoder/``) whose vectors the dense component writes
    when there are no models (None with no models: no dense component). ``encode_with``: who encodes them instead of
    this process, ``(folder, encoder, n, dim, out, progress) -> what ran`` (a build's Ray Data job,
    training/dense_ray.py).
    ``dense_kind``: ``vectors`` for a segment (its vectors are searched exactly, beside the first segment's FAISS
    index), else the kind of FAISS index to build (flat, hnsw, ivf; :data:`service.retrieval.dense.INDEX_KINDS`).
    ``metric``: the dense metric when the folder is a segment of an index with models (the index's).
    ``want_vocab``: keep each language's vocabulary in ``vocabs`` (the build's translation step reads it).
    ``times``: seconds per step (``encode``, ``faiss``), for the build report.
    """

    settings: BuildSettings
    analyzers: Mapping[str, Callable[[str], list[str]]]
    progress: bool = False
    models: Path | None = None
    encoder: Path | None = None
    encode_with: Callable[..., dict[str, Any]] | None = None
    device: str = "auto"
    dense_kind: str = "vectors"
    metric: str | None = None
    hnsw_m: int | None = None
    nlist: int | None = None
    batch_size: int = ENCODE_BATCH
    want_vocab: bool = False
    vocabs: dict[str, set[str]] = field(default_factory=dict)
    times: dict[str, float] = field(default_factory=dict)
    _models: Any = None
    _dims: dict[str, dict[str, int]] = field(default_factory=dict)

    def document_models(self) -> Any:
        """The models' document side (:class:`service.retrieval.neural.Models`), loaded once."""
        if self._models is None:
            from service.retrieval.neural import Models

            assert self.models is not None
            self._models = Models(self.models, sides=("document",), device=self.device)
        return self._models

    def pretrained(self) -> Any:
        """The pretrained encoder (:class:`service.retrieval.pretrained.PretrainedEncoder`), loaded once a process."""
        from service.retrieval.pretrained import load_pretrained

        assert self.encoder is not None
        return load_pretrained(self.encoder, device=self.device)

    def encoded(self, out: Path) -> dict[str, int]:
        """Encode the documents of the doc store written in ``out`` into ``dense/vectors.npy`` and one
        ``rerank/<encoding>.npy`` each, once for both components; the dimension of each encoding."""
        key = str(out)
        if key not in self._dims:
            from service.retrieval.neural import ENCODINGS

            paths = {"dual": out / Layout.DENSE_VECTORS, **{name: out / Layout.rerank(name) for name in ENCODINGS}}
            docs = DocStore.load(out)
            t = time.perf_counter()
            try:
                self._dims[key] = encode_documents(len(docs), lambda a, b: [docs.get_row(r) for r in range(a, b)],
                                                   self.document_models(), paths, batch_size=self.batch_size,
                                                   progress=self.progress)
            finally:
                docs.close()
            self.times["encode"] = time.perf_counter() - t
        return self._dims[key]


def encode_documents(
    n: int,
    batch: Callable[[int, int], list[PatentRecord]],
    models: Any,
    paths: Mapping[str, Path],
    *,
    batch_size: int = ENCODE_BATCH,
    progress: bool = False,
) -> dict[str, int]:
    """Encode ``n`` documents (``batch(start, end)`` gives rows ``start..end-1``) with the document side of
    ``models`` (:class:`service.retrieval.neural.Models`) into one ``.npy`` per encoding (``paths``: ``dual``
    and every rerank encoding); returns the dimension of each."""
    arrays: dict[str, np.memmap] = {}
    done = 0
    with tqdm(total=n, desc="encoding documents", unit="doc", disable=not progress, file=sys.stderr,
              mininterval=1) as bar:
        for start in range(0, n, batch_size):
            recs = batch(start, min(n, start + batch_size))
            enc = models.encode_documents(recs)
            if not arrays:
                for name, path in paths.items():
                    path.parent.mkdir(parents=True, exist_ok=True)
                    arrays[name] = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32,
                                                             shape=(n, enc[name].shape[1]))
            for name, arr in arrays.items():
                arr[done : done + len(recs)] = enc[name]
            done += len(recs)
            bar.update(len(recs))
    if done != n or not arrays:
        raise ValueError(f"encoded {done} documents of {n}")
    for arr in arrays.values():
        arr.flush()
    dims = {name: int(arr.shape[1]) for name, arr in arrays.items()}
    arrays.clear()
    return dims


# ------------------------------------------------------------------------------------------ the contract


class ComponentWriter(Protocol):
    def add(self, record: PatentRecord) -> None: ...

    def finish(self) -> dict[str, Any]: ...

    def abort(self) -> None: ...


class _AfterStore:
    """A writer that reads the records back from the doc store written beside it: ``finish`` does the work."""

    def __init__(self, finish: Callable[[], dict[str, Any]]) -> None:
        self._finish = finish

    def add(self, record: PatentRecord) -> None:
        pass

    def finish(self) -> dict[str, Any]:
        return self._finish()

    def abort(self) -> None:
        pass


class Component(FolderPart):
    """One kind of per-document index component (see the module doc)."""

    def applies(self, ctx: WriteContext) -> bool:
        return True

    def writer(self, out: Path, ctx: WriteContext) -> ComponentWriter:
        raise NotImplementedError

    def merge(self, src: IndexFolder, out: Path, rows: np.ndarray, ctx: WriteContext,
              records: Callable[[], Iterable[PatentRecord]]) -> dict[str, Any] | None:
        """The entry of the component of ``src``'s ``rows`` in ``out``; None: written from ``records`` by the writer
        (the default), along with the other components that are."""
        return None


class DocStoreComponent(Component):
    """The records (``docs.jsonl`` and its headers), their ids, dates and codes: :mod:`service.index.store`."""

    name = "docstore"

    @property
    def version(self) -> int:
        return DOCSTORE_VERSION

    def writer(self, out: Path, ctx: WriteContext) -> ComponentWriter:
        return _DocStoreWriter(DocStoreWriter(out))

    def open(self, folder: IndexFolder, **options: Any) -> DocStore:
        return DocStore.of_folder(folder)


class _DocStoreWriter:
    def __init__(self, store: DocStoreWriter) -> None:
        self.store = store

    def add(self, record: PatentRecord) -> None:
        self.store.add(record)

    def finish(self) -> dict[str, Any]:
        entry = self.store.close()
        if entry["n_docs"] == 0:
            raise EmptyBatchError("no records")
        return entry

    def abort(self) -> None:
        self.store.abort()


class SparseComponent(Component):
    """One sparse (BM25 / tf-idf) index per indexed language: :mod:`service.retrieval.sparse`."""

    name = "bm25"

    @property
    def version(self) -> int:
        from service.retrieval.sparse import SPARSE_VERSION

        return SPARSE_VERSION

    def writer(self, out: Path, ctx: WriteContext) -> ComponentWriter:
        return _SparseWriter(out, ctx)

    def open(self, folder: IndexFolder, **options: Any) -> dict[str, Any]:
        """``{lang: SparseIndex}`` (options of :func:`service.retrieval.first_stage.open_sparse`: ``mmap``, ``stats``:
        the collection statistics per language to weight with)."""
        from service.retrieval.first_stage import open_sparse

        stats = options.get("stats") or {}
        return {lang: open_sparse(folder, lang, options.get("mmap", True), stats.get(lang))
                for lang in folder.settings.index_langs}


class _SparseWriter:
    def __init__(self, out: Path, ctx: WriteContext) -> None:
        from service.retrieval.sparse import SparseIndexBuilder

        s = ctx.settings
        self.out, self.ctx = out, ctx
        self.langs = list(s.index_langs)
        self.builders = {lang: SparseIndexBuilder(scoring=s.scoring, k1=s.k1, b=s.b, epsilon=s.epsilon)
                         for lang in self.langs}

    def add(self, record: PatentRecord) -> None:
        have, fields, analyzers = record.languages, self.ctx.settings.fields, self.ctx.analyzers
        for lang in self.langs:
            self.builders[lang].add(analyzers[lang](record.text(lang, fields)) if lang in have else [])

    def finish(self) -> dict[str, Any]:
        entry: dict[str, Any] = {}
        for lang in self.langs:
            index = self.builders.pop(lang).finish()
            index.save(self.out / Layout.bm25(lang))
            entry[lang] = {"dir": Layout.bm25(lang), "n_docs": index.n_docs, "n_terms": len(index.vocab),
                           "nnz": int(index.params["nnz"]), "avgdl": index.avgdl}
            log.info("bm25/%s: %d documents with text, %d terms, %d postings", lang, index.n_docs, len(index.vocab),
                     index.params["nnz"])
            if self.ctx.want_vocab:
                self.ctx.vocabs[lang] = set(index.vocab)
            del index
        return entry

    def abort(self) -> None:
        self.builders.clear()


class PassagesComponent(Component):
    """The passages of every document, by section, for ``/passages`` and claim charts: :mod:`service.passages`."""

    name = "passages"

    @property
    def version(self) -> int:
        from service.passages.format import PASSAGES_VERSION

        return PASSAGES_VERSION

    def writer(self, out: Path, ctx: WriteContext) -> ComponentWriter:
        from service.passages.builder import build_passage_index

        return _AfterStore(lambda: build_passage_index(out, analyzers=ctx.analyzers, progress=ctx.progress))

    def open(self, folder: IndexFolder, **options: Any) -> Any:
        from service.passages.index import PassageIndex

        return PassageIndex.load(folder, mmap=options.get("mmap", True))


class DenseComponent(Component):
    """The dual encoder's document vectors and their FAISS index: :mod:`service.retrieval.dense`. A segment holds
    its vectors only (``kind: vectors``), searched exactly beside the first segment's index."""

    name = "dense"

    @property
    def version(self) -> int:
        from service.retrieval.dense import DENSE_FORMAT_VERSION

        return DENSE_FORMAT_VERSION

    def applies(self, ctx: WriteContext) -> bool:
        return ctx.models is not None or ctx.encoder is not None

    def writer(self, out: Path, ctx: WriteContext) -> ComponentWriter:
        return _AfterStore(lambda: self._write(out, ctx) if ctx.models is not None else self._pretrained(out, ctx))

    def _pretrained(self, out: Path, ctx: WriteContext) -> dict[str, Any]:
        """The pretrained encoder's vector of every document (:meth:`PretrainedEncoder.encode_documents`, one document
        a run, with a progress bar; or ``ctx.encode_with``'s job) and, for a build, the FAISS index of the size's kind
        (:func:`dense_kind_for`)."""
        from service.retrieval.pretrained import DOCUMENT_TOKENS

        encoder = ctx.pretrained()
        docs = DocStore.load(out)
        n = len(docs)
        t = time.perf_counter()
        ran: dict[str, Any] = {"engine": "local"}
        try:
            (out / Layout.DENSE).mkdir(exist_ok=True)
            vectors = np.lib.format.open_memmap(out / Layout.DENSE_VECTORS, mode="w+", dtype=np.float32,
                                                shape=(n, encoder.dim))
            if ctx.encode_with is not None:
                assert ctx.encoder is not None
                ran = ctx.encode_with(out, ctx.encoder, n, encoder.dim, vectors, progress=ctx.progress)
            else:
                step = max(ctx.batch_size, 64)
                with tqdm(total=n, desc=f"dense vectors ({encoder.device})", unit="doc", disable=not ctx.progress,
                          file=sys.stderr, mininterval=1) as bar:
                    for a in range(0, n, step):
                        b = min(n, a + step)
                        vectors[a:b] = encoder.encode_documents([docs.get_row(r) for r in range(a, b)])
                        bar.update(b - a)
            vectors.flush()
            del vectors
        finally:
            docs.close()
        ctx.times["encode"] = time.perf_counter() - t
        entry = {"version": self.version, "vectors": Layout.DENSE_VECTORS, "dim": encoder.dim,
                 "metric": encoder.similarity, "n_docs": n, "encoder": Layout.ENCODER, "device": encoder.device,
                 "precision": encoder.precision, "document_tokens": DOCUMENT_TOKENS, "encoded_by": ran,
                 "docs_per_s": round(n / ctx.times["encode"], 1) if ctx.times["encode"] > 0 else None}
        if ctx.dense_kind == "vectors":
            return {**entry, "kind": "vectors"}
        kind = dense_kind_for(n) if ctx.dense_kind == "auto" else ctx.dense_kind
        t = time.perf_counter()
        params = _write_faiss(out, np.load(out / Layout.DENSE_VECTORS), kind, encoder.similarity, hnsw_m=ctx.hnsw_m,
                              nlist=ctx.nlist)
        ctx.times["faiss"] = time.perf_counter() - t
        return {**entry, "index": Layout.DENSE_FAISS, "kind": kind, "params": params}

    def _write(self, out: Path, ctx: WriteContext) -> dict[str, Any]:
        dims = ctx.encoded(out)
        models = ctx.document_models()
        vectors = np.load(out / Layout.DENSE_VECTORS, mmap_mode="r")
        n = len(vectors)
        if ctx.dense_kind == "vectors":
            return {"version": self.version, "vectors": Layout.DENSE_VECTORS, "dim": dims["dual"], "kind": "vectors",
                    "metric": ctx.metric or models.similarity, "n_docs": n}
        t = time.perf_counter()
        metric = models.similarity
        params = _write_faiss(out, np.asarray(vectors), ctx.dense_kind, metric, hnsw_m=ctx.hnsw_m, nlist=ctx.nlist)
        ctx.times["faiss"] = time.perf_counter() - t
        return {"version": self.version, "vectors": Layout.DENSE_VECTORS, "index": Layout.DENSE_FAISS,
                "dim": models.dim, "kind": ctx.dense_kind, "metric": metric, "params": params, "n_docs": n,
                "encoder": f"{Layout.MODELS}/" + str(models.meta["components"]["dual"]["doc"])}

    def merge(self, src: IndexFolder, out: Path, rows: np.ndarray, ctx: WriteContext,
              records: Callable[[], Iterable[PatentRecord]]) -> dict[str, Any]:
        """The rows' vectors and a FAISS index of the index's kind over them (a merged segment may become the first
        of a generation, which is searched through its index)."""
        from service.retrieval.dense import DEFAULT_HNSW_M, DenseIndex

        dense = DenseIndex.load(src, device="cpu")
        (out / Layout.DENSE).mkdir(exist_ok=True)
        vectors = np.ascontiguousarray(np.asarray(dense.vectors)[rows], dtype=np.float32)
        np.save(out / Layout.DENSE_VECTORS, vectors)
        comp = src.component("dense")
        kind, metric = str(comp.get("kind", "flat")), str(comp.get("metric", "inner_product"))
        params = _write_faiss(out, vectors, kind, metric,
                              hnsw_m=int(comp.get("params", {}).get("M", DEFAULT_HNSW_M)))
        return {**comp, "vectors": Layout.DENSE_VECTORS, "index": Layout.DENSE_FAISS, "params": params,
                "n_docs": len(rows)}

    def open(self, folder: IndexFolder, **options: Any) -> Any:
        from service.retrieval.dense import DenseIndex

        return DenseIndex.load(folder, **options)


EXACT_DENSE_MAX = 20_000
"""Documents up to which a build's dense index is exact (``flat``); above, HNSW (``dense_kind="auto"``)."""


def dense_kind_for(n_docs: int) -> str:
    """The FAISS index kind of a build's ``auto``: exact for small indexes, HNSW above :data:`EXACT_DENSE_MAX`."""
    return "flat" if n_docs <= EXACT_DENSE_MAX else "hnsw"


def _write_faiss(out: Path, vectors: np.ndarray, kind: str, metric: str, *, hnsw_m: int | None = None,
                 nlist: int | None = None) -> dict[str, Any]:
    """``dense/index.faiss`` of ``kind`` over ``vectors`` (stored as the encoder wrote them; the index holds the
    normalised copy for cosine); its parameters."""
    import faiss

    from service.retrieval.dense import DEFAULT_HNSW_M, build_faiss_index, prepare_vectors

    if metric == "cosine":
        vectors = prepare_vectors(vectors, metric)
    index, described = build_faiss_index(vectors, kind, metric, hnsw_m=hnsw_m or DEFAULT_HNSW_M, nlist=nlist)
    faiss.write_index(index, str(out / Layout.DENSE_FAISS))
    return dict(described["params"])


class RerankComponent(Component):
    """The rankers' document encodings (text, meta, joint), one ``rerank/<encoding>.npy`` each, row-aligned:
    :func:`service.retrieval.neural.load_encodings`."""

    name = "rerank"

    @property
    def version(self) -> int:
        from service.retrieval.neural import RERANK_VERSION

        return RERANK_VERSION

    def applies(self, ctx: WriteContext) -> bool:
        return ctx.models is not None

    def writer(self, out: Path, ctx: WriteContext) -> ComponentWriter:
        return _AfterStore(lambda: self._write(out, ctx))

    def _write(self, out: Path, ctx: WriteContext) -> dict[str, Any]:
        from service.retrieval.neural import ENCODINGS

        dims = ctx.encoded(out)
        entry: dict[str, Any] = {"version": self.version, "files": {name: Layout.rerank(name) for name in ENCODINGS},
                                 "dims": {name: dims[name] for name in ENCODINGS}}
        if ctx.dense_kind != "vectors":  # a build: the weights the models' rankers are stacked with
            entry["stacked_weights"] = list(ctx.document_models().stacked_weights)
        return entry

    def merge(self, src: IndexFolder, out: Path, rows: np.ndarray, ctx: WriteContext,
              records: Callable[[], Iterable[PatentRecord]]) -> dict[str, Any]:
        from service.retrieval.neural import load_encodings

        (out / Layout.RERANK).mkdir(exist_ok=True)
        for name, arr in load_encodings(src, src.n_rows).items():
            np.save(out / Layout.rerank(name), np.ascontiguousarray(np.asarray(arr)[rows]))
        return {k: v for k, v in src.component("rerank").items() if k != "stacked_weights"}

    def open(self, folder: IndexFolder, **options: Any) -> Any:
        from service.retrieval.neural import load_encodings

        return load_encodings(folder, folder.n_rows, mmap=options.get("mmap", True))


class WordsComponent(Component):
    """Every word of every field with its position, the dates, the codes: what the query language (Boolean,
    proximity, field queries) evaluates: :mod:`service.querylang.words`."""

    name = "words"

    @property
    def version(self) -> int:
        from service.querylang.words import WORDS_VERSION

        return WORDS_VERSION

    def writer(self, out: Path, ctx: WriteContext) -> ComponentWriter:
        from service.querylang.words import WordIndexWriter

        return WordIndexWriter(out)

    def open(self, folder: IndexFolder, **options: Any) -> Any:
        from service.querylang.words import WordSegment

        return WordSegment(folder.root)


COMPONENTS: dict[str, Component] = {c.name: c for c in (
    DocStoreComponent(), SparseComponent(), WordsComponent(), PassagesComponent(), DenseComponent(),
    RerankComponent(),
)}
"""Every per-document component, in write order (the doc store first: the others may read it back)."""


# ------------------------------------------------------------------------------------------ writing and merging


def write_components(out: Path, records: Iterable[PatentRecord], ctx: WriteContext, *,
                     names: Sequence[str] | None = None,
                     on_record: Callable[[PatentRecord], None] | None = None) -> dict[str, Any]:
    """Write the components that apply to ``ctx`` (or those ``names``) into ``out`` from ``records`` (row order);
    their ``meta.json`` entries by name. Raises :class:`EmptyBatchError` for no records."""
    chosen = [c for c in COMPONENTS.values() if (c.name in names if names is not None else c.applies(ctx))]
    writers = [(c.name, c.writer(out, ctx)) for c in chosen]
    streaming = any(not isinstance(w, _AfterStore) for _, w in writers)
    try:
        for rec in tqdm(records, desc="indexing", unit="doc", disable=not (ctx.progress and streaming),
                        file=sys.stderr, mininterval=1):
            for _, w in writers:
                w.add(rec)
            if on_record is not None:
                on_record(rec)
        entries: dict[str, Any] = {}
        for name, w in writers:
            entries[name] = w.finish()
    except BaseException:
        for _, w in writers:
            w.abort()
        raise
    return entries


def merge_components(src: IndexFolder, out: Path, rows: np.ndarray, docs: DocStore,
                     ctx: WriteContext) -> dict[str, Any]:
    """The components of ``src``'s live ``rows`` (generation rows, in order) written into ``out``: those a component
    merges itself (the encodings: copied), the others written again from the rows' records."""
    def records() -> Iterable[PatentRecord]:
        return (docs.get_row(int(r)) for r in rows.tolist())

    held = [c for c in COMPONENTS.values() if c.present(src) or c.name == "docstore"]
    copied: dict[str, Any] = {}
    rewrite: list[str] = []
    for c in held:
        entry = c.merge(src, out, rows, ctx, records)
        if entry is None:
            rewrite.append(c.name)
        else:
            copied[c.name] = entry
    written = write_components(out, records(), ctx, names=rewrite)
    return {name: written[name] if name in written else copied[name] for name in (c.name for c in held)}


def open_component(name: str, folder: IndexFolder, **options: Any) -> Any:
    """The component ``name`` of an opened folder (:meth:`Component.open`)."""
    return COMPONENTS[name].open(folder, **options)


__all__ = ["COMPONENTS", "ENCODE_BATCH", "INDEX_PARTS", "Component", "ComponentWriter", "DenseComponent",
           "DocStoreComponent", "EmptyBatchError", "IndexPart", "PassagesComponent", "RerankComponent",
           "SparseComponent", "WordsComponent", "WriteContext", "copy_part", "encode_documents",
           "merge_components", "open_component", "open_part", "write_components", "write_part"]
