"""The suite's synthetic collection: the documents that the long files' default builds (the dense stage's pretrained
encoder, the costliest step of a build) take their corpora from.

The document vector cache (service/retrieval/vector_cache.py; tests/conftest.py gives the run one) keeps a vector by
its text. Files that generated a corpus of their own, each with a seed and a size of their own (a different size is
another collection: the topics and dates depend on it), encoded 3,300 documents among them, each once; taken from
this one collection they encode its first 840 once, and the run's cache gives them to every later build. A file
whose tests need a collection with other properties (a size, topics, languages) keeps its own.
"""

from __future__ import annotations

import functools
from pathlib import Path

from service.corpus.jsonl import write_corpus
from service.corpus.record import PatentRecord

N, SEED = 840, 7


@functools.cache
def _collection() -> tuple[PatentRecord, ...]:
    from training.synth import SynthConfig, SynthGenerator

    return tuple(SynthGenerator(SynthConfig(n=N, seed=SEED)))


def suite_records(n: int) -> list[PatentRecord]:
    """The collection's first ``n`` documents (n <= 840): the worker's own objects, shared by its tests (a test that
    changes a record changes a copy: ``model_copy``)."""
    if not 0 < n <= N:
        raise ValueError(f"the suite's collection has {N} documents; asked for {n}")
    return list(_collection()[:n])


def write_suite_corpus(path: Path, n: int) -> list[PatentRecord]:
    """The first ``n`` documents, written to ``path`` (JSON lines) and returned."""
    records = suite_records(n)
    write_corpus(records, path)
    return records
