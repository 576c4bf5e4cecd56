import math
import re
import tracemalloc
from collections import Counter
from datetime import date
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from service.classification import ClassificationScheme
from service.corpus.jsonl import read_corpus, write_corpus
from service.corpus.record import PatentRecord
from service.text.analysis import detect_language, tokenize
from training.commands import synth as synth_command
from training.evaluation.trec import Topic
from training.synth import (
    CITATION_GRADES,
    SynthConfig,
    SynthGenerator,
    SynthWorld,
    default_topics,
    generate,
    synth_topics,
)

ID_RE = re.compile(r"^XS\d{8}(A1|B1)$")
SUBGROUP_RE = re.compile(r"^[A-H]\d{2}[A-Z]\d{1,2}/\d{2,3}$")
MAIN_GROUP_RE = re.compile(r"^[A-H]\d{2}[A-Z]\d{1,2}/00$")
REF_PHRASES = {
    "en": ("according to claim ", "according to any one of claims "),
    "de": ("nach Anspruch ", "nach einem der Ansprüche "),
    "fr": ("selon la revendication ", "selon l'une quelconque des revendications "),
}


@pytest.fixture(scope="module")
def corpus() -> list[PatentRecord]:
    return list(generate(600, seed=7))


def test_same_seed_same_bytes_other_seed_differs(tmp_path: Path) -> None:
    a, b, c = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "c.jsonl"
    assert write_corpus(generate(150, seed=11), a) == 150
    write_corpus(generate(150, seed=11), b)
    write_corpus(generate(150, seed=12), c)
    assert a.read_bytes() == b.read_bytes()
    assert a.read_bytes() != c.read_bytes()
    # and the records survive the strict reader
    assert [r.id for r in read_corpus(a)] == [f"XS{i:08d}{r.kind}" for i, r in enumerate(read_corpus(a), 1)]


def test_schema_ids_and_dates(corpus: list[PatentRecord]) -> None:
    assert len(corpus) == 600
    assert len({r.id for r in corpus}) == 600
    prev = date.min
    for r in corpus:
        PatentRecord.model_validate_json(r.model_dump_json(exclude_defaults=True))  # round-trips
        assert ID_RE.match(r.id), r.id
        assert r.id == f"{r.country}{r.number}{r.kind}" and r.source == "synth" and r.lang == "en"
        assert r.title["en"] and r.abstract["en"] and r.claims["en"] and r.description
        assert r.publication_date is not None and r.application_date is not None
        assert date(1980, 1, 1) <= r.publication_date <= date(2024, 12, 31)
        assert r.publication_date.weekday() == 2  # published on Wednesdays
        assert r.publication_date >= prev  # numbers follow publication order
        prev = r.publication_date
        assert r.application_date < r.publication_date
        assert all(p < r.application_date for p in r.priority_dates)
        assert r.applicants and 1 <= len(r.inventors) <= 4
    years = [r.publication_date.year for r in corpus if r.publication_date]
    assert min(years) <= 1981 and max(years) >= 2023


def test_description_tree(corpus: list[PatentRecord]) -> None:
    for r in corpus[:50]:
        headings = [s.heading for s in r.description]
        assert headings == [
            "Technical field",
            "Background",
            "Summary",
            "Brief description of the drawings",
            "Detailed description",
        ]
        detailed = r.description[-1]
        assert 1 <= len(detailed.sections) <= 3
        assert detailed.sections[0].heading == "First embodiment"
        assert all(s.paragraphs for s in detailed.sections)
        paths = [p for p, _ in r.description[-1].walk()]
        assert ("Detailed description", "First embodiment") in paths
        # reference numerals in the detailed description: "the <noun> 10"
        assert re.search(r"\b[a-z]+ 1[02]\b", " ".join(detailed.sections[0].paragraphs))


def test_claims_numbered_with_valid_refs(corpus: list[PatentRecord]) -> None:
    n_multi_ref = 0
    for r in corpus:
        langs = list(r.claims)
        nums = [c.num for c in r.claims["en"]]
        assert nums == list(range(1, len(nums) + 1))
        assert not r.claims["en"][0].refs  # claim 1 is independent
        for lang in langs:
            claims = r.claims[lang]
            # claims of all languages are aligned claim by claim
            assert [(c.num, c.refs) for c in claims] == [(c.num, c.refs) for c in r.claims["en"]]
            for c in claims:
                assert all(1 <= ref < c.num for ref in c.refs), (r.id, c)
                assert c.refs == sorted(set(c.refs))
                if c.refs:
                    single, many = REF_PHRASES[lang]
                    if len(c.refs) > 2:
                        assert f"{many}{c.refs[0]} " in c.text, c.text
                        n_multi_ref += 1
                    else:
                        assert f"{single}{c.refs[0]}" in c.text, c.text
                else:
                    assert not any(p in c.text for p in REF_PHRASES[lang])
    assert n_multi_ref > 0


def test_language_fractions(corpus: list[PatentRecord]) -> None:
    multi = [r for r in corpus if "de" in r.claims]
    share = len(multi) / len(corpus)
    assert abs(share - 0.3) < 0.07, share  # 0.3 is the default; binomial sd ~0.019 at n=600
    for r in corpus:
        is_multi = "de" in r.claims
        assert r.kind == ("B1" if is_multi else "A1")
        assert set(r.claims) == ({"en", "de", "fr"} if is_multi else {"en"})
        assert set(r.title) == set(r.claims) and set(r.abstract) == {"en"}
    sample = multi[:10]
    for r in sample:
        for lang in ("en", "de", "fr"):
            assert detect_language(r.claims_text(lang)) == lang
    assert any("ä" in r.claims_text("de") or "ü" in r.claims_text("de") for r in multi)
    assert all(r.title["de"] != r.title["en"] for r in sample)


def test_language_options() -> None:
    none = list(generate(60, seed=1, multilingual=0.0))
    assert all(set(r.claims) == {"en"} for r in none)
    everything = list(generate(60, seed=1, langs=("en", "de"), multilingual=1.0))
    assert all(set(r.claims) == {"en", "de"} for r in everything)
    with pytest.raises(ValueError, match="langs must include 'en'"):
        list(generate(5, langs=("de", "fr")))
    with pytest.raises(ValueError, match="multilingual"):
        SynthConfig(n=5, multilingual=1.5)
    with pytest.raises(ValueError, match="n must be"):
        SynthConfig(n=-1)


def test_codes_and_scheme(corpus: list[PatentRecord]) -> None:
    world = SynthWorld(default_topics(600), seed=7)
    scheme = ClassificationScheme.from_lines(world.scheme_lines())
    assert {scheme.level_of(c) for c in scheme} == {"section", "class", "subclass", "main_group", "subgroup"}
    assert sorted(c for c in scheme if scheme.level_of(c) == "section") == list("ABCDEFGH")
    assert len([c for c in scheme if scheme.level_of(c) == "main_group"]) == len(world.topics)
    first_topic = Counter()
    for r in corpus:
        assert 1 <= len(r.cpc) <= 4
        for code in r.cpc:
            assert SUBGROUP_RE.match(code) or MAIN_GROUP_RE.match(code), code
            assert code in scheme, code
        assert r.ipc == list(dict.fromkeys(c.split("/")[0] + "/00" for c in r.cpc))
        assert all(scheme.level_of(c) == "main_group" for c in r.ipc)
        first_topic[r.ipc[0]] += 1
    # the generator's world is the same one the scheme came from: its topics' codes dominate
    assert all(scheme.title(c) for c in first_topic)
    # topics are Zipf-popular: the commonest main group is much more frequent than the median
    counts = sorted(first_topic.values(), reverse=True)
    assert counts[0] >= 3 * counts[len(counts) // 2]


def test_write_scheme_roundtrip(tmp_path: Path) -> None:
    world = SynthWorld(30, seed=2)
    path = tmp_path / "scheme.tsv.gz"
    assert world.write_scheme(path) == len(world.entries)
    scheme = ClassificationScheme.load(path)
    topic = world.topics[0]
    assert scheme.truncate(topic.subgroups[0], "main_group") == topic.main_group
    assert scheme.ancestors(topic.main_group)[-1] == topic.main_group[0]


def test_citations_point_to_earlier_same_topic_docs(corpus: list[PatentRecord]) -> None:
    by_id = {r.id: r for r in corpus}
    n_cited = 0
    for r in corpus:
        for c in r.citations:
            assert c.id is not None and c.category in CITATION_GRADES
            cited = by_id[c.id]  # a real id of this corpus
            assert cited.publication_date is not None and r.publication_date is not None
            assert cited.publication_date < r.publication_date
            if c.category in ("X", "Y"):
                assert cited.ipc[0] == r.ipc[0]  # same topic (main group)
            n_cited += 1
    assert n_cited > len(corpus) // 2


def test_x_citations_share_more_vocabulary_than_same_topic_docs(corpus: list[PatentRecord]) -> None:
    """An X citation is closer (tf-idf cosine over abstract + claims) to the citing document than other
    documents of the same topic are: the X document lent it most of its invention."""
    tfs = {r.id: Counter(tokenize(r.text("en", ("abstract", "claims")))) for r in corpus}
    df = Counter(t for tf in tfs.values() for t in tf)
    idf = {t: math.log(len(corpus) / n) for t, n in df.items()}
    vecs = {}
    for doc_id, tf in tfs.items():
        vec = {t: n * idf[t] for t, n in tf.items()}
        norm = math.sqrt(sum(v * v for v in vec.values())) or 1.0
        vecs[doc_id] = {t: v / norm for t, v in vec.items()}

    def overlap(a: str, b: str) -> float:
        va, vb = vecs[a], vecs[b]
        return sum(v * vb.get(t, 0.0) for t, v in va.items())

    by_topic: dict[str, list[str]] = {}
    for r in corpus:
        by_topic.setdefault(r.ipc[0], []).append(r.id)
    x_overlap, other_overlap = [], []
    for r in corpus[300:]:
        x = [c.id for c in r.citations if c.category == "X" and c.id]
        cited = {c.id for c in r.citations}
        others = [o for o in by_topic[r.ipc[0]] if o != r.id and o not in cited][:5]
        if not x or not others:
            continue
        x_overlap.append(overlap(r.id, x[0]))
        other_overlap.append(sum(overlap(r.id, o) for o in others) / len(others))
    assert len(x_overlap) > 30
    mean_x, mean_other = sum(x_overlap) / len(x_overlap), sum(other_overlap) / len(other_overlap)
    assert mean_x > 1.3 * mean_other, (mean_x, mean_other)


def test_zipf_slope(corpus: list[PatentRecord]) -> None:
    counts = Counter()
    for r in corpus[:200]:
        counts.update(tokenize(r.text("en")))
    freqs = sorted(counts.values(), reverse=True)
    assert len(freqs) > 2000
    xs = [math.log(r) for r in range(10, 1001)]
    ys = [math.log(freqs[r - 1]) for r in range(10, 1001)]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)
    assert -1.6 < slope < -0.9, slope  # Zipf-like (about -1.3 measured); flat text would be near 0


def _memory_growth(n: int, first_mark: int) -> float:
    """Traced bytes held by a running generator between doc ``first_mark`` and doc ``n`` (records dropped)."""
    tracemalloc.start()
    try:
        marks = {}
        for i, _ in enumerate(SynthGenerator(SynthConfig(n=n, seed=3, n_topics=8)), 1):
            if i in (first_mark, n):
                marks[i] = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    return marks[n] - marks[first_mark]


@pytest.mark.slow
def test_streaming_memory_is_bounded_small() -> None:
    # 8 topics x 24 remembered earlier documents fill up within ~600 docs; after that nothing may accumulate
    # (measured: under 1 kB). Retaining the records would cost ~7 kB each, about 5 MB here.
    assert _memory_growth(1500, 700) < 200_000


def test_synth_topics(corpus: list[PatentRecord]) -> None:
    topics, qrels = synth_topics(corpus, 30, seed=4)
    assert (topics, qrels) == synth_topics(corpus, 30, seed=4)
    assert [t["qid"] for t in topics] != [t["qid"] for t in synth_topics(corpus, 30, seed=5)[0]]
    assert len(topics) == 30
    assert Counter(t["lang"] for t in topics) == {"en": 10, "de": 10, "fr": 10}
    by_id = {r.id: r for r in corpus}
    for t in topics:
        Topic.model_validate(t)  # the evaluation module accepts them
        src = by_id[t["source_id"]]
        rel = qrels[t["qid"]]
        assert rel and max(rel.values()) == 2
        assert src.id not in rel
        assert t["before"] == src.publication_date.isoformat()
        for doc_id in rel:
            cited = by_id[doc_id].publication_date
            assert cited is not None and cited.isoformat() < t["before"]
        assert t["text"].startswith(src.title[t["lang"]])
        assert detect_language(t["text"]) == t["lang"]
        assert t["cpc"] == src.cpc
    with pytest.raises(ValueError, match="n_topics"):
        synth_topics(corpus, 0)
    with pytest.raises(ValueError, match="category X"):
        synth_topics(corpus[:1], 5)


def test_cli(tmp_path: Path) -> None:
    app = typer.Typer()
    synth_command.register(app)

    @app.command("noop")
    def _noop() -> None:  # a second command keeps typer in multi-command mode
        pass

    runner = CliRunner()
    out = tmp_path / "corpus.jsonl.gz"
    scheme = tmp_path / "scheme.tsv"
    result = runner.invoke(
        app, ["synth", "-n", "40", "-o", str(out), "--seed", "5", "--langs", "en,fr", "--scheme", str(scheme)]
    )
    assert result.exit_code == 0, result.output
    assert "wrote 40 records" in result.output
    records = list(read_corpus(out))
    assert len(records) == 40 and all(set(r.claims) <= {"en", "fr"} for r in records)
    assert [r.id for r in records] == [r.id for r in generate(40, seed=5, langs=("en", "fr"))]
    assert len(ClassificationScheme.load(scheme)) > 8
    bad = runner.invoke(app, ["synth", "-n", "5", "-o", str(tmp_path / "x.jsonl"), "--langs", "de"])
    assert bad.exit_code == 2
    assert "langs must include 'en'" in bad.output
