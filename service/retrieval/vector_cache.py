"""Document vectors already encoded, kept per machine: a rebuild of the same documents does not run the encoder again.

The pretrained encoder reads one document a run (:meth:`service.retrieval.pretrained.PretrainedEncoder.
encode_documents`), so a document's vector depends only on the graph and on the text it reads, never on the documents
encoded beside it. :class:`VectorCache` keeps each vector under the sha256 of that text (with its prefix and its token
cut) in one SQLite file per machine, one table row per (graph, text):

- the graph is the encoder's identity: the weights' sha256, the conversion, the precision and the device (a CUDA fp32
  vector is not a CPU int8 one);
- a text that changed (another title, another first claim, another :data:`~service.retrieval.pretrained.
  DOCUMENT_TOKENS`) is another key: it is encoded, never served the old vector;
- the document maps fine-tuned on patents are applied after the cache (they belong to an index, not to the graph).

Where: ``$PRIORART_VECTOR_CACHE`` (a file path; ``off`` turns the cache off), else ``vectors.sqlite`` in the cache
folder (:func:`service.settings.cache_dir`). A vector takes 1.5 KB (384 float32): 150 MB per 100,000 documents;
deleting the file only costs the next build its encoding. Several processes (the test workers, Ray's encoding
workers, two builds) share the file: SQLite's write-ahead log and a busy timeout let them read and add at once.
A cache that cannot be opened or written (a read-only home, a full disk) is logged once and the encoder runs as before.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

ENV = "PRIORART_VECTOR_CACHE"
FILE_NAME = "vectors.sqlite"
_SCHEMA = "CREATE TABLE IF NOT EXISTS vectors (graph TEXT NOT NULL, key BLOB NOT NULL, vec BLOB NOT NULL, " \
          "PRIMARY KEY (graph, key)) WITHOUT ROWID"
_CHUNK = 500  # keys per SELECT (SQLite's bound on host parameters is 32766; smaller statements plan faster)


def cache_path() -> Path | None:
    """The cache file of this machine, or None when ``$PRIORART_VECTOR_CACHE`` is ``off``."""
    from service.settings import cache_dir

    value = os.environ.get(ENV, "").strip()
    if value.lower() in ("off", "0", "false", "no"):
        return None
    return Path(value) if value else cache_dir() / FILE_NAME


@contextmanager
def turned_off() -> Iterator[None]:
    """No cache inside the block, in this process and those it starts (a benchmark that times builds and adds of the
    same documents: the second would read the first one's vectors)."""
    before = os.environ.get(ENV)
    os.environ[ENV] = "off"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(ENV, None)
        else:
            os.environ[ENV] = before


def text_key(kind: str, max_tokens: int | None, text: str) -> bytes:
    """What says that two encoder runs read the same input: the prefix kind, the token cut and the text."""
    return hashlib.sha256(f"{kind}\0{max_tokens}\0{text}".encode()).digest()


class VectorCache:
    """One SQLite file of vectors by (graph, text key); :meth:`vectors` is what the encoder calls."""

    def __init__(self, path: Path, graph: str, dim: int) -> None:
        self.path, self.graph, self.dim = Path(path), graph, dim
        self._local = threading.local()  # (a sqlite3 connection belongs to its thread)
        self.hits = self.misses = 0

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None or self._local.pid != os.getpid():  # (a forked worker opens its own)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=60, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")  # (a lost vector after a power cut is only encoded again)
            conn.execute(_SCHEMA)
            self._local.conn, self._local.pid = conn, os.getpid()
        return conn

    def get(self, keys: Sequence[bytes]) -> dict[bytes, np.ndarray]:
        conn = self._conn()
        found: dict[bytes, np.ndarray] = {}
        unique = list(dict.fromkeys(keys))
        for s in range(0, len(unique), _CHUNK):
            part = unique[s:s + _CHUNK]
            marks = ",".join("?" * len(part))
            rows = conn.execute(f"SELECT key, vec FROM vectors WHERE graph = ? AND key IN ({marks})",
                                [self.graph, *part]).fetchall()
            for key, blob in rows:
                vec = np.frombuffer(blob, dtype=np.float32)
                if vec.shape == (self.dim,):
                    found[bytes(key)] = vec
        return found

    def put(self, items: dict[bytes, np.ndarray]) -> None:
        if not items:
            return
        conn = self._conn()
        with conn:  # (one transaction: BEGIN ... COMMIT)
            conn.execute("BEGIN")
            conn.executemany("INSERT OR IGNORE INTO vectors (graph, key, vec) VALUES (?, ?, ?)",
                             [(self.graph, k, np.ascontiguousarray(v, dtype=np.float32).tobytes())
                              for k, v in items.items()])

    def vectors(self, keys: Sequence[bytes], encode: Callable[[list[int]], np.ndarray]) -> np.ndarray:
        """float32 [len(keys), dim]: the cached vector of each key, the others from ``encode(positions)`` (the
        rows of ``keys`` to encode, in order), which are then kept."""
        out = np.zeros((len(keys), self.dim), dtype=np.float32)
        try:
            found = self.get(keys)
        except sqlite3.Error as exc:
            log.warning("document vector cache %s unreadable (%s): encoding", self.path, exc)
            found = {}
        todo = [i for i, k in enumerate(keys) if k not in found]
        for i, k in enumerate(keys):
            if k in found:
                out[i] = found[k]
        self.hits += len(keys) - len(todo)
        self.misses += len(todo)
        if todo:
            fresh = encode(todo)
            out[todo] = fresh
            try:
                self.put({keys[i]: fresh[j] for j, i in enumerate(todo)})
            except sqlite3.Error as exc:  # (a full disk, a locked file past the timeout: the vectors are right)
                log.warning("document vector cache %s: vectors not kept (%s)", self.path, exc)
        return out


_OPEN: dict[tuple[str, str], VectorCache | None] = {}
_open_lock = threading.Lock()


def vector_cache(graph: str, dim: int) -> VectorCache | None:
    """The machine's cache for ``graph`` (None: turned off, or it cannot be used here; logged once)."""
    env = (os.environ.get(ENV), os.environ.get("PRIORART_CACHE_DIR"), os.environ.get("HOME"), graph)
    found = _BY_ENV.get(env, _UNSEEN)  # (asked once per query that is remembered: the path is not worked out again)
    if found is not _UNSEEN:
        return found  # type: ignore[return-value]
    _BY_ENV[env] = cache = _vector_cache(graph, dim)
    return cache


_UNSEEN = object()
_BY_ENV: dict[tuple[str | None, ...], VectorCache | None] = {}


def _vector_cache(graph: str, dim: int) -> VectorCache | None:
    path = cache_path()
    if path is None:
        return None
    with _open_lock:
        key = (str(path), graph)
        if key not in _OPEN:
            cache: VectorCache | None = VectorCache(path, graph, dim)
            try:
                assert cache is not None
                cache._conn()
            except (sqlite3.Error, OSError) as exc:
                log.warning("document vector cache %s cannot be used (%s): every document is encoded", path, exc)
                cache = None
            _OPEN[key] = cache
        return _OPEN[key]


__all__ = ["ENV", "VectorCache", "cache_path", "text_key", "turned_off", "vector_cache"]
