"""Evaluation tasks built from the corpus itself, where no relevance judgments exist.

- known-item: the title + abstract (English) of a US utility grant with claims and a description is
  the query; the one relevant document is that grant. The index searched must hold claims and
  description only (``priorart build ... --fields claims,description``), or the query text is in it.
- xling (cross-lingual): the German and the French first claim of each EP grant whose claims are
  published in English, German and French are queries (``<id>-de``, ``<id>-fr``); the relevant
  document is the grant. Searched against English text this measures crossing the language barrier.

A task folder holds ``topics.jsonl``, ``qrels.txt`` and ``task.json`` (what built it).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from service.corpus.record import PatentRecord
from training.evaluation.trec import Qrels, Topic, write_qrels, write_topics

KNOWN_ITEM_FIELDS = ("claims", "description")
"""Fields the index for the known-item task must be limited to."""
XLING_LANGS = ("de", "fr")


@dataclass
class Task:
    """Topics, qrels and the parameters that built them."""

    name: str
    topics: list[Topic]
    qrels: Qrels
    params: dict[str, Any] = field(default_factory=dict)

    def write(self, out_dir: str | Path) -> Path:
        """Write ``topics.jsonl``, ``qrels.txt`` and ``task.json`` into ``out_dir``; returns the folder."""
        out = Path(out_dir)
        if out.exists() and not out.is_dir():
            raise NotADirectoryError(f"output {out} exists and is not a folder")
        out.mkdir(parents=True, exist_ok=True)
        write_topics(self.topics, out / "topics.jsonl")
        write_qrels(self.qrels, out / "qrels.txt")
        meta = {"task": self.name, "topics": len(self.topics), **self.params}
        (out / "task.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
        return out


def is_known_item_candidate(rec: PatentRecord) -> bool:
    """A US utility grant with English title, abstract and claims and a non-empty description."""
    return (
        rec.country == "US"
        and rec.doc_type == "utility"
        and rec.kind.startswith("B")
        and bool(rec.title.get("en", "").strip())
        and bool(rec.abstract.get("en", "").strip())
        and bool(rec.claims.get("en"))
        and bool(rec.description_text().strip())
    )


def is_trilingual_grant(rec: PatentRecord) -> bool:
    """An EP grant (B kind) with claims in English, German and French."""
    return (
        rec.country == "EP"
        and rec.kind.startswith("B")
        and all(any(c.text.strip() for c in rec.claims.get(lang, [])) for lang in ("en", *XLING_LANGS))
    )


def known_item_task(records: Iterable[PatentRecord], *, n: int = 200, seed: int = 0) -> Task:
    """Sample up to ``n`` known-item topics (seeded) from the eligible US utility grants."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    pool = {rec.id: rec for rec in records if is_known_item_candidate(rec)}
    if not pool:
        raise ValueError("no US utility grant with English title, abstract, claims and description in the input")
    ids = sorted(pool)
    chosen = sorted(random.Random(seed).sample(ids, n)) if len(ids) > n else ids
    topics: list[Topic] = []
    qrels: Qrels = {}
    for doc_id in chosen:
        rec = pool[doc_id]
        text = f"{rec.title['en'].strip()}\n{rec.abstract['en'].strip()}"
        topics.append(Topic(qid=doc_id, text=text, lang="en", ipc=rec.ipc, cpc=rec.cpc))
        qrels[doc_id] = {doc_id: 1}
    params = {"n": n, "seed": seed, "eligible": len(ids), "index_fields": list(KNOWN_ITEM_FIELDS)}
    return Task(name="known-item", topics=topics, qrels=qrels, params=params)


_REFERENCE_SIGNS = re.compile(r"\(\s*\d{1,4}[a-z]?'?(?:\s*[,;/-]\s*\d{1,4}[a-z]?'?)*\s*\)")


def strip_reference_signs(text: str) -> str:
    """Drop drawing reference signs such as ``(12)`` or ``(12, 14a)`` from claim text.

    A claim and its own translation share every reference numeral, while a real prior-art query
    never shares them with the prior art it looks for; left in, they would let a topic find its own
    grant by numerals alone and the task would measure numeral matching, not cross-lingual retrieval.
    """
    return re.sub(r"\s{2,}", " ", _REFERENCE_SIGNS.sub(" ", text)).strip()


def xling_task(
    records: Iterable[PatentRecord], *, langs: Iterable[str] = XLING_LANGS, keep_reference_signs: bool = False
) -> Task:
    """German and French first claims of trilingual EP grants as topics; the grant is the relevant doc.

    Reference signs are stripped from the topics unless ``keep_reference_signs`` (see
    :func:`strip_reference_signs` for why).
    """
    langs = tuple(langs)
    bad = [lang for lang in langs if lang not in XLING_LANGS]
    if bad or not langs:
        raise ValueError(f"query languages must be among {', '.join(XLING_LANGS)}, got {', '.join(langs) or 'none'}")
    grants = sorted((rec for rec in records if is_trilingual_grant(rec)), key=lambda r: r.id)
    if not grants:
        raise ValueError("no EP grant with claims in English, German and French in the input")
    topics: list[Topic] = []
    qrels: Qrels = {}
    for rec in grants:
        for lang in langs:
            first = min((c for c in rec.claims[lang] if c.text.strip()), key=lambda c: c.num)
            qid = f"{rec.id}-{lang}"
            text = first.text if keep_reference_signs else strip_reference_signs(first.text)
            topics.append(Topic(qid=qid, text=text, lang=lang, ipc=rec.ipc, cpc=rec.cpc))
            qrels[qid] = {rec.id: 1}
    params = {"langs": list(langs), "grants": len(grants), "reference_signs": keep_reference_signs}
    return Task(name="xling", topics=topics, qrels=qrels, params=params)
