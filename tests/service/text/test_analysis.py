import pytest

from service.text.analysis import Analyzer, detect_language, tokenize


def test_tokenizer_keeps_patent_tokens() -> None:
    toks = tokenize("The SO2 scrubber (4) of class H01F 27/14 and B05B 7/ 00 holds 1.5 mm")
    for expected in ("so2", "(4)", "h01f27/14", "b05b7/00", "1.5"):
        assert expected in toks


def test_english_stemming_and_stopwords() -> None:
    terms = Analyzer("en")("The cartridges according to claim 1, wherein the rollers are rotating")
    assert "cartridg" in terms and "roller" in terms and "rotat" in terms
    assert "the" not in terms and "wherein" not in terms and "claim" not in terms


def test_german_and_french_accents_are_folded_after_stemming() -> None:
    de = Analyzer("de")
    assert de("Gerät") == de("GERÄT") == ["gerat"]
    assert Analyzer("fr")("électrique") == Analyzer("fr")("electrique")


def test_unsupported_language_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="choose one of en, de, fr"):
        Analyzer("ja")


@pytest.mark.parametrize(
    ("text", "lang"),
    [
        ("Vorrichtung zum Reinigen eines Filters, die eine Pumpe und einen Behälter aufweist", "de"),
        ("Dispositif de nettoyage d'un filtre comprenant une pompe et un réservoir pour le liquide", "fr"),
        ("A device for cleaning a filter comprising a pump and a tank for the liquid", "en"),
    ],
)
def test_detect_language(text: str, lang: str) -> None:
    assert detect_language(text) == lang
