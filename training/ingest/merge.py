"""One record per publication: the same publication read from several sources is merged field by field.

An EP grant can come as EPO publication-server XML (``patents/ep``) and as a MAREC ``patent-document``; a
publication's OPS full text can come beside its MAREC or office record. Such records share their
:func:`publication_key` (the id normalised by :func:`service.corpus.ids.normalise_pub_id` and
:func:`service.corpus.ids.id_keys`, with the docdb short forms spelled out: OPS's ``WO0100832A1`` is WO
2001/000832, its ``US2004248206A1`` is US 2004/0248206).

How fields are merged (:func:`merge_records`): the sources are ranked (:data:`SOURCE_RANK`: the office's own
publication first, then the MAREC collection, then OPS text, then anything else), and for each field

- id, country, number, kind, the dates, doc type, family: the best-ranked source that has a value (a
  different value from another source is noted in ``warnings``);
- title, abstract, claims: per language, from the best-ranked source that has that language: German claims
  from MAREC may join English claims from the EPO file;
- description and ``lang`` (its language) together, from the best-ranked source with a description;
- ipc, cpc, ecla, citations: the union, in rank order;
- priority claims (ids and dates together), applicants, inventors: the whole list from one source (the
  sources spell names differently, a union would repeat them);
- warnings: all, each prefixed with its source.

The merged record's ``source`` is its best-ranked source, and ``provenance`` says where every field came from:
``{"claims.de": "marec", "claims.en": "ep", "ipc": "ep+marec", ...}``.

Streaming: ingest writes records as they are read and notes each key; only when a key was seen twice does it
read its output again, holding just the records of repeated keys (:func:`merge_corpus_file`). Inputs without
repeats (the usual case) cost one set of keys; large inputs stay streamed. :func:`merge_all` merges a list in
memory (what :func:`training.ingest.pipeline.shared_records` returns).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from service.corpus.ids import id_keys, normalise_pub_id
from service.corpus.jsonl import read_corpus, write_corpus
from service.corpus.record import Citation, PatentRecord

# sources by rank, the best first: the offices' publications, then MAREC (a derived collection), then OPS text
SOURCE_RANK: tuple[str, ...] = ("ep", "us-ipg", "us-ipa", "us-pap", "us-sgml", "marec", "ops")
_WO_SHORT_RE = re.compile(r"^WO(\d{2})(\d{5,6})([A-Z]\d?)?$")  # docdb: WO + 2-digit year + serial
_US_SHORT_RE = re.compile(r"^US((?:19|20)\d{2})(\d{6})(A\d?)$")  # docdb: US + year + 6-digit serial (pre-grant)
_SCALARS = ("doc_type", "publication_date", "application_date", "family_id")
_PER_LANG = ("title", "abstract", "claims")
_UNION = ("ipc", "cpc", "ecla")
_WHOLE = ("applicants", "inventors")


def publication_key(pub_id: str) -> str:
    """The key under which two spellings of one publication meet: ``'EP0640886B1'`` and ``'EP 640886 B1'``,
    ``'WO0100832A1'`` and ``'WO2001000832A1'``, ``'US2004248206A1'`` and ``'US20040248206A1'``."""
    norm = normalise_pub_id(pub_id)
    if m := _WO_SHORT_RE.match(norm):
        yy, serial, kind = m.groups()
        norm = f"WO{'19' if int(yy) >= 78 else '20'}{yy}{int(serial):06d}{kind or ''}"
    elif m := _US_SHORT_RE.match(norm):
        year, serial, kind = m.groups()
        norm = f"US{year}0{serial}{kind}"
    keys = id_keys(norm)
    return keys[0] if keys else norm


def _rank(record: PatentRecord) -> int:
    return SOURCE_RANK.index(record.source) if record.source in SOURCE_RANK else len(SOURCE_RANK)


def _citation_key(c: Citation) -> str:
    return publication_key(c.id) if c.id else c.text


def merge_records(records: Sequence[PatentRecord]) -> PatentRecord:
    """One record from records of the same publication (see the module docstring for the rules)."""
    if not records:
        raise ValueError("nothing to merge")
    if len(records) == 1:
        return records[0]
    ordered = sorted(records, key=_rank)  # stable: equal ranks keep their reading order
    best = ordered[0]
    prov: dict[str, str] = {}
    warnings: list[str] = []
    data: dict[str, Any] = {"id": best.id, "country": best.country, "number": best.number, "kind": best.kind,
                            "source": best.source}
    for name in ("id", "country", "number", "kind"):
        prov[name] = best.source

    for name in _SCALARS:
        have = [(r, getattr(r, name)) for r in ordered if getattr(r, name) is not None]
        if have:
            data[name] = have[0][1]
            prov[name] = have[0][0].source
            other = [f"{r.source} {v}" for r, v in have[1:] if v != have[0][1]]
            if other:
                warnings.append(f"merge: {name} {have[0][1]} from {have[0][0].source} kept; {', '.join(other)}")

    for name in _PER_LANG:
        merged: dict[str, Any] = {}
        for r in ordered:
            for lang, value in getattr(r, name).items():
                if value and lang not in merged:
                    merged[lang] = value
                    prov[f"{name}.{lang}"] = r.source
        data[name] = merged

    with_desc = next((r for r in ordered if r.description), None)
    if with_desc is not None:
        data["description"], data["lang"] = with_desc.description, with_desc.lang
        prov["description"] = with_desc.source
    else:
        data["lang"] = next((r.lang for r in ordered if r.lang), None)
    if data["lang"] is not None:
        prov["lang"] = with_desc.source if with_desc is not None else next(r.source for r in ordered if r.lang)

    for name in _UNION:
        codes: list[str] = []
        contributors: list[str] = []
        for r in ordered:
            new = [c for c in getattr(r, name) if c not in codes]
            if new:
                codes.extend(new)
                if r.source not in contributors:
                    contributors.append(r.source)
        data[name] = codes
        if contributors:
            prov[name] = "+".join(contributors)
    citations: list[Citation] = []
    seen: set[str] = set()
    contributors = []
    for r in ordered:
        for c in r.citations:
            key = _citation_key(c)
            if key not in seen:
                seen.add(key)
                citations.append(c)
                if r.source not in contributors:
                    contributors.append(r.source)
    data["citations"] = citations
    if contributors:
        prov["citations"] = "+".join(contributors)

    with_prio = next((r for r in ordered if r.priority_ids or r.priority_dates), None)
    if with_prio is not None:
        data["priority_ids"], data["priority_dates"] = with_prio.priority_ids, with_prio.priority_dates
        prov["priority_ids"] = prov["priority_dates"] = with_prio.source
    for name in _WHOLE:
        src = next((r for r in ordered if getattr(r, name)), None)
        if src is not None:
            data[name] = getattr(src, name)
            prov[name] = src.source

    for r in ordered:
        warnings.extend(f"{r.source}: {w}" for w in r.warnings)
    data["warnings"] = list(dict.fromkeys(warnings))
    data["provenance"] = prov
    return PatentRecord(**data)


def merge_all(records: Iterable[PatentRecord]) -> tuple[list[PatentRecord], dict[str, list[str]]]:
    """Records with one record per publication (at the place of its first one), and the merged ids: key ->
    the sources merged (in reading order)."""
    groups: dict[str, list[PatentRecord]] = {}
    for rec in records:
        groups.setdefault(publication_key(rec.id), []).append(rec)
    merged = {key: [r.source for r in group] for key, group in groups.items() if len(group) > 1}
    return [merge_records(group) for group in groups.values()], merged


def merge_corpus_file(path: str | Path, keys: set[str]) -> dict[str, list[str]]:
    """Rewrite a corpus file with the records of each key of ``keys`` merged into one (at the first one's place).

    Reads the file twice: once to collect the records of ``keys`` (only those are held), once to write the
    result next to it, which then replaces it. Returns key -> the sources merged.
    """
    path = Path(path)
    groups: dict[str, list[PatentRecord]] = {}
    for rec in read_corpus(path):
        key = publication_key(rec.id)
        if key in keys:
            groups.setdefault(key, []).append(rec)
    merged = {key: merge_records(group) for key, group in groups.items() if len(group) > 1}

    def records() -> Iterable[PatentRecord]:
        done: set[str] = set()
        for rec in read_corpus(path):
            key = publication_key(rec.id)
            if key not in merged:
                yield rec
            elif key not in done:
                done.add(key)
                yield merged[key]

    tmp = path.with_name(f".{path.stem}.merging{path.suffix}")
    try:
        write_corpus(records(), tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return {key: [r.source for r in group] for key, group in groups.items() if len(group) > 1}
