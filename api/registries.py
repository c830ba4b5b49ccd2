"""Registries an admin keeps by name (deletion services, processors): a PUT registers or changes an entry, bringing
a retired one back; a DELETE retires it and keeps its row, for the records that name it."""

from __future__ import annotations

from typing import Any, TypeVar

from sqlalchemy import func, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from api.problems import ProblemError

Entry = TypeVar("Entry")


async def register(session: AsyncSession, model: type[Entry], name: str, values: dict[str, Any]) -> tuple[Entry, bool]:
    """Insert or update the entry `name` with `values` and commit; the entry, and whether it is new."""
    table: Any = model
    upsert = (
        insert(table)
        .values(name=name, **values)
        .on_conflict_do_update(
            index_elements=[table.name], set_={**values, "updated_at": func.now(), "retired_at": None}
        )
        # A row this statement inserted has both times from this transaction's now(); one it updated was registered
        # by an earlier one. (xmax = 0 would tell too, but a system column takes the table's SELECT, which the API's
        # role lacks where a column holds a sealed secret: lifecycle/migrate.py.)
        .returning(table, (table.registered_at == table.updated_at).label("inserted"))
    )
    entry, inserted = (await session.execute(upsert)).one()
    await session.commit()
    return entry, bool(inserted)


async def retire(session: AsyncSession, model: type[Any], name: str, what: str) -> None:
    """Mark the entry `name` retired (once: a repeat keeps the first time) and commit; 404 if there is none."""
    retired = await session.execute(
        update(model)
        .where(model.name == name)
        .values(retired_at=func.coalesce(model.retired_at, func.now()))
        .returning(model.name)
    )
    if retired.first() is None:
        raise ProblemError(404, f"No {what} is registered as {name!r}.")
    await session.commit()
