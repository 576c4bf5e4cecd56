"""Shared fixtures: where the real data lives, and skips with a clear reason when it is absent."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("PRIORART_DATA", REPO.parent / "shared" / "data"))


def _need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"real data not found at {path} (set PRIORART_DATA or put ../shared beside the repo)")
    return path


@pytest.fixture(scope="session")
def shared_data() -> Path:
    return _need(SHARED_DATA)


@pytest.fixture(scope="session")
def ep_dir() -> Path:
    return _need(SHARED_DATA / "patents" / "ep")


@pytest.fixture(scope="session")
def us_dir() -> Path:
    return _need(SHARED_DATA / "patents" / "us")


@pytest.fixture(scope="session")
def us_formats_dir() -> Path:
    return _need(SHARED_DATA / "patents" / "us-formats")


@pytest.fixture(scope="session")
def cpc_titles() -> Path:
    return _need(SHARED_DATA / "cpc" / "cpc-titles-2025-05.tsv.gz")
