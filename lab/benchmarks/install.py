"""The project installed as the image installs it, offline: its wheel with one extra in a new virtual environment.

The Dockerfile builds the wheel of ``pyproject.toml``, ``README.md``, ``service/`` and ``training/`` and installs it
with the ``service`` extra (no torch, no gensim) into a bare Python. Here the same, without a network, on this
machine or a fresh CI machine where ``scripts/setup.sh`` installed the development environment:

- the wheel: those files copied into a temporary folder (nothing written into the working tree) and built with
  ``pip wheel --no-deps --no-build-isolation`` (the environment's setuptools: no index needed);
- its dependencies: the distributions installed in *this* environment that the wheel's requirements with the extra
  name, followed through their own requirements (markers evaluated, versions checked against the specifiers), each
  packed back into a wheel from its installed files (``RECORD``; the files outside ``site-packages``, such as
  console scripts, are left out: pip writes them again from ``entry_points.txt``);
- a new ``python -m venv`` (its pip from ``ensurepip``) that installs the wheel and its extra with
  ``pip install --no-index --find-links WHEELHOUSE`` and no pip configuration (``PIP_CONFIG_FILE`` is the null
  device), so that nothing but the wheelhouse can be used: a requirement of the extra that is missing from it is
  an error of the install, as it would be in the image.

A ``.pth`` file pointing into the development environment would have been quicker, but it would see torch, gensim
and everything else installed there, which the image does not have.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata as md
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[2]
SOURCES = ("pyproject.toml", "README.md", "service", "training")
"""What the Dockerfile copies into its build stage."""
_SKIP_INFO = {"RECORD", "INSTALLER", "REQUESTED", "direct_url.json"}


class InstallError(RuntimeError):
    """The fresh installation could not be made (what is missing or failed is in the message)."""


@dataclass(frozen=True)
class FreshInstall:
    venv: Path
    python: Path
    priorart: Path
    wheel: Path
    wheelhouse: Path
    packages: tuple[str, ...]


def offline_pip_env() -> dict[str, str]:
    """The environment of a pip run that reads no configuration and no index but what its arguments name."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
    env.pop("PYTHONPATH", None)
    env.pop("VIRTUAL_ENV", None)
    return env


def build_wheel(out_dir: Path, repo: Path = REPO) -> Path:
    """The project's wheel (no dependencies), built from a copy of what the Dockerfile copies."""
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="priorart-wheel-") as tmp:
        src = Path(tmp) / "src"
        src.mkdir()
        for name in SOURCES:
            path = repo / name
            if path.is_dir():
                shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            else:
                shutil.copy2(path, src / name)
        res = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                              "--wheel-dir", str(out_dir), str(src)], capture_output=True, text=True,
                             env=offline_pip_env())
        if res.returncode != 0:
            raise InstallError(f"pip wheel failed:\n{res.stdout[-2000:]}{res.stderr[-2000:]}")
    wheels = sorted(out_dir.glob("priorart-*.whl"), key=lambda p: p.stat().st_mtime)
    if not wheels:
        raise InstallError(f"pip wheel wrote no priorart wheel into {out_dir}")
    return wheels[-1]


def wheel_requirements(wheel: Path) -> list[str]:
    """The ``Requires-Dist`` lines of a wheel's METADATA."""
    with zipfile.ZipFile(wheel) as z:
        name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        text = z.read(name).decode("utf-8")
    return [line.partition(":")[2].strip() for line in text.splitlines() if line.startswith("Requires-Dist:")]


def _wanted(req: Requirement, extras: Iterable[str]) -> bool:
    if req.marker is None:
        return True
    return any(req.marker.evaluate({"extra": e}) for e in (*extras, ""))


def closure(requirements: Iterable[str], extras: Iterable[str]) -> dict[str, md.Distribution]:
    """The installed distributions that ``requirements`` (with ``extras`` of the requiring project) need, and what
    they need in turn; raises :class:`InstallError` naming a requirement this environment does not satisfy."""
    found: dict[str, md.Distribution] = {}
    todo = [(Requirement(r), tuple(extras), "priorart") for r in requirements]
    seen: set[tuple[str, tuple[str, ...]]] = set()
    while todo:
        req, req_extras, by = todo.pop()
        if not _wanted(req, req_extras):
            continue
        name = canonicalize_name(req.name)
        try:
            dist = md.distribution(req.name)
        except md.PackageNotFoundError:
            raise InstallError(f"{req} (needed by {by}) is not installed in this environment") from None
        if not req.specifier.contains(dist.version, prereleases=True):
            raise InstallError(f"{req} (needed by {by}): this environment has {dist.version}")
        found[name] = dist
        key = (name, tuple(sorted(req.extras)))
        if key in seen:
            continue
        seen.add(key)
        todo += [(Requirement(r), tuple(sorted(req.extras)), name) for r in (dist.requires or [])]
    return found


def _tag(wheel_text: str) -> str:
    """The compressed tag set of a WHEEL file's ``Tag:`` lines (``cp311-cp311-manylinux_2_27_x86_64.manylinux_...``)."""
    tags = [line.partition(":")[2].strip() for line in wheel_text.splitlines() if line.startswith("Tag:")]
    if not tags:
        raise InstallError("WHEEL file without a Tag line")
    parts = [t.split("-") for t in tags]
    return "-".join(".".join(dict.fromkeys(p[i] for p in parts)) for i in range(3))


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode("ascii")


def repack(dist: md.Distribution, out_dir: Path) -> Path:
    """A wheel of an installed distribution, made of its installed files (see the module's docstring)."""
    files = dist.files
    if files is None:
        raise InstallError(f"{dist.metadata['Name']} {dist.version}: no RECORD (not installed by pip from a wheel)")
    info = next((f.parts[0] for f in files if f.parts[0].endswith(".dist-info")), None)
    if info is None:
        raise InstallError(f"{dist.metadata['Name']}: no .dist-info folder among its files")
    wheel_text = dist.read_text("WHEEL") or ""
    stem = info.removesuffix(".dist-info")  # name-version, as its dist-info folder spells it
    name, _, version = stem.rpartition("-")
    out = out_dir / f"{re.sub(r'[^A-Za-z0-9.]+', '_', name)}-{version}-{_tag(wheel_text)}.whl"
    if out.exists():
        return out
    root = Path(str(dist.locate_file("")))
    tmp = out.with_name(out.name + ".part")
    record: list[str] = []
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_STORED) as z:
        for f in sorted(files, key=lambda p: (p.parts[0] == info, str(p))):  # dist-info last, as in a wheel
            rel = str(f)
            if rel.startswith("..") or "__pycache__" in f.parts or (f.parts[0] == info and f.name in _SKIP_INFO):
                continue
            path = root / rel
            if not path.is_file():
                continue
            data = path.read_bytes()
            zinfo = zipfile.ZipInfo(rel, date_time=(1980, 1, 1, 0, 0, 0))
            zinfo.external_attr = (path.stat().st_mode & 0xFFFF) << 16
            z.writestr(zinfo, data)
            record.append(f"{rel},{_record_hash(data)},{len(data)}")
        record.append(f"{info}/RECORD,,")
        z.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    os.replace(tmp, out)
    return out


def wheelhouse(wheel: Path, extra: str, out_dir: Path) -> tuple[str, ...]:
    """Fill ``out_dir`` with wheels of every installed distribution the wheel's ``extra`` needs; their names."""
    out_dir.mkdir(parents=True, exist_ok=True)
    dists = closure(wheel_requirements(wheel), [extra])
    for dist in dists.values():
        repack(dist, out_dir)
    return tuple(sorted(dists))


def wheel_digest(wheel: Path) -> str:
    """A digest of a wheel's members (names and bytes; not their timestamps, which differ at every build)."""
    h = hashlib.sha256()
    with zipfile.ZipFile(wheel) as z:
        for name in sorted(z.namelist()):
            if not name.endswith(".dist-info/RECORD"):  # (its lines hash the members again)
                h.update(name.encode() + b"\0" + z.read(name) + b"\0")
    return h.hexdigest()


def fresh_install(venv: Path, work: Path, *, extra: str = "service", repo: Path = REPO,
                  compile_modules: bool = True) -> FreshInstall:
    """The project's wheel with ``extra`` installed offline into a new virtual environment at ``venv`` (made again
    when the wheel differs from the one installed there); ``work`` keeps the wheel and the wheelhouse.
    ``compile_modules``: pip byte-compiles every module as an image's install does (False: each module is compiled
    when first imported; the install takes half the time)."""
    wheel = build_wheel(work / "dist", repo)
    house = work / "wheelhouse"
    packages = wheelhouse(wheel, extra, house)
    digest = wheel_digest(wheel)
    stamp = venv / "priorart-install.json"
    python = venv / "bin" / "python"
    if stamp.exists() and json.loads(stamp.read_text()).get("wheel_sha256") == digest and python.exists():
        return FreshInstall(venv, python, venv / "bin" / "priorart", wheel, house, packages)
    if venv.exists():
        shutil.rmtree(venv)
    # the base interpreter, not this environment's (a venv made from a venv's python is fine too)
    res = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True, text=True,
                         env=offline_pip_env())
    if res.returncode != 0:
        raise InstallError(f"python -m venv failed: {res.stderr[-2000:]}")
    res = subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-index", "--find-links", str(house),
                          *([] if compile_modules else ["--no-compile"]), f"{wheel}[{extra}]"],
                         capture_output=True, text=True, env=offline_pip_env())
    if res.returncode != 0:
        raise InstallError(f"pip install of {wheel.name}[{extra}] from {house} failed:\n"
                           f"{res.stdout[-3000:]}{res.stderr[-3000:]}")
    stamp.write_text(json.dumps({"wheel": wheel.name, "wheel_sha256": digest, "extra": extra}))
    return FreshInstall(venv, python, venv / "bin" / "priorart", wheel, house, packages)
