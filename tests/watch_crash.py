"""A ``priorart`` process that kills itself (SIGKILL) when it would commit its ``WATCH_CRASH_AT``-th batch of
watch evaluations, their rows written: what a crash then leaves (tests of the watches' evaluation)."""

CRASH_AT_COMMIT = """
import os, runpy, signal, sys

from service.watch.store import WatchStore

AT = int(os.environ["WATCH_CRASH_AT"])
connect = WatchStore.connect


class Connection:
    \"\"\"A connection that kills the process (SIGKILL) at the AT-th commit of evaluations, their rows written.\"\"\"

    def __init__(self, conn):
        self._conn, self._evaluations, self._commits = conn, False, 0

    def execute(self, sql, *args):
        if sql.startswith("INSERT INTO evaluations"):
            self._evaluations = True
        return self._conn.execute(sql, *args)

    def commit(self):
        if self._evaluations:
            self._evaluations, self._commits = False, self._commits + 1
            if self._commits == AT:
                os.kill(os.getpid(), signal.SIGKILL)
        return self._conn.commit()

    def __getattr__(self, name):
        return getattr(self._conn, name)


WatchStore.connect = lambda self: Connection(connect(self))
sys.argv[0] = "priorart"
runpy.run_module("training.cli", run_name="__main__", alter_sys=True)
"""
"""``priorart`` with a fault injected: the process kills itself when it would commit the ``WATCH_CRASH_AT``-th batch
of evaluations, their rows written, as a crash then would."""
