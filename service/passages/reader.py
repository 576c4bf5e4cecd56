"""What ranks passages, whatever the passage index's shape (issue 60, item 3): :class:`PassageReader`, the one
reader of the passages of a build (:class:`service.passages.index.PassageIndex`) and of a live generation's segments
(:class:`service.passages.segments.PassageGeneration`). Each gives the arrays the ranker reads for a query's
candidates (``view``); scoring and ranking are written once over it."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Unpack

import numpy as np
import numpy.typing as npt

from service.passages.arrays import PassageArrays

if TYPE_CHECKING:
    from service.passages.lm import QueryModels, Tables
    from service.passages.ranker import PassageRanking, PassageScores, RankOptions, ScoreOptions
    from service.text.analysis import Analyzer


class PassageReader(ABC):
    """What ranks passages, whatever the index's shape: one build's arrays
    (:class:`service.passages.index.PassageIndex`) or a live generation's segments
    (:class:`service.passages.segments.PassageGeneration`). Each gives the arrays the ranker reads for a query's
    candidates (:meth:`view`); :meth:`score` and :meth:`rank` are written once over it.

    The segment protocol every reader follows: ``parts``, the segments' arrays in row order (a build: itself), and
    :meth:`locate`, each row's segment and its row there: what reads the passages segment by segment (the kernel
    features, the word vectors) reads them through these, whatever the shape."""

    parts: list[PassageArrays]

    @abstractmethod
    def view(self, rows: npt.ArrayLike, models: QueryModels) -> tuple[PassageArrays, npt.NDArray[np.int64]]:
        """The arrays holding the candidates ``rows`` and the postings of the terms of ``models`` (the query's
        images), and each candidate's row there."""

    @abstractmethod
    def locate(self, rows: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Each row's segment (an index into :attr:`parts`) and its row there."""

    @abstractmethod
    def doc_id(self, row: int) -> str: ...

    @abstractmethod
    def check_rows(self, rows: npt.ArrayLike) -> npt.NDArray[np.int64]: ...

    @abstractmethod
    def readable(self, rows: npt.ArrayLike, langs: Collection[str]) -> npt.NDArray[np.bool_]: ...

    @abstractmethod
    def describe(self) -> dict[str, Any]: ...

    @property
    @abstractmethod
    def n_docs(self) -> int: ...

    # ------------------------------------------------------------------ ranking
    def score(
        self,
        query: str | QueryModels,
        lang: str,
        rows: npt.ArrayLike,
        first_stage: npt.ArrayLike | None = None,
        *,
        translations: Tables | None = None,
        analyzers: Mapping[str, Analyzer] | None = None,
        exclude_claims: npt.ArrayLike | None = None,
        **options: Unpack[ScoreOptions],
    ) -> PassageScores:
        """Every score component of every passage of the candidate ``rows`` (see :mod:`service.passages.ranker`;
        ``options``: :class:`service.passages.ranker.ScoreOptions`); the scores' rows are those of the candidates'
        view (:meth:`view`)."""
        from service.passages.ranker import score_passages

        models = _models(query, lang, translations, analyzers)
        view, at = self.view(rows, models)
        return score_passages(view, models, lang, at, first_stage, exclude_claims=exclude_claims, **options)

    def rank(
        self,
        query: str | QueryModels,
        lang: str,
        rows: npt.ArrayLike,
        doc_scores: npt.ArrayLike | None = None,
        *,
        translations: Tables | None = None,
        analyzers: Mapping[str, Analyzer] | None = None,
        words: Mapping[str, Sequence[str]] | None = None,
        highlight: bool = True,
        **options: Unpack[RankOptions],
    ) -> PassageRanking:
        """The best passages of the candidate ``rows`` (first-stage order, ``doc_scores`` their scores), ranked as
        ``options`` say (:class:`service.passages.ranker.RankOptions`).

        ``query``: the query's images per language it reaches (the engine's), or its text (analysed with
        ``analyzers``, translated with ``translations``). ``words``: the query words behind each query term (the
        highlights say which query words a passage word renders; from the text when not given)."""
        from service.passages.highlight import query_words
        from service.passages.ranker import rank_passages
        from service.text.analysis import get_analyzer

        models = _models(query, lang, translations, analyzers)
        if highlight and words is None and isinstance(query, str):
            words = query_words(query, (analyzers or {}).get(lang) or get_analyzer(lang))
        view, at = self.view(rows, models)
        return rank_passages(view, models, lang, at, doc_scores, analyzers=analyzers, words=words,
                             highlight=highlight, **options)


def _models(query: str | QueryModels, lang: str, translations: Tables | None,
            analyzers: Mapping[str, Analyzer] | None) -> QueryModels:
    """The query's images: given, or of its text (:func:`service.passages.lm.query_models`)."""
    from service.passages.lm import query_models
    from service.passages.ranker import check_lang

    check_lang(lang)
    return query_models(query, lang, translations, analyzers) if isinstance(query, str) else dict(query)
