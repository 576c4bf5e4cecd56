"""The watches, their evaluations and hits, the documents' generations, the state (service/watch/store.py says what
each holds). The DDL both SQLite and PostgreSQL take; scores are double precision in both.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

STATEMENTS = (
    """CREATE TABLE IF NOT EXISTS watches (
        id TEXT PRIMARY KEY,
        owner TEXT NOT NULL,
        name TEXT NOT NULL,
        request TEXT NOT NULL,
        created TEXT NOT NULL,
        created_generation INTEGER NOT NULL,
        evaluated_generation INTEGER NOT NULL,
        topk TEXT NOT NULL DEFAULT '[]',
        error TEXT
    )""",
    "CREATE INDEX IF NOT EXISTS watches_owner ON watches (owner)",
    """CREATE TABLE IF NOT EXISTS evaluations (
        watch_id TEXT NOT NULL REFERENCES watches (id) ON DELETE CASCADE,
        generation INTEGER NOT NULL,
        done_at TEXT NOT NULL,
        new_documents INTEGER NOT NULL,
        hits INTEGER NOT NULL,
        how TEXT NOT NULL,
        kth_score DOUBLE PRECISION,
        ms DOUBLE PRECISION NOT NULL,
        error TEXT,
        PRIMARY KEY (watch_id, generation)
    )""",
    """CREATE TABLE IF NOT EXISTS hits (
        watch_id TEXT NOT NULL REFERENCES watches (id) ON DELETE CASCADE,
        generation INTEGER NOT NULL,
        doc_id TEXT NOT NULL,
        rank INTEGER NOT NULL,
        score DOUBLE PRECISION NOT NULL,
        title TEXT,
        publication_date TEXT,
        passage TEXT,
        found_at TEXT NOT NULL,
        dropped_generation INTEGER,
        PRIMARY KEY (watch_id, generation, doc_id)
    )""",
    "CREATE INDEX IF NOT EXISTS hits_doc ON hits (doc_id)",
    "CREATE TABLE IF NOT EXISTS documents (doc_id TEXT PRIMARY KEY, generation INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS state (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
)


def upgrade() -> None:
    for sql in STATEMENTS:
        op.execute(sql)


def downgrade() -> None:
    for table in ("state", "documents", "hits", "evaluations", "watches"):
        op.execute(f"DROP TABLE IF EXISTS {table}")
