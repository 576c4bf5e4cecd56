"""The watch database: SQLite in the state folder (the embedded default) or PostgreSQL (``PRIORART_DATABASE_URL``),
through SQLAlchemy, with one schema made and upgraded by alembic (``service/watch/migrations``).

The store (service/watch/store.py) writes its SQL once, with ``?`` parameters (psycopg's ``%s`` for PostgreSQL) and
the statements both databases take (``INSERT ... ON CONFLICT``). Connections are in autocommit mode and transactions
explicit (:meth:`Conn.begin`: SQLite's ``BEGIN IMMEDIATE``, which takes the write lock at once; PostgreSQL's
``BEGIN``). One evaluator at a time (:meth:`Database.lock`): a file lock beside the SQLite file (one host), a
PostgreSQL advisory lock held by a session of its own (every replica and CLI on the database).

One database holds the watches of one index: two indexes need two databases (or two state folders).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sqlalchemy import Connection, Engine

log = logging.getLogger(__name__)

MIGRATIONS = Path(__file__).with_name("migrations")
HEAD = "0003"  # the newest migration (service/watch/migrations/versions)
LEGACY_SQLITE_VERSION = 1  # PRAGMA user_version of the SQLite files written before the migrations: revision 0001

_ENGINES: dict[tuple[str, int], Engine] = {}
_ENGINES_LOCK = threading.Lock()
_MIGRATED: set[tuple[str, int, int]] = set()  # the databases this process has brought to HEAD


class StateError(ValueError):
    """The watch state cannot be used (a state folder inside the index, a database unreachable or not writable, a
    newer schema); the message says which and what to do."""


def _lock_key(name: str) -> int:
    """A PostgreSQL advisory lock key (signed 64 bits) of a name."""
    return int.from_bytes(hashlib.sha256(f"priorart:{name}".encode()).digest()[:8], "big", signed=True)


def redacted(url: str) -> str:
    """A database URL without its password (for messages)."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - a URL that does not parse is shown as the scheme alone
        return url.split(":", 1)[0] + ":..."


class Conn:
    """One connection, autocommit, transactions explicit; ``?`` parameters in every statement."""

    def __init__(self, raw: Connection, postgres: bool) -> None:
        self.raw, self.postgres = raw, postgres

    def _sql(self, sql: str) -> str:
        return sql.replace("?", "%s") if self.postgres else sql

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        """The statement's result (SQLAlchemy's ``CursorResult``: ``fetchone``, ``fetchall``, ``rowcount``, rows as
        tuples)."""
        return self.raw.exec_driver_sql(self._sql(sql), tuple(params))

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if rows:
            self.raw.exec_driver_sql(self._sql(sql), [tuple(r) for r in rows])

    def begin(self) -> None:
        """Start a transaction (SQLite: the write lock at once, so two writers queue instead of failing later)."""
        self.raw.exec_driver_sql("BEGIN" if self.postgres else "BEGIN IMMEDIATE")

    def commit(self) -> None:
        self.raw.exec_driver_sql("COMMIT")

    def rollback(self) -> None:
        self.raw.exec_driver_sql("ROLLBACK")

    def close(self) -> None:
        self.raw.close()


class Database:
    """The watch database of a state folder (SQLite, ``root/name``) or at ``url`` (PostgreSQL)."""

    def __init__(self, root: str | Path, name: str, url: str | None = None) -> None:
        self.root = Path(root)
        self.file = None if url else (self.root / name).absolute()  # the SQLite file
        self.url = url or f"sqlite:///{self.file}"
        self.postgres = url is not None
        if self.postgres and not self.url.startswith(("postgresql", "postgres")):
            raise StateError(f"PRIORART_DATABASE_URL {redacted(self.url)}: a postgresql:// URL is expected "
                                "(SQLite is the default: leave it unset)")
        self.where = redacted(self.url) if self.postgres else str(self.root / name)

    # ------------------------------------------------------------------ connections
    def engine(self) -> Engine:
        """The engine of this URL in this process (its pool; a forked worker makes its own)."""
        from sqlalchemy import create_engine, event

        key = (self.url, os.getpid())
        with _ENGINES_LOCK:
            engine = _ENGINES.get(key)
            if engine is None:
                url = self.url.replace("postgresql://", "postgresql+psycopg://", 1).replace(
                    "postgres://", "postgresql+psycopg://", 1)
                if self.postgres:
                    engine = create_engine(url, isolation_level="AUTOCOMMIT", pool_pre_ping=True)
                else:
                    engine = create_engine(url, isolation_level="AUTOCOMMIT",
                                           connect_args={"timeout": 60.0, "check_same_thread": False})

                    @event.listens_for(engine, "connect")
                    def _pragmas(dbapi_conn: Any, _record: Any) -> None:
                        cur = dbapi_conn.cursor()
                        cur.execute("PRAGMA journal_mode=WAL")
                        cur.execute("PRAGMA synchronous=FULL")
                        cur.execute("PRAGMA foreign_keys=ON")
                        cur.close()
                _ENGINES[key] = engine
        return engine

    def connect(self) -> Conn:
        """A connection to a database whose schema is this code's (made or upgraded at the first connection of a
        process that may create it: :meth:`migrate`)."""
        from sqlalchemy.exc import SQLAlchemyError

        try:
            raw = self.engine().connect()
        except SQLAlchemyError as exc:
            raise StateError(f"cannot open the watch database {self.where}: {_reason(exc)}") from exc
        return Conn(raw, self.postgres)

    # ------------------------------------------------------------------ schema
    def has_schema(self) -> bool:
        """Whether the database holds the watches' tables (any revision)."""
        if self.file is not None and not self.file.is_file():
            return False
        if self._migration_key() in _MIGRATED:  # this process made or upgraded it: no round trip to ask again
            return True
        with contextlib.closing(self.connect()) as conn:
            return self._revision(conn) is not None

    def _revision(self, conn: Conn) -> str | None:
        from sqlalchemy import inspect

        tables = set(inspect(conn.raw).get_table_names())
        if "alembic_version" in tables:
            row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
            return str(row[0]) if row else None
        if not self.postgres and "watches" in tables:
            row = conn.execute("PRAGMA user_version").fetchone()
            if row is not None and row[0] == LEGACY_SQLITE_VERSION:
                return "legacy"
        return None

    def migrate(self) -> None:
        """Make the schema, or upgrade it to this code's (alembic, ``HEAD``), once per process; refuses a database
        of a newer revision. Two processes at once: one migrates, the other waits (the schema lock)."""
        if self._migration_key() in _MIGRATED:
            return
        from alembic import command
        from alembic.config import Config
        from alembic.script import ScriptDirectory
        from sqlalchemy.exc import SQLAlchemyError

        cfg = Config()
        cfg.set_main_option("script_location", str(MIGRATIONS))
        logging.getLogger("alembic").setLevel(logging.WARNING)  # (its INFO lines repeat each migration's docstring)
        known = {s.revision for s in ScriptDirectory.from_config(cfg).walk_revisions()}
        try:
            with self.lock("schema") as _, contextlib.closing(self.connect()) as conn:
                revision = self._revision(conn)
                if revision is not None and revision != "legacy" and revision not in known:
                    raise StateError(f"the watch database {self.where} has schema revision {revision}, newer than "
                                        f"this priorart's ({HEAD}): upgrade priorart")
                if revision != HEAD:
                    # PostgreSQL: a connection of its own, the migration in one transaction (its DDL is
                    # transactional); SQLite: this one (env.py begins and commits the transaction)
                    with contextlib.ExitStack() as stack:
                        mig = (stack.enter_context(self.engine().connect()).execution_options(
                            isolation_level="READ COMMITTED") if self.postgres else conn.raw)
                        cfg.attributes["connection"] = mig
                        if revision == "legacy":  # a file of the schema before the migrations: 0001's tables
                            command.stamp(cfg, "0001")
                        command.upgrade(cfg, HEAD)
                    log.info("watch database %s: schema at revision %s", self.where, HEAD)
        except SQLAlchemyError as exc:
            raise StateError(f"cannot use the watch database {self.where}: {_reason(exc)}") from exc
        _MIGRATED.add(self._migration_key())

    def _migration_key(self) -> tuple[str, int, int]:
        """This database in this process (a SQLite file by its inode: a file removed and made again is new)."""
        inode = -1
        if self.file is not None:
            with contextlib.suppress(OSError):
                inode = self.file.stat().st_ino
        return self.url, os.getpid(), inode

    # ------------------------------------------------------------------ locks
    @contextlib.contextmanager
    def lock(self, name: str, *, wait: bool = True) -> Iterator[bool]:
        """A lock across processes (``name``: what it guards); yields False when ``wait`` is off and another holds
        it. SQLite: ``flock`` on ``root/<name>.lock`` (the processes of one host, which share the file);
        PostgreSQL: an advisory lock of the name, on a connection of its own (every host on the database; released
        when that session ends, so a killed holder releases it)."""
        if not self.postgres:
            fd = os.open(self.root / f"{name}.lock", os.O_RDWR | os.O_CREAT, 0o644)
            try:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
                except BlockingIOError:
                    yield False
                    return
                yield True
            finally:
                os.close(fd)
            return
        conn = self.connect()
        key = _lock_key(name)
        try:
            if wait:
                conn.execute("SELECT pg_advisory_lock(?)", (key,))
                got = True
            else:
                got = bool(conn.execute("SELECT pg_try_advisory_lock(?)", (key,)).scalar())
            try:
                yield got
            finally:
                if got:
                    conn.execute("SELECT pg_advisory_unlock(?)", (key,))
        finally:
            conn.close()


def _reason(exc: BaseException) -> str:
    """The database's own words for an error (the first line of the driver's message)."""
    orig = getattr(exc, "orig", None) or exc
    return str(orig).strip().splitlines()[0] if str(orig).strip() else type(orig).__name__


__all__ = ["HEAD", "Conn", "Database", "StateError", "redacted"]
