"""The code vectors of an index (:mod:`service.code_vectors`): DeepWalk over the tree of its classification codes.

The tree is :func:`training.models.embeddings.build_code_graph`'s of the corpus' main groups and subclasses and
their ancestors (the feature compares main groups; a finer code counts as its main group) over the CPC title list's
hierarchy where the list knows most of the corpus' subclasses (:data:`training.code_classifier.MIN_KNOWN`, as for
the code classifier), else over the codes' own shapes (a synthetic corpus has codes of its own); the vectors are
:func:`training.models.embeddings.train_deepwalk`'s (30 dimensions, skip-gram on uniform walks, one worker:
deterministic). Seed 000 learns the same kind of vectors of categories (DeepWalk over the category graph) and feeds
them to its ranking network; here the ranker reads their cosine (service/ranker.py ``code_embedding``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from service.classification import ClassificationScheme
from service.code_vectors import CodeVectors
from service.codes import codes_at, record_codes
from service.retrieval.encoders import PAD, UNK
from training.code_classifier import MIN_KNOWN, cached_subclasses
from training.models.embeddings import build_code_graph, train_deepwalk

if TYPE_CHECKING:
    from service.index.store import DocStore

log = logging.getLogger(__name__)


class NoCodes(ValueError):
    """The corpus holds no classification code: no code vectors."""


def train_code_vectors(corpus_codes: Iterable[str], cpc: Path | None = None, *, dim: int = 30,
                       progress: bool | None = None) -> CodeVectors:
    """DeepWalk vectors of the tree of ``corpus_codes`` (the corpus' distinct codes, as the build collects them):
    over the hierarchy of the CPC title list ``cpc`` where it knows most of their subclasses, else their shapes."""
    codes = list(corpus_codes)
    subclasses = set(codes_at(codes, "subclass"))
    if not subclasses:
        raise NoCodes("no classification code in the corpus: no code vectors")
    scheme = None
    if cpc is not None and cpc.is_file():
        known = len(subclasses & set(cached_subclasses(cpc))) / len(subclasses)
        if known >= MIN_KNOWN:
            scheme = ClassificationScheme.load(cpc)
        else:
            log.info("code vectors: %.0f%% of the corpus' subclasses are in %s: the tree of the codes' shapes", 100 *
                     known, cpc.name)
    # the tree down to the main groups (what the feature compares), without the subgroups' subtrees: 54,175 nodes
    # and 131 s of DeepWalk for the 729 shared-data documents, against a few seconds
    graph = build_code_graph(codes_at(codes, "main_group") + sorted(subclasses), scheme, subtrees=False)
    emb = train_deepwalk(graph, dim=dim, progress=bool(progress))
    keep = [i for i, t in enumerate(emb.vocab.terms) if t not in (PAD, UNK)]
    return CodeVectors([emb.vocab.terms[i] for i in keep], emb.vectors[keep])


def store_codes(docs: DocStore) -> list[str]:
    """The distinct codes of the documents of a doc store, sorted (what the build collects of its corpus)."""
    return sorted({code for r in range(len(docs)) for code in record_codes(docs.header_row(r))})


__all__ = ["NoCodes", "store_codes", "train_code_vectors"]
