"""Errors and statistics of an ingest run: a document that cannot be read, a skip, the counts."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class DocumentError(ValueError):
    """A document that cannot be turned into a record (broken XML, no publication number, ...)."""


@dataclass
class Skip:
    """One document (or file) that was not ingested, and why."""

    file: str
    index: int | None  # 1-based position of the document within the file; None for a whole file
    reason: str
    doc_id: str | None = None

    def describe(self) -> str:
        where = self.file if self.index is None else f"{self.file} #{self.index}"
        if self.doc_id:
            where += f" ({self.doc_id})"
        return f"{where}: {self.reason}"


@dataclass
class IngestStats:
    """Counts collected while reading: per reader, per claims language, skips, warnings."""

    files: int = 0
    files_by_format: Counter[str] = field(default_factory=Counter)
    read: Counter[str] = field(default_factory=Counter)  # records per reader (record.source or 'jsonl')
    read_by_file: Counter[str] = field(default_factory=Counter)
    files_by_folder: Counter[str] = field(default_factory=Counter)
    read_by_folder: dict[str, Counter[str]] = field(default_factory=dict)  # folder -> reader -> records
    skipped: list[Skip] = field(default_factory=list)
    ignored: Counter[str] = field(default_factory=Counter)  # documents that are no patents (sequence listings)
    claim_langs: Counter[str] = field(default_factory=Counter)  # records with claims in that language
    # texts kept in the record in a language the index does not serve: 'claims/es' -> records with such claims
    unserved: Counter[str] = field(default_factory=Counter)
    merged: dict[str, list[str]] = field(default_factory=dict)  # publication read twice -> the sources merged
    warnings: dict[str, list[str]] = field(default_factory=dict)  # file -> 'ID: warning'

    @property
    def records(self) -> int:
        return sum(self.read.values())

    @property
    def written(self) -> int:
        """Records after merging the publications read from several sources."""
        return self.records - sum(len(v) - 1 for v in self.merged.values())

    def add_record(self, file: str, source: str, doc_id: str, claim_langs: Iterable[str], warnings: list[str],
                   unserved: Iterable[str] = ()) -> None:
        self.read[source] += 1
        for text in unserved:
            self.unserved[text] += 1
        self.read_by_file[file] += 1
        self.read_by_folder.setdefault(str(Path(file).parent), Counter())[source] += 1
        for lang in claim_langs:
            self.claim_langs[lang] += 1
        if warnings:
            self.warnings.setdefault(file, []).extend(f"{doc_id}: {w}" for w in warnings)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable form (for ``--json-summary``)."""
        return {
            "files": self.files,
            "files_by_format": dict(self.files_by_format),
            "records": self.records,
            "read": dict(self.read),
            "read_by_file": dict(self.read_by_file),
            "files_by_folder": dict(self.files_by_folder),
            "read_by_folder": {k: dict(v) for k, v in self.read_by_folder.items()},
            "skipped": [
                {"file": s.file, "index": s.index, "id": s.doc_id, "reason": s.reason} for s in self.skipped
            ],
            "ignored": dict(self.ignored),
            "claim_langs": dict(self.claim_langs),
            "unserved": dict(self.unserved),
            "merged": dict(self.merged),
            "written": self.written,
            "warnings": self.warnings,
        }

    def format_table(self) -> str:
        """A plain-text summary table."""
        formats = ", ".join(f"{k}: {v}" for k, v in sorted(self.files_by_format.items()))
        lines = [f"files read: {self.files}  ({formats})"]
        lines.append("")
        lines.append(f"{'reader':<12} {'records':>8}")
        for source, n in sorted(self.read.items()):
            lines.append(f"{source:<12} {n:>8}")
        lines.append(f"{'total':<12} {self.records:>8}")
        lines.append("")
        lines.append(f"{'folder':<48} {'files':>6} {'records':>8}  readers")
        for folder in sorted(set(self.files_by_folder) | set(self.read_by_folder)):
            by_reader = self.read_by_folder.get(folder, Counter())
            readers = ", ".join(f"{k} {v}" for k, v in sorted(by_reader.items()))
            lines.append(f"{folder:<48} {self.files_by_folder[folder]:>6} {sum(by_reader.values()):>8}  {readers}")
        lines.append("")
        lines.append("records with claims per language: " + (
            ", ".join(f"{k}: {v}" for k, v in sorted(self.claim_langs.items())) or "none"))
        if self.unserved:
            lines.append("kept, not indexed (language not served): " + ", ".join(
                f"{k}: {v}" for k, v in sorted(self.unserved.items())))
        if self.merged:
            lines.append(f"publications read from several sources, merged into one record: {len(self.merged)} "
                         f"(records written: {self.written})")
            for key, sources in sorted(self.merged.items())[:20]:
                lines.append(f"    - {key}: {' + '.join(sources)}")
        if self.ignored:
            ignored = ", ".join(f"{k}: {v}" for k, v in sorted(self.ignored.items()))
            lines.append(f"ignored (not patent documents): {ignored}")
        lines.append(f"skipped: {len(self.skipped)}")
        reasons = Counter(_reason_kind(s.reason) for s in self.skipped)
        for reason, n in reasons.most_common():
            lines.append(f"  {n:>5}  {reason}")
        for s in self.skipped[:20]:
            lines.append(f"    - {s.describe()}")
        if len(self.skipped) > 20:
            lines.append(f"    ... and {len(self.skipped) - 20} more")
        n_warn = sum(len(v) for v in self.warnings.values())
        lines.append(f"files with warnings: {len(self.warnings)} ({n_warn} warnings)")
        for file, items in sorted(self.warnings.items()):
            lines.append(f"  {file}:")
            for item in items[:10]:
                lines.append(f"    - {item}")
            if len(items) > 10:
                lines.append(f"    ... and {len(items) - 10} more")
        return "\n".join(lines)


def _reason_kind(reason: str) -> str:
    return reason.split(":", 1)[0]
