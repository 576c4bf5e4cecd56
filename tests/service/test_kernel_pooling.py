"""Kernel pooling over word vectors (service/kernel_pooling.py, issue 33 item 4): exact matches count by density,
similar words by their vectors' cosine, a query meets a document in the language of its image only, a segmented
passage index gives the plain one's features, and word vectors keep their keys and unit length on disk."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from threadpoolctl import threadpool_info

from service.corpus.record import PatentRecord
from service.kernel_pooling import KERNEL_FEATURES, KernelPooling
from service.passages import PassageIndex
from service.passages.lm import QueryImage
from service.passages.segments import PassageGeneration
from service.text.analysis import get_analyzer
from service.text.word_vectors import WordVectors

EXACT, SOFT = KERNEL_FEATURES.index("kernel_exact"), KERNEL_FEATURES.index("kernel_0.9")


def _rec(i: int, lang: str, abstract: str) -> PatentRecord:
    return PatentRecord(id=f"EP{i:07d}B1", country="EP", number=f"{i:07d}", kind="B1", source="synth", lang=lang,
                        title={lang: "device"}, abstract={lang: abstract})


def _term(lang: str, word: str) -> str:
    (term,) = get_analyzer(lang)(word)
    return term


def _image(lang: str, *words: str) -> QueryImage:
    return QueryImage.of_units(lang, [(w, ({_term(lang, w): 1.0}, 1.0)) for w in words])


def _vectors(pairs: dict[str, list[float]]) -> WordVectors:
    return WordVectors(list(pairs), np.array(list(pairs.values())))


FILLER = "frame housing lever spring plate bolt screw rail wheel shaft"
RECORDS = [
    _rec(0, "en", f"battery {FILLER}"),  # the query term once
    _rec(1, "en", f"battery battery {FILLER}"),  # twice
    _rec(2, "en", f"accumulator {FILLER}"),  # a similar word, not the term
    _rec(3, "en", FILLER),  # neither
    _rec(4, "de", "Batterie Gehäuse Feder"),  # German only
]


@pytest.fixture(scope="module")
def pooling() -> KernelPooling:
    en = {f"en\0{_term('en', w)}": v for w, v in
          (("battery", [1.0, 0.0, 0.0]), ("accumulator", [0.9, np.sqrt(1 - 0.81), 0.0]), ("frame", [0.0, 0.0, 1.0]))}
    return KernelPooling(PassageIndex.from_records(RECORDS), _vectors({**en, f"de\0{_term('de', 'Batterie')}":
                                                                          [0.0, 1.0, 0.0]}))


def test_exact_matches_count_by_density_and_similar_words_by_their_vectors(pooling: KernelPooling) -> None:
    phi = pooling.features({"en": _image("en", "battery")}, [0, 1, 2, 3])
    assert phi.shape == (4, len(KERNEL_FEATURES))
    assert phi[1, EXACT] > phi[0, EXACT] > 0.0  # twice the density beats once
    assert phi[2, EXACT] == pytest.approx(0.0, abs=1e-6) and phi[3, EXACT] == pytest.approx(0.0, abs=1e-6)
    assert phi[2, SOFT] > 1.0 > phi[3, SOFT]  # "accumulator" (cosine 0.9) matches softly; filler does not
    assert phi[0, SOFT] < phi[2, SOFT]  # an exact match is not a 0.9 match


def test_a_query_meets_a_document_in_the_language_of_its_image(pooling: KernelPooling) -> None:
    en = pooling.features({"en": _image("en", "battery")}, [4])
    assert not en.any()  # the German document has no English text
    de = pooling.features({"de": _image("de", "Batterie")}, [0, 4])
    assert de[1, EXACT] > 0.0 and not de[0].any()
    both = pooling.features({"en": _image("en", "battery"), "de": _image("de", "Batterie")}, [0, 4])
    np.testing.assert_allclose(both, np.maximum(pooling.features({"en": _image("en", "battery")}, [0, 4]), de))


def test_a_segmented_index_gives_the_plain_indexs_features(pooling: KernelPooling) -> None:
    parts = [PassageIndex.from_records(RECORDS[:2]), PassageIndex.from_records(RECORDS[2:])]
    segmented = KernelPooling(PassageGeneration(parts), pooling.vectors)
    images = {"en": _image("en", "battery", "frame"), "de": _image("de", "Batterie")}
    rows = [4, 0, 2, 1]
    np.testing.assert_allclose(segmented.features(images, rows), pooling.features(images, rows), atol=1e-12)


def test_word_vectors_keep_their_keys_and_unit_length_on_disk(tmp_path: Path) -> None:
    wv = _vectors({"en\0b": [3.0, 4.0], "de\0a": [0.0, 2.0], "en\0a": [1.0, 0.0]})
    wv.save(tmp_path / "wv")
    back = WordVectors.load(tmp_path / "wv")
    assert back.keys == ["de\0a", "en\0a", "en\0b"]  # sorted as the passage vocabulary's keys
    np.testing.assert_allclose(back.vectors[back.rows(["en\0b"])[0]], [0.6, 0.8], rtol=1e-6)
    assert back.rows(["fr\0a"]).tolist() == [-1]


def _numpy_features(pooling: KernelPooling, images: dict[str, QueryImage], rows: list[int]) -> np.ndarray:
    """The kernel features as the numpy arithmetic computed them before the compiled loops (issue 63): dense
    matrices, BLAS products, float32 throughout; the oracle of the compiled ones (the same to float32's precision:
    the sums run in another order)."""
    from service.kernel_pooling import KERNELS, QUERY_TERMS, SCALE
    from service.passages.segments import term_counts
    from service.text.analysis import SUPPORTED_LANGS

    part = pooling.passages
    vec_row, term_lang = pooling._map(part)
    doc_of, ids, counts = term_counts(part, np.asarray(rows, dtype=np.int64))
    best = np.zeros((len(rows), len(KERNELS)))
    for lang, image in images.items():
        sel = term_lang[ids] == SUPPORTED_LANGS.index(lang)
        if not sel.any():
            continue
        d, t, c = doc_of[sel], ids[sel], counts[sel].astype(np.float32)
        terms = sorted(image.probs.items(), key=lambda kv: (-kv[1], kv[0]))[:QUERY_TERMS]
        p = np.array([w for _, w in terms])
        p = p / p.sum()
        q_id = np.array([part.vocab.lookup(lang, term) for term, _ in terms], dtype=np.int64)
        q_row = pooling.vectors.rows([f"{lang}\0{term}" for term, _ in terms])
        uniq, u_of = np.unique(t, return_inverse=True)
        u_row = vec_row[uniq]
        V = pooling.vectors.vectors
        qv = np.where((q_row >= 0)[:, None], V[np.maximum(q_row, 0)], np.float32(0.0))
        uv = np.where((u_row >= 0)[:, None], V[np.maximum(u_row, 0)], np.float32(0.0))
        same = uniq[:, None] == q_id[None, :]
        sim = np.where(same, np.float32(1.0), uv @ qv.T)
        values = [same.astype(np.float32)]
        values += [np.exp(np.square(sim - np.float32(mu)) * np.float32(-0.5 / (sigma * sigma)))
                   for mu, sigma in KERNELS[1:]]
        C = np.zeros((len(rows), len(uniq)), dtype=np.float32)
        C[d, u_of] = c
        soft = (C @ np.concatenate(values, axis=1)).reshape(len(rows), len(KERNELS), len(terms))
        doc_len = C.sum(axis=1)
        dens = np.float32(SCALE) * soft / np.where(doc_len > 0, doc_len, np.float32(1.0))[:, None, None]
        best = np.maximum(best, (np.log1p(dens) @ p.astype(np.float32)).astype(np.float64))
    return best


def test_the_compiled_features_are_the_numpy_arithmetics_they_replaced() -> None:
    """The compiled loops, the terms without a vector sharing a row, give the dense numpy arithmetic's features on
    documents of many words, most with vectors, some repeated, in two languages, to float32's precision; and the
    process's BLAS runs in one thread from then on (its threads stalled a busy server: 80-340 ms a search)."""
    from service.kernel_pooling import warm

    rng = np.random.default_rng(3)
    words = {lang: [f"{stem}{i}" for i in range(300)] for lang, stem in (("en", "widget"), ("de", "gerat"))}
    records = [_rec(i, lang, " ".join(rng.choice(words[lang], size=int(rng.integers(20, 200)))))
               for i, lang in enumerate(["en"] * 25 + ["de"] * 5)]
    keys = {f"{lang}\0{_term(lang, w)}" for lang in words for w in words[lang][:240]}  # a fifth without a vector
    vecs = rng.normal(size=(len(keys), 16))
    pooling = KernelPooling(PassageIndex.from_records(records), _vectors(dict(zip(sorted(keys), vecs.tolist(),
                                                                                  strict=True))))
    warm()
    images = {"en": _image("en", *rng.choice(words["en"], size=30)), "de": _image("de", *words["de"][250:260])}
    rows = [int(r) for r in rng.permutation(30)[:20]]
    got, want = pooling.features(images, rows), _numpy_features(pooling, images, rows)
    assert got.shape == (20, len(KERNEL_FEATURES)) and (want[:, EXACT] > 0).sum() >= 10 and (want[:, SOFT] > 0).all()
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)
    with pytest.MonkeyPatch.context() as mp:  # a vocabulary too large for the thread's term table: np.unique instead
        mp.setattr("service.passages.ranker._QMAP_MAX_TERMS", 0)
        np.testing.assert_allclose(pooling.features(images, rows), got, rtol=1e-6, atol=1e-9)
    blas = [lib for lib in threadpool_info() if lib["user_api"] == "blas" and "numpy" in lib["filepath"]]
    assert blas and all(lib["num_threads"] == 1 for lib in blas), blas  # numpy's: the similarities' product


def test_the_query_terms_are_the_most_probable_ties_in_term_order() -> None:
    """The compared terms are those of a sort of the whole image by (-p, term), cut at QUERY_TERMS: with many ties
    across the cut (only the candidates at least as probable as the cut are sorted)."""
    from service.kernel_pooling import QUERY_TERMS, query_terms

    rng = np.random.default_rng(11)
    for n in (10, QUERY_TERMS, QUERY_TERMS + 1, 300):
        probs = {f"t{int(i):04d}": float(p) for i, p in zip(rng.permutation(n), rng.choice([0.1, 0.2, 0.3], n),
                                                             strict=True)}
        assert query_terms(probs) == sorted(probs.items(), key=lambda kv: (-kv[1], kv[0]))[:QUERY_TERMS]
