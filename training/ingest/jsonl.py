"""The project's own corpus JSONL as an ingest input (passthrough: records come out unchanged)."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

from pydantic import ValidationError

from service.corpus.record import PatentRecord
from training.ingest.errors import DocumentError
from training.ingest.files import open_binary


def iter_jsonl(path: Path) -> Iterator[tuple[int, PatentRecord | DocumentError]]:
    """Yield ``(line number, record)`` for each non-empty line, or ``(line number, DocumentError)`` for a bad one.

    Errors are yielded rather than raised so that one bad line does not stop the rest of the file.
    """
    with open_binary(path) as raw, io.TextIOWrapper(raw, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                yield lineno, PatentRecord.model_validate_json(line)
            except ValidationError as exc:
                err = exc.errors()[0]
                where = ".".join(str(p) for p in err.get("loc", ())) or "record"
                yield lineno, DocumentError(f"invalid record ({where}: {err['msg']})")
