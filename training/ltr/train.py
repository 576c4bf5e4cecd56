"""``priorart train-ltr``: word-pair and domain models, Borda and LinLearn weights -> ``MODELS_DIR/ltr/``.

1. Split: ``MODELS_DIR/split.json`` (written by ``priorart train``) when present, else the same
   deterministic :func:`training.models.pairs.make_split` over the corpus; training topics, judged
   documents and sampled pairs are the neural rankers' (:mod:`training.ltr.data`).
2. The word-pair model (:mod:`training.ltr.wordpair`) and the domain model (:mod:`training.ltr.domain`)
   are trained on the train topics, early-stopped on their dev topics.
3. Document-side stores aligned with the index rows, and the two stages built over them in memory.
4. Dev candidate lists from the index's own pipeline (:func:`service.pipeline.compose` with the new
   stages) in feature mode, over the same leak-free dev topics fusion learning uses
   (:func:`training.fusion.dev_topics`: no codes copied from the relevant document). An index that suits
   no leak-free dev task gets no Borda/LinLearn weights (a note says so).
5. Borda ``kappa`` of the best pair with ``bm25`` (dev MAP, grid 0.05) and LinLearn weights over every
   component (:mod:`training.ltr.linlearn`), each cross-validated against BM25 (held-out folds by source
   publication).
6. ``MODELS_DIR/ltr/``: ``wordpair/``, ``domain.json``, ``docside/`` and ``meta.json`` (format
   ``priorart-ltr`` version 2: settings, split, index identity, dev figures, timings, sha256 + size of
   every file). ``install=True`` copies the folder to ``INDEX_DIR/ltr``, registers it in the index's
   ``meta.json`` and writes the Borda/LinLearn weights into ``INDEX/fusion.json``, each only when it beat
   BM25 on the held-out folds.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from service.candidates import Stage
from service.corpus.jsonl import read_corpus
from service.corpus.record import PatentRecord
from service.fusion import FusionModel, fuse, minmax
from service.index.components import write_part
from service.index.folder import IndexFolder, Layout
from service.index.store import DocStore
from service.pipeline import Pipeline, compose
from service.retrieval.domain import DomainStore
from service.retrieval.encoders import ModelsLayout, sha256_file
from service.retrieval.wordpair import DocTermStore
from service.settings import Settings
from service.stages.ltr import LTR_FORMAT, LTR_VERSION, DomainStep, WordPairStep
from service.versioned import write_versioned
from training.evaluation.significance import randomisation_test
from training.fusion import MIN_TOPICS, DevTopic, FusionError, collect, dev_topics
from training.ltr.data import LtrConfig, prepare_ltr_data
from training.ltr.domain import DomainConfig, train_domain
from training.ltr.linlearn import CandidateList, LinLearnConfig, list_measure, mean_measure, train_linlearn, tune_borda
from training.ltr.wordpair import WordPairConfig, train_wordpair
from training.models.pairs import Split, doc_info, make_split

log = logging.getLogger(__name__)

SYSTEMS = ("bm25", "dense", "text", "meta", "joint", "wordpair", "domain")


@dataclass
class TrainLtrConfig:
    ltr: LtrConfig = field(default_factory=LtrConfig)
    wordpair: WordPairConfig = field(default_factory=WordPairConfig)
    domain: DomainConfig = field(default_factory=DomainConfig)
    linlearn: LinLearnConfig = field(default_factory=LinLearnConfig)
    depth: int = 100  # dev candidate list length (first stage)
    borda_step: float = 0.05
    neural: bool = True  # use the neural models of MODELS_DIR when present

    def __post_init__(self) -> None:
        if not 1 <= self.depth <= 1000:
            raise ValueError(f"depth must be in 1..1000, got {self.depth}")


@dataclass
class TrainLtrOutput:
    out_dir: Path
    meta: dict[str, Any]
    notes: list[str]


def _sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def load_split(models_dir: Path, records: list[PatentRecord], notes: list[str]) -> tuple[Split, dict[str, Any]]:
    path = models_dir / ModelsLayout.SPLIT
    if path.is_file():
        split = Split.load(path)
        missing = sum(1 for r in records if r.id not in split.part)
        if missing:
            notes.append(f"{missing} corpus records are not in {path} (left out of training and dev)")
        return split, {"source": str(path), "sha256": sha256_file(path)}
    notes.append(f"no {path}: split computed with make_split (the same deterministic split `priorart train` writes)")
    split = make_split(doc_info(r) for r in records)
    return split, {"source": "make_split", "sha256": _sha256_bytes(json.dumps(split.to_json()).encode())}


def topic_fields(qid: str) -> set[str]:
    """Record fields a training topic's text comes from (``<id>:ta.<lang>``: title + abstract, else claims)."""
    kind = qid.rsplit(":", 1)[-1].split(".", 1)[0]
    return {"title", "abstract", "description"} if kind == "ta" else {"claims"}


def dev_lists(pipeline: Pipeline, dev: Sequence[DevTopic], depth: int) -> list[CandidateList]:
    """Candidate lists of the dev topics from the pipeline's feature mode (every component the index has, the
    new word-pair and domain stages included); a component that does not apply to a topic is NaN."""
    lists: list[CandidateList] = []
    ids = pipeline.docs.ids
    for tf in collect(pipeline, dev, depth):
        names = [c for c in SYSTEMS if c in tf.scores or c in {"wordpair", "domain"}]
        scores = {c: tf.scores.get(c, np.full(len(tf), np.nan)) for c in names}
        lists.append(CandidateList(f"{tf.dev.topic.qid}:{tf.dev.profile}", [ids[int(r)] for r in tf.rows], scores,
                                   tf.grades.astype(np.int64), len(tf.ideal)))
    return lists


def install_ltr(ltr_dir: Path, folder: IndexFolder, info: dict[str, Any]) -> None:
    """Copy an ltr folder to ``INDEX_DIR/ltr`` and register it (component ``ltr``) in the index's meta.json.

    The index is verified first (a broken index is never re-blessed); an ltr folder installed before is replaced.
    """
    IndexFolder.open(folder.root, verify=True)
    dest = folder.path(Layout.LTR)
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(ltr_dir, dest)
    folder.register({"ltr": info}, changed=[Layout.LTR])


def _single_map(lists: list[CandidateList], name: str) -> float:
    return mean_measure(lists, lambda c: minmax(c.scores[name]), "map")


def _files(root: Path) -> dict[str, dict[str, Any]]:
    return {p.relative_to(root).as_posix(): {"sha256": sha256_file(p), "size": p.stat().st_size}
            for p in sorted(root.rglob("*")) if p.is_file() and p.name != "meta.json"}


def learn_combination(lists: list[CandidateList], cfg: TrainLtrConfig, folds: int = 5) -> dict[str, Any]:
    """Borda (best pair with BM25) and LinLearn weights, each cross-validated against BM25 (MAP of held-out folds,
    folds by source publication); a method is installable only when it beats BM25 there."""
    from training.fusion import fold_ids, group_of

    systems = [s for s in SYSTEMS if any(not np.isnan(c.scores[s]).all() for c in lists if s in c.scores)]
    singles = {name: _single_map(lists, name) for name in systems}
    groups = [group_of(c.qid.rsplit(":", 1)[0]) for c in lists]
    fold = fold_ids(groups, ["dev"] * len(groups), folds)

    def fit(train: list[CandidateList]) -> tuple[dict[str, float], dict[str, float], dict[str, Any]]:
        pairs: dict[str, dict[str, float]] = {}
        for other in systems:
            if other != "bm25":
                kappa, val, _ = tune_borda(train, "bm25", other, step=cfg.borda_step, measure="map")
                pairs[f"bm25+{other}"] = {"kappa": kappa, "dev_map": val}
        best = max(pairs, key=lambda k: pairs[k]["dev_map"])
        kappa = pairs[best]["kappa"]
        borda = {"bm25": kappa, best.split("+")[1]: 1.0 - kappa}
        ll = train_linlearn(train, systems, cfg.linlearn)
        return borda, ll.weights, {"borda_pairs": pairs, "borda_pair": best, "linlearn_map": ll.dev,
                                   "linlearn_pairs": ll.pairs}

    held: dict[str, list[float]] = {"bm25": [], "borda": [], "linlearn": []}
    for f in np.unique(fold):
        train = [c for c, k in zip(lists, fold, strict=True) if k != f]
        test = [c for c, k in zip(lists, fold, strict=True) if k == f]
        if not train or not test:
            continue
        borda, linw, _ = fit(train)
        for c in test:
            held["bm25"].append(list_measure(minmax(c.scores["bm25"]), c.rels, c.n_relevant))
            held["borda"].append(list_measure(fuse("borda", c.scores, borda), c.rels, c.n_relevant))
            held["linlearn"].append(list_measure(fuse("linlearn", c.scores, linw), c.rels, c.n_relevant))
    borda, linw, info = fit(lists)
    out: dict[str, Any] = {"systems": systems, "map_single": singles, "topics": len(lists), **info,
                           "cv_map": {k: float(np.mean(v)) if v else None for k, v in held.items()}, "folds": folds}
    for method, w in (("borda", borda), ("linlearn", linw)):
        gain = float(np.mean(held[method]) - np.mean(held["bm25"])) if held[method] else 0.0
        p = randomisation_test(held[method], held["bm25"], permutations=2000) if len(held[method]) > 1 else 1.0
        ok = gain > 1e-9 and len(lists) >= MIN_TOPICS
        out[method] = {"weights": w, "installable": ok, "p": p,
                       "reason": (f"{folds}-fold CV MAP {np.mean(held[method]):.3f} vs BM25 {np.mean(held['bm25']):.3f}"
                                  f" on {len(lists)} dev topics (p = {p:.3g})") if held[method] else "no held-out fold"}
    return out


def train_ltr(
    corpus: str | Path,
    models_dir: str | Path,
    index_dir: str | Path,
    config: TrainLtrConfig | None = None,
    *,
    install: bool = False,
) -> TrainLtrOutput:
    """Train and write ``MODELS_DIR/ltr`` (module docstring)."""
    cfg = config or TrainLtrConfig()
    corpus, models_dir, index_dir = Path(corpus), Path(models_dir), Path(index_dir)
    if not corpus.is_file():
        raise FileNotFoundError(f"corpus not found: {corpus}")
    notes: list[str] = []
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    records = list(read_corpus(corpus))
    if not records:
        raise ValueError(f"{corpus}: no records")
    models_dir.mkdir(parents=True, exist_ok=True)
    split, split_info = load_split(models_dir, records, notes)
    folder = IndexFolder.open(index_dir, verify=False)
    docs = DocStore.load(folder.root)
    timings["read"] = time.perf_counter() - t0

    t = time.perf_counter()
    data = prepare_ltr_data(records, split, cfg.ltr)
    timings["pairs"] = time.perf_counter() - t
    t = time.perf_counter()
    wp = train_wordpair(data, cfg.wordpair)
    timings["wordpair"] = time.perf_counter() - t
    t = time.perf_counter()
    dom = train_domain(data, cfg.domain)
    timings["domain"] = time.perf_counter() - t

    t = time.perf_counter()
    index_records = [docs.get_row(i) for i in range(len(docs))]
    terms = DocTermStore.from_records(index_records, cfg.ltr.doc_max_terms)
    domain_store = DomainStore.from_records(index_records, terms)
    timings["docside"] = time.perf_counter() - t

    t = time.perf_counter()
    wp_model = wp.model({"settings": {**cfg.wordpair.to_json(), "langs": sorted({q.lang for q in data.train_q})}})
    ltr_stages: list[Stage] = [WordPairStep(wp_model, terms), DomainStep(dom.model, domain_store,
                                                            {pid: i for i, pid in enumerate(docs.ids)})]
    combination: dict[str, Any] | None = None
    try:
        pipeline = compose(folder, Settings(index_dir=folder.root, device="cpu" if not cfg.neural else "auto"),
                           docs, ltr=ltr_stages, neural=cfg.neural)
        dev, counts = dev_topics(folder, docs, "auto", split=split)
        lists = [c for c in dev_lists(pipeline, dev, cfg.depth) if c.n_relevant > 0]
        if not lists:
            raise FusionError("no dev topic has a relevant document among its candidates")
        combination = {**learn_combination(lists, cfg), "tasks": counts}
    except FusionError as exc:
        notes.append(f"Borda and LinLearn weights not learned: {exc}")
    timings["combination"] = time.perf_counter() - t

    out = models_dir / ModelsLayout.LTR
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    wp_model.save(out / "wordpair")
    dom.model.save(out / "domain.json")
    terms.save(out / "docside")
    domain_store.save(out / "docside")
    timings["total"] = time.perf_counter() - t0
    meta: dict[str, Any] = {
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "corpus": {"path": str(corpus.resolve()), "records": len(records), "sha256": sha256_file(corpus)},
        "index": {"path": str(index_dir.resolve()), "documents": len(docs), "doc_ids_sha256": folder.ids_sha256(),
                  "settings": folder.settings.to_dict()},
        "split": {**split_info, **split.summary()},
        "settings": {"ltr": cfg.ltr.to_json(), "wordpair": cfg.wordpair.to_json(), "domain": cfg.domain.to_json(),
                     "linlearn": cfg.linlearn.to_json(), "depth": cfg.depth, "borda_step": cfg.borda_step},
        "data": data.summary(),
        "dev": {
            "wordpair": {"ndcg": wp.dev_ndcg, "l1": wp.l1, "best_epoch": wp.best_epoch, "nnz": wp.nnz,
                         "grid": wp.grid, "history": wp.history},
            "domain": {"ndcg": dom.dev_ndcg, "best_epoch": dom.best_epoch, "history": dom.history},
            "combination": combination,
        },
        "components": {"wordpair": "wordpair/", "domain": "domain.json", "docside": "docside/"},
        "timings_s": {k: round(v, 2) for k, v in timings.items()},
        "notes": notes,
        "files": _files(out),
    }
    write_versioned(out / "meta.json", LTR_FORMAT, LTR_VERSION, meta)
    if install:
        install_ltr(out, folder, {"folder": Layout.LTR, "created": meta["created"], "version": LTR_VERSION})
        _install_weights(folder, combination, notes)
    docs.close()
    log.info("ltr models written to %s in %.1f s", out, timings["total"])
    return TrainLtrOutput(out, meta, notes)


def _install_weights(folder: IndexFolder, combination: dict[str, Any] | None, notes: list[str]) -> None:
    """Borda and LinLearn weights into the index's fusion.json, each only when it beat BM25 held out."""
    model = FusionModel.of_folder(folder)
    for method in ("borda", "linlearn"):
        c = (combination or {}).get(method)
        if c and c["installable"]:
            setattr(model, method, c["weights"])
            model.sources[method] = f"priorart train-ltr: {c['reason']}"
        else:
            setattr(model, method, None)
            why = c["reason"] if c else "not learned"
            model.sources[method] = f"not installed: {why}"
            notes.append(f"{method} not installed: {why if c else 'no leak-free dev topics'}"
                         + (" (did not beat BM25 held out)" if c else ""))
    model.learning["ltr"] = combination
    entry = write_part("fusion", folder.root, model.to_json())
    folder.register({"fusion": {**folder.components.get("fusion", {}), **entry}}, changed=[Layout.FUSION])
