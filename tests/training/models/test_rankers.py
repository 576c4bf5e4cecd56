"""Training pairs and split, CNN encoders, rankers (text / meta / joint / stacked)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("gensim")

from service.corpus.jsonl import write_corpus  # noqa: E402
from service.corpus.record import Claim, PatentRecord  # noqa: E402
from training.models.dual import DualConfig  # noqa: E402
from training.models.pairs import (  # noqa: E402
    RankingData,
    doc_info,
    group_key,
    make_split,
    ndcg,
    plan_topics,
    record_topics,
    sample_pairs,
    topic_text,
)
from training.models.rankers import (  # noqa: E402
    CNNEncoder,
    Ranker,
    RankerConfig,
    dev_ndcg,
    dev_scores,
    encode_pool_docs,
    encode_topics,
    fit_stacked,
    hinge_loss,
    train_ranker,
)
from training.models.train import Prepared, TrainConfig, prepare  # noqa: E402


def tiny_config(**ranker: object) -> TrainConfig:
    rcfg = RankerConfig(text_filters=16, meta_filters=8, hidden=32, epochs=3, batch_size=32, patience=3)
    for k, v in ranker.items():
        setattr(rcfg, k, v)
    return TrainConfig(
        word_dim=16,
        code_dim=8,
        w2v_epochs=2,
        w2v_min_count=1,
        w2v_min_tokens=50,
        walks_per_node=10,
        walk_length=20,
        deepwalk_epochs=5,
        max_graph_nodes=2000,
        threads=1,
        progress=False,
        dev_negatives=10,
        ranker=rcfg,
        dual=DualConfig(epochs=2, thresholds_grid=[(0.0, 0.5)]),
    )


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Prepared:
    from training.synth import generate

    torch.set_num_threads(1)
    path = tmp_path_factory.mktemp("rankers") / "corpus.jsonl"
    write_corpus(generate(60, seed=3), path)
    return prepare(path, tiny_config())


# ---------------------------------------------------------------------------------------- split


def _rec(doc_id: str, *, tri: bool = False, codes: tuple[str, ...] = ("H01F27/14",)) -> PatentRecord:
    claims = {"en": [Claim(num=1, text="a coil wound on a core")]}
    if tri:
        claims["de"] = [Claim(num=1, text="eine Spule auf einem Kern")]
        claims["fr"] = [Claim(num=1, text="une bobine sur un noyau")]
    return PatentRecord(
        id=doc_id,
        country=doc_id[:2],
        number=doc_id[2:-2],
        kind=doc_id[-2:],
        source="test",
        title={"en": "Coil"},
        abstract={"en": "A coil on a core."},
        claims=claims,
        ipc=list(codes),
    )


def test_split_is_fixed_and_keeps_applications_together() -> None:
    docs = [_rec(f"US{n:08d}B1") for n in range(300)] + [_rec(f"US{n:08d}A1") for n in range(300)]
    a = make_split(doc_info(r) for r in docs)
    b = make_split(doc_info(r) for r in reversed(docs))
    assert a.part == b.part
    for n in range(300):  # the A1 and the B1 of one application share a part
        assert a.part[f"US{n:08d}A1"] == a.part[f"US{n:08d}B1"]
    share = {p: len(a.ids(p)) / len(docs) for p in ("train", "dev", "test")}
    assert 0.7 < share["train"] < 0.9 and 0.04 < share["dev"] < 0.16 and 0.04 < share["test"] < 0.16
    # adding documents never moves the old ones
    c = make_split(doc_info(r) for r in [*docs, *(_rec(f"EP{n:07d}B1") for n in range(50))])
    assert all(c.part[i] == p for i, p in a.part.items())


def test_trilingual_grants_are_split_50_20_30(tmp_path: Path) -> None:
    docs = [_rec(f"EP{n:07d}B1", tri=True) for n in range(10)] + [_rec(f"US{n:08d}B1") for n in range(40)]
    split = make_split(doc_info(r) for r in docs)
    assert split.trilingual == {r.id for r in docs[:10]}
    tri = split.summary()["trilingual"]
    assert tri == {"train": 5, "dev": 2, "test": 3}
    split.save(tmp_path / "split.json")
    again = type(split).load(tmp_path / "split.json")
    assert again.part == split.part and again.trilingual == split.trilingual
    with pytest.raises(ValueError, match="sum"):
        make_split([], ratios=(0.5, 0.5, 0.5))


def test_topics_of_a_record() -> None:
    rec = _rec("EP0000001B1", tri=True)
    rec.title.update({"de": "Spule", "fr": "Bobine"})
    qids = {t.qid for t in record_topics(rec)}
    assert qids == {
        "EP0000001B1:ta.en",
        "EP0000001B1:ta.de",
        "EP0000001B1:ta.fr",
        "EP0000001B1:claims.de",
        "EP0000001B1:claims.fr",
        "EP0000001B1:claim1.de",
        "EP0000001B1:claim1.fr",
    }
    assert topic_text(rec, "en") == "Coil\nA coil on a core."
    assert group_key(rec) == "EP0000001"


def test_training_data_respects_the_split(prepared: Prepared) -> None:
    data, split = prepared.data, prepared.split
    assert data.train and data.dev
    assert {"de", "fr"} & set(data.languages), "synthetic EP grants give cross-lingual topics"
    for t in data.train:
        assert split.part[t.source] == "train"
        for d, rel in t.judged.items():
            assert split.part[data.pool.ids[d]] == "train" and rel in (1, 2)
        assert any(data.pool.ids[d] == t.source and r == 2 for d, r in t.judged.items()) or t.lang != "en"
    for t in data.dev:
        assert split.part[t.source] == "dev"
    test_ids = set(split.ids("test"))
    assert not test_ids & set(data.pool.ids), "test documents are never used in training"
    assert all(data.pool.is_train[d] or split.part[data.pool.ids[d]] == "dev" for d in range(len(data.pool)))


def test_topic_cap_keeps_every_language() -> None:
    from training.synth import generate

    infos = [doc_info(r) for r in generate(60, seed=3)]
    split = make_split(infos)
    plan = plan_topics(infos, split, max_train_topics=9, max_dev_topics=3)
    assert [t.lang for t in plan.train].count("en") == 3
    assert sorted(t.lang for t in plan.train) == ["de"] * 3 + ["en"] * 3 + ["fr"] * 3
    assert len(plan.dev) == 3 and all(split.part[t.source] == "dev" for t in plan.dev)
    assert set(plan.pool) >= {d for t in plan.train for d in t.judged}


def test_sampled_pairs_order_relevance(prepared: Prepared) -> None:
    data = prepared.data
    pairs = sample_pairs(data, np.random.default_rng(0), negatives=4)
    assert len(pairs) > 0
    for t, better, worse in pairs[:500]:
        topic = data.train[int(t)]
        assert topic.judged.get(int(better), 0) > topic.judged.get(int(worse), 0)
        assert data.pool.is_train[int(worse)]


def test_ndcg() -> None:
    assert ndcg(np.array([3.0, 2.0, 1.0]), np.array([2, 1, 0])) == pytest.approx(1.0)
    # relevant doc ranked second of two: 1/log2(3)
    assert ndcg(np.array([1.0, 2.0]), np.array([1, 0])) == pytest.approx(1 / np.log2(3))
    assert ndcg(np.array([1.0, 2.0]), np.array([0, 0])) == 0.0


# ---------------------------------------------------------------------------------------- encoders


def test_cnn_encoder_is_the_papers_formula() -> None:
    rng = np.random.default_rng(0)
    vecs = rng.normal(size=(20, 5)).astype(np.float32)
    vecs[:2] = 0
    enc = CNNEncoder(vecs, filters=3, window=4)
    ids = np.array([4, 7, 9, 2, 11, 5], dtype=np.int64)
    with torch.no_grad():
        got = enc(torch.from_numpy(ids)[None], torch.tensor([6]))[0].numpy()
        w = enc.conv.weight.numpy()  # [m, k, h]
        assert enc.conv.bias is not None
        b = enc.conv.bias.numpy()
    x = vecs[ids]  # [n, k]
    p = [np.tanh(np.einsum("mkh,hk->m", w, x[i : i + 4]) + b) for i in range(len(ids) - 3)]
    assert np.allclose(got, np.mean(p, axis=0), atol=1e-6)


def test_cnn_encoder_ignores_padding_and_handles_short_input() -> None:
    rng = np.random.default_rng(1)
    enc = CNNEncoder(rng.normal(size=(30, 6)).astype(np.float32), filters=4, window=4)
    ids = torch.tensor([[5, 6, 7, 8, 9, 0, 0]])
    garbage = torch.tensor([[5, 6, 7, 8, 9, 21, 22]])  # beyond the length: must not matter
    with torch.no_grad():
        a = enc(ids, torch.tensor([5]))
        b = enc(garbage, torch.tensor([5]))
        c = enc(ids[:, :5], torch.tensor([5]))
        short = enc(torch.tensor([[5, 6]]), torch.tensor([2]))
        empty = enc(torch.tensor([[0]]), torch.tensor([0]))
    assert torch.allclose(a, b) and torch.allclose(a, c)
    assert torch.isfinite(short).all()
    assert enc.conv.bias is not None
    assert torch.allclose(empty[0], torch.tanh(enc.conv.bias))  # no term: one all-zero window


def test_meta_encoder_is_order_free() -> None:
    rng = np.random.default_rng(2)
    enc = CNNEncoder(rng.normal(size=(12, 4)).astype(np.float32), filters=3, window=1)
    with torch.no_grad():
        a = enc(torch.tensor([[3, 4, 5]]), torch.tensor([3]))
        b = enc(torch.tensor([[5, 3, 4]]), torch.tensor([3]))
    assert torch.allclose(a, b, atol=1e-6)


def test_hinge_loss() -> None:
    better = torch.tensor([0.9, 0.2, -0.5])
    worse = torch.tensor([-0.9, 0.1, 0.5])
    # max(0, 1 - 1.8) = 0, max(0, 1 - 0.1) = 0.9, max(0, 1 + 1) = 2
    assert float(hinge_loss(better, worse)) == pytest.approx((0 + 0.9 + 2) / 3)


def test_ranker_kinds_use_their_parts() -> None:
    rng = np.random.default_rng(3)
    words = {"en": rng.normal(size=(10, 4)).astype(np.float32), "de": rng.normal(size=(10, 4)).astype(np.float32)}
    codes = rng.normal(size=(6, 3)).astype(np.float32)
    cfg = RankerConfig(text_filters=5, meta_filters=2, hidden=7)
    text = Ranker("text", words, None, cfg, query_langs=["en", "de"])
    assert text.mlp.hidden.in_features == 4 * 5 and text.query_text["en"] is text.doc_text
    assert text.query_text["de"] is not text.doc_text
    assert Ranker("meta", words, codes, cfg).mlp.hidden.in_features == 4 * 2
    paper = RankerConfig(text_filters=5, meta_filters=2, hidden=7, interactions=False)
    assert Ranker("joint", words, codes, paper).mlp.hidden.in_features == 2 * 5 + 2 * 2
    with pytest.raises(ValueError, match="kind"):
        Ranker("bm25", words, codes, cfg)
    with pytest.raises(ValueError, match="code vectors"):
        Ranker("meta", words, None, cfg)


# ---------------------------------------------------------------------------------------- training


def _pair_accuracy(model: Ranker, data: RankingData) -> float:
    """Fraction of fixed training pairs (English topics) ordered right by the model."""
    pairs = sample_pairs(data, np.random.default_rng(99))
    pairs = pairs[[data.train[int(t)].lang == "en" for t in pairs[:, 0]]]
    model.eval()
    with torch.no_grad():
        topics = np.unique(pairs[:, 0])
        q = encode_topics(model, [data.train[int(t)] for t in topics], torch.device("cpu"))
        docs = np.unique(pairs[:, 1:])
        d = encode_pool_docs(model, data, docs, torch.device("cpu"))
        ti = torch.as_tensor(np.searchsorted(topics, pairs[:, 0]))
        from training.models.rankers import _take

        qs = _take(q, ti)
        sb = model.score(qs, _take(d, torch.as_tensor(np.searchsorted(docs, pairs[:, 1]))))
        sw = model.score(qs, _take(d, torch.as_tensor(np.searchsorted(docs, pairs[:, 2]))))
    return float((sb > sw).float().mean())


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["text", "meta", "joint"])
def test_training_learns_the_pair_order(prepared: Prepared, kind: str) -> None:
    wv = {lang: e.vectors for lang, e in prepared.words.items()}
    cfg = tiny_config(epochs=4, patience=4).ranker
    torch.manual_seed(cfg.seed)
    untrained = Ranker(kind, wv, prepared.codes.vectors, cfg, query_langs=prepared.data.languages)
    before = _pair_accuracy(untrained, prepared.data)
    result = train_ranker(kind, prepared.data, wv, prepared.codes.vectors, cfg, progress=False)
    after = _pair_accuracy(result.model, prepared.data)
    assert after > max(before, 0.6), (kind, before, after)
    assert len(result.history) >= 1 and result.best_epoch >= 1
    assert result.history[-1]["train_loss"] < result.history[0]["train_loss"] or result.best_epoch == 1
    # early stopping kept the best epoch: the model's dev NDCG is the recorded best
    again = dev_ndcg(dev_scores(result.model, prepared.data, torch.device("cpu")), prepared.data)
    assert again["ndcg"] == pytest.approx(result.best_dev["ndcg"], abs=1e-6)


def test_stacked_weight_is_fit_on_dev(prepared: Prepared) -> None:
    data = prepared.data
    rels = data.dev_rels
    noise = [np.random.default_rng(i).random(len(r)) for i, r in enumerate(rels)]
    oracle = [r + 0.01 * n for r, n in zip(rels, noise, strict=True)]
    w_text, w_meta, best = fit_stacked(noise, oracle, data)
    assert w_meta > 0.5 and w_text + w_meta == pytest.approx(1.0)
    assert best == pytest.approx(dev_ndcg(oracle, data)["ndcg"], abs=1e-9)
    w_text, w_meta, _ = fit_stacked(oracle, noise, data)
    assert w_text > 0.5


@pytest.mark.slow
def test_training_is_deterministic(prepared: Prepared) -> None:
    wv = {lang: e.vectors for lang, e in prepared.words.items()}
    cfg = tiny_config(epochs=2).ranker
    a = train_ranker("joint", prepared.data, wv, prepared.codes.vectors, cfg, progress=False)
    b = train_ranker("joint", prepared.data, wv, prepared.codes.vectors, cfg, progress=False)
    assert a.history == b.history
    sa, sb = a.model.state_dict(), b.model.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
