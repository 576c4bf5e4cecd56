"""Word vectors of an index's own terms (training/word_vectors.py): keyed as the passage vocabulary, one language
with too little text left out, and the same vectors on every run (the experiment keeps them and reads them again)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from service.corpus.jsonl import read_corpus
from service.passages import PassageIndex
from training.synth import SynthConfig, write_synthetic
from training.word_vectors import WordVectorSettings, train_word_vectors


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
