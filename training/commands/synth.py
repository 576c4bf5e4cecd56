"""``priorart synth -n N -o CORPUS.jsonl --seed S``: a deterministic synthetic patent corpus."""

from __future__ import annotations

import time
from pathlib import Path

import typer


def synth_command(
    n: int = typer.Option(..., "-n", "--n", min=0, help="Number of documents to generate."),
    output: Path = typer.Option(..., "-o", "--output", help="Corpus JSONL to write (.gz compresses)."),
    seed: int = typer.Option(0, "--seed", help="Random seed: the same seed gives byte-identical output."),
    langs: str = typer.Option(
        "en,de,fr", "--langs", help="Comma-separated languages of multilingual documents (must include en)."
    ),
    multilingual: float = typer.Option(
        0.3, "--multilingual", min=0.0, max=1.0, help="Fraction of documents with titles and claims in all --langs."
    ),
    topics: int | None = typer.Option(
        None, "--topics", min=1, help="Number of topics (main groups); default 2*sqrt(n) within [20, 2000]."
    ),
    scheme: Path | None = typer.Option(
        None, "--scheme", help="Also write the synthetic classification as a CPC-style title list (.tsv[.gz])."
    ),
    progress: bool | None = typer.Option(
        None, "--progress/--no-progress", help="Progress bar on stderr (default: on a TTY)."
    ),
) -> None:
    """Generate realistic synthetic patents (en, with de/fr claims for a fraction) for demos and benchmarks."""
    from training.synth import SynthConfig, write_synthetic

    try:
        config = SynthConfig(
            n=n,
            seed=seed,
            langs=tuple(x.strip() for x in langs.split(",") if x.strip()),
            multilingual=multilingual,
            n_topics=topics,
        )
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    start = time.perf_counter()
    count = write_synthetic(output, config, scheme_path=scheme, progress=progress)
    elapsed = time.perf_counter() - start
    rate = count / elapsed if elapsed > 0 else float("inf")
    typer.echo(f"wrote {count} records to {output} in {elapsed:.1f} s ({rate:.0f} docs/s)")
    if scheme is not None:
        typer.echo(f"wrote the classification scheme to {scheme}")


def register(app: typer.Typer) -> None:
    """Add the ``synth`` command to the CLI."""
    app.command("synth")(synth_command)
