"""Watches, their evaluations and hits: one database, SQLite in the state folder (WAL, ``synchronous=FULL``; the
embedded default) or PostgreSQL when ``PRIORART_DATABASE_URL`` names one (every replica and CLI then shares the
watches: service/watch/db.py, its schema made and upgraded by alembic).

The state folder sits beside the index folder (``PRIORART_STATE_DIR``; default ``INDEX.state`` next to ``INDEX``),
never inside it: a rebuild replaces the index folder, and the watches outlive it. :func:`state_dir` refuses a
folder inside the index. With PostgreSQL it holds only the locks of the processes of one host.

Tables::

    watches      id, owner, name, request (JSON), created, created_generation, evaluated_generation,
                 topk (JSON: the ids of k documents that rank high for it, the bound of its next evaluation), error
    evaluations  (watch_id, build, generation) -> new_documents, hits, how ('bound' | 'search' | 'nothing new' |
                 'error'), kth_score, ms, error: one row per watch and generation evaluated, written with its hits
    hits         (watch_id, build, generation, doc_id) -> rank, score, title, publication_date, passage (JSON),
                 found_at, dropped_generation (the generation that deleted the document; NULL while it is live)
    documents    doc_id -> the generation that brought it (added or replaced it): which documents are new to a watch
    state        synced_generation (the generation ``documents`` describes), index (the build it belongs to)

``build`` is the index's build (its meta.json's creation time): a rebuild at the same path counts its generations
from 0 again, so evaluations and hits name the build they were made on. A rebuild is noticed at the next sync (an
add's evaluation, or a watch saved): the rebuilt index's documents are the watches' new baseline (generation 0),
and the documents its adds brought since are new to every watch.

Idempotence. A watch's evaluation at a generation is one set of rows (its ``evaluations`` row, its hits, its
``evaluated_generation`` moved on) written in one transaction with the other watches of its batch: a crash before
the commit leaves none of them, and the rerun evaluates those watches again; after it, the watch is no longer
pending. The primary keys make a second copy of an evaluation or a hit an error, never a duplicate.

Owners. A watch belongs to the API key that saved it (:func:`owner_of`: a digest of the key, never the key); a
server without API keys has one owner, ``""``. Reads and deletes of an owner see only its watches (another owner's
watch is "not found"); ``owner=None`` is the operator's view (the CLI): every watch.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import secrets
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from service.schema import PassageHit
from service.watch.db import Conn, Database, StateError
from service.watch.models import Delivery, Watch, WatchHit, WatchRequest, now

log = logging.getLogger(__name__)

DB_NAME = "watches.sqlite"
EVALUATE_LOCK = "evaluate"  # the evaluations' lock (evaluate.lock beside the SQLite file; a PostgreSQL advisory lock)
STATE_SUFFIX = ".state"
REBUILT_BASE = 0  # the generation of a (re)built index's own documents


def state_dir(index_dir: str | Path, configured: str | Path | None = None) -> Path:
    """The state folder of an index: ``configured``, else ``INDEX.state`` beside it. Raises :class:`StateError` for
    a folder inside the index folder (a rebuild replaces it, and the watches with it)."""
    index = Path(index_dir).absolute()
    folder = Path(configured).absolute() if configured is not None else index.with_name(index.name + STATE_SUFFIX)
    real_index, real_folder = Path(os.path.realpath(index)), Path(os.path.realpath(folder))
    if real_folder == real_index or real_index in real_folder.parents:
        raise StateError(f"the state folder {folder} is inside the index folder {index}, which a rebuild replaces: "
                         "set PRIORART_STATE_DIR (or --state-dir) to a folder beside it")
    return folder


def owner_of(api_key: str | None) -> str:
    """The owner a request's API key stands for: a digest of the key (the key itself is never stored); ``""``
    without a key."""
    if not api_key:
        return ""
    return "key:" + hashlib.sha256(api_key.encode("utf-8")).hexdigest()[:20]


@dataclass
class Snapshot:
    """What the store needs of an index generation: its rows' ids, which rows are live, per row the generation
    that wrote its segment (-1: the build's own folder or a compacted segment, whose documents may be older), and
    the publications the adds still on disk wrote (a compaction since does not hide them)."""

    generation: int
    index: str  # the build (its meta.json's creation time): a rebuild starts over
    ids: Sequence[str]
    live: np.ndarray | None
    provenance: np.ndarray
    added: dict[str, int] = field(default_factory=dict)  # publication -> the newest generation that added it


@dataclass
class Pending:
    """A watch not yet evaluated at a generation."""

    id: str
    owner: str
    request: WatchRequest
    evaluated_generation: int
    topk: list[str]


@dataclass
class Outcome:
    """One watch's evaluation at a generation, as it is written."""

    watch_id: str
    generation: int
    new_documents: int
    how: str
    ms: float
    hits: list[WatchHit] = field(default_factory=list)
    topk: list[str] | None = None  # None: keep the stored ones
    kth_score: float | None = None
    error: str | None = None
    webhook: Any = None  # the watch's Webhook (models.py): its hits are pushed there
    watch_name: str = ""


class WatchStore:
    """The watch database of one state folder (SQLite) or of ``url`` (PostgreSQL). Connections are made per call
    (thread-safe); an evaluation keeps one for its run (:meth:`connect`)."""

    def __init__(self, root: str | Path, url: str | None = None) -> None:
        self.root = Path(root)
        self.db = Database(self.root, DB_NAME, url)
        self.where = self.db.where
        self._exists = False

    @property
    def path(self) -> Path:
        """The SQLite file (a store on PostgreSQL has none: ``where`` names its database)."""
        if self.db.file is None:
            raise StateError(f"the watches are in {self.where}, not in a file")
        return self.db.file

    @classmethod
    def of(cls, index_dir: str | Path, settings: Any, *, create: bool = False,
           state: str | Path | None = None) -> WatchStore:
        """The store of an index as ``settings`` say: PostgreSQL at ``database_url``, else SQLite in the state
        folder (``state``, else ``settings.state_dir``, else ``INDEX.state``); ``create``: :meth:`open`'s."""
        root = state_dir(index_dir, state if state is not None else settings.state_dir)
        url = settings.database_url
        return cls.open(root, create=True, url=url) if create else cls(root, url)

    @property
    def exists(self) -> bool:
        """Whether a watch was ever saved here (the database and its tables are there)."""
        if not self._exists:
            self._exists = self.db.has_schema()
        return self._exists

    @classmethod
    def open(cls, root: str | Path, *, create: bool = False, url: str | None = None) -> WatchStore:
        """The store of ``root`` (and ``url``); ``create`` makes the folder and the database's schema when missing
        (else a :class:`StateError`)."""
        store = cls(root, url)
        if not store.exists:
            if not create:
                raise StateError(f"no watches in {store.where}: save one first")
            try:
                store.root.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StateError(f"cannot create the state folder {store.root}: {exc}") from exc
        with contextlib.closing(store.connect()):
            pass
        return store

    def connect(self) -> Conn:
        """A connection in autocommit mode (transactions are explicit; SQLite: WAL, fsync at each commit), the
        schema made or upgraded at a process's first (service/watch/db.py)."""
        self.db.migrate()
        return self.db.connect()

    @contextlib.contextmanager
    def evaluation_lock(self, *, wait: bool = True) -> Iterator[bool]:
        """One evaluation at a time across processes (servers, ``priorart add``, ``priorart watch run``; with
        PostgreSQL across hosts too); yields False when ``wait`` is off and another holds it."""
        with self.db.lock(EVALUATE_LOCK, wait=wait) as got:
            yield got

    # ------------------------------------------------------------------ watches
    def add(self, owner: str, request: WatchRequest, generation: int, topk: Sequence[str] = ()) -> Watch:
        """Save a watch at ``generation`` (the documents of it and before are never its hits); ``topk``: the ids of
        its top k there (the bound of its first evaluation)."""
        wid = secrets.token_hex(9)  # (not token_urlsafe: an id that began with '-' read as an option on the CLI)
        with contextlib.closing(self.connect()) as conn:
            conn.execute("INSERT INTO watches (id, owner, name, request, created, created_generation, "
                         "evaluated_generation, topk) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                         (wid, owner, request.title(), request.model_dump_json(), now(), generation, generation,
                          json.dumps(list(topk))))
        watch = self.get(owner, wid)
        assert watch is not None
        return watch

    def watches(self, owner: str | None) -> list[Watch]:
        """The watches of ``owner`` (None: all), oldest first."""
        with contextlib.closing(self.connect()) as conn:
            return [self._watch(r) for r in conn.execute(_WATCH_SQL + (" WHERE w.owner = ?" if owner is not None
                                                                          else "") + " ORDER BY w.created, w.id",
                                                         (owner,) if owner is not None else ())]

    def get(self, owner: str | None, watch_id: str) -> Watch | None:
        """A watch of ``owner`` (None: any owner); None when there is none of that id."""
        sql = _WATCH_SQL + " WHERE w.id = ?" + (" AND w.owner = ?" if owner is not None else "")
        with contextlib.closing(self.connect()) as conn:
            row = conn.execute(sql, (watch_id, owner) if owner is not None else (watch_id,)).fetchone()
        return self._watch(row) if row else None

    def delete(self, owner: str | None, watch_id: str) -> bool:
        """Delete a watch with its evaluations and hits; False when ``owner`` has none of that id."""
        sql = "DELETE FROM watches WHERE id = ?" + (" AND owner = ?" if owner is not None else "")
        with contextlib.closing(self.connect()) as conn:
            return conn.execute(sql, (watch_id, owner) if owner is not None else (watch_id,)).rowcount > 0

    def hits(self, owner: str | None, watch_id: str, since: int | None = None) -> list[WatchHit] | None:
        """The hits of a watch found at generations after ``since`` (None: all), newest generation first, by rank;
        documents deleted since are left out. None when ``owner`` has no such watch."""
        if self.get(owner, watch_id) is None:
            return None
        with contextlib.closing(self.connect()) as conn:
            rows = conn.execute(
                "SELECT doc_id, title, publication_date, generation, rank, score, found_at, passage FROM hits "
                "WHERE watch_id = ? AND generation > ? AND dropped_generation IS NULL "
                "ORDER BY generation DESC, rank", (watch_id, -1 if since is None else since)).fetchall()
        return [WatchHit(doc_id=r[0], title=r[1], publication_date=r[2], generation=r[3], rank=r[4], score=r[5],
                         found_at=r[6], passage=PassageHit.model_validate_json(r[7]) if r[7] else None)
                for r in rows]

    def evaluations(self, watch_id: str) -> list[dict[str, Any]]:
        """A watch's evaluations, oldest first (what each found and how)."""
        with contextlib.closing(self.connect()) as conn:
            cur = conn.execute("SELECT build, generation, done_at, new_documents, hits, how, kth_score, ms, error "
                               "FROM evaluations WHERE watch_id = ? ORDER BY done_at, generation", (watch_id,))
            names = list(cur.keys())
            return [dict(zip(names, r, strict=True)) for r in cur]

    @staticmethod
    def _watch(row: Sequence[Any]) -> Watch:
        wid, name, request, created, created_gen, evaluated_gen, error, n_hits, last = row
        return Watch(id=wid, name=name, request=WatchRequest.model_validate_json(request).shown(), created=created,
                     created_generation=created_gen, evaluated_generation=evaluated_gen, hits=n_hits or 0,
                     last_hit_generation=last, error=error)

    # ------------------------------------------------------------------ evaluation
    def synced_generation(self, conn: Conn) -> int | None:
        row = conn.execute("SELECT value FROM state WHERE key = 'synced_generation'").fetchone()
        return int(row[0]) if row else None

    def synced_build(self, conn: Conn) -> str | None:
        """The build of the index the store describes (None before the first sync)."""
        row = conn.execute("SELECT value FROM state WHERE key = 'index'").fetchone()
        return str(row[0]) if row else None

    def sync(self, conn: Conn, snap: Snapshot) -> np.ndarray | None:
        """Record which generation brought each live document of ``snap`` and drop the hits of deleted documents;
        returns that generation per row (-1 for a deleted row), or None when the store already describes a newer
        generation (``snap`` is stale: evaluating it could only go back).

        A document is new (brought by generation g) when its id was not live at the last sync, or when its row lies
        in a segment written by generation g after the one recorded, or an add of generation g still on disk wrote
        it (a replaced publication). A segment of the build or a compaction says nothing of when its documents came:
        a publication replaced by an add whose segment is gone keeps its generation. A different build of the index
        (a rebuild) starts over at its own generation 0: the documents of its build (and of compactions since) are
        every watch's new baseline, those its adds brought are new, and every watch is evaluated again from
        generation 0 of the new build."""
        synced = self.synced_generation(conn)
        index_row = conn.execute("SELECT value FROM state WHERE key = 'index'").fetchone()
        rebuilt = index_row is not None and index_row[0] != snap.index
        base = REBUILT_BASE if rebuilt else snap.generation  # what a document of no known generation counts as
        if synced is not None and snap.generation < synced and not rebuilt:
            return None
        known: dict[str, int] = {} if rebuilt else {
            str(d): int(gen) for d, gen in conn.execute("SELECT doc_id, generation FROM documents").fetchall()}
        g = snap.generation
        brought = np.full(len(snap.ids), -1, dtype=np.int64)
        live = snap.live
        prov = snap.provenance.tolist()
        added = snap.added
        changed: list[tuple[str, int]] = []
        seen: set[str] = set()
        for row, pid in enumerate(snap.ids):
            if live is not None and not live[row]:
                continue
            seen.add(pid)
            before = known.get(pid)
            p = max(prov[row], added.get(pid, -1))
            if before is None:
                b = p if p >= 0 else base
            else:
                b = p if p > before else before
            if b != before:
                changed.append((pid, b))
            brought[row] = b
        gone = [pid for pid in known if pid not in seen]
        if synced == g and not changed and not gone and not rebuilt:
            return brought
        active = conn.execute("SELECT DISTINCT doc_id FROM hits WHERE dropped_generation IS NULL").fetchall()
        dropped = [(g, d) for (d,) in active if d not in seen]
        conn.begin()
        try:
            if rebuilt:
                log.warning("the index was rebuilt (build %s, was %s): its build's documents are the watches' new "
                            "baseline, the documents its adds brought since (generations %d to %d) are new to every "
                            "watch", snap.index, index_row[0] if index_row else None, REBUILT_BASE + 1, g)
                conn.execute("DELETE FROM documents")
                conn.execute("UPDATE watches SET evaluated_generation = ?, topk = '[]'", (REBUILT_BASE,))
            conn.executemany("INSERT INTO documents (doc_id, generation) VALUES (?, ?) "
                             "ON CONFLICT (doc_id) DO UPDATE SET generation = excluded.generation", changed)
            conn.executemany("DELETE FROM documents WHERE doc_id = ?", [(d,) for d in gone])
            conn.executemany("UPDATE hits SET dropped_generation = ? WHERE doc_id = ? AND dropped_generation IS NULL",
                             dropped)
            conn.executemany("INSERT INTO state (key, value) VALUES (?, ?) "
                             "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                             [("synced_generation", str(g)), ("index", snap.index)])
            conn.commit()
        except BaseException:
            conn.rollback()
            raise
        if dropped:
            log.info("watches: %d hit document(s) deleted by generation %d left out", len(dropped), g)
        return brought

    def pending(self, conn: Conn, generation: int) -> list[Pending]:
        """The watches evaluated before ``generation``, in id order."""
        rows = conn.execute("SELECT id, owner, request, evaluated_generation, topk FROM watches "
                            "WHERE evaluated_generation < ? ORDER BY id", (generation,)).fetchall()
        return [Pending(r[0], r[1], WatchRequest.model_validate_json(r[2]), r[3], json.loads(r[4])) for r in rows]

    def record(self, conn: Conn, outcomes: Sequence[Outcome], build: str) -> int:
        """Write the evaluations of a batch of watches (at generations of the index's ``build``) in one transaction;
        returns how many were written (a watch deleted meanwhile, or evaluated at that generation by another
        process, is left out)."""
        written = 0
        stamp = now()
        conn.begin()
        try:
            for o in outcomes:
                if o.topk is None:
                    cur = conn.execute("UPDATE watches SET evaluated_generation = ?, error = ? "
                                       "WHERE id = ? AND evaluated_generation < ?",
                                       (o.generation, o.error, o.watch_id, o.generation))
                else:
                    cur = conn.execute("UPDATE watches SET evaluated_generation = ?, error = ?, topk = ? "
                                       "WHERE id = ? AND evaluated_generation < ?",
                                       (o.generation, o.error, json.dumps(o.topk), o.watch_id, o.generation))
                if cur.rowcount == 0:
                    continue
                conn.execute("INSERT INTO evaluations (watch_id, build, generation, done_at, new_documents, hits, how, "
                             "kth_score, ms, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                             (o.watch_id, build, o.generation, stamp, o.new_documents, len(o.hits), o.how,
                              o.kth_score, o.ms, o.error))
                if o.hits and o.webhook is not None:  # the push, queued with the hits (service/watch/webhooks.py)
                    self._queue_delivery(conn, o, build, stamp)
                conn.executemany(
                    "INSERT INTO hits (watch_id, build, generation, doc_id, rank, score, title, publication_date, "
                    "passage, found_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [(o.watch_id, build, h.generation, h.doc_id, h.rank, h.score, h.title,
                      h.publication_date.isoformat() if h.publication_date else None,
                      h.passage.model_dump_json() if h.passage is not None else None, h.found_at) for h in o.hits])
                written += 1
            conn.commit()
        except BaseException:
            with contextlib.suppress(Exception):
                conn.rollback()
            raise
        return written


    # ------------------------------------------------------------------ webhook deliveries
    @staticmethod
    def _queue_delivery(conn: Conn, o: Outcome, build: str, stamp: str) -> None:
        """The delivery of an evaluation's hits, in the evaluation's transaction (the outbox: committed with the hits
        or not at all)."""
        from service.watch.webhooks import payload

        assert o.webhook is not None
        did = secrets.token_hex(12)
        conn.execute("INSERT INTO deliveries (id, watch_id, build, generation, url, payload, hits, created, "
                     "next_attempt) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                     (did, o.watch_id, build, o.generation, str(o.webhook.url),
                      payload(did, o.watch_id, o.watch_name, build, o.generation, o.hits), len(o.hits), stamp, 0.0))

    def deliveries(self, owner: str | None, watch_id: str) -> list[Delivery] | None:
        """A watch's delivery log, newest first; None when ``owner`` has no such watch."""
        if self.get(owner, watch_id) is None:
            return None
        from service.watch.webhooks import MAX_ATTEMPTS

        with contextlib.closing(self.connect()) as conn:
            rows = conn.execute("SELECT id, generation, hits, created, attempts, delivered, last_status, last_error, "
                                "next_attempt FROM deliveries WHERE watch_id = ? "
                                "ORDER BY created DESC, generation DESC", (watch_id,)).fetchall()
        return [Delivery(id=r[0], generation=r[1], hits=r[2], created=r[3], attempts=r[4], delivered=r[5],
                         last_status=r[6], last_error=r[7],
                         next_attempt=None if r[5] is not None or r[4] >= MAX_ATTEMPTS
                         else datetime.fromtimestamp(r[8], UTC).isoformat(timespec="seconds")) for r in rows]


_WATCH_SQL = ("SELECT w.id, w.name, w.request, w.created, w.created_generation, w.evaluated_generation, w.error, "
              "(SELECT COUNT(*) FROM hits h WHERE h.watch_id = w.id AND h.dropped_generation IS NULL), "
              "(SELECT MAX(h.generation) FROM hits h WHERE h.watch_id = w.id AND h.dropped_generation IS NULL) "
              "FROM watches w")


__all__ = ["DB_NAME", "Outcome", "Pending", "Snapshot", "StateError", "WatchStore", "owner_of", "state_dir"]
