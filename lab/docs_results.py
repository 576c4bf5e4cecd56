"""The measured tables of docs/RESULTS.md and the README, rendered from the result files in docs/results/
(``priorart-lab docs results``; ``--check`` fails when a document differs from its rendering).

A document marks each generated table with a pair of comments::

    <!-- BEGIN results NAME -->
    ...                                   (replaced by the rendering of NAME)
    <!-- END results -->

``NAME`` is a key of :data:`TABLES`; each table names the result files it reads (relative to docs/results/), each
written by the ``--out`` of a ``priorart-lab experiment`` command (:mod:`lab.experiments.output`), and ends with
the commit and the command that measured it. :func:`figure` reads one figure of a result file: the expected
figures (docs/results/expected.json) are checked against the result files and re-measured by
tests/test_docs_results.py.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RESULTS_DIR = REPO / "docs" / "results"
DOCUMENTS = (REPO / "docs" / "RESULTS.md", REPO / "README.md")
BLOCK = re.compile(r"(<!-- BEGIN results (?P<name>[\w./-]+) -->\n)(?P<body>.*?)(<!-- END results -->)", re.S)

Result = dict[str, Any]


class ResultsError(ValueError):
    """A document or result file is not what the generator expects (the message names it)."""


# ---- reading -------------------------------------------------------------------------------------------------


def load(name: str, results_dir: Path = RESULTS_DIR) -> Result:
    path = results_dir / name
    if not path.is_file():
        raise ResultsError(f"result file {path} not found (written by the command named in docs/RESULTS.md)")
    data: Result = json.loads(path.read_text(encoding="utf-8"))
    return data


def _xling_rows(r: Result, row: str, measure: str) -> float:
    lang = "all"
    if ":" in row:  # "all+compounds:de": one topic language
        row, lang = row.rsplit(":", 1)
    return float(r["rows"][row][lang][measure])


def _passages(r: Result, row: str, measure: str) -> float:
    return float(next(v for v in r["variants"] if v["variant"] == row)[measure])


def _feedback(r: Result, row: str, measure: str) -> float:
    return float(r[row][measure])  # row: before / after; measure: MRR, R@100


def _xling_passages(r: Result, row: str, measure: str) -> float:
    direction, variant = row.split(" ", 1)
    return float(r["rows"][direction][variant][measure])


# experiment -> how its result file is addressed by an expected figure's row and measure
FIGURES: dict[str, Callable[[Result, str, str], float]] = {
    "passages": _passages,
    "xling": _xling_rows,
    "xling-tasks": _xling_rows,
    "route-merge": _xling_rows,
    "feedback": _feedback,
    "xling-passages": _xling_passages,
    "code-prediction": _xling_rows,
}


def figure(experiment: str, result: Result, row: str, measure: str) -> float:
    """One figure of a result file: e.g. ``("passages", r, "qsf_v", "defaults")``, ``("xling-tasks", r,
    "all+compounds:de", "mrr")``. Raises :class:`ResultsError` for a row or measure the file lacks."""
    if experiment not in FIGURES:
        raise ResultsError(f"unknown experiment {experiment!r}; known: {', '.join(FIGURES)}")
    try:
        return FIGURES[experiment](result, row, measure)
    except (KeyError, StopIteration, ValueError) as exc:
        raise ResultsError(f"{experiment}: no figure {measure!r} of row {row!r} in the result file") from exc


# ---- rendering -----------------------------------------------------------------------------------------------


def _p(p: float | None) -> str:
    if p is None:
        return "–"
    from training.evaluation.significance import format_p

    return format_p(p)


def source(r: Result, name: str) -> str:
    """The line under a table: which file, which commit, which command."""
    seconds = r.get("seconds")
    total = seconds.get("total") if isinstance(seconds, Mapping) else seconds
    took = f" ({total / 60:.1f} min)" if isinstance(total, int | float) and total >= 90 else (
        f" ({total:.0f} s)" if isinstance(total, int | float) else "")
    command = r.get("command") or "(command not recorded)"
    return (f"Result file `docs/results/{name}`, measured at `{r.get('commit') or 'unknown commit'}`{took} by "
            f"`{command}`.")


def _ordered(keys: Any, order: Any) -> list[str]:
    """``keys`` in the order of ``order`` (a result file's keys are sorted), the others after them."""
    rank = {k: i for i, k in enumerate(order)}
    return sorted(keys, key=lambda k: (rank.get(k, len(rank)), k))


LANG_ORDER = ("all", "en", "de", "fr")


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head), *("| " + " | ".join(r) + " |" for r in rows)]


XLING_ROW_NAMES = {
    "none": "none (no translation)",
    "x-en only": "de→en, fr→en only",
    "de-en only": "de→en only",
    "fr-en only": "fr→en only",
    "en-de only": "en→de only",
    "en-fr only": "en→fr only",
    "all": "all (every table)",
    "all, reference merge": "all, routes merged by the reference score alone (ceilings not aligned)",
    "all, query-weight merge": "all, routes merged by Σ idf (k1+1)",
    "all, max merge": "all, routes merged by each route's best score",
    "all+compounds": "**all + compounds (default)**",
    "all+compounds, no parts": "all + compounds, parts never translated",
    "all+compounds, parts always": "all + compounds, parts always translated",
    "all+compounds, prf 3": "all + compounds, pseudo feedback from the top 3",
    "all+compounds, prf 10": "all + compounds, pseudo feedback from the top 10",
}


def xling_task_table(name: str, results_dir: Path = RESULTS_DIR) -> str:
    r = load(name, results_dir)
    langs = _ordered([k for k in next(iter(r["rows"].values())) if k != "all"], LANG_ORDER)
    head = ["translation", "MRR", "S@1", "S@10", *(f"MRR {x}" for x in langs if len(langs) > 1), "p vs none",
            "p vs all"]
    routes = r["task"] == "reverse"
    if routes:
        head.append("the grant's best route")
    rows = []
    for row in _ordered(r["rows"], XLING_ROW_NAMES):
        res = r["rows"][row]
        a = res["all"]
        p = r["p_values"].get(row, {})
        mrr = f"**{a['mrr']:.3f}**" if row == "all+compounds" else f"{a['mrr']:.3f}"
        cells = [XLING_ROW_NAMES.get(row, row), mrr, f"{a['success@1']:.2f}", f"{a['success@10']:.2f}",
                 *(f"{res[x]['mrr']:.3f}" for x in langs if len(langs) > 1),
                 _p(p.get("vs none")), _p(p.get("vs all"))]
        if routes:
            won = sorted(r["routes"].get(row, {}).items(), key=lambda kv: (-kv[1], kv[0]))
            cells.append(", ".join(f"{k} {v}" for k, v in won if k != "not found") or "–")
        rows.append(cells)
    lines = _table(head, rows)
    lines += ["", f"{r['topics']} topics ({len(r['grants'])} grants), {r['settings']['folds']} folds. "
              + source(r, name)]
    return "\n".join(lines)


def xling_table(name: str, results_dir: Path = RESULTS_DIR) -> str:
    r = load(name, results_dir)
    names = {"none": "none", "dict": "dictionary (FreeDict) only", "aligned": "aligned claims (IBM-1) only",
             "both": "**both (interpolated)**"}
    rows = [[names.get(row, row), f"{m['all']['mrr']:.3f}", f"{m['all']['success@1']:.2f}",
             f"{m['all']['success@10']:.2f}", f"{m['de']['mrr']:.3f}", f"{m['fr']['mrr']:.3f}",
             _p(r["p_values"].get(row))] for row, m in ((k, r["rows"][k]) for k in _ordered(r["rows"], names))]
    lines = _table(["tables", "MRR", "S@1", "S@10", "MRR de", "MRR fr", "p vs none"], rows)
    lines += ["", f"{r['topics']} topics ({len(r['grants'])} grants × de, fr), {r['settings']['folds']} folds. "
              + source(r, name)]
    return "\n".join(lines)


def _params(row: Mapping[str, Any]) -> str:
    parts = [f"α {row['alpha']:.1f}"]
    if row.get("beta") is not None:
        parts.append(f"β {row['beta']:.1f}")
    if row.get("sigma") is not None:
        parts.append(f"σ {row['sigma']:g}")
    return " ".join(parts)


VARIANT_NAMES = {"qsf_v": "QSF_v", "qsf_v_title": "QSF_v_title", "qsf_section": "QSF_section",
                 "qsf_section_propagate": "QSF_sectionPropagate", "qsf_passage_propagate": "QSF_passagePropagate"}


def passages_table(name: str, results_dir: Path = RESULTS_DIR) -> str:
    r = load(name, results_dir)
    rows = []
    for v in r["variants"]:
        rows.append([VARIANT_NAMES.get(v["variant"], v["variant"]), f"{v['defaults']:.3f}", f"{v['paper']:.3f}",
                     f"{v['tuned']:.3f}", " / ".join(f"{f['heldout_map_d']:.3f}" for f in v["folds"]),
                     _p(v["p_vs_defaults"]), "; ".join(_params(f) for f in v["folds"])])
    lines = _table(["variant", "defaults α = β = 0.5, σ = 1", "paper Table 4 (σ = 1)", "tuned, held out",
                    "per fold", "p tuned vs defaults", "tuned on the other fold"], rows)
    lines += ["", f"MAP(D), k = {r['settings']['k']}; {r['queries']} proxy queries from {r['query_documents']} "
              f"documents, {r['documents']} candidate documents, {r['settings']['folds']} folds by document. "
              + source(r, name)]
    return "\n".join(lines)


def xling_passages_table(name: str, results_dir: Path = RESULTS_DIR) -> str:
    r = load(name, results_dir)
    variant = "qsf_passage_propagate"
    base = bool(r.get("baseline"))
    head = ["direction", "topics", "MRR", "S@1", "S@10", "top passage from the grant", "`/search` @1"]
    if base:
        head += ["MRR before", "top from grant before", "p vs before"]
    directions = _ordered(r["rows"], r["settings"].get("directions", ()))
    rows = []
    for direction in directions:
        m = r["rows"][direction][variant]
        cells = [direction, str(r["topics"][direction]), f"**{m['mrr']:.3f}**", f"{m['success@1']:.2f}",
                 f"{m['success@10']:.2f}", f"{m['top_from_grant']:.2f}", f"{m['search@1']:.2f}"]
        if base:
            b = r["baseline"].get(direction, {}).get(variant, {})
            cells += [f"{b['mrr']:.3f}" if b else "–", f"{b['top_from_grant']:.2f}" if b else "–",
                      _p(r["p_values"].get(direction, {}).get(variant))]
        rows.append(cells)
    best = []
    for direction in directions:
        v, m = max(r["rows"][direction].items(), key=lambda kv: kv[1]["mrr"])
        best.append(f"{direction} {VARIANT_NAMES.get(v, v)} {m['mrr']:.3f}")
    lines = _table(head, rows)
    lines += ["", f"Variant `{variant}` (the service's default), k = {r['settings']['k']}, "
              f"{r['settings']['folds']} folds. The best variant per direction: {'; '.join(best)}. "
              + source(r, name)]
    return "\n".join(lines)


TOP_KIND_NAMES = {"twin": "twin first", "grant claim": "another claim of the grant",
                  "grant other": "another passage of the grant (description, abstract, title)",
                  "other en": "an English passage of another document",
                  "other de": "a German passage of another document",
                  "other fr": "a French passage of another document", "none": "no passage"}


def xling_passages_tops_table(name: str, results_dir: Path = RESULTS_DIR) -> str:
    """What each topic's first passage is (``xling-passages`` ``tops``), counted per direction, default variant."""
    from lab.experiments.xling_passages import TOP_KINDS

    r = load(name, results_dir)
    variant = "qsf_passage_propagate"
    tops = r.get("tops", {}).get(variant)
    if not tops:
        raise ResultsError(f"{name} has no 'tops' of {variant} (written by priorart-lab experiment xling-passages "
                           "since the tops were recorded)")
    directions = _ordered(r["rows"], r["settings"].get("directions", ()))
    counts = {d: {k: 0 for k in TOP_KINDS} for d in directions}
    for qid, kind in tops.items():
        direction = "-".join(qid.split("-")[-2:])
        if direction in counts:
            counts[direction][kind] += 1
    kinds = [k for k in TOP_KINDS if any(c[k] for c in counts.values())]
    lines = _table(["direction", *(TOP_KIND_NAMES[k] for k in kinds)],
                   [[d, *(str(counts[d][k]) for k in kinds)] for d in directions])
    lines += ["", f"Topics per direction by their first passage; variant `{variant}`, k = {r['settings']['k']}, "
              f"{r['settings']['folds']} folds. " + source(r, name)]
    return "\n".join(lines)


def xling_passages_sweep_table(name: str, results_dir: Path = RESULTS_DIR) -> str:
    """A sweep of one passage parameter (``xling-passages --sweep``): MRR / top passage from the grant per direction
    and value, the cross-fitted rows, and the values each half of the grants chose."""
    r = load(name, results_dir)
    param, values = r["settings"]["sweep"]
    variant = r["settings"]["variants"][0]
    directions = _ordered(r["rows"], r["settings"].get("directions", ()))
    crossed = ["cross-fitted", "cross-fitted per query language", "cross-fitted per passage language"]
    crossed = [c for c in crossed if any(f"{variant} {param}={c}" in by_row for by_row in r["rows"].values())]
    cols = [f"{variant} {param}={v:g}" for v in values] + [f"{variant} {param}={c}" for c in crossed]
    head = ["direction", *(f"{param} {v:g}" for v in values), *crossed]
    rows = [[d, *(f"{r['rows'][d][c]['mrr']:.3f} / {r['rows'][d][c]['top_from_grant']:.2f}" if c in r["rows"][d]
                  else "–" for c in cols)] for d in directions]
    lines = _table(head, rows)
    chosen = "; ".join(f"{row.removeprefix(f'{variant} {param}=cross-fitted').strip() or 'all topics'}: "
                       f"{', '.join(f'{v:g}' for v in picks)}" for row, picks in r.get("chosen", {}).items())
    lines += ["", f"MRR / top passage from the grant; variant `{variant}`, k = {r['settings']['k']}, "
              f"{r['settings']['folds']} folds. Chosen on the other half of the grants (half 1, half 2): {chosen}. "
              + source(r, name)]
    return "\n".join(lines)


ROUTE_MERGE_NAMES = {"own route only": "own route only", "all routes": "every route, ceilings aligned (default)",
                     "all routes, reference merge": "every route, reference merge (ceilings not aligned)",
                     "all routes, weight merge": "every route, query-weight merge (Σ idf (k1+1))",
                     "all routes, saturated merge": "every route, translated units saturated at (k1+1) × one best "
                                                    "occurrence",
                     "all routes, scaled merge": "every route, translated tf scaled to its best translation "
                                                 "(one occurrence of it = one of the source term)",
                     "all routes, max merge": "every route, each route's best score"}


def route_merge_table(name: str, results_dir: Path = RESULTS_DIR) -> str:
    r = load(name, results_dir)
    langs = _ordered(r["topics"], LANG_ORDER)
    head = ["merge", "MRR all", *(f"{x} ({r['topics'][x]})" for x in langs), "topics moved down / up",
            "p vs own route only"]
    rows = []
    named = _ordered(r["rows"], ROUTE_MERGE_NAMES)

    def order(row: str) -> tuple[int, float]:  # the named merges, then the knees, then feedback (by number)
        kind = 1 if ", knee " in row else 2 if ", prf " in row else 0
        return kind, float(row.rsplit(" ", 1)[1]) if kind else float(named.index(row))

    for row in sorted(r["rows"], key=order):
        by_lang = r["rows"][row]
        mv = r["moved"].get(row, {}).get("all")
        label = ROUTE_MERGE_NAMES.get(row, row)
        if row.startswith("all routes, knee "):
            label = f"every route, ceilings aligned above {row.rsplit(' ', 1)[1]}"
        elif row.startswith("all routes, prf "):
            label = f"every route (default), pseudo feedback from the top {row.rsplit(' ', 1)[1]}"
        elif row == "all routes" and "default_knee" in r["settings"]:
            label = f"every route, ceilings aligned above {r['settings']['default_knee']:g} (default)"
        rows.append([label, f"{by_lang['all']['mrr']:.3f}",
                     *(f"{by_lang[x]['mrr']:.3f}" for x in langs),
                     f"{mv['down']} / {mv['up']}" if mv else "–", _p(r["p_values"].get(row))])
    lines = _table(head, rows)
    lines += ["", f"MRR, depth {r['settings']['depth']}, {r['settings']['folds']} folds. " + source(r, name)]
    return "\n".join(lines)


def feedback_table(name: str, results_dir: Path = RESULTS_DIR) -> str:
    r = load(name, results_dir)
    prf = sorted(r.get("prf") or {}, key=int)  # pseudo-relevance feedback from the top N, when measured (--prf)
    rows = [[m, f"{r['before'][m]:.3f}", f"{r['after'][m]:.3f}", _p(r["p"][m]),
             *(x for n in prf for x in (f"{r['prf'][n][m]:.3f}", _p(r["prf_p"][n][m])))] for m in r["before"]]
    lines = _table(["measure", "before", "after", "p", *(x for n in prf for x in (f"pseudo feedback, top {n}", "p"))],
                   rows)
    ex = r.get("added_example") or {}
    lines += ["", f"{r['measured']} of {r['topics']} topics measured ({r['no_relevant_found']} without a relevant "
              f"document in the top {r['depth']}); {r['mean_relevant']:.1f} remaining relevant documents per "
              f"topic; {r['terms']} expansion terms"
              + (f" (e.g. {ex['topic']}, marked {ex['marked']}: added {', '.join(ex['added'])})" if ex else "")
              + ". " + source(r, name)]
    return "\n".join(lines)


CODE_PREDICTION_NAMES = {"reachable": "reachable (the ceiling)", "prior": "prior (the commonest codes)",
                         "classifier": "**classifier of the CPC titles**"}


def code_prediction_table(name: str, results_dir: Path = RESULTS_DIR) -> str:
    """``priorart-lab experiment code-prediction``: P@1 / S@3 of the voted codes per level and depth, and of the code
    classifier, per language."""
    r = load(name, results_dir)
    langs = _ordered(r["topics"], LANG_ORDER)
    rows = []
    def order(row: str) -> tuple[int, int, int]:  # subclass first; the ceiling, the prior, the votes by depth, the
        # classifier
        level, _, how = row.partition(" ")
        depth = int(how.split()[-1]) if how.startswith("top ") else 0
        return (level != "subclass", {"reachable": 0, "prior": 1, "classifier": 3}.get(how, 2), depth)

    for row in sorted(r["rows"], key=order):
        per = r["rows"][row]
        level, _, how = row.partition(" ")
        how = CODE_PREDICTION_NAMES.get(how, how.replace("top", "vote of the top"))
        cells = [(f"{per[x]['P@1']:.3f}" if how.startswith("reachable") else
                  f"{per[x]['P@1']:.3f} / {per[x]['S@3']:.3f}") if x in per else "–" for x in langs]
        rows.append([level.replace("_", " "), how, *cells])
    lines = _table(["level", "prediction", *(f"{x} ({r['topics'][x]})" for x in langs)], rows)
    lines += ["", "P@1 / S@3; reachable: one value (a share of topics). " + source(r, name)]
    return "\n".join(lines)


def _per_file(names: tuple[str, ...], results_dir: Path,
              row: Callable[[Result], list[str]]) -> tuple[list[list[str]], str]:
    """One table row per result file (``row`` of it) and the line under the table naming every file."""
    results = [load(name, results_dir) for name in names]
    return [row(r) for r in results], " ".join(source(r, name) for r, name in zip(results, names, strict=True))


def merges_table(names: tuple[str, ...], results_dir: Path = RESULTS_DIR) -> str:
    """``priorart-lab bench merges``: documents written, the most segments and the time of each policy, per run."""

    def row(r: Result) -> list[str]:
        t, o = r["tiered"], r["old"]
        return [f"{r['adds']} adds of {r['batch']:,} to {r['n_base']:,}",
                f"{t['written']:,} / {t['max_segments']} / {t['seconds']:.1f} s",
                f"{o['written']:,} / {o['max_segments']} / {o['seconds']:.1f} s",
                f"{t['written'] / o['written']:.2f}x / {t['seconds'] / o['seconds']:.2f}x"]

    rows, sources = _per_file(names, results_dir, row)
    lines = _table(["run", "tiered merges: written / most segments / time",
                    f"compaction past {load(names[0], results_dir)['old_bound']}: written / most / time",
                    "written / time"], rows)
    return "\n".join([*lines, "", sources])


def open_table(names: tuple[str, ...], results_dir: Path = RESULTS_DIR) -> str:
    """``priorart-lab bench open``: opening the generation after an add against the compacted index, per size."""

    def row(r: Result) -> list[str]:
        a, c = r["added"], r["compacted"]
        return [f"{r['n_base']:,} + {r['n_add']:,} ({a['segments']} segments)",
                f"{a['open_s']:.2f} s / {a['max_rss_mb']:,.0f} MB / {a['written_bytes']:,} B",
                f"{c['open_s']:.2f} s / {c['max_rss_mb']:,.0f} MB / {c['written_bytes']:,} B",
                f"{r['open_ratio']:.2f}x / {r['rss_ratio']:.2f}x",
                f"{a['first_passages_s'] * 1000:.0f} / {c['first_passages_s'] * 1000:.0f} ms"]

    rows, sources = _per_file(names, results_dir, row)
    lines = _table(["index", "after the add: open / peak memory / written at open", "one segment: the same",
                    "ratio open / memory", "first /passages after / one segment"], rows)
    results = [load(n, results_dir) for n in names]
    refs = [f"{r['n_base']:,}: {r.get('reference', 'the same collection compacted')}, medians of {r['rounds']} opens "
            "each" for r in results]
    return "\n".join([*lines, "", f"One segment: {'; '.join(refs)}; a fresh process per open, the two indexes "
                      "alternating. " + sources])


def reload_table(names: tuple[str, ...], results_dir: Path = RESULTS_DIR) -> str:
    """``priorart-lab bench reload``: a running server, adds in another process; per add the commit to the first answer
    from the new generation, memory and /search latency."""
    rows: list[list[str]] = []
    sources = []
    for name in names:
        r = load(name, results_dir)
        b = r["search_before"]
        size = f"{r['index_documents']:,} + {r['adds']} x {r['documents_added'] // r['adds']:,}"
        rows.append([size, "before", "", "", f"{b['p50_ms']:.1f} / {b['p99_ms']:.1f}", "",
                     f"{r['memory_mb_before'].get('rss', 0):,.0f}"])
        for i, x in enumerate(r["rounds"], 1):
            f, a = x["search"]["first_pass"], x["search"]["again"]
            rows.append(["", f"add {i} ({x['segments']} segments)", f"{x['add_s']:.1f} s",
                         f"**{x['commit_to_first_answer_s']:.2f} s**", f"{f['p50_ms']:.1f} / {f['p99_ms']:.1f}",
                         f"{a['p50_ms']:.1f} / {a['p99_ms']:.1f}", f"{x['memory_mb'].get('rss', 0):,.0f}"])
        sources.append(source(r, name))
    lines = _table(["index", "generation", "add to commit", "commit to first answer", "/search p50 / p99 ms (first "
                    "pass)", "again", "server rss MB"], rows)
    r0 = load(names[0], results_dir)
    return "\n".join([*lines, "", f"The server reloads every {r0['reload_interval_s']:g} s; {r0['queries']} first "
                      "claims of the added documents, searched one at a time over HTTP. " + " ".join(sources)])


def add_table(name: str, results_dir: Path = RESULTS_DIR) -> str:
    """``priorart-lab bench add``: an add against a full rebuild, and /search (and, where timed, the first stage alone)
    with many segments against one."""
    r = load(name, results_dir)

    def ratio(x: dict[str, float] | None) -> str:
        return f"{x['p50_ms']:.2f} / {x['p99_ms']:.2f}" if x else "–"

    rows = []
    parts = [("/search", {**r, **r["search"]})]
    if "first_stage" in r:
        parts.append(("first stage alone", r["first_stage"]))
    for i, (what, part) in enumerate(parts):
        m, o = part["many"], part["one"]
        head = ([f"{r['n_base']:,} + {r['n_add']:,}", f"{r['add_s']:.1f} s", f"{r['full_build_s']:.1f} s",
                 f"{r['speedup']:.1f}x"] if i == 0 else ["", "", "", ""])
        rows.append([*head, what, f"{m['p50_ms']:.1f} / {m['p99_ms']:.1f}", f"{o['p50_ms']:.1f} / {o['p99_ms']:.1f}",
                     f"{part['p50_ratio']:.2f} / {part['p99_ratio']:.2f}", ratio(part.get("first_pass_ratio")),
                     f"**{ratio(part.get('later_ratio'))}**"])
    m = r["search"]["many"]
    lines = _table(["index + added", "add", "full rebuild", "add faster", "timed",
                    f"{m['segments']} segments p50 / p99 ms", "1 segment p50 / p99 ms", "ratio p50 / p99",
                    "first pass", "later passes"], rows)
    return "\n".join([*lines, "", f"{r['queries']} title queries (en/de/fr, k = 10) x {r['rounds']} rounds, the two "
                      "indexes timed query by query in alternating order in one process; the first round is the "
                      "first use of each term and page after the open. /search orders its first 10 by their best "
                      "passage (the default); the first stage alone is the same request with evidence_docs 0. "
                      + source(r, name)])


def passage_evidence_table(name: str, results_dir: Path = RESULTS_DIR) -> str:
    """Documents ordered by their best passage against ``/search`` (``priorart-lab experiment xling-passages``'s
    ``evidence_mrr`` against ``search_mrr`` per topic; paired randomisation tests on MRR and on @1)."""
    from training.evaluation.significance import randomisation_test

    r = load(name, results_dir)
    variant = "qsf_passage_propagate"
    per = r["per_query"][variant]
    rows = []
    for direction in _ordered(r["rows"], r["settings"].get("directions", ())):
        keys = [k for k in per if k.endswith(f"-{direction}")]

        def mean(measure: str, keys: list[str] = keys) -> float:
            return sum(per[k][measure] for k in keys) / len(keys)

        pick = {m: {k: per[k][m] for k in keys} for m in ("search_mrr", "evidence_mrr", "search@1", "top_from_grant")}
        rows.append([direction, str(len(keys)), f"{mean('search_mrr'):.3f}", f"**{mean('evidence_mrr'):.3f}**",
                     f"{mean('evidence_mrr') - mean('search_mrr'):+.3f}",
                     _p(randomisation_test(pick["evidence_mrr"], pick["search_mrr"])),
                     f"{mean('search@1'):.2f} / {mean('top_from_grant'):.2f}",
                     _p(randomisation_test(pick["top_from_grant"], pick["search@1"]))])
    lines = _table(["direction", "topics", "`/search` MRR", "best passage's documents MRR", "gain", "p (MRR)",
                    "@1 `/search` / best passage", "p (@1)"], rows)
    return "\n".join([*lines, "", f"Variant `{variant}`, {r['settings']['k']} passages of `/search`'s candidates; "
                      f"{len(r['grants'])} grants, {r['settings']['folds']} folds. " + source(r, name)])


def _experiment_result(name: str, results_dir: Path, cls: type, command: str,
                       optional: tuple[str, ...]) -> tuple[Result, Any]:
    """The result file ``name``, and the same read back as the experiment's result dataclass ``cls`` (refused, naming
    the experiment's ``command``, when a field other than ``optional`` is missing)."""
    from dataclasses import fields

    r = load(name, results_dir)
    names = {f.name for f in fields(cls)}
    missing = sorted(n for n in names - set(r) if n not in optional)
    if missing:
        raise ResultsError(f"docs/results/{name}: no {', '.join(missing)} (a result of `priorart-lab experiment "
                           f"{command}`?)")
    return r, cls(**{k: v for k, v in r.items() if k in names})


def ranking_table(name: str, results_dir: Path = RESULTS_DIR) -> str:
    """``priorart-lab experiment ranking``: the fused order against passage evidence in ``/search``, per task (the
    experiment's own tables)."""
    from lab.experiments.ranking import RankingResult, format_table

    r, result = _experiment_result(name, results_dir, RankingResult, "ranking",
                                   ("skipped", "seconds", "commit", "ranker"))
    return format_table(result) + "\n\n" + source(r, name)


def adapter_table(name: str, results_dir: Path = RESULTS_DIR) -> str:
    """``priorart-lab experiment adapter``: the encoder's fine-tuned maps against the frozen encoder, the dense stage
    alone (the experiment's own table)."""
    from lab.experiments.adapter import AdapterResult, format_adapter

    r, result = _experiment_result(name, results_dir, AdapterResult, "adapter", ("seconds", "commit"))
    return "```\n" + format_adapter(result) + "\n```\n\n" + source(r, name)


def watch_table(name: str, results_dir: Path = RESULTS_DIR) -> str:
    """``priorart-lab bench watch``: the evaluation after an add, in all and per watch by how it was settled."""
    r = load(name, results_dir)
    e, pw = r["evaluation"], r["per_watch_ms"]
    how = {"all": "every watch", "bound": "settled by the bound (no search)", "search": "searched"}
    rows = [[how.get(k, k), str(v["count"]), f"{v['p50']:.2f}", f"{v['p99']:.2f}", f"{v['mean']:.2f}"]
            for k, v in pw.items()]
    lines = _table(["watches", "count", "p50 ms", "p99 ms", "mean ms"], rows)
    v = r.get("verify")
    lines += ["", f"{r['watches']:,} watches ({r['real_claims']:,} real claims of the shared data, "
              f"{r['synthetic_claims']:,} synthetic first claims; en/de/fr; k "
              f"{', '.join(f'{k}: {n:,}' for k, n in r['k'].items())}) on {r['n_base']:,} synthetic documents, then "
              f"an add of {r['added']:,} ({r['n_add'] / r['n_base']:.0%}): **{r['evaluation_s']:.1f} s** to evaluate "
              f"them all ({r['mean_ms_per_watch']:.2f} ms per watch), {e['hits']:,} hits, {e['errors']} failed. "
              f"Memory: {r['rss_before_mb']:,.0f} MB resident with the index loaded, {r['rss_peak_mb']:,.0f} MB at the "
              f"peak of the evaluation; the state database {r['store_mb']:.1f} MB. Not in the figure: saving the "
              f"watches ({r['save_s']:.0f} s, a search each), the add ({r['add_s']:.1f} s), loading the new "
              f"generation ({r['load_s']:.1f} s). {r['cpus']} CPUs, load average {r['load_before']} as the "
              f"evaluation started and {r['load_after']} as it ended."
              + (f" Exactness: every watch's search run again after the add, {v['expected_hits']:,} new documents in "
                 f"their top k, **{v['mismatches']}** watches whose hits differ." if v else "")
              + " " + source(r, name)]
    return "\n".join(lines)


def _count(grants: int | list[Any]) -> int:
    """A result's grants: their number, or the list of their ids."""
    return grants if isinstance(grants, int) else len(grants)


def summary_table(results_dir: Path = RESULTS_DIR) -> str:
    """The README's table: each cross-lingual task, without translation and with the default build."""
    tasks = [("xling-tasks/mate.json", "German/French first claim → English-only index"),
             ("xling-tasks/descriptions.json", "German/French first claim → descriptions (en, de, fr)"),
             ("xling-tasks/reverse.json", "English first claim → German/French-only grants"),
             ("xling-tasks/titles.json", "German/French title → English-only index")]
    rows = []
    commits = set()
    for name, label in tasks:
        r = load(name, results_dir)
        commits.add(r.get("commit") or "unknown commit")
        a, b = r["rows"]["none"]["all"], r["rows"]["all+compounds"]["all"]
        rows.append([label, str(_count(r["grants"])), str(r["topics"]), f"{a['mrr']:.3f}", f"**{b['mrr']:.3f}**",
                     f"{b['success@10']:.2f}"])
    p = load("xling-passages.json", results_dir)
    commits.add(p.get("commit") or "unknown commit")
    for direction, label in (("de-en", "German claim → its English twin claim (`/passages`)"),
                             ("en-de", "English claim → its German twin claim (`/passages`)")):
        m = p["rows"][direction]["qsf_passage_propagate"]
        rows.append([label, str(_count(p["grants"])), str(p["topics"][direction]), "–", f"**{m['mrr']:.3f}**",
                     f"{m['success@10']:.2f}"])
    lines = _table(["task (topics from the trilingual EP grants)", "grants", "topics",
                    "MRR without translation", "MRR (default build)", "S@10"], rows)
    lines += ["", f"Cross-fitted (no table or compound list saw a topic's grant); measured at "
              f"{', '.join(f'`{c}`' for c in sorted(commits))}; commands and every row in "
              "[docs/RESULTS.md](docs/RESULTS.md)."]
    return "\n".join(lines)


def _file(render: Callable[[str, Path], str], name: str) -> Callable[[Path], str]:
    return lambda results_dir: render(name, results_dir)


@dataclass(frozen=True)
class Table:
    render: Callable[[Path], str]
    files: tuple[str, ...]


MERGES_FILES = ("merges/2k.json", "merges/20k.json")
OPEN_FILES = ("open/20k.json", "open/100k.json", "open/1m.json")
RELOAD_FILES = ("reload/100k.json", "reload/1m.json")

TABLES: dict[str, Table] = {
    **{f"xling-tasks/{t}": Table(_file(xling_task_table, f"xling-tasks/{t}.json"), (f"xling-tasks/{t}.json",))
       for t in ("descriptions", "reverse", "mate", "titles")},
    "xling-tasks-words-only/mate": Table(_file(xling_task_table, "xling-tasks-words-only/mate.json"),
                                         ("xling-tasks-words-only/mate.json",)),
    "xling": Table(_file(xling_table, "xling/xling.json"), ("xling/xling.json",)),
    "passages": Table(_file(passages_table, "passages.json"), ("passages.json",)),
    "xling-passages": Table(_file(xling_passages_table, "xling-passages.json"), ("xling-passages.json",)),
    "passage-evidence": Table(_file(passage_evidence_table, "passage-evidence.json"), ("passage-evidence.json",)),
    "ranking": Table(_file(ranking_table, "ranking.json"), ("ranking.json",)),
    "ranking-frozen": Table(_file(ranking_table, "ranking-frozen.json"), ("ranking-frozen.json",)),
    "ranking-bm25": Table(_file(ranking_table, "ranking-bm25.json"), ("ranking-bm25.json",)),
    "ranking-models": Table(_file(ranking_table, "ranking-models.json"), ("ranking-models.json",)),
    "ranking-codes": Table(_file(ranking_table, "ranking-codes.json"), ("ranking-codes.json",)),
    "adapter": Table(_file(adapter_table, "adapter.json"), ("adapter.json",)),
    "add": Table(_file(add_table, "live/add-100k.json"), ("live/add-100k.json",)),
    "xling-passages-tops": Table(_file(xling_passages_tops_table, "xling-passages.json"), ("xling-passages.json",)),
    "xling-passages-rho": Table(_file(xling_passages_sweep_table, "xling-passages-rho.json"),
                                ("xling-passages-rho.json",)),
    "xling-passages-beta": Table(_file(xling_passages_sweep_table, "xling-passages-beta.json"),
                                 ("xling-passages-beta.json",)),
    "route-merge": Table(_file(route_merge_table, "route-merge.json"), ("route-merge.json",)),
    "feedback": Table(_file(feedback_table, "feedback.json"), ("feedback.json",)),
    "watch": Table(_file(watch_table, "watch.json"), ("watch.json",)),
    "code-prediction": Table(_file(code_prediction_table, "code-prediction.json"), ("code-prediction.json",)),
    "merges": Table(lambda results_dir: merges_table(MERGES_FILES, results_dir), MERGES_FILES),
    "open": Table(lambda results_dir: open_table(OPEN_FILES, results_dir), OPEN_FILES),
    "reload": Table(lambda results_dir: reload_table(RELOAD_FILES, results_dir), RELOAD_FILES),
    "summary": Table(summary_table, tuple(f"xling-tasks/{t}.json" for t in ("mate", "descriptions", "reverse",
                                                                                 "titles")) + ("xling-passages.json",)),
}


def render_document(text: str, results_dir: Path = RESULTS_DIR, *, where: str = "document") -> str:
    """``text`` with every marked block replaced by its table."""

    def one(m: re.Match[str]) -> str:
        name = m.group("name")
        if name not in TABLES:
            raise ResultsError(f"{where}: unknown results table {name!r}; known: {', '.join(TABLES)}")
        return m.group(1) + TABLES[name].render(results_dir) + "\n" + m.group(4)

    return BLOCK.sub(one, text)


def update(documents: tuple[Path, ...] = DOCUMENTS, results_dir: Path = RESULTS_DIR, *,
           check: bool = False) -> list[Path]:
    """Render every document's tables; write them back (or, with ``check``, only compare). Returns the documents
    that differed from their rendering."""
    stale = []
    for doc in documents:
        text = doc.read_text(encoding="utf-8")
        rendered = render_document(text, results_dir, where=str(doc))
        if rendered != text:
            stale.append(doc)
            if not check:
                doc.write_text(rendered, encoding="utf-8")
    return stale
