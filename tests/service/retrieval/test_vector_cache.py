"""The document vector cache (service/retrieval/vector_cache.py): the vectors it gives are the encoder's, bit for bit;
a changed text is encoded again; off means no file; a cache that cannot be written costs only the encoding."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from service.corpus.record import Claim, PatentRecord
from service.retrieval import vector_cache
from service.retrieval.vector_cache import ENV, VectorCache

pytest.importorskip("tokenizers", reason="tokenizers (the pretrained encoder's tokenizer) is not installed")


def _record(i: int, title: str, lang: str = "en") -> PatentRecord:
    return PatentRecord(id=f"EP{i:07d}A1", country="EP", number=f"{i:07d}", kind="A1", source="jsonl", lang=lang,
                        title={lang: title}, abstract={lang: f"{title}, as described, number {i}."},
                        claims={lang: [Claim(num=1, text=f"A device comprising a {title.lower()}.")]})


@pytest.fixture(scope="module")
def encoder() -> Any:
    from service.retrieval.pretrained import load_pretrained
    from training.models.e5 import e5_models

    return load_pretrained(e5_models())


RECORDS = [_record(1, "Transformer tank with an expansion vessel"), _record(2, "Dichtung für einen Kessel", "de"),
           _record(3, "Joint d'étanchéité pour cuve", "fr"), _record(4, "Transformer tank with an expansion vessel")]


def test_cached_vectors_are_the_encoders_and_a_changed_text_is_encoded_again(
        encoder: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "off")
    plain = encoder.encode_documents(RECORDS)
    monkeypatch.setenv(ENV, str(tmp_path / "v.sqlite"))
    first = encoder.encode_documents(RECORDS)  # (all encoded, and kept)
    cache = vector_cache.vector_cache(encoder.graph_id, encoder.dim)
    assert cache is not None and cache.misses == 4 and cache.hits == 0
    assert np.array_equal(first, plain)

    def refuse(*_a: Any, **_k: Any) -> Any:
        raise AssertionError("the encoder ran for a cached text")

    monkeypatch.setattr(encoder, "encode", refuse)
    again = encoder.encode_documents(RECORDS)
    assert np.array_equal(again, plain) and cache.hits == 4
    monkeypatch.undo()
    monkeypatch.setenv(ENV, str(tmp_path / "v.sqlite"))
    changed = [*RECORDS[:3], _record(4, "Transformer tank with a conservator")]
    ran: list[int] = []
    real = encoder.encode

    def counting(texts: Any, *a: Any, **k: Any) -> Any:
        ran.append(len(texts))
        return real(texts, *a, **k)

    monkeypatch.setattr(encoder, "encode", counting)
    got = encoder.encode_documents(changed)
    assert ran == [1]  # only the changed document
    monkeypatch.setenv(ENV, "off")
    assert np.array_equal(got, encoder.encode_documents(changed))
    assert not np.array_equal(got[3], plain[3])


def test_off_writes_nothing_and_an_unusable_file_only_costs_the_encoding(
        encoder: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("PRIORART_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv(ENV, "off")
    plain = encoder.encode_documents(RECORDS[:2])
    assert vector_cache.cache_path() is None and not (tmp_path / "cache").exists()
    monkeypatch.delenv(ENV)
    assert vector_cache.cache_path() == tmp_path / "cache" / "vectors.sqlite"  # the default: the machine's cache
    (tmp_path / "blocked").write_text("a file where the cache's folder should be")
    monkeypatch.setenv(ENV, str(tmp_path / "blocked" / "v.sqlite"))
    with caplog.at_level(logging.WARNING, logger="service.retrieval.vector_cache"):
        got = encoder.encode_documents(RECORDS[:2])
    assert np.array_equal(got, plain)
    assert "cannot be used" in caplog.text


def test_a_file_of_another_process_is_read(tmp_path: Path) -> None:
    """Two caches on one file (two processes, two workers): what one kept the other reads; the graph separates."""
    a, b = VectorCache(tmp_path / "v.sqlite", "g1", 3), VectorCache(tmp_path / "v.sqlite", "g1", 3)
    other = VectorCache(tmp_path / "v.sqlite", "g2", 3)
    keys = [b"k1", b"k2"]
    out = a.vectors(keys, lambda rows: np.array([[1, 2, 3], [4, 5, 6]], dtype=np.float32)[rows])
    assert b.vectors(keys, lambda rows: pytest.fail("encoded again")).tolist() == out.tolist()
    assert other.vectors(keys[:1], lambda rows: np.zeros((len(rows), 3), dtype=np.float32)).tolist() == [[0, 0, 0]]
