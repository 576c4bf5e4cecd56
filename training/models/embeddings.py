"""Pre-trained embeddings: word2vec per language and DeepWalk vectors of classification codes.

- :func:`train_word2vec`: gensim skip-gram/CBOW over analysed index terms of one language (the
  sentences are the output of :class:`service.text.analysis.Analyzer`, one title / abstract / claim /
  description paragraph per sentence). Default 100 dimensions, fixed seed, one worker (gensim is
  only deterministic with one worker).
- :func:`build_code_graph` + :func:`random_walks` + :func:`train_deepwalk`: the CPC hierarchy
  (section -> class -> subclass -> main group -> subgroups by dot level, from
  :class:`service.classification.ClassificationScheme`) plus the corpus' IPC/CPC codes, each code
  missing from the scheme attached to its nearest ancestor that is in it (by shape); uniform random
  walks of length 40 on the undirected tree; skip-gram with negative sampling, 30 dimensions.

  Graph restriction (to stay fast on the 261k-entry CPC list): the graph holds every corpus code,
  all its ancestors, and the whole subtree of every *main group* that holds a corpus code (siblings
  and cousins of the codes, so that walks see the local structure); other parts of the scheme are
  left out. ``max_nodes`` caps the total: subtree nodes are added main group by main group (most
  frequent corpus main groups first) until the cap; corpus codes and ancestors are always kept.

Both return :class:`Embeddings`: a :class:`~service.retrieval.encoders.Vocabulary` (``<pad>`` = 0,
``<unk>`` = 1, zero vectors) aligned with a float32 matrix, saved as ``.json`` + ``.npy``.
"""

from __future__ import annotations

import logging
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from service.classification import ClassificationScheme
from service.codes import normalise_code
from service.retrieval.encoders import PAD, UNK, Vocabulary

if TYPE_CHECKING:
    from gensim.models import Word2Vec

log = logging.getLogger(__name__)


def stable_hash(text: str) -> int:
    """Process-independent string hash for gensim's ``hashfxn`` (Python's ``hash`` is salted per process)."""
    return zlib.crc32(text.encode("utf-8"))


@dataclass
class Embeddings:
    """A vocabulary and its vectors (row ``i`` is the vector of id ``i``; rows 0 and 1 are zero)."""

    vocab: Vocabulary
    vectors: np.ndarray

    def __post_init__(self) -> None:
        if self.vectors.shape[0] != len(self.vocab):
            raise ValueError(f"{self.vectors.shape[0]} vectors for {len(self.vocab)} vocabulary entries")
        self.vectors = np.ascontiguousarray(self.vectors, dtype=np.float32)

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1])

    def vector(self, term: str) -> np.ndarray:
        return self.vectors[self.vocab.index[term]]

    def save(self, vocab_path: str | Path, vectors_path: str | Path) -> None:
        self.vocab.save(vocab_path)
        Path(vectors_path).parent.mkdir(parents=True, exist_ok=True)
        np.save(vectors_path, self.vectors)

    @classmethod
    def load(cls, vocab_path: str | Path, vectors_path: str | Path) -> Embeddings:
        return cls(Vocabulary.load(vocab_path), np.load(vectors_path))


@contextmanager
def _quiet_gensim() -> Iterator[None]:
    """gensim logs every progress tick at INFO; keep only its warnings while we train."""
    logger = logging.getLogger("gensim")
    old = logger.level
    logger.setLevel(max(old, logging.WARNING))
    try:
        yield
    finally:
        logger.setLevel(old)


def _from_gensim(model: Word2Vec, name: str) -> Embeddings:
    keys = list(model.wv.index_to_key)
    vectors = np.zeros((len(keys) + 2, model.wv.vector_size), dtype=np.float32)
    vectors[2:] = model.wv.vectors
    return Embeddings(Vocabulary([PAD, UNK, *keys], name=name), vectors)


class _EpochBar:
    """gensim callback driving a tqdm bar over epochs."""

    def __new__(cls, total: int, desc: str, enabled: bool = True) -> Any:
        from gensim.models.callbacks import CallbackAny2Vec
        from tqdm import tqdm

        class Bar(CallbackAny2Vec):
            def __init__(self) -> None:
                self.bar = tqdm(total=total, desc=desc, unit="epoch", leave=False, disable=not enabled)

            def on_epoch_end(self, model: Any) -> None:
                self.bar.update(1)

            def on_train_end(self, model: Any) -> None:
                self.bar.close()

        return Bar()


def train_word2vec(
    sentences: Iterable[list[str]],
    *,
    lang: str,
    dim: int = 100,
    window: int = 5,
    min_count: int = 2,
    epochs: int = 5,
    sg: bool = True,
    negative: int = 5,
    max_vocab: int | None = 200_000,
    seed: int = 13,
    workers: int = 1,
    progress: bool = True,
) -> Embeddings:
    """word2vec over analysed term sentences of one language (``sentences`` must be re-iterable)."""
    from gensim.models import Word2Vec

    with _quiet_gensim():
        model = Word2Vec(
            vector_size=dim,
            window=window,
            min_count=min_count,
            sg=1 if sg else 0,
            negative=negative,
            seed=seed,
            workers=workers,
            max_final_vocab=max_vocab,
            hashfxn=stable_hash,
        )
        model.build_vocab(sentences)
        if not model.wv.index_to_key:
            raise ValueError(f"word2vec ({lang}): no term occurs {min_count}+ times; not enough {lang} text")
        model.train(
            sentences,
            total_examples=model.corpus_count,
            epochs=epochs,
            callbacks=[_EpochBar(epochs, f"word2vec {lang}", progress)],
        )
    emb = _from_gensim(model, f"words.{lang}")
    log.info("word2vec %s: %d terms x %d dims from %d sentences", lang, len(emb.vocab) - 2, dim, model.corpus_count)
    return emb


class LineSentences:
    """Re-iterable sentences from a text file: one sentence a line, terms separated by spaces."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def __iter__(self) -> Iterator[list[str]]:
        with open(self.path, encoding="utf-8") as fh:
            for line in fh:
                terms = line.split()
                if terms:
                    yield terms


# --------------------------------------------------------------------------------------------------
# DeepWalk over the classification hierarchy
# --------------------------------------------------------------------------------------------------


@dataclass
class CodeGraph:
    """An undirected tree over classification codes (node names are normalised codes)."""

    nodes: list[str]
    edges: list[tuple[int, int]]  # (parent, child) node indices
    corpus_codes: list[str] = field(default_factory=list)
    attached: dict[str, str] = field(default_factory=dict)  # corpus code not in the scheme -> where it was hung

    def __post_init__(self) -> None:
        self.index = {c: i for i, c in enumerate(self.nodes)}

    def parent_of(self, code: str) -> str | None:
        i = self.index[code]
        for p, c in self.edges:
            if c == i:
                return self.nodes[p]
        return None

    def adjacency(self) -> tuple[np.ndarray, np.ndarray]:
        """CSR ``(indptr, indices)`` of the undirected graph."""
        n = len(self.nodes)
        if not self.edges:
            return np.zeros(n + 1, dtype=np.int64), np.zeros(0, dtype=np.int64)
        e = np.asarray(self.edges, dtype=np.int64)
        src = np.concatenate([e[:, 0], e[:, 1]])
        dst = np.concatenate([e[:, 1], e[:, 0]])
        order = np.lexsort((dst, src))
        src, dst = src[order], dst[order]
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.add.at(indptr, src + 1, 1)
        return np.cumsum(indptr), dst


def build_code_graph(
    corpus_codes: Iterable[str],
    scheme: ClassificationScheme | None = None,
    *,
    max_nodes: int = 60_000,
    subtrees: bool = True,
) -> CodeGraph:
    """The DeepWalk graph: corpus codes + ancestors + main-group subtrees of the scheme (see module doc; ``subtrees``
    False: the codes and their ancestors only).

    Without a scheme the tree is purely syntactic (``ClassificationScheme.from_codes``).
    """
    counts: Counter[str] = Counter()
    for raw in corpus_codes:
        code = normalise_code(raw)
        if code is not None:
            counts[code] += 1
    if not counts:
        raise ValueError("no classification codes in the corpus: cannot train code embeddings")
    if scheme is None:
        scheme = ClassificationScheme.from_codes(sorted(counts))
    parent: dict[str, str | None] = {}
    attached: dict[str, str] = {}

    def hang(code: str) -> str | None:
        """Parent of a code in the graph: its scheme parent, or (unknown code) its nearest known ancestor."""
        if code in scheme:
            return scheme.parent(code)
        for anc in scheme.ancestors(code):
            if anc in scheme:
                attached[code] = anc
                return anc
        return None

    for code in sorted(counts):
        node: str | None = code
        while node is not None and node not in parent:
            up = hang(node)
            parent[node] = up
            node = up
    # main-group subtrees, most used main groups first, until the node cap
    mg_counts: Counter[str] = Counter()
    for code, n in counts.items():
        if "/" in code:
            mg = scheme.truncate(code, "main_group")  # the scheme's main group, by shape for unknown codes
            if mg in scheme:
                mg_counts[mg] += n
    for mg, _ in sorted(mg_counts.items(), key=lambda kv: (-kv[1], kv[0])) if subtrees else ():
        stack = [mg]
        sub: list[tuple[str, str]] = []
        while stack:
            node = stack.pop()
            for ch in scheme.children(node):
                sub.append((ch, node))
                stack.append(ch)
        new = [(c, p) for c, p in sub if c not in parent]
        if len(parent) + len(new) > max_nodes:
            log.info("code graph: node cap %d reached; main-group subtrees of rarer codes left out", max_nodes)
            break
        for c, p in new:
            parent[c] = p
    nodes = sorted(parent)
    index = {c: i for i, c in enumerate(nodes)}
    edges = [(index[p], index[c]) for c, p in parent.items() if p is not None and p in index]
    if attached:
        log.info("code graph: %d corpus codes not in the scheme attached to their nearest ancestor", len(attached))
    if len(attached) > 0.5 * len(counts):
        log.warning(
            "%d of %d corpus codes are not in the classification scheme (a synthetic corpus with the real CPC "
            "list?); pass the corpus' own scheme (e.g. `priorart synth --scheme`) for a meaningful code graph",
            len(attached),
            len(counts),
        )
    return CodeGraph(nodes=nodes, edges=edges, corpus_codes=sorted(counts), attached=attached)


def random_walks(
    graph: CodeGraph, *, walks_per_node: int = 5, walk_length: int = 40, seed: int = 13
) -> list[list[str]]:
    """Uniform random walks on the undirected graph, ``walks_per_node`` starting at every node (vectorised)."""
    if walk_length < 1 or walks_per_node < 1:
        raise ValueError("walk_length and walks_per_node must be >= 1")
    indptr, indices = graph.adjacency()
    deg = np.diff(indptr)
    rng = np.random.default_rng(seed)
    n = len(graph.nodes)
    names = graph.nodes
    walks: list[list[str]] = []
    safe = np.maximum(deg, 1)
    for _ in range(walks_per_node):
        cur = rng.permutation(n)
        steps = np.empty((walk_length, n), dtype=np.int64)
        steps[0] = cur
        for t in range(1, walk_length):
            if len(indices):
                pick = indptr[cur] + (rng.random(n) * safe[cur]).astype(np.int64)
                cur = np.where(deg[cur] > 0, indices[np.minimum(pick, len(indices) - 1)], cur)
            steps[t] = cur
        walks.extend([names[i] for i in col] for col in steps.T.tolist())
    return walks


def train_deepwalk(
    graph: CodeGraph,
    *,
    dim: int = 30,
    walk_length: int = 40,
    walks_per_node: int = 5,
    window: int = 5,
    negative: int = 5,
    epochs: int = 2,
    seed: int = 13,
    workers: int = 1,
    progress: bool = True,
) -> Embeddings:
    """DeepWalk: random walks + skip-gram with negative sampling (gensim ``sg=1``, ``negative>0``)."""
    from gensim.models import Word2Vec

    if negative < 1:
        raise ValueError("DeepWalk uses negative sampling: negative must be >= 1")
    walks = random_walks(graph, walks_per_node=walks_per_node, walk_length=walk_length, seed=seed)
    with _quiet_gensim():
        model = Word2Vec(
            vector_size=dim,
            window=window,
            min_count=1,
            sg=1,
            hs=0,
            negative=negative,
            seed=seed,
            workers=workers,
            hashfxn=stable_hash,
        )
        model.build_vocab(walks)
        bar = _EpochBar(epochs, "deepwalk", progress)
        model.train(walks, total_examples=len(walks), epochs=epochs, callbacks=[bar])
    emb = _from_gensim(model, "codes")
    log.info("deepwalk: %d codes x %d dims from %d walks", len(emb.vocab) - 2, dim, len(walks))
    return emb


def _cos(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    na = np.linalg.norm(a, axis=-1)
    nb = np.linalg.norm(b, axis=-1)
    return np.asarray((a * b).sum(-1) / np.maximum(na * nb, 1e-12))


def sibling_report(emb: Embeddings, graph: CodeGraph, *, max_pairs: int = 5000, seed: int = 13) -> dict[str, float]:
    """Mean cosine of sibling codes (same parent) vs random code pairs from different sections.

    DeepWalk should put siblings nearer: ``sibling_mean > unrelated_mean``.
    """
    rng = np.random.default_rng(seed)
    children: dict[int, list[int]] = {}
    for p, c in graph.edges:
        children.setdefault(p, []).append(c)
    sib: list[tuple[int, int]] = []
    for kids in children.values():
        if len(kids) >= 2:
            for i in range(min(len(kids) - 1, 10)):
                sib.append((kids[i], kids[i + 1]))
    if not sib:
        raise ValueError("no sibling codes in the graph")
    pairs = np.asarray(sib, dtype=np.int64)
    if len(pairs) > max_pairs:
        pairs = pairs[rng.choice(len(pairs), max_pairs, replace=False)]
    n = len(graph.nodes)
    a = rng.integers(0, n, size=4 * len(pairs))
    b = rng.integers(0, n, size=4 * len(pairs))
    keep = np.asarray([graph.nodes[i][0] != graph.nodes[j][0] for i, j in zip(a, b, strict=True)], dtype=bool)
    a, b = a[keep][: len(pairs)], b[keep][: len(pairs)]
    if len(a) == 0:  # a single-section graph: fall back to different subclasses
        a = rng.integers(0, n, size=4 * len(pairs))
        b = rng.integers(0, n, size=4 * len(pairs))
        keep = np.asarray([graph.nodes[i][:4] != graph.nodes[j][:4] for i, j in zip(a, b, strict=True)], dtype=bool)
        a, b = a[keep][: len(pairs)], b[keep][: len(pairs)]

    def vecs(idx: Sequence[int] | np.ndarray) -> np.ndarray:
        return np.stack([emb.vector(graph.nodes[i]) for i in idx]) if len(idx) else np.zeros((0, emb.dim))

    sib_cos = _cos(vecs(pairs[:, 0]), vecs(pairs[:, 1]))
    unrel_cos = _cos(vecs(a), vecs(b)) if len(a) else np.zeros(0)
    return {
        "sibling_mean": float(sib_cos.mean()),
        "unrelated_mean": float(unrel_cos.mean()) if len(unrel_cos) else float("nan"),
        "sibling_pairs": float(len(sib_cos)),
        "unrelated_pairs": float(len(unrel_cos)),
    }
