"""Streaming JSON-lines reader/writer for corpus records."""

from __future__ import annotations

import gzip
import io
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO

from pydantic import ValidationError

from service.corpus.record import PatentRecord


class CorpusFormatError(ValueError):
    """A corpus line that is not a valid record (carries file and line number)."""


def _open_text(path: Path, mode: str) -> IO[str]:
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.GzipFile(path, mode + "b"), encoding="utf-8")
    return open(path, mode, encoding="utf-8")


def read_corpus(path: str | Path, *, strict: bool = True) -> Iterator[PatentRecord]:
    """Yield records one by one. ``strict=False`` skips invalid lines instead of raising."""
    path = Path(path)
    with _open_text(path, "r") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                yield PatentRecord.model_validate_json(line)
            except ValidationError as exc:
                if strict:
                    raise CorpusFormatError(f"{path}:{lineno}: invalid record: {exc.errors()[0]['msg']}") from exc


def write_corpus(records: Iterable[PatentRecord], path: str | Path) -> int:
    """Write records as JSON lines (``.gz`` suffix compresses); returns the count."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with _open_text(path, "w") as fh:
        for rec in records:
            fh.write(rec.model_dump_json(exclude_defaults=True))
            fh.write("\n")
            n += 1
    return n
