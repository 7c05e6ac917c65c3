"""Alembic environment for occd's ledger. Runs from the installed package (occd.migrations); occd.ledger.migrate
passes the connection in `config.attributes["connection"]`, so no alembic.ini or URL is needed at run time.
A URL in the config (sqlalchemy.url) is honoured for the alembic command line during development.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from occd.ledger.models import metadata

config = context.config


def _configure(connection) -> None:
    context.configure(connection=connection, target_metadata=metadata, render_as_batch=True,
                      compare_type=True, transaction_per_migration=False)


def run_migrations_offline() -> None:
    context.configure(url=config.get_main_option("sqlalchemy.url"), target_metadata=metadata,
                      literal_binds=True, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure(connection)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = create_engine(config.get_main_option("sqlalchemy.url"))
    with engine.connect() as conn:
        _configure(conn)
        with context.begin_transaction():
            context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
