"""Sparse word-pair model at query time: hashing, scoring against a brute-force sum, files, fast path."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from service.corpus.record import Claim, PatentRecord
from service.retrieval.wordpair import (
    MIX,
    DocTermStore,
    WordPairFormatError,
    WordPairModel,
    doc_term_hashes,
    doc_terms,
    gather_csr,
    pair_buckets,
    query_term_hashes,
    query_terms,
)


def _rec(doc_id: str, claims: str, title: str = "T") -> PatentRecord:
    return PatentRecord(id=doc_id, country=doc_id[:2], number=doc_id[2:-2], kind=doc_id[-2:], source="test",
                        title={"en": title}, claims={"en": [Claim(num=1, text=claims)]})


RECS = [
    _rec("US00000001B1", "A pump with a rotor and a housing (12)."),
    _rec("US00000002B1", "A valve having a spring, a seat and a housing."),
    _rec("US00000003B1", "An electric motor; a rotor winding; a stator core of SO2-resistant steel."),
    _rec("US00000004B1", "Ornamental design for a shoe."),
]


def test_term_hashes_are_blake2b_of_the_documented_keys() -> None:
    want_q = int.from_bytes(hashlib.blake2b(b"q\x1fde\x1fpump", digest_size=8).digest(), "little")
    want_d = int.from_bytes(hashlib.blake2b(b"d\x1fpump", digest_size=8).digest(), "little")
    assert query_term_hashes(["pump"], "de").tolist() == [want_q]
    assert doc_term_hashes(["pump"]).tolist() == [want_d]
    # the language is part of a query term, and query and document sides differ
    assert query_term_hashes(["pump"], "en")[0] != want_q != want_d


def test_pair_buckets_are_deterministic_multiply_shift_of_the_xor() -> None:
    hq = query_term_hashes(["pump", "rotor", "gehaus"], "de")
    hd = doc_term_hashes(["pump", "rotor", "housing", "valv"])
    b = pair_buckets(hq, hd, 20)
    assert b.shape == (3, 4) and b.dtype == np.int64
    assert b.min() >= 0 and b.max() < 2**20
    assert np.array_equal(b, pair_buckets(hq.copy(), hd.copy(), 20))
    i, j = 2, 3
    by_hand = (((int(hq[i]) ^ int(hd[j])) * int(MIX)) % 2**64) >> (64 - 20)
    assert int(b[i, j]) == by_hand
    assert len(np.unique(b)) == 12  # no collision among these 12 pairs
    with pytest.raises(ValueError, match="bits"):
        pair_buckets(hq, hd, 0)


def test_query_and_document_terms_are_distinct_analysed_terms_within_the_caps() -> None:
    assert query_terms("Pumps and pumps, rotors!", "en") == ["pump", "rotor"]
    assert query_terms("a b c pumps rotors valves", "en", max_terms=2) == ["pump", "rotor"]
    terms, n = doc_terms(RECS[0])
    assert terms == ["pump", "rotor", "hous", "(12)"] and n == 4
    assert doc_terms(RECS[0], max_terms=2)[0] == ["pump", "rotor"]


def _brute_force(w: np.ndarray, text: str, lang: str, rec: PatentRecord, bits: int) -> float:
    total = 0.0
    for qt in query_terms(text, lang):
        for dt in doc_terms(rec)[0]:
            hq, hd = query_term_hashes([qt], lang), doc_term_hashes([dt])
            total += float(w[pair_buckets(hq, hd, bits)[0, 0]])
    return total


def test_scores_equal_the_double_sum_over_term_pairs() -> None:
    rng = np.random.default_rng(0)
    bits = 12  # small, so that pairs collide and the sum must count every pair
    w = np.where(rng.random(2**bits) < 0.3, rng.normal(size=2**bits), 0.0).astype(np.float32)
    model = WordPairModel.from_dense(w, {})
    assert model.bits == bits and model.nnz == np.count_nonzero(w)
    text = "Pumpe mit Rotor und Gehäuse; Motor mit Stator"
    got = model.score(text, "de", RECS)
    want = [_brute_force(model.w, text, "de", r, bits) for r in RECS]
    assert np.allclose(got, want, rtol=1e-5, atol=1e-5)
    # the fast path over a store gives the same for any subset and order of rows
    store = DocTermStore.from_records(RECS)
    rows = np.array([3, 0, 2, 0])
    assert np.allclose(model.score_rows(text, "de", store, rows), np.asarray(want)[rows], rtol=1e-5, atol=1e-5)


def test_empty_query_or_document_scores_zero() -> None:
    model = WordPairModel.from_dense(np.ones(2**10, dtype=np.float32), {})
    assert model.score("the of and", "en", RECS).tolist() == [0.0] * 4
    empty = PatentRecord(id="US00000009B1", country="US", number="00000009", kind="B1", source="test")
    assert model.score("pump", "en", [empty]).tolist() == [0.0]


def test_top_pairs_find_the_planted_pair() -> None:
    bits = 16
    w = np.zeros(2**bits, dtype=np.float32)
    b = pair_buckets(query_term_hashes(["pump"], "de"), doc_term_hashes(["pump"]), bits)[0, 0]
    w[b] = 2.5
    model = WordPairModel.from_dense(w, {})
    pairs = model.top_pairs("Pumpe", "de", RECS[0])
    assert pairs == [("pump", "pump", 2.5)]
    assert model.score("Pumpe", "de", RECS).tolist() == [2.5, 0.0, 0.0, 0.0]


def test_save_and_load_keep_weights_and_settings(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    w = np.zeros(2**14, dtype=np.float32)
    w[rng.choice(2**14, 50, replace=False)] = rng.normal(size=50)
    model = WordPairModel.from_dense(w, {"l1": 1e-3})
    settings = model.save(tmp_path)
    assert settings["nnz"] == 50 and settings["bits"] == 14
    idx = np.load(tmp_path / "wordpair.indices.npy")
    assert idx.dtype == np.int64 and len(idx) == 50 and np.all(np.diff(idx) > 0)
    back = WordPairModel.load(tmp_path)
    assert np.array_equal(back.w, model.w) and back.settings["l1"] == 1e-3
    (tmp_path / "wordpair.json").write_text('{"format": "other", "version": 1}')
    with pytest.raises(WordPairFormatError, match="format"):
        WordPairModel.load(tmp_path)


def test_term_store_round_trip_and_gather(tmp_path: Path) -> None:
    store = DocTermStore.from_records(RECS)
    assert store.vocab == sorted(store.vocab) and len(store) == 4
    assert store.lengths.tolist() == [doc_terms(r)[1] for r in RECS]
    store.save(tmp_path)
    back = DocTermStore.load(tmp_path)
    assert back.vocab == store.vocab and np.array_equal(back.ids, store.ids)
    pos, ids = back.gather(np.array([2, 0]))
    assert [back.vocab[i] for i in ids[pos == 1]] == doc_terms(RECS[0])[0]
    assert back.term_ids(["rotor", "nonexistent", "pump"]).tolist() == [store.vocab.index("rotor"),
                                                                       store.vocab.index("pump")]
    pos, vals = gather_csr(np.array([0, 2, 2, 3]), np.array([7, 8, 9]), np.array([1, 2, 0]))
    assert pos.tolist() == [1, 2, 2] and vals.tolist() == [9, 7, 8]
