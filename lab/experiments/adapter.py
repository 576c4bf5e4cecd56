"""``priorart-lab experiment adapter``: the pretrained encoder fine-tuned on patents (low-rank maps learned with seed
004's smooth ordinal search loss, :mod:`training.models.adapter`) against the frozen encoder, cross-fitted by grant.

Setting: the ranking experiment's held-out indexes (:func:`lab.experiments.xling_passages.fold_engines`: per
fold and target language, the fold's trilingual grants hold only their target-language text; the same ``--work``
folder). Topics of a grant, for every direction ``src -> dst`` (de->en, fr->en, en->de, en->fr, de->fr, fr->de):
its ``src`` title (``titles``) and each of its ``src`` claims (``claims``; drawing reference signs stripped) against
the index where it holds only ``dst`` text; and its ``dst`` first claim (``own language``). The relevant document is
the grant; the measure is the dense stage alone (the rank of the grant by the cosine among every document of that
index: 729 with the shared data's ``all`` folders).

Cross-fitting: the maps scoring fold ``f``'s topics are trained on the grants of three other folds (their topics in
every direction, their vectors in each language from the indexes that hold them in it, every other document as a
candidate negative); the epoch is chosen on the fifth fold's grants (``dev``), never on fold ``f``'s. p-values: paired
randomisation test on the per-topic reciprocal rank against the frozen encoder, per task and per direction.

``install`` says whether the SOSL maps pass the rule of :func:`_install` (win titles and claims, lose no task and no
direction); nothing is installed by this command. The settings compared on these folds (docs/RESULTS.md, "Fine-tuning
the encoder on patents") were tried one after the other on the same held-out grants, so the last one's margin is an
optimistic figure until it is measured on grants outside the shared data.
"""

from __future__ import annotations

import hashlib
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from lab.experiments import ExperimentError
from lab.experiments.output import commit, write_result
from lab.experiments.xling import first_claim, trilingual_grants
from lab.experiments.xling_passages import DIRECTIONS, claim_topics, fold_engines
from service.codes import codes_at, record_codes
from service.corpus.record import PatentRecord
from training.evaluation.significance import randomisation_test
from training.models.adapter import (
    DOC_LANGS,
    OBJECTIVES,
    SIDES,
    AdapterConfig,
    AdapterPairs,
    Maps,
    document_maps,
    rank_of,
    train_adapter,
)

TASKS = ("titles", "claims", "own language")
FROZEN = "frozen"
LANGS = ("de", "en", "fr")


@dataclass
class AdapterTopic:
    qid: str
    task: str
    src: str
    dst: str
    grant: str
    fold: int
    text: str


@dataclass
class AdapterResult:
    settings: dict[str, Any]
    rows: dict[str, dict[str, dict[str, float]]]  # task -> system -> {"mrr", "success@1", "p"}
    directions: dict[str, dict[str, float]]  # "task src->dst" -> system -> mrr (and "system p")
    topics: dict[str, int]
    install: bool
    install_reason: str
    reports: dict[str, list[dict[str, Any]]]  # system -> per fold training report
    per_query: dict[str, dict[str, float]]  # system -> qid -> reciprocal rank
    seconds: dict[str, float]
    commit: str | None = field(default_factory=commit)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def grant_topics(grant: PatentRecord, fold: int, tasks: Sequence[str]) -> list[AdapterTopic]:
    from training.tasks import strip_reference_signs

    out: list[AdapterTopic] = []
    for src, dst in DIRECTIONS:
        title = (grant.title.get(src) or "").strip()
        if "titles" in tasks and title:
            out.append(AdapterTopic(f"titles:{grant.id}-{src}-{dst}", "titles", src, dst, grant.id, fold, title))
        if "claims" in tasks:
            out += [AdapterTopic(f"claims:{t.qid}", "claims", src, dst, grant.id, fold, t.text)
                    for t in claim_topics(grant, src, dst)]
    for dst in LANGS:
        if "own language" in tasks and grant.claims.get(dst):
            text = strip_reference_signs(first_claim(grant, dst))
            if text.strip():
                out.append(AdapterTopic(f"own:{grant.id}-{dst}", "own language", dst, dst, grant.id, fold, text))
    return out


def _main_groups(rec: PatentRecord) -> set[str]:
    return set(codes_at(record_codes(rec), "main_group"))


def _encode_queries(encoder: Any, texts: Sequence[str], cache: Path | None, progress: bool | None) -> np.ndarray:
    """Each text's frozen query vector (one query a run, as the service encodes them), cached in ``cache``."""
    keys = [hashlib.sha1(t.encode("utf-8")).hexdigest() for t in texts]
    known: dict[str, np.ndarray] = {}
    if cache is not None and cache.is_file():
        with np.load(cache) as z:
            known = dict(zip(z["keys"].tolist(), z["vectors"], strict=True))
    todo = {k: t for k, t in zip(keys, texts, strict=True) if k not in known}  # (a claim is a topic of two directions)
    for k, text in tqdm(todo.items(), desc="query vectors", file=sys.stderr,
                        disable=None if progress is None else not progress):
        known[k] = encoder.encode_query(text, "en")
    if cache is not None and todo:
        ks = sorted(known)
        np.savez(cache, keys=np.asarray(ks), vectors=np.stack([known[k] for k in ks]))
    return np.stack([known[k] for k in keys]).astype(np.float32)


def run_adapter(data: str | Path, *, folds: int = 5, tasks: Sequence[str] = TASKS, folders: str = "all",
                config: AdapterConfig | None = None, objectives: Sequence[str] = OBJECTIVES,
                train_targets: Sequence[str] = LANGS,
                work: str | Path | None = None, out: str | Path | None = None, maps_out: str | Path | None = None,
                records: Sequence[PatentRecord] | None = None, progress: bool | None = None,
                command: str | None = None) -> AdapterResult:
    """Run the experiment (module docstring)."""
    from service.retrieval.pretrained import document_language, load_pretrained
    from training.ingest import shared_records

    cfg = config or AdapterConfig()
    if cfg.sides not in SIDES:
        raise ExperimentError(f"unknown sides {cfg.sides!r}; valid: {', '.join(SIDES)}")
    unknown = set(objectives) - set(OBJECTIVES)
    if unknown:
        raise ExperimentError(f"unknown objectives {sorted(unknown)}; valid: {', '.join(OBJECTIVES)}")
    t0 = time.perf_counter()
    if records is None:
        records = shared_records(data, progress=progress, folders=folders)
    grants = trilingual_grants(records)
    if len(grants) < folds:
        raise ExperimentError(f"{len(grants)} trilingual EP grants found; need at least {folds} (one per fold)")
    fold_of = {g.id: i % folds for i, g in enumerate(grants)}
    vectors: dict[tuple[int, str], np.ndarray] = {}
    ids: list[str] | None = None
    encoder = None
    for fold, tgt, _held, engine in fold_engines(records, grants, folds, LANGS, work=work, progress=progress):
        these = list(engine.docs.ids)
        if ids is None:
            ids = these
            encoder = load_pretrained(engine.index_dir / "encoder")
        elif these != ids:
            raise ExperimentError(f"{engine.index_dir}: its documents are not in the other indexes' order")
        vectors[fold, tgt] = np.load(engine.index_dir / "dense" / "vectors.npy").astype(np.float32)
    assert ids is not None and encoder is not None
    row = {d: i for i, d in enumerate(ids)}
    published = vectors[0, "en"].copy()  # every document as published (a grant from an index that does not hold it)
    for g in grants:
        if fold_of[g.id] == 0:
            published[row[g.id]] = vectors[1 % folds, "en"][row[g.id]]
    by_id = {r.id: r for r in records}
    lang_of = {lang: i for i, lang in enumerate(DOC_LANGS)}
    published_langs = np.asarray([lang_of.get(document_language(by_id[d]) or "en", 0) for d in ids], dtype=np.int64)

    def index_langs(fold: int, tgt: str) -> np.ndarray:  # the dense text's language of each row of that index
        out = published_langs.copy()
        for g in grants:
            if fold_of[g.id] == fold:
                out[row[g.id]] = lang_of[tgt]
        return out

    groups = {r.id: _main_groups(r) for r in records if r.id in row}
    by_group: dict[str, list[int]] = {}
    for d, gs in groups.items():
        for code in gs:
            by_group.setdefault(code, []).append(row[d])
    related = {g.id: np.asarray(sorted({r for code in groups.get(g.id, ()) for r in by_group.get(code, [])}
                                       - {row[g.id]}), dtype=np.int64) for g in grants}
    topics = [t for g in grants for t in grant_topics(g, fold_of[g.id], tasks)]
    cache = Path(work) / "adapter-queries.npz" if work is not None else None
    q = _encode_queries(encoder, [t.text for t in topics], cache, progress)
    t_encoded = time.perf_counter()

    def pairs(sel: list[int]) -> AdapterPairs:
        return AdapterPairs(
            queries=q[sel],
            positives=np.stack([vectors[topics[i].fold, topics[i].dst][row[topics[i].grant]] for i in sel]),
            own=np.asarray([row[topics[i].grant] for i in sel], dtype=np.int64), docs=published,
            related=[related[topics[i].grant] for i in sel], doc_langs=published_langs,
            pos_langs=np.asarray([lang_of[topics[i].dst] for i in sel], dtype=np.int64))

    systems = [FROZEN, *objectives]
    rr: dict[str, dict[str, float]] = {s: {} for s in systems}
    reports: dict[str, list[dict[str, Any]]] = {s: [] for s in objectives}
    for f in tqdm(range(folds), desc="folds", file=sys.stderr, disable=None if progress is None else not progress):
        inner = (f + 1) % folds  # the epochs are chosen on one training fold's grants (never on fold f's)
        train = [i for i, t in enumerate(topics) if t.fold not in (f, inner) and t.dst in train_targets]
        dev = [i for i, t in enumerate(topics) if t.fold == inner]
        test = [i for i, t in enumerate(topics) if t.fold == f]
        adapters: dict[str, Maps] = {}
        for obj in objectives:
            adapters[obj], report = train_adapter(pairs(train), AdapterConfig(**{**asdict(cfg), "objective": obj}),
                                                  pairs(dev))
            if maps_out is not None and obj == "sosl" and cfg.sides == "documents":  # for the ranking experiment
                info = {"trained by": command or "priorart-lab experiment adapter", "commit": commit(), "fold": f,
                        "grants": sorted({topics[i].grant for i in train}), "epoch": report["epoch"]}
                document_maps(adapters[obj], cfg.doc_maps, info).save(Path(maps_out) / f"fold-{f}.npz")
            reports[obj].append({k: report[k] for k in ("thresholds", "pairs", "epoch", "dev mrr")}
                                | {"final loss": report["loss"][-1]})
        for dst in LANGS:
            sel = [i for i in test if topics[i].dst == dst]
            if not sel:
                continue
            docs = vectors[f, dst]
            truth = [row[topics[i].grant] for i in sel]
            langs = index_langs(f, dst)
            for name in systems:
                qs = q[sel] if name == FROZEN else adapters[name].queries(q[sel])
                ds = docs if name == FROZEN else adapters[name].documents(docs, langs)
                for i, r in zip(sel, rank_of(qs, ds, truth), strict=True):
                    rr[name][topics[i].qid] = 1.0 / float(r)
    t_cv = time.perf_counter()
    rows: dict[str, dict[str, dict[str, float]]] = {}
    directions: dict[str, dict[str, float]] = {}
    counts: dict[str, int] = {}
    for task in tasks:
        qids = [t.qid for t in topics if t.task == task]
        counts[task] = len(qids)
        if not qids:
            continue
        rows[task] = {}
        for name in systems:
            vals = [rr[name][k] for k in qids]
            rows[task][name] = {"mrr": float(np.mean(vals)), "success@1": float(np.mean([v == 1.0 for v in vals]))}
            if name != FROZEN:
                rows[task][name]["p"] = randomisation_test([rr[FROZEN][k] for k in qids], vals)
        for src, dst in sorted({(t.src, t.dst) for t in topics if t.task == task}):
            sub = [t.qid for t in topics if t.task == task and (t.src, t.dst) == (src, dst)]
            cell = directions.setdefault(f"{task} {src}->{dst}", {})
            for name in systems:
                cell[name] = float(np.mean([rr[name][k] for k in sub]))
                if name != FROZEN:
                    cell[f"{name} p"] = randomisation_test([rr[FROZEN][k] for k in sub], [rr[name][k] for k in sub])
    install, reason = _install(rows, directions)
    if maps_out is not None and "sosl" in objectives and cfg.sides == "documents":  # the maps a build installs
        train = [i for i, t in enumerate(topics) if t.fold != 0 and t.dst in train_targets]
        dev = [i for i, t in enumerate(topics) if t.fold == 0]
        maps, report = train_adapter(pairs(train), cfg, pairs(dev))
        info = {"trained by": command or "priorart-lab experiment adapter", "commit": commit(), "grants": len(grants),
                "dev grants": "fold 0", "epoch": report["epoch"], "thresholds": report["thresholds"],
                "config": report["config"], "install": install, "why": reason,
                "held out (cross-fitted MRR, dense alone)": {
                    t: {"maps": r["sosl"]["mrr"], "frozen": r[FROZEN]["mrr"]} for t, r in rows.items() if "sosl" in r}}
        document_maps(maps, cfg.doc_maps, info).save(Path(maps_out) / "all.npz")
    result = AdapterResult(
        settings={"folds": folds, "tasks": list(tasks), "folders": folders, "objectives": list(objectives),
                  "train_targets": list(train_targets),
                  "config": asdict(cfg), "documents": len(ids), "grants": len(grants)},
        rows=rows, directions=directions, topics=counts, install=install, install_reason=reason, reports=reports,
        per_query=rr, seconds={"indexes and query vectors": t_encoded - t0, "cross-fitting": t_cv - t_encoded,
                               "total": time.perf_counter() - t0},
    )
    if out is not None:
        write_result(result.to_dict(), out, command=command)
    return result


def install_maps(result: AdapterResult, maps_out: str | Path, dest: str | Path | None = None) -> Path:
    """Copy the maps of every grant (``maps_out/all.npz``) to ``dest`` (None: what ``priorart build`` installs by
    default, :data:`training.models.adapter.DEFAULT_DOC_MAPS`), only when the result passed the install rule."""
    import shutil

    from training.models.adapter import DEFAULT_DOC_MAPS

    if not result.install:
        raise ExperimentError(f"the maps are not installed: {result.install_reason}")
    src = Path(maps_out) / "all.npz"
    if not src.is_file():
        raise ExperimentError(f"{src}: missing (run with --sides documents and --objectives sosl)")
    target = Path(dest) if dest is not None else DEFAULT_DOC_MAPS
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, target)
    return target


def _install(rows: dict[str, dict[str, dict[str, float]]],
             directions: dict[str, dict[str, float]]) -> tuple[bool, str]:
    """The SOSL adapter replaces the frozen encoder when it wins titles and claims (higher MRR, p < 0.05) and loses
    no task and no direction of a task (lower MRR with p < 0.05): the pooled figure weighs the directions alike, the
    documents a search meets are mostly English, so a gain toward German and French documents must not pay for a
    loss toward English ones."""
    if any("sosl" not in by for by in rows.values()):
        return False, "the SOSL adapter was not run"
    lost = [t for t, by in rows.items() if by["sosl"]["mrr"] < by[FROZEN]["mrr"] and by["sosl"]["p"] < 0.05]
    lost += [d for d, by in directions.items() if by["sosl"] < by[FROZEN] and by["sosl p"] < 0.05]
    if lost:
        return False, f"the adapter loses on {', '.join(lost)} (p < 0.05)"
    need = [t for t in ("titles", "claims") if t in rows]
    unwon = [t for t in need if not (rows[t]["sosl"]["mrr"] > rows[t][FROZEN]["mrr"] and rows[t]["sosl"]["p"] < 0.05)]
    if unwon or not need:
        return False, f"no significant gain on {', '.join(unwon) or 'titles and claims (not run)'}"
    return True, "wins titles and claims held out (p < 0.05) and loses no task"


def format_adapter(result: AdapterResult) -> str:
    systems = [FROZEN, *result.settings["objectives"]]
    lines = [f"dense stage alone, cross-fitted by grant ({result.settings['folds']} folds, "
             f"{result.settings['documents']} documents): MRR (p against frozen)",
             f"{'task':<30}" + "".join(f"{s:>18}" for s in systems)]
    for task, by in result.rows.items():
        cells = [f"{by[s]['mrr']:.3f}" + (f" ({by[s]['p']:.3g})" if "p" in by[s] else "") for s in systems]
        lines.append(f"{task + ' (' + str(result.topics[task]) + ')':<30}" + "".join(f"{c:>18}" for c in cells))
    for name, cell in result.directions.items():
        cells = [f"{cell[s]:.3f}" + (f" ({cell[s + ' p']:.3g})" if s + " p" in cell else "") for s in systems]
        lines.append(f"  {name:<28}" + "".join(f"{c:>18}" for c in cells))
    lines.append(f"install: {result.install} ({result.install_reason})")
    return "\n".join(lines)


__all__ = ["AdapterResult", "AdapterTopic", "format_adapter", "grant_topics", "install_maps", "run_adapter"]
