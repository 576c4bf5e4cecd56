"""One home per value: each vocabulary of the service is defined once; the API schema's ``Literal`` types are built
from the domain's definitions (or the domain's tuples from the schema's), so the two cannot drift apart."""

from __future__ import annotations

from typing import get_args

from service import schema
from service.text.analysis import LANG_NAMES, STEMMERS, SUPPORTED_LANGS, Language


def test_the_languages_are_defined_once() -> None:
    assert SUPPORTED_LANGS == get_args(Language) == ("en", "de", "fr")
    assert get_args(schema.Lang) == ("auto", *SUPPORTED_LANGS)
    assert set(LANG_NAMES) == set(STEMMERS) == set(SUPPORTED_LANGS)
