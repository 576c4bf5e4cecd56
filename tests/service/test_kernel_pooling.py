"""Kernel pooling over word vectors (service/kernel_pooling.py, issue 33 item 4): exact matches count by density,
similar words by their vectors' cosine, a query meets a document in the language of its image only, a segmented
passage index gives the plain one's features, and word vectors keep their keys and unit length on disk."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from service.corpus.record import PatentRecord
from service.kernel_pooling import KERNEL_FEATURES, KernelPooling
from service.passages import PassageIndex
from service.passages.lm import QueryImage
from service.passages.segments import SegmentedPassageIndex
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
    segmented = KernelPooling(SegmentedPassageIndex(parts), pooling.vectors)
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
