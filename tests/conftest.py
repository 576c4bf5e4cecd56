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


@pytest.fixture(scope="session")
def real_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """All of ../shared/data/patents ingested once per test session (corpus JSONL)."""
    patents = _need(SHARED_DATA / "patents")
    from service.corpus.jsonl import write_corpus
    from training.ingest import iter_records

    path = tmp_path_factory.mktemp("real") / "corpus.jsonl"
    write_corpus(iter_records([patents]), path)
    return path


@pytest.fixture(scope="session")
def real_translation(real_corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """de/fr -> en translation tables (aligned claims + FreeDict when installed) over the real corpus."""
    from service.corpus.jsonl import read_corpus
    from training.translation.tables import build_tables, write_tables

    out = tmp_path_factory.mktemp("real-translation")
    tables, meta = build_tables(list(read_corpus(real_corpus)), progress=False)
    write_tables(out, tables, meta)
    return out


@pytest.fixture(scope="session")
def real_index(real_corpus: Path, real_translation: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A BM25 index (en, de, fr) with translation tables over the real corpus, built once per session."""
    from training.build import build_index

    out = tmp_path_factory.mktemp("real-index") / "index"
    build_index(real_corpus, out, translation_dir=real_translation, progress=False)
    return out
