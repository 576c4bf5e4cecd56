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
from service.schema import RankedBy
from service.text.analysis import LANG_NAMES


@dataclass(frozen=True)
class Explained:
    text: str
    detail: str
    kind: str  # ranking | coverage | passages | query | system | other


# why word match alone gives the fused score (each said once, after what ordered the results: :func:`ranking_said`)
_WORD_MATCH: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"^no models in this index"),
     "no neural model (meaning-based search, neural re-ranking) exists for this index"),
    (re.compile(r"^no dense stage in this index"),
     "no meaning-based search exists for this index (it was built for word match alone)"),
    (re.compile(r"^queries (with|without) classification codes are ranked by BM25 alone: no learned fusion weights"),
     "the other components' scores are not combined with it, as no combination was learned for this index"),
    (re.compile(r"^queries (with|without) classification codes are ranked by BM25 alone: too few dev topics"),
     "there were too few test queries to learn how to combine the other components with it"),
    (re.compile(r"^queries (with|without) classification codes are ranked by BM25 alone"),
     "no other component applies to this query (their learned combination did not do better than word match on "
     "test queries like it)"),
    (re.compile(r"^none of the weighted components applies to this query"),
     "none of the other components applies to this query"),
]
_WORD_MATCH_DEFAULT = "no other component applies to this query"

_RULES: list[tuple[re.Pattern[str], str, str]] = [
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
    "no dense stage in this index": "priorart build CORPUS -o INDEX (without --no-dense)",
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

COMPONENT_WORDS = {"bm25": "word match (BM25)", "dense": "meaning (dense)", "text": "neural text ranker",
                   "meta": "classification ranker", "joint": "joint ranker", "wordpair": "word-pair model",
                   "domain": "domain model"}
"""The score components in an analyst's words (the UI's ``STAGE_WORDS`` say the same)."""
_ORDERED_BY: dict[RankedBy, str] = {
    "passage evidence": "their best passage",
    "learned ranker": "the learned ranker (it reads their fused and word-match scores, their best passages and the "
                      "codes they share with the query)",
}


def fused_said(weights: Mapping[str, float] | None) -> str:
    """The fused score in words: ``word match only (BM25)``, or the components that shaped it with their weights."""
    used = {c: w for c, w in (weights or {}).items() if w}
    if set(used) <= {"bm25"}:
        return "word match only (BM25)"
    return "the fused score of " + ", ".join(f"{COMPONENT_WORDS.get(c, c)} {w:.2f}" for c, w in used.items())


def ranking_said(ranked_by: RankedBy, reordered: int, weights: Mapping[str, float] | None) -> str:
    """What ordered a search's results, in an analyst's words: the one sentence the response's ``ranking``, the
    explanation's ranking notice, the UI's ranking line and ``priorart search`` say (``ranked_by`` and ``reordered``:
    what the engine did; ``weights``: the fusion's, which orders the rest)."""
    fused = fused_said(weights)
    if ranked_by == "fusion" or reordered <= 0:
        return f"Ranked by {fused}"
    return f"The first {reordered} documents ranked by {_ORDERED_BY[ranked_by]}; below them, by {fused}"


def explain(notices: Sequence[str], weights: Mapping[str, float] | None = None, *, profile: str | None = None,
            source: str | None = None, ranked_by: RankedBy = "fusion", reordered: int = 0) -> list[Explained]:
    """Analyst notices for a response's ``notices`` and its fusion ``weights`` (components that counted), ``profile``
    (``codes`` / ``nocodes``: a notice about the other profile's queries is not about this ranking) and ``source``
    (where the weights came from: a request's own weights are said as such). Where word match alone gives the
    fused score, the first notice says what ordered the results (:func:`ranking_said` of ``ranked_by`` and
    ``reordered``, the first documents it ordered) and why word match alone."""
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
        if any(p.search(notice) for p, _ in _WORD_MATCH):
            ranking.append(notice)  # said once, below
            continue
        for pattern, kind, text in _RULES:
            m = pattern.search(notice)
            if m is None:
                continue
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
    if word_match_only or (ranking and weights is None):
        said = ranking_said(ranked_by, reordered, {"bm25": 1.0})
        why = next((t for p, t in _WORD_MATCH for n in ranking if p.search(n)), None)
        text = (f"{said}: {why}." if why else f"{said}, as the request's weights ask." if source == REQUEST_WEIGHTS
                else f"{said}: {_WORD_MATCH_DEFAULT}.")
        detail = "; ".join(_operator(n) for n in ranking) or "fusion weights: bm25 1.0"
        out.insert(0, Explained(text, detail, "ranking"))
    else:  # other components gave the fused score too: a reason is said as a fact, not as what ordered the results
        for n in ranking:
            why = next(t for p, t in _WORD_MATCH if p.search(n))
            out.insert(0, Explained(f"{why[0].upper()}{why[1:]}.", _operator(n), "ranking"))
    return out


__all__ = ["COMPONENT_WORDS", "Explained", "explain", "fused_said", "ranking_said"]
