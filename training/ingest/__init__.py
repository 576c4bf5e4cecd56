"""Patent ingestion: EPO publication-server XML, USPTO XML of every generation (weekly bulk files), MAREC /
CLEF-IP ``patent-document``, EPO OPS full text, JSONL.

Public API::

    iter_records(paths, stats=None) -> Iterator[PatentRecord]   # stream records from files/directories
    shared_records(data) -> list[PatentRecord]                  # every EP and US publication of the shared data
    shared_records(data, folders="all")                         # every publication of patents/, marec/, ops/
    ingest(paths, output) -> IngestStats                        # write them to a corpus JSONL (merged)
    parse_ep(xml_bytes, source_name) -> PatentRecord            # one EP document
    parse_us(xml_bytes, source_name) -> PatentRecord            # one USPTO document (any generation)
    parse_marec(xml_bytes, source_name) -> PatentRecord         # one MAREC patent-document (EP, US, WO)
    parse_ops(xml_bytes, source_name) -> PatentRecord           # one OPS fulltext-document
    merge_all(records) -> (records, merged)                     # one record per publication (training.ingest.merge)
"""

from __future__ import annotations

from training.ingest.claims import parse_claim_refs
from training.ingest.codes import normalise_ipc
from training.ingest.ep import parse_ep
from training.ingest.errors import DocumentError, IngestStats, Skip
from training.ingest.marec import parse_marec
from training.ingest.merge import merge_all, merge_records, publication_key
from training.ingest.ops import parse_ops
from training.ingest.pipeline import (
    IngestInputError,
    MissingDataError,
    collect_files,
    ingest,
    iter_records,
    parse_document,
    shared_records,
    unserved_texts,
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
    "merge_all",
    "merge_records",
    "normalise_ipc",
    "parse_claim_refs",
    "parse_document",
    "parse_ep",
    "parse_marec",
    "parse_ops",
    "parse_us",
    "publication_key",
    "shared_records",
    "unserved_texts",
]
