"""Apply the Alembic migrations: `python -m lifecycle.migrate` or `upgrade(url)`."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine

from lifecycle.sealing import SEALED_COLUMNS
from lifecycle.settings import get_settings

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
# Alembic's own table: what it records is the owner's business, never the application's.
VERSION_TABLE = "alembic_version"
AUDIT_TABLE = "audit_events"
# The keys the workers publish, which only they may write.
WORKER_KEY_TABLES = ("receipt_signing_keys", "sealing_keys")
_COLUMNS = text(
    "SELECT quote_ident(column_name) FROM information_schema.columns"
    " WHERE table_schema = 'public' AND table_name = :table AND column_name <> :secret ORDER BY ordinal_position"
)


def alembic_config(database_url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("sqlalchemy.url", database_url)
    return config


def upgrade(database_url: str) -> None:
    """Bring the schema to head. Safe to run on every start: Alembic applies only what is missing."""
    command.upgrade(alembic_config(database_url), "head")


async def upgrade_async(database_url: str) -> None:
    # env.py runs its own event loop, so it must not run inside the caller's.
    await asyncio.to_thread(upgrade, database_url)


async def grant_dml(database_url: str, roles: Sequence[str], api_roles: Sequence[str] = ()) -> None:
    """Let `roles` (the workers) and `api_roles` (the API) read and write the rows of every table the migrations
    made, and nothing more: no DDL, no TRUNCATE, no say in Alembic's version, and only INSERT and SELECT on the
    audit trail. `api_roles` besides may not write the keys the workers publish (a key of the API's own would
    make its forged receipts verify, or have secrets sealed to it) nor read the sealed secrets (lifecycle/sealing.py).
    Run as the tables' owner, after `upgrade`, so a table or a column a migration just added is granted before the
    application that needs it starts. Repeating it changes nothing."""
    everyone = [*roles, *api_roles]
    if not everyone:
        return
    engine = create_async_engine(database_url)
    quote = engine.dialect.identifier_preparer.quote
    try:
        grantees = ", ".join(quote(role) for role in everyone)
        async with engine.begin() as connection:
            await connection.execute(
                text(f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {grantees}")
            )
            await connection.execute(text(f"REVOKE ALL ON {VERSION_TABLE} FROM {grantees}"))
            # The audit trail is appended to and read, never changed (lifecycle/audit.py).
            await connection.execute(text(f"REVOKE UPDATE, DELETE ON {AUDIT_TABLE} FROM {grantees}"))
            if api_roles:
                await _restrict_api(connection, ", ".join(quote(role) for role in api_roles))
    finally:
        await engine.dispose()


async def _restrict_api(connection: AsyncConnection, grantees: str) -> None:
    await connection.execute(text(f"REVOKE INSERT, UPDATE, DELETE ON {', '.join(WORKER_KEY_TABLES)} FROM {grantees}"))
    for table, _, secret in SEALED_COLUMNS:
        # Revoking the table's SELECT revokes its columns' too; then every column but the secret is granted again.
        readable = (await connection.execute(_COLUMNS, {"table": table, "secret": secret})).scalars()
        await connection.execute(text(f"REVOKE SELECT ON {table} FROM {grantees}"))
        await connection.execute(text(f"GRANT SELECT ({', '.join(readable)}) ON {table} TO {grantees}"))


def dml_roles(setting: str) -> list[str]:
    return [role.strip() for role in setting.split(",") if role.strip()]


if __name__ == "__main__":
    settings = get_settings()
    upgrade(settings.database_url)
    asyncio.run(
        grant_dml(settings.database_url, dml_roles(settings.database_dml_roles), dml_roles(settings.database_api_roles))
    )
