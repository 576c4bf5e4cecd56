"""Word vectors of an index's own terms (issue 33 item 4): word2vec per language over the index's analysed passages
(titles, headings, abstracts, description paragraphs, claims: each unit a sentence), as
:class:`service.text.word_vectors.WordVectors`, keyed as the passage index's vocabulary. Unsupervised: it reads
the documents of the index only, no query and no judgement, so a held-out index's vectors have seen nothing of its
topics. A language with fewer than ``min_tokens`` analysed terms gets no vectors (its terms then match exactly only).
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from tqdm import tqdm

from service.text.analysis import SUPPORTED_LANGS, Analyzer, CachedAnalyzer, get_analyzer
from service.text.word_vectors import WordVectors
from training.models.embeddings import LineSentences, train_word2vec

if TYPE_CHECKING:
    from service.passages.arrays import PassageArrays
    from service.passages.reader import PassageReader

log = logging.getLogger(__name__)

Analyze = Callable[[str], list[str]]


class NoWordVectors(ValueError):
    """The index gets no word vectors: too little text (:class:`TooLittleText`), or no word2vec installed (gensim, the
    training extra). The engine then orders the first documents by the passage rule, and says so."""


class TooLittleText(NoWordVectors):
    """No language of the index has enough analysed terms for word vectors."""


@dataclass
class WordVectorSettings:
    dim: int = 64
    window: int = 5
    min_count: int = 3
    epochs: int = 5
    skip_gram: bool = False  # CBOW: ~3x faster than skip-gram here (16 s against 40 s on 1.35M English terms)
    max_tokens: int = 4_000_000  # per language: units are taken evenly up to about this many terms
    min_tokens: int = 20_000  # a language with fewer analysed terms gets no vectors
    seed: int = 13


def train_word_vectors(passages: PassageReader | PassageArrays | Sequence[PassageArrays],
                       analyzers: Mapping[str, Analyze] | None = None,
                       s: WordVectorSettings | None = None, *, progress: bool | None = None,
                       doc_order: Sequence[str] | None = None) -> WordVectors:
    """word2vec (CBOW by default, one worker: deterministic) per language over the passage index's units, analysed by
    ``analyzers`` (the index's; default: the languages' plain analysers); :class:`TooLittleText` when no language
    has ``s.min_tokens`` analysed terms, :class:`NoWordVectors` without gensim. ``passages``: one passage index, a
    segmented one, or several (a sharded index's shards); their units are read document by document in
    ``doc_order`` (document ids: the corpus' order, so that the shards of a corpus give the vectors one index of it
    gives), else part by part in row order (one index's row order is its corpus' order)."""
    from service.passages.reader import PassageReader

    s = s or WordVectorSettings()
    parts = (passages.parts if isinstance(passages, PassageReader)
             else list(passages) if isinstance(passages, Sequence) else [passages])
    analyse: dict[str, Analyze] = {}
    for lang in SUPPORTED_LANGS:
        a = (analyzers or {}).get(lang) or get_analyzer(lang)
        analyse[lang] = CachedAnalyzer(a) if isinstance(a, Analyzer) else a
    tokens = np.sum([p.lang_tokens.astype(np.int64) for p in parts], axis=0)
    keys: list[str] = []
    vectors: list[np.ndarray] = []
    with tempfile.TemporaryDirectory(prefix="priorart-w2v-") as tmp:
        _write_sentences(parts, _unit_runs(parts, doc_order), analyse, tokens, s.max_tokens, Path(tmp), progress)
        for i, lang in enumerate(SUPPORTED_LANGS):
            if int(tokens[i]) < s.min_tokens:
                log.info("word vectors %s: %d terms < %d, none (exact matches only)", lang, int(tokens[i]),
                         s.min_tokens)
                continue
            try:
                emb = train_word2vec(LineSentences(Path(tmp) / f"{lang}.txt"), lang=lang, dim=s.dim, window=s.window,
                                     min_count=s.min_count, epochs=s.epochs, sg=s.skip_gram, seed=s.seed,
                                     progress=progress is not False)
            except ValueError as exc:
                log.info("word vectors %s: %s", lang, exc)
                continue
            except ImportError as exc:  # an installation without the training extra: the service's own warmup
                raise NoWordVectors(f"{exc}; the training extra installs it") from exc
            terms = emb.vocab.terms[2:]  # (rows 0, 1: <pad>, <unk>)
            keys += [f"{lang}\0{t}" for t in terms]
            vectors.append(emb.vectors[2:])
    if not keys:
        raise TooLittleText(f"no language has {s.min_tokens} analysed terms for word vectors")
    return WordVectors(keys, np.concatenate(vectors))


def _unit_runs(parts: Sequence[PassageArrays], doc_order: Sequence[str] | None) -> list[tuple[int, int, int]]:
    """The units to read, in order, as runs ``(part, first unit, end)``: each part whole, or each document of
    ``doc_order`` (ids) where it is (an id no part holds is refused: the order is of another collection)."""
    if doc_order is None:
        return [(i, 0, len(p.unit_tag)) for i, p in enumerate(parts)]
    where = {p.doc_id(row): (i, row) for i, p in enumerate(parts) for row in range(p.n_docs)}
    runs = []
    for doc in doc_order:
        if doc not in where:
            raise ValueError(f"document {doc!r} of the order is in no passage index")
        i, row = where[doc]
        runs.append((i, int(parts[i].docs[row, 0]), int(parts[i].docs[row + 1, 0])))
    return runs


def _write_sentences(parts: Sequence[PassageArrays], runs: Sequence[tuple[int, int, int]],
                     analyse: Mapping[str, Analyze], tokens: np.ndarray, max_tokens: int, tmp: Path,
                     progress: bool | None) -> None:
    """One file of analysed sentences per language (``<lang>.txt``) from the units of ``runs`` (:func:`_unit_runs`),
    in their order: every unit, or every ``k``-th of a language with more than ``max_tokens`` terms."""
    every = {lang: max(1, int(np.ceil(int(tokens[i]) / max_tokens))) for i, lang in enumerate(SUPPORTED_LANGS)}
    seen = dict.fromkeys(SUPPORTED_LANGS, 0)
    with ExitStack() as stack:
        files = {lang: stack.enter_context(open(tmp / f"{lang}.txt", "w", encoding="utf-8"))
                 for lang in SUPPORTED_LANGS}
        bar = stack.enter_context(tqdm(total=sum(end - first for _, first, end in runs),
                                       desc="word vectors: sentences", unit="unit", disable=progress is False,
                                       leave=False))
        tags = [np.asarray(p.unit_tag) for p in parts]
        for i, first, end in runs:
            p = parts[i]
            for u in range(first, end):
                lang = SUPPORTED_LANGS[int(tags[i][u]) & 3]
                seen[lang] += 1
                if seen[lang] % every[lang] == 0:
                    terms = analyse[lang](p.texts.text(u))
                    if terms:
                        files[lang].write(" ".join(terms) + "\n")
            bar.update(end - first)


def index_word_vectors(root: str | Path, *more: str | Path, progress: bool | None = None) -> WordVectors:
    """Word vectors of an index built already (every segment's passages, analysed with the index's analyzers); with
    ``more`` roots (the other shards of a sharded index), one set learned from all of them, shard after shard."""
    from service.index.components import open_component
    from service.index.folder import IndexFolder
    from service.index.parts import open_part
    folders = [IndexFolder.open(r, verify=False) for r in (root, *more)]
    parts: list[PassageArrays] = []
    for folder in folders:
        parts += open_component("passages", folder).parts
    return train_word_vectors(parts, open_part("analysis", folders[0]), progress=progress)


__all__ = ["NoWordVectors", "TooLittleText", "WordVectorSettings", "index_word_vectors", "train_word_vectors"]
