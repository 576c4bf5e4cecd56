"""Word vectors of an index's own terms (training/word_vectors.py): keyed as the passage vocabulary, one language
with too little text left out, and the same vectors on every run (the experiment keeps them and reads them again)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from service.corpus.jsonl import read_corpus
from service.passages import PassageIndex
from training.synth import SynthConfig, write_synthetic
from training.word_vectors import NoWordVectors, TooLittleText, WordVectorSettings, train_word_vectors


def test_word_vectors_are_keyed_as_the_passage_vocabulary_and_deterministic(tmp_path: Path) -> None:
    write_synthetic(tmp_path / "all.jsonl", SynthConfig(n=120, seed=3), progress=False)
    passages = PassageIndex.from_records(list(read_corpus(tmp_path / "all.jsonl")))
    tokens = dict(zip(("en", "de", "fr"), passages.lang_tokens.tolist(), strict=True))
    cut = sorted(tokens.values())[1] + 1  # the two languages with least text are left out
    s = WordVectorSettings(dim=16, epochs=2, min_count=2, min_tokens=cut)
    wv = train_word_vectors(passages, s=s, progress=False)
    vocab = {passages.vocab.text(i) for i in range(len(passages.vocab))}
    assert wv.keys and set(wv.keys) <= vocab
    kept = max(tokens, key=lambda lang: tokens[lang])
    assert {k.split("\0", 1)[0] for k in wv.keys} == {kept}
    np.testing.assert_allclose(np.linalg.norm(wv.vectors, axis=1), 1.0, rtol=1e-5)
    again = train_word_vectors(passages, s=s, progress=False)
    assert again.keys == wv.keys and np.array_equal(again.vectors, wv.vectors)


def test_no_word2vec_installed_and_too_little_text_are_both_no_word_vectors(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The one exception the build and install-ranker catch (they then install no vectors, and say why)."""
    import training.word_vectors as wv_module

    write_synthetic(tmp_path / "all.jsonl", SynthConfig(n=60, seed=3), progress=False)
    passages = PassageIndex.from_records(list(read_corpus(tmp_path / "all.jsonl")))
    with pytest.raises(TooLittleText):
        train_word_vectors(passages, s=WordVectorSettings(min_tokens=10**9), progress=False)
    assert issubclass(TooLittleText, NoWordVectors)

    def missing(*args: object, **kwargs: object) -> None:
        raise ImportError("No module named 'gensim'")

    monkeypatch.setattr(wv_module, "train_word2vec", missing)
    with pytest.raises(NoWordVectors, match="gensim.*the training extra installs it") as got:
        train_word_vectors(passages, s=WordVectorSettings(min_tokens=10), progress=False)
    assert not isinstance(got.value, TooLittleText)
