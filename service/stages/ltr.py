"""``wordpair`` and ``domain``: the learning-to-rank models' scores of every candidate.

``priorart train-ltr ... --install`` puts the ltr folder at ``INDEX/ltr`` (format ``priorart-ltr``
version 2: the word-pair model, the domain model and their document-side stores, built for this index's
rows) and writes the Borda and LinLearn weights into the index's ``fusion.json`` (service/fusion.py).
:func:`load_ltr_stages` verifies the folder (format, every file's size and sha256, and that its stores
were built for *this* index: the same ``doc_ids.json``).

- :class:`WordPairStep` -> the ``wordpair`` component (sparse word-pair model over precomputed document
  terms); applies to the languages the model was trained on (all, for a model that does not say);
- :class:`DomainStep` -> the ``domain`` component (domain-knowledge features over precomputed document
  fields); applies when the query has classification codes or is a publication number (else its
  features are the text ones alone, which it was not trained to use by themselves).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from service.candidates import CANDIDATES, Candidates
from service.index.folder import IndexFolder, IndexFormatError, Layout, sha256_file
from service.index.store import DocStore
from service.query import Query
from service.retrieval.domain import DomainModel, DomainStore, QueryMeta, query_meta
from service.retrieval.wordpair import DocTermStore, WordPairModel
from service.text.analysis import SUPPORTED_LANGS
from service.versioned import read_versioned

LTR_FORMAT = "priorart-ltr"
LTR_VERSION = 2


class LtrFolderError(IndexFormatError):
    """An ltr folder that cannot be used (the message names the file and what to do)."""


def read_ltr_meta(folder: Path, *, verify: bool = True) -> dict[str, Any]:
    path = folder / "meta.json"
    meta = read_versioned(path, LTR_FORMAT, LTR_VERSION, error=LtrFolderError, fix="rerun `priorart train-ltr`")
    for rel, info in meta.get("files", {}).items():
        p = folder / rel
        if not p.is_file():
            raise LtrFolderError(f"{p}: listed in {path} but missing; rerun `priorart train-ltr`")
        if p.stat().st_size != info["size"] or (verify and sha256_file(p) != info["sha256"]):
            raise LtrFolderError(f"{p}: differs from {path} (file changed); rerun `priorart train-ltr`")
    return meta


class WordPairStep:
    name = "wordpair"
    requires = frozenset({CANDIDATES})
    provides = frozenset({"wordpair"})

    def __init__(self, model: WordPairModel, store: DocTermStore) -> None:
        self.model = model
        self.store = store
        self.langs = tuple(model.settings.get("langs") or SUPPORTED_LANGS)

    def run(self, query: Query, cands: Candidates) -> Candidates:
        r = query.r
        if r.lang not in self.langs:
            cands.skip("wordpair", f"the word-pair model was not trained on {r.lang} queries")
            return cands
        cands.scores["wordpair"] = self.model.score_rows(r.text, r.lang, self.store, cands.rows)
        return cands

    def describe(self) -> dict[str, Any]:
        return {"bits": self.model.bits, "non_zero_weights": self.model.nnz, "documents": len(self.store),
                "languages": list(self.langs)}


class DomainStep:
    """Query side: text and codes; for a publication-number query also the record's applicants,
    inventors, citations, date and number (from the store's row); ``query.before`` as its date otherwise."""

    name = "domain"
    requires = frozenset({CANDIDATES})
    provides = frozenset({"domain"})

    def __init__(self, model: DomainModel, store: DomainStore, doc_rows: Mapping[str, int]) -> None:
        self.model = model
        self.store = store
        self.doc_rows = doc_rows

    def query_meta(self, query: Query) -> QueryMeta:
        r = query.r
        meta = query_meta(r.text, r.lang, codes=list(r.codes), date_=query.before)
        row = self.doc_rows.get(r.query_doc) if r.query_doc else None
        if row is not None:
            known = self.store.row_meta(row)
            meta.applicants, meta.inventors = known["applicants"], known["inventors"]
            meta.citations = known["citations"]
            meta.date = meta.date or known["date"]
            meta.own_id = known["own_ref"]
        return meta

    def run(self, query: Query, cands: Candidates) -> Candidates:
        r = query.r
        if not r.has_codes and r.query_doc is None:
            cands.skip("domain", "the query has no classification codes and is not a publication number")
            return cands
        x = self.store.features(self.query_meta(query), np.asarray(cands.rows, dtype=np.int64))
        cands.scores["domain"] = self.model.score(x)
        return cands

    def describe(self) -> dict[str, Any]:
        return {"features": {f: float(w) for f, w in zip(self.model.features, self.model.weights, strict=True) if w},
                "query_meta": self.model.info.get("query_meta")}


def load_ltr_stages(index: IndexFolder, docs: DocStore, *, verify: bool = False) -> list[WordPairStep | DomainStep]:
    """The ltr stages of an index folder with an installed ``ltr/`` (its files were verified with the index;
    ``verify=True`` re-hashes them). Raises :class:`LtrFolderError` when the folder is unusable."""
    folder = index.path(Layout.LTR)
    meta = read_ltr_meta(folder, verify=verify)
    if meta.get("index", {}).get("doc_ids_sha256") != index.ids_sha256():
        raise LtrFolderError(
            f"{folder}: built for another index ({meta.get('index', {}).get('documents')} documents, other "
            f"doc_ids.json); rerun `priorart train-ltr CORPUS --models MODELS_DIR --index {index.root} --install`"
        )
    comp = meta["components"]
    try:
        terms = DocTermStore.load(folder / comp["docside"])
        wordpair = WordPairModel.load(folder / comp["wordpair"])
        store = DomainStore.load(folder / comp["docside"], terms)
        domain = DomainModel.load(folder / comp["domain"])
    except (KeyError, ValueError) as exc:
        raise LtrFolderError(f"{folder}: {exc}") from exc
    if len(terms) != len(docs):
        raise LtrFolderError(f"{folder}: document stores have {len(terms)} rows, the index {len(docs)}")
    return [WordPairStep(wordpair, terms), DomainStep(domain, store, {pid: i for i, pid in enumerate(docs.ids)})]


__all__ = ["LTR_FORMAT", "LTR_VERSION", "DomainStep", "LtrFolderError", "WordPairStep", "load_ltr_stages",
           "read_ltr_meta"]
