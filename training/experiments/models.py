"""Neural stages on the real data: BM25 vs dense vs plain reranking vs learned fusion (``priorart experiment models``).

Setup (``priorart experiment models --data DATA [--models MODELS_DIR] [--out DIR]``):

* corpus: every publication under ``DATA/patents`` (the corpus ``priorart train`` saw when
  ``--models`` was trained on it; without ``--models`` the models are trained here first);
* split: the models folder's ``split.json``: fusion weights are tuned on DEV topics, every figure
  below is on TEST topics, whose documents the rankers, the dual encoder, word2vec and the
  translation tables never trained on;
* translation tables (de/fr -> en, PSQ): IBM model 1 on the aligned claims of the TRAIN grants only
  (dev and test grants excluded) merged with FreeDict when installed, as in ``priorart translate``;
* tasks, each with its own index (``priorart build --models``, fusion learned on that task's dev topics):

  - ``xling``: German and French first claims (reference signs stripped, :func:`training.tasks.strip_reference_signs`)
    of the test trilingual EP grants against an English-only index (``--index-langs en``); relevant: the grant;
  - ``known-item``: English title + abstract of the test US utility grants against an index of claims and
    description (``--fields claims,description``, English); relevant: the grant itself.

Rows (one candidate set per topic: BM25 top ``depth`` united with the dense top ``depth``):

  ``bm25`` (first stage alone), ``dense`` (FAISS top depth alone), ``rerank-joint`` / ``rerank-stacked`` /
  ``rerank-text`` (plain reranking of the candidates by one ranker: joint text+meta, stacked text+meta,
  text only), ``fusion-stacked`` / ``fusion-joint`` / ``fusion-text`` (weighted fusion with the weights
  learned on dev for the nearest depth; stacked = BM25 + dense + text ranker + meta ranker, joint = BM25 +
  dense + joint ranker, text = BM25 + dense + text ranker).

Measures: MRR, nDCG, success@1, success@10 (ir-measures), with the paired randomisation test p-value of
each row against ``bm25`` per measure. Runs are written with score ``depth - rank`` (the rows' own order).
The service's own pipeline (:class:`service.engine.Engine`) is also run on the test topics: its per-stage
latency is reported and its ranking is checked against the ``fusion-<default variant>`` row.
"""

from __future__ import annotations

import json
import logging
import shutil
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from service.evaluation.measures import evaluate_run
from service.evaluation.significance import randomisation_test
from service.evaluation.trec import Qrels, Run, write_qrels, write_run, write_topics
from training.fusion import (
    DEFAULT_DEPTHS,
    VARIANT_TEXT,
    Stages,
    TopicScores,
    collect,
    fused_scores,
    rank_order,
    task_topics,
)

log = logging.getLogger(__name__)

TASKS = ("xling", "known-item")
SYSTEMS = ("bm25", "dense", "rerank-joint", "rerank-stacked", "rerank-text", "fusion-stacked", "fusion-joint",
           "fusion-text")
MEASURES = ("mrr", "ndcg", "success@1", "success@10")
TASK_INDEX = {
    "xling": {"index_langs": "en", "fields": "title,abstract,claims,description"},
    "known-item": {"index_langs": "en", "fields": "claims,description"},
}


class ExperimentError(ValueError):
    """The experiment cannot run on this input (the message says what is missing)."""


@dataclass
class ModelsSettings:
    depth: int = 1000
    fusion_depths: tuple[int, ...] = DEFAULT_DEPTHS
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
class TaskResult:
    task: str
    topics: int
    rows: dict[str, dict[str, float]]
    p_values: dict[str, dict[str, float]]
    fusion: dict[str, Any]
    build: dict[str, Any]
    latency_ms: dict[str, dict[str, float]]
    engine_check: dict[str, Any]
    per_query: dict[str, dict[str, dict[str, float]]] = field(repr=False, default_factory=dict)


@dataclass
class ModelsResult:
    settings: dict[str, Any]
    documents: int
    models: dict[str, Any]
    split: dict[str, Any]
    tasks: dict[str, TaskResult]
    seconds: dict[str, float]
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def system_order(ts: TopicScores, system: str, weights: Mapping[str, Mapping[str, float]]) -> np.ndarray:
    """Candidate indices of one row's ranking (see the module doc)."""
    if system == "bm25":
        return rank_order(ts.scores["bm25"], ts.rows, ts.in_bm25)
    if system == "dense":
        return rank_order(ts.scores["dense"], ts.rows, ts.in_dense)
    if system.startswith("rerank-"):
        return rank_order(ts.scores[system.split("-", 1)[1]], ts.rows)
    variant = system.split("-", 1)[1]
    return rank_order(fused_scores(ts, weights[variant], VARIANT_TEXT[variant]), ts.rows)


def runs_of(scored: Sequence[TopicScores], weights: Mapping[str, Mapping[str, float]]) -> dict[str, Run]:
    runs: dict[str, Run] = {}
    for system in SYSTEMS:
        run: Run = {}
        for ts in scored:
            order = system_order(ts, system, weights)
            run[ts.qid] = {ts.ids[int(i)]: float(len(order) - r) for r, i in enumerate(order)}
        runs[system] = run
    return runs


def _weights_at(fusion: Mapping[str, Any], depth: int) -> dict[str, dict[str, float]]:
    out = {}
    for variant, v in fusion["variants"].items():
        depths = sorted(int(d) for d in v["depths"])
        nearest = min(depths, key=lambda d: (abs(d - depth), d))
        out[variant] = dict(v["depths"][str(nearest)]["weights"])
    return out


def _latency(index_dir: Path, topics: Sequence[Any], depth: int, device: str,
             scored: Sequence[TopicScores], weights: Mapping[str, Mapping[str, float]],
             variant: str) -> tuple[dict[str, dict[str, float]], dict[str, Any]]:
    """Per-stage latency of the service pipeline at ``depth`` and agreement of its top 100 with the offline row."""
    from service.api.settings import Settings
    from service.engine import Engine
    from service.pipeline import Query

    engine = Engine.load(index_dir, settings=Settings(index_dir=index_dir, device=device))
    by_qid = {ts.qid: ts for ts in scored}
    times: dict[str, list[float]] = {}
    same = 0
    differ: list[str] = []
    for topic in topics:
        q = Query(text=topic.text, lang=topic.lang, codes=topic.codes, before=topic.before, k=100, depth=depth)
        cands, trace = engine.pipeline.run(q)
        for t in trace:
            times.setdefault(t["name"], []).append(float(t["ms"]))
        ts = by_qid.get(topic.qid)
        if ts is not None:
            offline = [int(ts.rows[i]) for i in system_order(ts, f"fusion-{variant}", weights)[:100]]
            if offline == [int(r) for r in cands.rows]:
                same += 1
            else:
                differ.append(topic.qid)
    total = [sum(v) for v in zip(*times.values(), strict=True)] if times else []
    stats = {name: {"mean": float(np.mean(v)), "median": float(np.median(v)), "p95": float(np.percentile(v, 95))}
             for name, v in {**times, "total": total}.items() if v}
    engine.close()
    return stats, {"topics": len(topics), "same_top100": same, "differ": differ[:10], "device": engine.device,
                   "stages": engine.pipeline.names}


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
    from training.build import build_index
    from training.ingest import iter_records
    from training.models.pairs import Split

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
        models_meta = json.loads((models_dir / "meta.json").read_text(encoding="utf-8"))
        split = Split.load(models_dir / "split.json")
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
        results: dict[str, TaskResult] = {}
        for task in s.tasks:
            t = time.perf_counter()
            index_dir = work / f"index-{task}"
            report = build_index(
                records, index_dir, overwrite=True, progress=show, translation_dir=translation_dir,
                models_dir=models_dir, dense_index=s.dense_index, device=s.device, fuse=True, fuse_task=task,
                index_langs=TASK_INDEX[task]["index_langs"], fields=TASK_INDEX[task]["fields"],
                translation=False, compounds="",  # the tables above are cross-fitted; the build's would not be
            )
            seconds[f"build_{task}"] = time.perf_counter() - t
            fusion = json.loads((index_dir / "models" / "fusion.json").read_text(encoding="utf-8"))
            try:
                topics, qrels = task_topics(test_records, task)
            except ValueError as exc:
                notes.append(f"{task}: no test topics ({exc})")
                continue
            t = time.perf_counter()
            stages = Stages.load(index_dir, s.device)
            scored = collect(stages, topics, qrels, s.depth, progress=show)
            weights = _weights_at(fusion, s.depth)
            runs = runs_of(scored, weights)
            rows, p_values, per_query = _evaluate(runs, qrels, s)
            seconds[f"evaluate_{task}"] = time.perf_counter() - t
            latency, check = _latency(index_dir, topics, s.depth, s.device, scored, weights, fusion["default_variant"])
            results[task] = TaskResult(
                task=task, topics=len(topics), rows=rows, p_values=p_values,
                fusion={"default_variant": fusion["default_variant"], "dev": fusion["dev"],
                        "weights_at_depth": weights, "dev_metrics": fusion["dev_metrics"]},
                build={"seconds": report.seconds, "models": report.models, "fusion": report.fusion},
                latency_ms=latency, engine_check=check, per_query=per_query,
            )
            if out_dir is not None:
                out = Path(out_dir)
                for system, run in runs.items():
                    write_run(run, out / "runs" / f"{task}-{system}.run", tag=f"{task}-{system}")
                write_qrels(qrels, out / f"qrels-{task}.txt")
                write_topics(topics, out / f"topics-{task}.jsonl")
                png = index_dir / "models" / "fusion.png"
                if png.is_file():
                    shutil.copyfile(png, out / f"fusion-dev-{task}.png")
    finally:
        if tmp_ctx is not None:
            tmp_ctx.cleanup()
    seconds["total"] = time.perf_counter() - t0
    result = ModelsResult(
        settings=asdict(s),
        documents=len(records),
        models={"dir": str(models_dir), "timings_s": models_meta.get("timings_s"), "cpu_s": models_meta.get("cpu_s"),
                "device": models_meta.get("device"),
                "dev_ndcg": {k: v.get("ndcg") for k, v in models_meta.get("dev", {}).items()
                             if isinstance(v, dict) and "ndcg" in v}},
        split=models_meta.get("split", {}),
        tasks=results,
        seconds=seconds,
        notes=notes,
    )
    if out_dir is not None:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        (out / "models.json").write_text(json.dumps(result.to_dict(), indent=1) + "\n", encoding="utf-8")
    return result


def _evaluate(
    runs: Mapping[str, Run], qrels: Qrels, s: ModelsSettings
) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, float]], dict[str, dict[str, dict[str, float]]]]:
    reports = {system: evaluate_run(run, qrels, MEASURES) for system, run in runs.items()}
    rows = {system: {m: float(r.aggregate[m]) for m in MEASURES} for system, r in reports.items()}
    base = reports["bm25"]
    p_values = {
        system: {m: float(randomisation_test(r.measure(m), base.measure(m), permutations=s.permutations, seed=s.seed))
                 for m in MEASURES}
        for system, r in reports.items() if system != "bm25"
    }
    per_query = {system: {m: r.measure(m) for m in MEASURES} for system, r in reports.items()}
    return rows, p_values, per_query


def format_table(result: ModelsResult) -> str:
    """One block per task: a line per row with MRR, nDCG, S@1, S@10 and p-values against BM25."""
    lines: list[str] = []
    for task, tr in result.tasks.items():
        head = f"{task} ({tr.topics} test topics, depth {result.settings['depth']})"
        lines.append(head)
        cols = "".join(f"{m:>11} {'p':>6}" for m in MEASURES)
        lines.append(f"{'row':<15}{cols}")
        for system, vals in tr.rows.items():
            cells = ""
            for m in MEASURES:
                p = tr.p_values.get(system, {}).get(m)
                cells += f"{vals[m]:>11.4f} {('' if p is None else f'{p:.3f}'):>6}"
            lines.append(f"{system:<15}{cells}")
        w = tr.fusion["weights_at_depth"]
        lines.append("weights: " + "; ".join(f"{v}: " + ", ".join(f"{k} {x:.1f}" for k, x in ws.items())
                                             for v, ws in w.items()))
        lat = ", ".join(f"{k} {v['mean']:.1f}" for k, v in tr.latency_ms.items())
        lines.append(f"service pipeline latency (ms, mean): {lat}; same top-100 as fusion-"
                     f"{tr.fusion['default_variant']}: {tr.engine_check['same_top100']}/{tr.engine_check['topics']}")
        lines.append("")
    lines.append("seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in result.seconds.items()))
    lines.extend(f"note: {n}" for n in result.notes)
    return "\n".join(lines)
