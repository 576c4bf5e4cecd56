"""Evaluations and hits name the build of the index they were made on (``build``: its meta.json's creation time, as
``state.index`` names the current one): a rebuilt index counts its generations from 0 again, and its evaluations
and hits then sit beside the old build's instead of colliding with them (issue 62: the add after a rebuild failed
with ``UNIQUE constraint failed: evaluations.watch_id, evaluations.generation``). The existing rows take the build
the state names. Tables are copied, not altered (SQLite cannot change a primary key), in SQL both databases take.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

CURRENT = "COALESCE((SELECT value FROM state WHERE key = 'index'), '')"

EVALUATION_COLUMNS = "watch_id, generation, done_at, new_documents, hits, how, kth_score, ms, error"
HIT_COLUMNS = ("watch_id, generation, doc_id, rank, score, title, publication_date, passage, found_at, "
               "dropped_generation")


def upgrade() -> None:
    op.execute("""CREATE TABLE evaluations_v2 (
        watch_id TEXT NOT NULL REFERENCES watches (id) ON DELETE CASCADE,
        build TEXT NOT NULL,
        generation INTEGER NOT NULL,
        done_at TEXT NOT NULL,
        new_documents INTEGER NOT NULL,
        hits INTEGER NOT NULL,
        how TEXT NOT NULL,
        kth_score DOUBLE PRECISION,
        ms DOUBLE PRECISION NOT NULL,
        error TEXT,
        PRIMARY KEY (watch_id, build, generation)
    )""")
    op.execute(f"INSERT INTO evaluations_v2 ({EVALUATION_COLUMNS}, build) "
               f"SELECT {EVALUATION_COLUMNS}, {CURRENT} FROM evaluations")
    op.execute("DROP TABLE evaluations")
    op.execute("ALTER TABLE evaluations_v2 RENAME TO evaluations")
    op.execute("""CREATE TABLE hits_v2 (
        watch_id TEXT NOT NULL REFERENCES watches (id) ON DELETE CASCADE,
        build TEXT NOT NULL,
        generation INTEGER NOT NULL,
        doc_id TEXT NOT NULL,
        rank INTEGER NOT NULL,
        score DOUBLE PRECISION NOT NULL,
        title TEXT,
        publication_date TEXT,
        passage TEXT,
        found_at TEXT NOT NULL,
        dropped_generation INTEGER,
        PRIMARY KEY (watch_id, build, generation, doc_id)
    )""")
    op.execute(f"INSERT INTO hits_v2 ({HIT_COLUMNS}, build) SELECT {HIT_COLUMNS}, {CURRENT} FROM hits")
    op.execute("DROP TABLE hits")
    op.execute("ALTER TABLE hits_v2 RENAME TO hits")
    op.execute("CREATE INDEX IF NOT EXISTS hits_doc ON hits (doc_id)")


def downgrade() -> None:
    raise NotImplementedError("the build column cannot be removed without losing a rebuilt index's rows")
