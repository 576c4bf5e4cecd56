"""Cross-lingual passages: does ``/passages`` find a claim's twin in another language? (``priorart-lab experiment
xling-passages``).

Relevance from real structure: an EP grant publishes its claims in English, German and French, aligned claim by
claim, so German claim N and English claim N state the same thing. For a direction ``S -> T`` the topics are the
claims in ``S`` of the trilingual grants (drawing reference signs stripped) and each is run against an index in
which its grant holds **only its ``T`` text** (title, abstract and claims in ``T``; the description only when it is
written in ``T``) among every other publication of the real data, left as published (German- and French-text
documents included, so own-language passages compete). The relevant passage is claim N of the grant (passage id
``<grant>/claims/<N>``), in ``T``.

Directions: de->en, fr->en (the grant holds English only), en->de, fr->de (German only), en->fr, de->fr (French
only; de<->fr tables are composed through English).

Honesty (as ``priorart-lab experiment xling-tasks``): grants are split into ``folds`` folds; a fold's grants are the
ones stripped to one language, so the translation tables built by ``priorart build`` for that index never see
their aligned claims, and the German compound splitter of that index never counts their words. Every other
document is indexed as published. Each (fold, target language) is one index built by the plain ``build_index``
(tables of every direction, compounds) and searched through :class:`service.engine.Engine`, the API's own path.

Measured per direction and QSF variant (``/passages`` at the request's defaults but ``k`` = ``settings.k``):

* ``mrr`` -- reciprocal rank of the aligned claim (0 past ``k``), ``success@1``, ``success@10``;
* ``top_from_grant`` -- share of topics whose top passage belongs to the grant;
* ``grant_mrr`` -- reciprocal rank of the grant's first passage;
* ``search@1`` -- share of topics for which ``/search`` (in the fused order: ``evidence_docs`` 0) ranks the grant
  first (the same query, the same index):
  the goal is ``top_from_grant`` within 2 points of it;
* ``search_mrr`` -- reciprocal rank of the grant in ``/search`` (its top 100), and ``evidence_mrr`` -- in the
  documents ordered by their best passage (each document at the rank of its first passage among the ``k``; a
  document ranking with the passage evidence added, issue 33);
* ``tops`` -- what each topic's first passage is (:data:`TOP_KINDS`: the twin, another claim or another passage of
  the grant, a passage of another document and its language).

``sweep``: a passage parameter (``mu_translated``, ``rho``, ``alpha``, ...) run at several values; the row
``<variant> <param>=cross-fitted`` scores each half of the grants (by fold) with the value that was best on the
other half (MRR over all its topics), so that the chosen value is judged on grants it was not chosen on; the row
``... per query language`` chooses a value per query language the same way (on that language's topics), ``... per
passage language`` one per language the grant keeps (the twin's language).

``baseline``: a result file of an earlier run (another commit's ranker); each variant's per-topic reciprocal
ranks are compared with its own in a paired randomisation test (10,000 permutations).
"""

from __future__ import annotations

import logging
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tqdm import tqdm

from lab.experiments import ExperimentError
from lab.experiments.output import commit, write_result
from lab.experiments.xling import trilingual_grants, words_only
from service.corpus.record import PatentRecord
from service.passages.lm import VARIANTS
from service.schema import PassageHit
from training.evaluation.significance import randomisation_test

if TYPE_CHECKING:
    from service.engine import Engine

log = logging.getLogger(__name__)

DIRECTIONS: tuple[tuple[str, str], ...] = (("de", "en"), ("fr", "en"), ("en", "de"), ("en", "fr"), ("de", "fr"),
                                           ("fr", "de"))
MEASURES = ("mrr", "success@1", "success@10", "top_from_grant", "grant_mrr", "search@1", "search_mrr",
            "evidence_mrr")
SEARCH_DEPTH = 100
"""Documents of ``/search`` in which the grant's rank is looked for."""
SWEEPABLE = ("alpha", "beta", "beta_translated", "sigma", "mu", "mu_translated", "rho")


@dataclass
class XlingPassageSettings:
    folds: int = 5
    k: int = 100  # passages returned per query (the aligned claim's rank is looked for in them)
    folders: str = "all"  # the shared data's folders read (training.ingest.shared_records: all = patents, marec, ops)
    variants: tuple[str, ...] = VARIANTS
    directions: tuple[tuple[str, str], ...] = DIRECTIONS
    words_only: bool = False  # drop numbers and codes from the topics too
    max_claims: int = 0  # claims per grant and language (0: all; tests use a few)
    sweep: tuple[str, tuple[float, ...]] | None = None  # a passage parameter and its values (each one run)

    def __post_init__(self) -> None:
        if self.folds < 2:
            raise ExperimentError(f"folds must be >= 2 (cross-fitting needs held-out grants), got {self.folds}")
        if self.k < 10:
            raise ExperimentError(f"k must be >= 10 (success@10 is reported), got {self.k}")
        bad = [v for v in self.variants if v not in VARIANTS]
        if bad:
            raise ExperimentError(f"unknown passage variant(s) {bad}; valid: {', '.join(VARIANTS)}")
        if self.sweep is not None and (self.sweep[0] not in SWEEPABLE or not self.sweep[1]):
            raise ExperimentError(f"sweep a parameter of {', '.join(SWEEPABLE)} over one or more values, "
                                  f"got {self.sweep}")
        bad_dirs = [d for d in self.directions if d not in DIRECTIONS]
        if bad_dirs:
            raise ExperimentError(f"unknown direction(s) {bad_dirs}; valid: "
                                  f"{', '.join(f'{s}-{t}' for s, t in DIRECTIONS)}")


@dataclass
class Topic:
    qid: str  # <grant>-<claim num>-<lang>-<target lang>
    grant: str
    lang: str
    text: str
    relevant: str  # passage id of the aligned claim


@dataclass
class XlingPassageResult:
    settings: dict[str, Any]
    grants: list[str]
    topics: dict[str, int]  # direction -> topics run
    rows: dict[str, dict[str, dict[str, float]]]  # direction -> row (variant[, param=value]) -> measure -> value
    per_query: dict[str, dict[str, dict[str, float]]] = field(repr=False)  # row -> qid -> measure -> value
    chosen: dict[str, list[float]] = field(default_factory=dict)  # sweep: row -> value chosen per half
    p_values: dict[str, dict[str, float]] = field(default_factory=dict)  # direction -> variant -> p vs baseline
    baseline: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)  # the baseline's rows
    skipped: dict[str, int] = field(default_factory=dict)  # direction -> topics the engine refused (no terms)
    seconds: dict[str, float] = field(default_factory=dict)
    commit: str | None = None
    tops: dict[str, dict[str, str]] = field(default_factory=dict, repr=False)  # row -> qid -> what came first

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def keep_langs(rec: PatentRecord, langs: Sequence[str]) -> PatentRecord:
    """The record as a publication in ``langs`` only: its other titles, abstracts and claims removed, and its
    description unless written in one of ``langs`` (a grant as a German- or French-only application looks)."""
    keep = set(langs)
    update: dict[str, Any] = {
        "title": {k: v for k, v in rec.title.items() if k in keep},
        "abstract": {k: v for k, v in rec.abstract.items() if k in keep},
        "claims": {k: v for k, v in rec.claims.items() if k in keep},
    }
    if (rec.lang or "en") not in keep:
        update["description"] = []
        update["lang"] = langs[0]
    return rec.model_copy(update=update)


def claim_topics(grant: PatentRecord, lang: str, target: str, *, only_words: bool = False,
                 max_claims: int = 0) -> list[Topic]:
    """The grant's claims in ``lang`` as topics against its ``target`` text; the relevant passage is the claim of the
    same number."""
    from training.tasks import strip_reference_signs

    out: list[Topic] = []
    seen: set[int] = set()
    for claim in sorted(grant.claims.get(lang, []), key=lambda c: c.num):
        if claim.num in seen:  # a repeated number has no aligned twin to speak of
            continue
        seen.add(claim.num)
        text = strip_reference_signs(claim.text)
        if only_words:
            text = words_only(text)
        if not text.strip():
            continue
        out.append(Topic(f"{grant.id}-{claim.num}-{lang}-{target}", grant.id, lang, text,
                         f"{grant.id}/claims/{claim.num}"))
        if max_claims and len(out) >= max_claims:
            break
    return out


TOP_KINDS = ("twin", "grant claim", "grant other", "other en", "other de", "other fr", "none")
"""What a topic's first passage is: its twin; another claim of its grant; another passage of the grant (title,
abstract, description); a passage of another document, by language; nothing."""


def top_kind(topic: Topic, first: PassageHit | None) -> str:
    """The :data:`TOP_KINDS` entry of a topic's first passage (None: no passage)."""
    if first is None:
        return "none"
    if first.passage_id == topic.relevant:
        return "twin"
    if first.doc_id == topic.grant:
        return "grant claim" if first.passage_id.startswith(f"{first.doc_id}/claims/") else "grant other"
    return f"other {first.lang}"


def fold_engines(records: Sequence[PatentRecord], grants: Sequence[PatentRecord], folds: int,
                 targets: Sequence[str], *, work: str | Path | None = None, progress: bool | None = None,
                 doc_maps: str | Path | None = None) -> Iterator[tuple[int, str, list[PatentRecord], Engine]]:
    """The held-out indexes of the cross-lingual experiments, each opened through :class:`service.engine.Engine` (the
    API's path): per fold and target language, every publication as published but the fold's grants (``grants[i]``
    is in fold ``i % folds``), which hold only their ``target`` text (:func:`keep_langs`); the tables and the German
    compound splitter of that index never see them. Yields ``(fold, target, the fold's grants, engine)`` and closes
    each engine after its turn. ``work``: keep the indexes there and reuse those already built (empty it when the
    build changes); else they are built in a temporary folder. ``doc_maps``: a folder of per-fold document maps
    (``fold-N.npz`` of ``priorart-lab experiment adapter --maps-out``, learned without fold N's grants) that fold N's
    indexes are built with; None: the frozen encoder (never the project's default maps, learned on every grant)."""
    from service.engine import Engine
    from service.settings import Settings
    from training.build import build_index
    from training.translation.compounds import build_splitter

    bar = tqdm(total=folds * len(targets), desc="held-out indexes", file=sys.stderr,
               disable=None if progress is None else not progress)
    with tempfile.TemporaryDirectory(prefix="priorart-folds-") as tmp:
        folder = Path(work) if work is not None else Path(tmp)
        for fold in range(folds):
            held = [g for i, g in enumerate(grants) if i % folds == fold]
            held_ids = {g.id for g in held}
            splitters: dict[str, Any] | None = None
            for tgt in targets:
                idx = folder / f"index-{fold}-{tgt}"
                if not (idx / "meta.json").is_file():
                    if splitters is None:
                        splitters = {"de": build_splitter(records, "de", exclude_ids=held_ids)}
                    index_records = [keep_langs(r, [tgt]) if r.id in held_ids else r for r in records]
                    maps = None if doc_maps is None else Path(doc_maps) / f"fold-{fold}.npz"
                    build_index(index_records, idx, splitters=splitters, progress=False, overwrite=True,
                                ranker="none", doc_maps=maps)
                engine = Engine.load(idx, settings=Settings(index_dir=idx), verify=False)
                try:
                    yield fold, tgt, held, engine
                finally:
                    engine.close()
                bar.update(1)
    bar.close()


def _measure(topic: Topic, passages: Sequence[tuple[str, str]], search_ids: Sequence[str]) -> dict[str, float]:
    """One topic's measures from its ranked ``(doc_id, passage_id)`` and the ``/search`` ids."""
    rank = next((i + 1 for i, (_, pid) in enumerate(passages) if pid == topic.relevant), 0)
    grank = next((i + 1 for i, (doc, _) in enumerate(passages) if doc == topic.grant), 0)
    docs = list(dict.fromkeys(doc for doc, _ in passages))  # documents in the order of their best passage
    drank = docs.index(topic.grant) + 1 if topic.grant in docs else 0
    srank = list(search_ids).index(topic.grant) + 1 if topic.grant in search_ids else 0
    return {
        "mrr": 1.0 / rank if rank else 0.0,
        "success@1": float(rank == 1),
        "success@10": float(0 < rank <= 10),
        "top_from_grant": float(bool(passages) and passages[0][0] == topic.grant),
        "grant_mrr": 1.0 / grank if grank else 0.0,
        "search@1": float(bool(search_ids) and search_ids[0] == topic.grant),
        "search_mrr": 1.0 / srank if srank else 0.0,
        "evidence_mrr": 1.0 / drank if drank else 0.0,
    }


def run_xling_passages(
    data: str | Path,
    settings: XlingPassageSettings | None = None,
    *,
    records: Sequence[PatentRecord] | None = None,
    baseline: dict[str, Any] | None = None,
    out: str | Path | None = None,
    work: str | Path | None = None,
    progress: bool | None = None,
    command: str | None = None,
) -> XlingPassageResult:
    """Run the experiment (module docstring); with ``out`` write the result JSON there (with the commit and
    ``command``: :func:`lab.experiments.output.write_result`). ``work``: keep the built
    indexes in this folder and reuse those already there (for runs of another ranker on the same indexes; empty
    it when the build changes)."""
    from service.query import QueryError
    from service.schema import PassageRequest, SearchRequest
    from training.ingest import shared_records

    s = settings or XlingPassageSettings()
    t0 = time.perf_counter()
    if records is None:
        records = shared_records(data, progress=progress, folders=s.folders)
    grants = trilingual_grants(records)
    if len(grants) < s.folds:
        raise ExperimentError(f"{len(grants)} trilingual EP grants found; need at least {s.folds} (one per fold)")
    fold_of = {g.id: i % s.folds for i, g in enumerate(grants)}
    targets = sorted({t for _, t in s.directions})
    runs: list[tuple[str, str, dict[str, float]]] = []  # (row, variant, request parameters)
    for variant in s.variants:
        if s.sweep is None:
            runs.append((variant, variant, {}))
        else:
            runs += [(f"{variant} {s.sweep[0]}={value:g}", variant, {s.sweep[0]: value}) for value in s.sweep[1]]
    per_query: dict[str, dict[str, dict[str, float]]] = {row: {} for row, _, _ in runs}
    direction_of: dict[str, str] = {}
    skipped: dict[str, int] = {f"{a}-{b}": 0 for a, b in s.directions}
    tops: dict[str, dict[str, str]] = {}  # row -> qid -> what came first (TOP_KINDS)
    t_run = 0.0
    for _fold, tgt, held, engine in fold_engines(records, grants, s.folds, targets, work=work, progress=progress):
        t = time.perf_counter()
        for src, dst in s.directions:
            if dst != tgt:
                continue
            name = f"{src}-{dst}"
            for g in held:
                for topic in claim_topics(g, src, dst, only_words=s.words_only, max_claims=s.max_claims):
                    try:
                        found = engine.search(SearchRequest(query=topic.text, lang=src, k=SEARCH_DEPTH,
                                                            evidence_docs=0))
                        ids = [h.id for h in found.results]
                        for row, variant, params in runs:
                            res = engine.passages(PassageRequest.model_validate(
                                {"query": topic.text, "lang": src, "k": s.k, "variant": variant, **params}))
                            ranked = [(h.doc_id, h.passage_id) for h in res.results]
                            per_query[row][topic.qid] = _measure(topic, ranked, ids)
                            tops.setdefault(row, {})[topic.qid] = top_kind(
                                topic, res.results[0] if res.results else None)
                    except QueryError:
                        skipped[name] += 1
                        continue
                    direction_of[topic.qid] = name
        t_run += time.perf_counter() - t

    chosen: dict[str, list[float]] = {}
    if s.sweep is not None:  # per variant, each half of the grants scored with the value best on the other half
        half = {q: fold_of[q.split("-", 1)[0]] % 2 for q in direction_of}
        param, values = s.sweep
        query_langs = sorted({d.split("-", 1)[0] for d in direction_of.values()})
        passage_langs = sorted({d.split("-", 1)[1] for d in direction_of.values()})
        for variant in s.variants:
            # one value for every topic, one per query language and one per language of the grant's text (chosen on
            # the topics of that language)
            for name, groups in ((f"{variant} {param}=cross-fitted", {"": list(direction_of)}),
                                 (f"{variant} {param}=cross-fitted per query language",
                                  {src: [q for q, d in direction_of.items() if d.startswith(f"{src}-")]
                                   for src in query_langs}),
                                 (f"{variant} {param}=cross-fitted per passage language",
                                  {tgt: [q for q, d in direction_of.items() if d.endswith(f"-{tgt}")]
                                   for tgt in passage_langs})):
                per_query[name] = {}
                for group, members in groups.items():
                    picks = chosen.setdefault(f"{name} {group}".rstrip(), [])
                    for h in (0, 1):
                        train = [q for q in members if half[q] != h]
                        best = max(values, key=lambda v: (sum(per_query[f"{variant} {param}={v:g}"][q]["mrr"]
                                                              for q in train), -abs(v - values[0])))
                        picks.append(best)
                        per_query[name].update({q: per_query[f"{variant} {param}={best:g}"][q] for q in members
                                                if half[q] == h})
    rows: dict[str, dict[str, dict[str, float]]] = {}
    topics: dict[str, int] = {}
    for src, dst in s.directions:
        name = f"{src}-{dst}"
        qids = [q for q, d in direction_of.items() if d == name]
        topics[name] = len(qids)
        rows[name] = {row: {m: sum(by_q[q][m] for q in qids) / max(len(qids), 1) for m in MEASURES}
                      for row, by_q in per_query.items()}
    p_values: dict[str, dict[str, float]] = {}
    base_rows: dict[str, dict[str, dict[str, float]]] = {}
    if baseline is not None:
        base_pq = baseline.get("per_query", {})
        base_rows = baseline.get("rows", {})
        for name in rows:
            qids = [q for q, d in direction_of.items() if d == name]
            p_values[name] = {}
            for row, by_q in per_query.items():
                theirs = base_pq.get(row.split(" ", 1)[0], {})  # the baseline's run of the same variant
                common = [q for q in qids if q in theirs]
                if common:
                    p_values[name][row] = randomisation_test({q: by_q[q]["mrr"] for q in common},
                                                             {q: theirs[q]["mrr"] for q in common})
    result = XlingPassageResult(
        settings={**asdict(s), "directions": [f"{a}-{b}" for a, b in s.directions]},
        grants=[g.id for g in grants], topics=topics, rows=rows, per_query=per_query, chosen=chosen, p_values=p_values,
        baseline=base_rows, skipped=skipped,
        seconds={"indexes": time.perf_counter() - t0 - t_run, "queries": t_run, "total": time.perf_counter() - t0},
        commit=commit(), tops=tops)
    if out is not None:
        write_result(result.to_dict(), out, command=command)
    return result


def format_table(result: XlingPassageResult) -> str:
    """Markdown table: per direction and variant, the measures (and the baseline's MRR and p when given)."""
    base = bool(result.baseline)
    head = ("| direction | topics | variant | MRR | S@1 | S@10 | top passage from grant | grant MRR | /search @1 |"
            + (" MRR before | p |" if base else ""))
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for name, by_variant in result.rows.items():
        for v, m in by_variant.items():
            cells = (f"| {name} | {result.topics[name]} | {v} | {m['mrr']:.3f} | {m['success@1']:.2f} | "
                     f"{m['success@10']:.2f} | {m['top_from_grant']:.2f} | {m['grant_mrr']:.3f} | "
                     f"{m['search@1']:.2f} |")
            if base:
                before = result.baseline.get(name, {}).get(v.split(" ", 1)[0], {}).get("mrr")
                p = result.p_values.get(name, {}).get(v)
                cells += (f" {before:.3f} |" if before is not None else " - |") + (f" {p:.4f} |" if p is not None
                                                                                    else " - |")
            lines.append(cells)
    for row, values in result.chosen.items():
        lines.append("")
        lines.append(f"{row}: the value chosen on the other half of the grants, per half: "
                     f"{', '.join(f'{v:g}' for v in values)}")
    skipped = {k: v for k, v in result.skipped.items() if v}
    if skipped:
        lines.append("")
        lines.append("Topics without index terms (not run): " + ", ".join(f"{k} {v}" for k, v in skipped.items()))
    return "\n".join(lines)
