"""Apply the Alembic migrations: `python -m lifecycle.migrate` or `upgrade(url)`."""

from __future__ import annotations

import asyncio
from pathlib import Path

from alembic import command
from alembic.config import Config

from lifecycle.settings import get_settings

MIGRATIONS_DIR = Path(__file__).parent / "migrations"


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


if __name__ == "__main__":
    upgrade(get_settings().database_url)
