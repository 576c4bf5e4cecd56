"""``priorart train``: corpus -> models folder (word2vec, DeepWalk, rankers, dual encoder, ONNX, vectors).

:func:`train_models` streams the corpus three times and keeps memory bounded by the caps of
:class:`TrainConfig` (topics, pool documents, word2vec tokens, code-graph nodes):

1. metadata of every record (split keys, codes, topic ids) and analysed sentences for word2vec,
   written to temporary files (test publications are skipped when word2vec reads them);
2. after word2vec and DeepWalk: the planned topics and pool documents as id sequences;
3. after training: the dual encoder's vectors of *every* document (``dense/doc_vectors.npy``).

The folder layout and the ONNX signatures are documented in :mod:`service.retrieval.encoders`;
``meta.json`` records the settings, versions, device, data split summary, per-part times, dev
metrics and a sha256 of every file.
"""

from __future__ import annotations

import json
import logging
import platform
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from service.codes import record_codes
from service.corpus.jsonl import read_corpus
from service.retrieval.encoders import (
    CODES_MAX,
    DOC_MAX_TERMS,
    MODELS_FORMAT,
    MODELS_VERSION,
    QUERY_MAX_TERMS,
    CodeVocabulary,
    ModelsLayout,
    document_ids,
    sha256_file,
)
from service.settings import DEVICES
from service.text.analysis import SUPPORTED_LANGS, get_analyzer
from training.code_classifier import default_cpc_path
from training.models.dual import DualConfig
from training.models.embeddings import CodeGraph, Embeddings
from training.models.pairs import RankingData, Split, doc_info, encode_data, make_split, ndcg, plan_topics
from training.models.rankers import RankerConfig

log = logging.getLogger(__name__)

OWNED_FILES = (ModelsLayout.META, ModelsLayout.SPLIT)


@dataclass
class TrainConfig:
    """Everything that shapes the models folder (recorded in ``meta.json``)."""

    seed: int = 13
    epochs: int | None = None  # overrides ranker.epochs and dual.epochs when set
    device: str = "auto"  # auto | cpu | cuda
    threads: int = 1  # torch CPU threads; on shared cores 1 is fastest (2 threads: ~4x slower, measured)
    progress: bool = True
    # word2vec
    word_dim: int = 100
    w2v_window: int = 5
    w2v_min_count: int = 2
    w2v_epochs: int = 5
    w2v_workers: int = 1
    w2v_max_tokens: int = 5_000_000  # per language
    w2v_min_tokens: int = 1_000  # a language with less text gets no query encoder
    # DeepWalk
    code_dim: int = 30
    walk_length: int = 40
    walks_per_node: int = 3
    deepwalk_window: int = 5
    deepwalk_epochs: int = 1
    max_graph_nodes: int = 20_000
    # topics and pairs
    max_train_topics: int = 5_000
    max_dev_topics: int = 300
    max_rel1: int = 5
    max_pool_docs: int = 20_000
    dev_negatives: int = 20
    query_max_terms: int = QUERY_MAX_TERMS
    doc_max_terms: int = DOC_MAX_TERMS
    codes_max: int = CODES_MAX
    # models
    ranker: RankerConfig = field(default_factory=RankerConfig)
    dual: DualConfig = field(default_factory=DualConfig)

    def __post_init__(self) -> None:
        if self.device not in DEVICES:
            raise ValueError(f"device must be one of {', '.join(DEVICES)}, got {self.device!r}")
        if self.epochs is not None:
            if self.epochs < 1:
                raise ValueError("epochs must be >= 1")
            self.ranker.epochs = self.epochs
            self.dual.epochs = self.epochs
        self.ranker.seed = self.seed
        self.dual.seed = self.seed

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class TrainOutput:
    """What :func:`train_models` returns: ``meta.json``'s content and the trained torch models."""

    out_dir: Path
    meta: dict[str, Any]
    models: dict[str, Any]
    data: RankingData
    split: Split


def resolve_device(requested: str) -> str:
    """``cuda`` when asked for or (``auto``) available; otherwise ``cpu`` (logged once)."""
    import torch

    if requested == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError("--device cuda asked for, but torch sees no CUDA device; use --device auto or cpu")
        return "cuda"
    if requested == "auto" and torch.cuda.is_available():
        log.info("training on CUDA (%s)", torch.cuda.get_device_name(0))
        return "cuda"
    log.info("training on CPU%s", " (no CUDA device)" if requested == "auto" else "")
    return "cpu"


def _prepare_out_dir(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise FileExistsError(f"{out} exists and is not a directory")
    if out.is_dir() and any(out.iterdir()):
        meta = out / ModelsLayout.META
        if not meta.exists():
            raise FileExistsError(f"{out} is not empty and is not a models folder (no meta.json); choose another -o")
        try:
            fmt = json.loads(meta.read_text(encoding="utf-8")).get("format")
        except (json.JSONDecodeError, AttributeError):
            fmt = None
        if fmt != MODELS_FORMAT:
            raise FileExistsError(
                f"{out} holds another kind of folder (meta.json format {fmt!r}, not {MODELS_FORMAT!r}); "
                "choose another -o (e.g. INDEX_DIR/models)"
            )
    out.mkdir(parents=True, exist_ok=True)
    for name in ModelsLayout.TRAINED:
        if (out / name).is_dir():
            shutil.rmtree(out / name)
    for name in OWNED_FILES:
        (out / name).unlink(missing_ok=True)


class _SplitSentences:
    """Re-iterable word2vec sentences of one language from a ``<record index>\\t<terms>`` file, test records skipped."""

    def __init__(self, path: Path, keep: np.ndarray) -> None:
        self.path = path
        self.keep = keep

    def __iter__(self) -> Iterator[list[str]]:
        with open(self.path, encoding="utf-8") as fh:
            for line in fh:
                idx, _, text = line.partition("\t")
                if self.keep[int(idx)]:
                    terms = text.split()
                    if terms:
                        yield terms


def _record_sentences(record: Any) -> Iterator[tuple[str, str]]:
    """``(lang, text)`` units for word2vec: titles, abstracts, claims, description paragraphs."""
    for lang, text in record.title.items():
        yield lang, text
    for lang, text in record.abstract.items():
        yield lang, text
    for lang, claims in record.claims.items():
        for c in claims:
            yield lang, c.text
    if record.description:
        lang = record.lang or "en"
        for section in record.description:
            for _, node in section.walk():
                if node.heading:
                    yield lang, node.heading
                for para in node.paragraphs:
                    yield lang, para


def _files_manifest(out: Path) -> dict[str, dict[str, Any]]:
    files: dict[str, dict[str, Any]] = {}
    for path in sorted(out.rglob("*")):
        if path.is_file() and path.name != ModelsLayout.META:
            rel = path.relative_to(out).as_posix()
            files[rel] = {"sha256": sha256_file(path), "size": path.stat().st_size}
    return files


def _versions() -> dict[str, str]:
    import gensim
    import onnx
    import torch

    out = {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "torch": torch.__version__,
        "gensim": gensim.__version__,
        "onnx": onnx.__version__,
    }
    try:
        import onnxruntime

        out["onnxruntime"] = onnxruntime.__version__
    except ImportError:  # pragma: no cover - onnxruntime is a service dependency
        pass
    from service import __version__

    out["priorart"] = __version__
    return out


def _baselines(data: RankingData, seed: int) -> dict[str, float]:
    """Reference dev NDCG: random order, and term-overlap cosine for English topics (same vocabulary)."""
    rng = np.random.default_rng(seed)
    rand = [np.mean([ndcg(rng.random(len(r)), r) for _ in range(20)]) for r in data.dev_rels]
    overlap: list[float] = []
    for t, cands, rels in zip(data.dev, data.dev_candidates, data.dev_rels, strict=True):
        if t.lang != "en":
            continue
        q = Counter(t.terms.tolist())
        qn = np.sqrt(sum(v * v for v in q.values()))
        scores = []
        for c in cands:
            d = Counter(data.pool.terms[int(c)].tolist())
            dn = np.sqrt(sum(v * v for v in d.values()))
            scores.append(sum(q[k] * d.get(k, 0) for k in q) / max(qn * dn, 1e-9))
        overlap.append(ndcg(np.asarray(scores), rels))
    return {
        "random_ndcg": float(np.mean(rand)) if rand else float("nan"),
        "term_overlap_ndcg_en": float(np.mean(overlap)) if overlap else float("nan"),
    }


class _Timer:
    """Wall-clock and CPU seconds per part (CPU time shows the work when other jobs share the cores)."""

    def __init__(self) -> None:
        self.wall: dict[str, float] = {}
        self.cpu: dict[str, float] = {}

    @contextmanager
    def part(self, name: str) -> Iterator[None]:
        w, c = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            self.wall[name] = self.wall.get(name, 0.0) + time.perf_counter() - w
            self.cpu[name] = self.cpu.get(name, 0.0) + time.process_time() - c


@dataclass
class Prepared:
    """Everything before model training: split, embeddings, code graph and the encoded topics/pool."""

    corpus: Path
    n_records: int
    split: Split
    words: dict[str, Embeddings]
    codes: Embeddings
    code_vocab: CodeVocabulary
    graph: CodeGraph
    siblings: dict[str, float]
    data: RankingData
    word2vec: dict[str, Any]
    cpc_path: Path | None
    timer: _Timer


def prepare(corpus: str | Path, config: TrainConfig | None = None, *, cpc: str | Path | None = None) -> Prepared:
    """Passes 1 and 2 over the corpus, word2vec and DeepWalk (see the module docstring)."""
    from tqdm import tqdm

    from service.classification import ClassificationScheme
    from training.models.embeddings import build_code_graph, sibling_report, train_deepwalk, train_word2vec

    cfg = config or TrainConfig()
    corpus = Path(corpus)
    if not corpus.is_file():
        raise FileNotFoundError(f"corpus not found: {corpus}")
    timer = _Timer()
    with tempfile.TemporaryDirectory(prefix="priorart-train-") as tmp:
        # ---- pass 1: metadata + word2vec sentences ----------------------------------------------
        with timer.part("read_corpus"):
            infos = []
            code_counts: Counter[str] = Counter()
            tokens = dict.fromkeys(SUPPORTED_LANGS, 0)
            sent_paths = {lang: Path(tmp) / f"sentences.{lang}.txt" for lang in SUPPORTED_LANGS}
            handles = {lang: open(p, "w", encoding="utf-8") for lang, p in sent_paths.items()}  # noqa: SIM115
            try:
                bar = tqdm(read_corpus(corpus), desc="reading corpus", unit="doc", disable=not cfg.progress)
                for n, rec in enumerate(bar):
                    infos.append(doc_info(rec))
                    code_counts.update(record_codes(rec))
                    for lang, text in _record_sentences(rec):
                        if lang not in handles or tokens[lang] >= cfg.w2v_max_tokens:
                            continue
                        terms = get_analyzer(lang)(text)
                        if terms:
                            tokens[lang] += len(terms)
                            handles[lang].write(f"{n}\t{' '.join(terms)}\n")
            finally:
                for fh in handles.values():
                    fh.close()
            if not infos:
                raise ValueError(f"{corpus}: no records")
            dupes = [i for i, c in Counter(d.id for d in infos).items() if c > 1]
            if dupes:
                raise ValueError(f"{corpus}: duplicate publication ids, e.g. {dupes[0]} (deduplicate the corpus)")
            if not code_counts:
                raise ValueError(f"{corpus}: no IPC/CPC codes in any record; the meta models need codes")
            split = make_split(infos)
            keep = np.asarray([split.part[d.id] != "test" for d in infos], dtype=bool)
        log.info("%d records; split %s", len(infos), split.summary())

        # ---- word2vec ---------------------------------------------------------------------------
        with timer.part("word2vec"):
            words: dict[str, Embeddings] = {}
            w2v_info: dict[str, Any] = {}
            for lang in SUPPORTED_LANGS:
                sents = _SplitSentences(sent_paths[lang], keep)
                n_tok = sum(len(x) for x in sents)
                w2v_info[lang] = {"tokens": n_tok}
                if n_tok < cfg.w2v_min_tokens:
                    if lang == "en":
                        raise ValueError(f"only {n_tok} English training terms: the document side needs English text")
                    log.warning(
                        "word2vec %s: %d terms < %d, no %s query encoders", lang, n_tok, cfg.w2v_min_tokens, lang
                    )
                    continue
                emb = train_word2vec(
                    sents,
                    lang=lang,
                    dim=cfg.word_dim,
                    window=cfg.w2v_window,
                    min_count=cfg.w2v_min_count,
                    epochs=cfg.w2v_epochs,
                    seed=cfg.seed,
                    workers=cfg.w2v_workers,
                    progress=cfg.progress,
                )
                words[lang] = emb
                w2v_info[lang]["vocabulary"] = len(emb.vocab)

    # ---- DeepWalk -------------------------------------------------------------------------------
    with timer.part("deepwalk"):
        cpc_path = Path(cpc) if cpc is not None else default_cpc_path()
        scheme = None
        if cpc_path is not None:
            scheme = ClassificationScheme.load(cpc_path)
        else:
            log.warning("no CPC title list: DeepWalk runs on the syntactic tree of the corpus codes only")
        graph = build_code_graph(code_counts.elements(), scheme, max_nodes=cfg.max_graph_nodes)
        codes_emb = train_deepwalk(
            graph,
            dim=cfg.code_dim,
            walk_length=cfg.walk_length,
            walks_per_node=cfg.walks_per_node,
            window=cfg.deepwalk_window,
            epochs=cfg.deepwalk_epochs,
            seed=cfg.seed,
            workers=cfg.w2v_workers,
            progress=cfg.progress,
        )
        code_vocab = CodeVocabulary(codes_emb.vocab.terms, name="codes")
        siblings = sibling_report(codes_emb, graph, seed=cfg.seed)
    log.info(
        "deepwalk: %d nodes; mean cosine of siblings %.3f vs unrelated codes %.3f",
        len(graph.nodes),
        siblings["sibling_mean"],
        siblings["unrelated_mean"],
    )

    # ---- pass 2: topics and pool ----------------------------------------------------------------
    with timer.part("pairs"):
        vocabs = {lang: e.vocab for lang, e in words.items()}
        plan = plan_topics(
            infos,
            split,
            max_train_topics=cfg.max_train_topics,
            max_dev_topics=cfg.max_dev_topics,
            max_rel1=cfg.max_rel1,
            max_pool_docs=cfg.max_pool_docs,
            languages=list(words),
            seed=cfg.seed,
        )
        needed = plan.sources() | set(plan.pool)
        data = encode_data(
            (r for r in read_corpus(corpus) if r.id in needed),
            plan,
            vocabs,
            code_vocab,
            dev_negatives=cfg.dev_negatives,
            query_max_terms=cfg.query_max_terms,
            doc_max_terms=cfg.doc_max_terms,
            codes_max=cfg.codes_max,
            seed=cfg.seed,
        )
        if not data.train:
            raise ValueError("no usable training topics (records need a title/abstract and English claims)")
    log.info("training data: %s", data.summary())
    return Prepared(
        corpus, len(infos), split, words, codes_emb, code_vocab, graph, siblings, data, w2v_info, cpc_path, timer
    )


def train_models(
    corpus: str | Path,
    out_dir: str | Path,
    *,
    cpc: str | Path | None = None,
    config: TrainConfig | None = None,
) -> TrainOutput:
    """Train everything on ``corpus`` (JSONL) and write the models folder ``out_dir`` (see module doc)."""
    import torch
    from tqdm import tqdm

    from training.models.dual import encode_documents, train_dual
    from training.models.export import export_dual, export_ranker
    from training.models.rankers import dev_scores, fit_stacked, train_ranker

    cfg = config or TrainConfig()
    out = Path(out_dir)
    if not Path(corpus).is_file():
        raise FileNotFoundError(f"corpus not found: {corpus}")
    _prepare_out_dir(out)
    device = resolve_device(cfg.device)
    torch.set_num_threads(max(1, cfg.threads))
    torch.manual_seed(cfg.seed)
    t_all = time.perf_counter()
    prep = prepare(corpus, cfg, cpc=cpc)
    timer, data, words, split = prep.timer, prep.data, prep.words, prep.split

    # ---- rankers --------------------------------------------------------------------------------
    word_vectors = {lang: e.vectors for lang, e in words.items()}
    results = {}
    for kind in ("text", "meta", "joint"):
        with timer.part(f"ranker_{kind}"):
            results[kind] = train_ranker(
                kind, data, word_vectors, prep.codes.vectors, cfg.ranker, device=device, progress=cfg.progress
            )
    with timer.part("stacked"):
        dev_text = dev_scores(results["text"].model, data, torch.device(device))
        dev_meta = dev_scores(results["meta"].model, data, torch.device(device))
        w_text, w_meta, stacked_ndcg = fit_stacked(dev_text, dev_meta, data)

    # ---- dual encoder ---------------------------------------------------------------------------
    with timer.part("dual"):
        dual = train_dual(data, word_vectors, cfg.dual, device=device, progress=cfg.progress)

    # ---- write: vocabularies, embeddings, ONNX, checkpoints -------------------------------------
    with timer.part("export"):
        vocab_files = {}
        for lang, emb in words.items():
            vocab_files[lang] = ModelsLayout.WORDS_VOCAB.format(lang=lang)
            emb.save(out / vocab_files[lang], out / ModelsLayout.WORDS_EMBEDDINGS.format(lang=lang))
        prep.code_vocab.save(out / ModelsLayout.CODE_VOCAB)
        np.save(out / ModelsLayout.CODE_EMBEDDINGS, prep.codes.vectors)
        components: dict[str, Any] = {
            "vocab": {"words": vocab_files, "codes": ModelsLayout.CODE_VOCAB},
            "embeddings": {
                "words": {lang: ModelsLayout.WORDS_EMBEDDINGS.format(lang=lang) for lang in words},
                "codes": ModelsLayout.CODE_EMBEDDINGS,
            },
            "limits": {
                "query_max_terms": cfg.query_max_terms,
                "doc_max_terms": cfg.doc_max_terms,
                "codes_max": cfg.codes_max,
            },
            "document_text": "English claims; else English title+abstract; else first language (see encoders.py)",
            "dual": export_dual(dual.model, out, ModelsLayout.DUAL),
            "rankers": {kind: export_ranker(results[kind].model, out, ModelsLayout.RANKER.format(kind=kind))
                        for kind in results},
        }
        components["dual"]["thresholds"] = list(dual.thresholds)
        stacked = {"w_text": w_text, "w_meta": w_meta, "combines": ["text", "meta"], "dev_ndcg": stacked_ndcg}
        (out / ModelsLayout.STACKED).write_text(json.dumps(stacked, indent=1), encoding="utf-8")
        components["rankers"]["stacked"] = {"w_text": w_text, "w_meta": w_meta, "file": ModelsLayout.STACKED}
        (out / ModelsLayout.CHECKPOINTS).mkdir(parents=True, exist_ok=True)
        for kind, res in results.items():
            torch.save(res.model.state_dict(), out / ModelsLayout.CHECKPOINT.format(name=f"ranker_{kind}"))
        torch.save(dual.model.state_dict(), out / ModelsLayout.CHECKPOINT.format(name="dual"))

    # ---- pass 3: document vectors of the whole corpus -------------------------------------------
    with timer.part("doc_vectors"):
        dual.model.to(device)
        doc_ids: list[str] = []

        def seqs() -> Iterator[np.ndarray]:
            bar = tqdm(
                read_corpus(corpus), desc="document vectors", unit="doc", total=prep.n_records, disable=not cfg.progress
            )
            for rec in bar:
                doc_ids.append(rec.id)
                yield document_ids(rec, words["en"].vocab, cfg.doc_max_terms)

        vectors = encode_documents(dual.model, seqs(), device)
        (out / ModelsLayout.DENSE).mkdir(parents=True, exist_ok=True)
        np.save(out / ModelsLayout.DOC_VECTORS, vectors.astype(np.float32))
        (out / ModelsLayout.DOC_IDS).write_text(json.dumps(doc_ids), encoding="utf-8")
        components["dense"] = {
            "vectors": ModelsLayout.DOC_VECTORS,
            "ids": ModelsLayout.DOC_IDS,
            "metric": "inner_product",
            "normalised": False,
        }
    split.save(out / ModelsLayout.SPLIT)
    timer.wall["total"] = time.perf_counter() - t_all

    dev: dict[str, Any] = {
        kind: {"best_epoch": r.best_epoch, **r.best_dev, "history": r.history} for kind, r in results.items()
    }
    dev["stacked"] = {"ndcg": stacked_ndcg, "w_text": w_text, "w_meta": w_meta}
    dev["dual"] = {
        "best_epoch": dual.best_epoch,
        "thresholds": list(dual.thresholds),
        **dual.best_dev,
        "history": dual.history,
        "grid": dual.grid,
    }
    dev["baselines"] = _baselines(data, cfg.seed)
    meta: dict[str, Any] = {
        "format": MODELS_FORMAT,
        "version": MODELS_VERSION,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "versions": _versions(),
        "device": {
            "requested": cfg.device,
            "used": device,
            "cuda_available": torch.cuda.is_available(),
            "threads": cfg.threads,
        },
        "corpus": {"path": str(Path(corpus).resolve()), "records": prep.n_records, "sha256": sha256_file(corpus)},
        "cpc": str(prep.cpc_path) if prep.cpc_path else None,
        "settings": cfg.to_json(),
        "split": {"file": ModelsLayout.SPLIT, **split.summary()},
        "data": data.summary(),
        "word2vec": prep.word2vec,
        "deepwalk": {
            "nodes": len(prep.graph.nodes),
            "edges": len(prep.graph.edges),
            "corpus_codes": len(prep.graph.corpus_codes),
            "attached_outside_scheme": len(prep.graph.attached),
            "siblings": prep.siblings,
        },
        "timings_s": {k: round(v, 2) for k, v in timer.wall.items()},
        "cpu_s": {k: round(v, 2) for k, v in timer.cpu.items()},
        "dev": dev,
        "components": components,
    }
    meta["files"] = _files_manifest(out)
    (out / ModelsLayout.META).write_text(json.dumps(meta, indent=1, default=str), encoding="utf-8")
    log.info("models written to %s in %.1f s", out, timer.wall["total"])
    models = {**{kind: r.model for kind, r in results.items()}, "dual": dual.model}
    return TrainOutput(out, meta, models, data, split)
