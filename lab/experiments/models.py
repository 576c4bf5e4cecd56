"""Learned ranking on the real data, leak-free: BM25 vs each model vs fusion (``priorart-lab experiment models``).

Setup (``priorart-lab experiment models --data DATA [--models MODELS_DIR] [--out DIR]``):

* corpus: every publication under ``DATA/patents`` (the corpus ``priorart train`` saw when ``--models``
  was trained on it; without ``--models`` the models are trained here first);
* split: the models folder's ``split.json``; the rankers, the dual encoder and word2vec trained on TRAIN
  only; fusion weights are learned (cross-validated, installed only where they beat BM25) on DEV topics
  by the build (:mod:`training.fusion`); every figure below is on TEST topics, whose documents no model
  and no weight ever saw;
* translation tables (PSQ): IBM model 1 on the aligned claims of the TRAIN grants only, merged with
  FreeDict when installed;
* tasks, each with its own index (``priorart build --models`` with the task's fields/languages):

  - ``xling``: German and French first claims (reference signs stripped) of the test trilingual EP grants
    against an English-only index; relevant: the grant;
  - ``known-item``: English title + abstract of the test US utility grants against an index of claims and
    description; relevant: the grant itself;

* profiles: every topic twice, ``nocodes`` (text only, a pasted claim) and ``codes`` (the publication's
  codes truncated to subclass, what a real query shares with its prior art; never the exact codes of the
  document sought).

Rows, all through the index's one pipeline (:func:`service.pipeline.compose`), as request weights
(:data:`service.pipeline.SYSTEMS`): ``bm25``, ``dense``, ``rerank-text``, ``rerank-meta``, ``rerank``
(the joint ranker), and ``fusion`` (the index's installed weights: what the service does). Components
that do not apply to a topic (meta and joint without codes) are left out, as in the service.
Measures: MRR, nDCG, success@1, success@10 (ir-measures), each with the paired randomisation test
p-value against ``bm25``.
"""

from __future__ import annotations

import json
import logging
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from lab.experiments import ExperimentError
from service.fusion import PROFILES
from service.retrieval.encoders import ModelsLayout
from training.evaluation.measures import evaluate_run
from training.evaluation.significance import randomisation_test
from training.evaluation.trec import Qrels, Run, Topic, write_qrels, write_run, write_topics

log = logging.getLogger(__name__)

TASKS = ("xling", "known-item")
ROWS = ("bm25", "dense", "rerank-text", "rerank-meta", "rerank", "fusion")
MEASURES = ("mrr", "ndcg", "success@1", "success@10")
TASK_INDEX = {
    "xling": {"index_langs": "en", "fields": "title,abstract,claims,description"},
    "known-item": {"index_langs": "en", "fields": "claims,description"},
}


@dataclass
class ModelsSettings:
    depth: int = 1000
    dense_index: str = "flat"
    device: str = "auto"
    tasks: tuple[str, ...] = TASKS
    permutations: int = 10_000
    seed: int = 0
    translation: bool = True

    def __post_init__(self) -> None:
        bad = [t for t in self.tasks if t not in TASKS]
        if bad or not self.tasks:
            raise ExperimentError(f"tasks must be among {', '.join(TASKS)}, got {list(self.tasks)}")
        if not 10 <= self.depth <= 1000:
            raise ExperimentError(f"depth must be in 10..1000 (success@10 is reported), got {self.depth}")


@dataclass
class Block:
    """One task in one profile: a row per system, p-values against BM25."""

    task: str
    profile: str
    topics: int
    rows: dict[str, dict[str, float]]
    p_values: dict[str, dict[str, float]]
    fused_as: dict[str, int]


@dataclass
class ModelsResult:
    settings: dict[str, Any]
    documents: int
    models: dict[str, Any]
    split: dict[str, Any]
    blocks: list[Block]
    fusion: dict[str, Any]
    seconds: dict[str, float]
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def profile_topics(topics: Sequence[Topic], profile: str) -> list[Topic]:
    """The topics without codes, or with their codes truncated to subclass (module doc)."""
    from training.fusion import subclass_codes

    if profile == "nocodes":
        return [t.model_copy(update={"ipc": [], "cpc": []}) for t in topics]
    return [t.model_copy(update={"ipc": [], "cpc": subclass_codes(t.codes)}) for t in topics if t.codes]


def evaluate_rows(engine: Any, topics: Sequence[Topic], qrels: Qrels, s: ModelsSettings,
                  ) -> tuple[dict[str, Run], dict[str, dict[str, float]], dict[str, dict[str, float]], dict[str, int]]:
    """Every row's run over ``topics`` through the engine (:func:`training.runs.run_topics`; each row a component
    or the fused order), its measures, p-values against BM25."""
    from training.runs import run_topics

    runs: dict[str, Run] = {}
    fused_as: dict[str, int] = {}
    for row in ROWS:
        runs[row], _, how = run_topics(engine, topics, system=row, k=s.depth, depth=s.depth, progress=False)
        if row == "fusion":
            fused_as = dict(how)
    reports = {row: evaluate_run(run, qrels, MEASURES) for row, run in runs.items()}
    rows = {row: {m: float(r.aggregate[m]) for m in MEASURES} for row, r in reports.items()}
    base = reports["bm25"]
    p_values = {row: {m: float(randomisation_test(r.measure(m), base.measure(m), permutations=s.permutations,
                                                  seed=s.seed)) for m in MEASURES}
                for row, r in reports.items() if row != "bm25"}
    return runs, rows, p_values, fused_as


def run_models_experiment(
    data: str | Path,
    settings: ModelsSettings | None = None,
    *,
    models_dir: str | Path | None = None,
    out_dir: str | Path | None = None,
    work_dir: str | Path | None = None,
    progress: bool | None = None,
) -> ModelsResult:
    """Run the experiment (see the module doc); with ``out_dir`` write runs, qrels, ``models.json``, plots."""
    from service.corpus.jsonl import write_corpus
    from service.engine import Engine
    from service.index.folder import Layout
    from service.settings import Settings
    from training.build import build_index
    from training.ingest import iter_records
    from training.models.pairs import Split
    from training.tasks import known_item_task, xling_task

    s = settings or ModelsSettings()
    show = sys.stderr.isatty() if progress is None else progress
    seconds: dict[str, float] = {}
    notes: list[str] = []
    t0 = time.perf_counter()
    patents = Path(data) / "patents"
    if not patents.is_dir():
        raise ExperimentError(f"{patents} not found (pass --data, the shared data folder)")
    tmp_ctx = tempfile.TemporaryDirectory(prefix="priorart-models-exp-") if work_dir is None else None
    work = Path(work_dir) if work_dir is not None else Path(tmp_ctx.name)  # type: ignore[union-attr]
    work.mkdir(parents=True, exist_ok=True)
    blocks: list[Block] = []
    fusion_info: dict[str, Any] = {}
    try:
        records = list(iter_records([patents], progress=show))
        corpus = work / "corpus.jsonl"
        write_corpus(records, corpus)
        seconds["ingest"] = time.perf_counter() - t0
        t = time.perf_counter()
        if models_dir is None:
            from training.models.train import TrainConfig, train_models

            models_dir = work / "models"
            train_models(corpus, models_dir, config=TrainConfig(device=s.device, progress=show))
            seconds["train"] = time.perf_counter() - t
        models_dir = Path(models_dir)
        models_meta = json.loads((models_dir / ModelsLayout.META).read_text(encoding="utf-8"))
        split = Split.load(models_dir / ModelsLayout.SPLIT)
        unknown = [r.id for r in records if r.id not in split.part]
        if unknown:
            raise ExperimentError(
                f"{len(unknown)} documents (e.g. {unknown[0]}) are not in {models_dir / 'split.json'}: the models were "
                "trained on another corpus; train on this one (leave out --models)"
            )
        held_out = set(split.ids("dev")) | set(split.ids("test"))
        translation_dir = None
        if s.translation:
            t = time.perf_counter()
            from training.translation.tables import build_tables, write_tables

            tables, tmeta = build_tables(records, exclude_ids=held_out, progress=False)
            translation_dir = work / "translation"
            write_tables(translation_dir, tables, tmeta)
            seconds["translation"] = time.perf_counter() - t
        test_records = [r for r in records if split.part[r.id] == "test"]
        for task in s.tasks:
            t = time.perf_counter()
            index_dir = work / f"index-{task}"
            report = build_index(records, index_dir, overwrite=True, progress=show, translation_dir=translation_dir,
                                 models_dir=models_dir, dense_index=s.dense_index, device=s.device, fuse=True,
                                 fuse_task=task, index_langs=TASK_INDEX[task]["index_langs"],
                                 fields=TASK_INDEX[task]["fields"],
                                 translation=False, compounds="", ranker="none")  # the tables above are cross-fitted
            seconds[f"build_{task}"] = time.perf_counter() - t
            fusion_info[task] = report.fusion
            try:
                built = xling_task(test_records) if task == "xling" else known_item_task(test_records,
                                                                                        n=len(test_records))
            except ValueError as exc:
                notes.append(f"{task}: no test topics ({exc})")
                continue
            t = time.perf_counter()
            engine = Engine.load(index_dir, settings=Settings(index_dir=index_dir, device=s.device))
            try:
                for profile in PROFILES:
                    topics = profile_topics(built.topics, profile)
                    runs, rows, p_values, fused_as = evaluate_rows(engine, topics, built.qrels, s)
                    blocks.append(Block(task, profile, len(topics), rows, p_values, fused_as))
                    if out_dir is not None:
                        out = Path(out_dir)
                        for row, run in runs.items():
                            write_run(run, out / "runs" / f"{task}-{profile}-{row}.run", tag=f"{task}-{profile}-{row}")
                        write_topics(topics, out / f"topics-{task}-{profile}.jsonl")
            finally:
                engine.close()
            seconds[f"evaluate_{task}"] = time.perf_counter() - t
            if out_dir is not None:
                out = Path(out_dir)
                write_qrels(built.qrels, out / f"qrels-{task}.txt")
                png = index_dir / Layout.FUSION_PLOT
                if png.is_file():
                    shutil.copyfile(png, out / f"fusion-dev-{task}.png")
    finally:
        if tmp_ctx is not None:
            tmp_ctx.cleanup()
    seconds["total"] = time.perf_counter() - t0
    result = ModelsResult(
        settings=asdict(s), documents=len(records),
        models={"dir": str(models_dir), "timings_s": models_meta.get("timings_s"), "device": models_meta.get("device")},
        split=models_meta.get("split", {}), blocks=blocks, fusion=fusion_info, seconds=seconds, notes=notes)
    if out_dir is not None:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        (out / "models.json").write_text(json.dumps(result.to_dict(), indent=1, default=str) + "\n", encoding="utf-8")
    return result


def format_blocks(blocks: Sequence[Block], depth: int) -> list[str]:
    """One block per task and profile: a line per row with MRR, nDCG, S@1, S@10 and p-values against BM25."""
    lines: list[str] = []
    for b in blocks:
        lines.append(f"{b.task}, {'with codes' if b.profile == 'codes' else 'no codes'} "
                     f"({b.topics} test topics, depth {depth})")
        lines.append(f"{'row':<13}" + "".join(f"{m:>11} {'p':>6}" for m in MEASURES))
        for row, vals in b.rows.items():
            cells = ""
            for m in MEASURES:
                p = b.p_values.get(row, {}).get(m)
                cells += f"{vals[m]:>11.4f} {('' if p is None else f'{p:.3f}'):>6}"
            lines.append(f"{row:<13}{cells}")
        lines.append("fusion: " + "; ".join(f"{n} topics {how}" for how, n in b.fused_as.items()))
        lines.append("")
    return lines


def format_table(result: ModelsResult) -> str:
    """The blocks, then how fusion was learned for each task's index."""
    lines = format_blocks(result.blocks, result.settings["depth"])
    for task, f in result.fusion.items():
        if f and "table" in f:
            lines.append(f"{task}: fusion learned on dev (cross-validated):")
            lines.extend(f"  {line}" for line in f["table"].splitlines())
        elif f:
            lines.append(f"{task}: fusion not learned ({f.get('skipped')})")
    lines.append("seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in result.seconds.items()))
    lines.extend(f"note: {n}" for n in result.notes)
    return "\n".join(lines)


__all__ = ["Block", "ExperimentError", "ModelsResult", "ModelsSettings", "format_blocks", "format_table",
           "profile_topics", "run_models_experiment"]
