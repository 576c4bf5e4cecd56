"""A server process's start-up: the compiled kernels, the index, a first query; each phase timed and logged.

Kernels. The first stage's and the passage ranker's loops are numba functions (``service/retrieval/kernels.py``,
``service/passages/kernels.py``), compiled at first use and cached on disk by numba. Compiled from nothing they take
about 30-40 s (issue 35); read from numba's cache, well under a second. A *kernel cache* is a folder that
``priorart warmup`` filled at image build (numba's cache files and ``kernel-cache.json``, which says for which numba,
Python, machine, CPU and package folder they were compiled). :func:`prepare_kernel_cache` applies it before numba
is imported, read-only as it is:

- numba only uses a cache folder it can write to (it creates a temporary file there; a folder it cannot write to is
  skipped, and the kernels are compiled again), so a kernel cache that is not writable here is copied into
  ``NUMBA_CACHE_DIR`` (a few MB: milliseconds), and a writable one is used in place;
- numba keys each compiled variant by the CPU name and features it was compiled for (``NUMBA_CPU_NAME``,
  ``NUMBA_CPU_FEATURES``; by default the host's own, so a cache from the build host misses on any other CPU). The
  image's cache is compiled for a baseline (``generic``: every x86-64 CPU), which is set here when this host runs
  it; a baseline this CPU lacks (``x86-64-v3`` on a CPU without AVX2) is not set, and the kernels are compiled
  for this CPU at load, with one warning line saying why. So is a cache of another numba, Python or machine.

Phases. :func:`load_engine` loads an index as ``Engine.load`` does and logs one line per phase with its time:
``kernels`` (read from the cache or compiled), ``checksums`` (the sha256 of every index file), ``page-in`` (the
memory-mapped postings read in), ``index files`` (the rest of the load: opening and parsing the folder's files),
``first query`` (a search and a passage search of a few of the index's own titles, so that a client's first query
finds nothing left to compile, load or allocate: ``/ready`` answers once this is done). Code deep in the load
reports its part with :func:`service.phases.timed` (a no-op outside :func:`load_engine`).
"""

from __future__ import annotations

import importlib.metadata
import logging
import os
import platform
import shutil
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from service.phases import StartupTimes, measuring
from service.versioned import VersionedFileError, read_versioned, write_versioned

if TYPE_CHECKING:
    from service.engine import Engine
    from service.settings import Settings

log = logging.getLogger(__name__)

KERNEL_CACHE_FORMAT = "priorart-kernel-cache"
KERNEL_CACHE_VERSION = 1
MANIFEST = "kernel-cache.json"
KERNEL_MODULES = ("service.retrieval.kernels", "service.retrieval.segment_kernels", "service.retrieval.maxscore",
                  "service.passages.kernels", "service.kernel_pooling", "service.ranker", "service.code_classifier")

# x86-64 micro-architecture levels (the psABI's), as /proc/cpuinfo names their features: a kernel cache compiled
# for a level runs on a CPU that has every feature of it (LLVM names the levels x86-64-v2 ... x86-64-v4)
X86_LEVELS: dict[str, frozenset[str]] = {
    "generic": frozenset(),
    "x86-64": frozenset(),
    "x86-64-v2": frozenset({"cx16", "lahf_lm", "popcnt", "pni", "sse4_1", "sse4_2", "ssse3"}),
}
X86_LEVELS["x86-64-v3"] = X86_LEVELS["x86-64-v2"] | {"avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe",
                                                     "xsave"}
X86_LEVELS["x86-64-v4"] = X86_LEVELS["x86-64-v3"] | {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"}


# ---------------------------------------------------------------------------------------------- kernel cache
@dataclass(frozen=True)
class KernelCachePlan:
    """What :func:`apply_kernel_cache` does: the environment numba is to read, the folder to copy (if any), and the
    line to log (``warning``: the kernels will be compiled at load)."""

    env: Mapping[str, str]
    copy_from: Path | None
    copy_to: Path | None
    line: str
    warning: bool = False
    manifest: Mapping[str, Any] | None = None


def host_description() -> dict[str, str]:
    """What a kernel cache must match here: numba's version, Python's, the machine (without importing numba)."""
    try:
        numba_version = importlib.metadata.version("numba")
    except importlib.metadata.PackageNotFoundError:
        numba_version = ""
    return {"numba": numba_version, "python": f"{sys.version_info[0]}.{sys.version_info[1]}",
            "machine": platform.machine(), "package": str(Path(os.path.abspath(__file__)).parent)}


def cpu_flags() -> frozenset[str] | None:
    """The CPU's feature flags as /proc/cpuinfo lists them (None where there is no such file)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.partition(":")[2].split())
    except OSError:
        return None
    return frozenset()


def runs_here(cpu_name: str, machine: str, flags: frozenset[str] | None) -> str | None:
    """Why code compiled for ``cpu_name`` may not run on this CPU (None: it runs). ``host``: compiled for the CPU
    of the machine that filled the cache, keyed by its name and features: numba finds it on that CPU only, and
    compiles the kernels again on any other (the kernels line says so)."""
    if cpu_name in ("generic", "host"):
        return None  # the architecture's baseline (the machine is compared apart), or numba's own key
    level = X86_LEVELS.get(cpu_name)
    if level is None or machine not in ("x86_64", "AMD64"):
        return f"compiled for the CPU {cpu_name!r}, which is not a baseline this server checks"
    if flags is None:
        return f"compiled for {cpu_name}: this host's CPU features are unknown (no /proc/cpuinfo)"
    missing = sorted(level - flags)
    if missing:
        return f"compiled for {cpu_name}, and this CPU lacks {', '.join(missing)}"
    return None


def choose_cpu(cpus: list[str], env: Mapping[str, str], machine: str,
               flags: frozenset[str] | None) -> tuple[str | None, list[str], str | None]:
    """The first of a cache's CPU levels (best first) that this CPU runs, the lines of those skipped before it,
    and why none is used (None when one is). ``NUMBA_CPU_NAME`` set here must name one of them (numba reads it)."""
    if cpus == ["host"]:
        return "host", [], None
    runnable, skipped = [], []
    for cpu in cpus:
        cpu_why = runs_here(cpu, machine, flags)
        if cpu_why is None:
            runnable.append(cpu)
        elif not runnable:
            skipped.append(cpu_why)
    given = env.get("NUMBA_CPU_NAME")
    if given is not None:
        if given in runnable and env.get("NUMBA_CPU_FEATURES", "") == "":
            return given, [], None
        return None, skipped, (f"NUMBA_CPU_NAME/NUMBA_CPU_FEATURES are set to {given!r}/"
                               f"{env.get('NUMBA_CPU_FEATURES')!r} here, and it holds code for "
                               f"{', '.join(runnable) or 'no CPU this one runs'} (features implied)")
    if not runnable:
        return None, skipped, "; ".join(skipped) or "it names no CPU"
    return runnable[0], skipped, None


def plan_kernel_cache(cache: Path | None, env: Mapping[str, str], host: Mapping[str, str],
                      flags: frozenset[str] | None, *, writable: bool | None = None) -> KernelCachePlan:
    """Decide how the kernel cache ``cache`` (None: none configured) is used with this ``env`` and ``host``, the
    CPU's ``flags`` and whether this process can write to ``cache`` (None: ask the file system); pure but for
    reading the cache's manifest (:func:`apply_kernel_cache` does what it says)."""
    runtime = env.get("NUMBA_CACHE_DIR") or None
    if cache is None:
        where = f"numba's cache in {runtime}" if runtime else "numba's cache beside the package"
        return KernelCachePlan({}, None, None, f"no kernel cache configured (PRIORART_KERNEL_CACHE): {where}")
    try:
        manifest = read_versioned(cache / MANIFEST, KERNEL_CACHE_FORMAT, KERNEL_CACHE_VERSION,
                                  fix="fill it with `priorart warmup`")
    except VersionedFileError as exc:
        return KernelCachePlan({}, None, None, f"kernel cache unusable ({exc}): the kernels are compiled at load",
                               warning=True)
    cpus = [str(c) for c in manifest.get("cpus", [])]
    built = (f"numba {manifest.get('numba')}, Python {manifest.get('python')}, {manifest.get('machine')}, "
             f"CPU {' / '.join(cpus) or '?'}")
    why = [f"it was compiled by {k} {manifest.get(k)!r} and this is {host[k]!r}"
           for k in ("numba", "python", "machine") if manifest.get(k) != host[k]]
    if manifest.get("package") != host["package"]:
        why.append(f"it was compiled for the package at {manifest.get('package')} (numba keys its cache by the "
                   f"source folder) and this one is at {host['package']}")
    chosen: str | None = None
    skipped: list[str] = []
    if not why:
        chosen, skipped, cpu_why = choose_cpu(cpus, env, host["machine"], flags)
        if cpu_why:
            why.append(cpu_why)
    if why or chosen is None:
        return KernelCachePlan({}, None, None, f"kernel cache {cache} ({built}) not used: {'; '.join(why)}; "
                               "the kernels are compiled at load for this CPU", warning=True, manifest=manifest)
    numba_env = {} if chosen == "host" else {"NUMBA_CPU_NAME": chosen, "NUMBA_CPU_FEATURES": ""}
    built += f"; {chosen} here" + "".join(f" ({s})" for s in skipped)
    if writable is None:
        writable = os.access(cache, os.W_OK)  # False on a read-only mount, for root too
    if runtime is None and writable:
        numba_env["NUMBA_CACHE_DIR"] = str(cache)
        return KernelCachePlan(numba_env, None, None, f"kernel cache {cache} ({built}): used in place",
                               manifest=manifest)
    if runtime is not None and Path(runtime).resolve() == cache.resolve():
        return KernelCachePlan(numba_env, None, None, f"kernel cache {cache} ({built}): used in place (it is "
                               "NUMBA_CACHE_DIR)", manifest=manifest)
    target = Path(runtime) if runtime else Path(env.get("TMPDIR", "/tmp")) / "priorart-numba"
    numba_env["NUMBA_CACHE_DIR"] = str(target)
    return KernelCachePlan(numba_env, cache, target, f"kernel cache {cache} ({built}): copied to {target} "
                           "(numba writes only to a cache folder it can write to)", manifest=manifest)


def apply_kernel_cache(cache: Path | None) -> KernelCachePlan:
    """Plan and apply the kernel cache (see the module's docstring) and log the line once; call it before the
    kernels are imported (numba picks a function's cache folder when it is defined)."""
    plan = plan_kernel_cache(cache, os.environ, host_description(), cpu_flags())
    if (plan.env or plan.copy_from) and any(m in sys.modules for m in KERNEL_MODULES):
        log.warning("kernels: the kernel cache cannot be applied: the kernels were imported before (%s)", plan.line)
        return plan
    if plan.copy_from is not None and plan.copy_to is not None:
        started = time.perf_counter()
        try:
            n = copy_cache(plan.copy_from, plan.copy_to)
        except OSError as exc:
            log.warning("kernels: kernel cache %s could not be copied to %s (%s): the kernels are compiled at load",
                        plan.copy_from, plan.copy_to, exc)
            return plan
        log.info("kernels: %s: %d files in %.2f s", plan.line, n, time.perf_counter() - started)
    else:
        (log.warning if plan.warning else log.info)("kernels: %s", plan.line)
    os.environ.update(plan.env)
    if "numba" in sys.modules:  # imported (not the kernels): numba reads its settings again
        from numba.core import config

        config.reload_config()
    return plan


def copy_cache(src: Path, dst: Path) -> int:
    """Copy numba's cache files of ``src`` into ``dst`` (the same sub-folders), replacing what is there; the
    number of files copied."""
    n = 0
    for path in sorted(src.rglob("*")):
        if path.is_file() and path.suffix in (".nbi", ".nbc"):
            _copy_cache_file(path, dst / path.relative_to(src))
            n += 1
    return n


def _copy_cache_file(path: Path, out: Path) -> None:
    """Copy one of numba's cache files to ``out``, replacing it in one step (a process reading the old file keeps
    it, and none sees half a file)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f"{out.name}.{os.getpid()}.tmp")
    shutil.copyfile(path, tmp)
    os.replace(tmp, out)


def numba_cache_dir(py_file: Path) -> Path:
    """Where numba keeps the cache of the functions of ``py_file`` in this process's settings: under
    ``NUMBA_CACHE_DIR`` in a folder named after the source folder, else ``__pycache__`` beside the file."""
    from numba.core import config
    from numba.core.caching import UserProvidedCacheLocator

    cache_dir = getattr(config, "CACHE_DIR", "")  # (set by numba from the environment: no typed attribute)
    if cache_dir:
        return Path(cache_dir) / UserProvidedCacheLocator.get_suitable_cache_subpath(str(py_file))
    return py_file.parent / "__pycache__"


def reuse_kernel_cache(src_root: Path, dst_root: Path) -> list[str]:
    """Copy numba's compiled kernels of the source tree ``src_root`` to the copy of the project at ``dst_root`` (a
    worktree of another commit) for each kernel module whose source is the same in both: numba keys a cached
    variant by the sha256 of its source file, and the folder by the file's path, so the other tree would compile
    them again (about 100 s for all) where the files are identical. Returns the modules whose kernels were copied."""
    reused = []
    for name in KERNEL_MODULES:
        rel = Path(*name.split(".")).with_suffix(".py")
        src, dst = src_root / rel, dst_root / rel
        if not (src.is_file() and dst.is_file()) or src.read_bytes() != dst.read_bytes():
            continue
        src_cache, dst_cache = numba_cache_dir(src.resolve()), numba_cache_dir(dst.resolve())
        files = sorted(src_cache.glob(f"{src.stem}.*.nb[ic]")) if src_cache.is_dir() else []
        for path in files:
            _copy_cache_file(path, dst_cache / path.name)
        if files:
            reused.append(name)
    return reused


def write_manifest(cache: Path, cpus: list[str], variants: int, functions: int) -> dict[str, Any]:
    """``kernel-cache.json`` of a cache filled for the CPU levels ``cpus`` (best first; ``["host"]``: numba's
    default, this CPU's own name and features)."""
    import llvmlite.binding as ll

    from service import __version__

    body = {**host_description(), "cpus": list(cpus), "built_on": ll.get_host_cpu_name(), "variants": variants,
            "functions": functions, "priorart": __version__,
            "created": datetime.now(UTC).isoformat(timespec="seconds")}
    write_versioned(cache / MANIFEST, KERNEL_CACHE_FORMAT, KERNEL_CACHE_VERSION, body)
    return body


# ------------------------------------------------------------------------------------------------- kernels
@dataclass(frozen=True)
class KernelReport:
    functions: int
    variants: int
    loaded: int  # variants read from numba's cache
    compiled: int  # variants compiled here
    cache_dir: str


def dispatchers() -> list[Any]:
    """The numba functions of the kernel modules (imports them)."""
    import importlib

    from numba.core.dispatcher import Dispatcher

    found: dict[int, Any] = {}  # (a module that imports another's kernels names them too)
    for name in KERNEL_MODULES:
        module = importlib.import_module(name)
        found.update((id(obj), obj) for obj in vars(module).values() if isinstance(obj, Dispatcher))
    return list(found.values())


def _report(found: list[Any]) -> KernelReport:
    from numba.core import config

    loaded = sum(sum(d.stats.cache_hits.values()) for d in found)
    compiled = sum(sum(d.stats.cache_misses.values()) for d in found)
    return KernelReport(len(found), sum(len(d.signatures) for d in found), loaded, compiled,
                        getattr(config, "CACHE_DIR", "") or "")


def warm_kernels() -> KernelReport:
    """Compile or read from numba's cache every kernel variant an index uses (the modules' ``warm()``)."""
    import importlib

    for name in KERNEL_MODULES:
        importlib.import_module(name).warm()
    return _report(dispatchers())


def _key(d: Any) -> str:
    return f"{d.py_func.__module__}.{d.py_func.__qualname__}"


def record_signatures(path: Path) -> int:
    """Write the signatures this process compiled or loaded (every kernel and the kernels they call) to ``path``
    (a pickle of numba types, read back by :func:`compile_signatures` in a process of the same code); their count."""
    import pickle

    sigs = {_key(d): list(d.signatures) for d in dispatchers()}
    path.write_bytes(pickle.dumps(sigs))
    return sum(len(v) for v in sigs.values())


def compile_signatures(path: Path) -> KernelReport:
    """Compile (or read from numba's cache) the signatures :func:`record_signatures` wrote, for the CPU numba is set
    to, without running them: the build host need not run that CPU's instructions."""
    import pickle

    sigs = pickle.loads(path.read_bytes())  # written by record_signatures a moment before, by this code
    found = dispatchers()
    for d in found:
        for sig in sigs.get(_key(d), []):
            d.compile(sig)
    return _report(found)


# ------------------------------------------------------------------------------------------------ the load
def first_queries(engine: Engine, *, rows: int = 50, k: int = 10) -> int:
    """A search and a passage search of the title of one of the first ``rows`` documents per language (what a
    client's first query would otherwise pay: a kernel variant the warm-up missed, lazily made tables, first
    allocations); the number of queries run. A query the index cannot answer is skipped (logged)."""
    from service.query import QueryError
    from service.schema import PassageRequest, SearchRequest
    from service.text.analysis import SUPPORTED_LANGS

    texts: dict[str, str] = {}
    for row in range(min(rows, len(engine.docs.ids))):
        for lang, title in engine.docs.header_row(row).title.items():
            if lang in SUPPORTED_LANGS and title.strip():
                texts.setdefault(lang, title)
        if len(texts) == 3:
            break
    n = 0
    for lang, text in texts.items():
        for req in (SearchRequest(query=text, lang=lang, k=k), PassageRequest(query=text, lang=lang, k=k)):
            try:
                engine.passages(req) if isinstance(req, PassageRequest) else engine.search(req)
                n += 1
            except QueryError as exc:
                log.info("start-up: first query %r (%s) skipped: %s", text[:60], lang, exc)
    return n


def process_age() -> float | None:
    """Seconds since this process started (Linux: /proc), None where unknown."""
    try:
        with open("/proc/self/stat", encoding="ascii") as f:
            start_ticks = int(f.read().rpartition(")")[2].split()[19])  # field 22, starttime
        with open("/proc/uptime", encoding="ascii") as f:
            uptime = float(f.read().split()[0])
        return uptime - start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def load_engine(index_dir: str | Path, settings: Settings, *, at_start: bool = True) -> Engine:
    """``Engine.load`` of the folder, in phases, each logged in one line with its time, then a first query (see
    the module's docstring). ``at_start``: the process has done nothing else yet (its age is the ``python``
    phase). Errors of the load propagate as ``Engine.load`` raises them."""
    from service.engine import Engine

    age = process_age() if at_start else None
    if age is not None:
        log.info("start-up: python %.2f s (the interpreter's start and the imports before the load)", age)
    times = StartupTimes()
    started = time.perf_counter()
    with measuring(times):
        t = time.perf_counter()
        kernels = warm_kernels()
        times.add("kernels", time.perf_counter() - t)
        if kernels.compiled:
            log.warning("start-up: kernels %.2f s: %d of %d variants of %d functions compiled here (not in numba's "
                        "cache %s: see the kernel cache line above)", times.seconds["kernels"], kernels.compiled,
                        kernels.variants, kernels.functions, kernels.cache_dir or "beside the package")
        else:
            log.info("start-up: kernels %.2f s: %d variants of %d functions read from numba's cache %s",
                     times.seconds["kernels"], kernels.loaded, kernels.functions, kernels.cache_dir or
                     "beside the package")
        t = time.perf_counter()
        engine = Engine.load(index_dir, settings=settings)
        load_s = time.perf_counter() - t
    checks, page_in = times.seconds.get("checksums", 0.0), times.seconds.get("page-in", 0.0)
    log.info("start-up: checksums %.2f s (sha256 of every index file)", checks)
    log.info("start-up: index files %.2f s (%s)", load_s - checks - page_in, engine.describe())
    log.info("start-up: page-in %.2f s (memory-mapped postings read in)", page_in)
    t = time.perf_counter()
    try:
        n = first_queries(engine)
    except Exception as exc:  # the server still starts: a client's query shows the error
        log.warning("start-up: first query failed (%s: %s); the index is served as loaded", type(exc).__name__, exc)
        n = 0
    log.info("start-up: first query %.2f s (%d searches of the index's own titles)", time.perf_counter() - t, n)
    age = process_age() if at_start else None
    log.info("start-up: loaded in %.2f s%s", time.perf_counter() - started,
             "" if age is None else f", {age:.2f} s after the process started")
    return engine


if __name__ == "__main__":  # python -P -m service.startup compile SIGNATURES: priorart warmup's other CPU levels
    import json

    if len(sys.argv) != 3 or sys.argv[1] != "compile":
        sys.exit("usage: python -P -m service.startup compile SIGNATURES")
    # the package compiled (numba files a kernel's code under a folder named after its source's path)
    print(json.dumps({**compile_signatures(Path(sys.argv[2])).__dict__, "package": host_description()["package"]}))
