"""The ``priorart`` command line (typer). Each verb lives in ``training/commands/<verb>.py``."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

import typer

try:  # typer >= 0.22 carries its own copy of click: its exceptions are not click's
    from typer._click import exceptions as click_exceptions
except ImportError:  # pragma: no cover - an older typer over click
    from click import exceptions as click_exceptions  # type: ignore[no-redef]

from training.commands import (
    build,
    demo,
    encoder,
    evaluate,
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


def make_app(name: str, about: str, modules: Sequence[Any]) -> typer.Typer:
    """A command line named ``name`` with every verb of ``modules`` (each has ``register(app)``): ``priorart``
    here, the lab's ``priorart-lab`` (lab/cli.py)."""
    made = typer.Typer(name=name, help=about, no_args_is_help=True, add_completion=False,
                       pretty_exceptions_enable=False)
    for module in modules:
        module.register(made)
    return made


app = make_app("priorart", "Cross-lingual patent prior-art search: ingest, build, train, search, evaluate, serve.",
               (ingest, synth, build, live, search, evaluate, tasks, translate, train, serve, warmup, demo, ltr, watch,
                encoder))


def main() -> None:
    configure_logging()
    sys.exit(run(sys.argv[1:]))


def lab_main() -> None:
    """``priorart-lab``: the lab's CLI (lab/cli.py), where the lab is installed (a checkout's ``scripts/setup.sh``);
    the serving image leaves it out, and says so in one line."""
    import importlib

    try:  # (by name: the product does not import the lab, it only looks for it here)
        lab = importlib.import_module("lab.cli")
    except ModuleNotFoundError as exc:
        if exc.name not in ("lab", "lab.cli"):
            raise
        print("error: priorart-lab: the lab (experiments, benchmarks) is not installed here: the serving image "
              "leaves it out; run it from a checkout (bash scripts/setup.sh)", file=sys.stderr)
        sys.exit(2)
    lab.main()


def configure_logging() -> None:
    """The CLIs' logging (``PRIORART_LOG_LEVEL``, default INFO)."""
    logging.basicConfig(
        level=os.environ.get("PRIORART_LOG_LEVEL", "INFO"),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # faiss logs every instruction-set build it tries and cannot load (ModuleNotFoundError lines) at INFO
    logging.getLogger("faiss.loader").setLevel(logging.WARNING)


def run(argv: list[str]) -> int:
    """Run the CLI on ``argv`` and return its exit status (:func:`run_app`)."""
    return run_app(app, "priorart", argv)


def run_app(app: typer.Typer, prog: str, argv: list[str]) -> int:
    """Run ``app`` (``priorart``, or the lab's ``priorart-lab``) on ``argv`` and return its exit status. A usage error
    (an unknown option, a missing argument, a value of the wrong type) is one line on stderr, ``error: ...`` with the
    verb's ``--help`` to read, and status 2, like every other refusal of bad input (click's own report is a box of
    several lines)."""
    try:
        rc = app(args=argv, prog_name=prog, standalone_mode=False)
    except click_exceptions.NoArgsIsHelpError as exc:  # `priorart` or a group alone: its help, as before
        typer.echo(exc.format_message())
        return exc.exit_code
    except click_exceptions.UsageError as exc:
        where = exc.ctx.command_path if exc.ctx is not None else prog
        message = " ".join(exc.format_message().split())
        typer.echo(f"error: {message} (see `{where} --help`)", err=True)
        return exc.exit_code
    except click_exceptions.ClickException as exc:
        typer.echo(f"error: {' '.join(exc.format_message().split())}", err=True)
        return exc.exit_code
    except typer.Abort:
        typer.echo("error: aborted", err=True)
        return 1
    return rc if isinstance(rc, int) else 0


if __name__ == "__main__":
    main()
