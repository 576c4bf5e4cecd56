"""``priorart-lab experiment ranking`` (the real-data run is in docs/RESULTS.md): the fused order against passage
evidence on the held-out indexes, a system chosen per fold on the other folds, and the install rule (a significant
held-out gain, no task significantly worse)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from lab.experiments import ExperimentError
from lab.experiments.ranking import (
    CROSS_FITTED,
    FUSION,
    RankingResult,
    RankingSettings,
    RankTopic,
    _choose,
    _install,
    format_table,
    run_ranking,
)


def _topics(task: str, n: int) -> list[RankTopic]:
    return [RankTopic(f"{task}:{i}", task, "en", f"{task}-g{i}", i % 2, "en", "x", frozenset({"D"})) for i in range(n)]


def _per_query(topics: list[RankTopic], values: dict[str, dict[str, float]]) -> dict[str, dict[str, dict[str, float]]]:
    """system -> qid -> measures, each system's value of a task on all its topics (alternating +-0.01 noise)."""
    return {name: {t.qid: dict.fromkeys(("mrr", "ndcg"), by_task[t.task] + (0.01 if int(t.qid.split(":")[1]) % 2
                                                                              else -0.01))
                   for t in topics} for name, by_task in values.items()}


def test_a_system_significantly_worse_on_one_task_is_not_chosen_however_much_it_gains_elsewhere() -> None:
    topics = _topics("claims", 30) + _topics("main group", 30)
    pq = _per_query(topics, {FUSION: {"claims": 0.5, "main group": 0.5},
                             "big": {"claims": 0.9, "main group": 0.3},
                             "small": {"claims": 0.6, "main group": 0.5}})
    assert _choose(pq, topics, [FUSION, "big", "small"]) == "small"
    pq["small"] = pq[FUSION]
    assert _choose(pq, topics, [FUSION, "big", "small"]) == FUSION  # nothing gains without a loss


def test_the_install_rule_wants_a_significant_held_out_gain_and_no_task_significantly_worse() -> None:
    topics = _topics("claims", 30) + _topics("main group", 30)
    pq = _per_query(topics, {FUSION: {"claims": 0.5, "main group": 0.5},
                             CROSS_FITTED: {"claims": 0.6, "main group": 0.5}})
    assert _install(pq, topics, "N=10 w=1", ["claims", "main group"])[0] == "N=10 w=1"
    pq[CROSS_FITTED] = _per_query(topics, {"x": {"claims": 0.6, "main group": 0.4}})["x"]
    name, reason = _install(pq, topics, "N=10 w=1", ["claims", "main group"])
    assert name == FUSION and "main group" in reason
    pq[CROSS_FITTED] = pq[FUSION]
    assert _install(pq, topics, "N=10 w=1", ["claims", "main group"])[0] == FUSION


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ExperimentError, match="task"):
        RankingSettings(tasks=("claims", "nonsense"))
    with pytest.raises(ExperimentError, match="weights"):
        RankingSettings(weights=(0.0,))
    with pytest.raises(ExperimentError, match="folds"):
        RankingSettings(folds=1)
    with pytest.raises(ExperimentError, match="learned ranker"):
        RankingSettings(learned=("gbm", "svm"))
    with pytest.raises(ExperimentError, match="extra feature"):
        RankingSettings(extra=("sentiment",))


@pytest.mark.slow
def test_the_experiment_runs_every_system_through_the_engine_and_cross_fits_the_choice(tmp_path: Path) -> None:
    """Every system through the engine, the learned rankers cross-fitted (each fold ranked by a model learned on the
    other folds), the choice per fold among them all; then with models (:func:`_with_models`)."""
    from training.synth import generate

    records = []
    for r in generate(60, seed=3):
        if r.kind == "B1" and all(r.claims.get(lang) for lang in ("en", "de", "fr")):
            r = r.model_copy(update={"id": "EP" + r.id[2:], "country": "EP"})
        records.append(r)
    s = RankingSettings(folds=2, values=(5,), weights=(1.0,), max_claims=2, tasks=("claims", "titles", "own language"))
    res = run_ranking(None, s, records=records, work=tmp_path / "work", out=tmp_path / "out.json", progress=False)
    assert set(res.rows) == {"claims", "titles", "own language"}
    learned = {f"learned {k}{x}" for k in ("gbm", "mlp")
               for x in ("", " with feedback", " with language", " with codes", " without kernels", " without fields",
                         " without classifier", " without dense")} | {"knrm"}
    assert set(res.rows["claims"]["all"]) == {FUSION, "N=5 w=1", CROSS_FITTED, *learned}
    assert len(res.chosen) == 2 and set(res.chosen) <= {FUSION, "N=5 w=1", "learned gbm", "learned mlp"}
    assert res.per_query[FUSION].keys() == res.per_query["N=5 w=1"].keys() == res.per_query[CROSS_FITTED].keys()
    assert all(res.per_query[name].keys() == res.per_query[FUSION].keys() for name in learned)
    assert res.latency_ms[FUSION]["p50"] > 0 and res.latency_ms["learned gbm"]["p50"] > 0
    assert "cross-fitted" in format_table(res) and (tmp_path / "out.json").is_file()
    kept = sorted(p.name for p in (tmp_path / "work").iterdir())  # the indexes, and word vectors where they had text
    assert [k for k in kept if not k.endswith(".word-vectors")] == [f"index-{f}-{t}" for f in (0, 1)
                                                                     for t in ("de", "en", "fr")]
    _with_models(records, s, res, tmp_path / "work")


def _with_models(records: list, s: RankingSettings, plain: RankingResult, work: Path) -> None:
    """``--models`` (on the same records and indexes as ``plain``): per fold, models trained on every record but the
    fold's grants (and their families), added to copies of the fold's indexes (their dual encoder takes the pretrained
    encoder's place); the fused order is BM25 + PSQ's (no fusion learned; the dense stage's other hits follow BM25's
    matches), and the rankers are also learned with the neural components' scores (``learned <kind> with models``),
    measured and never chosen."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("faiss")
    pytest.importorskip("torch")
    pytest.importorskip("gensim")
    import json

    from models_fixture import tiny_config

    from lab.experiments.xling import trilingual_grants

    settings = dataclasses.replace(s, learned=("gbm",), extra=(), models=True)
    modelled = run_ranking(None, settings, records=records, work=work, progress=False,
                           train_config=tiny_config())  # type: ignore[arg-type]
    # the same topics; the fused order is BM25's (the plain run's is BM25 and the pretrained encoder's cosine, fused)
    assert modelled.per_query[FUSION].keys() == plain.per_query[FUSION].keys()
    found = sum(m["mrr"] > 0 for m in modelled.per_query[FUSION].values())
    assert found > len(modelled.per_query[FUSION]) // 2
    assert "learned gbm with models" in modelled.rows["claims"]["all"]
    assert "learned gbm with models" not in plain.rows["claims"]["all"]
    assert "learned gbm with models" not in modelled.chosen  # measured, never chosen
    grants = [g.id for g in trilingual_grants(records)]
    folder = work / "with-models"
    for fold in (0, 1):
        split = json.loads((folder / f"models-{fold}" / "split.json").read_text(encoding="utf-8"))
        seen = {*split["train"], *split["dev"], *split["test"]}
        held = set(grants[fold::2])
        assert held and not held & seen and set(grants) - held <= seen
        for tgt in ("de", "en", "fr"):
            assert (folder / f"index-{fold}-{tgt}" / "dense").is_dir()


def test_the_models_extra_needs_indexes_with_models() -> None:
    with pytest.raises(ExperimentError, match="models"):
        RankingSettings(extra=("models",))
    assert "models" not in RankingSettings().extra and "models" in RankingSettings(models=True).extra


def test_first_claims_keeps_claim_one_of_the_claims_topics() -> None:
    """scripts/first_claims.py: the claim-1 topics of a result's claims task, per direction and together."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("first_claims", Path(__file__).parents[3] / "scripts" /
                                                  "first_claims.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    per_query = {"fusion": {"claims:EP1-1-de-en": {"mrr": 0.5, "success@1": 0.0},
                            "claims:EP1-2-de-en": {"mrr": 1.0, "success@1": 1.0},
                            "claims:EP2-1-fr-en": {"mrr": 1.0, "success@1": 1.0},
                            "claims:EP3-10-fr-en": {"mrr": 0.0, "success@1": 0.0},
                            "titles:EP1-de-en": {"mrr": 0.0, "success@1": 0.0}}}
    got = mod.first_claims(per_query, ["fusion"])["fusion"]
    assert set(got) == {"all", "de-en", "fr-en"}
    assert got["all"] == {"topics": 2, "mrr": 0.75, "first": 0.5}
    assert got["de-en"]["mrr"] == 0.5 and got["fr-en"]["mrr"] == 1.0
