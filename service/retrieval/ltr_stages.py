"""Pipeline stages of the learning-to-rank folder: word-pair and domain scores, and the combination step.

``priorart train-ltr ... --install`` puts the folder at ``INDEX_DIR/ltr`` (a copy of
``MODELS_DIR/ltr``; ``INDEX_DIR/models/ltr`` is found too). :func:`load_ltr_stages` verifies it
(format, every file's sha256, and that its document-side stores were built for *this* index: same
``doc_ids.json``) and returns, in order:

1. :class:`WordPairStep` -> ``cands.scores["wordpair"]``;
2. :class:`DomainStep` -> ``cands.scores["domain"]``;
3. :class:`~service.retrieval.combine.CombineStep` (``name="fusion"``): ``linear`` (the engine's
   fusion weights), ``borda`` and ``linlearn`` (weights from ``combine.json``); default ``linlearn``.

The two scoring stages score every candidate row (no NaN) from the precomputed stores: no record is
read and no document text analysed at query time.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from service.index.store import IDS_FILE, IndexFormatError, sha256_file
from service.pipeline import Candidates, Query, Stage
from service.retrieval.combine import CombineConfig, CombineStep
from service.retrieval.domain import DomainModel, DomainStore, QueryMeta, query_meta
from service.retrieval.wordpair import DocTermStore, WordPairModel
from service.text.analysis import detect_language

log = logging.getLogger(__name__)

LTR_FORMAT = "priorart-ltr"
LTR_VERSION = 1
LTR_DIRS = ("ltr", "models/ltr")


class LtrFolderError(IndexFormatError):
    """An ltr folder that cannot be used (the message names the file and what to do)."""


def find_ltr_dir(index_dir: str | Path) -> Path | None:
    """``INDEX_DIR/ltr`` or ``INDEX_DIR/models/ltr`` when it has a ``meta.json``; else None."""
    for rel in LTR_DIRS:
        cand = Path(index_dir) / rel
        if (cand / "meta.json").is_file():
            return cand
    return None


def read_ltr_meta(folder: Path, *, verify: bool = True) -> dict[str, Any]:
    path = folder / "meta.json"
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise LtrFolderError(f"{path}: unreadable ({exc}); rerun `priorart train-ltr`") from exc
    if meta.get("format") != LTR_FORMAT or meta.get("version") != LTR_VERSION:
        raise LtrFolderError(f"{path}: format {meta.get('format')!r} v{meta.get('version')!r}, expected "
                             f"{LTR_FORMAT!r} v{LTR_VERSION}; rerun `priorart train-ltr`")
    for rel, info in meta.get("files", {}).items():
        p = folder / rel
        if not p.is_file():
            raise LtrFolderError(f"{p}: listed in {path} but missing; rerun `priorart train-ltr`")
        if p.stat().st_size != info["size"] or (verify and sha256_file(p) != info["sha256"]):
            raise LtrFolderError(f"{p}: differs from {path} (file changed); rerun `priorart train-ltr`")
    return dict(meta)


def _lang(query: Query) -> str:
    return query.resolved_lang or query.lang or detect_language(query.resolved_text or query.text)


class WordPairStep:
    """Adds ``cands.scores["wordpair"]``: the sparse word-pair model over the precomputed document terms."""

    name = "wordpair"

    def __init__(self, model: WordPairModel, store: DocTermStore) -> None:
        self.model = model
        self.store = store

    def run(self, query: Query, cands: Candidates) -> Candidates:
        text = query.resolved_text or query.text
        cands.scores["wordpair"] = self.model.score_rows(text, _lang(query), self.store, cands.rows)
        return cands

    def describe(self) -> dict[str, Any]:
        return {"bits": self.model.bits, "non_zero_weights": self.model.nnz, "documents": len(self.store)}


class DomainStep:
    """Adds ``cands.scores["domain"]``: the domain-knowledge model over the precomputed document fields.

    Query side: its text and codes; for a publication-number query also the record's applicants,
    inventors, citations, date and number (from the store's row); ``query.before`` as its date otherwise.
    """

    name = "domain"

    def __init__(self, model: DomainModel, store: DomainStore, doc_rows: Mapping[str, int]) -> None:
        self.model = model
        self.store = store
        self.doc_rows = doc_rows

    def query_meta(self, query: Query) -> QueryMeta:
        text = query.resolved_text or query.text
        meta = query_meta(text, _lang(query), codes=list(query.codes), date_=query.before)
        row = self.doc_rows.get(query.query_doc) if query.query_doc else None
        if row is not None:
            known = self.store.row_meta(row)
            meta.applicants, meta.inventors = known["applicants"], known["inventors"]
            meta.citations = known["citations"]
            meta.date = meta.date or known["date"]
            meta.own_id = known["own_ref"]
        return meta

    def run(self, query: Query, cands: Candidates) -> Candidates:
        x = self.store.features(self.query_meta(query), np.asarray(cands.rows, dtype=np.int64))
        cands.scores["domain"] = self.model.score(x)
        return cands

    def describe(self) -> dict[str, Any]:
        return {"features": {f: float(w) for f, w in zip(self.model.features, self.model.weights, strict=True) if w},
                "query_meta": self.model.info.get("query_meta")}


def load_ltr_stages(
    index_dir: str | Path,
    *,
    linear_weights: Mapping[str, float] | None = None,
    linear_source: str = "engine fusion weights",
    verify: bool = True,
) -> list[Stage] | None:
    """The ltr stages of an index folder (module docstring), or None when it has no ltr folder.

    ``linear_weights``: the engine's fusion weights (``linear`` method); default BM25 only.
    Raises :class:`LtrFolderError` when the folder is there but unusable.
    """
    index_dir = Path(index_dir)
    folder = find_ltr_dir(index_dir)
    if folder is None:
        return None
    meta = read_ltr_meta(folder, verify=verify)
    want = meta.get("index", {}).get("doc_ids_sha256")
    if not (index_dir / IDS_FILE).is_file():
        raise LtrFolderError(f"{index_dir} has an ltr folder but no {IDS_FILE}: not an index folder")
    have = sha256_file(index_dir / IDS_FILE)
    if want != have:
        raise LtrFolderError(
            f"{folder}: built for another index ({meta.get('index', {}).get('documents')} documents, other "
            f"doc_ids.json); rerun `priorart train-ltr CORPUS --models MODELS_DIR --index {index_dir} --install`"
        )
    comp = meta["components"]
    try:
        terms = DocTermStore.load(folder / comp["docside"])
        wordpair = WordPairModel.load(folder / comp["wordpair"])
        store = DomainStore.load(folder / comp["docside"], terms)
        domain = DomainModel.load(folder / comp["domain"])
        combine = CombineConfig.load(folder / comp["combine"])
    except (KeyError, ValueError) as exc:
        raise LtrFolderError(f"{folder}: {exc}") from exc
    ids: list[str] = json.loads((index_dir / IDS_FILE).read_text(encoding="utf-8"))
    if len(terms) != len(ids):
        raise LtrFolderError(f"{folder}: document stores have {len(terms)} rows, the index {len(ids)}")
    methods: dict[str, dict[str, float]] = {"linear": dict(linear_weights or {"bm25": 1.0}), **combine.methods}
    source = f"linear: {linear_source}; borda/linlearn: {folder / comp['combine']}"
    log.info("ltr stages loaded from %s (fusion methods %s, default %s)", folder, ", ".join(methods), combine.default)
    return [
        WordPairStep(wordpair, terms),
        DomainStep(domain, store, {pid: i for i, pid in enumerate(ids)}),
        CombineStep(methods, combine.default, source),
    ]
