"""The trilingual lexicon of concepts: real core words and pseudo-words (en, de, fr forms).

A concept has an English, German and French surface form with plausible morphology: German nouns
capitalised with a gender and a plural, French gender and agreement, verb participles. A core of real
technical words (:data:`_REAL_NOUNS` ...) heads the background vocabulary; the rest are pseudo-words
built from syllables: cognates (one root, language-specific spelling and suffix) or unrelated words.
"""

from __future__ import annotations

import random
import re
from typing import Any

from service.text.analysis import SUPPORTED_LANGS, stopwords

NOUN, ADJ, VERB = 0, 1, 2

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
        self.forms: dict[str, list[tuple[str, ...]]] = {lang: [] for lang in SUPPORTED_LANGS}
        self._used: dict[str, set[str]] = {lang: set() for lang in SUPPORTED_LANGS}
        self._stop = {lang: stopwords(lang) for lang in SUPPORTED_LANGS}

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
