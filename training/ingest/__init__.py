"""Patent ingestion: EPO publication-server XML, USPTO XML of every generation (weekly bulk files), JSONL.

Public API::

    iter_records(paths, stats=None) -> Iterator[PatentRecord]   # stream records from files/directories
    shared_records(data) -> list[PatentRecord]                  # every EP and US publication of the shared data
    ingest(paths, output) -> IngestStats                        # write them to a corpus JSONL
    parse_ep(xml_bytes, source_name) -> PatentRecord            # one EP document
    parse_us(xml_bytes, source_name) -> PatentRecord            # one USPTO document (any generation)
"""

from __future__ import annotations

from training.ingest.claims import parse_claim_refs
from training.ingest.codes import normalise_ipc
from training.ingest.ep import parse_ep
from training.ingest.errors import DocumentError, IngestStats, Skip
from training.ingest.pipeline import (
    IngestInputError,
    MissingDataError,
    collect_files,
    ingest,
    iter_records,
    parse_document,
    shared_records,
)
from training.ingest.us import NotAPatent, parse_us

__all__ = [
    "DocumentError",
    "IngestInputError",
    "IngestStats",
    "MissingDataError",
    "NotAPatent",
    "Skip",
    "collect_files",
    "ingest",
    "iter_records",
    "normalise_ipc",
    "parse_claim_refs",
    "parse_document",
    "parse_ep",
    "parse_us",
    "shared_records",
]
