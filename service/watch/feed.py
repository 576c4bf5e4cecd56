"""A watch's hits as an Atom feed (RFC 4287), for feed readers and mail gateways: one entry per hit, newest
generation first, with the rank, the score and the best passage (its matched words marked)."""

from __future__ import annotations

import html
from collections.abc import Sequence
from urllib.parse import quote
from xml.etree import ElementTree as ET

from service.schema import PassageHit
from service.watch.models import Watch, WatchHit

ATOM_NS = "http://www.w3.org/2005/Atom"
MEDIA_TYPE = "application/atom+xml"


def _passage_html(p: PassageHit) -> str:
    """The passage with its highlights marked (escaped HTML, for the entry's content)."""
    spans = sorted((m.start, m.end) for m in p.matches) if p.matches else sorted(tuple(h) for h in p.highlights)
    out, pos = [], 0
    for start, end in spans:
        if start < pos:
            continue
        out.append(html.escape(p.text[pos:start]))
        out.append(f"<mark>{html.escape(p.text[start:end])}</mark>")
        pos = end
    out.append(html.escape(p.text[pos:]))
    where = " › ".join(p.section_path)
    return f"<p><small>{html.escape(where)} · {html.escape(p.lang or '')}</small></p><p>{''.join(out)}</p>"


def atom_feed(watch: Watch, hits: Sequence[WatchHit], base_url: str) -> bytes:
    """The feed of ``watch`` (``base_url``: the server's, for the links)."""
    base = base_url.rstrip("/")
    ET.register_namespace("", ATOM_NS)

    def sub(parent: ET.Element, tag: str, text: str | None = None, **attrs: str) -> ET.Element:
        el = ET.SubElement(parent, f"{{{ATOM_NS}}}{tag}", attrs)
        if text is not None:
            el.text = text
        return el

    feed = ET.Element(f"{{{ATOM_NS}}}feed")
    sub(feed, "id", f"urn:priorart:watch:{watch.id}")
    sub(feed, "title", f"priorart watch: {watch.name}")
    sub(feed, "subtitle", f"new documents in the top {watch.request.k} of this search, from generation "
                          f"{watch.created_generation + 1} of the index on")
    sub(feed, "updated", max((h.found_at for h in hits), default=watch.created))
    sub(feed, "link", rel="self", href=f"{base}/watches/{quote(watch.id)}/feed", type=MEDIA_TYPE)
    sub(feed, "link", rel="alternate", href=f"{base}/static/watches.html#{quote(watch.id)}", type="text/html")
    sub(sub(feed, "author"), "name", "priorart")
    sub(feed, "generator", "priorart")
    for h in hits:
        entry = sub(feed, "entry")
        sub(entry, "id", f"urn:priorart:watch:{watch.id}:{h.generation}:{h.doc_id}")
        sub(entry, "title", f"{h.doc_id}: {h.title or '(no title)'}")
        sub(entry, "updated", h.found_at)
        sub(entry, "link", rel="alternate", href=f"{base}/documents/{quote(h.doc_id)}", type="application/json")
        sub(entry, "summary", f"rank {h.rank} of {watch.request.k} at generation {h.generation}, score "
                              f"{h.score:.3f}" + (f"; published {h.publication_date}" if h.publication_date else ""))
        body = (f"<p>{html.escape(h.doc_id)} ranks {h.rank} in the top {watch.request.k} of "
                f"“{html.escape(watch.name)}” since generation {h.generation} (score {h.score:.3f}).</p>")
        if h.passage is not None:
            body += _passage_html(h.passage)
        sub(entry, "content", body, type="html")
    return b'<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(feed, encoding="utf-8", xml_declaration=False)


__all__ = ["MEDIA_TYPE", "atom_feed"]
