"""A real PostgreSQL server for the tests (issue 62: the watches' shared state): Debian's ``postgresql`` package
(scripts/setup.sh installs it), a cluster of its own made by ``initdb`` in a temporary folder and started by
``pg_ctl`` on a free port of 127.0.0.1, as the ``postgres`` user when the tests run as root (PostgreSQL refuses
root); stopped and removed at the end. Each test gets a database of its own (:func:`new_database`)."""

from __future__ import annotations

import contextlib
import glob
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path


def _bin(name: str) -> str | None:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found[-1] if found else shutil.which(name)


def unavailable() -> str | None:
    """Why no server can be started here (None: it can)."""
    if _bin("initdb") is None or _bin("pg_ctl") is None:
        return "PostgreSQL is not installed (Debian's postgresql package: scripts/setup.sh installs it)"
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "running as root without runuser: PostgreSQL refuses to run as root"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (the service extra)"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(args: list[str], as_postgres: bool) -> None:
    cmd = ["runuser", "-u", "postgres", "--", *args] if as_postgres else args
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args[:2])} failed: {done.stdout}{done.stderr}")


@contextlib.contextmanager
def postgres_server() -> Iterator[str]:
    """The URL (``postgresql://postgres@127.0.0.1:PORT/postgres``) of a new server, until the block ends."""
    as_postgres = os.geteuid() == 0
    folder = Path(tempfile.mkdtemp(prefix="priorart-pg-"))
    data = folder / "data"
    if as_postgres:
        import pwd

        user = pwd.getpwnam("postgres")
        os.chown(folder, user.pw_uid, user.pw_gid)
    os.chmod(folder, 0o755)
    port = _free_port()
    initdb, pg_ctl = _bin("initdb"), _bin("pg_ctl")
    assert initdb is not None and pg_ctl is not None
    try:
        _run([initdb, "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-instructions"],
             as_postgres)
        _run([pg_ctl, "-D", str(data), "-l", str(folder / "log"), "-w", "-t", "60", "-o",
              f"-c listen_addresses=127.0.0.1 -p {port} -k {folder} -c fsync=off -c max_connections=200", "start"],
             as_postgres)
        try:
            yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
        finally:
            with contextlib.suppress(Exception):
                _run([pg_ctl, "-D", str(data), "-m", "immediate", "-w", "stop"], as_postgres)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def new_database(server: str) -> str:
    """A new empty database on the server; its URL."""
    import psycopg

    name = "w_" + secrets.token_hex(6)
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return server.rsplit("/", 1)[0] + "/" + name
