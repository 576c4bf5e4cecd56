"""word2vec per language and DeepWalk over the classification tree."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("gensim")

from service.classification import ClassificationScheme  # noqa: E402
from service.retrieval.encoders import PAD, UNK  # noqa: E402
from training.models.embeddings import (  # noqa: E402
    Embeddings,
    build_code_graph,
    random_walks,
    sibling_report,
    train_deepwalk,
    train_word2vec,
)

SENTENCES = [
    ["coil", "core", "transform", "wind"],
    ["coil", "wind", "insul", "core"],
    ["pump", "valv", "fluid", "pressur"],
    ["valv", "pressur", "pump", "seal"],
] * 30


@pytest.fixture(scope="module")
def cpc_scheme(cpc_titles: Path) -> ClassificationScheme:
    return ClassificationScheme.load(cpc_titles)


def test_word2vec_is_deterministic_and_reserves_pad_unk(tmp_path: Path) -> None:
    a = train_word2vec(SENTENCES, lang="en", dim=8, epochs=2, min_count=1, seed=3, progress=False)
    b = train_word2vec(SENTENCES, lang="en", dim=8, epochs=2, min_count=1, seed=3, progress=False)
    assert a.vocab.terms[:2] == [PAD, UNK]
    assert np.array_equal(a.vectors, b.vectors)
    assert a.vectors.dtype == np.float32 and a.vectors.shape == (len(a.vocab), 8)
    assert not a.vectors[:2].any() and np.abs(a.vectors[2:]).sum(axis=1).min() > 0
    a.save(tmp_path / "v.json", tmp_path / "v.npy")
    c = Embeddings.load(tmp_path / "v.json", tmp_path / "v.npy")
    assert c.vocab.terms == a.vocab.terms and np.array_equal(c.vectors, a.vectors)


def test_word2vec_refuses_empty_text() -> None:
    with pytest.raises(ValueError, match="not enough"):
        train_word2vec([["once"]], lang="de", dim=4, min_count=2, progress=False)


@pytest.mark.realdata
def test_code_graph_reconstructs_the_cpc_tree(cpc_scheme: ClassificationScheme) -> None:
    graph = build_code_graph(["H01F27/14", "G06F17/30", "H01F27/99"], cpc_scheme, max_nodes=5000)
    chain = []
    node: str | None = "H01F27/14"
    while node is not None:
        chain.append(node)
        node = graph.parent_of(node)
    assert chain[-3:] == ["H01F", "H01", "H"]
    assert "H01F27/00" in chain and chain.index("H01F27/00") < chain.index("H01F")
    assert graph.parent_of("H01F27/14") == "H01F27/12"  # dot-level parent, not the syntactic one
    # codes missing from CPC (an old IPC group, an unknown subgroup) hang under their nearest ancestor
    assert graph.parent_of("G06F17/30") == "G06F17/00"
    assert graph.attached == {"G06F17/30": "G06F17/00", "H01F27/99": "H01F27/00"}
    # the main-group subtree is there (siblings of the corpus codes), other main groups are not
    assert "H01F27/16" in graph.index and "H01F1/00" not in graph.index


def test_code_graph_without_scheme_is_syntactic() -> None:
    graph = build_code_graph(["H01F27/14", "H01F27/16", "A61K31/00"])
    assert graph.parent_of("H01F27/14") == "H01F27/00"
    assert graph.parent_of("H01F27/00") == "H01F"
    assert graph.parent_of("A61K") == "A61"
    with pytest.raises(ValueError, match="no classification codes"):
        build_code_graph(["not a code"])


def test_random_walks_follow_edges() -> None:
    graph = build_code_graph(["H01F27/14", "H01F27/16", "A61K31/00"])
    edges = {(graph.nodes[p], graph.nodes[c]) for p, c in graph.edges}
    edges |= {(b, a) for a, b in edges}
    walks = random_walks(graph, walks_per_node=2, walk_length=10, seed=1)
    assert len(walks) == 2 * len(graph.nodes) and all(len(w) == 10 for w in walks)
    for w in walks:
        assert all((a, b) in edges for a, b in zip(w, w[1:], strict=False))
    assert walks == random_walks(graph, walks_per_node=2, walk_length=10, seed=1)


@pytest.mark.realdata
def test_deepwalk_puts_siblings_nearer_than_unrelated_codes(cpc_scheme: ClassificationScheme) -> None:
    codes = ["H01F27/14", "A01B1/02", "C07D307/12", "G06F17/30", "B60K6/20", "F16K1/00"]
    graph = build_code_graph(codes, cpc_scheme, max_nodes=2500)
    emb = train_deepwalk(graph, dim=16, walks_per_node=4, walk_length=40, epochs=1, seed=5, progress=False)
    assert emb.vocab.terms[:2] == [PAD, UNK] and emb.dim == 16
    assert set(graph.nodes) <= set(emb.vocab.terms)
    report = sibling_report(emb, graph, seed=5)
    print(
        f"\nDeepWalk on {len(graph.nodes)} CPC nodes: mean cosine siblings {report['sibling_mean']:.3f} "
        f"({report['sibling_pairs']:.0f} pairs) vs codes of different sections {report['unrelated_mean']:.3f} "
        f"({report['unrelated_pairs']:.0f} pairs)"
    )
    assert report["sibling_mean"] > report["unrelated_mean"] + 0.2


def test_deepwalk_needs_negative_sampling() -> None:
    graph = build_code_graph(["H01F27/14"])
    with pytest.raises(ValueError, match="negative"):
        train_deepwalk(graph, negative=0, progress=False)
