"""A server's start-up (issue 35): the kernel cache's plan (where numba reads it, for which CPU, and when it is not
used), the phases logged one line each, and that nothing is left to compile for a client's first query."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from service.phases import StartupTimes, measuring, timed
from service.startup import (
    KERNEL_CACHE_FORMAT,
    KERNEL_CACHE_VERSION,
    MANIFEST,
    X86_LEVELS,
    copy_cache,
    host_description,
    numba_cache_dir,
    plan_kernel_cache,
    reuse_kernel_cache,
    runs_here,
)
from service.versioned import write_versioned

REPO = Path(__file__).resolve().parents[2]
HOST = {"numba": "0.68.1", "python": "3.11", "machine": "x86_64", "package": "/opt/venv/site-packages/service"}
V3_FLAGS = X86_LEVELS["x86-64-v3"] | {"fpu", "sse", "sse2"}


def _cache(tmp_path: Path, **manifest: object) -> Path:
    cache = tmp_path / "kernel-cache"
    (cache / "retrieval_0123").mkdir(parents=True)
    (cache / "retrieval_0123" / "kernels._top_k-264.py311.nbi").write_bytes(b"index")
    (cache / "retrieval_0123" / "kernels._top_k-264.py311.1.nbc").write_bytes(b"code")
    write_versioned(cache / MANIFEST, KERNEL_CACHE_FORMAT, KERNEL_CACHE_VERSION,
                    {**HOST, "cpus": ["x86-64-v4", "generic"], **manifest})
    return cache


def test_a_read_only_cache_is_copied_into_numbas_writable_cache_dir_with_its_cpu(tmp_path: Path) -> None:
    cache = _cache(tmp_path)
    run = tmp_path / "run"
    plan = plan_kernel_cache(cache, {"NUMBA_CACHE_DIR": str(run)}, HOST, V3_FLAGS, writable=False)
    assert plan.copy_from == cache and plan.copy_to == run and not plan.warning
    assert plan.env == {"NUMBA_CPU_NAME": "generic", "NUMBA_CPU_FEATURES": "", "NUMBA_CACHE_DIR": str(run)}
    plan = plan_kernel_cache(cache, {"TMPDIR": str(tmp_path)}, HOST, V3_FLAGS, writable=False)  # no NUMBA_CACHE_DIR
    assert plan.copy_to == tmp_path / "priorart-numba" and plan.env["NUMBA_CACHE_DIR"] == str(plan.copy_to)


def test_a_cache_apart_from_numbas_cache_dir_is_copied_there_and_the_copy_leaves_it_unchanged(tmp_path: Path) -> None:
    cache = _cache(tmp_path)
    before = {p: p.stat().st_mtime_ns for p in cache.rglob("*")}
    plan = plan_kernel_cache(cache, {"NUMBA_CACHE_DIR": str(tmp_path / "run")}, HOST, V3_FLAGS)
    assert plan.copy_to == tmp_path / "run" and plan.env["NUMBA_CPU_NAME"] == "generic"
    (tmp_path / "run" / "retrieval_0123").mkdir(parents=True)
    (tmp_path / "run" / "retrieval_0123" / "kernels._top_k-264.py311.nbi").write_bytes(b"stale")
    assert copy_cache(cache, tmp_path / "run") == 2  # numba's files only, not the manifest
    assert (tmp_path / "run" / "retrieval_0123" / "kernels._top_k-264.py311.nbi").read_bytes() == b"index"
    assert not (tmp_path / "run" / MANIFEST).exists()
    assert {p: p.stat().st_mtime_ns for p in cache.rglob("*")} == before


def test_kernels_are_reused_by_another_tree_only_where_the_kernel_source_is_the_same(tmp_path: Path) -> None:
    src, dst = tmp_path / "repo", tmp_path / "worktree"
    for root, passages in ((src, b"def f(): pass\n"), (dst, b"def f(): return 1\n")):
        files = (("service/retrieval/kernels.py", b"def g(): pass\n"), ("service/passages/kernels.py", passages))
        for rel, text in files:
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_bytes(text)
    for rel in ("service/retrieval/kernels.py", "service/passages/kernels.py"):
        cache = numba_cache_dir((src / rel).resolve())
        cache.mkdir(parents=True, exist_ok=True)
        (cache / "kernels.g-1.py311.nbi").write_bytes(b"index " + rel.encode())
        (cache / "kernels.g-1.py311.1.nbc").write_bytes(b"code")
        (cache / "other.h-1.py311.nbi").write_bytes(b"another module's")
    assert reuse_kernel_cache(src, dst) == ["service.retrieval.kernels"]  # the passage kernels differ
    got = numba_cache_dir((dst / "service/retrieval/kernels.py").resolve())
    assert sorted(p.name for p in got.iterdir()) == ["kernels.g-1.py311.1.nbc", "kernels.g-1.py311.nbi"]
    assert (got / "kernels.g-1.py311.nbi").read_bytes() == b"index service/retrieval/kernels.py"
    assert not numba_cache_dir((dst / "service/passages/kernels.py").resolve()).exists()


def test_a_writable_cache_without_numba_cache_dir_is_used_in_place(tmp_path: Path) -> None:
    cache = _cache(tmp_path)
    plan = plan_kernel_cache(cache, {}, HOST, V3_FLAGS, writable=True)
    assert plan.copy_from is None and plan.env["NUMBA_CACHE_DIR"] == str(cache) and "in place" in plan.line


@pytest.mark.parametrize(("change", "said"), [
    ({"numba": "0.60.0"}, "compiled by numba '0.60.0' and this is '0.68.1'"),
    ({"python": "3.12"}, "python '3.12'"),
    ({"machine": "aarch64"}, "machine 'aarch64'"),
    ({"package": "/usr/lib/service"}, "compiled for the package at /usr/lib/service"),
    ({"cpus": ["x86-64-v4"]}, "compiled for x86-64-v4, and this CPU lacks avx512bw, avx512cd"),
    ({"cpus": ["skylake"]}, "not a baseline this server checks"),
])
def test_a_cache_this_host_cannot_use_is_not_used_and_says_why(tmp_path: Path, change: dict[str, object],
                                                                said: str) -> None:
    cache = _cache(tmp_path, **change)
    plan = plan_kernel_cache(cache, {"NUMBA_CACHE_DIR": str(tmp_path / "run")}, HOST, V3_FLAGS)
    assert plan.warning and plan.env == {} and plan.copy_from is None
    assert said in plan.line and "compiled at load for this CPU" in plan.line


def test_the_best_level_this_cpu_runs_is_chosen(tmp_path: Path) -> None:
    """An AVX-512 CPU runs the x86-64-v4 code, another the generic code, and the line says why it was skipped."""
    cache = _cache(tmp_path)
    env = {"NUMBA_CACHE_DIR": str(tmp_path / "run")}
    v4 = plan_kernel_cache(cache, env, HOST, X86_LEVELS["x86-64-v4"])
    assert v4.env["NUMBA_CPU_NAME"] == "x86-64-v4" and v4.env["NUMBA_CPU_FEATURES"] == "" and not v4.warning
    v3 = plan_kernel_cache(cache, env, HOST, V3_FLAGS)
    assert v3.env["NUMBA_CPU_NAME"] == "generic" and not v3.warning
    assert "generic here (compiled for x86-64-v4, and this CPU lacks avx512bw" in v3.line


def test_numbas_cpu_settings_given_otherwise_keep_the_cache_unused(tmp_path: Path) -> None:
    cache = _cache(tmp_path)
    plan = plan_kernel_cache(cache, {"NUMBA_CPU_NAME": "skylake"}, HOST, V3_FLAGS)
    assert plan.warning and "NUMBA_CPU_NAME" in plan.line and plan.env == {}
    given = plan_kernel_cache(cache, {"NUMBA_CPU_NAME": "generic"}, HOST, X86_LEVELS["x86-64-v4"], writable=True)
    assert given.env["NUMBA_CPU_NAME"] == "generic" and not given.warning  # one of its levels: as asked


def test_a_cache_for_this_host_only_leaves_the_cpu_to_numba(tmp_path: Path) -> None:
    cache = _cache(tmp_path, cpus=["host"])
    plan = plan_kernel_cache(cache, {"NUMBA_CACHE_DIR": str(tmp_path / "run")}, HOST, V3_FLAGS)
    assert not plan.warning and "NUMBA_CPU_NAME" not in plan.env


def test_no_cache_or_a_damaged_one(tmp_path: Path) -> None:
    plan = plan_kernel_cache(None, {}, HOST, V3_FLAGS)
    assert plan.env == {} and not plan.warning and "no kernel cache configured" in plan.line
    (tmp_path / "empty").mkdir()
    plan = plan_kernel_cache(tmp_path / "empty", {}, HOST, V3_FLAGS)
    assert plan.warning and "priorart warmup" in plan.line and plan.env == {}


def test_baselines() -> None:
    assert runs_here("generic", "x86_64", frozenset()) is None
    assert runs_here("x86-64-v3", "x86_64", V3_FLAGS) is None
    assert "lacks abm, avx, avx2," in (runs_here("x86-64-v3", "x86_64", X86_LEVELS["x86-64-v2"]) or "")
    assert "unknown" in (runs_here("x86-64-v2", "x86_64", None) or "")
    assert host_description()["package"] == str(REPO / "service")


def test_phases_add_up_inside_a_measured_block_only() -> None:
    times = StartupTimes()
    with timed("checksums"):  # outside: nothing counted anywhere
        pass
    with measuring(times):
        for _ in range(2):
            with timed("checksums"):
                pass
    assert list(times.seconds) == ["checksums"] and times.seconds["checksums"] >= 0


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from training.build import build_index
    from training.synth import generate

    out = tmp_path_factory.mktemp("startup") / "index"
    build_index(list(generate(150, seed=3)), out, lexicons="", splitter_lexicons="", progress=False)
    return out


def test_the_load_logs_each_phase_in_one_line(index: Path, caplog: pytest.LogCaptureFixture) -> None:
    from service.settings import Settings
    from service.startup import load_engine

    with caplog.at_level(logging.INFO, logger="service.startup"):
        engine = load_engine(index, Settings(index_dir=index))
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("start-up: ")]
    phases = [line.split()[1] for line in lines]
    assert phases[:1] == ["python"] or phases[0] == "kernels"
    for phase in ("kernels", "checksums", "index", "page-in", "first", "loaded"):
        assert phases.count(phase) == 1, lines
    first = next(line for line in lines if line.startswith("start-up: first query"))
    assert "(6 searches" in first  # a search and a passage search per language: en, de, fr titles
    assert engine.num_docs == 150


COVERAGE = r"""
import json, sys
from datetime import date
from pathlib import Path
from service.settings import Settings
from service.startup import dispatchers, warm_kernels
from service.engine import Engine
from service.schema import PassageRequest, SearchRequest, FeedbackRequest

warm_kernels()
index = Path(sys.argv[1])
engine = Engine.load(index, settings=Settings(index_dir=index))
before = {d.py_func.__qualname__: set(d.signatures) for d in dispatchers()}
recs = [engine.docs.get_row(r) for r in range(40)]
texts = {lang: r.title[lang] for r in recs for lang in r.title}
codes = [c for r in recs for c in r.cpc][:2]
first_claim = next(r.claims["en"][0].text for r in recs if r.claims.get("en"))
queries = [SearchRequest(query=t, lang=lang, k=k, depth=depth, translate=translate, explain=explain)
           for lang, t in texts.items() for k in (1, 10, 100) for depth in (10, 1000) for translate in (True, False)
           for explain in (False, True)]
queries += [SearchRequest(query=t, lang=lang, codes=codes, code_filter=level, before=before_)
            for lang, t in texts.items() for level in ("none", "class", "subgroup")
            for before_ in (None, date(2015, 1, 1))]
queries += [SearchRequest(query=first_claim, lang="en", k=5, depth=d) for d in (5, 50, 1000)]
queries += [SearchRequest(query=texts["en"], lang="en", feedback=FeedbackRequest(relevant=[recs[0].id]))]
passages = [PassageRequest(query=t, lang=lang, variant=v, k=k)
            for lang, t in texts.items()
            for v in ("qsf_v", "qsf_v_title", "qsf_section", "qsf_section_propagate", "qsf_passage_propagate")
            for k in (1, 10)]
passages += [PassageRequest(query=first_claim, lang="en", codes=codes, code_filter="class")]
for q in queries:
    engine.search(q)
for q in passages:
    engine.passages(q)
new = {d.py_func.__qualname__: [str(s) for s in d.signatures if s not in before[d.py_func.__qualname__]]
       for d in dispatchers()}
print(json.dumps({"queries": len(queries) + len(passages), "new": {k: v for k, v in new.items() if v}}))
"""


@pytest.mark.slow
def test_no_kernel_is_compiled_for_a_query_after_the_warm_up(index: Path) -> None:
    """The kernels' ``warm()`` covers every variant that searches and passage searches use (languages, routes,
    filters, depths, k, feedback, every QSF variant): a fresh process, the warm-up, then the queries, and no kernel
    compiled or read from the cache meanwhile. (``_reset`` of a listed accumulator was missing: the first query
    compiled it, 0.3 s.)"""
    res = subprocess.run([sys.executable, "-c", COVERAGE, str(index)], capture_output=True, text=True, cwd=REPO,
                         timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["queries"] > 100 and out["new"] == {}, out
