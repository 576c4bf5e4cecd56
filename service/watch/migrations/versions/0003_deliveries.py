"""Webhook deliveries (issue 62 item 3): one row per watch and evaluation that found hits, written in the
evaluation's transaction (an outbox: no hit is lost across a restart), delivered at least once with retries
(service/watch/webhooks.py).

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""CREATE TABLE deliveries (
        id TEXT PRIMARY KEY,
        watch_id TEXT NOT NULL REFERENCES watches (id) ON DELETE CASCADE,
        build TEXT NOT NULL,
        generation INTEGER NOT NULL,
        url TEXT NOT NULL,
        payload TEXT NOT NULL,
        hits INTEGER NOT NULL,
        created TEXT NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        next_attempt DOUBLE PRECISION NOT NULL,
        delivered TEXT,
        last_status INTEGER,
        last_error TEXT,
        UNIQUE (watch_id, build, generation)
    )""")
    op.execute("CREATE INDEX IF NOT EXISTS deliveries_due ON deliveries (delivered, next_attempt)")


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS deliveries")
