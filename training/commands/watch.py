"""``priorart watch add | list | hits | run | delete``: saved searches that report what each new generation of an
index brings (service/watch/). ``priorart add`` evaluates them after its batch (``--no-watches`` leaves that to a
server or to ``priorart watch run``).

The watches live in the index's state folder: ``--state-dir`` (``PRIORART_STATE_DIR``), default ``INDEX.state``
beside the index folder. ``--key`` acts as the client of that API key (a server with ``PRIORART_API_KEY`` shows a
watch only to the key that saved it); without it, ``list`` and ``hits`` show every watch (the operator's view) and
``add`` saves one for a server without keys.

Exit status: 0 done; 2 bad input (a query that cannot run, an unknown watch, an unusable state folder).
"""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import typer

if TYPE_CHECKING:
    from service.engine import Engine
    from service.settings import Settings
    from service.watch.evaluate import EvaluationReport
    from service.watch.store import WatchStore

EXIT_BAD_INPUT = 2
watch_app = typer.Typer(help="Saved searches (watches): new documents in their top k, generation after generation.",
                        no_args_is_help=True)

_INDEX = typer.Argument(..., help="Index folder.")
_STATE = typer.Option(None, "--state-dir", envvar="PRIORART_STATE_DIR",
                      help="The watches' state folder (default: INDEX.state beside the index folder).")
_KEY = typer.Option(None, "--key", help="Act as the client of this API key (its watches only).")
_JSON = typer.Option(False, "--json", help="Print JSON.")


def _fail(message: str) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(EXIT_BAD_INPUT)


def _settings(index: Path, state: Path | None) -> Settings:
    from service.settings import Settings

    settings = Settings(index_dir=index)
    return settings if state is None else settings.model_copy(update={"state_dir": state})


def _store(index: Path, state: Path | None, *, create: bool = False) -> WatchStore:
    from service.watch.store import StateError, WatchStore

    settings = _settings(index, state)
    try:
        return WatchStore.of(index, settings, create=create)
    except StateError as exc:
        _fail(str(exc))


def _engine(index: Path, state: Path | None) -> Engine:
    from service.engine import Engine
    from service.index.folder import IndexFormatError

    try:
        return Engine.load(index, settings=_settings(index, state), verify=False)
    except IndexFormatError as exc:
        _fail(str(exc))


def _owner(key: str | None) -> str | None:
    from service.watch.store import owner_of

    return owner_of(key) if key is not None else None


@watch_app.command("add")
def add_command(
    index: Path = _INDEX,
    query: str | None = typer.Option(None, "--query", "-q", help="Claims, title+abstract, or a publication number."),
    query_file: Path | None = typer.Option(None, "--query-file", help="Read the query from this file."),
    lang: str = typer.Option("auto", "--lang", help="auto, en, de or fr."),
    k: int = typer.Option(10, "--k", help="A new document is a hit in this top k (1-100)."),
    name: str | None = typer.Option(None, "--name", help="What to call it (default: the query's start)."),
    codes: list[str] = typer.Option([], "--code", help="A classification code of the query (repeatable)."),
    code_filter: str = typer.Option("none", "--code-filter", help="Keep documents sharing a code at this level."),
    before: str | None = typer.Option(None, "--before", help="Keep documents published before this date (ISO)."),
    translate: bool = typer.Option(True, "--translate/--no-translate", help="Translate the query (PSQ)."),
    key: str | None = _KEY,
    state: Path | None = _STATE,
    as_json: bool = _JSON,
) -> None:
    """Save a search as a watch (its search runs once now, at the index's current generation)."""
    from pydantic import ValidationError

    from service.query import QueryError
    from service.watch.evaluate import save_watch
    from service.watch.models import WatchRequest
    from service.watch.store import StateError, owner_of

    if (query is None) == (query_file is None):
        _fail("give the query with --query or --query-file (one of them)")
    text = query if query is not None else query_file.read_text(encoding="utf-8")  # type: ignore[union-attr]
    try:
        req = WatchRequest.model_validate({
            "query": text, "lang": lang, "k": k, "name": name, "codes": codes, "code_filter": code_filter,
            "before": date.fromisoformat(before) if before else None, "translate": translate})
    except (ValidationError, ValueError) as exc:
        _fail(_validation_message(exc))
    store = _store(index, state, create=True)
    engine = _engine(index, state)
    try:
        watch = save_watch(engine, store, owner_of(key), req)
    except QueryError as exc:
        _fail(str(exc))
    except StateError as exc:
        _fail(str(exc))
    finally:
        engine.close()
    if as_json:
        typer.echo(watch.model_dump_json(indent=1))
    else:
        typer.echo(f"watch {watch.id} saved at generation {watch.created_generation}: {watch.name!r}, top "
                   f"{watch.request.k}")


def _validation_message(exc: Exception) -> str:
    from pydantic import ValidationError

    if isinstance(exc, ValidationError):
        return "; ".join(f"{'.'.join(str(x) for x in e['loc'])}: {e['msg']}" for e in exc.errors())
    return str(exc)


@watch_app.command("list")
def list_command(index: Path = _INDEX, key: str | None = _KEY, state: Path | None = _STATE,
                 as_json: bool = _JSON) -> None:
    """The watches (of --key, else all), with their hits and the generation each was evaluated at."""
    store = _store(index, state)
    watches = store.watches(_owner(key))
    if as_json:
        typer.echo(json.dumps([w.model_dump(mode="json") for w in watches], indent=1))
        return
    if not watches:
        typer.echo("no watches")
    for w in watches:
        error = f"; last evaluation failed: {w.error}" if w.error else ""
        typer.echo(f"{w.id}  {w.name!r}  top {w.request.k}  saved at generation {w.created_generation}, evaluated "
                   f"at {w.evaluated_generation}  {w.hits} hits{error}")


@watch_app.command("hits")
def hits_command(index: Path = _INDEX, watch_id: str = typer.Argument(..., help="The watch's id."),
                 since: int | None = typer.Option(None, "--since", min=0, help="Only hits of later generations."),
                 key: str | None = _KEY, state: Path | None = _STATE, as_json: bool = _JSON) -> None:
    """A watch's hits: the new documents in its top k, newest generation first, with their best passage."""
    store = _store(index, state)
    hits = store.hits(_owner(key), watch_id, since)
    if hits is None:
        _fail(f"no watch {watch_id!r}" + (" for this key" if key is not None else ""))
    if as_json:
        typer.echo(json.dumps([h.model_dump(mode="json") for h in hits], indent=1))
        return
    if not hits:
        typer.echo("no hits" + (f" after generation {since}" if since is not None else ""))
    for h in hits:
        typer.echo(f"generation {h.generation}  rank {h.rank}  {h.doc_id}  {h.score:.3f}  {h.title or ''}")
        if h.passage is not None:
            text = " ".join(h.passage.text.split())
            typer.echo(f"    {' > '.join(h.passage.section_path)} ({h.passage.lang}): "
                       f"{text[:200] + ('…' if len(text) > 200 else '')}")


@watch_app.command("run")
def run_command(index: Path = _INDEX, state: Path | None = _STATE, as_json: bool = _JSON,
                batch: int = typer.Option(250, "--batch", min=1, help="Watches whose evaluations are committed "
                                          "together (one transaction)."),
                chunk: int = typer.Option(250, "--chunk", min=1, help="Watches that share one cut of the index "
                                          "(the new documents and their top k)."),
                workers: int | None = typer.Option(None, "--workers", min=1, help="Watches evaluated at once, in "
                                                   "processes (1,000 or more a worker) or threads (default: one per "
                                                   "core).")) -> None:
    """Evaluate the watches not yet evaluated at the index's newest generation (what `priorart add` and a server
    do by themselves); a rerun after a crash finishes what was left, once."""
    from service.index.folder import IndexFormatError
    from service.watch.store import StateError

    try:
        report = evaluate_watches(index, state, batch=batch, chunk=chunk, workers=workers)
    except (StateError, IndexFormatError) as exc:
        _fail(str(exc))
    if report is None:
        typer.echo("no watches" if not as_json else "{}")
        return
    typer.echo(json.dumps(report.to_dict(), indent=1) if as_json else report.line())


@watch_app.command("delete")
def delete_command(index: Path = _INDEX, watch_id: str = typer.Argument(..., help="The watch's id."),
                   key: str | None = _KEY, state: Path | None = _STATE) -> None:
    """Delete a watch with its hits."""
    if not _store(index, state).delete(_owner(key), watch_id):
        _fail(f"no watch {watch_id!r}" + (" for this key" if key is not None else ""))
    typer.echo(f"watch {watch_id} deleted")


def evaluate_watches(index: Path, state: Path | None = None, *, batch: int = 250, chunk: int = 250,
                     workers: int | None = None) -> EvaluationReport | None:
    """Evaluate the watches of ``index`` at its newest generation (None: no watch was ever saved there), then push
    the hits to the watches' webhooks (with the retries that are due). ``workers``: watches evaluated at once (None:
    one per core: the writer has the machine). Raises ``StateError`` (an unusable state folder) or
    ``IndexFormatError`` (an index that does not load)."""
    from service.engine import Engine
    from service.watch.evaluate import all_cores, evaluate
    from service.watch.store import WatchStore
    from service.watch.webhooks import deliver

    settings = _settings(index, state)
    store = WatchStore.of(index, settings)
    if not store.exists:
        return None
    engine = Engine.load(index, settings=settings, verify=False)
    try:
        report = evaluate(engine, store, batch=batch, chunk=chunk, workers=workers or all_cores())
    finally:
        engine.close()
    report.webhooks = deliver(store, backoff_s=settings.webhook_backoff_s, allow=settings.webhook_allow).to_dict()
    return report


def register(app: typer.Typer) -> None:
    """Add the ``watch`` command group to the CLI."""
    app.add_typer(watch_app, name="watch")
