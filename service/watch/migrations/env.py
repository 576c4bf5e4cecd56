"""alembic's environment for the watch database (service/watch/db.py runs it with a connection of its own: no
alembic.ini, no URL here). Every pending migration runs in one transaction: PostgreSQL's (its DDL is
transactional), and for SQLite an explicit ``BEGIN IMMEDIATE`` on the autocommit connection (a crash mid-way leaves
the file as it was)."""

from __future__ import annotations

from alembic import context

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=None, transaction_per_migration=False)
if connection.dialect.name == "sqlite":
    connection.exec_driver_sql("BEGIN IMMEDIATE")
    try:
        context.run_migrations()
        connection.exec_driver_sql("COMMIT")
    except BaseException:
        connection.exec_driver_sql("ROLLBACK")
        raise
else:
    with context.begin_transaction():
        context.run_migrations()
