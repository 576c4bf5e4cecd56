"""Versioned JSON files: one writer and one checking reader for every ``{"format", "version", ...}`` file.

Index and models folders describe themselves with small JSON files that carry a format tag and a
version (``meta.json``, ``fusion.json``, translation tables, vocabularies, model and store
descriptions). :func:`read_versioned` reads one and refuses, naming the file, the format and version
it found and what to do, when it is unreadable, of another format or of another version;
:func:`write_versioned` writes one atomically (a temporary file renamed into place).

Callers pass their own exception class (a ``ValueError`` subclass) so that a caller catching e.g.
:class:`~service.index.store.IndexFormatError` keeps working.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any


class VersionedFileError(ValueError):
    """A versioned JSON file that cannot be used (unreadable, other format or version)."""


def read_versioned(
    path: str | Path,
    fmt: str,
    version: int | tuple[int, ...],
    *,
    fix: str = "",
    error: type[ValueError] = VersionedFileError,
) -> dict[str, Any]:
    """The JSON object in ``path`` after checking its ``format`` and ``version``.

    ``version``: the version this code reads (or a tuple of versions it still reads). ``fix`` is
    appended to the message of every refusal ("rebuild with `priorart build`").
    """
    p = Path(path)
    hint = f"; {fix}" if fix else ""
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise error(f"{p}: missing{hint}") from exc
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise error(f"{p}: unreadable JSON ({exc}){hint}") from exc
    if not isinstance(data, dict):
        raise error(f"{p}: not a JSON object{hint}")
    if data.get("format") != fmt:
        raise error(f"{p}: format {data.get('format')!r}, expected {fmt!r}{hint}")
    versions = version if isinstance(version, tuple) else (version,)
    if data.get("version") not in versions:
        want = " or ".join(str(v) for v in versions)
        raise error(f"{p}: {fmt} version {data.get('version')!r}, this priorart reads version {want}{hint}")
    return data


def versioned(fmt: str, version: int, body: Mapping[str, Any]) -> dict[str, Any]:
    """``{"format": fmt, "version": version, **body}`` (the tag first, so a reader sees it at the top)."""
    return {"format": fmt, "version": version, **{k: v for k, v in body.items() if k not in ("format", "version")}}


def write_json_atomic(path: str | Path, data: object, *, indent: int | None = 1, durable: bool = False) -> Path:
    """Write JSON to ``path`` through a temporary file and a rename (readers never see half a file).

    ``durable``: fsync the temporary file before the rename and the folder after it, so that after a
    crash or power loss the file is either the old one or the complete new one (generation manifests).
    """
    p = Path(path)
    tmp = p.with_name(p.name + ".tmp")
    text = json.dumps(data, ensure_ascii=False, indent=indent) + "\n"
    if not durable:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, p)
        return p
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, p)
    fsync_dir(p.parent)
    return p


def fsync_dir(path: str | Path) -> None:
    """fsync a folder (makes a rename or a new file in it durable)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_versioned(path: str | Path, fmt: str, version: int, body: Mapping[str, Any], *,
                    indent: int | None = 1, durable: bool = False) -> Path:
    """Write ``body`` tagged with ``format`` and ``version``, atomically (``durable``: fsynced, see above)."""
    return write_json_atomic(path, versioned(fmt, version, body), indent=indent, durable=durable)
