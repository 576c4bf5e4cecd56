"""Deterministic synthetic patents for the demo and for scale benchmarks (``priorart synth``).

Everything is made from the seed; nothing is read from disk, so demo data is self-contained.

The world
  * A CPC-shaped classification: sections A-H, classes (``H01``), subclasses (``H01F``), main groups
    (``H01F27/00``) and subgroups with dot levels (``H01F27/14``). Each main group is one *topic*.
    :meth:`SynthWorld.scheme_lines` writes it in the format of the CPC title list, so
    ``service.classification.ClassificationScheme`` can load it.
  * A trilingual lexicon of *concepts* (nouns, adjectives, verbs), each with an English, German and
    French surface form with plausible morphology (German nouns capitalised with a gender and a plural,
    French gender and agreement, verb participles). A core of real technical words (device /
    Vorrichtung / dispositif ...) heads the background vocabulary; the rest are pseudo-words built from
    syllables: 60 % cognates (one root, language-specific spelling and suffix: ``trombation`` /
    ``Trombierung`` / ``trombation``), 40 % unrelated per language (like screw / Schraube / vis).
  * Vocabularies with Zipfian rank frequencies: a background vocabulary, one per subclass (shared by
    its topics) and one per topic.
  * Applicants (with inventor pools) that favour a few topics each.

A document
  * picks a topic (Zipfian topic popularity) and an *invention signature*: a handful of concepts
    (mostly from its topic). With probability ``derive_rate`` it builds on recent documents of the
    same topic: it takes over most of one document's signature (cited with category ``X``) and part of
    another's (``Y``), and cites some further same-topic documents as background (``A``). Citations
    therefore point to real earlier ids, and the X/Y ones share specific vocabulary with the citing
    document -- that is what makes prior-art search on this data measurable (see :func:`synth_topics`).
  * English title, abstract, claims and a description tree (Technical field, Background, Summary,
    Brief description of the drawings, Detailed description with one subsection per embodiment).
    Words come from a mixture of the signature, the topic, the subclass and the background vocabulary.
  * With probability ``multilingual`` (a ``B1`` grant, the EP trilingual case) also German and French
    titles and claims, rendered from the same claim structure, so the claims are aligned claim by claim.
  * Dependent claims refer to earlier ones (``refs``) with "according to claim N" / "nach Anspruch N" /
    "selon la revendication N" (also "... claim 1 or 2", "any one of claims 1 to 3").
  * 1-4 CPC codes, the topic's dominating (first), sometimes a sibling topic's or another section's;
    IPC codes are the main groups of the CPC codes.
  * ids ``XS00000042A1``: ``XS`` lies in ISO 3166's user-assigned range (XA-XZ) and is used by no patent
    office, so synthetic documents are never mistaken for real publications. Numbers follow generation
    order; publication dates (Wednesdays) rise with the number from 1980 to 2024.

Same seed and parameters -> identical records (and byte-identical JSONL); generation streams with
memory bounded by the world's size (at most ``MAX_TOPICS`` topics), not by ``n``.
"""

from __future__ import annotations

import bisect
import logging
import math
import random
import re
import sys
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from service.codes import truncate_code
from service.corpus.record import LANGS, Citation, Claim, PatentRecord, Section
from service.text.analysis import stopwords

log = logging.getLogger(__name__)

COUNTRY = "XS"
MAX_TOPICS = 2000
START = date(1980, 1, 1)
END = date(2024, 12, 31)

NOUN, ADJ, VERB = 0, 1, 2

# --------------------------------------------------------------------------------------------------
# Real core vocabulary (the head of the background vocabulary)
# --------------------------------------------------------------------------------------------------

# en, en plural (None: by rule), de, de gender, de plural, fr, fr gender
_REAL_NOUNS: list[tuple[str, str | None, str, str, str, str, str]] = [
    ("device", None, "Vorrichtung", "f", "Vorrichtungen", "dispositif", "m"),
    ("housing", None, "Gehäuse", "n", "Gehäuse", "boîtier", "m"),
    ("element", None, "Element", "n", "Elemente", "élément", "m"),
    ("layer", None, "Schicht", "f", "Schichten", "couche", "f"),
    ("surface", None, "Oberfläche", "f", "Oberflächen", "surface", "f"),
    ("unit", None, "Einheit", "f", "Einheiten", "unité", "f"),
    ("member", None, "Bauteil", "n", "Bauteile", "organe", "m"),
    ("part", None, "Teil", "n", "Teile", "partie", "f"),
    ("body", None, "Körper", "m", "Körper", "corps", "m"),
    ("plate", None, "Platte", "f", "Platten", "plaque", "f"),
    ("wall", None, "Wand", "f", "Wände", "paroi", "f"),
    ("shaft", None, "Welle", "f", "Wellen", "arbre", "m"),
    ("opening", None, "Öffnung", "f", "Öffnungen", "ouverture", "f"),
    ("frame", None, "Rahmen", "m", "Rahmen", "cadre", "m"),
    ("support", None, "Träger", "m", "Träger", "support", "m"),
    ("section", None, "Abschnitt", "m", "Abschnitte", "section", "f"),
    ("end", None, "Ende", "n", "Enden", "extrémité", "f"),
    ("axis", "axes", "Achse", "f", "Achsen", "axe", "m"),
    ("sensor", None, "Sensor", "m", "Sensoren", "capteur", "m"),
    ("signal", None, "Signal", "n", "Signale", "signal", "m"),
    ("circuit", None, "Schaltung", "f", "Schaltungen", "circuit", "m"),
    ("controller", None, "Steuereinheit", "f", "Steuereinheiten", "contrôleur", "m"),
    ("motor", None, "Motor", "m", "Motoren", "moteur", "m"),
    ("valve", None, "Ventil", "n", "Ventile", "soupape", "f"),
    ("spring", None, "Feder", "f", "Federn", "ressort", "m"),
    ("cover", None, "Deckel", "m", "Deckel", "couvercle", "m"),
    ("channel", None, "Kanal", "m", "Kanäle", "canal", "m"),
    ("chamber", None, "Kammer", "f", "Kammern", "chambre", "f"),
    ("pipe", None, "Rohr", "n", "Rohre", "tube", "m"),
    ("fluid", None, "Fluid", "n", "Fluide", "fluide", "m"),
    ("material", None, "Material", "n", "Materialien", "matériau", "m"),
    ("substrate", None, "Substrat", "n", "Substrate", "substrat", "m"),
    ("film", None, "Folie", "f", "Folien", "film", "m"),
    ("electrode", None, "Elektrode", "f", "Elektroden", "électrode", "f"),
    ("terminal", None, "Anschluss", "m", "Anschlüsse", "borne", "f"),
    ("connector", None, "Verbinder", "m", "Verbinder", "connecteur", "m"),
    ("screw", None, "Schraube", "f", "Schrauben", "vis", "f"),
    ("wheel", None, "Rad", "n", "Räder", "roue", "f"),
    ("lever", None, "Hebel", "m", "Hebel", "levier", "m"),
    ("pin", None, "Stift", "m", "Stifte", "broche", "f"),
    ("ring", None, "Ring", "m", "Ringe", "bague", "f"),
    ("groove", None, "Nut", "f", "Nuten", "rainure", "f"),
    ("seal", None, "Dichtung", "f", "Dichtungen", "joint", "m"),
    ("pump", None, "Pumpe", "f", "Pumpen", "pompe", "f"),
    ("container", None, "Behälter", "m", "Behälter", "récipient", "m"),
    ("lens", None, "Linse", "f", "Linsen", "lentille", "f"),
    ("display", None, "Anzeige", "f", "Anzeigen", "écran", "m"),
    ("memory", None, "Speicher", "m", "Speicher", "mémoire", "f"),
    ("processor", None, "Prozessor", "m", "Prozessoren", "processeur", "m"),
    ("temperature", None, "Temperatur", "f", "Temperaturen", "température", "f"),
    ("pressure", None, "Druck", "m", "Drücke", "pression", "f"),
    ("position", None, "Position", "f", "Positionen", "position", "f"),
    ("direction", None, "Richtung", "f", "Richtungen", "direction", "f"),
    ("distance", None, "Abstand", "m", "Abstände", "distance", "f"),
    ("region", None, "Bereich", "m", "Bereiche", "zone", "f"),
    ("edge", None, "Rand", "m", "Ränder", "bord", "m"),
    ("side", None, "Seite", "f", "Seiten", "côté", "m"),
    ("base", None, "Sockel", "m", "Sockel", "socle", "m"),
    ("cable", None, "Kabel", "n", "Kabel", "câble", "m"),
    ("battery", None, "Batterie", "f", "Batterien", "batterie", "f"),
    ("coil", None, "Spule", "f", "Spulen", "bobine", "f"),
    ("core", None, "Kern", "m", "Kerne", "noyau", "m"),
    ("magnet", None, "Magnet", "m", "Magnete", "aimant", "m"),
    ("gear", None, "Zahnrad", "n", "Zahnräder", "engrenage", "m"),
    ("bearing", None, "Lager", "n", "Lager", "palier", "m"),
    ("filter", None, "Filter", "m", "Filter", "filtre", "m"),
    ("nozzle", None, "Düse", "f", "Düsen", "buse", "f"),
    ("mixture", None, "Mischung", "f", "Mischungen", "mélange", "m"),
    ("composition", None, "Zusammensetzung", "f", "Zusammensetzungen", "composition", "f"),
    ("compound", None, "Verbindung", "f", "Verbindungen", "composé", "m"),
    ("solution", None, "Lösung", "f", "Lösungen", "solution", "f"),
    ("particle", None, "Partikel", "n", "Partikel", "particule", "f"),
    ("fibre", None, "Faser", "f", "Fasern", "fibre", "f"),
    ("vehicle", None, "Fahrzeug", "n", "Fahrzeuge", "véhicule", "m"),
    ("tool", None, "Werkzeug", "n", "Werkzeuge", "outil", "m"),
    ("network", None, "Netzwerk", "n", "Netzwerke", "réseau", "m"),
    ("module", None, "Modul", "n", "Module", "module", "m"),
    ("interface", None, "Schnittstelle", "f", "Schnittstellen", "interface", "f"),
    ("system", None, "System", "n", "Systeme", "système", "m"),
    ("apparatus", None, "Apparat", "m", "Apparate", "appareil", "m"),
    ("assembly", None, "Baugruppe", "f", "Baugruppen", "ensemble", "m"),
    ("arrangement", None, "Anordnung", "f", "Anordnungen", "agencement", "m"),
    ("component", None, "Komponente", "f", "Komponenten", "composant", "m"),
]

# en, de attributive stem, fr masculine, fr feminine
_REAL_ADJS: list[tuple[str, str, str, str]] = [
    ("upper", "ober", "supérieur", "supérieure"),
    ("lower", "unter", "inférieur", "inférieure"),
    ("inner", "inner", "intérieur", "intérieure"),
    ("outer", "äußer", "extérieur", "extérieure"),
    ("flexible", "flexibl", "flexible", "flexible"),
    ("elastic", "elastisch", "élastique", "élastique"),
    ("electrical", "elektrisch", "électrique", "électrique"),
    ("mechanical", "mechanisch", "mécanique", "mécanique"),
    ("thermal", "thermisch", "thermique", "thermique"),
    ("optical", "optisch", "optique", "optique"),
    ("radial", "radial", "radial", "radiale"),
    ("axial", "axial", "axial", "axiale"),
    ("central", "zentral", "central", "centrale"),
    ("lateral", "seitlich", "latéral", "latérale"),
    ("movable", "beweglich", "mobile", "mobile"),
    ("fixed", "fest", "fixe", "fixe"),
    ("conductive", "leitfähig", "conducteur", "conductrice"),
    ("transparent", "transparent", "transparent", "transparente"),
    ("porous", "porös", "poreux", "poreuse"),
    ("magnetic", "magnetisch", "magnétique", "magnétique"),
    ("annular", "ringförmig", "annulaire", "annulaire"),
    ("cylindrical", "zylindrisch", "cylindrique", "cylindrique"),
]

# en infinitive, en participle, de zu-infinitive, de participle, fr infinitive, fr participle
_REAL_VERBS: list[tuple[str, str, str, str, str, str]] = [
    ("connect", "connected", "zu verbinden", "verbunden", "connecter", "connecté"),
    ("arrange", "arranged", "anzuordnen", "angeordnet", "disposer", "disposé"),
    ("attach", "attached", "zu befestigen", "befestigt", "fixer", "fixé"),
    ("couple", "coupled", "zu koppeln", "gekoppelt", "coupler", "couplé"),
    ("mount", "mounted", "zu montieren", "montiert", "monter", "monté"),
    ("rotate", "rotated", "zu drehen", "gedreht", "tourner", "tourné"),
    ("guide", "guided", "zu führen", "geführt", "guider", "guidé"),
    ("heat", "heated", "zu erwärmen", "erwärmt", "chauffer", "chauffé"),
    ("cool", "cooled", "zu kühlen", "gekühlt", "refroidir", "refroidi"),
    ("control", "controlled", "zu steuern", "gesteuert", "commander", "commandé"),
    ("measure", "measured", "zu messen", "gemessen", "mesurer", "mesuré"),
    ("seal", "sealed", "abzudichten", "abgedichtet", "étancher", "étanché"),
    ("supply", "supplied", "zuzuführen", "zugeführt", "alimenter", "alimenté"),
    ("receive", "received", "aufzunehmen", "aufgenommen", "recevoir", "reçu"),
    ("form", "formed", "zu bilden", "gebildet", "former", "formé"),
    ("drive", "driven", "anzutreiben", "angetrieben", "entraîner", "entraîné"),
    ("press", "pressed", "zu pressen", "gepresst", "presser", "pressé"),
    ("cover", "covered", "abzudecken", "abgedeckt", "couvrir", "couvert"),
]

_SECTION_TITLES = {
    "A": "HUMAN NECESSITIES",
    "B": "PERFORMING OPERATIONS; TRANSPORTING",
    "C": "CHEMISTRY; METALLURGY",
    "D": "TEXTILES; PAPER",
    "E": "FIXED CONSTRUCTIONS",
    "F": "MECHANICAL ENGINEERING; LIGHTING; HEATING; WEAPONS; BLASTING",
    "G": "PHYSICS",
    "H": "ELECTRICITY",
}

# --------------------------------------------------------------------------------------------------
# Pseudo-words
# --------------------------------------------------------------------------------------------------


# onsets, vowels, codas per syllable inventory ("xx": language-neutral roots of cognates)
def _w(text: str) -> list[str]:
    """Split a space-separated word list ("" entries are written as '-')."""
    return [("" if w == "-" else w) for w in text.split()]


_SYLLABLES: dict[str, tuple[list[str], list[str], list[str]]] = {
    "xx": (
        _w("b d f g k l m n p r s t v z pl tr kr gr st sp br fl"),
        _w("a e i o u a e o"),
        _w("- - - n r l s m x nt"),
    ),
    "en": (
        _w("b c d f g h l m n p r s t w th sh ch st bl gr tr sp cl wh"),
        _w("a e i o u ea oo ai ou"),
        _w("- - n r t ck ll nd st ng sh"),
    ),
    "de": (
        _w("b d f g h k l m n p r s t w z sch st schw pf kl gr tr br"),
        _w("a e i o u ei au ie ä ö ü"),
        _w("- - n r t ch ck ss tz ng nk rt lt"),
    ),
    "fr": (_w("b c d f g j l m n p r s t v ch gr tr pl br cr"), _w("a e i o u ou oi au é ai"), _w("- - - n r l s t")),
}


_VOWELS = frozenset("aeiouyäöüé")

# en, de, de gender ("" = random m/n), fr, fr gender ("" = random)
_NOUN_SUFFIXES = [
    ("", "", "", "", ""),
    ("er", "er", "m", "eur", "m"),
    ("ation", "ierung", "f", "ation", "f"),
    ("ity", "ität", "f", "ité", "f"),
    ("ment", "ment", "n", "ment", "m"),
    ("ing", "ung", "f", "age", "m"),
    ("or", "or", "m", "eur", "m"),
    ("ence", "enz", "f", "ence", "f"),
    ("ule", "el", "f", "ule", "f"),
]
# en, de stem, fr masculine, fr feminine
_ADJ_SUFFIXES = [
    ("al", "al", "al", "ale"),
    ("ic", "isch", "ique", "ique"),
    ("ive", "iv", "if", "ive"),
    ("ous", "ös", "eux", "euse"),
    ("able", "abl", "able", "able"),
    ("ar", "ar", "aire", "aire"),
]
# en suffix, de kind, fr suffix
_VERB_SUFFIXES = [("ate", "ieren", "er"), ("ize", "isieren", "iser"), ("", "en", "er")]


def _join(root: str, suffix: str) -> str:
    """Attach a suffix, dropping the root's final vowel before a vowel-initial suffix (no 'macaation')."""
    if root and suffix and root[-1] in _VOWELS and suffix[0] in _VOWELS:
        return root[:-1] + suffix
    return root + suffix


def _en_spell(root: str) -> str:
    return re.sub(r"k(?=[aoulr])", "c", root).replace("x", "ks") if root else root


def _de_spell(root: str) -> str:
    return root.replace("v", "w").replace("x", "ks")


def _fr_spell(root: str) -> str:
    root = re.sub(r"k(?=[ei])", "qu", root)
    return root.replace("k", "c")


def _en_plural(word: str) -> str:
    if word.endswith(("s", "x", "z", "sh", "ch")):
        return word + "es"
    if len(word) > 1 and word.endswith("y") and word[-2] not in "aeiou":
        return word[:-1] + "ies"
    return word + "s"


def _de_plural(word: str, gender: str) -> str:
    if word.endswith("e"):
        return word + "n"
    if gender == "f":
        return word + "en"
    if word.endswith(("er", "el", "en")):
        return word
    return word + "e"


def _fr_plural(word: str) -> str:
    if word.endswith(("s", "x", "z")):
        return word
    if word.endswith(("eau", "au")):
        return word + "x"
    if word.endswith("al"):
        return word[:-2] + "aux"
    return word + "s"


def _en_gerund(inf: str) -> str:
    if inf.endswith("e") and not inf.endswith("ee"):
        return inf[:-1] + "ing"
    return inf + "ing"


def _en_pp(inf: str) -> str:
    if inf.endswith("e"):
        return inf + "d"
    return inf + "ed"


class _Lexicon:
    """Concept table: word class and per-language form tuples.

    nouns: en (sg, pl); de (sg, pl, gender); fr (sg, pl, gender)
    adjectives: en (form,); de (attributive stem,); fr (masculine, feminine)
    verbs: en (infinitive, participle); de (zu-infinitive, participle); fr (infinitive, participle)
    """

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.kind = bytearray()
        self.forms: dict[str, list[tuple[str, ...]]] = {lang: [] for lang in LANGS}
        self._used: dict[str, set[str]] = {lang: set() for lang in LANGS}
        self._stop = {lang: stopwords(lang) for lang in LANGS}

    def __len__(self) -> int:
        return len(self.kind)

    def _add(self, kind: int, en: tuple[str, ...], de: tuple[str, ...], fr: tuple[str, ...]) -> int:
        cid = len(self.kind)
        self.kind.append(kind)
        for lang, forms in (("en", en), ("de", de), ("fr", fr)):
            self.forms[lang].append(forms)
            self._used[lang].add(forms[0].lower())
        return cid

    def add_real(self) -> tuple[list[int], list[int], list[int]]:
        nouns = [
            self._add(NOUN, (en, en_pl or _en_plural(en)), (de, de_pl, g), (fr, _fr_plural(fr), fg))
            for en, en_pl, de, g, de_pl, fr, fg in _REAL_NOUNS
        ]
        adjs = [self._add(ADJ, (en,), (de,), (fm, ff)) for en, de, fm, ff in _REAL_ADJS]
        verbs = [self._add(VERB, (en, epp), (dz, dpp), (fi, fpp)) for en, epp, dz, dpp, fi, fpp in _REAL_VERBS]
        return nouns, adjs, verbs

    def _root(self, inventory: str) -> str:
        onsets, vowels, codas = _SYLLABLES[inventory]
        rng = self.rng
        n_syl = rng.choice((1, 2, 2, 2, 3)) if inventory == "xx" else rng.choice((1, 1, 2, 2, 2))
        parts = []
        for k in range(n_syl):
            parts.append(rng.choice(onsets) + rng.choice(vowels))
            if k == n_syl - 1 or rng.random() < 0.3:
                parts.append(rng.choice(codas))
        return "".join(parts)

    def _fresh(self, make: Any) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
        """Call ``make()`` until its three forms are new words and no stop words (bounded retries)."""
        for _ in range(200):
            en, de, fr = make()
            ok = True
            for lang, forms in (("en", en), ("de", de), ("fr", fr)):
                head = forms[0].lower()
                if len(head) < 4 or head in self._used[lang] or head.split()[-1] in self._stop[lang]:
                    ok = False
                    break
            if ok:
                return en, de, fr
        raise RuntimeError("could not find a fresh pseudo-word; the syllable inventory is exhausted")

    def new_noun(self) -> int:
        rng = self.rng

        def make() -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
            if rng.random() < 0.6:
                root = self._root("xx")
                suf = rng.choice(_NOUN_SUFFIXES)
                roots = (_en_spell(root), _de_spell(root), _fr_spell(root))
                sufs = (suf, suf, suf)
            else:
                roots = (self._root("en"), self._root("de"), self._root("fr"))
                sufs = (rng.choice(_NOUN_SUFFIXES), rng.choice(_NOUN_SUFFIXES), rng.choice(_NOUN_SUFFIXES))
            en = _join(roots[0], sufs[0][0])
            de = _join(roots[1], sufs[1][1]).capitalize()
            dg = sufs[1][2] or rng.choice("mn")
            fr = _join(roots[2], sufs[2][3])
            fg = sufs[2][4] or ("f" if fr.endswith("e") else rng.choice("mf"))
            return (en, _en_plural(en)), (de, _de_plural(de, dg), dg), (fr, _fr_plural(fr), fg)

        return self._add(NOUN, *self._fresh(make))

    def new_adj(self) -> int:
        rng = self.rng

        def make() -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
            if rng.random() < 0.6:
                root = self._root("xx")
                s = rng.choice(_ADJ_SUFFIXES)
                return (
                    (_join(_en_spell(root), s[0]),),
                    (_join(_de_spell(root), s[1]),),
                    (_join(_fr_spell(root), s[2]), _join(_fr_spell(root), s[3])),
                )
            se, sd, sf = rng.choice(_ADJ_SUFFIXES), rng.choice(_ADJ_SUFFIXES), rng.choice(_ADJ_SUFFIXES)
            fr_root = self._root("fr")
            return (
                (_join(self._root("en"), se[0]),),
                (_join(self._root("de"), sd[1]),),
                (_join(fr_root, sf[2]), _join(fr_root, sf[3])),
            )

        return self._add(ADJ, *self._fresh(make))

    def new_verb(self) -> int:
        rng = self.rng

        def forms(
            en_root: str,
            de_root: str,
            fr_root: str,
            s: tuple[str, str, str],
            t: tuple[str, str, str],
            u: tuple[str, str, str],
        ) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
            en_inf = _join(en_root, s[0])
            if t[1] == "en":
                de_inf, de_pp = de_root + "en", "ge" + de_root + ("et" if de_root.endswith(("t", "d")) else "t")
            else:
                de_inf, de_pp = _join(de_root, t[1]), _join(de_root, t[1][:-2] + "t")
            fr_inf = _join(fr_root, u[2])
            fr_pp = fr_inf[:-2] + "é"
            return (en_inf, _en_pp(en_inf)), ("zu " + de_inf, de_pp), (fr_inf, fr_pp)

        def make() -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
            if rng.random() < 0.6:
                root = self._root("xx")
                s = rng.choice(_VERB_SUFFIXES)
                return forms(_en_spell(root), _de_spell(root), _fr_spell(root), s, s, s)
            return forms(
                self._root("en"),
                self._root("de"),
                self._root("fr"),
                rng.choice(_VERB_SUFFIXES),
                rng.choice(_VERB_SUFFIXES),
                rng.choice(_VERB_SUFFIXES),
            )

        return self._add(VERB, *self._fresh(make))


# --------------------------------------------------------------------------------------------------
# Templates: one string per language with the same slots; rendered from language-neutral fills
# --------------------------------------------------------------------------------------------------
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

# --------------------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------------------

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


# --------------------------------------------------------------------------------------------------
# The world: classification, topics, vocabularies, applicants
# --------------------------------------------------------------------------------------------------


@dataclass
class SynthTopic:
    """A main group with its subgroups and vocabulary (concept ids, most frequent first)."""

    index: int
    main_group: str
    subgroups: list[str]
    subclass: int
    nouns: list[int]
    adjs: list[int]
    verbs: list[int]


@dataclass
class _Subclass:
    code: str
    topics: list[int]
    nouns: list[int]
    adjs: list[int]
    verbs: list[int]


def default_topics(n: int) -> int:
    """Number of topics (main groups) for a corpus of ``n`` documents: ``2*sqrt(n)`` in [20, 2000]."""
    return max(20, min(MAX_TOPICS, int(2 * math.sqrt(max(n, 1)))))


class _Zipf:
    """Cumulative Zipf weights per vocabulary size (exponent ``s``), sampled with bisect."""

    def __init__(self, s: float) -> None:
        self.s = s
        self._cdf: dict[int, list[float]] = {}

    def cdf(self, size: int) -> list[float]:
        cdf = self._cdf.get(size)
        if cdf is None:
            weights = [1.0 / (r + 1) ** self.s for r in range(size)]
            total = sum(weights)
            acc = 0.0
            cdf = []
            for w in weights:
                acc += w / total
                cdf.append(acc)
            cdf[-1] = 1.0
            self._cdf[size] = cdf
        return cdf


def _spread(rng: random.Random, n_items: int, n_bins: int, cap: int) -> list[int]:
    """Counts per bin: every bin at least 1, at most ``cap``, summing to ``n_items``."""
    if n_items < n_bins or n_items > n_bins * cap:
        raise ValueError(f"cannot spread {n_items} items over {n_bins} bins of at most {cap}")
    counts = [1] * n_bins
    open_bins = list(range(n_bins))
    for _ in range(n_items - n_bins):
        k = rng.randrange(len(open_bins))
        b = open_bins[k]
        counts[b] += 1
        if counts[b] == cap:
            open_bins[k] = open_bins[-1]
            open_bins.pop()
    return counts


class SynthWorld:
    """Everything that is shared between documents, built deterministically from ``seed``.

    ``n_topics`` main groups (at least 8: every section gets a class and a subclass) spread over about
    ``n_topics / 5`` subclasses and ``n_topics / 15`` classes; its lexicon holds about 36 concepts per
    topic, 56 per subclass and 1400 background ones (~96k concepts, ~1.3 s to build at 2000 topics).
    """

    TOPIC_VOCAB = (24, 6, 6)  # nouns, adjectives, verbs per topic
    SUBCLASS_VOCAB = (40, 8, 8)
    BACKGROUND_VOCAB = (1000, 120, 120)  # pseudo-words, after the real core words

    def __init__(self, n_topics: int, seed: int = 0) -> None:
        if not 1 <= n_topics <= MAX_TOPICS:
            raise ValueError(f"n_topics must be in 1..{MAX_TOPICS}, got {n_topics}")
        rng = random.Random(f"priorart-synth-world-{seed}")
        self.seed = seed
        self.lex = _Lexicon(rng)
        real_n, real_a, real_v = self.lex.add_real()
        bn, ba, bv = self.BACKGROUND_VOCAB
        self.bg_nouns = real_n + [self.lex.new_noun() for _ in range(bn)]
        self.bg_adjs = real_a + [self.lex.new_adj() for _ in range(ba)]
        self.bg_verbs = real_v + [self.lex.new_verb() for _ in range(bv)]
        self.render = _Renderer(self.lex).render
        self.entries: list[tuple[str, str, str]] = []  # (code, dot level, title) in scheme order
        self.subclasses: list[_Subclass] = []
        self.topics: list[SynthTopic] = []
        self._build_scheme(rng, n_topics)
        # topic popularity: Zipf over a random order of topics
        order = list(range(len(self.topics)))
        rng.shuffle(order)
        self._topic_order = order
        self._topic_cdf = _Zipf(0.8).cdf(len(order))
        self._build_people(rng)

    # ---------------------------------------------------------------- classification
    def _vocab(self, sizes: tuple[int, int, int]) -> tuple[list[int], list[int], list[int]]:
        lex = self.lex
        return (
            [lex.new_noun() for _ in range(sizes[0])],
            [lex.new_adj() for _ in range(sizes[1])],
            [lex.new_verb() for _ in range(sizes[2])],
        )

    def _en(self, cid: int, plural: bool = False) -> str:
        f = self.lex.forms["en"][cid]
        return f[1] if plural else f[0]

    def _build_scheme(self, rng: random.Random, n_topics: int) -> None:
        n_sub = max(8, math.ceil(n_topics / 5))
        n_cls = max(8, math.ceil(n_sub / 3))
        n_topics = max(n_topics, n_sub)
        sections = sorted(_SECTION_TITLES)
        cls_per_section = _spread(rng, n_cls, len(sections), 99)
        sub_per_class = _spread(rng, n_sub, n_cls, 20)
        mg_per_sub = _spread(rng, n_topics, n_sub, 50)
        letters = "BCDFGHJKLMNPQRSTUVWY"
        ci = si = 0
        for section, k_cls in zip(sections, cls_per_section, strict=True):
            self.entries.append((section, "", _SECTION_TITLES[section]))
            for cnum in sorted(rng.sample(range(1, 100), k_cls)):
                ccode = f"{section}{cnum:02d}"
                cls_entry = len(self.entries)
                self.entries.append((ccode, "", ""))  # title after its first subclass has words
                for j, letter in enumerate(sorted(rng.sample(letters, sub_per_class[ci]))):
                    scode = ccode + letter
                    nouns, adjs, verbs = self._vocab(self.SUBCLASS_VOCAB)
                    sub = _Subclass(scode, [], nouns, adjs, verbs)
                    self.subclasses.append(sub)
                    words = [self._en(c, plural=True).upper() for c in nouns[:3]]
                    self.entries.append((scode, "", f"{words[0]}; {words[1]} OR {words[2]}"))
                    if j == 0:
                        title = f"{self._en(nouns[3], True).upper()}; {self._en(nouns[4], True).upper()}"
                        self.entries[cls_entry] = (ccode, "", title)
                    for mnum in sorted(rng.sample(range(1, 100, 2), mg_per_sub[si])):
                        self._add_topic(rng, sub, si, f"{scode}{mnum}")
                    si += 1
                ci += 1

    def _add_topic(self, rng: random.Random, sub: _Subclass, si: int, group: str) -> None:
        nouns, adjs, verbs = self._vocab(self.TOPIC_VOCAB)
        en = self._en
        main = f"{group}/00"
        self.entries.append((main, "0", f"{en(nouns[0], True).capitalize()} with {en(adjs[0])} {en(nouns[1], True)}"))
        subgroups: list[str] = []
        dots = 0
        for k in range(rng.randint(3, 9)):
            dots = 1 if k == 0 else min(4, max(1, dots + rng.choice((-1, 0, 0, 1))))
            number = f"{2 * (k + 1):02d}"
            noun = nouns[2 + (k % (len(nouns) - 2))]
            title = rng.choice(
                (
                    f"{en(adjs[k % len(adjs)]).capitalize()} {en(noun, True)}",
                    f"with {en(adjs[(k + 1) % len(adjs)])} {en(noun, True)}",
                    f"{en(noun, True).capitalize()}; {en(nouns[1 + k % 5], True)}",
                )
            )
            self.entries.append((f"{group}/{number}", str(dots), title))
            subgroups.append(f"{group}/{number}")
            if rng.random() < 0.25 and dots < 4:
                deeper = f"{group}/{number}5"
                self.entries.append((deeper, str(dots + 1), f"by {_en_gerund(en(verbs[k % len(verbs)]))}"))
                subgroups.append(deeper)
        topic = SynthTopic(len(self.topics), main, subgroups, si, nouns, adjs, verbs)
        sub.topics.append(topic.index)
        self.topics.append(topic)

    def scheme_lines(self) -> Iterator[str]:
        """The synthetic classification in the CPC title-list format (``code\\tdots\\ttitle``, no newline)."""
        for code, dots, title in self.entries:
            yield f"{code}\t{dots}\t{title}"

    def write_scheme(self, path: str | Path) -> int:
        """Write :meth:`scheme_lines` to ``path`` (``.gz`` compresses); returns the number of entries."""
        import gzip

        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        data = ("\n".join(self.scheme_lines()) + "\n").encode("utf-8")
        if path.suffix == ".gz":
            with gzip.GzipFile(path, "wb", mtime=0) as fh:
                fh.write(data)
        else:
            path.write_bytes(data)
        return len(self.entries)

    # ---------------------------------------------------------------- people
    def _build_people(self, rng: random.Random) -> None:
        first = {
            "en": _w("James Mary John Patricia Robert Jennifer Michael Linda David Susan Richard Karen Peter Helen"),
            "de": _w("Thomas Anna Michael Julia Andreas Katrin Stefan Sabine Jürgen Petra Markus Claudia Uwe Birgit"),
            "fr": _w("Jean Marie Pierre Sophie Michel Isabelle Philippe Nathalie Alain Céline Éric Sylvie Luc Claire"),
        }
        surname_suffix = {
            "en": ["son", "ton", "ley", "er", "well", "ford"],
            "de": ["mann", "er", "berg", "feld", "hofer", "bauer"],
            "fr": ["et", "ier", "ault", "in", "eau", "ard"],
        }
        company_suffix = {
            "en": ["Ltd", "Inc.", "Corporation", "LLC", "plc"],
            "de": ["GmbH", "AG", "GmbH & Co. KG", "KG"],
            "fr": ["S.A.", "SAS", "SARL"],
        }
        company_word = ["Technologies", "Industries", "Systems", "Engineering", "Instruments", "Holding", "Works"]
        n_companies = max(20, len(self.topics) // 2)
        self.companies: list[str] = []
        self.inventors: list[list[str]] = []
        used: set[str] = set()
        for _ in range(n_companies):
            lang = rng.choice(LANGS)
            while True:
                name = self.lex._root(lang).capitalize()
                full = f"{name} {rng.choice(company_word)} {rng.choice(company_suffix[lang])}"
                if full not in used and len(name) >= 3:
                    used.add(full)
                    break
            self.companies.append(full)
            staff = []
            for _ in range(rng.randint(4, 15)):
                ilang = lang if rng.random() < 0.8 else rng.choice(LANGS)
                surname = self.lex._root(ilang).capitalize() + rng.choice(surname_suffix[ilang])
                staff.append(f"{rng.choice(first[ilang])} {surname}")
            self.inventors.append(staff)
        # each topic favours a few applicants
        self.topic_companies = [
            rng.sample(range(n_companies), min(n_companies, rng.randint(2, 6))) for _ in self.topics
        ]

    def pick_topic(self, rng: random.Random) -> int:
        return self._topic_order[bisect.bisect_left(self._topic_cdf, rng.random())]


# --------------------------------------------------------------------------------------------------
# Documents
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SynthConfig:
    """Generation parameters (all defaults are sensible for the demo)."""

    n: int
    seed: int = 0
    langs: tuple[str, ...] = LANGS  # languages of multilingual documents (English is always present)
    multilingual: float = 0.3  # fraction of documents with titles and claims in all of ``langs``
    n_topics: int | None = None  # main groups; default :func:`default_topics`
    derive_rate: float = 0.75  # chance a document builds on earlier documents of its topic
    start: date = START
    end: date = END

    def __post_init__(self) -> None:
        if self.n < 0:
            raise ValueError(f"n must be >= 0, got {self.n}")
        bad = [lang for lang in self.langs if lang not in LANGS]
        if bad or "en" not in self.langs:
            raise ValueError(f"langs must include 'en' and be among {', '.join(LANGS)}, got {','.join(self.langs)}")
        if not 0.0 <= self.multilingual <= 1.0:
            raise ValueError(f"multilingual must be in [0, 1], got {self.multilingual}")
        if not 0.0 <= self.derive_rate <= 1.0:
            raise ValueError(f"derive_rate must be in [0, 1], got {self.derive_rate}")
        if self.n_topics is not None and not 1 <= self.n_topics <= MAX_TOPICS:
            raise ValueError(f"n_topics must be in 1..{MAX_TOPICS}, got {self.n_topics}")
        if self.end <= self.start:
            raise ValueError(f"end {self.end} must be after start {self.start}")


@dataclass
class _Prior:
    id: str
    published: date
    nouns: list[int]
    adjs: list[int]
    verbs: list[int]


class _Sampler:
    """Draws concepts for one document: signature, topic, subclass and background vocabularies."""

    # probabilities of the mixture components: signature, topic, subclass (background takes the rest)
    MIX = {NOUN: (0.30, 0.30, 0.12), ADJ: (0.25, 0.30, 0.10), VERB: (0.25, 0.30, 0.10)}

    def __init__(self, world: SynthWorld, zipf: _Zipf, rng: random.Random, topic: SynthTopic, sig: _Prior) -> None:
        sub = world.subclasses[topic.subclass]
        self.rng = rng
        cdf = zipf.cdf
        self.pools: dict[int, tuple[Any, ...]] = {}
        for kind, pools in (
            (NOUN, (sig.nouns, topic.nouns, sub.nouns, world.bg_nouns)),
            (ADJ, (sig.adjs, topic.adjs, sub.adjs, world.bg_adjs)),
            (VERB, (sig.verbs, topic.verbs, sub.verbs, world.bg_verbs)),
        ):
            p_sig, p_topic, p_sub = self.MIX[kind]
            cuts = (p_sig, p_sig + p_topic, p_sig + p_topic + p_sub)
            sig_pool, topic_pool, sub_pool, bg_pool = pools
            self.pools[kind] = (
                cuts,
                sig_pool,
                (topic_pool, cdf(len(topic_pool))),
                (sub_pool, cdf(len(sub_pool))),
                (bg_pool, cdf(len(bg_pool))),
            )

    def draw(self, kind: int) -> int:
        """One concept: uniform from the signature, Zipfian from the topic, subclass or background."""
        (a, b, c), sig, topic, sub, bg = self.pools[kind]
        u = self.rng.random()
        if u < a:  # the same uniform number, rescaled, picks the rank
            return sig[int(u / a * len(sig))]
        if u < b:
            pool, cdf, v = topic[0], topic[1], (u - a) / (b - a)
        elif u < c:
            pool, cdf, v = sub[0], sub[1], (u - b) / (c - b)
        else:
            pool, cdf, v = bg[0], bg[1], (u - c) / (1.0 - c)
        return pool[bisect.bisect_left(cdf, v)]

    def fill(self, tpl: _Template, fixed: dict[str, int]) -> dict[str, int]:
        """Concepts for the template's free slots (``fixed`` ones kept), avoiding repeats where easy."""
        out = dict(fixed)
        used = set(out.values())
        for slot in tpl.slots:
            if slot not in out:
                kind = NOUN if slot[0] == "N" else ADJ if slot[0] == "A" else VERB
                c = self.draw(kind)
                for _ in range(3):
                    if c not in used:
                        break
                    c = self.draw(kind)
                out[slot] = c
                used.add(c)
        return out


class SynthGenerator:
    """Streams :class:`PatentRecord` objects; memory is bounded by the world, not by ``n``."""

    RECENT = 24  # earlier documents remembered per topic (citation candidates)

    def __init__(self, config: SynthConfig, world: SynthWorld | None = None) -> None:
        self.config = config
        self.world = world or SynthWorld(config.n_topics or default_topics(config.n), config.seed)
        self._zipf = _Zipf(1.05)

    def __iter__(self) -> Iterator[PatentRecord]:
        cfg = self.config
        world = self.world
        rng = random.Random(f"priorart-synth-docs-{cfg.seed}")
        recent: dict[int, deque[_Prior]] = {}
        span = (cfg.end - cfg.start).days
        extra_langs = [lang for lang in cfg.langs if lang != "en"]
        for i in range(cfg.n):
            # publication dates rise with the number; snapped to the Wednesday of the week
            day = cfg.start + timedelta(days=int((i + rng.random()) * span / max(cfg.n, 1)))
            day = day - timedelta(days=day.weekday()) + timedelta(days=2)
            if day > cfg.end:
                day -= timedelta(days=7)
            multilingual = bool(extra_langs) and rng.random() < cfg.multilingual
            kind = "B1" if multilingual else "A1"
            number = f"{i + 1:08d}"
            doc_id = f"{COUNTRY}{number}{kind}"
            t = world.pick_topic(rng)
            topic = world.topics[t]
            queue = recent.setdefault(t, deque(maxlen=self.RECENT))
            prior, cites = self._signature(rng, topic, queue, day, doc_id)
            sampler = _Sampler(world, self._zipf, rng, topic, prior)
            langs = ["en", *extra_langs] if multilingual else ["en"]
            rec = self._record(rng, sampler, topic, prior, cites, langs, doc_id, number, kind, day)
            queue.append(prior)
            yield rec

    # ---------------------------------------------------------------- pieces
    def _signature(
        self, rng: random.Random, topic: SynthTopic, queue: deque[_Prior], day: date, doc_id: str
    ) -> tuple[_Prior, list[Citation]]:
        world = self.world
        zipf = self._zipf

        def from_topic(pool: list[int], k: int) -> list[int]:
            cdf = zipf.cdf(len(pool))
            return [pool[bisect.bisect_left(cdf, rng.random())] for _ in range(k)]

        # the main object: usually topical, sometimes a broad word (device, system ...)
        u = rng.random()
        if u < 0.55:
            main = from_topic(topic.nouns, 1)[0]
        elif u < 0.8:
            main = from_topic(world.subclasses[topic.subclass].nouns, 1)[0]
        else:
            main = world.bg_nouns[rng.randrange(12)]
        nouns = [main, *from_topic(topic.nouns, 5)]
        adjs = from_topic(topic.adjs, 2)
        verbs = from_topic(topic.verbs, 2)
        cites: list[Citation] = []
        earlier = [p for p in queue if p.published < day]
        if earlier and rng.random() < self.config.derive_rate:
            x = earlier[rng.randrange(len(earlier))]
            # most of X's invention, often the same main object
            keep = rng.sample(x.nouns[1:], min(3, len(x.nouns) - 1))
            nouns = [x.nouns[0] if rng.random() < 0.7 else main, *keep, *nouns[1:3]]
            adjs = [x.adjs[0], adjs[0]]
            verbs = [x.verbs[0], verbs[0]]
            cites.append(Citation(text=x.id, id=x.id, category="X"))
            others = [p for p in earlier if p is not x]
            if others and rng.random() < 0.5:
                y = others.pop(rng.randrange(len(others)))
                nouns[-1] = rng.choice(y.nouns)
                verbs[-1] = y.verbs[rng.randrange(len(y.verbs))]
                cites.append(Citation(text=y.id, id=y.id, category="Y"))
            for _ in range(rng.choice((0, 1, 1, 2))):
                if not others:
                    break
                a = others.pop(rng.randrange(len(others)))
                cites.append(Citation(text=a.id, id=a.id, category="A"))
        elif earlier and rng.random() < 0.5:
            a = earlier[rng.randrange(len(earlier))]
            cites.append(Citation(text=a.id, id=a.id, category="A"))
        # de-duplicate, keep order
        nouns = list(dict.fromkeys(nouns))
        while len(nouns) < 5:  # enough distinct features for the claims
            c = topic.nouns[rng.randrange(len(topic.nouns))]
            if c not in nouns:
                nouns.append(c)
        return _Prior(doc_id, day, nouns, adjs, verbs), cites

    def _codes(self, rng: random.Random, topic: SynthTopic) -> list[str]:
        world = self.world
        codes = rng.sample(topic.subgroups, min(len(topic.subgroups), rng.choice((1, 1, 2, 2, 3))))
        if rng.random() < 0.1:
            codes[0] = topic.main_group
        siblings = world.subclasses[topic.subclass].topics
        if len(codes) < 4 and len(siblings) > 1 and rng.random() < 0.35:
            other = world.topics[rng.choice([s for s in siblings if s != topic.index])]
            codes.append(rng.choice(other.subgroups))
        if len(codes) < 4 and rng.random() < 0.1:
            other = world.topics[rng.randrange(len(world.topics))]
            codes.append(rng.choice(other.subgroups))
        out: list[str] = []
        for c in codes:
            if c not in out:
                out.append(c)
        return out

    def _claims(self, rng: random.Random, sampler: _Sampler, prior: _Prior, langs: list[str]) -> dict[str, list[Claim]]:
        render = self.world.render
        base = {"N0": prior.nouns[0]}
        for k, c in enumerate(prior.nouns[1:5], 1):
            base[f"N{k}"] = c
        base["A0"] = prior.adjs[0]
        base["V0"], base["V1"] = prior.verbs[0], prior.verbs[-1]
        first = rng.choice(_CLAIM1)
        plan: list[tuple[_Template, dict[str, int], list[int]]] = [(first, sampler.fill(first, base), [])]
        n_dep = rng.randint(3, 11)
        for num in range(2, n_dep + 2):
            u = rng.random()
            if u < 0.6 or num == 2:
                refs = [1]
            elif u < 0.85:
                refs = [rng.randint(1, num - 1)]
            elif u < 0.93:
                a = rng.randint(1, num - 2)
                refs = [a, rng.randint(a + 1, num - 1)]
            else:
                refs = list(range(1, rng.randint(2, num - 1) + 1)) if num > 2 else [1]
            tpl = rng.choice(_DEPENDENT)
            plan.append((tpl, sampler.fill(tpl, base), refs))
        last = len(plan)
        u = rng.random()
        if u < 0.35:  # a method claim using the product, with a dependent claim of its own
            plan.append((_METHOD, sampler.fill(_METHOD, base), [1]))
            plan.append((_METHOD_DEPENDENT, sampler.fill(_METHOD_DEPENDENT, base), [last + 1]))
        elif u < 0.6:  # a system claim comprising the product
            refs = list(range(1, last + 1)) if last > 2 else [1]
            plan.append((_SYSTEM, sampler.fill(_SYSTEM, base), refs))
        claims: dict[str, list[Claim]] = {}
        for lang in langs:
            claims[lang] = [
                Claim(num=k, text=render(tpl, lang, fill, refs=refs), refs=refs)
                for k, (tpl, fill, refs) in enumerate(plan, 1)
            ]
        return claims

    def _prose(
        self, sampler: _Sampler, pool: list[_Template], k: int, base: dict[str, int], numerals: dict[int, int] | None
    ) -> list[str]:
        render = self.world.render
        rng = sampler.rng
        out = []
        for _ in range(k):
            tpl = pool[rng.randrange(len(pool))]
            out.append(render(tpl, "en", sampler.fill(tpl, base), numerals=numerals))
        return out

    def _description(
        self, rng: random.Random, sampler: _Sampler, cites: list[Citation], base: dict[str, int]
    ) -> list[Section]:
        render = self.world.render
        prose = self._prose
        fld = rng.choice(_FIELD)
        field_par = [render(fld, "en", sampler.fill(fld, base))]
        background: list[str] = []
        for c in cites[:3]:
            tpl = rng.choice(_BACKGROUND)
            sentence = render(tpl, "en", sampler.fill(tpl, {}), ctx={"cite": c.id or c.text})
            background.append(" ".join([sentence, *prose(sampler, _PROSE, rng.randint(1, 3), {}, None)]))
        background.append(" ".join(prose(sampler, _BACKGROUND_PROSE, rng.randint(1, 3), {}, None)))
        first = rng.choice(_SUMMARY_FIRST)
        summary = [
            " ".join(
                [
                    render(first, "en", sampler.fill(first, base)),
                    render(_SUMMARY_CLAIM, "en", sampler.fill(_SUMMARY_CLAIM, base)),
                ]
            ),
            " ".join(prose(sampler, _PROSE, rng.randint(3, 6), {}, None)),
        ]
        n_emb = rng.randint(1, 3)
        figures = []
        fig = 0
        for e in range(n_emb):
            for _ in range(rng.randint(1, 2)):
                fig += 1
                view = rng.choice(_VIEWS)
                ctx = {"fig": str(fig), "view": f"{_en_article(view)} {view}", "ordinal": _ORDINALS[e]}
                figures.append(render(_FIGURE, "en", sampler.fill(_FIGURE, base), ctx=ctx))
        numerals: dict[int, int] = {}
        embodiments = []
        for e in range(n_emb):
            paragraphs = [
                " ".join(prose(sampler, _PROSE, rng.randint(3, 6), {}, numerals)) for _ in range(rng.randint(2, 4))
            ]
            embodiments.append(Section(heading=f"{_ORDINALS[e].capitalize()} embodiment", paragraphs=paragraphs))
        return [
            Section(heading=_HEADINGS["field"], paragraphs=field_par),
            Section(heading=_HEADINGS["background"], paragraphs=background),
            Section(heading=_HEADINGS["summary"], paragraphs=summary),
            Section(heading=_HEADINGS["drawings"], paragraphs=figures),
            Section(heading=_HEADINGS["detailed"], paragraphs=[_CLOSING], sections=embodiments),
        ]

    def _record(
        self,
        rng: random.Random,
        sampler: _Sampler,
        topic: SynthTopic,
        prior: _Prior,
        cites: list[Citation],
        langs: list[str],
        doc_id: str,
        number: str,
        kind: str,
        day: date,
    ) -> PatentRecord:
        world = self.world
        render = world.render
        base = {"N0": prior.nouns[0], "A0": prior.adjs[0], "V0": prior.verbs[0]}
        title_tpl = rng.choice(_TITLES)
        title_fill = sampler.fill(title_tpl, {**base, "N1": prior.nouns[1], "N2": prior.nouns[2 % len(prior.nouns)]})
        title = {lang: render(title_tpl, lang, title_fill) for lang in langs}
        first = rng.choice(_ABSTRACT_FIRST)
        abstract = " ".join(
            [
                render(first, "en", sampler.fill(first, base)),
                *self._prose(sampler, _PROSE, rng.randint(2, 4), {}, None),
            ]
        )
        claims = self._claims(rng, sampler, prior, langs)
        description = self._description(rng, sampler, cites, base)
        cpc = self._codes(rng, topic)
        ipc: list[str] = []
        for c in cpc:
            mg = truncate_code(c, "main_group")
            if mg and mg not in ipc:
                ipc.append(mg)
        applied = day - timedelta(days=rng.randint(300, 900))
        priority = [applied - timedelta(days=rng.randint(30, 365))] if rng.random() < 0.6 else []
        companies = world.topic_companies[topic.index]
        applicant_ids = [companies[min(len(companies) - 1, int(rng.random() ** 2 * len(companies)))]]
        if rng.random() < 0.1:
            applicant_ids.append(rng.randrange(len(world.companies)))
        applicant_ids = list(dict.fromkeys(applicant_ids))
        staff = world.inventors[applicant_ids[0]]
        inventors = rng.sample(staff, min(len(staff), rng.randint(1, 4)))
        return PatentRecord(
            id=doc_id,
            country=COUNTRY,
            number=number,
            kind=kind,
            source="synth",
            doc_type="utility",
            publication_date=day,
            application_date=applied,
            priority_dates=priority,
            lang="en",
            title=title,
            abstract={"en": abstract},
            claims=claims,
            description=description,
            ipc=ipc,
            cpc=cpc,
            citations=cites,
            applicants=[world.companies[a] for a in applicant_ids],
            inventors=inventors,
        )


def generate(
    n: int,
    seed: int = 0,
    *,
    langs: Sequence[str] = LANGS,
    multilingual: float = 0.3,
    n_topics: int | None = None,
) -> Iterator[PatentRecord]:
    """Stream ``n`` synthetic records (deterministic for a given seed and parameters)."""
    config = SynthConfig(n=n, seed=seed, langs=tuple(langs), multilingual=multilingual, n_topics=n_topics)
    return iter(SynthGenerator(config))


def write_synthetic(
    path: str | Path,
    config: SynthConfig,
    *,
    scheme_path: str | Path | None = None,
    progress: bool | None = None,
) -> int:
    """Generate ``config.n`` records into a JSONL corpus (``.gz`` compresses) with a progress bar on stderr.

    ``scheme_path`` also writes the synthetic classification in the CPC title-list format.
    ``progress=None`` shows the bar only on a terminal. Returns the number of records written.
    """
    from tqdm import tqdm

    from service.corpus.jsonl import write_corpus

    gen = SynthGenerator(config)
    world = gen.world
    log.info("synthetic world: %d topics, %d concepts, %d applicants", len(world.topics), len(world.lex),
             len(world.companies))  # fmt: skip
    if scheme_path is not None:
        gen.world.write_scheme(scheme_path)
    bar = tqdm(gen, total=config.n, desc="synth", unit="doc", file=sys.stderr,
               disable=None if progress is None else not progress)  # fmt: skip
    return write_corpus(bar, path)


# --------------------------------------------------------------------------------------------------
# Evaluation topics from synthetic data
# --------------------------------------------------------------------------------------------------

CITATION_GRADES = {"X": 2, "Y": 1, "A": 1}
"""Relevance of a cited document by search-report category (see :func:`synth_topics`)."""


def synth_topics(
    records: Iterable[PatentRecord],
    n_topics: int,
    seed: int = 0,
    *,
    langs: Sequence[str] = LANGS,
) -> tuple[list[dict[str, Any]], dict[str, dict[str, int]]]:
    """A prior-art evaluation task from synthetic records (CLEF-IP style).

    A topic is one synthetic patent D: in English its title and abstract; in German or French (only
    trilingual ``B1`` documents) its title and first claim in that language. Relevant are the documents
    D cites that are present in ``records``: category ``X`` (D took over most of its invention)
    grade 2, ``Y`` (part of it) and ``A`` (same-topic background) grade 1. Only documents with at
    least one cited ``X`` document in ``records`` are eligible. D itself is *not* relevant: each topic
    carries ``before`` = D's publication date (cited documents are strictly older), so a searcher
    that applies it never returns D; ``source_id`` names D for searchers that do not.

    Topics are split evenly over ``langs`` (English takes what German/French cannot fill), chosen by
    seeded reservoir sampling in one pass; ``records`` must be in generation order (as written).
    Returns ``(topics, qrels)``: topic dicts with ``qid``, ``text``, ``lang``, ``cpc``, ``ipc``,
    ``before`` (ISO date), ``source_id``; qrels ``qid -> {doc_id: grade}``.
    """
    langs = tuple(dict.fromkeys(langs))
    if n_topics < 1:
        raise ValueError(f"n_topics must be >= 1, got {n_topics}")
    bad = [lang for lang in langs if lang not in LANGS]
    if bad or not langs:
        raise ValueError(f"langs must be among {', '.join(LANGS)}, got {', '.join(langs) or 'none'}")
    rng = random.Random(f"priorart-synth-topics-{seed}")
    quota = {lang: n_topics // len(langs) + (1 if k < n_topics % len(langs) else 0) for k, lang in enumerate(langs)}
    pools: dict[str, list[PatentRecord]] = {lang: [] for lang in langs}
    seen_count = dict.fromkeys(langs, 0)
    reserve = n_topics  # each reservoir may be asked to fill others' shortfall
    seen: set[str] = set()
    for rec in records:
        cited_x = any(c.category == "X" and c.id in seen for c in rec.citations)
        seen.add(rec.id)
        if not cited_x:
            continue
        for lang in langs:
            if lang == "en":
                ok = bool(rec.title.get("en")) and bool(rec.abstract.get("en"))
            else:
                ok = bool(rec.claims.get(lang)) and bool(rec.title.get(lang))
            if not ok:
                continue
            seen_count[lang] += 1
            pool = pools[lang]
            if len(pool) < reserve:
                pool.append(rec)
            else:
                j = rng.randrange(seen_count[lang])
                if j < reserve:
                    pool[j] = rec
    # fill: each language its quota, shortfalls go to the others (English first)
    chosen: dict[str, list[PatentRecord]] = {}
    short = 0
    for lang in langs:
        take = min(quota[lang], len(pools[lang]))
        chosen[lang] = pools[lang][:take]
        short += quota[lang] - take
    for lang in sorted(langs, key=lambda x: x != "en"):
        if short <= 0:
            break
        used = {r.id for r in chosen[lang]}
        extra = [r for r in pools[lang] if r.id not in used][:short]
        chosen[lang].extend(extra)
        short -= len(extra)
    if not any(chosen.values()):
        raise ValueError(
            "no eligible topic: no record cites an earlier record of the input with category X (and, for de/fr "
            "topics, has claims in that language); generate more documents"
        )
    topics: list[dict[str, Any]] = []
    qrels: dict[str, dict[str, int]] = {}
    for lang in langs:
        for rec in sorted(chosen[lang], key=lambda r: r.id):
            if lang == "en":
                text = f"{rec.title['en']}\n{rec.abstract['en']}"
            else:
                first = min(rec.claims[lang], key=lambda c: c.num)
                text = f"{rec.title[lang]}\n{first.text}"
            qid = f"{rec.id}-{lang}"
            topics.append(
                {
                    "qid": qid,
                    "text": text,
                    "lang": lang,
                    "cpc": list(rec.cpc),
                    "ipc": list(rec.ipc),
                    "before": rec.publication_date.isoformat() if rec.publication_date else None,
                    "source_id": rec.id,
                }
            )
            qrels[qid] = {
                c.id: CITATION_GRADES.get(c.category or "", 1) for c in rec.citations if c.id and c.id in seen
            }
    return topics, qrels
