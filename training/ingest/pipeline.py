"""Walk input paths, detect each file's format, stream records out of every document, count what happened.

Formats (sniffed from the root element, :data:`FORMATS`): EPO publication-server XML, USPTO XML of every
generation, MAREC / CLEF-IP ``patent-document``, EPO OPS ``fulltext-document``, the corpus's own JSONL.
:func:`iter_records` streams the records as read; :func:`ingest` writes them and then merges the publications
read from several sources into one record each (:mod:`training.ingest.merge`).
"""

from __future__ import annotations

import io
import logging
import os
import re
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

from pydantic import ValidationError
from tqdm import tqdm

from service.corpus.jsonl import write_corpus
from service.corpus.record import PatentRecord
from service.text.analysis import SUPPORTED_LANGS
from training.ingest.ep import ROOT as EP_ROOT
from training.ingest.ep import ep_record
from training.ingest.errors import DocumentError, IngestStats, Skip
from training.ingest.files import RawDocument, open_binary, sniff_file, split_documents
from training.ingest.jsonl import iter_jsonl
from training.ingest.marec import ROOT as MAREC_ROOT
from training.ingest.marec import marec_record
from training.ingest.merge import merge_all, merge_corpus_file, publication_key
from training.ingest.ops import ROOT as OPS_ROOT
from training.ingest.ops import ops_record
from training.ingest.us import NON_PATENT_ROOTS, V4_ROOTS, NotAPatent, us_record
from training.ingest.xmltext import local, parse_xml

log = logging.getLogger(__name__)

# file format label per sniffed root element
FORMATS: dict[str, str] = {
    EP_ROOT: "ep-xml",
    **{r: "us-xml" for r in (*V4_ROOTS, *NON_PATENT_ROOTS)},
    "PATDOC": "us-sgml",
    "patent-application-publication": "us-pap",
    MAREC_ROOT: "marec",
    OPS_ROOT: "ops",
    "jsonl": "jsonl",
}
# suffixes picked up when walking a directory (a file named explicitly is always sniffed)
WALK_SUFFIXES = (".xml", ".sgm", ".sgml", ".jsonl", ".json")


class IngestInputError(ValueError):
    """An input path that does not exist or holds no file to read."""


def _walk_ok(path: Path) -> bool:
    name = path.name.lower()
    if name.startswith("."):
        return False
    if name.endswith(".gz"):
        name = name[:-3]
    return name.endswith(WALK_SUFFIXES)


def _walk(root: Path) -> list[Path]:
    """The files below ``root``, following symlinked folders (a folder reached twice, as by a link back up, is
    walked once), each folder's entries in sorted order."""
    found: list[Path] = []
    visited: set[Path] = set()
    for folder, dirs, names in os.walk(root, followlinks=True):
        real = Path(folder).resolve()
        if real in visited:
            dirs[:] = []
            continue
        visited.add(real)
        dirs.sort()
        found.extend(Path(folder) / name for name in names)
    return found


def collect_files(paths: Iterable[Path | str]) -> list[Path]:
    """Expand the inputs: files as given, directories walked recursively in sorted order (symlinked folders and
    files followed; each file once)."""
    files: list[Path] = []
    seen: set[Path] = set()
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted(p for p in _walk(path) if p.is_file() and _walk_ok(p))
        elif path.is_file():
            found = [path]
        else:
            raise IngestInputError(f"input path does not exist: {path}")
        for p in found:
            key = p.resolve()
            if key not in seen:
                seen.add(key)
                files.append(p)
    return files


_ID_PATTERNS = (
    re.compile(rb'<ep-patent-document[^>]*?doc-number="([^"]+)"[^>]*?kind="([^"]+)"', re.S),
    re.compile(rb"<doc-number>\s*([^<\s]+)\s*</doc-number>\s*<kind>\s*([^<\s]+)\s*</kind>", re.S),
    re.compile(rb"<B110>\s*<DNUM>\s*<PDAT>([^<]+)</PDAT>.*?<B130>\s*<PDAT>([^<]+)</PDAT>", re.S),
    re.compile(rb"<doc-number>\s*([^<\s]+)\s*</doc-number>\s*<kind-code>\s*([^<\s]+)\s*</kind-code>", re.S),
)


def guess_id(data: bytes) -> str | None:
    """Best-effort publication id of a document that could not be parsed (for error reports)."""
    head = data[:20000]
    for pattern in _ID_PATTERNS:
        m = pattern.search(head)
        if m:
            number, kind = (g.decode("utf-8", "replace") for g in m.groups())
            country = "EP" if pattern is _ID_PATTERNS[0] else "US"
            return f"{country}{number}{kind}"
    return None


def parse_document(data: bytes, source_name: str) -> PatentRecord:
    """Parse one XML document of any supported format (EP, any USPTO generation, MAREC, OPS full text)."""
    root, warnings = parse_xml(data)
    name = local(root.tag)
    if name == EP_ROOT:
        return ep_record(root, source_name, warnings)
    if name == MAREC_ROOT:
        return marec_record(root, source_name, warnings)
    if name == OPS_ROOT:
        return ops_record(root, source_name, warnings)
    return us_record(root, source_name, warnings)


def unserved_texts(record: PatentRecord) -> list[str]:
    """The texts of ``record`` in a language the index does not serve (:data:`SUPPORTED_LANGS`), as
    ``'field/lang'`` (``'claims/es'``): kept in the record, counted by ingest, skipped by the indexes."""
    out = [f"{name}/{lang}" for name in ("title", "abstract", "claims")
           for lang, value in getattr(record, name).items() if value and lang not in SUPPORTED_LANGS]
    if record.description and record.lang and record.lang not in SUPPORTED_LANGS:
        out.append(f"description/{record.lang}")
    return out


def _count(stats: IngestStats, name: str, source: str, rec: PatentRecord) -> None:
    stats.add_record(name, source, rec.id, (k for k, v in rec.claims.items() if v), rec.warnings,
                     unserved_texts(rec))


def _skip(stats: IngestStats, file: str, index: int | None, reason: str, doc_id: str | None = None) -> None:
    skip = Skip(file=file, index=index, reason=reason, doc_id=doc_id)
    stats.skipped.append(skip)
    log.warning("skipped %s", skip.describe())


def _xml_records(path: Path, name: str, stats: IngestStats, bar: tqdm) -> Iterator[PatentRecord]:
    with open_binary(path) as fh:
        compressed = not isinstance(fh, io.BufferedReader)  # the bar counts on-disk bytes
        doc: RawDocument
        for doc in split_documents(fh):
            if not compressed:
                bar.update(len(doc.data))
            try:
                rec = parse_document(doc.data, name)
            except NotAPatent as exc:
                stats.ignored[str(exc).split(">", 1)[0].lstrip("<")] += 1
                continue
            except DocumentError as exc:
                _skip(stats, name, doc.index, str(exc), guess_id(doc.data))
                continue
            except ValidationError as exc:
                err = exc.errors()[0]
                loc = ".".join(str(p) for p in err.get("loc", ()))
                _skip(stats, name, doc.index, f"invalid record ({loc}: {err['msg']})", guess_id(doc.data))
                continue
            _count(stats, name, rec.source, rec)
            bar.set_postfix(records=stats.records, refresh=False)
            yield rec


def iter_records(
    paths: Iterable[Path | str],
    stats: IngestStats | None = None,
    *,
    progress: bool | None = False,
    exclude: Iterable[Path | str] = (),
) -> Iterator[PatentRecord]:
    """Stream :class:`PatentRecord` from files and directories of EP XML, USPTO XML/SGML-like XML, MAREC,
    OPS full text and JSONL.

    The format of each file is sniffed from its first bytes (``.gz`` is decompressed on the fly); USPTO weekly
    files with many concatenated documents are split as they are read. Malformed documents are logged,
    counted in ``stats`` and skipped. ``progress``: True shows a tqdm bar on stderr, None shows it on a TTY.
    Records come out as read: a publication found in two sources comes twice (:func:`ingest` and
    ``shared_records(data, folders="all")`` merge them; :func:`training.ingest.merge.merge_all` does it for a list).
    """
    stats = stats if stats is not None else IngestStats()
    excluded = {Path(p).resolve() for p in exclude}
    files = [p for p in collect_files(paths) if p.resolve() not in excluded]
    total = sum(p.stat().st_size for p in files)
    disable = None if progress is None else not progress
    with tqdm(total=total, unit="B", unit_scale=True, desc="ingest", file=sys.stderr, disable=disable) as bar:
        for path in files:
            name = str(path)
            size = path.stat().st_size
            done_before = bar.n
            stats.files += 1
            stats.files_by_folder[str(path.parent)] += 1
            bar.set_description(f"ingest {path.name}", refresh=False)
            try:
                kind = sniff_file(path)
            except OSError as exc:
                _skip(stats, name, None, f"unreadable file: {exc}")
                continue
            fmt = FORMATS.get(kind or "")
            if fmt is None:
                stats.files_by_format["unrecognised"] += 1
                what = f"root element <{kind}>" if kind else "neither XML nor JSON lines"
                _skip(stats, name, None, f"unrecognised format: {what}")
                bar.update(size)
                continue
            stats.files_by_format[fmt] += 1
            if fmt == "jsonl":
                for lineno, item in iter_jsonl(path):
                    if isinstance(item, DocumentError):
                        _skip(stats, name, lineno, str(item))
                        continue
                    stats.add_record(name, "jsonl", item.id, (k for k, v in item.claims.items() if v), [],
                                     unserved_texts(item))
                    yield item
            else:
                try:
                    yield from _xml_records(path, name, stats, bar)
                except OSError as exc:  # e.g. a corrupt gzip stream: keep what was read, report the rest
                    _skip(stats, name, None, f"read error: {exc}")
            # compressed files advance by their on-disk size; realign the bar to the file boundary
            bar.update(max(0, done_before + size - bar.n))


def ingest(
    paths: Iterable[Path | str],
    output: Path | str,
    *,
    progress: bool | None = False,
    stats: IngestStats | None = None,
) -> IngestStats:
    """Read all inputs and write the records to ``output`` (JSON lines, ``.gz`` compresses) as they come; then
    merge the publications read from several sources into one record each (``stats.merged``), rewriting the
    output only when there are any (:func:`training.ingest.merge.merge_corpus_file`)."""
    stats = stats if stats is not None else IngestStats()
    output = Path(output)
    keys: set[str] = set()
    repeated: set[str] = set()

    def noted() -> Iterator[PatentRecord]:
        for rec in iter_records(paths, stats, progress=progress, exclude=[output]):
            key = publication_key(rec.id)
            (repeated if key in keys else keys).add(key)
            yield rec

    write_corpus(noted(), output)
    if repeated:
        stats.merged = merge_corpus_file(output, repeated)
        log.info("merged %d publications read from several sources", len(stats.merged))
    return stats


class MissingDataError(IngestInputError):
    """The shared data folder does not hold the patent folders (the message names them)."""


# the folders of the shared data that shared_records reads: the default (what the experiments read) and "all"
SHARED_FOLDERS: dict[str, tuple[str, ...]] = {
    "default": ("patents/ep", "patents/us"),
    "all": ("patents", "marec", "ops"),
}


def shared_records(
    data: str | Path,
    *,
    progress: bool | None = None,
    folders: str = "default",
    stats: IngestStats | None = None,
) -> list[PatentRecord]:
    """The publications of the shared data folder: what the real-data experiments, benchmarks and tests read.

    ``folders="default"``: every EP and US publication (``DATA/patents/ep`` and ``DATA/patents/us``);
    ``"all"``: every document of ``DATA/patents`` (EP, USPTO weekly files and older formats), ``DATA/marec``
    and ``DATA/ops``, one record per publication (publications read from two sources merged,
    :func:`training.ingest.merge.merge_all`; ``stats.merged`` names them). Raises :class:`MissingDataError`
    naming what is missing.
    """
    if folders not in SHARED_FOLDERS:
        raise ValueError(f"folders must be one of {', '.join(SHARED_FOLDERS)}, got {folders!r}")
    roots = [Path(data, *sub.split("/")) for sub in SHARED_FOLDERS[folders]]
    missing = [str(p) for p in roots if not p.is_dir()]
    if missing:
        raise MissingDataError(f"patent folders not found: {', '.join(missing)} (pass --data: the shared data folder)")
    stats = stats if stats is not None else IngestStats()
    records = list(iter_records(roots, stats, progress=progress))
    if folders == "default":
        return records
    merged, stats.merged = merge_all(records)
    return merged

