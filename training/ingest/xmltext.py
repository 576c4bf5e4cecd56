"""XML parsing (with repair of unescaped ``&`` and ``<``) and text extraction from the element tree."""

from __future__ import annotations

import html.entities
import re
from typing import Any

from lxml import etree

from training.ingest.errors import DocumentError
from training.ingest.files import sniff_head


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
