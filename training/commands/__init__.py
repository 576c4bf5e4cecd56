"""CLI command groups; each module has ``register(app)`` and imports its heavy work lazily."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import typer


@contextmanager
def exit_2_on(*kinds: type[Exception]) -> Iterator[None]:
    """A command's refusals of the kinds ``kinds`` as one line on stderr (``error: ...``) and exit status 2, without
    a traceback."""
    try:
        yield
    except kinds as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
