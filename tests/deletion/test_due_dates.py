"""Every deletion is due ERASURE_DUE_WITHIN after its request (lifecycle/deletion/due.py): the status and the receipt
say when and whether it is overdue, a legal hold stops the clock (its release moves `due_at` later by the time it
held, and the receipt says how long), and the reconciler's sweep alerts at ERASURE_DUE_ALERT_SHARE of the time and
again once past it. Against the session's API, worker, PostgreSQL and alert table."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

import httpx
from sqlalchemy import text
from temporalio.client import Client

from activities.resources import ActivityResources
from activities.watch import watch_work
from lifecycle.deletion.workflow_types import bot_deletion_id
from lifecycle.settings import Settings
from tests.conftest import ADMIN_HEADERS, ApiAccount
from tests.deletion.helpers import a_bot, completed, receipt_of, status_of
from tests.eventually import eventually
from worker import LifecycleWorkers

_DUE_ALERTS = text("SELECT subject FROM alerts WHERE raised_by LIKE :prefix ORDER BY id")


async def due_alerts(resources: ActivityResources, workflow_id: str) -> list[str]:
    async with resources.engine.connect() as conn:
        rows = await conn.execute(_DUE_ALERTS, {"prefix": f"due/{workflow_id}/%"})
        return [subject for (subject,) in rows]


async def test_a_hold_stops_the_clock_and_the_status_and_receipt_say_when_it_is_due(
    api: httpx.AsyncClient,
    account: ApiAccount,
    worker: LifecycleWorkers,
    settings: Settings,
    temporal_client: Client,
) -> None:
    bot_id = await a_bot(api, account)
    placed = await api.put(f"/accounts/{account.id}/legal-hold", json={"reason": "litigation"}, headers=ADMIN_HEADERS)
    assert placed.status_code in (200, 201), placed.text
    assert (await api.delete(f"/bots/{bot_id}", headers=account.headers)).status_code == 202
    held = await eventually(
        status_of(api, bot_id, account), "the deletion is held", until=lambda s: s["status"] == "held"
    )
    requested_at = datetime.fromisoformat(held["requested_at"])
    due_at = datetime.fromisoformat(held["due_at"])
    assert due_at == requested_at + settings.erasure_due_within
    assert held["overdue"] is False
    # The hold stops the clock: a sweep even a day past due_at alerts nothing.
    resources = ActivityResources.create(settings, temporal_client)
    try:
        await watch_work(resources, at=due_at + timedelta(days=1))
        assert await due_alerts(resources, bot_deletion_id(bot_id)) == []
    finally:
        await resources.close()

    released = await api.delete(f"/accounts/{account.id}/legal-hold", headers=ADMIN_HEADERS)
    assert released.status_code == 200, released.text
    released_at = datetime.fromisoformat(released.json()["released_at"])
    finished = await completed(api, bot_id, account)
    # Placed before the request: the hold stopped the clock from the request to its release.
    held_for = released_at - requested_at
    assert datetime.fromisoformat(finished["due_at"]) == due_at + held_for
    assert finished["overdue"] is False
    receipt = await receipt_of(api, bot_id, account)
    assert datetime.fromisoformat(receipt["due_at"]) == due_at + held_for
    assert receipt["overdue"] is False
    assert receipt["held_seconds"] == int(held_for.total_seconds())


async def test_an_erasure_alerts_at_its_share_of_the_time_and_once_overdue(
    api: httpx.AsyncClient, account: ApiAccount, settings: Settings, temporal_client: Client
) -> None:
    short = settings.model_copy(update={"erasure_due_within": timedelta(seconds=2), "erasure_due_alert_share": 0.8})
    resources = ActivityResources.create(short, temporal_client)
    bot_id = await a_bot(api, account)
    workflow_id = bot_deletion_id(bot_id)
    try:
        # Recorded as the API records a request under ERASURE_DUE_WITHIN=2s, with no run to finish it (the
        # reconciler's start path is not under test here; the row alone is what the sweep and the status read).
        async with resources.engine.begin() as conn:
            due_at = (
                await conn.execute(
                    text(
                        "INSERT INTO deletion_requests (workflow_id, kind, account_id, bot_id, due_at)"
                        " VALUES (:workflow_id, 'bot', :account, :bot, now() + :within) RETURNING due_at"
                    ),
                    {
                        "workflow_id": workflow_id,
                        "account": uuid.UUID(account.id),
                        "bot": uuid.UUID(bot_id),
                        "within": short.erasure_due_within,
                    },
                )
            ).scalar_one()

        near = due_at - short.erasure_due_within * (1 - short.erasure_due_alert_share)
        await watch_work(resources, at=near - timedelta(milliseconds=1))
        assert await due_alerts(resources, workflow_id) == []
        await watch_work(resources, at=near)
        await watch_work(resources, at=near + timedelta(milliseconds=100))
        assert await due_alerts(resources, workflow_id) == ["erasure near"]
        await watch_work(resources, at=due_at + timedelta(milliseconds=1))
        await watch_work(resources, at=due_at + timedelta(seconds=1))
        assert await due_alerts(resources, workflow_id) == ["erasure near", "erasure overdue"]

        status = status_of(api, bot_id, account)
        first = await status()
        assert datetime.fromisoformat(first["due_at"]) == due_at
        await eventually(status, "the status says overdue once past due_at", until=lambda s: s["overdue"] is True)
    finally:
        async with resources.engine.begin() as conn:
            await conn.execute(text("DELETE FROM deletion_requests WHERE workflow_id = :w"), {"w": workflow_id})
        await resources.close()
