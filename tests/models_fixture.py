"""A tiny trained models folder and an index built with it, shared by the neural-stage tests (once per session).

Synthetic corpus (60 records), small dimensions, one epoch: seconds to train on CPU. The folder is cached
per test process (``functools.cache``) and removed at exit.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from functools import cache
from pathlib import Path


@cache
def tiny_root() -> Path:
    root = Path(tempfile.mkdtemp(prefix="priorart-tiny-models-"))
    atexit.register(shutil.rmtree, root, True)
    return root


def tiny_config() -> object:
    from training.models.dual import DualConfig
    from training.models.rankers import RankerConfig
    from training.models.train import TrainConfig

    return TrainConfig(
        word_dim=12, code_dim=6, w2v_epochs=1, w2v_min_count=1, w2v_min_tokens=50, walks_per_node=2, walk_length=10,
        max_graph_nodes=300, threads=1, progress=False, dev_negatives=8, device="cpu", max_train_topics=300,
        w2v_max_tokens=200_000, max_pool_docs=600,
        ranker=RankerConfig(text_filters=8, meta_filters=4, hidden=16, epochs=1),
        dual=DualConfig(epochs=1, thresholds_grid=[(0.0, 0.5)]),
    )


def train_tiny(corpus: Path, out: Path, scheme: Path | None = None) -> Path:
    """Tiny models on ``corpus`` (DeepWalk over ``scheme``, or the corpus codes' syntactic tree)."""
    import torch

    import training.models.train as train_mod

    torch.set_num_threads(1)
    saved = train_mod.default_cpc_path
    train_mod.default_cpc_path = lambda: None  # no 260k-entry CPC list unless given
    try:
        train_mod.train_models(corpus, out, cpc=scheme, config=tiny_config())  # type: ignore[arg-type]
    finally:
        train_mod.default_cpc_path = saved
    return out


@cache
def tiny_models() -> tuple[Path, Path]:
    """``(corpus.jsonl, models dir)`` trained on 60 synthetic records."""
    from service.corpus.jsonl import write_corpus
    from training.synth import generate

    root = tiny_root()
    corpus = root / "corpus.jsonl"
    write_corpus(generate(60, seed=11), corpus)
    return corpus, train_tiny(corpus, root / "models")


@cache
def tiny_index() -> Path:
    """An index of the tiny corpus built with ``--models`` (flat FAISS, fusion not learned)."""
    from training.build import build_index

    corpus, models = tiny_models()
    out = tiny_root() / "index"
    build_index(corpus, out, models_dir=models, fuse=False, progress=False, device="cpu")
    return out
