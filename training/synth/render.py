"""Rendering a template with language-neutral slot fills into English, German or French text.

Articles and cases, German adjective endings and contractions, French agreement and elision.
"""

from __future__ import annotations

from collections.abc import Sequence

from training.synth.lexicon import _fr_plural, _Lexicon
from training.synth.templates import _Template

_DE_DEF = {"nom": {"m": "der", "f": "die", "n": "das"}, "acc": {"m": "den", "f": "die", "n": "das"},
           "dat": {"m": "dem", "f": "der", "n": "dem"}}  # fmt: skip
_DE_INDEF = {"nom": {"m": "ein", "f": "eine", "n": "ein"}, "acc": {"m": "einen", "f": "eine", "n": "ein"},
             "dat": {"m": "einem", "f": "einer", "n": "einem"}}  # fmt: skip
# adjective endings after a definite article (weak), an indefinite one (mixed), none (strong)
_DE_ADJ = {
    "the": {"nom": {"m": "e", "f": "e", "n": "e"}, "acc": {"m": "en", "f": "e", "n": "e"},
            "dat": {"m": "en", "f": "en", "n": "en"}},
    "a": {"nom": {"m": "er", "f": "e", "n": "es"}, "acc": {"m": "en", "f": "e", "n": "es"},
          "dat": {"m": "en", "f": "en", "n": "en"}},
    "": {"nom": {"m": "er", "f": "e", "n": "es"}, "acc": {"m": "en", "f": "e", "n": "es"},
         "dat": {"m": "em", "f": "er", "n": "em"}},
}  # fmt: skip
_PREPS: dict[str, dict[str, str]] = {
    "en": {"to": "to", "by": "by", "with": "with", "of": "of", "in": "in", "on": "on", "from": "from", "for": "for"},
    "fr": {"to": "à", "by": "par", "with": "avec", "of": "de", "in": "dans", "on": "sur", "from": "de", "for": "pour"},
}
_DE_PREPS: dict[str, tuple[str, str]] = {  # preposition and the case it governs
    "to": ("an", "acc"), "by": ("durch", "acc"), "with": ("mit", "dat"), "of": ("von", "dat"),
    "in": ("in", "dat"), "on": ("auf", "dat"), "from": ("von", "dat"), "for": ("für", "acc"),
}  # fmt: skip


def _refs_text(lang: str, refs: Sequence[int]) -> str:
    if len(refs) == 1:
        return {"en": "according to claim {}", "de": "nach Anspruch {}", "fr": "selon la revendication {}"}[
            lang
        ].format(refs[0])
    if len(refs) == 2:
        return {
            "en": "according to claim {} or {}",
            "de": "nach Anspruch {} oder {}",
            "fr": "selon la revendication {} ou {}",
        }[lang].format(refs[0], refs[1])
    return {
        "en": "according to any one of claims {} to {}",
        "de": "nach einem der Ansprüche {} bis {}",
        "fr": "selon l'une quelconque des revendications {} à {}",
    }[lang].format(refs[0], refs[-1])


def _en_article(phrase: str) -> str:
    """``a`` or ``an`` for the following phrase (spelling-based: 'an upper', 'a unit')."""
    c = phrase[:1]
    if c in "aeioAEIO" or (c in "uU" and not phrase.lower().startswith(("uni", "use", "usu"))):
        return "an"
    return "a"


_FR_VOWEL_START = tuple("aeiouéèêâîôûh")
_DE_CONTRACT = {("von", "dem"): "vom", ("in", "dem"): "im", ("an", "dem"): "am", ("zu", "dem"): "zum"}
_FR_CONTRACT = {("à", "le"): "au", ("de", "le"): "du"}


class _Renderer:
    """Turns a template + slot fill into text in one language."""

    def __init__(self, lex: _Lexicon) -> None:
        self.forms = lex.forms

    def render(
        self,
        tpl: _Template,
        lang: str,
        fill: dict[str, int],
        ctx: dict[str, str] | None = None,
        refs: Sequence[int] = (),
        numerals: dict[int, int] | None = None,
    ) -> str:
        forms = self.forms[lang]
        out: list[str] = []
        np = self._np
        for seg in tpl.parts[lang]:
            if type(seg) is str:
                out.append(seg)
                continue
            kind, case, adj_s, noun_s, extra = seg
            if kind == "$":
                out.append(ctx[extra] if ctx else "")
            elif kind == "refs":
                out.append(_refs_text(lang, refs))
            elif kind == "pp":
                pp = forms[fill[extra]][1]
                out.append(pp + "e" if lang == "fr" and forms[fill[noun_s]][2] == "f" else pp)
            elif kind == "agree":
                out.append(extra + "e" if lang == "fr" and forms[fill[noun_s]][2] == "f" else extra)
            elif kind == "inf":
                out.append(forms[fill[extra]][0])
            else:
                out.append(np(lang, forms, kind, case, fill[adj_s] if adj_s else None, fill[noun_s], numerals))
        text = "".join(out)
        if lang == "fr" and " de un" in text:
            text = text.replace(" de une ", " d'une ").replace(" de un ", " d'un ")
        return text[:1].upper() + text[1:]

    def _np(
        self,
        lang: str,
        forms: list[tuple[str, ...]],
        kind: str,
        case: str,
        adj: int | None,
        noun: int,
        numerals: dict[int, int] | None,
    ) -> str:
        """Noun phrase (or a word that depends on a noun's gender) for one segment."""
        nf = forms[noun]
        if kind == "P":  # preposition + definite NP, with the contractions of each language
            if lang == "en":
                return _PREPS["en"][case] + " " + self._np(lang, forms, "the", "nom", adj, noun, numerals)
            if lang == "de":
                word, pcase = _DE_PREPS[case]
                phrase = self._np(lang, forms, "the", pcase, adj, noun, numerals)
                art, rest = phrase.split(" ", 1)
                merged = _DE_CONTRACT.get((word, art))
                return f"{merged} {rest}" if merged else f"{word} {phrase}"
            word = _PREPS["fr"][case]
            phrase = self._np(lang, forms, "the", "nom", adj, noun, numerals)
            if phrase.startswith("le "):
                merged = _FR_CONTRACT.get((word, "le"))
                if merged:
                    return merged + phrase[2:]
            return f"{word} {phrase}"
        if kind == "wherein":
            if lang == "en":
                return "wherein"
            if lang == "de":
                return "wobei"
            return "dans laquelle" if nf[2] == "f" else "dans lequel"
        if kind == "rel":
            if lang == "en":
                return "which"
            if lang == "de":
                return _DE_DEF["nom"][nf[2]]
            return "qui"
        if kind == "poss":
            return "deren" if nf[2] == "f" else "dessen"
        plural = kind == "npl"
        word = nf[1] if plural else nf[0]
        if numerals is not None and (kind == "a" or kind == "the"):
            num = numerals.get(noun)
            if num is None:
                num = numerals[noun] = 10 + 2 * len(numerals)
            word = f"{word} {num}"
        if lang == "en":
            phrase = word if adj is None else forms[adj][0] + " " + word
            if kind == "a":
                return _en_article(phrase) + " " + phrase
            if kind == "the":
                return "the " + phrase
            return phrase
        if lang == "de":
            g = nf[2]
            art = kind if kind == "the" or kind == "a" else ""
            if adj is not None:
                ending = "en" if plural else _DE_ADJ[art][case][g]
                word = forms[adj][0] + ending + " " + word
            if kind == "a":
                return _DE_INDEF[case][g] + " " + word
            if kind == "the":
                return _DE_DEF[case][g] + " " + word
            return word
        # fr: adjective after the noun, agreeing in gender (and number); elision before a vowel
        g = nf[2]
        if adj is not None:
            a = forms[adj][1] if g == "f" else forms[adj][0]
            if plural:
                a = _fr_plural(a)
            word = word + " " + a
        if kind == "a":
            return ("une " if g == "f" else "un ") + word
        if kind == "the":
            if word.startswith(_FR_VOWEL_START):
                return "l'" + word
            return ("la " if g == "f" else "le ") + word
        return word
