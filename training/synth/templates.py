"""Claim, title and prose templates: one string per language with the same slots (see the slot syntax below)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

#
# {a:N1} indefinite NP (nominative), {a.acc:A0+N1} with an adjective, {a.dat:...}
# {the:N1} definite NP, {the.acc:...}, {the.dat:...}
# {P.to:N1} preposition + definite NP (P.to, P.by, P.with, P.of, P.in, P.on, P.from, P.for)
# {n:N1} bare noun, {npl:N1} plural, {adjn:A0+N1} adjective + noun without article (titles)
# {pp:V0/N1} participle agreeing with N1, {inf:V0} infinitive (German: zu-infinitive)
# {wherein:N0} wherein / wobei / dans lequel|laquelle, {rel:N1} which / der|die|das / qui
# {poss:N0} German dessen|deren, {agree:word/N1} French agreement of a literal participle
# {refs} the claim references, {$name} a literal from the context (figure number, citation ...)

_SLOT_RE = re.compile(r"\{([A-Za-z$.]+)(?::([^}]*))?\}")


@dataclass(frozen=True)
class _Template:
    parts: dict[str, tuple[Any, ...]]  # lang -> segments: str or (kind, case, adj slot, noun slot, extra)
    slots: tuple[str, ...]  # slot names to fill (N*, A*, V*), sorted


def _parse_template(texts: dict[str, str]) -> _Template:
    slots: set[str] = set()
    parts: dict[str, tuple[Any, ...]] = {}
    for lang, text in texts.items():
        segs: list[Any] = []
        pos = 0
        for m in _SLOT_RE.finditer(text):
            if m.start() > pos:
                segs.append(text[pos : m.start()])
            op, arg = m.group(1), m.group(2) or ""
            kind, _, case = op.partition(".")
            adj = noun = extra = None
            if kind.startswith("$"):
                kind, extra = "$", kind[1:]
            elif kind in ("pp", "agree"):
                extra, noun = arg.split("/")
            elif kind == "inf":
                extra = arg
            elif kind == "refs":
                pass
            elif "+" in arg:
                adj, noun = arg.split("+")
            else:
                noun = arg
            for slot in (adj, noun, extra if kind in ("pp", "inf") else None):
                if slot:
                    slots.add(slot)
            segs.append((kind, case or "nom", adj, noun, extra))
            pos = m.end()
        if pos < len(text):
            segs.append(text[pos:])
        parts[lang] = tuple(segs)
    return _Template(parts, tuple(sorted(slots)))


def _t(en: str, de: str | None = None, fr: str | None = None) -> _Template:
    texts = {"en": en}
    if de is not None:
        texts["de"] = de
    if fr is not None:
        texts["fr"] = fr
    return _parse_template(texts)


_TITLES = [
    _t("{adjn:A0+N0} with {a.dat:N1}", "{adjn:A0+N0} mit {a.dat:N1}", "{adjn:A0+N0} avec {a:N1}"),
    _t("{n:N0} and method for its production", "{n:N0} und Verfahren zu {poss:N0} Herstellung",
       "{n:N0} et son procédé de fabrication"),
    _t("{n:N0} for {a.acc:N1}", "{n:N0} für {a.acc:N1}", "{n:N0} pour {a:N1}"),
    _t("{n:N0} comprising {a.acc:N1} and {a.acc:N2}", "{n:N0} mit {a.dat:N1} und {a.dat:N2}",
       "{n:N0} comprenant {a:N1} et {a:N2}"),
    _t("{adjn:A0+N0} for {npl:N1}", "{adjn:A0+N0} für {npl:N1}", "{adjn:A0+N0} pour {npl:N1}"),
]  # fmt: skip

_CLAIM1 = [
    _t(
        "{a:N0} comprising {a.acc:N1}, {a.acc:N2} and {a.acc:N3}, {wherein:N0} {the:N1} is {pp:V0/N1} {P.to:N2} "
        "and {the:A0+N3} is {pp:V1/N3} {P.by:N4}.",
        "{a:N0}, umfassend {a.acc:N1}, {a.acc:N2} und {a.acc:N3}, {wherein:N0} {the:N1} {P.to:N2} {pp:V0/N1} ist "
        "und {the:A0+N3} {P.by:N4} {pp:V1/N3} ist.",
        "{a:N0} comprenant {a:N1}, {a:N2} et {a:N3}, {wherein:N0} {the:N1} est {pp:V0/N1} {P.to:N2} "
        "et {the:A0+N3} est {pp:V1/N3} {P.by:N4}.",
    ),
    _t(
        "{a:N0} for {a.acc:N1}, having {a.acc:A0+N2} which is {pp:V0/N2} {P.on:N3}, characterised in that "
        "{the:N2} comprises {a.acc:N4} configured to {inf:V1} {the.acc:N1}.",
        "{a:N0} für {a.acc:N1}, mit {a.dat:A0+N2}, {rel:N2} {P.on:N3} {pp:V0/N2} ist, dadurch gekennzeichnet, "
        "dass {the:N2} {a.acc:N4} umfasst, {rel:N4} dazu ausgebildet ist, {the.acc:N1} {inf:V1}.",
        "{a:N0} pour {a:N1}, présentant {a:A0+N2} qui est {pp:V0/N2} {P.on:N3}, {agree:caractérisé/N0} en ce que "
        "{the:N2} comprend {a:N4} {agree:configuré/N4} pour {inf:V1} {the:N1}.",
    ),
    _t(
        "{a:N0} comprising {a.acc:N1} and {a.acc:A0+N2} {pp:V0/N2} {P.in:N1}, {wherein:N0} {the:N2} is "
        "{pp:V1/N2} {P.with:N3} such that {the:N4} is {pp:V0/N4} {P.by:N1}.",
        "{a:N0}, umfassend {a.acc:N1} und {a.acc:A0+N2}, {rel:N2} {P.in:N1} {pp:V0/N2} ist, {wherein:N0} "
        "{the:N2} {P.with:N3} {pp:V1/N2} ist, so dass {the:N4} {P.by:N1} {pp:V0/N4} ist.",
        "{a:N0} comprenant {a:N1} et {a:A0+N2} {pp:V0/N2} {P.in:N1}, {wherein:N0} {the:N2} est "
        "{pp:V1/N2} {P.with:N3} de sorte que {the:N4} est {pp:V0/N4} {P.by:N1}.",
    ),
]

_DEPENDENT = [
    _t(
        "{the:N0} {refs}, {wherein:N0} {the:N5} is {pp:V2/N5} {P.with:N6}.",
        "{the:N0} {refs}, {wherein:N0} {the:N5} {P.with:N6} {pp:V2/N5} ist.",
        "{the:N0} {refs}, {wherein:N0} {the:N5} est {pp:V2/N5} {P.with:N6}.",
    ),
    _t(
        "{the:N0} {refs}, further comprising {a.acc:A1+N5} {pp:V2/N5} {P.on:N1}.",
        "{the:N0} {refs}, ferner umfassend {a.acc:A1+N5}, {rel:N5} {P.on:N1} {pp:V2/N5} ist.",
        "{the:N0} {refs}, comprenant en outre {a:A1+N5} {pp:V2/N5} {P.on:N1}.",
    ),
    _t(
        "{the:N0} {refs}, {wherein:N0} {the:N1} is made of {a.acc:A1+N5}.",
        "{the:N0} {refs}, {wherein:N0} {the:N1} aus {a.dat:A1+N5} besteht.",
        "{the:N0} {refs}, {wherein:N0} {the:N1} est {agree:constitué/N1} de {a:A1+N5}.",
    ),
    _t(
        "{the:N0} {refs}, {wherein:N0} {the:A1+N6} is {pp:V3/N6} {P.in:N3}.",
        "{the:N0} {refs}, {wherein:N0} {the:A1+N6} {P.in:N3} {pp:V3/N6} ist.",
        "{the:N0} {refs}, {wherein:N0} {the:A1+N6} est {pp:V3/N6} {P.in:N3}.",
    ),
    _t(
        "{the:N0} {refs}, {wherein:N0} {the:N2} has {a.acc:N7} and {a.acc:N8}.",
        "{the:N0} {refs}, {wherein:N0} {the:N2} {a.acc:N7} und {a.acc:N8} aufweist.",
        "{the:N0} {refs}, {wherein:N0} {the:N2} présente {a:N7} et {a:N8}.",
    ),
    _t(
        "{the:N0} {refs}, {wherein:N0} {the:N5} is configured to {inf:V2} {the.acc:N4}.",
        "{the:N0} {refs}, {wherein:N0} {the:N5} dazu ausgebildet ist, {the.acc:N4} {inf:V2}.",
        "{the:N0} {refs}, {wherein:N0} {the:N5} est {agree:configuré/N5} pour {inf:V2} {the:N4}.",
    ),
]

_METHOD = _t(
    "A method using {the.acc:N0} {refs}, wherein {the:N1} is {pp:V0/N1} and {the:N2} is {pp:V1/N2}.",
    "Verfahren mit {the.dat:N0} {refs}, bei dem {the:N1} {pp:V0/N1} wird und {the:N2} {pp:V1/N2} wird.",
    "Procédé utilisant {the:N0} {refs}, dans lequel {the:N1} est {pp:V0/N1} et {the:N2} est {pp:V1/N2}.",
)
_METHOD_DEPENDENT = _t(
    "The method {refs}, wherein {the:N5} is {pp:V2/N5} {P.with:N6}.",
    "Verfahren {refs}, wobei {the:N5} {P.with:N6} {pp:V2/N5} wird.",
    "Procédé {refs}, dans lequel {the:N5} est {pp:V2/N5} {P.with:N6}.",
)
_SYSTEM = _t(
    "{a:N9} comprising {a.acc:N0} {refs}.",
    "{a:N9}, umfassend {a.acc:N0} {refs}.",
    "{a:N9} comprenant {a:N0} {refs}.",
)

# English-only prose (abstract, description)
_ABSTRACT_FIRST = [
    _t("The invention relates to {a.acc:N0} for {a.acc:N1}."),
    _t("{a:A0+N0} comprises {a.acc:N1}, {a.acc:N2} and {a.acc:N3}."),
    _t("{a:N0} is disclosed which comprises {a.acc:N1} and {a.acc:A0+N2}."),
]
_PROSE = [
    _t("{the:N1} is {pp:V0/N1} {P.to:N2}."),
    _t("In one embodiment, {the:A0+N1} is {pp:V0/N1} {P.by:N2}."),
    _t("{the:N1} may comprise {a.acc:N2}, {a.acc:N3} or {a.acc:N4}."),
    _t("Preferably, {the:N1} is {pp:V0/N1} {P.in:N2} and {pp:V1/N1} {P.with:N3}."),
    _t("{a:N1} can be used to {inf:V0} {the.acc:A0+N2}."),
    _t("This arrangement allows {the.acc:N1} to be {pp:V0/N1} {P.on:N2}."),
    _t("{the:N1} and {the:N2} are {pp:V0/N1} {P.to:N3}."),
    _t("For example, {the:N1} may be {pp:V0/N1} {P.from:A0+N2}."),
    _t("{the:N1} is arranged between {the.acc:N2} and {the.acc:N3}."),
    _t("A plurality of {npl:N1} are {pp:V0/N1} {P.on:A0+N2}."),
    _t("As a result, {the:N1} of {the.acc:N2} can be {pp:V0/N1} more reliably."),
    _t("{the:N1} is preferably made of {a.acc:A0+N2}."),
    _t("In this way, {the:N1} does not need to be {pp:V0/N1} {P.by:N2}."),
    _t("{the:A0+N1} extends along {the.acc:N2} of {the.acc:N3}."),
]
_BACKGROUND = [
    _t("{$cite} discloses {a.acc:N1} in which {the:N2} is {pp:V0/N2} {P.to:N3}."),
    _t("{$cite} describes {a.acc:A0+N1} having {a.acc:N2} and {a.acc:N3}."),
]
_BACKGROUND_PROSE = [
    _t("Known {npl:N1} have the disadvantage that {the:N2} is {pp:V0/N2} {P.by:N3}."),
    _t("Such {npl:N1} are widely used in {npl:N2}."),
    _t("In conventional {npl:N1}, {the:N2} must be {pp:V0/N2} separately."),
]
_FIELD = [
    _t("The present invention relates to {a.acc:A0+N0} and in particular to {a.acc:N1} for {a.acc:N2}."),
    _t("The invention relates to the field of {npl:N1} and concerns {a.acc:N0} with {a.acc:N2}."),
]
_SUMMARY_FIRST = [
    _t("It is an object of the invention to provide {a.acc:A0+N0} which allows {the.acc:N1} to be {pp:V0/N1} "
       "{P.with:N2}."),
    _t("The object of the invention is to improve {the.acc:N1} of known {npl:N0}."),
]  # fmt: skip
_SUMMARY_CLAIM = _t("This object is achieved by {a.acc:N0} having the features of claim 1.")
_FIGURE = _t("Fig. {$fig} shows {$view} view of {the.acc:N0} according to the {$ordinal} embodiment.")

_VIEWS = ["perspective", "sectional", "side", "top", "schematic", "exploded", "detailed"]
_ORDINALS = ["first", "second", "third", "fourth"]
_HEADINGS = {
    "field": "Technical field",
    "background": "Background",
    "summary": "Summary",
    "drawings": "Brief description of the drawings",
    "detailed": "Detailed description",
}
_CLOSING = "The invention is not limited to the embodiments described above; they may be combined and modified."
