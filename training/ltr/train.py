"""``priorart train-ltr``: word-pair and domain models, Borda and LinLearn weights -> ``MODELS_DIR/ltr/``.

1. Split: ``MODELS_DIR/split.json`` (written by ``priorart train``) when present, else the same
   deterministic :func:`training.models.pairs.make_split` over the corpus; topics, judged documents,
   sampled pairs and dev topics are the neural rankers' (:mod:`training.ltr.data`).
2. The word-pair model (:mod:`training.ltr.wordpair`) and the domain model (:mod:`training.ltr.domain`)
   are trained on the train topics, early-stopped on the dev topics.
3. Dev candidate lists from the real systems over ``INDEX_DIR``: the first stage's top ``depth`` for each
   dev topic (with PSQ translation when the index has tables), scored by ``bm25`` (first stage), ``wordpair``,
   ``domain`` and, when ``MODELS_DIR`` holds the neural models, ``dense`` (dual-encoder inner product),
   ``text`` and ``meta`` (ONNX rankers, :class:`service.retrieval.encoders.ModelBundle`). A dev topic's own
   publication is trivially found when the index holds the topic's text in its language (a title + abstract
   topic in an index of titles in that language, a German claims topic in an index of German claims): then its
   publication group is removed from the list and the relevant documents are its relevance-1 documents
   (same main group) (``dev_mode="auto"``; ``"mates"`` / ``"others"`` force one way).
4. Borda ``kappa`` for every pair of systems (dev MAP, grid 0.05); the service's Borda default is the best
   pair with ``bm25``. LinLearn weights over every system (:mod:`training.ltr.linlearn`).
5. ``MODELS_DIR/ltr/``: ``wordpair/``, ``domain.json``, ``combine.json``, ``docside/`` (document-side
   stores aligned with the index rows), ``meta.json`` (format, settings, split used, index identity,
   dev figures, timings, sha256 + size of every file). ``install=True`` also copies the folder to
   ``INDEX_DIR/ltr`` and registers it in the index's ``meta.json`` (checksummed).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import shutil
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from service.corpus.jsonl import read_corpus
from service.corpus.record import PatentRecord
from service.index.store import IDS_FILE, IndexFormatError, load_meta, write_meta
from service.pipeline import minmax
from service.retrieval.combine import CombineConfig
from service.retrieval.domain import DomainStore
from service.retrieval.encoders import sha256_file
from service.retrieval.first_stage import FirstStage
from service.retrieval.ltr_stages import LTR_FORMAT, LTR_VERSION
from service.retrieval.wordpair import DocTermStore
from training.ltr.data import LtrConfig, LtrData, prepare_ltr_data
from training.ltr.domain import DomainConfig, train_domain
from training.ltr.linlearn import CandidateList, LinLearnConfig, mean_measure, train_linlearn, tune_borda
from training.ltr.wordpair import WordPairConfig, train_wordpair
from training.models.pairs import Split, doc_info, group_key, make_split

log = logging.getLogger(__name__)

DEV_MODES = ("auto", "mates", "others")


@dataclass
class TrainLtrConfig:
    ltr: LtrConfig = field(default_factory=LtrConfig)
    wordpair: WordPairConfig = field(default_factory=WordPairConfig)
    domain: DomainConfig = field(default_factory=DomainConfig)
    linlearn: LinLearnConfig = field(default_factory=LinLearnConfig)
    depth: int = 100  # dev candidate list length (first stage)
    dev_mode: str = "auto"
    borda_step: float = 0.05
    neural: bool = True  # use the neural models of MODELS_DIR when present

    def __post_init__(self) -> None:
        if self.dev_mode not in DEV_MODES:
            raise ValueError(f"unknown dev mode {self.dev_mode!r}; valid: {', '.join(DEV_MODES)}")
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
    path = models_dir / "split.json"
    if path.is_file():
        split = Split.load(path)
        missing = sum(1 for r in records if r.id not in split.part)
        if missing:
            notes.append(f"{missing} corpus records are not in {path} (left out of training and dev)")
        return split, {"source": str(path), "sha256": sha256_file(path)}
    notes.append(f"no {path}: split computed with make_split (the same deterministic split `priorart train` writes)")
    split = make_split(doc_info(r) for r in records)
    return split, {"source": "make_split", "sha256": _sha256_bytes(json.dumps(split.to_json()).encode())}


def _neural(models_dir: Path, notes: list[str]) -> Any:
    """The ModelBundle of MODELS_DIR, or None (with a note) when it has no usable neural models."""
    if not (models_dir / "meta.json").is_file():
        notes.append(f"no neural models in {models_dir}: LinLearn combines bm25, wordpair and domain")
        return None
    from service.retrieval.encoders import ModelBundle, ModelsFolderError

    try:
        return ModelBundle.load(models_dir)
    except (ModelsFolderError, KeyError, OSError, ValueError) as exc:
        notes.append(f"neural models in {models_dir} not usable ({exc}); LinLearn without dense/text/meta")
        return None


def topic_fields(qid: str) -> set[str]:
    """Record fields a training topic's text comes from (``<id>:ta.<lang>``: title + abstract, else claims)."""
    kind = qid.rsplit(":", 1)[-1].split(".", 1)[0]
    return {"title", "abstract", "description"} if kind == "ta" else {"claims"}


def dev_lists(
    data: LtrData, fs: FirstStage, terms: DocTermStore, domain_store: DomainStore, wp: Any, dom: Any,
    bundle: Any, cfg: TrainLtrConfig, records_by_id: dict[str, PatentRecord],
) -> tuple[list[CandidateList], dict[str, int]]:
    """Candidate lists of the dev topics from the real systems over the index (module docstring, step 3)."""
    from service.retrieval.encoders import UnsupportedLanguageError

    index_langs = set(fs.meta.settings["index_langs"])
    index_fields = set(fs.meta.settings["fields"])
    groups: dict[str, list[int]] = {}
    for row, pid in enumerate(fs.docs.ids):
        rec_group = records_by_id.get(pid)
        if rec_group is not None:
            groups.setdefault(group_key(rec_group), []).append(row)
    out: list[CandidateList] = []
    modes = {"mates": 0, "others": 0, "skipped": 0}
    for q, topic in zip(data.dev_q, data.ranking.dev, strict=True):
        src = records_by_id[q.source]
        mode = cfg.dev_mode
        if mode == "auto":
            mode = "others" if (q.lang in index_langs and topic_fields(q.qid) & index_fields) else "mates"
        res = fs.search(q.text, lang=q.lang, k=cfg.depth, translate=True)
        rows = np.asarray([h.row for h in res.hits], dtype=np.int64)
        bm25 = np.asarray([h.score for h in res.hits], dtype=np.float64)
        judged = {data.ranking.pool.ids[i]: r for i, r in topic.judged.items()}
        if mode == "others":
            own = set(groups.get(group_key(src), []))
            keep = np.asarray([r not in own for r in rows.tolist()], dtype=bool)
            rows, bm25 = rows[keep], bm25[keep]
            own_ids = {fs.docs.ids[r] for r in own}
            judged = {d: r for d, r in judged.items() if d not in own_ids}
        ids = [fs.docs.ids[r] for r in rows.tolist()]
        rels = np.asarray([judged.get(d, 0) for d in ids], dtype=np.int64)
        n_rel = sum(1 for r in judged.values() if r > 0)
        if not len(rows) or n_rel == 0:
            modes["skipped"] += 1
            continue
        modes[mode] += 1
        scores = {"bm25": bm25, "wordpair": wp.score_rows(q.text, q.lang, terms, rows),
                  "domain": dom.score(domain_store.features(q.meta, rows))}
        if bundle is not None:
            recs = [fs.docs.get_row(int(r)) for r in rows]
            try:
                qv = bundle.encode_query(q.text, q.lang)
                scores["dense"] = bundle.encode_documents(recs) @ qv
                rr = bundle.rerank_scores(q.text, q.lang, q.meta.codes, recs)
                scores["text"], scores["meta"] = rr["text"].astype(np.float64), rr["meta"].astype(np.float64)
            except UnsupportedLanguageError:
                pass  # a language without neural encoders: those systems did not score (NaN)
            for name in ("dense", "text", "meta"):
                scores.setdefault(name, np.full(len(rows), np.nan))
        out.append(CandidateList(q.qid, ids, scores, rels, n_rel))
    return out, modes


def install_ltr(ltr_dir: Path, index_dir: Path, info: dict[str, Any]) -> None:
    """Copy an ltr folder to ``INDEX_DIR/ltr`` and register it (component ``ltr``) in the index's meta.json.

    Every other file of the index is verified first (a broken index is never re-blessed); an ltr folder
    installed before is replaced.
    """
    old = load_meta(index_dir, verify=False)
    for rel, entry in old.files.items():
        if rel.startswith("ltr/"):
            continue
        path = index_dir / rel
        if not path.is_file() or sha256_file(path) != entry["sha256"]:
            raise IndexFormatError(f"{path}: missing or changed since the index was built; rebuild the index")
    dest = index_dir / "ltr"
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(ltr_dir, dest)
    components = {**old.components, "ltr": info}
    write_meta(index_dir, old.settings, components, created=old.created)


def _single_map(lists: list[CandidateList], name: str) -> float:
    return mean_measure(lists, lambda c: minmax(c.scores[name]), "map")


def _files(root: Path) -> dict[str, dict[str, Any]]:
    return {p.relative_to(root).as_posix(): {"sha256": sha256_file(p), "size": p.stat().st_size}
            for p in sorted(root.rglob("*")) if p.is_file() and p.name != "meta.json"}


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
    fs = FirstStage.load(index_dir)
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
    index_records = [fs.docs.get_row(i) for i in range(len(fs.docs))]
    terms = DocTermStore.from_records(index_records, cfg.ltr.doc_max_terms)
    domain_store = DomainStore.from_records(index_records, terms)
    timings["docside"] = time.perf_counter() - t

    t = time.perf_counter()
    bundle = _neural(models_dir, notes) if cfg.neural else None
    wp_model = wp.model({"settings": cfg.wordpair.to_json()})
    by_id = {r.id: r for r in records}
    lists, modes = dev_lists(data, fs, terms, domain_store, wp_model, dom.model, bundle, cfg, by_id)
    if not lists:
        raise ValueError("no dev topic has a relevant document among its first-stage candidates: cannot fit the "
                         "combination weights (a larger corpus or another --dev-mode may help)")
    systems = [s for s in ("bm25", "dense", "text", "meta", "wordpair", "domain") if s in lists[0].scores]
    singles = {name: _single_map(lists, name) for name in systems}
    borda_pairs: dict[str, dict[str, float]] = {}
    for a, b in itertools.combinations(systems, 2):
        kappa, val, _ = tune_borda(lists, a, b, step=cfg.borda_step, measure="map")
        borda_pairs[f"{a}+{b}"] = {"kappa": kappa, "dev_map": val}
    with_bm25 = {k: v for k, v in borda_pairs.items() if k.startswith("bm25+")}
    best_pair = max(with_bm25, key=lambda k: with_bm25[k]["dev_map"])
    first, second = best_pair.split("+")
    ll = train_linlearn(lists, systems, cfg.linlearn)
    timings["combination"] = time.perf_counter() - t

    out = models_dir / "ltr"
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    wp_model.save(out / "wordpair")
    dom.model.save(out / "domain.json")
    terms.save(out / "docside")
    domain_store.save(out / "docside")
    kappa = borda_pairs[best_pair]["kappa"]
    combine = CombineConfig(
        methods={"borda": {first: kappa, second: 1.0 - kappa}, "linlearn": ll.weights},
        default="linlearn",
        info={"dev": {"map_single": singles, "borda_pairs": borda_pairs, "borda_default_pair": best_pair,
                      "linlearn_map": ll.dev, "linlearn_pairs": ll.pairs, "topics": len(lists), "modes": modes},
              "normalisation": "min-max per candidate list (linlearn); Borda points (borda)"},
    )
    combine.save(out / "combine.json")
    timings["total"] = time.perf_counter() - t0
    doc_ids_path = index_dir / IDS_FILE
    meta: dict[str, Any] = {
        "format": LTR_FORMAT,
        "version": LTR_VERSION,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "corpus": {"path": str(corpus.resolve()), "records": len(records), "sha256": sha256_file(corpus)},
        "index": {"path": str(index_dir.resolve()), "documents": len(fs.docs), "doc_ids_sha256":
                  sha256_file(doc_ids_path), "settings": fs.meta.settings},
        "split": {**split_info, **split.summary()},
        "settings": {"ltr": cfg.ltr.to_json(), "wordpair": cfg.wordpair.to_json(), "domain": cfg.domain.to_json(),
                     "linlearn": cfg.linlearn.to_json(), "depth": cfg.depth, "dev_mode": cfg.dev_mode,
                     "borda_step": cfg.borda_step},
        "data": data.summary(),
        "systems": systems,
        "dev": {
            "wordpair": {"ndcg": wp.dev_ndcg, "l1": wp.l1, "best_epoch": wp.best_epoch, "nnz": wp.nnz,
                         "grid": wp.grid, "history": wp.history},
            "domain": {"ndcg": dom.dev_ndcg, "best_epoch": dom.best_epoch, "history": dom.history},
            "combination": combine.info["dev"],
        },
        "components": {"wordpair": "wordpair/", "domain": "domain.json", "combine": "combine.json",
                       "docside": "docside/"},
        "timings_s": {k: round(v, 2) for k, v in timings.items()},
        "notes": notes,
    }
    meta["files"] = _files(out)
    (out / "meta.json").write_text(json.dumps(meta, indent=1, default=str), encoding="utf-8")
    if install:
        install_ltr(out, index_dir, {"folder": "ltr", "systems": systems, "created": meta["created"]})
    log.info("ltr models written to %s in %.1f s", out, timings["total"])
    return TrainLtrOutput(out, meta, notes)
