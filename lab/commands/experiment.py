"""``priorart-lab experiment ...``: experiments over the real data. ``xling``: German/French first claims of the
trilingual EP grants searched in an English-only index, with and without query translation. ``models``: BM25
vs dense vs reranking vs learned fusion on the test split (lab/experiments/models.py). ``passages``: the QSF
parameters tuned on the reference-sign proxy, held out (lab/experiments/passages.py)."""

from __future__ import annotations

import dataclasses
import json
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import typer

from lab.experiments.output import command_line, write_result
from training.commands import exit_2_on

_VARIANTS = ("qsf_v", "qsf_v_title", "qsf_section", "qsf_section_propagate", "qsf_passage_propagate")
experiment_app = typer.Typer(help="Experiments over the real data (see lab/experiments/).", no_args_is_help=True)


def failures_exit_2(*also: type[Exception]) -> AbstractContextManager[None]:
    """An experiment's refusals (bad settings, data it cannot use: :class:`ExperimentError`, ``ValueError`` and
    ``also``) as one line on stderr and exit status 2, without a traceback (:func:`training.commands.exit_2_on`)."""
    from lab.experiments import ExperimentError

    return exit_2_on(ExperimentError, ValueError, *also)


def folders_option() -> Any:
    """``--folders``: which of the shared data's folders the grant experiments read
    (``training.ingest.shared_records``): ``all`` (patents/, marec/, ops/: the 100 trilingual grants, the default) or
    ``default`` (patents/ep and patents/us: the 25 of the figures measured before the MAREC readers)."""
    return typer.Option("all", "--folders", help="The shared data's folders read: all (patents/, marec/, ops/: 100 "
                        "trilingual grants) or default (patents/ep and patents/us: 25).")


@experiment_app.command("xling")
def xling_command(
    data: Path = typer.Option(..., "--data", help="The shared data folder (with patents/ep and patents/us)."),
    folders: str = folders_option(),
    folds: int = typer.Option(
        5,
        "--folds",
        help="Cross-fitting folds: the aligned-claims model translating a "
        "topic is trained without the grants of its fold.",
    ),
    out: Path | None = typer.Option(None, "--out", help="Folder for xling.json (the result) and, with --runs, "
                                    "runs/xling-<row>.run and qrels.txt."),
    runs: bool = typer.Option(True, "--runs/--no-runs", help="With --out, also write the TREC runs and qrels."),
    depth: int = typer.Option(100, "--depth", help="Documents retrieved per topic."),
    max_query_terms: int | None = typer.Option(
        None, "--max-query-terms", help="Query reduction (first stage default 100; 0 keeps all terms)."
    ),
    lam: float = typer.Option(0.5, "--lambda", help="Weight of the aligned model in the 'both' row."),
    self_weight: float = typer.Option(
        0.1,
        "--self-weight",
        help="Self-translation probability for source terms "
        "that are English index terms too (cognates); 0 turns it off.",
    ),
    target_filter: bool = typer.Option(
        False,
        "--target-filter/--no-target-filter",
        help="Drop dictionary translations that do not occur in the English index.",
    ),
    max_alternatives: int = typer.Option(5, "--max-alternatives", help="Query-time pruning: translations per term."),
    cumulative: float = typer.Option(0.9, "--cumulative", help="Query-time pruning: probability mass kept."),
    function_words: bool = typer.Option(
        True,
        "--function-words/--no-function-words",
        help="Train the alignment model with stop words kept and drop rows that mostly align to them.",
    ),
    words_only: bool = typer.Option(
        False,
        "--words-only",
        help="Diagnostic: drop numbers, reference signs and codes "
        "from the topics (strings that match without translation).",
    ),
    reference_signs: bool = typer.Option(
        False,
        "--reference-signs/--no-reference-signs",
        help="Keep drawing reference signs like (12) in the topics (default: stripped, as a real query "
        "never shares them with the prior art; a grant and its own translation always do).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON instead of a table."),
    progress: bool | None = typer.Option(None, "--progress/--no-progress", help="Progress bars on stderr."),
) -> None:
    """Cross-lingual known-item search: de/fr first claims -> their grant in an English-only index.

    Rows: none (untranslated terms), dict (FreeDict), aligned (IBM-1 on aligned claims, k-fold
    cross-fitted), both (interpolated). Reports MRR, success@1, success@10, all and per language.
    """
    from lab.experiments.xling import XlingSettings, format_table, run_xling

    with failures_exit_2():
        settings = XlingSettings(
            folders=folders,
            folds=folds,
            depth=depth,
            max_query_terms=max_query_terms,
            lam=lam,
            self_weight=self_weight,
            target_filter=target_filter,
            max_alternatives=max_alternatives,
            cumulative=cumulative,
            words_only=words_only,
            reference_signs=reference_signs,
            function_words=function_words,
        )
        result = run_xling(data, settings, out_dir=out, progress=progress, write_runs=runs, command=command_line())
    if as_json:
        typer.echo(json.dumps(result.to_dict(), indent=1, sort_keys=True))
        return
    typer.echo(format_table(result))
    if out is not None:
        typer.echo(f"xling.json{', runs and qrels' if runs else ''} written to {out}")


@experiment_app.command("models")
def models_command(
    data: Path = typer.Option(..., "--data", help="The shared data folder (with patents/)."),
    models: Path | None = typer.Option(
        None, "--models", help="Models folder trained on this data (`priorart train`); default: train one first."
    ),
    out: Path | None = typer.Option(None, "--out", help="Folder for runs/, qrels, models.json and the dev plots."),
    work: Path | None = typer.Option(None, "--work", help="Keep the corpus, tables and indexes here (default: temp)."),
    depth: int = typer.Option(1000, "--depth", help="Candidate depth of the test rows."),
    dense_index: str = typer.Option("flat", "--dense-index", help="flat, hnsw or ivf."),
    device: str = typer.Option("auto", "--device", help="auto, cpu or cuda."),
    tasks: str = typer.Option("xling,known-item", "--tasks", help="Tasks to run: xling, known-item."),
    permutations: int = typer.Option(10_000, "--permutations", help="Randomisation test permutations."),
    translation: bool = typer.Option(True, "--translation/--no-translation", help="PSQ tables for de/fr topics."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON instead of tables."),
    progress: bool | None = typer.Option(None, "--progress/--no-progress", help="Progress bars on stderr."),
) -> None:
    """BM25 vs each model vs the installed fusion on the TEST split, without and with (subclass) codes.

    Tasks: xling (de/fr first claims -> English grant) and known-item (US title+abstract -> claims+description).
    Fusion weights are learned leak-free on the DEV split (cross-validated, installed only where they beat BM25);
    p-values: paired randomisation vs BM25.
    """
    from lab.experiments.models import ModelsSettings, format_table, run_models_experiment

    with failures_exit_2(FileNotFoundError):
        settings = ModelsSettings(depth=depth, dense_index=dense_index, device=device, permutations=permutations,
                                  tasks=tuple(t.strip() for t in tasks.split(",") if t.strip()),
                                  translation=translation)
        result = run_models_experiment(data, settings, models_dir=models, out_dir=out, work_dir=work,
                                       progress=progress)
    if as_json:
        typer.echo(json.dumps(result.to_dict(), indent=1, default=str))
        return
    typer.echo(format_table(result))
    if out is not None:
        typer.echo(f"runs, qrels, models.json and dev plots written to {out}")


@experiment_app.command("synthetic")
def synthetic_command(
    n: int = typer.Option(20_000, "-n", "--n", min=500, help="Synthetic documents."),
    work: Path | None = typer.Option(None, "--work", help="Keep corpus, models and index here (reused when present)."),
    out: Path | None = typer.Option(None, "--out", help="Folder for synthetic.json, test topics/qrels, the dev plot."),
    max_train_topics: int = typer.Option(1_500, "--max-train-topics", help="Cap on training topics."),
    epochs: int = typer.Option(4, "--epochs", min=1, help="Ranker / dual-encoder epochs."),
    topics: int = typer.Option(3_000, "--topics", min=10, help="Synthetic topics drawn (then split dev/test)."),
    depth: int = typer.Option(1000, "--depth", help="Candidate depth of the test rows."),
    folds: int = typer.Option(5, "--folds", min=2, help="Cross-validation folds of the fusion learning."),
    device: str = typer.Option("auto", "--device", help="auto, cpu or cuda."),
    seed: int = typer.Option(0, "--seed"),
    permutations: int = typer.Option(10_000, "--permutations", help="Randomisation test permutations."),
    translation: bool = typer.Option(True, "--translation/--no-translation",
                                     help="Index with the PSQ tables of every direction (the default build)."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    progress: bool | None = typer.Option(None, "--progress/--no-progress", help="Progress bars on stderr."),
) -> None:
    """Learned fusion where there is data to learn from: synthetic corpus, dev-split topics, test-split rows."""
    from lab.experiments.synthetic import SyntheticSettings, format_synthetic, run_synthetic_experiment

    with failures_exit_2(FileNotFoundError):
        result = run_synthetic_experiment(
            SyntheticSettings(n=n, seed=seed, max_train_topics=max_train_topics, epochs=epochs, topics=topics,
                              depth=depth, folds=folds, device=device, permutations=permutations,
                              translation=translation),
            work_dir=work, out_dir=out, progress=progress)
    typer.echo(json.dumps(result.to_dict(), indent=1, default=str) if as_json else format_synthetic(result))


@experiment_app.command("passages")
def passages_command(
    data: Path = typer.Option(..., "--data", help="The shared data folder (with patents/ep and patents/us)."),
    folds: int = typer.Option(2, "--folds", help="Cross-validation folds over the documents that give queries."),
    grid_step: float = typer.Option(0.1, "--grid-step", help="Step of the alpha/beta grid."),
    max_per_doc: int = typer.Option(3, "--max-per-doc", help="Proxy queries (claims) per document."),
    variants: str = typer.Option(",".join(_VARIANTS), "--variants", help="Comma-separated QSF variants."),
    tables: Path | None = typer.Option(None, "--tables", help="Translation tables (a folder, or an index folder of "
                                       "the same data): the queries reach the other languages too, as in the "
                                       "service."),
    out: Path | None = typer.Option(None, "--out", help="Write the result (JSON, per query included) here."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON instead of a table."),
    progress: bool | None = typer.Option(None, "--progress/--no-progress", help="Progress bars on stderr."),
) -> None:
    """Tune alpha, beta, sigma of each passage variant on the reference-sign proxy (grid search, MAP(D)) and
    report the held-out MAP(D) against the service defaults and the paper's values."""
    from lab.experiments.passages import (
        PassageTuningSettings,
        format_table,
        load_records,
        load_tables,
        run_passage_tuning,
    )

    with failures_exit_2():
        settings = PassageTuningSettings(folds=folds, grid_step=grid_step, max_per_doc=max_per_doc,
                                         variants=tuple(v.strip() for v in variants.split(",") if v.strip()))
        result = run_passage_tuning(load_records(data), settings, progress=progress,
                                    translations=load_tables(tables) if tables is not None else None)
    if out is not None:
        write_result({**result.to_dict(), "tables": str(tables) if tables is not None else None}, out,
                     command=command_line())
    if as_json:
        typer.echo(json.dumps(result.to_dict(), indent=1))
        return
    typer.echo(format_table(result))


def register(app: typer.Typer) -> None:
    """Add the ``experiment`` command group to the CLI."""
    app.add_typer(experiment_app, name="experiment")


@experiment_app.command("xling-tasks")
def xling_tasks_command(
    data: Path = typer.Option(..., "--data", help="The shared data folder (with patents/ep and patents/us)."),
    folders: str = folders_option(),
    tasks: str = typer.Option("descriptions,reverse,mate", "--tasks", help="descriptions, reverse and/or mate."),
    folds: int = typer.Option(5, "--folds", help="Cross-fitting folds (aligned models and splitter per fold)."),
    depth: int = typer.Option(100, "--depth", help="Documents retrieved per topic."),
    words_only: bool = typer.Option(
        False, "--words-only", help="Drop numbers, reference signs and codes from the topics (strings that match "
        "without translation)."
    ),
    compounds: str = typer.Option("de", "--compounds", help="Languages whose compounds the +compounds row splits."),
    lexicons: str | None = typer.Option(
        None, "--lexicons", help="Dictionaries of the tables: freedict, ding, both (comma-separated) or '' for "
        "none (default: the build's)."
    ),
    splitter_lexicons: str | None = typer.Option(
        None, "--splitter-lexicons", help="Dictionaries whose headwords the compound splitter knows (default: "
        "the build's)."
    ),
    out: Path | None = typer.Option(None, "--out", help="Folder for <task>.json (the result) and, with --runs, "
                                    "runs/ and <task>-qrels.txt."),
    runs: bool = typer.Option(True, "--runs/--no-runs", help="With --out, also write the TREC runs and qrels."),
    combines: str = typer.Option("", "--combines", help="Other route merges (weight, max, saturated), each a row "
                                 "'all+compounds, <merge> merge'."),
    prf: str = typer.Option("", "--prf", help="Pseudo-relevance feedback from the top N documents, each N a row "
                            "'all+compounds, prf N' (e.g. 3,10)."),
    as_json: bool = typer.Option(False, "--json", help="Print the results as JSON."),
    progress: bool | None = typer.Option(None, "--progress/--no-progress", help="Progress bars on stderr."),
) -> None:
    """Cross-lingual tasks in every direction: claims -> descriptions, English claim -> German/French-only
    grants, and the mate task; rows per table direction, with and without compound splitting."""
    from lab.experiments.xling_tasks import XlingTaskSettings, format_task_table, run_xling_task
    from training.ingest import shared_records
    from training.translation.lexicons import parse_lexicons

    with failures_exit_2():
        settings = XlingTaskSettings(folds=folds, folders=folders, depth=depth, words_only=words_only,
                                     compounds=tuple(c.strip() for c in compounds.split(",") if c.strip()),
                                     combines=tuple(c.strip() for c in combines.split(",") if c.strip()),
                                     prf=tuple(int(n) for n in prf.split(",") if n.strip()))
        if lexicons is not None:
            settings.lexicons = parse_lexicons(lexicons)
        if splitter_lexicons is not None:
            settings.splitter_lexicons = parse_lexicons(splitter_lexicons)
        records = shared_records(data, progress=progress, folders=folders)
        results = [run_xling_task(data, t.strip(), settings, out_dir=out, records=records, progress=progress,
                                  write_runs=runs, command=command_line())
                   for t in tasks.split(",") if t.strip()]
    if as_json:
        typer.echo(json.dumps([{k: v for k, v in r.to_dict().items() if k != "per_query"} for r in results], indent=1))
        return
    for r in results:
        typer.echo(format_task_table(r) + "\n")


@experiment_app.command("xling-passages")
def xling_passages_command(
    data: Path = typer.Option(..., "--data", help="The shared data folder (with patents/ep and patents/us)."),
    folders: str = folders_option(),
    folds: int = typer.Option(5, "--folds", help="Cross-fitting folds: a fold's grants hold one language only in "
                              "its indexes, so no table or compound list is trained on them."),
    directions: str = typer.Option("de-en,fr-en,en-de,en-fr,de-fr,fr-de", "--directions",
                                   help="Query language - language the grant keeps."),
    variants: str = typer.Option(",".join(_VARIANTS), "--variants", help="QSF variants to run."),
    k: int = typer.Option(100, "--k", help="Passages returned per topic."),
    words_only: bool = typer.Option(False, "--words-only", help="Drop numbers and codes from the topics too."),
    sweep: str | None = typer.Option(None, "--sweep", help="A passage parameter at several values, e.g. "
                                     "mu_translated=50,100,200: a row per value and one cross-fitted row."),
    baseline: Path | None = typer.Option(None, "--baseline", help="A result file of an earlier run (another "
                                         "commit's ranker): paired p-values of MRR against it."),
    out: Path | None = typer.Option(None, "--out", help="Write the result (JSON, per topic included) here."),
    work: Path | None = typer.Option(None, "--work", help="Keep the built indexes here and reuse them in later "
                                     "runs (empty the folder when the build changes)."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON instead of a table."),
    progress: bool | None = typer.Option(None, "--progress/--no-progress", help="Progress bars on stderr."),
) -> None:
    """Claims against their aligned twin claim in another language, in every direction, on /passages."""
    from lab.experiments.xling_passages import XlingPassageSettings, format_table, run_xling_passages

    with failures_exit_2(OSError):
        dirs = tuple(tuple(d.strip().split("-", 1)) for d in directions.split(",") if d.strip())
        swept = None
        if sweep:
            param, _, values = sweep.partition("=")
            swept = (param.strip(), tuple(float(v) for v in values.split(",") if v.strip()))
        settings = XlingPassageSettings(folds=folds, folders=folders, k=k, words_only=words_only,
                                        variants=tuple(v.strip() for v in variants.split(",") if v.strip()),
                                        directions=dirs, sweep=swept)  # type: ignore[arg-type]
        base = json.loads(baseline.read_text(encoding="utf-8")) if baseline is not None else None
        result = run_xling_passages(data, settings, baseline=base, out=out, work=work, progress=progress,
                                    command=command_line())
    if as_json:
        typer.echo(json.dumps({k: v for k, v in result.to_dict().items() if k != "per_query"}, indent=1))
        return
    typer.echo(format_table(result))


@experiment_app.command("ranking")
def ranking_command(
    data: Path = typer.Option(..., "--data", help="The shared data folder (with patents/ep and patents/us)."),
    folders: str = folders_option(),
    folds: int = typer.Option(5, "--folds", help="Folds of held-out grants (each fold's grants hold one language "
                              "only in its indexes)."),
    depth: int = typer.Option(100, "--depth", help="Documents ranked per topic."),
    tasks: str = typer.Option("", "--tasks", help="Tasks to run, comma-separated (claims, titles, own language, "
                              "main group); default: all."),
    min_relevant: int = typer.Option(1, "--min-relevant", help="main group: topics with at least this many other "
                                     "documents in their main group."),
    synthetic: int = typer.Option(20_000, "--synthetic", help="synthetic: documents of the synthetic corpus."),
    synthetic_topics: int = typer.Option(600, "--synthetic-topics", help="synthetic: prior-art topics."),
    out: Path | None = typer.Option(None, "--out", help="Write the result (JSON, per topic included) here."),
    work: Path | None = typer.Option(None, "--work", help="Keep the built indexes here and reuse them in later "
                                     "runs (the same indexes as xling-passages --work; empty it when the build "
                                     "changes)."),
    progress: bool | None = typer.Option(None, "--progress/--no-progress", help="Progress bars on stderr."),
    ranker_out: Path | None = typer.Option(None, "--ranker-out", help="When a learned ranker is installed (it won "
                                           "held out), write it here, learned on every topic: the folder `priorart "
                                           "build --ranker` reads (the project's default: training/rankers/default)."),
    values: str = typer.Option("10,50,1000", "--values", help="The passage rule's first documents (evidence_docs), "
                               "each a system per weight."),
    weights: str = typer.Option("0.25,0.5,1", "--weights", help="The passage rule's weights (evidence_weight)."),
    learned: str = typer.Option("gbm,mlp", "--learned", help="The learned rankers: gbm, mlp or both."),
    doc_maps: Path | None = typer.Option(None, "--doc-maps", help="Build each fold's indexes with its document maps "
                                         "(the folder `priorart-lab experiment adapter --maps-out` writes; the "
                                         "synthetic corpus with its all.npz); default: the frozen encoder."),
    models: bool = typer.Option(False, "--models", help="Train neural models per fold without its topics (priorart "
                                "train, ~6 min per fold; kept in --work), add them to copies of the indexes, and also "
                                "learn each ranker with the dense, text, meta and joint scores (measured, not "
                                "installed)."),
) -> None:
    """/search with passage evidence and with learned rankers against the fused order, on the hard real tasks (claims
    and titles across languages, own-language known items, a claim's main group) and a synthetic corpus; the choice
    held out, p-values by grant, the latency."""
    from lab.experiments.ranking import RankingSettings, format_table, run_ranking

    with failures_exit_2(OSError):
        chosen = tuple(t.strip() for t in tasks.split(",") if t.strip())
        def numbers(text: str, kind: type) -> tuple[Any, ...]:
            return tuple(kind(v) for v in text.split(",") if v.strip())

        settings = RankingSettings(folds=folds, folders=folders, depth=depth, min_relevant=min_relevant,
                                   synthetic=synthetic, synthetic_topics=synthetic_topics, models=models,
                                   doc_maps=None if doc_maps is None else str(doc_maps),
                                   values=numbers(values, int), weights=numbers(weights, float),
                                   learned=tuple(v.strip() for v in learned.split(",") if v.strip()))
        if chosen:
            settings = dataclasses.replace(settings, tasks=chosen)
        result = run_ranking(data, settings, out=out, work=work, progress=progress, command=command_line(),
                             ranker_out=ranker_out)
    typer.echo(format_table(result))
    if ranker_out is not None:
        typer.echo(f"ranker written to {ranker_out}: {result.ranker}" if result.ranker else
                   f"no ranker written: {result.install} was installed ({result.install_reason})")


@experiment_app.command("adapter")
def adapter_command(
    data: Path = typer.Option(..., "--data", help="The shared data folder (with patents/ep and patents/us)."),
    folders: str = folders_option(),
    folds: int = typer.Option(5, "--folds", help="Folds of held-out grants (the ranking experiment's)."),
    sides: str = typer.Option("documents", "--sides", help="Where the maps apply: query, both, or documents (one "
                              "map per language of the document's text)."),
    doc_maps: str = typer.Option("de,fr", "--doc-maps", help="With --sides documents: the languages whose documents "
                                 "are mapped (English documents keep the frozen vectors by default)."),
    objectives: str = typer.Option("sosl", "--objectives", help="sosl (seed 004's loss), infonce, or both."),
    targets: str = typer.Option("en,de,fr", "--train-targets", help="Train on the topics whose document text is in "
                                "these languages."),
    work: Path | None = typer.Option(None, "--work", help="The held-out indexes (shared with experiment ranking "
                                     "--work) and the query vectors' cache."),
    out: Path | None = typer.Option(None, "--out", help="Write the result (JSON, per topic included) here."),
    maps_out: Path | None = typer.Option(None, "--maps-out", help="With --sides documents: write each fold's maps "
                                         "(fold-N.npz, for `experiment ranking --doc-maps`) and the maps of every "
                                         "grant (all.npz, what `priorart build --doc-maps` installs) here."),
    install: bool = typer.Option(False, "--install", help="With --maps-out: when the maps pass the install rule (win "
                                 "titles and claims, lose no task and no direction), copy all.npz to "
                                 "training/encoders/doc-maps.npz, what `priorart build` installs by default."),
    progress: bool | None = typer.Option(None, "--progress/--no-progress", help="Progress bars on stderr."),
) -> None:
    """The pretrained encoder fine-tuned on patents (low-rank maps learned with seed 004's smooth ordinal search
    loss) against the frozen encoder: the dense stage alone, cross-fitted by grant, in every language direction."""
    from lab.experiments.adapter import format_adapter, install_maps, run_adapter
    from training.models.adapter import AdapterConfig

    with failures_exit_2(OSError):
        if install and maps_out is None:
            raise ValueError("--install needs --maps-out (the maps are written there first)")
        result = run_adapter(data, folds=folds, folders=folders, config=AdapterConfig(
                                 sides=sides, doc_maps=tuple(d.strip() for d in doc_maps.split(",") if d.strip())),
                             objectives=tuple(o.strip() for o in objectives.split(",") if o.strip()),
                             train_targets=tuple(t.strip() for t in targets.split(",") if t.strip()),
                             work=work, out=out, maps_out=maps_out, progress=progress, command=command_line())
    typer.echo(format_adapter(result))
    if install and maps_out is not None:
        with failures_exit_2(OSError):
            typer.echo(f"maps installed: {install_maps(result, maps_out)}")


@experiment_app.command("route-merge")
def route_merge_command(
    data: Path = typer.Option(..., "--data", help="The shared data folder (with patents/ep and patents/us)."),
    folds: int = typer.Option(5, "--folds", help="Cross-fitting folds (tables and compound splitter per fold)."),
    depth: int = typer.Option(100, "--depth", help="Documents retrieved per topic."),
    combines: str = typer.Option("", "--combines", help="Other route merges to compare (reference, weight, max, "
                                 "saturated, scaled)."),
    knees: str = typer.Option("", "--knees", help="Other knees of the default (aligned) merge to compare, e.g. 1,2."),
    prf: str = typer.Option("", "--prf", help="Pseudo-relevance feedback from the top N documents, each N a row."),
    out: Path | None = typer.Option(None, "--out", help="Write the result (JSON, per topic included) here."),
    progress: bool | None = typer.Option(None, "--progress/--no-progress", help="Progress bars on stderr."),
) -> None:
    """Own-language documents under the translated routes: titles in en/de/fr against the trilingual index, with
    the query's own route only and with every route merged (the routes must not push these documents down)."""
    from lab.experiments.route_merge import RouteMergeSettings, format_route_merge, run_route_merge

    with failures_exit_2():
        settings = RouteMergeSettings(folds=folds, depth=depth,
                                      combines=tuple(c.strip() for c in combines.split(",") if c.strip()),
                                      knees=tuple(float(k) for k in knees.split(",") if k.strip()),
                                      prf=tuple(int(n) for n in prf.split(",") if n.strip()))
        result = run_route_merge(data, settings, progress=progress)
    if out is not None:
        write_result(result.to_dict(), out, command=command_line())
    typer.echo(format_route_merge(result))


@experiment_app.command("code-prediction")
def code_prediction_command(
    data: Path = typer.Option(..., "--data", help="The shared data folder (with patents/ep and patents/us)."),
    index: Path | None = typer.Option(None, "--index", help="Use this index of the same data instead of building one."),
    out: Path | None = typer.Option(None, "--out", help="Write the result (JSON) here."),
    progress: bool | None = typer.Option(None, "--progress/--no-progress", help="Progress bars on stderr."),
) -> None:
    """Codes for a claim that brings none: the subclass and main group voted by its search's top documents (its own
    family left out), against the publication's own codes (P@1, S@3 per language; the corpus prior beside)."""
    from lab.experiments.code_prediction import format_code_prediction, run_code_prediction
    from training.ingest import shared_records

    with failures_exit_2():
        result = run_code_prediction(shared_records(data, progress=progress), index_dir=index, progress=progress)
    if out is not None:
        write_result(result.to_dict(), out, command=command_line())
    typer.echo(format_code_prediction(result))


@experiment_app.command("feedback")
def feedback_command(
    data: Path = typer.Option(..., "--data", help="The shared data folder (with patents/ep and patents/us)."),
    depth: int = typer.Option(100, "--depth", help="Documents retrieved per topic (recall@depth)."),
    terms: int = typer.Option(10, "--terms", help="Expansion terms per language."),
    min_relevant: int = typer.Option(3, "--min-relevant", help="Topics need this many relevant documents."),
    index: Path | None = typer.Option(None, "--index", help="Use this index of the same data instead of building one."),
    prf: str = typer.Option("", "--prf", help="Also pseudo-relevance feedback from the top N documents (no mark), "
                            "for each N, e.g. 3,10."),
    evidence_docs: int = typer.Option(0, "--evidence-docs", help="Order the first N of each search by their best "
                                      "passage (/search's default is 10); 0: the fused order, which the first "
                                      "stage's pseudo feedback is compared with."),
    out: Path | None = typer.Option(None, "--out", help="Write the result (JSON) here."),
    progress: bool | None = typer.Option(None, "--progress/--no-progress", help="Progress bars on stderr."),
) -> None:
    """Relevance feedback (Rocchio) on the first relevant hit: MRR and recall of the remaining relevant
    documents before and after (relevance: sharing the topic's first classification main group)."""
    from lab.experiments.feedback import format_feedback, run_feedback
    from training.ingest import shared_records

    with failures_exit_2():
        result = run_feedback(shared_records(data, progress=progress), depth=depth, terms=terms,
                              min_relevant=min_relevant, index_dir=index,
                              prf=tuple(int(n) for n in prf.split(",") if n.strip()), evidence_docs=evidence_docs)
    if out is not None:
        write_result({**dataclasses.asdict(result), "index": str(index) if index is not None else None}, out,
                     command=command_line())
    typer.echo(format_feedback(result))
