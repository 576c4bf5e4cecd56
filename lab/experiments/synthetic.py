"""Learned fusion on a synthetic corpus large enough to train on (``priorart-lab experiment synthetic -n 20000``).

The real corpus has ~500 documents: its test topics are near BM25's ceiling and its dev set is too
small for any learned weight to be significantly better, so there the product ranks by BM25. This
experiment shows the same code learning and installing weights where there is data to learn from:

* corpus: ``priorart synth -n N`` (and its classification scheme for DeepWalk);
* models: ``priorart train`` with the given caps (topics, epochs) on the TRAIN split of ``split.json``;
* index: ``priorart build --models`` (en, de, fr; fusion not learned by the build: no task of the real
  data suits a synthetic corpus);
* dev topics: the synthetic prior-art topics (:func:`training.synth.synth_topics`) whose query document is
  in the DEV split; a topic carries its query document's own codes (the relevant documents are the ones it
  cites, so the codes are a real query's, not the answer's); ``priorart fuse --topics --qrels`` learns,
  cross-validates and installs per profile (the same topics without codes form the ``nocodes`` profile);
* test topics: those whose query document is in the TEST split, each in both profiles, through the
  index's pipeline (:mod:`lab.experiments.models`' rows and p-values against BM25).
"""

from __future__ import annotations

import json
import logging
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from lab.experiments.models import Block, ModelsSettings, evaluate_rows, format_blocks
from service.fusion import PROFILES
from service.retrieval.encoders import ModelsLayout
from training.evaluation.trec import Qrels, Topic

log = logging.getLogger(__name__)


@dataclass
class SyntheticSettings:
    n: int = 20_000
    seed: int = 0
    max_train_topics: int = 1_500
    epochs: int = 4
    topics: int = 3_000  # synthetic topics drawn before the split filter
    depth: int = 1000
    folds: int = 5
    device: str = "auto"
    permutations: int = 10_000
    translation: bool = True  # False: the index of the earlier measurement (no PSQ tables; topics are multilingual)


@dataclass
class SyntheticResult:
    settings: dict[str, Any]
    dev_topics: int
    blocks: list[Block]
    fusion: dict[str, Any]
    seconds: dict[str, float]
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def split_topics(topics: list[dict[str, Any]], qrels: Qrels, ids: set[str]) -> tuple[list[Topic], Qrels]:
    """The topics whose query document is in ``ids`` (one split part), with their qrels."""
    chosen = [Topic.model_validate(t) for t in topics if t["source_id"] in ids]
    return chosen, {t.qid: qrels[t.qid] for t in chosen}


def run_synthetic_experiment(s: SyntheticSettings, *, work_dir: str | Path | None = None,
                             out_dir: str | Path | None = None, progress: bool | None = None) -> SyntheticResult:
    from service.corpus.jsonl import read_corpus
    from service.engine import Engine
    from service.index.folder import Layout
    from service.settings import Settings
    from training.build import build_index
    from training.evaluation.trec import write_qrels, write_topics
    from training.fusion import format_cells, learn_fusion
    from training.models.pairs import Split
    from training.models.train import TrainConfig, train_models
    from training.synth import SynthConfig, synth_topics, write_synthetic

    show = sys.stderr.isatty() if progress is None else progress
    seconds: dict[str, float] = {}
    tmp_ctx = tempfile.TemporaryDirectory(prefix="priorart-synth-exp-") if work_dir is None else None
    work = Path(work_dir) if work_dir is not None else Path(tmp_ctx.name)  # type: ignore[union-attr]
    work.mkdir(parents=True, exist_ok=True)
    blocks: list[Block] = []
    notes: list[str] = []
    try:
        t = time.perf_counter()
        corpus, scheme = work / "corpus.jsonl", work / "scheme.tsv.gz"
        if not corpus.is_file() or not scheme.is_file():
            write_synthetic(corpus, SynthConfig(n=s.n, seed=s.seed), scheme_path=scheme, progress=show)
        seconds["synth"] = time.perf_counter() - t
        t = time.perf_counter()
        models = work / "models"
        if not (models / ModelsLayout.META).is_file():
            train_models(corpus, models, cpc=scheme, config=TrainConfig(
                device=s.device, progress=show, max_train_topics=s.max_train_topics, epochs=s.epochs, seed=s.seed))
        else:
            notes.append(f"models reused from {models}")
        seconds["train"] = time.perf_counter() - t
        t = time.perf_counter()
        index = work / ("index" if s.translation else "index-no-translation")
        build_index(corpus, index, models_dir=models, device=s.device, fuse=False, overwrite=True, progress=show,
                    translation=s.translation, ranker="none")
        seconds["build"] = time.perf_counter() - t
        split = Split.load(models / ModelsLayout.SPLIT)
        topics, qrels = synth_topics(read_corpus(corpus), s.topics, seed=s.seed)
        dev, dev_qrels = split_topics(topics, qrels, set(split.ids("dev")))
        test, test_qrels = split_topics(topics, qrels, set(split.ids("test")))
        if not dev or not test:
            raise ValueError(f"{len(dev)} dev and {len(test)} test topics: generate more documents or topics")
        t = time.perf_counter()
        fused = learn_fusion(index, topics=dev, qrels=dev_qrels, folds=s.folds, device=s.device, progress=show)
        seconds["fuse"] = time.perf_counter() - t
        fusion = {**fused.summary(), "table": format_cells(fused.cells)}
        t = time.perf_counter()
        engine = Engine.load(index, settings=Settings(index_dir=index, device=s.device))
        ms = ModelsSettings(depth=s.depth, device=s.device, permutations=s.permutations, seed=s.seed)
        try:
            for profile in PROFILES:
                mine = test if profile == "codes" else [x.model_copy(update={"ipc": [], "cpc": []}) for x in test]
                _, rows, p_values, fused_as = evaluate_rows(engine, mine, test_qrels, ms)
                blocks.append(Block("synthetic", profile, len(mine), rows, p_values, fused_as))
        finally:
            engine.close()
        seconds["evaluate"] = time.perf_counter() - t
        if out_dir is not None:
            out = Path(out_dir)
            out.mkdir(parents=True, exist_ok=True)
            write_topics(test, out / "topics-test.jsonl")
            write_qrels(test_qrels, out / "qrels-test.txt")
            png = index / Layout.FUSION_PLOT
            if png.is_file():
                (out / "fusion-dev.png").write_bytes(png.read_bytes())
    finally:
        if tmp_ctx is not None:
            tmp_ctx.cleanup()
    result = SyntheticResult(asdict(s), len(dev), blocks, fusion, seconds, notes)
    if out_dir is not None:
        (Path(out_dir) / "synthetic.json").write_text(json.dumps(result.to_dict(), indent=1, default=str) + "\n",
                                                      encoding="utf-8")
    return result


def format_synthetic(result: SyntheticResult) -> str:
    tables = "PSQ tables of every direction" if result.settings.get("translation", True) else "no translation tables"
    lines = [f"synthetic corpus of {result.settings['n']} documents, index with {tables}"]
    lines += format_blocks(result.blocks, result.settings["depth"])
    lines.append(f"fusion learned on {result.dev_topics} dev topics (cross-validated):")
    lines.extend(f"  {line}" for line in result.fusion["table"].splitlines())
    lines.append("seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in result.seconds.items()))
    lines.extend(f"note: {n}" for n in result.notes)
    return "\n".join(lines)


__all__ = ["SyntheticResult", "SyntheticSettings", "format_synthetic", "run_synthetic_experiment", "split_topics"]
