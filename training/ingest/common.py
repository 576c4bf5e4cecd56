"""Shared pieces of the readers: statistics, XML parsing, text extraction, dates, codes, claim references."""

from __future__ import annotations

import gzip
import html.entities
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import IO, Any, cast

from lxml import etree

from service.codes import normalise_code, truncate_code
from service.corpus.record import Claim, Section

# ----------------------------------------------------------------------------------------------------------------
# errors and statistics


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
    warnings: dict[str, list[str]] = field(default_factory=dict)  # file -> 'ID: warning'

    @property
    def records(self) -> int:
        return sum(self.read.values())

    def add_record(self, file: str, source: str, doc_id: str, claim_langs: Iterable[str], warnings: list[str]) -> None:
        self.read[source] += 1
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


# ----------------------------------------------------------------------------------------------------------------
# files: opening, sniffing, streaming split of concatenated XML documents

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


@dataclass
class RawDocument:
    """One XML document cut out of a file."""

    index: int  # 1-based position within the file
    line: int  # 1-based line where it starts
    data: bytes


def split_documents(fh: IO[bytes]) -> Iterator[RawDocument]:
    """Stream the XML documents of a file in which several ``<?xml ...?>`` documents may be concatenated.

    Reads line by line and keeps only the current document in memory. A new document starts at each line
    that begins with an XML declaration, or with a ``<!DOCTYPE`` once the current document has more than
    its declaration (documents concatenated without declarations). A file with neither is one document.
    """
    buf: list[bytes] = []
    start = 1
    index = 0
    has_content = False  # any non-blank line in the current document
    past_prolog = False  # something beyond the XML declaration
    for lineno, line in enumerate(fh, 1):
        stripped = line.lstrip(b"\xef\xbb\xbf")
        new_doc = stripped.startswith(b"<?xml") or (stripped.startswith(b"<!DOCTYPE") and past_prolog)
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
            if not stripped.startswith(b"<?xml"):
                past_prolog = True
    if has_content:
        index += 1
        yield RawDocument(index, start, b"".join(buf))


# ----------------------------------------------------------------------------------------------------------------
# XML parsing

def _parser(recover: bool) -> etree.XMLParser:
    # no DTD loading, no network, entities left as nodes (resolved by text_of), big documents allowed
    return etree.XMLParser(
        recover=recover, resolve_entities=False, load_dtd=False, no_network=True, huge_tree=True, remove_comments=True
    )


def parse_xml(data: bytes) -> tuple[etree._Element, list[str]]:
    """Parse one XML document strictly; on a syntax error retry with lxml's recovering parser.

    Returns the root and warnings (non-empty when recovery was needed). A truncated document (its root
    element is never closed) is not recovered: it raises :class:`DocumentError`.
    """
    data = data.lstrip(b"\xef\xbb\xbf").lstrip()
    if not data:
        raise DocumentError("empty document")
    try:
        return etree.fromstring(data, _parser(False)), []
    except etree.XMLSyntaxError as exc:
        first_error = str(exc)
    first_error = re.sub(r"\s*\(<string>, line \d+\)$", "", first_error)
    root_name = sniff_head(data[:65536])
    if root_name is None:
        raise DocumentError(f"not XML: {first_error}")
    if not re.search(rb"</" + re.escape(root_name.encode()) + rb">\s*$", data[-4096:]):
        raise DocumentError(f"truncated document (no closing </{root_name}>): {first_error}")
    repaired, n_fixes = _repair(data)
    if n_fixes:
        try:
            root = etree.fromstring(repaired, _parser(False))
            return root, [f"repaired {n_fixes} unescaped '&' or '<' in the text ({first_error})"]
        except etree.XMLSyntaxError:
            pass
    try:
        root = etree.fromstring(data, _parser(True))
    except etree.XMLSyntaxError as exc:
        raise DocumentError(f"broken XML: {first_error}") from exc
    if root is None:
        raise DocumentError(f"broken XML: {first_error}")
    return root, [f"malformed XML recovered with a lenient parser, text may be incomplete ({first_error})"]


_BARE_AMP_RE = re.compile(rb"&(?!#\d+;|#x[0-9A-Fa-f]+;|[A-Za-z_][\w.-]*;)")
# '<' + letter that reaches another '<' before any '>' cannot open a tag ('<' is illegal in attribute values)
_BARE_LT_RE = re.compile(rb"<(?=[A-Za-z][^<>]*<)")


def _repair(data: bytes) -> tuple[bytes, int]:
    """Escape bare ``&`` and stray ``<`` in text, the common ways published files are not well-formed."""
    data, n_amp = _BARE_AMP_RE.subn(b"&amp;", data)
    data, n_lt = _BARE_LT_RE.subn(b"&lt;", data)
    return data, n_amp + n_lt


def local(tag: Any) -> str:
    """Element tag without namespace ('' for comments, PIs and entities)."""
    if not isinstance(tag, str):
        return ""
    return tag.rsplit("}", 1)[-1]


# ----------------------------------------------------------------------------------------------------------------
# text extraction

_WS_RE = re.compile(r"\s+")
# elements whose text is not document text
DROP_TAGS = frozenset({"img", "image", "figure", "doc-page", "EMI", "CHEMCDX", "CHEMMOL", "CHEM-CDX", "CHEM-MOL"})
# elements that separate words (their boundaries get a space)
_SPACED = frozenset(
    {"br", "entry", "row", "tr", "td", "th", "li", "dt", "dd", "claim-text", "p", "tbody", "thead", "table",
     "mrow", "mi", "mo", "mn", "mtd", "mtr", "maths", "math", "chemistry", "tables", "heading", "PARA", "PTEXT",
     "ROW", "ENTRY", "BR", "ul", "ol", "dl", "sub-claim", "CLMSTEP", "paragraph", "H"}
)


def clean(text: str | None) -> str:
    """Collapse runs of whitespace to one space and trim."""
    if not text:
        return ""
    return _WS_RE.sub(" ", text).strip()


def _entity_text(node: Any) -> str:
    name = str(node.text or "").strip("&;")
    if name.startswith("#"):
        try:
            return chr(int(name[2:], 16) if name[1:2] in ("x", "X") else int(name[1:]))
        except ValueError:
            return ""
    cp = html.entities.name2codepoint.get(name)
    return chr(cp) if cp is not None else ""


def _collect(el: Any, out: list[str], drop: frozenset[str]) -> None:
    if isinstance(el, etree._Entity):
        out.append(_entity_text(el))
        return
    if not isinstance(el.tag, str):  # comment or processing instruction: no text, tail is handled by the parent
        return
    name = local(el.tag)
    if name in drop:
        return
    spaced = name in _SPACED
    if spaced:
        out.append(" ")
    if el.text:
        out.append(el.text)
    for child in el:
        _collect(child, out, drop)
        if child.tail:
            out.append(child.tail)
    if spaced:
        out.append(" ")


def text_of(el: Any | None, drop: frozenset[str] = DROP_TAGS) -> str:
    """All text below an element (MathML, chemistry, tables included), entities resolved, whitespace collapsed."""
    if el is None:
        return ""
    out: list[str] = []
    _collect(el, out, drop)
    return clean("".join(out))


# ----------------------------------------------------------------------------------------------------------------
# dates


def parse_date(raw: str | None) -> date | None:
    """``'20060426'`` (or ``'2006-04-26'``) -> date; ``None`` when missing or invalid.

    A zero day or month (``19290200``, citation dates) becomes the first day / month.
    """
    if not raw:
        return None
    digits = re.sub(r"\D", "", raw)
    if len(digits) != 8:
        return None
    y, m, d = int(digits[:4]), int(digits[4:6]), int(digits[6:8])
    try:
        return date(y, m or 1, d or 1)
    except ValueError:
        return None


# ----------------------------------------------------------------------------------------------------------------
# classification codes

_EDITION_RE = re.compile(r"^\s*\d{1,2}\s*(?=[A-H]\s*\d{2}\s*[A-Z])")
_SUBCLASS_HEAD_RE = re.compile(r"^\s*([A-HY])\s*(\d{2})\s*([A-Z])(.*)$")
_GROUP_ONLY_RE = re.compile(r"^\s*(\d{1,4})\s*/\s*(\d{1,6})")


def normalise_ipc(raw: str) -> str | None:
    """Normalise an IPC/CPC symbol in any of the forms the offices used.

    Accepts IPC-R text (``'G03G  15/08   20060101AFI...'``), old EP ``B511`` text with an edition prefix
    (``'2C 07D 307/12 A'``, ``' 7A 01B  45/00   A'``), ``'// A01N43/08'``, and the USPTO fixed-width
    IPC-7 form without slash (``'A45F  504'`` = A45F 5/04, ``'A43B 1314'`` = A43B 13/14). The code
    syntax itself is :func:`service.codes.normalise_code` (subclass or finer, as in a record).
    """
    text = raw.strip().lstrip("/").strip()
    text = _EDITION_RE.sub("", text)
    norm = normalise_code(text, coarsest="subclass")
    if norm is not None and "/" in norm:
        return norm
    m = _SUBCLASS_HEAD_RE.match(text.upper())
    if m and "/" not in m.group(4):
        rest = m.group(4)
        body = rest.rstrip()
        # fixed width: 3 characters main group, then the subgroup (at least 2 digits)
        if len(body) >= 5 and re.fullmatch(r"[ \d]{3}\d{2,6}", body[:3] + body[3:].split(" ")[0]):
            group = body[:3].strip()
            sub = body[3:].split(" ")[0]
            if group.isdigit():
                return normalise_code(f"{m.group(1)}{m.group(2)}{m.group(3)}{group}/{sub}")
    return norm


def split_ipc_list(raw: str) -> list[str]:
    """Codes from an old-style list such as ``'C07D 307/12, 405/12; A01N 43/08'`` (subclass carried over)."""
    out: list[str] = []
    subclass: str | None = None
    for piece in re.split(r"[,;]", raw):
        if not piece.strip():
            continue
        code = normalise_ipc(piece)
        if code is not None:
            subclass = truncate_code(code, "subclass")
            out.append(code)
            continue
        m = _GROUP_ONLY_RE.match(piece)
        if m and subclass:
            out.append(f"{subclass}{int(m.group(1))}/{m.group(2)}")
    return out


def add_codes(target: list[str], codes: Iterable[str | None]) -> None:
    """Append normalised, non-duplicate codes."""
    for code in codes:
        if code and code not in target:
            target.append(code)


# ----------------------------------------------------------------------------------------------------------------
# claims and their references

_NUM = r"\d{1,3}"
_CONNECT = r"(?:[,;]|[-–—]|\b(?:and|or|to|through|bis|oder|und|sowie|à|a|ou|et|inclusive)\b)"
_KEYWORD_AGAIN = r"(?:claims?\s+|anspr(?:u|ü|ue)ch(?:e|en|s)?\s+|revendications?\s+)?"
_NUM_LIST = rf"{_NUM}[a-z]?(?:\s*(?:{_CONNECT}\s*)+{_KEYWORD_AGAIN}{_NUM}\b)*"
_REF_RE = re.compile(
    rf"\b(?:claims?|anspr(?:u|ü|ue)ch(?:e|en|es|s)?|patentanspr(?:u|ü|ue)ch(?:e|en|s)?|revendications?)"
    rf"\s*(?:n[o°º]s?\.?\s*|nr\.?\s*|no\.?\s*)?({_NUM_LIST})",
    re.I,
)
_RANGE_WORDS = {"to", "through", "-", "–", "—", "bis", "à", "a"}
_TOKEN_RE = re.compile(rf"\d+|{_CONNECT}", re.I)
_PRECEDING_RE = re.compile(
    r"\b(?:(?:preceding|previous|foregoing|prior|above|aforementioned)\s+claims?"
    r"|claims?\s+(?:hereinbefore|above|previously)"
    r"|(?:vorhergehenden|vorangehenden|vorangegangenen|vorstehenden|voranstehenden|vorherigen|vorigen)\s+(?:Patent)?anspr"
    r"|revendications?\s+(?:pr[ée]c[ée]dentes?|ant[ée]rieures?))",
    re.I,
)


def parse_claim_refs(text: str, num: int | None = None) -> list[int]:
    """Numbers of the claims a claim text refers to (en/de/fr wording).

    ``'according to claim 1'``, ``'as claimed in claims 1 to 3'``, ``'any one of claims 1-4'``,
    ``'nach Anspruch 1 oder 2'``, ``'selon l'une des revendications 1 à 3'``; "any preceding claim" and
    its German/French forms mean all claims before ``num``. When ``num`` is given, only numbers below it
    are kept (a claim refers back to earlier claims).
    """
    refs: set[int] = set()
    for m in _REF_RE.finditer(text):
        tokens = [t.lower() for t in _TOKEN_RE.findall(m.group(1))]
        prev: int | None = None
        pending_range = False
        for tok in tokens:
            if tok.isdigit():
                n = int(tok)
                if pending_range and prev is not None and prev < n <= prev + 200:
                    refs.update(range(prev, n + 1))
                else:
                    refs.add(n)
                prev = n
                pending_range = False
            elif tok in _RANGE_WORDS:
                pending_range = True
            else:
                pending_range = False
    if num is not None and _PRECEDING_RE.search(text):
        refs.update(range(1, num))
    if num is not None:
        refs = {r for r in refs if 0 < r < num}
    else:
        refs = {r for r in refs if r > 0}
    return sorted(refs)


_IDREF_NUM_RE = re.compile(r"(\d+)\s*$")


def idref_number(idref: str | None) -> int | None:
    """``'CLM-00001'`` / ``'c-en-01-0003'`` -> 1 / 3."""
    if not idref:
        return None
    m = _IDREF_NUM_RE.search(idref)
    return int(m.group(1)) if m else None


def claim_number(raw: str | None, fallback: int) -> int:
    """Claim number from a ``num`` attribute (``'0001'``, ``'1.'``), else ``fallback``."""
    if raw:
        m = re.search(r"\d+", raw)
        if m and int(m.group(0)) > 0:
            return int(m.group(0))
    return fallback


def make_claim(num: int, text: str, idrefs: Iterable[int] = ()) -> Claim:
    """A claim whose refs are the explicit ``claim-ref`` targets plus what its wording refers to.

    A leading copy of the claim's own number (``'2. The arrangement ...'``) is removed from the text.
    """
    text = re.sub(rf"^\s*{num}\s*[.)]+\s*", "", text) or text
    refs = set(parse_claim_refs(text, num))
    refs.update(r for r in idrefs if r != num and r > 0)
    return Claim(num=num, text=text, refs=sorted(refs))


_REF_ATTRS = ("idref", "IDREF", "ID", "depends_on", "target")


def claim_idrefs(claim_el: Any, ref_tags: Iterable[str] = ("claim-ref",)) -> list[int]:
    """Claim numbers named by explicit reference elements (``<claim-ref idref="CLM-00001">``) below a claim."""
    out: list[int] = []
    for tag in ref_tags:
        for ref in claim_el.iter(tag):
            for attr in _REF_ATTRS:
                n = idref_number(ref.get(attr))
                if n is not None:
                    out.append(n)
                    break
    return out


def claims_from_elements(
    claim_els: Iterable[Any],
    ref_tags: Iterable[str] = ("claim-ref",),
    drop: frozenset[str] = DROP_TAGS,
    num_attrs: tuple[str, ...] = ("num",),
) -> list[Claim]:
    """Claims from ``<claim num=..>`` elements with ``<claim-ref idref=..>`` children."""
    claims: list[Claim] = []
    ref_tags = tuple(ref_tags)
    for i, cl in enumerate(claim_els, 1):
        raw_num = next((cl.get(a) for a in num_attrs if cl.get(a)), None)
        num = claim_number(raw_num, i)
        text = text_of(cl, drop)
        if not text:
            continue
        claims.append(make_claim(num, text, claim_idrefs(cl, ref_tags)))
    return claims


# ----------------------------------------------------------------------------------------------------------------
# description tree

_HEADING_TAGS = frozenset({"heading", "H"})
_PARA_TAGS = frozenset({"p", "PARA", "paragraph"})
_CONTAINER_SKIP = frozenset({"drawings", "ep-reference-list", "figure", "img"})


class _TreeBuilder:
    def __init__(self) -> None:
        self.top: list[Section] = []
        self.stack: list[tuple[int, Section]] = []

    def heading(self, text: str, level: int) -> None:
        sec = Section(heading=text)
        # a heading closes the sections of the same or a deeper level, and the lead section (heading None)
        while self.stack and (self.stack[-1][0] >= level or self.stack[-1][1].heading is None):
            self.stack.pop()
        if self.stack:
            self.stack[-1][1].sections.append(sec)
        else:
            self.top.append(sec)
        self.stack.append((level, sec))

    def paragraph(self, text: str) -> None:
        if not text:
            return
        if not self.stack:
            sec = Section(heading=None)
            self.top.append(sec)
            self.stack.append((0, sec))
        self.stack[-1][1].paragraphs.append(text)


def _heading_level(el: Any) -> int:
    raw = el.get("level") or el.get("LVL") or el.get("lvl") or "1"
    try:
        return max(1, int(raw))
    except ValueError:
        return 1


def description_tree(
    desc: Any | None, skip: frozenset[str] = _CONTAINER_SKIP, drop: frozenset[str] = DROP_TAGS
) -> list[Section]:
    """Description element -> list of top-level :class:`Section` (headings with ``level`` nest deeper ones).

    Paragraphs before the first heading go into a section with heading ``None``.
    """
    if desc is None:
        return []
    builder = _TreeBuilder()

    def visit(el: Any) -> None:
        for child in el:
            if not isinstance(child.tag, str):
                continue
            name = local(child.tag)
            if name in skip:
                continue
            if name in _HEADING_TAGS:
                text = text_of(child, drop)
                if text:
                    builder.heading(text, _heading_level(child))
            elif name in _PARA_TAGS:
                builder.paragraph(text_of(child, drop))
            elif len(child) and any(local(g.tag) in _HEADING_TAGS | _PARA_TAGS for g in child.iter()):
                visit(child)
            else:
                builder.paragraph(text_of(child, drop))

    visit(desc)
    return builder.top


# ----------------------------------------------------------------------------------------------------------------
# citations

_CIT_RE = re.compile(
    r"^\s*([A-Z]{2})\s*[-‑]?\s*(?:([A-Z]\d?)\s*-\s*)?([A-Z]?[\d\s/,.]*\d[A-Z]?)\s*(?:-?\s*([A-Z]\d?))?\s*$"
)


def citation_id(text: str) -> str | None:
    """``'EP-A- 0 294 097'`` -> ``'EP0294097A'``, ``'US-B1- 6 556 945'`` -> ``'US6556945B1'``; None if no patent."""
    m = _CIT_RE.match(text.strip().upper())
    if not m:
        return None
    country, kind, number, kind2 = m.groups()
    digits = re.sub(r"[\s/,.]", "", number)
    if not any(c.isdigit() for c in digits):
        return None
    return f"{country}{digits}{kind or kind2 or ''}"


def document_id(el: Any | None) -> str | None:
    """country+doc-number+kind of a ``<document-id>`` (or an element that contains one)."""
    if el is None:
        return None
    if local(el.tag) != "document-id":
        el = el.find(".//document-id")
        if el is None:
            return None
    country = clean(el.findtext("country"))
    number = clean(el.findtext("doc-number")).replace(" ", "")
    kind = clean(el.findtext("kind"))
    if not number:
        return None
    return f"{country}{number}{kind}" if country and not number.startswith(country) else f"{number}{kind}"


def person_name(el: Any | None) -> str:
    """Name from an addressbook-like element: orgname, or 'last-name, first-name', or name/snm text."""
    if el is None:
        return ""
    org = clean(el.findtext(".//orgname"))
    if org:
        return org
    last = clean(el.findtext(".//last-name"))
    firstn = clean(el.findtext(".//first-name"))
    if last or firstn:
        return ", ".join(p for p in (last, firstn) if p)
    for tag in ("name", "snm"):
        t = clean(el.findtext(f".//{tag}"))
        if t:
            return t
    return ""


def add_names(target: list[str], names: Iterable[str]) -> None:
    """Append non-empty names not already present."""
    for n in names:
        n = clean(n)
        if n and n not in target:
            target.append(n)
