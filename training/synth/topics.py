"""Evaluation topics (CLEF-IP style) from synthetic records, with qrels from their citations."""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from typing import Any

from service.corpus.record import PatentRecord
from service.text.analysis import SUPPORTED_LANGS

CITATION_GRADES = {"X": 2, "Y": 1, "A": 1}
"""Relevance of a cited document by search-report category (see :func:`synth_topics`)."""


def synth_topics(
    records: Iterable[PatentRecord],
    n_topics: int,
    seed: int = 0,
    *,
    langs: Sequence[str] = SUPPORTED_LANGS,
) -> tuple[list[dict[str, Any]], dict[str, dict[str, int]]]:
    """A prior-art evaluation task from synthetic records (CLEF-IP style).

    A topic is one synthetic patent D: in English its title and abstract; in German or French (only
    trilingual ``B1`` documents) its title and first claim in that language. Relevant are the documents
    D cites that are present in ``records``: category ``X`` (D took over most of its invention)
    grade 2, ``Y`` (part of it) and ``A`` (same-topic background) grade 1. Only documents with at
    least one cited ``X`` document in ``records`` are eligible. D itself is *not* relevant: each topic
    carries ``before`` = D's publication date (cited documents are strictly older), so a searcher
    that applies it never returns D; ``source_id`` names D for searchers that do not.

    Topics are split evenly over ``langs`` (English takes what German/French cannot fill), chosen by
    seeded reservoir sampling in one pass; ``records`` must be in generation order (as written).
    Returns ``(topics, qrels)``: topic dicts with ``qid``, ``text``, ``lang``, ``cpc``, ``ipc``,
    ``before`` (ISO date), ``source_id``; qrels ``qid -> {doc_id: grade}``.
    """
    langs = tuple(dict.fromkeys(langs))
    if n_topics < 1:
        raise ValueError(f"n_topics must be >= 1, got {n_topics}")
    bad = [lang for lang in langs if lang not in SUPPORTED_LANGS]
    if bad or not langs:
        raise ValueError(f"langs must be among {', '.join(SUPPORTED_LANGS)}, got {', '.join(langs) or 'none'}")
    rng = random.Random(f"priorart-synth-topics-{seed}")
    quota = {lang: n_topics // len(langs) + (1 if k < n_topics % len(langs) else 0) for k, lang in enumerate(langs)}
    pools: dict[str, list[PatentRecord]] = {lang: [] for lang in langs}
    seen_count = dict.fromkeys(langs, 0)
    reserve = n_topics  # each reservoir may be asked to fill others' shortfall
    seen: set[str] = set()
    for rec in records:
        cited_x = any(c.category == "X" and c.id in seen for c in rec.citations)
        seen.add(rec.id)
        if not cited_x:
            continue
        for lang in langs:
            if lang == "en":
                ok = bool(rec.title.get("en")) and bool(rec.abstract.get("en"))
            else:
                ok = bool(rec.claims.get(lang)) and bool(rec.title.get(lang))
            if not ok:
                continue
            seen_count[lang] += 1
            pool = pools[lang]
            if len(pool) < reserve:
                pool.append(rec)
            else:
                j = rng.randrange(seen_count[lang])
                if j < reserve:
                    pool[j] = rec
    # fill: each language its quota, shortfalls go to the others (English first)
    chosen: dict[str, list[PatentRecord]] = {}
    short = 0
    for lang in langs:
        take = min(quota[lang], len(pools[lang]))
        chosen[lang] = pools[lang][:take]
        short += quota[lang] - take
    for lang in sorted(langs, key=lambda x: x != "en"):
        if short <= 0:
            break
        used = {r.id for r in chosen[lang]}
        extra = [r for r in pools[lang] if r.id not in used][:short]
        chosen[lang].extend(extra)
        short -= len(extra)
    if not any(chosen.values()):
        raise ValueError(
            "no eligible topic: no record cites an earlier record of the input with category X (and, for de/fr "
            "topics, has claims in that language); generate more documents"
        )
    topics: list[dict[str, Any]] = []
    qrels: dict[str, dict[str, int]] = {}
    for lang in langs:
        for rec in sorted(chosen[lang], key=lambda r: r.id):
            if lang == "en":
                text = f"{rec.title['en']}\n{rec.abstract['en']}"
            else:
                first = min(rec.claims[lang], key=lambda c: c.num)
                text = f"{rec.title[lang]}\n{first.text}"
            qid = f"{rec.id}-{lang}"
            topics.append(
                {
                    "qid": qid,
                    "text": text,
                    "lang": lang,
                    "cpc": list(rec.cpc),
                    "ipc": list(rec.ipc),
                    "before": rec.publication_date.isoformat() if rec.publication_date else None,
                    "source_id": rec.id,
                }
            )
            qrels[qid] = {
                c.id: CITATION_GRADES.get(c.category or "", 1) for c in rec.citations if c.id and c.id in seen
            }
    return topics, qrels
