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

from service.codes import code_fallbacks
from service.corpus.record import PatentRecord
from service.index.folder import sha256_file
from service.text.analysis import SUPPORTED_LANGS, get_analyzer
from service.versioned import read_versioned

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


class ModelsLayout:
    """Relative paths of everything a models folder may hold (the module docstring says what each is), as
    :class:`service.index.folder.Layout` names an index folder's; an index keeps a copy under ``models/``."""

    META = "meta.json"
    SPLIT = "split.json"
    VOCAB = "vocab"
    CODE_VOCAB = "vocab/codes.json"
    EMBEDDINGS = "embeddings"
    CODE_EMBEDDINGS = "embeddings/codes.npy"
    DUAL = "dual"
    DENSE = "dense"
    DOC_VECTORS = "dense/doc_vectors.npy"
    DOC_IDS = "dense/doc_ids.json"
    RANKERS = "rankers"
    STACKED = "rankers/stacked.json"
    CHECKPOINTS = "checkpoints"
    LTR = "ltr"  # written by ``priorart train-ltr`` (training/ltr/train.py)
    TRAINED = (VOCAB, EMBEDDINGS, DUAL, DENSE, RANKERS, CHECKPOINTS)
    """The folders ``priorart train`` writes (and replaces when it trains into the folder again)."""
    TRAINING_ONLY = (CHECKPOINTS, DENSE)
    """Left out of an index's copy: the torch state dicts, and the training corpus' vectors (the index encodes its
    own documents)."""
    WORDS_VOCAB = "vocab/words.{lang}.json"  # the paths of one language, one ranker, one checkpoint: str.format
    WORDS_EMBEDDINGS = "embeddings/words.{lang}.npy"
    RANKER = "rankers/{kind}"  # the folder of one ranker's graphs (text, meta, joint)
    CHECKPOINT = "checkpoints/{name}.pt"


class ModelsFolderError(ValueError):
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
        return cls.from_json(read_versioned(path, VOCAB_FORMAT, 1, error=ModelsFolderError, fix="retrain"))


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


def read_models_meta(root: Path) -> dict[str, Any]:
    """``meta.json`` of a models folder, with its format and version checked."""
    path = root / ModelsLayout.META
    if not path.is_file():
        raise ModelsFolderError(f"{path}: missing; {root} is not a models folder (run `priorart train` first)")
    meta = read_versioned(path, MODELS_FORMAT, MODELS_VERSION, error=ModelsFolderError, fix="retrain")
    if "components" not in meta or "files" not in meta:
        raise ModelsFolderError(f"{path}: no 'components' or 'files' section")
    return meta


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
