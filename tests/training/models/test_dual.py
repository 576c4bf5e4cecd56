"""Dual encoder: smooth cosine similarity, smooth ordinal search loss, training and document vectors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("gensim")

from service.corpus.jsonl import write_corpus  # noqa: E402
from service.retrieval.encoders import pad_batch  # noqa: E402
from training.models.dual import (  # noqa: E402
    DualConfig,
    DualEncoder,
    MeanEncoder,
    encode_documents,
    smooth_cosine,
    sosl_loss,
    train_dual,
)
from training.models.pairs import sample_pointwise  # noqa: E402
from training.models.rankers import RankerConfig  # noqa: E402
from training.models.train import Prepared, TrainConfig, prepare  # noqa: E402


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Prepared:
    from training.synth import generate

    torch.set_num_threads(1)
    path: Path = tmp_path_factory.mktemp("dual") / "corpus.jsonl"
    write_corpus(generate(60, seed=5), path)
    cfg = TrainConfig(
        word_dim=16,
        code_dim=8,
        w2v_epochs=3,
        w2v_min_count=1,
        w2v_min_tokens=50,
        walks_per_node=2,
        walk_length=10,
        max_graph_nodes=500,
        threads=1,
        progress=False,
        dev_negatives=10,
        ranker=RankerConfig(),
    )
    return prepare(path, cfg)


def test_smooth_cosine_formula() -> None:
    u = torch.tensor([[3.0, 4.0], [1.0, 0.0]])
    v = torch.tensor([[0.0, 2.0], [-2.0, 0.0]])
    got = smooth_cosine(u, v, 0.5)
    assert torch.allclose(got, torch.tensor([8.0 / (5.5 * 2.5), -2.0 / (1.5 * 2.5)]))
    big = torch.randn(50, 8) * 100
    assert (smooth_cosine(big, big, 1.0) < 1).all() and (smooth_cosine(big, -big, 1.0) > -1).all()
    with pytest.raises(ValueError):
        smooth_cosine(u, v, 0.0)


def test_smooth_cosine_gradient_stays_bounded_near_the_origin() -> None:
    v = torch.tensor([[1.0, 1.0]])
    u = torch.tensor([[1e-7, -2e-7]], requires_grad=True)
    smooth_cosine(u, v, 0.5).sum().backward()
    assert u.grad is not None and torch.isfinite(u.grad).all() and float(u.grad.norm()) < 10
    w = torch.tensor([[1e-7, -2e-7]], requires_grad=True)
    ((w * v).sum(-1) / (w.norm(dim=-1) * v.norm(dim=-1))).sum().backward()  # plain cosine explodes
    assert w.grad is not None and float(w.grad.norm()) > 1e5


def test_sosl_loss() -> None:
    th = (0.0, 0.5)
    s = torch.tensor([0.3, 0.2, -0.4, 0.7, 0.25, -0.2])
    y = torch.tensor([2, 0, 0, 2, 1, 1])
    # class 2 needs s > 0.5: (0.5-0.3)^2; class 0 needs s <= 0: 0.2^2; inside the right segment: 0
    # class 1 needs 0 < s <= 0.5: 0.25 is inside, -0.2 is 0.2 below
    expected = (0.2**2 + 0.2**2 + 0 + 0 + 0 + 0.2**2) / 6
    assert float(sosl_loss(s, y, th)) == pytest.approx(expected, abs=1e-7)
    assert float(sosl_loss(torch.tensor([0.9, -0.9]), torch.tensor([2, 0]), th)) == 0.0
    with pytest.raises(ValueError, match="increasing"):
        sosl_loss(s, y, (0.5, 0.0))
    with pytest.raises(ValueError, match="inside"):
        sosl_loss(s, y, (0.0, 1.0))
    with pytest.raises(ValueError, match="labels"):
        sosl_loss(s, torch.tensor([3, 0, 0, 0, 0, 0]), th)


def test_mean_encoder_and_scaled_vectors() -> None:
    rng = np.random.default_rng(0)
    emb = torch.nn.Embedding.from_pretrained(torch.from_numpy(rng.normal(size=(9, 4)).astype(np.float32)))
    enc = MeanEncoder(emb)
    with torch.no_grad():
        got = enc(torch.tensor([[3, 5, 0, 0]]), torch.tensor([2]))
        empty = enc(torch.tensor([[0]]), torch.tensor([0]))
    assert torch.allclose(got[0], torch.tanh((emb.weight[3] + emb.weight[5]) / 2))
    assert torch.allclose(empty, torch.zeros_like(empty))
    words = {"en": rng.normal(size=(20, 6)).astype(np.float32), "fr": rng.normal(size=(15, 6)).astype(np.float32)}
    model = DualEncoder(words, ["en", "fr"], smooth_l=0.7)
    ids, lengths = pad_batch([np.array([3, 4, 5]), np.array([7])])
    with torch.no_grad():
        q = model.encode_query("fr", torch.from_numpy(ids), torch.from_numpy(lengths))
        d = model.encode_doc(torch.from_numpy(ids), torch.from_numpy(lengths))
        inner = (model.scale(q) * model.scale(d)).sum(-1)
    assert torch.allclose(inner, smooth_cosine(q, d, 0.7), atol=1e-6)  # FAISS inner product == SCS
    docs = encode_documents(model, [np.array([3, 4, 5]), np.array([7])])
    assert docs.dtype == np.float32 and np.allclose(docs, model.scale(d).numpy(), atol=1e-6)
    with pytest.raises(ValueError, match="query encoder"):
        model.encode_query("de", torch.from_numpy(ids), torch.from_numpy(lengths))


def _mean_scs_by_class(model: DualEncoder, prepared: Prepared) -> dict[int, float]:
    data = prepared.data
    rows = sample_pointwise(data, np.random.default_rng(42))
    rows = rows[[data.train[int(t)].lang == "en" for t in rows[:, 0]]]
    with torch.no_grad():
        qi, ql = pad_batch([data.train[int(t)].terms for t in rows[:, 0]])
        di, dl = pad_batch([data.pool.terms[int(d)] for d in rows[:, 1]])
        s = model.similarity(
            model.encode_query("en", torch.from_numpy(qi), torch.from_numpy(ql)),
            model.encode_doc(torch.from_numpy(di), torch.from_numpy(dl)),
        ).numpy()
    return {int(c): float(s[rows[:, 2] == c].mean()) for c in np.unique(rows[:, 2])}


def test_training_separates_relevance_classes(prepared: Prepared) -> None:
    wv = {lang: e.vectors for lang, e in prepared.words.items()}
    cfg = DualConfig(epochs=4, grid_epochs=2, patience=4, thresholds_grid=[(0.0, 0.4), (0.2, 0.6)], seed=1)
    torch.manual_seed(1)
    before = _mean_scs_by_class(DualEncoder(wv, prepared.data.languages), prepared)
    result = train_dual(prepared.data, wv, cfg, progress=False)
    after = _mean_scs_by_class(result.model, prepared)
    assert [g["thresholds"] for g in result.grid] == [[0.0, 0.4], [0.2, 0.6]]
    assert list(result.thresholds) in ([0.0, 0.4], [0.2, 0.6])
    assert after[2] - after[0] > max(before[2] - before[0], 0.0) + 0.05, (before, after)
    assert after[2] > after[0]
    assert result.history and result.best_dev["ndcg"] == max(h["ndcg"] for h in result.history)
