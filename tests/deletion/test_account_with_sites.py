"""An account deletion takes its sites with it: every live site torn down before the account row goes."""

from __future__ import annotations

import asyncio
import uuid
from email import message_from_bytes

import httpx
from fastapi import FastAPI
from sqlalchemy import text
from temporalio.client import Client

from devstack.smtp_sink import SmtpSink
from lifecycle.deletion.contracts import AccountDeletionResult
from lifecycle.deletion.workflow_types import account_deletion_id
from lifecycle.settings import Settings
from tests.conftest import ApiAccount
from tests.eventually import eventually
from tests.sites.helpers import SiteResources, site_resources
from worker import LifecycleWorkers


async def _active_site(api: httpx.AsyncClient, account: ApiAccount) -> str:
    created = await api.post(
        "/sites",
        json={
            "name": "Doomed",
            "tagline": "soon gone",
            "domain": f"doomed-{uuid.uuid4().hex[:8]}.example.com",
        },
        headers=account.headers,
    )
    assert created.status_code == 202, created.text
    site_id: str = created.json()["id"]

    async def active() -> bool | None:
        body = (await api.get(f"/sites/{site_id}", headers=account.headers)).json()
        return True if body["status"] == "active" else None

    await eventually(active, "site active")
    return site_id


async def test_account_deletion_tears_down_sites_and_mails_counts(
    api: httpx.AsyncClient,
    account: ApiAccount,
    worker: LifecycleWorkers,
    temporal_client: Client,
    settings: Settings,
    smtp_sink: SmtpSink,
    app: FastAPI,
) -> None:
    site_id = await _active_site(api, account)
    bot = await api.post("/bots", json={"name": "with the account"}, headers=account.headers)
    assert bot.status_code == 201
    mails_before = len(smtp_sink.messages())

    accepted = await api.delete("/account", headers=account.headers)
    assert accepted.status_code == 202
    # Signed out at once.
    assert (await api.get("/account", headers=account.headers)).status_code == 401

    handle = temporal_client.get_workflow_handle(account_deletion_id(account.id), result_type=AccountDeletionResult)
    result = await asyncio.wait_for(handle.result(), timeout=120)
    assert result.account_row_deleted
    assert result.services["sites"].deleted == 1

    assert await site_resources(settings, site_id) == SiteResources(database=False, role=False, directory=False)
    async with app.state.sessionmaker() as session:
        left = await session.execute(
            text(
                "SELECT (SELECT count(*) FROM sites WHERE account_id = :a) + "
                "(SELECT count(*) FROM accounts WHERE id = :a)"
            ),
            {"a": uuid.UUID(account.id)},
        )
        assert left.scalar_one() == 0

    new_mail = smtp_sink.messages()[mails_before:]
    confirmations = [
        m for m in new_mail if message_from_bytes(m.read_bytes())["Subject"] == "Your account has been deleted"
    ]
    assert len(confirmations) == 1
    confirmation = message_from_bytes(confirmations[0].read_bytes())
    assert confirmation["To"] == account.email
    assert "sites" in confirmation.get_payload(decode=True).decode()  # type: ignore[union-attr]
