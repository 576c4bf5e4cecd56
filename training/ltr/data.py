"""The neural rankers' topics, pairs and split, prepared for the linear learners.

:func:`prepare_ltr_data` runs :func:`training.models.pairs.plan_topics` and
:func:`training.models.pairs.encode_data` on the given split, so the word-pair and domain models see
exactly the topics, judged documents (relevance 2: the same publication or family, incl. the
cross-lingual mates; 1: same main group), sampled negatives
(:func:`training.models.pairs.sample_pairs`) and dev candidates as the neural rankers. The
vocabularies handed to ``encode_data`` hold every term of the planned topics and documents, so no term
is dropped as out-of-vocabulary (the linear models hash terms; they need no vocabulary).

On top it keeps, per pool document, its document-side terms (:class:`DocTermStore`) and domain fields
(:class:`DomainStore`) with rows = pool indices, and per topic its text, term hashes and query
metadata (:class:`QueryMeta`, restricted to ``LtrConfig.query_meta``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from service.codes import record_codes
from service.corpus.record import PatentRecord
from service.retrieval.domain import QUERY_META, DomainStore, QueryMeta, query_meta
from service.retrieval.encoders import (
    CODES_MAX,
    DOC_MAX_TERMS,
    QUERY_MAX_TERMS,
    CodeVocabulary,
    Vocabulary,
    document_text,
)
from service.retrieval.wordpair import DocTermStore, query_term_hashes, query_terms
from service.text.analysis import SUPPORTED_LANGS, get_analyzer
from training.models.pairs import (
    RankingData,
    Split,
    doc_info,
    encode_data,
    plan_topics,
    record_topics,
    sample_pairs,
)

log = logging.getLogger(__name__)


@dataclass
class LtrConfig:
    """Topic caps and sampling (the neural rankers' defaults, ``TrainConfig``/``RankerConfig``)."""

    seed: int = 13
    max_train_topics: int = 5_000
    max_dev_topics: int = 300
    max_rel1: int = 5
    max_pool_docs: int = 20_000
    dev_negatives: int = 20
    negatives: int = 4
    max_rel1_pairs: int = 2
    query_max_terms: int = QUERY_MAX_TERMS
    doc_max_terms: int = DOC_MAX_TERMS
    languages: tuple[str, ...] = SUPPORTED_LANGS
    query_meta: tuple[str, ...] = ("codes",)
    dev_pool_docs: int = 2_000  # dev ranking: judged documents + the rest of the pool up to this many

    def __post_init__(self) -> None:
        bad = [m for m in self.query_meta if m not in QUERY_META]
        if bad:
            raise ValueError(f"unknown query metadata {bad}; valid: {', '.join(QUERY_META)}")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class QuerySide:
    """One topic as the linear models see it."""

    qid: str
    source: str
    lang: str
    text: str
    hashes: np.ndarray  # uint64 query term hashes (wordpair)
    meta: QueryMeta


@dataclass
class LtrData:
    ranking: RankingData
    split: Split
    pool_records: list[PatentRecord]
    terms: DocTermStore  # rows = pool indices
    domain: DomainStore  # rows = pool indices
    train_q: list[QuerySide]
    dev_q: list[QuerySide]
    config: LtrConfig = field(default_factory=LtrConfig)
    dev_candidates: list[np.ndarray] = field(default_factory=list)  # pool rows ranked per dev topic
    dev_rels: list[np.ndarray] = field(default_factory=list)

    def pairs(self, rng: np.random.Generator) -> np.ndarray:
        """``[topic, better, worse]`` pool indices: :func:`training.models.pairs.sample_pairs`."""
        return sample_pairs(self.ranking, rng, negatives=self.config.negatives,
                            max_rel1_pairs=self.config.max_rel1_pairs)

    def summary(self) -> dict[str, Any]:
        return {**self.ranking.summary(), "doc_terms": len(self.terms.vocab)}


def dev_rankings(ranking: RankingData, max_docs: int, seed: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Dev candidates of each dev topic: its judged documents and every other pool document (a fixed
    random sample when the pool is larger than ``max_docs``).

    The rankers' dev candidates (judged + 20 random documents) are too easy for the linear models: with
    random negatives (half of them design patents here) a handful of "utility claim vs design claim" word
    pairs already reach a dev NDCG of 0.9, so l1 and the epoch would be chosen for genre detection instead
    of retrieval. Ranking the (bounded) pool is closer to the search task.
    """
    rng = np.random.default_rng(seed + 2)
    n = len(ranking.pool)
    cands: list[np.ndarray] = []
    rels: list[np.ndarray] = []
    for topic in ranking.dev:
        judged = np.asarray(list(topic.judged), dtype=np.int64)
        others = np.setdiff1d(np.arange(n, dtype=np.int64), judged)
        room = max(0, max_docs - len(judged))
        if len(others) > room:
            others = np.sort(rng.choice(others, room, replace=False))
        c = rng.permutation(np.concatenate([judged, others]))  # no order leak: ndcg() keeps ties in input order
        cands.append(c)
        rels.append(np.asarray([topic.judged.get(int(i), 0) for i in c], dtype=np.int64))
    return cands, rels


def make_query_side(
    qid: str, source: PatentRecord | None, lang: str, text: str, cfg: LtrConfig, codes: Iterable[str] = ()
) -> QuerySide:
    """Query side of a topic: hashes of its terms, metadata from ``source`` restricted to ``cfg.query_meta``."""
    meta = query_meta(text, lang, record=source, codes=list(codes), max_terms=cfg.query_max_terms)
    meta = meta.restricted(cfg.query_meta)
    terms = query_terms(text, lang, cfg.query_max_terms)
    return QuerySide(qid, source.id if source else "", lang, text, query_term_hashes(terms, lang), meta)


def prepare_ltr_data(records: Sequence[PatentRecord], split: Split, cfg: LtrConfig | None = None) -> LtrData:
    """Plan and encode the topics on ``split`` and build the linear models' views (module docstring)."""
    cfg = cfg or LtrConfig()
    infos = [doc_info(r) for r in records]
    plan = plan_topics(
        infos, split, max_train_topics=cfg.max_train_topics, max_dev_topics=cfg.max_dev_topics,
        max_rel1=cfg.max_rel1, max_pool_docs=cfg.max_pool_docs, languages=cfg.languages, seed=cfg.seed,
    )
    by_id = {r.id: r for r in records}
    needed = plan.sources() | set(plan.pool)
    wanted = {t.qid for t in (*plan.train, *plan.dev)}
    lang_terms: dict[str, set[str]] = {lang: set() for lang in SUPPORTED_LANGS}
    texts: dict[str, str] = {}
    for doc_id in needed:
        rec = by_id[doc_id]
        for tt in record_topics(rec):
            if tt.qid in wanted:
                texts[tt.qid] = tt.text
                lang_terms[tt.lang].update(get_analyzer(tt.lang)(tt.text))
        if doc_id in plan.pool:
            text, lang = document_text(rec)
            if text:
                lang_terms["en"].update(get_analyzer(lang)(text))
    vocabs = {lang: Vocabulary(sorted(terms), name=lang) for lang, terms in lang_terms.items()}
    codes = CodeVocabulary(sorted({c for r in records for c in record_codes(r)}), name="codes")
    ranking = encode_data(
        (r for r in records if r.id in needed), plan, vocabs, codes, dev_negatives=cfg.dev_negatives,
        query_max_terms=cfg.query_max_terms, doc_max_terms=cfg.doc_max_terms, codes_max=CODES_MAX, seed=cfg.seed,
    )
    if not ranking.train:
        raise ValueError("no usable training topics (records need a title/abstract and English claims)")
    pool_records = [by_id[i] for i in ranking.pool.ids]
    terms = DocTermStore.from_records(pool_records, cfg.doc_max_terms)
    domain = DomainStore.from_records(pool_records, terms)

    def sides(topics: Sequence[Any]) -> list[QuerySide]:
        return [make_query_side(t.qid, by_id[t.source], t.lang, texts[t.qid], cfg) for t in topics]

    data = LtrData(ranking, split, pool_records, terms, domain, sides(ranking.train), sides(ranking.dev), cfg)
    data.dev_candidates, data.dev_rels = dev_rankings(ranking, cfg.dev_pool_docs, cfg.seed)
    log.info("ltr data: %s", data.summary())
    return data
