"""The ``priorart`` command line (typer). Each verb lives in ``training/commands/<verb>.py``."""

from __future__ import annotations

import logging
import os

import typer

from training.commands import (
    bench,
    build,
    demo,
    docs,
    evaluate,
    experiment,
    ingest,
    live,
    ltr,
    search,
    serve,
    synth,
    tasks,
    train,
    translate,
    warmup,
    watch,
)

app = typer.Typer(
    name="priorart",
    help="Cross-lingual patent prior-art search: ingest, build, train, search, evaluate, serve.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

for module in (ingest, synth, build, live, search, evaluate, tasks, translate, train, serve, warmup, demo, bench,
               experiment, ltr, docs, watch):
    module.register(app)


def main() -> None:
    logging.basicConfig(
        level=os.environ.get("PRIORART_LOG_LEVEL", "INFO"),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # faiss logs every instruction-set build it tries and cannot load (ModuleNotFoundError lines) at INFO
    logging.getLogger("faiss.loader").setLevel(logging.WARNING)
    app()


if __name__ == "__main__":
    main()
