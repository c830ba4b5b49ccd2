"""lifecycle/stuck.py's rule on rows as the code writes them, in the session's PostgreSQL: which runs are open, from
when each one's clock runs, and which waits are deliberate (never stuck). The stuck runs themselves, with their
alerts, are in the tests of each case (tests/stuck.py names them)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import datetime, timedelta

import pytest_asyncio
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from lifecycle.db.engine import make_engine
from lifecycle.statuses import DeletionState
from lifecycle.stuck import OpenRun, RunKind, open_runs, stuck_periods


@pytest_asyncio.fixture
async def conn(database_url: str) -> AsyncIterator[AsyncConnection]:
    """A transaction rolled back at the end: the rows never reach another test."""
    engine = make_engine(database_url, pool_size=1)
    async with engine.connect() as connection:
        transaction = await connection.begin()
        yield connection
        await transaction.rollback()
    await engine.dispose()


async def _now(conn: AsyncConnection) -> datetime:
    now: datetime = (await conn.execute(text("SELECT now()"))).scalar_one()
    return now


async def _runs(conn: AsyncConnection, subject: str) -> list[OpenRun]:
    return [run for run in await open_runs(conn) if run.subject == subject]


async def _deletion(conn: AsyncConnection, status: DeletionState, **columns: object) -> str:
    workflow_id = f"bot-deletion-{uuid.uuid4()}"
    names = "".join(f", {name}" for name in columns)
    values = "".join(f", :{name}" for name in columns)
    await conn.execute(
        text(
            f"INSERT INTO deletion_requests (workflow_id, kind, account_id, status{names})"
            f" VALUES (:workflow_id, 'bot', :account, :status{values})"
        ),
        {"workflow_id": workflow_id, "account": uuid.uuid4(), "status": status.value, **columns},
    )
    return workflow_id


async def test_a_deletion_moves_with_its_rows_not_with_its_records(conn: AsyncConnection) -> None:
    now = await _now(conn)
    workflow_id = await _deletion(conn, DeletionState.RUNNING)
    assert await _runs(conn, workflow_id) == [OpenRun(RunKind.BOT_DELETION, workflow_id, now)]
    moved = now + timedelta(minutes=3)
    await conn.execute(
        text(
            "INSERT INTO deletion_progress (workflow_id, service, deleted, updated_at, progressed_at)"
            " VALUES (:w, 'messages', 10, :later, :moved)"
        ),
        {"w": workflow_id, "moved": moved, "later": moved + timedelta(minutes=5)},
    )
    # updated_at (the last record, a wait say) is later: only progressed_at counts.
    assert (await _runs(conn, workflow_id))[0].progressed_at == moved


async def test_deliberate_waits_are_never_stuck(conn: AsyncConnection) -> None:
    for status in (DeletionState.HELD, DeletionState.PAUSED, DeletionState.WAITING_FOR_OPERATOR):
        assert await _runs(conn, await _deletion(conn, status)) == [], status
    # In its grace period, the clock starts when deleting may begin.
    deletes_at = await _now(conn) + timedelta(days=7)
    scheduled = await _deletion(conn, DeletionState.SCHEDULED, deletes_at=deletes_at)
    assert (await _runs(conn, scheduled))[0].progressed_at == deletes_at


async def test_an_export_a_processor_and_a_pool_below_its_target_are_watched(conn: AsyncConnection) -> None:
    now = await _now(conn)
    account = uuid.uuid4()
    export_id = f"account-export-{account}-1"
    await conn.execute(
        text(
            "INSERT INTO account_exports (id, account_id, sequence, workflow_id, status)"
            " VALUES (:id, :account, 1, :w, 'writing')"
        ),
        {"id": uuid.uuid4(), "account": account, "w": export_id},
    )
    assert await _runs(conn, export_id) == [OpenRun(RunKind.ACCOUNT_EXPORT, export_id, now)]

    server = f"watched-{uuid.uuid4().hex[:8]}"
    await conn.execute(
        text(
            "INSERT INTO site_db_servers (name, capacity, pool_target, state, updated_at)"
            " VALUES (:name, 10, 2, 'active', :changed)"
        ),
        {"name": server, "changed": now - timedelta(hours=1)},
    )
    made = now - timedelta(minutes=40)
    await conn.execute(
        text("INSERT INTO site_db_pool (id, server, state, created_at) VALUES (:id, :server, 'ready', :made)"),
        {"id": uuid.uuid4(), "server": server, "made": made},
    )
    # One ready of two: below its target since the last database it made.
    assert await _runs(conn, server) == [OpenRun(RunKind.SITE_DB_POOL, server, made)]
    await conn.execute(
        text("INSERT INTO site_db_pool (id, server, state) VALUES (:id, :server, 'ready')"),
        {"id": uuid.uuid4(), "server": server},
    )
    assert await _runs(conn, server) == [], "a full pool has nothing to do"

    processor = f"crm-{uuid.uuid4().hex[:8]}"
    deletion = f"account-deletion-{account}"
    await conn.execute(
        text("INSERT INTO processors (name, url, secret) VALUES (:name, 'http://crm.invalid/', 'whsec_x')"),
        {"name": processor},
    )
    await conn.execute(
        text(
            "INSERT INTO processor_erasures (erasure_id, processor, deletion_workflow_id, account_id, webhook_id,"
            " requested_at, attempts) VALUES (:e, :p, :d, :a, :h, :requested, 7)"
        ),
        {
            "e": uuid.uuid4(),
            "p": processor,
            "d": deletion,
            "a": account,
            "h": uuid.uuid4().hex,
            "requested": now - timedelta(days=2),
        },
    )
    # Its clock runs from its delivery's beginning, not the deletion's request; seven attempts move nothing.
    subject = f"{processor}/{deletion}"
    assert await _runs(conn, subject) == [OpenRun(RunKind.PROCESSOR_ERASURE, subject, now)]


def test_a_run_is_stuck_once_per_whole_period() -> None:
    start = datetime(2026, 1, 1)
    run = OpenRun(RunKind.SITE_CREATION, "s", start)
    threshold = timedelta(minutes=15)
    assert stuck_periods(run, threshold, start + threshold - timedelta(microseconds=1)) == 0
    assert stuck_periods(run, threshold, start + threshold) == 1
    assert stuck_periods(run, threshold, start + 2 * threshold + timedelta(seconds=1)) == 2
