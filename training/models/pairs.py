"""Training topics and pairs from the corpus' own structure, and the fixed train/dev/test split.

Relevance (no human judgments in the data, so they come from structure):

- 2: the query's own publication (and the other publications of the same application / family,
  e.g. ``EP0640886A1`` for ``EP0640886B1``), represented on the document side by its claims
  (:func:`service.retrieval.encoders.document_text`). The query is the title + abstract (a
  different text of the same invention), or, for the cross-lingual mates, the German or French
  claims of an EP grant against its English claims.
- 1: another publication sharing a main group (``H01F27/00``, by shape) of its IPC/CPC codes.
- 0: any other publication (sampled).

Topics of a record (:func:`record_topics`): ``<id>:ta.<lang>`` = title + abstract in each language
that has a title or abstract (a record without an abstract uses title + the first description
paragraphs in that language, when the description is in it); for records with English claims,
``<id>:claims.<lang>`` = the whole German / French claims and ``<id>:claim<n>.<lang>`` = each of the
first three independent claims (the claims are aligned with the English ones, so each is a
cross-lingual mate of the document).

Split (:func:`make_split`, written as ``split.json``): publications are grouped by family id or else
country + number (kind dropped) so an A1 and its B1 never fall in different parts. A group is
*trilingual* when one of its publications has claims in en, de and fr (the EP grants). Groups are
ordered by ``sha256(group key)``; ordinary groups go by that hash to train (< 0.8), dev (< 0.9) or test,
so adding documents never moves old ones; trilingual groups are split separately by rank in hash
order into the first 50 % (train), next 20 % (dev) and the rest (test), so some cross-lingual mates
are trained on while the test grants stay unseen. Nothing of a test publication is used in training
(not its text for word2vec, not its queries, not as a document); dev publications are only used to
pick epochs, thresholds and stacking weights.

Bounded memory for large corpora: at most ``max_train_topics`` / ``max_dev_topics`` topics
(taken round robin over the query languages, each language in hash order, so a cap keeps every
language) and a document pool of every judged document plus random fillers (negatives) up to
``max_pool_docs`` (the judged ones are kept even past the cap: at most ``topics * (1 + max_rel1)``
plus same-family publications).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from service.codes import record_codes, truncate_code
from service.corpus.record import PatentRecord
from service.corpus.record import family_key as group_key
from service.index.folder import hash_unit
from service.retrieval.encoders import (
    CODES_MAX,
    DOC_MAX_TERMS,
    QUERY_MAX_TERMS,
    CodeVocabulary,
    Vocabulary,
    document_ids,
    document_text,
    query_ids,
)
from service.text.analysis import SUPPORTED_LANGS
from service.versioned import read_versioned

SPLIT_FORMAT = "priorart-split"
SPLIT_VERSION = 1
PARTS = ("train", "dev", "test")
DEFAULT_RATIOS = (0.8, 0.1, 0.1)
TRILINGUAL_RATIOS = (0.5, 0.2, 0.3)
DESCRIPTION_QUERY_CHARS = 2000




def is_trilingual(record: PatentRecord) -> bool:
    """Claims in English, German and French (the EP grants with aligned claims)."""
    return all(record.claims.get(lang) for lang in SUPPORTED_LANGS)


# --------------------------------------------------------------------------------------------------
# topics of a record
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TopicText:
    """A query made from a record: ``qid`` = ``<id>:<kind>.<lang>``."""

    qid: str
    source: str
    lang: str
    kind: str
    text: str


def topic_text(record: PatentRecord, lang: str) -> str:
    """Title + abstract in ``lang``; without an abstract, title + the description's first paragraphs.

    This is the query text of a record for training and for evaluation topics.
    """
    parts = [p for p in (record.title.get(lang), record.abstract.get(lang)) if p]
    if not record.abstract.get(lang) and record.description and (record.lang or "en") == lang:
        desc: list[str] = []
        size = 0
        for section in record.description:
            for _, node in section.walk():
                for para in node.paragraphs:
                    if size >= DESCRIPTION_QUERY_CHARS:
                        break
                    desc.append(para)
                    size += len(para)
        parts.append("\n".join(desc)[:DESCRIPTION_QUERY_CHARS])
    return "\n".join(p for p in parts if p)


def record_topics(record: PatentRecord, *, max_claim_topics: int = 3) -> list[TopicText]:
    """Every query that a record yields (see the module docstring)."""
    out: list[TopicText] = []
    for lang in SUPPORTED_LANGS:
        if record.title.get(lang) or record.abstract.get(lang):
            text = topic_text(record, lang)
            if text:
                out.append(TopicText(f"{record.id}:ta.{lang}", record.id, lang, "ta", text))
    if record.claims.get("en"):
        for lang in ("de", "fr"):
            claims = record.claims.get(lang) or []
            if not claims:
                continue
            out.append(TopicText(f"{record.id}:claims.{lang}", record.id, lang, "claims", record.claims_text(lang)))
            indep = [c for c in claims if not c.refs][:max_claim_topics]
            for c in indep:
                out.append(TopicText(f"{record.id}:claim{c.num}.{lang}", record.id, lang, "claim", c.text))
    return out


# --------------------------------------------------------------------------------------------------
# split
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DocInfo:
    """What the first pass keeps of a record (small: bounded memory on 100k records)."""

    id: str
    group: str
    trilingual: bool
    main_groups: tuple[str, ...]
    has_text: bool
    topics: tuple[tuple[str, str], ...]  # (qid, lang)


def doc_info(record: PatentRecord) -> DocInfo:
    codes = record_codes(record)
    mgs = tuple(sorted({m for c in codes if (m := truncate_code(c, "main_group"))}))
    text, _ = document_text(record)
    return DocInfo(
        id=record.id,
        group=group_key(record),
        trilingual=is_trilingual(record),
        main_groups=mgs,
        has_text=bool(text.strip()),
        topics=tuple((t.qid, t.lang) for t in record_topics(record)),
    )


@dataclass
class Split:
    """Publication id -> part (``train``/``dev``/``test``), and which publications are trilingual."""

    part: dict[str, str]
    trilingual: set[str] = field(default_factory=set)
    ratios: tuple[float, float, float] = DEFAULT_RATIOS
    trilingual_ratios: tuple[float, float, float] = TRILINGUAL_RATIOS

    def ids(self, part: str) -> list[str]:
        if part not in PARTS:
            raise ValueError(f"unknown part {part!r}; choose one of {', '.join(PARTS)}")
        return [i for i, p in self.part.items() if p == part]

    def of(self, doc_id: str) -> str:
        try:
            return self.part[doc_id]
        except KeyError:
            raise KeyError(f"{doc_id} is not in the split (was it in the training corpus?)") from None

    def summary(self) -> dict[str, Any]:
        counts = {p: 0 for p in PARTS}
        tri = {p: 0 for p in PARTS}
        for i, p in self.part.items():
            counts[p] += 1
            if i in self.trilingual:
                tri[p] += 1
        return {"documents": counts, "trilingual": tri}

    def to_json(self) -> dict[str, Any]:
        return {
            "format": SPLIT_FORMAT,
            "version": SPLIT_VERSION,
            "method": (
                "groups = family id or country+number; ordinary groups by sha256(group) in [0,1): "
                f"train < {self.ratios[0]}, dev < {self.ratios[0] + self.ratios[1]:.2f}, else test; trilingual "
                f"groups (claims in en+de+fr) ranked by that hash: first {self.trilingual_ratios[0]:.0%} train, "
                f"next {self.trilingual_ratios[1]:.0%} dev, rest test"
            ),
            "ratios": list(self.ratios),
            "trilingual_ratios": list(self.trilingual_ratios),
            "summary": self.summary(),
            **{p: sorted(self.ids(p)) for p in PARTS},
            "trilingual": sorted(self.trilingual),
        }

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_json(), indent=1), encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> Split:
        data = read_versioned(path, SPLIT_FORMAT, SPLIT_VERSION, fix="retrain the models (`priorart train`)")
        part = {i: p for p in PARTS for i in data[p]}
        return cls(part, set(data.get("trilingual", [])), tuple(data["ratios"]), tuple(data["trilingual_ratios"]))


def make_split(
    docs: Iterable[DocInfo | tuple[str, str, bool]],
    *,
    ratios: Sequence[float] = DEFAULT_RATIOS,
    trilingual_ratios: Sequence[float] = TRILINGUAL_RATIOS,
) -> Split:
    """The fixed split (see the module docstring). ``docs``: ``DocInfo`` or ``(id, group, trilingual)``."""
    for name, r in (("ratios", ratios), ("trilingual_ratios", trilingual_ratios)):
        if len(r) != 3 or any(x < 0 for x in r) or not math.isclose(sum(r), 1.0, abs_tol=1e-6):
            raise ValueError(f"{name} must be three non-negative numbers summing to 1, got {list(r)}")
    members: dict[str, list[str]] = {}
    tri_groups: set[str] = set()
    tri_docs: set[str] = set()
    for d in docs:
        doc_id, group, tri = (d.id, d.group, d.trilingual) if isinstance(d, DocInfo) else d
        members.setdefault(group, []).append(doc_id)
        if tri:
            tri_groups.add(group)
            tri_docs.add(doc_id)
    part: dict[str, str] = {}
    for group, ids in members.items():
        if group in tri_groups:
            continue
        h = hash_unit(group)
        p = "train" if h < ratios[0] else "dev" if h < ratios[0] + ratios[1] else "test"
        for i in ids:
            part[i] = p
    ranked = sorted(tri_groups, key=lambda g: (hash_unit(g), g))
    n = len(ranked)
    n_train = round(trilingual_ratios[0] * n)
    n_dev = round(trilingual_ratios[1] * n)
    for rank, group in enumerate(ranked):
        p = "train" if rank < n_train else "dev" if rank < n_train + n_dev else "test"
        for i in members[group]:
            part[i] = p
    return Split(
        part,
        tri_docs,
        (ratios[0], ratios[1], ratios[2]),
        (trilingual_ratios[0], trilingual_ratios[1], trilingual_ratios[2]),
    )


# --------------------------------------------------------------------------------------------------
# topic plan (from DocInfo, before any text is encoded)
# --------------------------------------------------------------------------------------------------


@dataclass
class PlannedTopic:
    qid: str
    source: str
    lang: str
    judged: dict[str, int]  # publication id -> relevance (2 or 1)


@dataclass
class TopicPlan:
    train: list[PlannedTopic]
    dev: list[PlannedTopic]
    pool: list[str]  # publication ids whose document side is needed
    pool_part: dict[str, str]

    def sources(self) -> set[str]:
        return {t.source for t in (*self.train, *self.dev)}


def plan_topics(
    infos: Sequence[DocInfo],
    split: Split,
    *,
    max_train_topics: int = 5000,
    max_dev_topics: int = 300,
    max_rel1: int = 5,
    max_pool_docs: int = 20_000,
    languages: Iterable[str] = SUPPORTED_LANGS,
    seed: int = 13,
) -> TopicPlan:
    """Choose topics and their judged documents; train topics see train documents only, dev topics train+dev."""
    langs = set(languages)
    rng = np.random.default_rng(seed)
    by_id = {d.id: d for d in infos}
    groups: dict[str, list[str]] = {}
    by_mg: dict[str, list[str]] = {}
    for d in infos:
        if split.part.get(d.id) in ("train", "dev") and d.has_text:
            groups.setdefault(d.group, []).append(d.id)
            for mg in d.main_groups:
                by_mg.setdefault(mg, []).append(d.id)

    def judged_for(src: DocInfo, allowed: set[str]) -> dict[str, int]:
        judged = {i: 2 for i in groups.get(src.group, []) if split.part[i] in allowed}
        cands: list[str] = []
        seen = set(judged)
        for mg in src.main_groups:
            for i in by_mg.get(mg, []):
                if i not in seen and split.part[i] in allowed:
                    seen.add(i)
                    cands.append(i)
        if len(cands) > max_rel1:
            cands = [cands[j] for j in sorted(rng.choice(len(cands), max_rel1, replace=False))]
        judged.update({i: 1 for i in cands})
        return judged

    def topics_of(part: str, allowed: set[str], cap: int) -> list[PlannedTopic]:
        by_lang: dict[str, list[tuple[float, str, str, str]]] = {}
        for d in infos:
            if split.part.get(d.id) != part:
                continue
            for qid, lang in d.topics:
                if lang in langs:
                    by_lang.setdefault(lang, []).append((hash_unit(qid), qid, d.id, lang))
        queues = [sorted(by_lang[lang], reverse=True) for lang in SUPPORTED_LANGS if lang in by_lang]
        out: list[PlannedTopic] = []
        while queues and len(out) < cap:  # round robin over the languages, each in hash order
            for queue in queues:
                while queue:
                    _, qid, src, lang = queue.pop()
                    judged = judged_for(by_id[src], allowed)
                    if any(r == 2 for r in judged.values()):
                        out.append(PlannedTopic(qid, src, lang, judged))
                        break
                if len(out) >= cap:
                    break
            queues = [q for q in queues if q]
        return out

    train = topics_of("train", {"train"}, max_train_topics)
    dev = topics_of("dev", {"train", "dev"}, max_dev_topics)
    pool: dict[str, None] = {}
    for t in (*train, *dev):
        for i in t.judged:
            pool[i] = None
    fillers = [d.id for d in infos if split.part.get(d.id) in ("train", "dev") and d.has_text and d.id not in pool]
    fillers.sort(key=hash_unit)
    for i in fillers[: max(0, max_pool_docs - len(pool))]:
        pool[i] = None
    ids = list(pool)
    return TopicPlan(train, dev, ids, {i: split.part[i] for i in ids})


# --------------------------------------------------------------------------------------------------
# encoded data for the rankers and the dual encoder
# --------------------------------------------------------------------------------------------------


@dataclass
class Topic:
    """An encoded query with its judged pool documents (pool index -> relevance 1 or 2)."""

    qid: str
    source: str
    lang: str
    terms: np.ndarray
    codes: np.ndarray
    judged: dict[int, int]


@dataclass
class DocPool:
    """Encoded document side of the pool: English term ids and code ids per document."""

    ids: list[str]
    terms: list[np.ndarray]
    codes: list[np.ndarray]
    is_train: np.ndarray  # bool: may be a training negative (train part); dev docs are only dev candidates

    def __len__(self) -> int:
        return len(self.ids)


@dataclass
class RankingData:
    pool: DocPool
    train: list[Topic]
    dev: list[Topic]
    dev_candidates: list[np.ndarray] = field(default_factory=list)  # pool indices per dev topic
    dev_rels: list[np.ndarray] = field(default_factory=list)

    @property
    def languages(self) -> list[str]:
        return sorted({t.lang for t in self.train}, key=lambda x: SUPPORTED_LANGS.index(x))

    def summary(self) -> dict[str, Any]:
        def count(topics: list[Topic]) -> dict[str, int]:
            out: dict[str, int] = {}
            for t in topics:
                out[t.lang] = out.get(t.lang, 0) + 1
            return out

        return {
            "pool_documents": len(self.pool),
            "train_topics": count(self.train),
            "dev_topics": count(self.dev),
            "train_judged": {str(r): sum(1 for t in self.train for v in t.judged.values() if v == r) for r in (1, 2)},
            "dev_judged": {str(r): sum(1 for t in self.dev for v in t.judged.values() if v == r) for r in (1, 2)},
        }


def encode_data(
    records: Iterable[PatentRecord],
    plan: TopicPlan,
    vocabs: Mapping[str, Vocabulary],
    codes: CodeVocabulary,
    *,
    dev_negatives: int = 20,
    query_max_terms: int = QUERY_MAX_TERMS,
    doc_max_terms: int = DOC_MAX_TERMS,
    codes_max: int = CODES_MAX,
    seed: int = 13,
) -> RankingData:
    """Second pass: encode the planned topics and pool documents (one streaming read of the corpus).

    Topics whose query has no known term, or whose relevant documents all lost their text, are dropped.
    """
    pool_index = {i: n for n, i in enumerate(plan.pool)}
    pool_terms: list[np.ndarray | None] = [None] * len(plan.pool)
    pool_codes: list[np.ndarray | None] = [None] * len(plan.pool)
    wanted: dict[str, list[PlannedTopic]] = {}
    for t in (*plan.train, *plan.dev):
        wanted.setdefault(t.source, []).append(t)
    enc: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    en = vocabs["en"]
    for rec in records:
        n = pool_index.get(rec.id)
        rcodes = None
        if n is not None:
            rcodes = codes.code_ids(record_codes(rec), codes_max)
            pool_terms[n] = document_ids(rec, en, doc_max_terms)
            pool_codes[n] = rcodes
        if rec.id in wanted:
            if rcodes is None:
                rcodes = codes.code_ids(record_codes(rec), codes_max)
            texts = {t.qid: t for t in record_topics(rec)}
            for pt in wanted[rec.id]:
                tt = texts.get(pt.qid)
                if tt is not None and pt.lang in vocabs:
                    enc[pt.qid] = (query_ids(tt.text, pt.lang, vocabs[pt.lang], query_max_terms), rcodes)
    missing = [plan.pool[i] for i, t in enumerate(pool_terms) if t is None]
    if missing:
        raise ValueError(f"{len(missing)} planned documents not found in the corpus (e.g. {missing[0]})")
    pool = DocPool(
        ids=list(plan.pool),
        terms=[t for t in pool_terms if t is not None],
        codes=[c for c in pool_codes if c is not None],
        is_train=np.asarray([plan.pool_part[i] == "train" for i in plan.pool], dtype=bool),
    )

    def make(topics: list[PlannedTopic]) -> list[Topic]:
        out = []
        for pt in topics:
            if pt.qid not in enc:
                continue
            terms, tcodes = enc[pt.qid]
            judged = {pool_index[i]: r for i, r in pt.judged.items()}
            if len(terms) == 0 or not any(r == 2 and len(pool.terms[i]) for i, r in judged.items()):
                continue
            out.append(Topic(pt.qid, pt.source, pt.lang, terms, tcodes, judged))
        return out

    data = RankingData(pool, make(plan.train), make(plan.dev))
    rng = np.random.default_rng(seed + 1)
    n_pool = len(pool)
    for topic in data.dev:
        negs: list[int] = []
        if n_pool > len(topic.judged):
            tries = 0
            while len(negs) < dev_negatives and tries < 20 * dev_negatives:
                j = int(rng.integers(n_pool))
                tries += 1
                if j not in topic.judged and j not in negs:
                    negs.append(j)
        cands = [*topic.judged.keys(), *negs]
        data.dev_candidates.append(np.asarray(cands, dtype=np.int64))
        data.dev_rels.append(np.asarray([topic.judged.get(c, 0) for c in cands], dtype=np.int64))
    return data


# --------------------------------------------------------------------------------------------------
# sampling and measures
# --------------------------------------------------------------------------------------------------


def _negatives(topic: Topic, train_docs: np.ndarray, k: int, rng: np.random.Generator) -> list[int]:
    out: list[int] = []
    if len(train_docs) == 0:
        return out
    tries = 0
    while len(out) < k and tries < 20 * k:
        j = int(train_docs[rng.integers(len(train_docs))])
        tries += 1
        if j not in topic.judged:
            out.append(j)
    return out


def sample_pairs(
    data: RankingData, rng: np.random.Generator, *, negatives: int = 4, max_rel1_pairs: int = 2
) -> np.ndarray:
    """Pairwise examples ``[topic, better doc, worse doc]`` (int64 [n, 3]) over the training topics.

    Each relevant document (relevance 1 or 2) is paired with ``negatives`` sampled non-relevant
    training documents; each relevance-2 document also with up to ``max_rel1_pairs`` relevance-1 ones.
    """
    train_docs = np.flatnonzero(data.pool.is_train)
    rows: list[tuple[int, int, int]] = []
    for ti, t in enumerate(data.train):
        rel1 = [d for d, r in t.judged.items() if r == 1]
        for d, r in t.judged.items():
            rows.extend((ti, d, n) for n in _negatives(t, train_docs, negatives, rng))
            if r == 2 and rel1:
                pick = rng.choice(len(rel1), min(max_rel1_pairs, len(rel1)), replace=False)
                rows.extend((ti, d, rel1[int(j)]) for j in pick)
    return np.asarray(rows, dtype=np.int64).reshape(-1, 3)


def sample_pointwise(data: RankingData, rng: np.random.Generator, *, negatives: int = 4) -> np.ndarray:
    """Pointwise examples ``[topic, doc, relevance]`` (int64 [n, 3]): judged docs + sampled negatives."""
    train_docs = np.flatnonzero(data.pool.is_train)
    rows: list[tuple[int, int, int]] = []
    for ti, t in enumerate(data.train):
        for d, r in t.judged.items():
            rows.append((ti, d, r))
            rows.extend((ti, n, 0) for n in _negatives(t, train_docs, negatives, rng))
    return np.asarray(rows, dtype=np.int64).reshape(-1, 3)


def ndcg(scores: np.ndarray, rels: np.ndarray) -> float:
    """NDCG without cut-off, linear gain, log2 discount (trec_eval's ``ndcg``); ties keep input order."""
    rels = np.asarray(rels, dtype=np.float64)
    if rels.max(initial=0) <= 0:
        return 0.0
    order = np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")
    disc = 1.0 / np.log2(np.arange(2, len(rels) + 2))
    dcg = float((rels[order] * disc).sum())
    idcg = float((np.sort(rels)[::-1] * disc).sum())
    return dcg / idcg
