"""Topics (JSONL), qrels (``qid 0 docid rel``) and runs (``qid Q0 docid rank score tag``): read and write.

Blank lines are skipped everywhere; a malformed line raises :class:`TrecFormatError` naming the file
and the line number.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from datetime import date
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from service.codes import normalise_codes, record_codes
from service.text.analysis import SUPPORTED_LANGS

Run = dict[str, dict[str, float]]
"""A run: query id -> document id -> score (higher is better)."""
Qrels = dict[str, dict[str, int]]
"""Relevance judgments: query id -> document id -> grade (> 0 is relevant)."""


class TrecFormatError(ValueError):
    """A topics, qrels or run line that cannot be read (the message names the file and line)."""


class Topic(BaseModel):
    """One evaluation query. Unknown keys in the JSON line are ignored.

    ``ipc``/``cpc`` are the query patent's classification codes (normalised), ``before`` an optional
    date: only documents published before it count as prior art.
    """

    model_config = ConfigDict(extra="ignore", frozen=True)

    qid: str = Field(min_length=1)
    text: str
    lang: str | None = None
    ipc: list[str] = Field(default_factory=list)
    cpc: list[str] = Field(default_factory=list)
    before: date | None = None

    @field_validator("qid", mode="before")
    @classmethod
    def _qid_str(cls, value: object) -> object:
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
        if isinstance(value, str) and (not value.strip() or any(ch.isspace() for ch in value)):
            raise ValueError(f"qid must be non-empty and contain no whitespace, got {value!r}")
        return value

    @field_validator("text")
    @classmethod
    def _text_nonempty(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("text is empty")
        return value

    @field_validator("lang")
    @classmethod
    def _lang_known(cls, value: str | None) -> str | None:
        if value is not None and value not in SUPPORTED_LANGS:
            raise ValueError(f"lang must be one of {', '.join(SUPPORTED_LANGS)}, got {value!r}")
        return value

    @field_validator("ipc", "cpc", mode="before")
    @classmethod
    def _codes(cls, value: object) -> object:
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list):
            return value
        for code in value:
            if not isinstance(code, str):
                raise ValueError(f"classification codes must be strings, got {code!r}")
        return normalise_codes(value)

    @property
    def codes(self) -> list[str]:
        """CPC and IPC codes together, without duplicates (:func:`service.codes.record_codes`)."""
        return record_codes(self)


def _lines(path: Path) -> Iterable[tuple[int, str]]:
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {path}")
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if line.strip():
                yield lineno, line


def read_topics(path: str | Path) -> list[Topic]:
    """Read topics from JSON lines (``qid``, ``text``, optional ``lang``, ``ipc``, ``cpc``, ``before``)."""
    path = Path(path)
    topics: list[Topic] = []
    seen: set[str] = set()
    for lineno, line in _lines(path):
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TrecFormatError(f"{path}:{lineno}: not valid JSON: {exc.msg}") from exc
        if not isinstance(obj, dict):
            raise TrecFormatError(f"{path}:{lineno}: expected a JSON object, got {type(obj).__name__}")
        try:
            topic = Topic.model_validate(obj)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"]) or "topic"
            raise TrecFormatError(f"{path}:{lineno}: {where}: {err['msg']}") from exc
        if topic.qid in seen:
            raise TrecFormatError(f"{path}:{lineno}: duplicate qid {topic.qid!r}")
        seen.add(topic.qid)
        topics.append(topic)
    return topics


def write_topics(topics: Iterable[Topic], path: str | Path) -> int:
    """Write topics as JSON lines (empty optional fields left out); returns the count."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with open(path, "w", encoding="utf-8") as fh:
        for topic in topics:
            fh.write(topic.model_dump_json(exclude_defaults=True))
            fh.write("\n")
            n += 1
    return n


def read_qrels(path: str | Path) -> Qrels:
    """Read TREC qrels: ``qid iteration docid relevance`` (iteration ignored, relevance an integer)."""
    path = Path(path)
    qrels: Qrels = {}
    for lineno, line in _lines(path):
        parts = line.split()
        if len(parts) != 4:
            raise TrecFormatError(f"{path}:{lineno}: expected 4 fields 'qid 0 docid rel', got {len(parts)}")
        qid, _, docid, rel_text = parts
        try:
            rel = int(rel_text)
        except ValueError as exc:
            raise TrecFormatError(f"{path}:{lineno}: relevance must be an integer, got {rel_text!r}") from exc
        judged = qrels.setdefault(qid, {})
        if docid in judged and judged[docid] != rel:
            raise TrecFormatError(
                f"{path}:{lineno}: {qid} {docid} judged twice with different grades ({judged[docid]}, {rel})"
            )
        judged[docid] = rel
    return qrels


def write_qrels(qrels: Mapping[str, Mapping[str, int]], path: str | Path) -> int:
    """Write TREC qrels; returns the number of lines."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with open(path, "w", encoding="utf-8") as fh:
        for qid, judged in qrels.items():
            for docid, rel in judged.items():
                _check_id(qid, "qid")
                _check_id(docid, "docid")
                fh.write(f"{qid} 0 {docid} {int(rel)}\n")
                n += 1
    return n


def read_run(path: str | Path) -> Run:
    """Read a TREC run: ``qid Q0 docid rank score tag``. Ranking is by score (as trec_eval does)."""
    path = Path(path)
    run: Run = {}
    for lineno, line in _lines(path):
        parts = line.split()
        if len(parts) != 6:
            raise TrecFormatError(f"{path}:{lineno}: expected 6 fields 'qid Q0 docid rank score tag', got {len(parts)}")
        qid, _, docid, rank_text, score_text, _tag = parts
        try:
            int(rank_text)
            score = float(score_text)
        except ValueError as exc:
            raise TrecFormatError(f"{path}:{lineno}: rank must be an integer and score a number") from exc
        if not math.isfinite(score):
            raise TrecFormatError(f"{path}:{lineno}: score is not finite: {score_text}")
        scored = run.setdefault(qid, {})
        if docid in scored:
            raise TrecFormatError(f"{path}:{lineno}: document {docid} appears twice for query {qid}")
        scored[docid] = score
    return run


def ranked(scores: Mapping[str, float]) -> list[tuple[str, float]]:
    """Documents by descending score, ties broken by descending document id (trec_eval's order)."""
    by_id = sorted(scores.items(), key=lambda kv: kv[0], reverse=True)
    return sorted(by_id, key=lambda kv: kv[1], reverse=True)


def write_run(run: Mapping[str, Mapping[str, float]], path: str | Path, *, tag: str = "priorart") -> int:
    """Write a TREC run in trec_eval's ranking order; returns the number of lines."""
    _check_id(tag, "tag")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with open(path, "w", encoding="utf-8") as fh:
        for qid, scores in run.items():
            _check_id(qid, "qid")
            for rank, (docid, score) in enumerate(ranked(scores), 1):
                _check_id(docid, "docid")
                fh.write(f"{qid} Q0 {docid} {rank} {float(score)!r} {tag}\n")
                n += 1
    return n


def _check_id(value: str, what: str) -> None:
    if not value or any(ch.isspace() for ch in value):
        raise ValueError(f"{what} must be non-empty and contain no whitespace, got {value!r}")
