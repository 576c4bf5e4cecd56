"""Copies of index folders for tests that change them: the pretrained encoder's files (``encoder/``, 130 MB, never
written after the build) are hard-linked, everything else copied. A test that copied whole indexes once per trial
filled 47 GB of disk in one run before this."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any


def _link_encoder(src: str, dst: str) -> Any:
    if "encoder" in Path(src).parts:
        try:
            os.link(src, dst)
            return dst
        except OSError:
            pass
    return shutil.copy2(src, dst)


def copy_index(src: str | Path, dst: str | Path, **kwargs: Any) -> Path:
    """``shutil.copytree(src, dst)`` with the encoder's files hard-linked (``kwargs``: copytree's others)."""
    return Path(shutil.copytree(src, dst, copy_function=_link_encoder, **kwargs))
