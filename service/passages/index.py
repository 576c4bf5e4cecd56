"""The passage index of an index folder, memory-mapped: what the passage ranker reads at query time.

``PassageIndex.load(index_dir)`` maps the arrays of ``<index_dir>/passages/`` (format in
:mod:`service.passages.format`); nothing is parsed per document, nothing is warmed up: a fresh
process answers its first query at full speed (page cache permitting). ``PassageIndex.rank`` is the
one call the engine makes: the passages of the candidate rows, scored in context (QSF variants).
An index folder built before the passage index existed raises :class:`PassageIndexMissingError`
with the instruction to rebuild.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy.typing as npt

import service.passages.format as fmt
from service.corpus.record import PatentRecord
from service.index.folder import IndexFolder, Layout
from service.passages.arrays import PassageArrays, PassageIndexError, PassageIndexMissingError
from service.passages.lm import DEFAULT_DOC_SCORE, DEFAULT_MU, DEFAULT_MU_TRANSLATED

if TYPE_CHECKING:
    from service.passages.builder import Analyze
    from service.passages.lm import QueryModels, Tables
    from service.passages.ranker import PassageRanking, PassageScores
    from service.passages.segments import SegmentedPassageIndex
    from service.text.analysis import Analyzer

__all__ = ["PassageIndex", "PassageIndexError", "PassageIndexMissingError"]


class PassageIndex(PassageArrays):
    """The passage index of an index folder: load, build in memory for tests, score and rank."""

    # ------------------------------------------------------------------ loading
    @classmethod
    def load(cls, folder: IndexFolder | str | Path, *, mmap: bool = True) -> PassageIndex | SegmentedPassageIndex:
        """Map the passage index of an opened index folder (a path is opened without re-hashing its files); a
        generation of several segments maps each segment's (:class:`SegmentedPassageIndex`)."""
        if not isinstance(folder, IndexFolder):
            folder = IndexFolder.open(folder, verify=False)
        whole = folder.one_build
        if whole is None:
            return cls._load_live(folder)
        folder = whole
        index_dir = folder.root
        comp = folder.components.get(fmt.PASSAGES_COMPONENT)
        if comp is None:
            raise PassageIndexMissingError(
                f"the index {index_dir} has no passage index (built before passages were indexed at build "
                "time): /passages needs it; rebuild the index with `priorart build`"
            )
        if not isinstance(comp, dict) or comp.get("format") != fmt.PASSAGES_FORMAT:
            raise PassageIndexError(f"{index_dir}/meta.json: components.passages is not a {fmt.PASSAGES_FORMAT} entry")
        if comp.get("version") != fmt.PASSAGES_VERSION:
            raise PassageIndexError(
                f"{index_dir}: passage index format version {comp.get('version')!r}, this priorart reads version "
                f"{fmt.PASSAGES_VERSION}; rebuild the index with `priorart build`"
            )
        return cls.open(folder.path(str(comp.get("dir", Layout.PASSAGES))), mmap=mmap, info=comp)

    @classmethod
    def _load_live(cls, folder: IndexFolder) -> PassageIndex | SegmentedPassageIndex:
        """The passage indexes of a generation's segments, each mapped where it lies and searched in place
        (:mod:`service.passages.segments`); deleted rows are never candidates, and their text leaves the collection
        model (as one build of the live documents has it)."""
        from service.passages.segments import SegmentedPassageIndex, open_part

        found = []
        for seg in folder.segments:
            comp = seg.folder.components.get(fmt.PASSAGES_COMPONENT)
            if not isinstance(comp, dict):
                raise PassageIndexMissingError(f"segment {seg.folder.root} has no passage index; /passages needs one "
                                               "in every segment (rebuild the index with `priorart build`)")
            found.append((seg.folder.path(str(comp.get("dir", Layout.PASSAGES))), comp, seg.deleted))
        if len(found) == 1 and not len(found[0][2]):  # one segment, nothing deleted: mapped as it lies
            return cls.open(found[0][0], mmap=True, info=found[0][1])
        return SegmentedPassageIndex([open_part(path, comp) for path, comp, _ in found],
                                     deleted=[gone for _, _, gone in found])

    @classmethod
    def from_records(cls, records: Iterable[PatentRecord], *,
                     analyzers: Mapping[str, Analyze] | None = None) -> PassageIndex:
        """An in-memory passage index of ``records`` (rows in their order), for tests and experiments."""
        from service.passages.builder import PassageIndexBuilder

        tmp = Path(tempfile.mkdtemp(prefix="priorart-passages-"))
        try:
            builder = PassageIndexBuilder(tmp / "passages", analyzers=analyzers)
            for rec in records:
                builder.add(rec)
            info = builder.finish()
            return cls.open(tmp / "passages", mmap=False, info=info)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    # ------------------------------------------------------------------ ranking
    def score(
        self,
        query: str | QueryModels,
        lang: str,
        rows: npt.ArrayLike,
        first_stage: npt.ArrayLike | None = None,
        *,
        variant: str = "qsf_passage_propagate",
        sigma: float = 1.0,
        doc_score: str = DEFAULT_DOC_SCORE,
        translations: Tables | None = None,
        analyzers: Mapping[str, Analyzer] | None = None,
        exclude_claims: npt.ArrayLike | None = None,
        mu: float = DEFAULT_MU,
        mu_translated: float = DEFAULT_MU_TRANSLATED,
        rho: float | None = None,
    ) -> PassageScores:
        """Every score component of every passage of the candidate ``rows`` (see :mod:`service.passages.ranker`)."""
        from service.passages.ranker import score_passages

        return score_passages(self, query, lang, rows, first_stage, variant=variant, sigma=sigma,
                              doc_score=doc_score, translations=translations, analyzers=analyzers,
                              exclude_claims=exclude_claims, mu=mu, mu_translated=mu_translated, rho=rho)

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
        variant: str = "qsf_passage_propagate",
        alpha: float = 0.5,
        beta: float = 0.5,
        sigma: float = 1.0,
        k: int = 1500,
        doc_score: str = DEFAULT_DOC_SCORE,
        langs: Collection[str] | None = None,
        highlight: bool = True,
        mu: float = DEFAULT_MU,
        mu_translated: float = DEFAULT_MU_TRANSLATED,
        rho: float | None = None,
        alone: bool = False,
        beta_translated: float | Mapping[str, float] | None = None,
        spread: bool = False,
    ) -> PassageRanking:
        """The ``k`` best passages of the candidate ``rows`` (first-stage order, ``doc_scores`` their scores).

        ``query``: the query's images per language it reaches (the engine's), or its text (analysed with
        ``analyzers``, translated with ``translations``). ``words``: the query words behind each query term (the
        highlights say which query words a passage word renders). ``langs``: candidates without any text in these
        languages are left out (counted in ``skipped``), and only passages in these languages are returned; the
        other passages of a candidate still shape its scores. ``alone``: the ``k`` best passages of each candidate
        as if it were the only one (its passages normalised among themselves), candidate by candidate, from one
        scoring of them all (a claim chart's cells). ``beta`` weighs the passages in the query's language,
        ``beta_translated`` the others (:func:`service.passages.lm.betas_of`; None: the defaults per language).
        ``spread``: each candidate's second-best passage and share of matching passages too (the learned ranker's).
        """
        from service.passages.ranker import rank_passages

        return rank_passages(self, query, lang, rows, doc_scores, translations=translations, analyzers=analyzers,
                             words=words, variant=variant, alpha=alpha, beta=beta, sigma=sigma, k=k,
                             doc_score=doc_score, langs=langs, highlight=highlight, mu=mu,
                             mu_translated=mu_translated, rho=rho, alone=alone, beta_translated=beta_translated,
                             spread=spread)
