"""Writing a synthetic corpus (``priorart synth``): JSONL with a progress bar, optionally the scheme."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from training.synth.documents import SynthConfig, SynthGenerator

log = logging.getLogger(__name__)


def write_synthetic(
    path: str | Path,
    config: SynthConfig,
    *,
    scheme_path: str | Path | None = None,
    progress: bool | None = None,
) -> int:
    """Generate ``config.n`` records into a JSONL corpus (``.gz`` compresses) with a progress bar on stderr.

    ``scheme_path`` also writes the synthetic classification in the CPC title-list format.
    ``progress=None`` shows the bar only on a terminal. Returns the number of records written.
    """
    from tqdm import tqdm

    from service.corpus.jsonl import write_corpus

    gen = SynthGenerator(config)
    world = gen.world
    log.info("synthetic world: %d topics, %d concepts, %d applicants", len(world.topics), len(world.lex),
             len(world.companies))  # fmt: skip
    if scheme_path is not None:
        gen.world.write_scheme(scheme_path)
    bar = tqdm(gen, total=config.n, desc="synth", unit="doc", file=sys.stderr,
               disable=None if progress is None else not progress)  # fmt: skip
    return write_corpus(bar, path)
