"""The ``priorart-lab`` command line (typer): experiments, benchmarks and the generated docs. The product's verbs
(ingest, build, serve, search, evaluate, ...) are ``priorart``'s (training/cli.py)."""

from __future__ import annotations

import sys

from lab.commands import bench, docs, encoder, experiment, ltr
from training.cli import configure_logging, make_app, run_app

app = make_app("priorart-lab", "priorart's lab: experiments, benchmarks and the documentation's measured tables.",
               (bench, experiment, ltr, docs, encoder))


def main() -> None:
    from training.translation.dictionary import keeping

    configure_logging()
    with keeping():  # (an experiment builds an index per fold: each reads the lexicons once)
        status = run(sys.argv[1:])
    sys.exit(status)


def run(argv: list[str]) -> int:
    """Run the lab's CLI on ``argv`` and return its exit status (usage errors as ``priorart``'s: one line, 2)."""
    return run_app(app, "priorart-lab", argv)
