"""The reconciler turns rows marked for deletion but never started (the API died in between) into deletions."""

from __future__ import annotations

import asyncio
import uuid
from email import message_from_bytes

import httpx
from fastapi import FastAPI
from sqlalchemy import text
from temporalio.client import Client

from devstack.smtp_sink import SmtpSink
from lifecycle.deletion.workflow_types import account_deletion_id, bot_deletion_id
from lifecycle.settings import Settings
from tests.conftest import ApiAccount
from tests.deletion.helpers import run_reconciler
from worker import LifecycleWorkers

CONFIRMATION = "Your account has been deleted"


async def _crash_after_recording(app: FastAPI, bot_id: str, other: ApiAccount) -> None:
    """What the API writes before it starts a workflow, for a bot and for a whole account, and no start."""
    async with app.state.sessionmaker() as session:
        await session.execute(
            text("UPDATE bots SET deletion_requested_at = now() WHERE id = :bot"), {"bot": uuid.UUID(bot_id)}
        )
        await session.execute(
            text(
                "INSERT INTO deletion_requests (workflow_id, kind, account_id, bot_id)"
                " SELECT :wf, 'bot', account_id, id FROM bots WHERE id = :bot"
            ),
            {"wf": bot_deletion_id(bot_id), "bot": uuid.UUID(bot_id)},
        )
        account = uuid.UUID(other.id)
        await session.execute(text("UPDATE api_keys SET revoked_at = now() WHERE account_id = :a"), {"a": account})
        await session.execute(text("UPDATE accounts SET deletion_requested_at = now() WHERE id = :a"), {"a": account})
        await session.execute(
            text(
                "INSERT INTO deletion_requests (workflow_id, kind, account_id, notify_email)"
                " VALUES (:wf, 'account', :a, :email)"
            ),
            {"wf": account_deletion_id(other.id), "a": account, "email": other.email},
        )
        await session.commit()


async def test_reconciler_starts_what_the_api_recorded_but_never_started(
    api: httpx.AsyncClient,
    app: FastAPI,
    account: ApiAccount,
    worker: LifecycleWorkers,
    temporal_client: Client,
    settings: Settings,
    smtp_sink: SmtpSink,
) -> None:
    bot = (await api.post("/bots", json={"name": "orphaned"}, headers=account.headers)).json()
    suffix = uuid.uuid4().hex[:8]
    created = await api.post(
        "/accounts",
        json={"name": f"Orphan {suffix}", "email": f"orphan-{suffix}@example.com"},
        headers={"Authorization": f"Bearer {settings.admin_token}"},
    )
    other = ApiAccount(**created.json())
    await _crash_after_recording(app, bot["id"], other)
    left = (await api.get(f"/bots/{bot['id']}/deletion", headers=account.headers)).json()
    assert left["status"] == "accepted"  # recorded, and no run began

    first = await run_reconciler(temporal_client, settings)
    assert first.bot_deletions_started >= 1
    assert first.account_deletions_started >= 1
    await asyncio.wait_for(temporal_client.get_workflow_handle(bot_deletion_id(bot["id"])).result(), 60)
    await asyncio.wait_for(temporal_client.get_workflow_handle(account_deletion_id(other.id)).result(), 60)

    status = (await api.get(f"/bots/{bot['id']}/deletion", headers=account.headers)).json()
    assert status["status"] == "completed"
    mails = [m for m in smtp_sink.messages() if message_from_bytes(m.read_bytes())["To"] == other.email]
    assert [message_from_bytes(m.read_bytes())["Subject"] for m in mails] == [CONFIRMATION]

    # Everything consistent now: a second pass starts nothing.
    second = await run_reconciler(temporal_client, settings)
    assert (second.bot_deletions_started, second.account_deletions_started) == (0, 0)
    # The same pass also looked at the sites (tests/sites/test_site_reconciler.py shows what it does there).
    assert second.sites is not None
