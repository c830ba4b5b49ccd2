"""`temporal workflow reset`, in its three forms, on finished runs: the new run completes and repeats no
side effect (one email, no second database, no failure on rows already deleted)."""

from __future__ import annotations

from typing import Any

import httpx
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle

from devstack.seed import seed
from devstack.smtp_sink import SmtpSink
from lifecycle.deletion.workflow_types import account_deletion_id
from lifecycle.settings import Settings
from lifecycle.sites.workflow_types import site_creation_id
from tests.conftest import ApiAccount
from tests.db import connection
from tests.deletion.helpers import remaining_rows
from tests.eventually import eventually
from tests.operators.cli import AsyncCli
from tests.operators.starts import start_bot_deletion
from tests.sites.helpers import scheduled_activities, site_state, task_completed_after
from worker import LifecycleWorkers


async def _reset_and_finish(cli: AsyncCli, client: Client, handle: WorkflowHandle[Any, Any], *how: str) -> Any:
    """Reset the finished run, then wait for the run the reset started."""
    first_run = (await handle.describe()).run_id
    await cli.run("workflow", "reset", "--workflow-id", handle.id, *how, "--reason", "operator test")
    latest = client.get_workflow_handle(handle.id)
    described = await latest.describe()
    assert described.run_id != first_run
    result = await latest.result()
    assert (await latest.describe()).status == WorkflowExecutionStatus.COMPLETED
    return result


def _mails_to(sink: SmtpSink, address: str) -> int:
    return sum(1 for path in sink.messages() if f"To: {address}" in path.read_text(errors="replace"))


async def test_reset_account_deletion_to_first_task_sends_no_second_email(
    cli: AsyncCli,
    api: httpx.AsyncClient,
    account: ApiAccount,
    temporal_client: Client,
    smtp_sink: SmtpSink,
    worker: LifecycleWorkers,
    settings: Settings,
) -> None:
    assert (await api.post("/bots", json={"name": "helper"}, headers=account.headers)).status_code == 201
    assert (await api.delete("/account", headers=account.headers)).status_code == 202
    handle = temporal_client.get_workflow_handle(account_deletion_id(account.id))
    await handle.result()
    assert _mails_to(smtp_sink, account.email) == 1

    # Everything runs again: listing the (now gone) bots, the account row, the email activity.
    result = await _reset_and_finish(cli, temporal_client, handle, "--type", "FirstWorkflowTask")
    assert result["account_row_deleted"] is True
    latest = temporal_client.get_workflow_handle(handle.id)
    assert "send_deletion_confirmation" in await scheduled_activities(latest)
    assert _mails_to(smtp_sink, account.email) == 1
    # The receipt step ran again too, and found the receipt of this deletion instead of signing a second one.
    assert "issue_deletion_receipt" in await scheduled_activities(latest)
    assert await _receipts(settings, handle.id) == 1


async def test_reset_bot_deletion_to_last_task_completes_on_deleted_rows(
    cli: AsyncCli, temporal_client: Client, settings: Settings, worker: LifecycleWorkers
) -> None:
    seeded = await seed(settings, bots=1, rows=200)
    bot_id = seeded.bot_ids[0]
    handle = await start_bot_deletion(temporal_client, settings.task_queue, bot_id=bot_id, account_id=seeded.account_id)
    await handle.result()
    result = await _reset_and_finish(cli, temporal_client, handle, "--type", "LastWorkflowTask")
    assert all(service["done"] for service in result["services"].values())
    assert set((await remaining_rows(settings.database_url, bot_id)).values()) == {0}
    assert await _receipts(settings, handle.id) == 1


async def _receipts(settings: Settings, workflow_id: str) -> int:
    async with connection(settings.database_url) as conn:
        return int(await conn.fetchval("SELECT count(*) FROM deletion_receipts WHERE workflow_id = $1", workflow_id))


async def test_reset_site_creation_to_an_event_makes_no_second_database(
    cli: AsyncCli,
    api: httpx.AsyncClient,
    account: ApiAccount,
    temporal_client: Client,
    settings: Settings,
    smtp_sink: SmtpSink,
    worker: LifecycleWorkers,
) -> None:
    body = {"name": "Reset me", "domain": f"reset-{account.id[:8]}.example.com"}
    created = await api.post("/sites", json=body, headers=account.headers)
    assert created.status_code == 202, created.text
    site_id = created.json()["id"]
    handle = temporal_client.get_workflow_handle(site_creation_id(site_id))
    await handle.result()

    async def emailed() -> bool:
        return _mails_to(smtp_sink, account.email) == 1

    await eventually(emailed, "the site-ready email arrives")
    # To the workflow task that ran the metadata step's first try: the steps run again from there, find the site
    # active, and change nothing.
    event_id = await task_completed_after(handle, "save_site_metadata")
    result = await _reset_and_finish(cli, temporal_client, handle, "--event-id", str(event_id))
    assert result["status"] == "active"
    latest = temporal_client.get_workflow_handle(handle.id)
    assert "save_site_metadata" in await scheduled_activities(latest)
    state = await site_state(settings, site_id)
    assert state.status == "active" and state.database and state.role and state.directory
    assert state.options["blogname"] == "Reset me"
    assert _mails_to(smtp_sink, account.email) == 1
