"""Structure-aware passage retrieval (QSF variants of "Passage retrieval in context", Albarede et al. 2021).

The passage trees of all documents are written at build time (:mod:`service.passages.builder`) and
ranked at query time with array operations (:mod:`service.passages.ranker`):

- :mod:`~service.passages.tree`: a record's passage tree in every language (ids, sections, units)
- :mod:`~service.passages.lm`: Dirichlet LM pieces, the query's image per language, variants and parameters
- :mod:`~service.passages.format`: file names, format tag and version of the passage index
- :mod:`~service.passages.builder`: writes the passage index (``priorart build``)
- :mod:`~service.passages.index`: :class:`PassageIndex`, the memory-mapped reader the engine loads
- :mod:`~service.passages.ranker`: the QSF scores and the ranked hits
- :mod:`~service.passages.highlight`: character spans of query-term matches

The engine needs two things: ``PassageIndex.load(index_dir)`` and ``PassageIndex.rank(...)``.
Tuning (grid search, reference-sign proxy) lives in ``training/passage_tuning.py``; a per-record ranker of the
same definition, the reference oracle, in ``lab/benchmarks/passages_reference.py``.
"""

from service.passages.index import PassageIndex, PassageIndexError, PassageIndexMissingError
from service.passages.lm import DEFAULT_PARAMS, PAPER_PARAMS, PAPER_SIGMAS, VARIANTS
from service.passages.ranker import PassageHit, PassageRanking, PassageScores
from service.passages.reader import PassageReader

__all__ = [
    "DEFAULT_PARAMS",
    "PAPER_PARAMS",
    "PAPER_SIGMAS",
    "VARIANTS",
    "PassageHit",
    "PassageIndex",
    "PassageIndexError",
    "PassageIndexMissingError",
    "PassageRanking",
    "PassageReader",
    "PassageScores",
]
