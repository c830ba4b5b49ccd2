"""An account's DELETE /bots deletions run at most ACCOUNT_DELETIONS_AT_ONCE at a time, the rest `queued` in the
order they were requested, durably; another account's deletion never queues behind them; a lane is freed by a
deletion's end, a cancel included, and the next in line is let in by the run that freed it, not by a timer.

Against real PostgreSQL, a real Temporal dev server, the session's real gateway worker, the project's services and
the API. The account is held (a legal hold) while the lanes fill, so that the runs that take a lane stay in it for
as long as the test looks.
"""

from __future__ import annotations

from typing import Any

import asyncpg
import httpx
from temporalio.client import Client

from devstack.seed import rows_per_service, seed
from lifecycle.deletion.workflow_types import bot_deletion_id
from lifecycle.settings import Settings
from tests.conftest import ADMIN_HEADERS
from tests.deletion.helpers import remaining_rows
from tests.eventually import eventually
from worker import LifecycleWorkers

ROWS = 40


async def _lanes(conn: asyncpg.Connection, bot_ids: list[str]) -> list[str | None]:
    rows = await conn.fetch(
        "SELECT bot_id::text, account_lane FROM deletion_requests WHERE bot_id = ANY($1::uuid[])", bot_ids
    )
    lane = {row["bot_id"]: row["account_lane"] for row in rows}
    return [lane.get(bot_id) for bot_id in bot_ids]


async def _statuses(api: httpx.AsyncClient, bot_ids: list[str], headers: dict[str, str]) -> list[str]:
    answers = [await api.get(f"/bots/{bot_id}/deletion", headers=headers) for bot_id in bot_ids]
    assert all(answer.status_code == 200 for answer in answers), [answer.text for answer in answers]
    return [answer.json()["status"] for answer in answers]


async def test_an_accounts_deletions_take_turns_and_another_account_does_not_wait(
    api: httpx.AsyncClient,
    conn: asyncpg.Connection,
    settings: Settings,
    worker: LifecycleWorkers,
    temporal_client: Client,
) -> None:
    at_once = settings.account_deletions_at_once
    seeded = await seed(settings, bots=at_once + 2, rows=ROWS)
    bots, headers = seeded.bot_ids, {"Authorization": f"Bearer {seeded.api_key}"}
    first, last = bots[:at_once], bots[-1]
    account_id = await conn.fetchval("SELECT account_id::text FROM bots WHERE id = $1::uuid", bots[0])
    placed = await api.put(f"/accounts/{account_id}/legal-hold", json={"reason": "lanes"}, headers=ADMIN_HEADERS)
    assert placed.status_code in (200, 201), placed.text
    try:
        for bot_id in bots:  # one after another: the order they queue in
            assert (await api.delete(f"/bots/{bot_id}", headers=headers)).status_code == 202

        async def settled() -> list[Any]:
            return [await _lanes(conn, bots), await _statuses(api, bots, headers)]

        lanes, _ = await eventually(
            settled, "the lanes fill", until=lambda got: got[1] == ["held"] * at_once + ["queued"] * 2
        )
        assert lanes == ["taken"] * at_once + ["waiting"] * 2
        # Nothing of a queued bot is deleted, nor of a held one.
        assert await remaining_rows(settings.database_url, last) == rows_per_service(ROWS)

        # Another account's deletion takes a lane of its own account: it finishes while these wait.
        other = await seed(settings, bots=1, rows=ROWS)
        other_headers = {"Authorization": f"Bearer {other.api_key}"}
        assert (await api.delete(f"/bots/{other.bot_ids[0]}", headers=other_headers)).status_code == 202
        await eventually(
            lambda: _statuses(api, other.bot_ids, other_headers),
            "the other account's deletion completes",
            until=lambda got: got == ["completed"],
        )

        # A cancel frees its lane: the run that stops lets the next in line in (well before the recheck timer).
        await temporal_client.get_workflow_handle(bot_deletion_id(first[0])).cancel()
        await eventually(
            settled,
            "the next in line takes the freed lane",
            until=lambda got: got[0][at_once:] == ["taken", "waiting"] and got[1][0] == "cancelled",
        )
    finally:
        released = await api.delete(f"/accounts/{account_id}/legal-hold", headers=ADMIN_HEADERS)
        assert released.status_code in (200, 204), released.text

    # Released: the held deletions finish, and each lane they free lets the last one in.
    await eventually(
        lambda: _statuses(api, bots[1:], headers),
        "every deletion but the cancelled one completes",
        until=lambda got: got == ["completed"] * (at_once + 1),
    )
    for bot_id in bots[1:]:
        assert await remaining_rows(settings.database_url, bot_id) == dict.fromkeys(rows_per_service(ROWS), 0)
    # The cancelled deletion's repeat queues anew (its old lane is not its run's), and finishes.
    assert await _lanes(conn, [first[0]]) == ["taken"]
    assert (await api.delete(f"/bots/{first[0]}", headers=headers)).status_code == 202
    await eventually(
        lambda: _statuses(api, [first[0]], headers), "the repeat completes", until=lambda got: got == ["completed"]
    )
    assert await remaining_rows(settings.database_url, first[0]) == dict.fromkeys(rows_per_service(ROWS), 0)
