"""What a notice means for the results, in an analyst's words, with the operator's side as a details line.

The engine's notices are written for operators ("no models in this index: BM25 only (build with --models
...)"). :func:`explain` turns them, and the fusion that ranked the results, into :class:`Explained`
notices: ``text`` says what it means for this result list, ``detail`` keeps the original message and the
command that would change it. Notices this module does not know pass through unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from service.fusion import REQUEST_WEIGHTS
from service.text.analysis import LANG_NAMES


@dataclass(frozen=True)
class Explained:
    text: str
    detail: str
    kind: str  # ranking | coverage | passages | query | system | other


_RULES: list[tuple[re.Pattern[str], str, str]] = [
    (re.compile(r"^no models in this index"), "ranking",
     "Ranked by word match only: no learned model (meaning-based search, neural re-ranking) exists for this index."),
    (re.compile(r"^queries (with|without) classification codes are ranked by BM25 alone: no learned fusion weights"),
     "ranking", "Ranked by word match only: the learned models' scores are not combined with it, as no combination "
     "was learned for this index."),
    (re.compile(r"^queries (with|without) classification codes are ranked by BM25 alone: too few dev topics"),
     "ranking", "Ranked by word match only: there were too few test queries to learn how to combine the learned "
     "models with it."),
    (re.compile(r"^queries (with|without) classification codes are ranked by BM25 alone"), "ranking",
     "Ranked by word match only: no learned model applies to this query (the learned combination did not "
     "do better than word match on test queries like it)."),
    (re.compile(r"^none of the weighted components applies to this query"), "ranking",
     "Ranked by word match only: none of the learned models applies to this query."),
    (re.compile(r"^no dense/ in this index"), "ranking",
     "Only documents sharing words with the query (or their translations) are found: meaning-based search "
     "is not available."),
    (re.compile(r"^no rerank/ document encodings"), "ranking",
     "Results are not re-ranked by a neural model."),
    (re.compile(r"^no (\w\w)-(\w\w) translation table in this index: documents with \w\w text only were not reached"),
     "coverage", "Documents available only in {tgt} were not searched: the query could not be translated into {tgt}."),
    (re.compile(r"^no (\w\w)-(en) translation table in this index: untranslated"), "coverage",
     "Your {src} words were matched as they are against English documents (no translation available): "
     "English prior art is probably missed."),
    (re.compile(r"^no (\w\w)-(en) translation table in this index: English documents were not searched"), "coverage",
     "English documents were not searched: the {src} query could not be translated into English."),
    (re.compile(r"^ranked by the fused scores, not by passage evidence"), "ranking",
     "The first results are in the order of the combined score, not of their best passage: their passages could not "
     "be compared for this query."),
    (re.compile(r"^passage evidence: (\d+) of the first (\d+) documents have no text in"), "passages",
     "{g1} of the first {g2} results have no text in a language your query reaches: they come after those whose best "
     "passage was compared."),
    (re.compile(r"^(\d+) candidate documents have no text in"), "passages",
     "{n} of the documents found have no text in a language your query reaches: their passages are not shown."),
    (re.compile(r"has no passage index|/passages needs it"), "passages",
     "Passages (and claim charts) are not available for this index."),
    (re.compile(r"^filtered out: no document (.+) contains a query term \((.+)\); (without [^,]+), documents match"),
     "query", "No results: no document {n} contains your words or their translations ({g2}); {g3}, some do."),
    (re.compile(r"^no document contains a query term \(with or without the filters\)"), "query",
     "No results: no document contains your words or their translations, with or without the filters."),
    (re.compile(r"^no document contains a query term, and word match alone ranks"), "query",
     "No results: no document contains your words or their translations (documents similar in meaning are not "
     "listed: this search is ranked by word match alone)."),
    (re.compile(r"^the query has no index terms after analysis"), "query",
     "The query has no searchable words (only stop words or punctuation): nothing could be matched by words."),
    (re.compile(r"^device cuda asked for"), "system",
     "Running without the GPU: the results are the same, only slower."),
    (re.compile(r"^no marked relevant document has (\w\w) text"), "query",
     "Your relevant documents have no {src} text: the {src} search was not expanded with their words."),
]

_COMMANDS = {
    "no models in this index": "priorart build CORPUS -o INDEX --models",
    "no dense/": "priorart build CORPUS -o INDEX --models",
    "no rerank/": "priorart build CORPUS -o INDEX --models",
    "translation table": "priorart build CORPUS -o INDEX (builds the translation tables)",
    "no passage index": "priorart build CORPUS -o INDEX",
    "ranked by BM25 alone": "priorart fuse INDEX (learn and install fusion weights)",
}


def _operator(notice: str) -> str:
    for key, cmd in _COMMANDS.items():
        if key in notice:
            return f"{notice} — operator: {cmd}"
    return notice


_PROFILE = re.compile(r"^queries (with|without) classification codes are ")


def explain(notices: Sequence[str], weights: Mapping[str, float] | None = None, *, profile: str | None = None,
            source: str | None = None) -> list[Explained]:
    """Analyst notices for a response's ``notices`` and its fusion ``weights`` (components that counted), ``profile``
    (``codes`` / ``nocodes``: a notice about the other profile's queries is not about this ranking) and ``source``
    (where the weights came from: a request's own weights are said as such)."""
    out: list[Explained] = []
    seen: set[str] = set()
    word_match_only = weights is not None and {c for c, w in weights.items() if w > 0} == {"bm25"}
    ranking: list[str] = []
    if profile is not None:
        mine = "with" if profile == "codes" else "without"
        notices = [n for n in notices if (m := _PROFILE.match(n)) is None or m.group(1) == mine]
    if source == REQUEST_WEIGHTS:  # the request chose its weights: the index's fallbacks did not rank it
        notices = [n for n in notices if _PROFILE.match(n) is None]
    for notice in notices:
        for pattern, kind, text in _RULES:
            m = pattern.search(notice)
            if m is None:
                continue
            if kind == "ranking" and text.startswith("Ranked by word match only"):
                ranking.append(notice)  # said once, below
                break
            groups = m.groups()
            fill = {"n": groups[0] if groups else "",
                    "src": LANG_NAMES.get(groups[0], groups[0]) if groups else "",
                    "tgt": LANG_NAMES.get(groups[1], groups[1]) if len(groups) > 1 else "",
                    **{f"g{i}": g for i, g in enumerate(groups, 1)}}
            said = text.format(**fill)
            if said not in seen:
                seen.add(said)
                out.append(Explained(said, _operator(notice), kind))
            break
        else:
            out.append(Explained(notice, "", "other"))
    if word_match_only or ranking:
        first = next((t for p, k, t in _RULES for n in ranking if k == "ranking" and p.search(n)), None)
        text = first or ("Ranked by word match only (BM25), as the request's weights ask." if source == REQUEST_WEIGHTS
                         else "Ranked by word match only (BM25): no learned model applies to this query.")
        detail = "; ".join(_operator(n) for n in ranking) or "fusion weights: bm25 1.0"
        out.insert(0, Explained(text, detail, "ranking"))
    return out


__all__ = ["Explained", "explain"]
