"""Neural encoders and rankers at query time: onnxruntime over the models folder written by ``priorart train``.

This module is also the single definition of *what* the models see, shared with training (training
imports it, so the two sides cannot drift):

- Text input = index terms of :class:`service.text.analysis.Analyzer` (stemmed, accent-folded),
  mapped to int64 ids with a per-language :class:`Vocabulary`. Id 0 is ``<pad>``, id 1 is ``<unk>``
  (reserved, zero vector); out-of-vocabulary terms are *dropped* before the length cap, so a sequence
  holds the first ``cap`` known terms. Caps: :data:`QUERY_MAX_TERMS` (200) for queries,
  :data:`DOC_MAX_TERMS` (500) for documents, :data:`CODES_MAX` (32) for classification codes.
- Document side (:func:`document_text`): the English claims; a record without English claims uses its
  English title + abstract; a record without any English text uses its first language's claims (or
  title + abstract), analysed in that language but looked up in the English vocabulary (mostly OOV).
  Titles are *not* added to the claims: training pairs a patent's title + abstract (the query) with its
  own claims (the document), which would be trivial if the title were on both sides.
- Codes (:func:`service.codes.record_codes`): CPC then IPC codes of a record, de-duplicated. A code
  missing from the code vocabulary falls back to its nearest syntactic ancestor that is present
  (``H01F27/14`` -> ``H01F27/00`` -> ``H01F`` -> ``H01`` -> ``H``), see
  :func:`service.codes.code_fallbacks`.

Models folder (``MODELS_DIR``, written by ``training.models.train``)::

    meta.json                 format name/version, settings, split summary, timings, dev metrics,
                              components (which file is what), sha256 + size of every file
    split.json                fixed train/dev/test split by publication (evaluation uses its test ids)
    vocab/words.<lang>.json   term list per language (index = id)
    vocab/codes.json          classification codes (index = id)
    embeddings/words.<lang>.npy, embeddings/codes.npy   word2vec (100 d) and DeepWalk (30 d) vectors
    dual/query.<lang>.onnx, dual/doc.onnx                dual encoder (dense stage)
    dense/doc_vectors.npy, dense/doc_ids.json           document vectors of the whole corpus
    rankers/text/{query.<lang>,doc,mlp}.onnx             text-only ranker
    rankers/meta/{query,doc,mlp}.onnx                    meta-only ranker (codes)
    rankers/joint/{query_text.<lang>,doc_text,query_meta,doc_meta,mlp}.onnx   text+meta joint ranker
    rankers/stacked.json      weights of the stacked model: w_text * text + w_meta * meta
    checkpoints/*.pt          torch state dicts (training side only; the service ignores them)

ONNX signatures: encoders take ``ids`` (int64, [batch, length]) and ``lengths`` (int64, [batch]) and
return ``vector`` (float32, [batch, dim]); the embedding lookup is inside the graph. Ranker MLPs take
the encoder vectors (``query``/``doc``, or ``query_text``/``doc_text``/``query_meta``/``doc_meta`` for
the joint model) and return ``score`` (float32, [batch], in (-1, 1)).

Dense stage: dual-encoder vectors are already divided by ``|v| + l``, so the inner product of a query
and a document vector *is* the smooth cosine similarity ``<u,v>/((|u|+l)(|v|+l))`` of the training
loss. FAISS must use the inner product (``IndexFlatIP`` / ``METRIC_INNER_PRODUCT``) on the vectors as
stored: do **not** L2-normalise them.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Self

import numpy as np

from service.codes import code_fallbacks, record_codes
from service.corpus.record import PatentRecord
from service.index.store import sha256_file
from service.text.analysis import SUPPORTED_LANGS, detect_language, get_analyzer

log = logging.getLogger(__name__)

MODELS_FORMAT = "priorart-models"
MODELS_VERSION = 1
VOCAB_FORMAT = "priorart-vocab"
PAD, UNK = "<pad>", "<unk>"
PAD_ID, UNK_ID = 0, 1
QUERY_MAX_TERMS = 200
DOC_MAX_TERMS = 500
CODES_MAX = 32
RANKER_KINDS = ("text", "meta", "joint", "stacked")


class ModelsFolderError(RuntimeError):
    """The models folder is missing, of another format, or a file does not match its checksum."""


class UnsupportedLanguageError(ValueError):
    """A query language for which the models folder has no encoder."""


# --------------------------------------------------------------------------------------------------
# Shared input definitions (training imports these)
# --------------------------------------------------------------------------------------------------


class Vocabulary:
    """Terms (or codes) <-> int64 ids. Index 0 is ``<pad>``, 1 is ``<unk>``; the rest in training order."""

    def __init__(self, terms: Sequence[str], *, name: str = "") -> None:
        terms = list(terms)
        if terms[:2] != [PAD, UNK]:
            terms = [PAD, UNK, *[t for t in terms if t not in (PAD, UNK)]]
        self.terms = terms
        self.name = name
        self.index = {t: i for i, t in enumerate(terms)}
        if len(self.index) != len(terms):
            raise ValueError(f"vocabulary {name!r} has duplicate entries")

    def __len__(self) -> int:
        return len(self.terms)

    def __contains__(self, term: object) -> bool:
        return term in self.index

    def ids(self, terms: Iterable[str], max_len: int | None = None) -> np.ndarray:
        """Ids of the known terms, in order, OOV dropped, at most ``max_len`` (int64)."""
        out: list[int] = []
        index = self.index
        for t in terms:
            i = index.get(t)
            if i is not None and i > UNK_ID:
                out.append(i)
                if max_len is not None and len(out) >= max_len:
                    break
        return np.asarray(out, dtype=np.int64)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": VOCAB_FORMAT,
            "version": 1,
            "name": self.name,
            "pad_id": PAD_ID,
            "unk_id": UNK_ID,
            "terms": self.terms,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        if data.get("format") != VOCAB_FORMAT:
            raise ValueError(f"not a vocabulary (format {data.get('format')!r}, expected {VOCAB_FORMAT!r})")
        return cls(list(data["terms"]), name=str(data.get("name", "")))

    def save(self, path: str | Path) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(self.to_json(), ensure_ascii=False), encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> Self:
        return cls.from_json(json.loads(Path(path).read_text(encoding="utf-8")))


class CodeVocabulary(Vocabulary):
    """Classification codes -> ids; unknown codes fall back to their nearest known syntactic ancestor."""

    def code_ids(self, codes: Iterable[str], max_len: int = CODES_MAX) -> np.ndarray:
        out: list[int] = []
        for code in codes:
            for cand in code_fallbacks(code):
                i = self.index.get(cand)
                if i is not None and i > UNK_ID:
                    if i not in out:
                        out.append(i)
                    break
            if len(out) >= max_len:
                break
        return np.asarray(out, dtype=np.int64)


def document_text(record: PatentRecord) -> tuple[str, str]:
    """``(text, lang)`` that the document-side encoders read (see the module docstring)."""
    if record.claims.get("en"):
        return record.claims_text("en"), "en"
    en = "\n".join(p for p in (record.title.get("en"), record.abstract.get("en")) if p)
    if en:
        return en, "en"
    for lang in record.languages:
        if lang not in SUPPORTED_LANGS:
            continue
        if record.claims.get(lang):
            return record.claims_text(lang), lang
        text = "\n".join(p for p in (record.title.get(lang), record.abstract.get(lang)) if p)
        if text:
            return text, lang
    return "", "en"


def document_ids(record: PatentRecord, vocab: Vocabulary, max_len: int = DOC_MAX_TERMS) -> np.ndarray:
    """Term ids of a record's document-side text (English vocabulary)."""
    text, lang = document_text(record)
    return vocab.ids(get_analyzer(lang)(text), max_len) if text else np.zeros(0, dtype=np.int64)


def query_ids(text: str, lang: str, vocab: Vocabulary, max_len: int = QUERY_MAX_TERMS) -> np.ndarray:
    """Term ids of a query text in ``lang`` (the language's vocabulary)."""
    return vocab.ids(get_analyzer(lang)(text), max_len)


def pad_batch(seqs: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Right-pad id sequences with ``<pad>``: ``(ids [batch, max(1, longest)], lengths [batch])``, int64."""
    lengths = np.asarray([len(s) for s in seqs], dtype=np.int64)
    width = max(1, int(lengths.max()) if len(seqs) else 1)
    ids = np.full((len(seqs), width), PAD_ID, dtype=np.int64)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = s
    return ids, lengths


# --------------------------------------------------------------------------------------------------
# onnxruntime side
# --------------------------------------------------------------------------------------------------


def choose_providers(requested: Sequence[str] | None = None) -> list[str]:
    """CUDA execution provider when onnxruntime has it (else CPU, with a logged warning)."""
    import onnxruntime as ort

    available = ort.get_available_providers()
    if requested:
        missing = [p for p in requested if p not in available]
        if missing:
            raise ValueError(f"onnxruntime providers {missing} not available; available: {available}")
        return list(requested)
    if "CUDAExecutionProvider" in available:
        return ["CUDAExecutionProvider", "CPUExecutionProvider"]
    log.warning("onnxruntime has no CUDA execution provider; running the neural models on CPU")
    return ["CPUExecutionProvider"]


class _Session:
    """One ONNX graph with its input names checked."""

    def __init__(self, path: Path, providers: Sequence[str], threads: int) -> None:
        import onnxruntime as ort

        opts = ort.SessionOptions()
        if threads > 0:
            opts.intra_op_num_threads = threads
            opts.inter_op_num_threads = 1
        opts.log_severity_level = 3
        self.path = path
        self.sess = ort.InferenceSession(str(path), sess_options=opts, providers=list(providers))
        self.inputs = [i.name for i in self.sess.get_inputs()]

    def __call__(self, **feeds: np.ndarray) -> np.ndarray:
        if sorted(feeds) != sorted(self.inputs):
            raise ValueError(f"{self.path.name}: expected inputs {self.inputs}, got {sorted(feeds)}")
        return np.asarray(self.sess.run(None, feeds)[0])


class ModelBundle:
    """The models folder loaded for inference (onnxruntime only).

    ``encode_query`` / ``encode_documents`` give dual-encoder vectors for the dense stage (inner product
    = smooth cosine). ``rerank_scores`` gives the text, meta, joint and stacked ranker scores of
    candidates. ``providers`` says which onnxruntime execution providers run the graphs.
    """

    def __init__(self, root: Path, meta: dict[str, Any], providers: Sequence[str], threads: int = 0) -> None:
        self.root = root
        self.meta = meta
        comp = meta["components"]
        self._providers = list(providers)

        def sess(rel: str) -> _Session:
            return _Session(root / rel, self._providers, threads)

        self.vocabs = {lang: Vocabulary.load(root / rel) for lang, rel in comp["vocab"]["words"].items()}
        self.codes = CodeVocabulary.load(root / comp["vocab"]["codes"])
        limits = comp.get("limits", {})
        self.query_max_terms = int(limits.get("query_max_terms", QUERY_MAX_TERMS))
        self.doc_max_terms = int(limits.get("doc_max_terms", DOC_MAX_TERMS))
        self.codes_max = int(limits.get("codes_max", CODES_MAX))
        dual = comp["dual"]
        self.dim = int(dual["dim"])
        self.smooth_l = float(dual["smooth_l"])
        self._dual_query = {lang: sess(rel) for lang, rel in dual["query"].items()}
        self._dual_doc = sess(dual["doc"])
        text, metac, joint = comp["rankers"]["text"], comp["rankers"]["meta"], comp["rankers"]["joint"]
        self._text_query = {lang: sess(rel) for lang, rel in text["query"].items()}
        self._text_doc, self._text_mlp = sess(text["doc"]), sess(text["mlp"])
        self._meta_query, self._meta_doc, self._meta_mlp = sess(metac["query"]), sess(metac["doc"]), sess(metac["mlp"])
        self._joint_qt = {lang: sess(rel) for lang, rel in joint["query_text"].items()}
        self._joint_dt, self._joint_qm = sess(joint["doc_text"]), sess(joint["query_meta"])
        self._joint_dm, self._joint_mlp = sess(joint["doc_meta"]), sess(joint["mlp"])
        stacked = comp["rankers"]["stacked"]
        self.stacked_weights = (float(stacked["w_text"]), float(stacked["w_meta"]))
        self.providers = self._dual_doc.sess.get_providers()
        log.info("models loaded from %s; onnxruntime providers: %s", root, self.providers)

    # ---- loading --------------------------------------------------------------------------------

    @classmethod
    def load(
        cls,
        models_dir: str | Path,
        *,
        providers: Sequence[str] | None = None,
        threads: int = 0,
        verify: bool = True,
    ) -> ModelBundle:
        """Load a models folder, verifying its format and every file's sha256 (``verify=False`` skips hashing)."""
        root = Path(models_dir)
        meta = read_models_meta(root)
        if verify:
            verify_models_files(root, meta)
        return cls(root, meta, choose_providers(providers), threads)

    # ---- inputs ---------------------------------------------------------------------------------

    @property
    def languages(self) -> tuple[str, ...]:
        """Query languages that every model can encode."""
        langs = set(self._dual_query) & set(self._text_query) & set(self._joint_qt)
        return tuple(lang for lang in SUPPORTED_LANGS if lang in langs)

    def _lang(self, text: str, lang: str | None) -> str:
        lang = lang or detect_language(text)
        if lang not in self.languages:
            raise UnsupportedLanguageError(
                f"no query encoder for language {lang!r}; this models folder has {', '.join(self.languages)}"
            )
        return lang

    def query_ids(self, text: str, lang: str) -> np.ndarray:
        """Term ids of a query (the language's vocabulary, capped)."""
        return query_ids(text, lang, self.vocabs[lang], self.query_max_terms)

    def document_ids(self, record: PatentRecord) -> np.ndarray:
        """Term ids of a record's document-side text (English vocabulary, capped)."""
        return document_ids(record, self.vocabs["en"], self.doc_max_terms)

    def code_ids(self, codes: Iterable[str]) -> np.ndarray:
        return self.codes.code_ids(codes, self.codes_max)

    # ---- dense stage ----------------------------------------------------------------------------

    def encode_query(self, text: str, lang: str | None = None) -> np.ndarray:
        """Dual-encoder vector of one query, float32 [dim] (inner product with document vectors = smooth cosine)."""
        lang = self._lang(text, lang)
        ids, lengths = pad_batch([self.query_ids(text, lang)])
        return self._dual_query[lang](ids=ids, lengths=lengths)[0].astype(np.float32)

    def encode_documents(self, records: Iterable[PatentRecord], batch_size: int = 256) -> np.ndarray:
        """Dual-encoder vectors of documents, float32 [n, dim], in input order."""
        return self._encode_docs((self.document_ids(r) for r in records), self._dual_doc, batch_size, self.dim)

    @staticmethod
    def _encode_docs(seqs: Iterable[np.ndarray], session: _Session, batch_size: int, dim: int | None) -> np.ndarray:
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        out: list[np.ndarray] = []
        batch: list[np.ndarray] = []
        for seq in seqs:
            batch.append(seq)
            if len(batch) >= batch_size:
                ids, lengths = pad_batch(batch)
                out.append(session(ids=ids, lengths=lengths))
                batch = []
        if batch:
            ids, lengths = pad_batch(batch)
            out.append(session(ids=ids, lengths=lengths))
        if not out:
            return np.zeros((0, dim or 0), dtype=np.float32)
        return np.concatenate(out).astype(np.float32)

    # ---- rerank ---------------------------------------------------------------------------------

    def rerank_scores(
        self,
        query: str,
        lang: str | None,
        query_codes: Sequence[str],
        candidate_records: Sequence[PatentRecord],
        batch_size: int = 256,
    ) -> dict[str, np.ndarray]:
        """Ranker scores of each candidate: ``{'text', 'meta', 'joint', 'stacked'}`` -> float32 [n].

        ``query_codes`` are the query's IPC/CPC codes (may be empty: the meta encoders then see no
        code and give a constant vector).
        """
        lang = self._lang(query, lang)
        n = len(candidate_records)
        if n == 0:
            return {k: np.zeros(0, dtype=np.float32) for k in RANKER_KINDS}
        q_ids, q_len = pad_batch([self.query_ids(query, lang)])
        c_ids, c_len = pad_batch([self.code_ids(query_codes)])
        doc_seqs = [self.document_ids(r) for r in candidate_records]
        doc_codes = [self.code_ids(record_codes(r)) for r in candidate_records]

        def rep(x: np.ndarray) -> np.ndarray:
            return np.repeat(x, n, axis=0)

        q_text = rep(self._text_query[lang](ids=q_ids, lengths=q_len))
        d_text = self._encode_docs(doc_seqs, self._text_doc, batch_size, None)
        text = self._text_mlp(query=q_text, doc=d_text)
        q_meta = rep(self._meta_query(ids=c_ids, lengths=c_len))
        d_meta = self._encode_docs(doc_codes, self._meta_doc, batch_size, None)
        meta = self._meta_mlp(query=q_meta, doc=d_meta)
        jq_text = rep(self._joint_qt[lang](ids=q_ids, lengths=q_len))
        jd_text = self._encode_docs(doc_seqs, self._joint_dt, batch_size, None)
        jq_meta = rep(self._joint_qm(ids=c_ids, lengths=c_len))
        jd_meta = self._encode_docs(doc_codes, self._joint_dm, batch_size, None)
        joint = self._joint_mlp(query_text=jq_text, doc_text=jd_text, query_meta=jq_meta, doc_meta=jd_meta)
        w_text, w_meta = self.stacked_weights
        return {
            "text": text.astype(np.float32),
            "meta": meta.astype(np.float32),
            "joint": joint.astype(np.float32),
            "stacked": (w_text * text + w_meta * meta).astype(np.float32),
        }


def read_models_meta(root: Path) -> dict[str, Any]:
    """``meta.json`` of a models folder, with its format and version checked."""
    path = root / "meta.json"
    if not path.is_file():
        raise ModelsFolderError(f"{path}: missing; {root} is not a models folder (run `priorart train` first)")
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ModelsFolderError(f"{path}: not valid JSON ({exc})") from exc
    if meta.get("format") != MODELS_FORMAT:
        raise ModelsFolderError(f"{path}: format {meta.get('format')!r}, expected {MODELS_FORMAT!r}")
    if meta.get("version") != MODELS_VERSION:
        raise ModelsFolderError(
            f"{path}: format version {meta.get('version')!r}, this code reads version {MODELS_VERSION}; retrain"
        )
    if "components" not in meta or "files" not in meta:
        raise ModelsFolderError(f"{path}: no 'components' or 'files' section")
    return dict(meta)


def verify_models_files(root: Path, meta: Mapping[str, Any]) -> None:
    """Check that every file listed in ``meta.json`` exists with its recorded size and sha256."""
    for rel, info in sorted(meta["files"].items()):
        path = root / rel
        if not path.is_file():
            raise ModelsFolderError(f"{path}: listed in meta.json but missing")
        size = path.stat().st_size
        if size != info["size"]:
            raise ModelsFolderError(f"{path}: size {size} differs from meta.json ({info['size']}); the file changed")
        digest = sha256_file(path)
        if digest != info["sha256"]:
            raise ModelsFolderError(
                f"{path}: sha256 {digest[:12]}... differs from meta.json ({info['sha256'][:12]}...); the file changed"
            )
