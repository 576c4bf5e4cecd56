"""Input files: opening (gzip or plain), sniffing the format, streaming split of concatenated XML documents."""

from __future__ import annotations

import gzip
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, cast

GZIP_MAGIC = b"\x1f\x8b"


def open_binary(path: Path) -> IO[bytes]:
    """Open a file for reading bytes, transparently decompressing gzip (by magic number)."""
    with open(path, "rb") as probe:
        head = probe.read(2)
    if head == GZIP_MAGIC:
        return cast(IO[bytes], gzip.open(path, "rb"))
    return open(path, "rb")


_COMMENT_RE = re.compile(rb"<!--.*?-->", re.S)
_ROOT_RE = re.compile(rb"<(?![!?/])([A-Za-z_][\w.:-]*)")


def sniff_head(head: bytes) -> str | None:
    """Name the format of a file from its first bytes: ``'jsonl'``, the XML root element name, or None."""
    text = head.lstrip(b"\xef\xbb\xbf").lstrip()
    if text.startswith(b"{"):
        return "jsonl"
    if not text.startswith(b"<"):
        return None
    m = _ROOT_RE.search(_COMMENT_RE.sub(b"", text))
    return m.group(1).decode("ascii", "replace") if m else None


def sniff_file(path: Path, nbytes: int = 65536) -> str | None:
    """Read the first bytes of a (possibly gzipped) file and return :func:`sniff_head`'s answer.

    A long DTD internal subset (one entity per drawing sheet) can hide the root: then up to 1 MB is read.
    """
    with open_binary(path) as fh:
        head = fh.read(nbytes)
        found = sniff_head(head)
        if found is None and b"<!DOCTYPE" in head:
            found = sniff_head(head + fh.read(1 << 20))
        return found


# an XML declaration, not a processing instruction whose name starts with "xml" (<?xml-stylesheet ...?>, OPS)
_XML_DECL_RE = re.compile(rb"<\?xml\s")
# processing instructions of the prolog (<?xml-stylesheet ...?>, <?oxygen ...?>): not yet the document
_PROLOG_PI_RE = re.compile(rb"\s*<\?(?!xml\s)[^>]*\?>\s*$")


@dataclass
class RawDocument:
    """One XML document cut out of a file."""

    index: int  # 1-based position within the file
    line: int  # 1-based line where it starts
    data: bytes


def split_documents(fh: IO[bytes]) -> Iterator[RawDocument]:
    """Stream the XML documents of a file in which several ``<?xml ...?>`` documents may be concatenated.

    Reads line by line and keeps only the current document in memory. A new document starts at each line
    that begins with an XML declaration (``<?xml version=..``; not ``<?xml-stylesheet``), or with a
    ``<!DOCTYPE`` once the current document has more than its declaration and prolog processing instructions
    (documents concatenated without declarations). A file with neither is one document.
    """
    buf: list[bytes] = []
    start = 1
    index = 0
    has_content = False  # any non-blank line in the current document
    past_prolog = False  # something beyond the XML declaration
    for lineno, line in enumerate(fh, 1):
        stripped = line.lstrip(b"\xef\xbb\xbf")
        is_decl = _XML_DECL_RE.match(stripped) is not None
        new_doc = is_decl or (stripped.startswith(b"<!DOCTYPE") and past_prolog)
        if new_doc:
            if has_content:
                index += 1
                yield RawDocument(index, start, b"".join(buf))
            buf = []
            start = lineno
            has_content = past_prolog = False
        buf.append(line)
        if line.strip():
            has_content = True
            if not (is_decl or _PROLOG_PI_RE.match(stripped)):
                past_prolog = True
    if has_content:
        index += 1
        yield RawDocument(index, start, b"".join(buf))
