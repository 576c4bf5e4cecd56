"""Synthetic documents: generation parameters, the concept sampler and the record generator."""

from __future__ import annotations

import bisect
import random
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

from service.codes import truncate_code
from service.corpus.record import Citation, Claim, PatentRecord, Section
from service.text.analysis import SUPPORTED_LANGS
from training.synth.lexicon import ADJ, NOUN, VERB
from training.synth.render import _en_article
from training.synth.templates import (
    _ABSTRACT_FIRST,
    _BACKGROUND,
    _BACKGROUND_PROSE,
    _CLAIM1,
    _CLOSING,
    _DEPENDENT,
    _FIELD,
    _FIGURE,
    _HEADINGS,
    _METHOD,
    _METHOD_DEPENDENT,
    _ORDINALS,
    _PROSE,
    _SUMMARY_CLAIM,
    _SUMMARY_FIRST,
    _SYSTEM,
    _TITLES,
    _VIEWS,
    _Template,
)
from training.synth.world import MAX_TOPICS, SynthTopic, SynthWorld, _Zipf, default_topics

COUNTRY = "XS"
START = date(1980, 1, 1)
END = date(2024, 12, 31)


@dataclass(frozen=True)
class SynthConfig:
    """Generation parameters (all defaults are sensible for the demo)."""

    n: int
    seed: int = 0
    langs: tuple[str, ...] = SUPPORTED_LANGS  # languages of multilingual documents (English is always present)
    multilingual: float = 0.3  # fraction of documents with titles and claims in all of ``langs``
    n_topics: int | None = None  # main groups; default :func:`default_topics`
    derive_rate: float = 0.75  # chance a document builds on earlier documents of its topic
    start: date = START
    end: date = END

    def __post_init__(self) -> None:
        if self.n < 0:
            raise ValueError(f"n must be >= 0, got {self.n}")
        bad = [lang for lang in self.langs if lang not in SUPPORTED_LANGS]
        if bad or "en" not in self.langs:
            raise ValueError(f"langs must include 'en' and be among {', '.join(SUPPORTED_LANGS)}, "
                             f"got {','.join(self.langs)}")
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
    langs: Sequence[str] = SUPPORTED_LANGS,
    multilingual: float = 0.3,
    n_topics: int | None = None,
) -> Iterator[PatentRecord]:
    """Stream ``n`` synthetic records (deterministic for a given seed and parameters)."""
    config = SynthConfig(n=n, seed=seed, langs=tuple(langs), multilingual=multilingual, n_topics=n_topics)
    return iter(SynthGenerator(config))
