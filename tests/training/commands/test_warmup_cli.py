"""``priorart warmup``'s other CPU levels (issue 57): compiled in a process of their own, from the package the warm-up
imported, whatever the current folder holds, and filed where a server of that package looks for them. (The whole
warm-up, then a server of a fresh installation reading every kernel from the cache: tests/deploy/test_fresh_install.)
"""

from __future__ import annotations

import pickle
import shutil
from pathlib import Path

import pytest
import typer

from service.startup import host_description
from training.commands.warmup import _compile_for

PACKAGE = Path(host_description()["package"])


def _checkout(tmp_path: Path) -> Path:
    """A folder holding a copy of the ``service`` package, as a checkout of the project does (the issue's warm-up ran
    in one; it imported the checkout's kernels for the other level)."""
    out = tmp_path / "checkout"
    shutil.copytree(PACKAGE, out / "service", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return out


def _signatures(tmp_path: Path) -> tuple[Path, int]:
    """The signatures of one small kernel, as the warm-up records them (``record_signatures``'s keys)."""
    from service.passages import kernels
    from service.startup import _key

    kernels.warm()
    found = {_key(kernels._query_entries): list(kernels._query_entries.signatures)}
    path = tmp_path / "signatures.pickle"
    path.write_bytes(pickle.dumps(found))
    return path, sum(len(v) for v in found.values())


def test_the_other_levels_are_compiled_from_this_package_whatever_the_current_folder_holds(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from numba.core.caching import UserProvidedCacheLocator

    checkout = _checkout(tmp_path)
    signatures, n = _signatures(tmp_path)
    cache = tmp_path / "kernel-cache"
    monkeypatch.chdir(checkout)
    line = _compile_for(cache, "generic", signatures)
    assert line == f"generic: {n} compiled now, 0 were there (not run)"
    kernels = PACKAGE / "passages" / "kernels.py"
    here = cache / UserProvidedCacheLocator.get_suitable_cache_subpath(str(kernels))  # where a server looks
    assert len(list(here.glob("kernels._query_entries-*.nbc"))) == n
    assert [p for p in cache.rglob("*") if p.is_file() and p.parent != here] == []  # none under the checkout's path


def test_kernels_compiled_from_another_package_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    checkout = _checkout(tmp_path)
    signatures = tmp_path / "signatures.pickle"
    signatures.write_bytes(pickle.dumps({}))
    monkeypatch.setenv("PYTHONPATH", str(checkout))  # passed on to the process: it imports the checkout's package
    monkeypatch.chdir(tmp_path)
    with pytest.raises(typer.Exit):
        _compile_for(tmp_path / "kernel-cache", "generic", signatures)
    err = capsys.readouterr().err
    assert f"compiled from the package at {checkout / 'service'}, not from this one at {PACKAGE}" in err
