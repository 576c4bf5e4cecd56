"""The synthetic world: a CPC-shaped classification (one topic per main group), vocabularies, applicants."""

from __future__ import annotations

import bisect
import math
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from service.text.analysis import SUPPORTED_LANGS
from training.synth.lexicon import _en_gerund, _Lexicon, _w
from training.synth.render import _Renderer

MAX_TOPICS = 2000


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
            lang = rng.choice(SUPPORTED_LANGS)
            while True:
                name = self.lex._root(lang).capitalize()
                full = f"{name} {rng.choice(company_word)} {rng.choice(company_suffix[lang])}"
                if full not in used and len(name) >= 3:
                    used.add(full)
                    break
            self.companies.append(full)
            staff = []
            for _ in range(rng.randint(4, 15)):
                ilang = lang if rng.random() < 0.8 else rng.choice(SUPPORTED_LANGS)
                surname = self.lex._root(ilang).capitalize() + rng.choice(surname_suffix[ilang])
                staff.append(f"{rng.choice(first[ilang])} {surname}")
            self.inventors.append(staff)
        # each topic favours a few applicants
        self.topic_companies = [
            rng.sample(range(n_companies), min(n_companies, rng.randint(2, 6))) for _ in self.topics
        ]

    def pick_topic(self, rng: random.Random) -> int:
        return self._topic_order[bisect.bisect_left(self._topic_cdf, rng.random())]
