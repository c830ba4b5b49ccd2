"""A grace period before an account is deleted, a window to change one's mind: signed out at once, nothing deleted until
`deletes_at`, restorable by an admin with a new key, expeditable by an operator. Real PostgreSQL, a real
Temporal dev server and the session's real worker; the grace is an hour unless a test needs the timer itself."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from email import message_from_bytes
from typing import Any

import asyncpg
import httpx
import pytest
from pydantic import ValidationError
from temporalio.api.enums.v1 import EventType
from temporalio.client import (
    Client,
    WithStartWorkflowOperation,
    WorkflowExecutionStatus,
    WorkflowUpdateFailedError,
)
from temporalio.common import WorkflowIDConflictPolicy

from api.app import create_app
from api.security import hash_api_key
from devstack.seed import Seeded, asyncpg_dsn, rows_per_service, seed
from devstack.smtp_sink import SmtpSink
from lifecycle.deletion.contracts import AccountDeletionInput, AccountDeletionResult
from lifecycle.deletion.workflow_types import account_deletion_id, account_deletion_options
from lifecycle.search_attributes import LIFECYCLE_STATUS
from lifecycle.settings import Settings
from tests.conftest import ADMIN_HEADERS
from tests.deletion.helpers import remaining_objects, remaining_rows, run_reconciler
from tests.eventually import eventually
from worker import LifecycleWorkers

ROWS = 40
HOUR = timedelta(hours=1)


@contextlib.asynccontextmanager
async def graced_api(settings: Settings, client: Client, grace: timedelta) -> AsyncIterator[httpx.AsyncClient]:
    """The API with ACCOUNT_DELETION_GRACE set (the suite's shared settings keep the local default, zero)."""
    app = create_app(settings.model_copy(update={"account_deletion_grace": grace}), temporal_client=client)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as api:
            yield api


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def seeded_account(settings: Settings) -> Seeded:
    return await seed(settings, bots=2, rows=ROWS)


async def scheduled_deletion(api: httpx.AsyncClient, seeded: Seeded, grace: timedelta) -> datetime:
    """DELETE /account in a grace period: 202 `scheduled` with `deletes_at`, and the old key already refused."""
    before = datetime.now(UTC)
    answer = await api.delete("/account", headers=bearer(seeded.api_key))
    assert answer.status_code == 202, answer.text
    body = answer.json()
    assert body["workflow_id"] == account_deletion_id(seeded.account_id)
    assert body["status"] == "scheduled"
    deletes_at = datetime.fromisoformat(body["deletes_at"])
    assert before + grace <= deletes_at <= datetime.now(UTC) + grace
    assert (await api.get("/account", headers=bearer(seeded.api_key))).status_code == 401
    return deletes_at


async def deletion_status(api: httpx.AsyncClient, account_id: str) -> dict[str, Any]:
    answer = await api.get(f"/accounts/{account_id}/deletion", headers=ADMIN_HEADERS)
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


async def assert_intact(settings: Settings, seeded: Seeded) -> None:
    for bot_id in seeded.bot_ids:
        assert await remaining_rows(settings.database_url, bot_id) == rows_per_service(ROWS)
        assert await remaining_objects(settings, bot_id) == rows_per_service(ROWS)["knowledge"]


async def account_email(settings: Settings, account_id: str) -> str:
    conn = await asyncpg.connect(asyncpg_dsn(settings.database_url))
    try:
        return str(await conn.fetchval("SELECT email FROM accounts WHERE id = $1::uuid", account_id))
    finally:
        await conn.close()


async def test_a_deletion_restored_in_its_grace_period_loses_nothing(
    settings: Settings, worker: LifecycleWorkers, temporal_client: Client
) -> None:
    seeded = await seeded_account(settings)
    handle = temporal_client.get_workflow_handle(
        account_deletion_id(seeded.account_id), result_type=AccountDeletionResult
    )
    async with graced_api(settings, temporal_client, HOUR) as api:
        deletes_at = await scheduled_deletion(api, seeded, HOUR)

        async def waiting_on_its_timer() -> bool:
            events = [event async for event in handle.fetch_history_events()]
            return any(event.event_type == EventType.EVENT_TYPE_TIMER_STARTED for event in events)

        await eventually(waiting_on_its_timer, "the grace period's timer started")
        # Visible to admins, operators (search attribute, current details) and the UI (the timer's summary).
        status = await deletion_status(api, seeded.account_id)
        assert status["status"] == "scheduled"
        assert datetime.fromisoformat(status["deletes_at"]) == deletes_at
        description = await handle.describe()
        assert description.typed_search_attributes.get(LIFECYCLE_STATUS) == "scheduled"
        metadata = await handle.query("__temporal_workflow_metadata")
        assert "scheduled: deletes at" in str(metadata)
        events = [e async for e in handle.fetch_history_events()]
        timer = next(e for e in events if e.HasField("timer_started_event_attributes"))
        assert b"grace period of account" in timer.user_metadata.summary.data

        restored = await api.post(f"/accounts/{seeded.account_id}/restore", headers=ADMIN_HEADERS)
        assert restored.status_code == 200, restored.text
        body = restored.json()
        assert body["status"] == "restored"
        new_key = body["api_key"]

        # Lossless: every bot, row and file is there, and the new key opens them; the old key stays revoked.
        await assert_intact(settings, seeded)
        bots = await api.get("/bots", headers=bearer(new_key))
        assert bots.status_code == 200, bots.text
        assert sorted(bot["id"] for bot in bots.json()) == sorted(seeded.bot_ids)
        assert (await api.get("/account", headers=bearer(new_key))).status_code == 200
        assert (await api.get("/account", headers=bearer(seeded.api_key))).status_code == 401

        result = await handle.result()
        assert (result.status, result.account_row_deleted, result.bots_deleted) == ("restored", False, 0)
        assert (await deletion_status(api, seeded.account_id))["status"] == "restored"
        assert "deletes_at" not in await deletion_status(api, seeded.account_id)

        # A repeated restore: nothing is pending any more, and no second key is issued.
        again = await api.post(f"/accounts/{seeded.account_id}/restore", headers=ADMIN_HEADERS)
        assert again.status_code == 409, again.text
        assert "not scheduled for deletion" in again.json()["detail"]
        # The restore is on the audit trail once, naming its account; the refused repeat is not.
        trail = await api.get("/audit-events", params={"account_id": seeded.account_id}, headers=ADMIN_HEADERS)
        assert [event["action"] for event in trail.json()["events"]] == ["POST /accounts/{account_id}/restore"]
        # The restored account can be deleted again later, with a grace period of its own.
        await scheduled_deletion(api, _with_key(seeded, new_key), HOUR)
        await handle.terminate("test over")


def _with_key(seeded: Seeded, key: str) -> Seeded:
    return Seeded(account_id=seeded.account_id, api_key=key, bot_ids=seeded.bot_ids)


async def test_an_expedite_in_the_runs_first_workflow_task_is_accepted(
    settings: Settings, worker: LifecycleWorkers, temporal_client: Client
) -> None:
    """Update-with-start puts the `expedite` in the same workflow task as the start, where it is validated before
    run() begins: the grace comes from the input, so it is accepted (it was refused, "not in a grace period")."""
    account_id = str(uuid.uuid4())
    deletes_at = datetime.now(UTC) + HOUR
    options = account_deletion_options(account_id, deletes_at=deletes_at)
    start: WithStartWorkflowOperation[Any, Any] = WithStartWorkflowOperation(
        options.workflow_type,
        AccountDeletionInput(
            account_id=account_id, site_task_queue=settings.site_task_queue, deletes_at=deletes_at.isoformat()
        ),
        id=options.id,
        task_queue=settings.task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
        search_attributes=options.search_attributes,
    )
    answer = await temporal_client.execute_update_with_start_workflow("expedite", start_workflow_operation=start)
    assert "expedited" in str(answer)
    handle = await start.workflow_handle()
    await handle.terminate("test over")


async def test_an_expedited_deletion_deletes_at_once_and_emails_once(
    settings: Settings, worker: LifecycleWorkers, temporal_client: Client, smtp_sink: SmtpSink
) -> None:
    seeded = await seeded_account(settings)
    email = await account_email(settings, seeded.account_id)
    handle = temporal_client.get_workflow_handle(
        account_deletion_id(seeded.account_id), result_type=AccountDeletionResult
    )
    async with graced_api(settings, temporal_client, HOUR) as api:
        await scheduled_deletion(api, seeded, HOUR)
        # The runbook's `temporal workflow update execute --name expedite`.
        assert "expedited" in await handle.execute_update("expedite", result_type=str)
        result = await handle.result()
        assert (result.status, result.account_row_deleted, result.bots_deleted) == ("completed", True, 2)
        assert (await deletion_status(api, seeded.account_id))["status"] == "completed"
        # Gone, so there is nothing to restore.
        gone = await api.post(f"/accounts/{seeded.account_id}/restore", headers=ADMIN_HEADERS)
        assert gone.status_code == 404, gone.text
    for bot_id in seeded.bot_ids:
        assert set((await remaining_rows(settings.database_url, bot_id)).values()) == {0}
    recipients = [message_from_bytes(path.read_bytes())["To"] for path in smtp_sink.messages()]
    assert recipients.count(email) == 1
    # The record says the grace ended when it was expedited, so a later run of it never waits again.
    conn = await asyncpg.connect(asyncpg_dsn(settings.database_url))
    try:
        ended = await conn.fetchval(
            "SELECT deletes_at FROM deletion_requests WHERE workflow_id = $1", account_deletion_id(seeded.account_id)
        )
    finally:
        await conn.close()
    assert ended <= datetime.now(UTC)


async def test_restore_is_refused_once_the_grace_ran_out(
    settings: Settings, worker: LifecycleWorkers, temporal_client: Client
) -> None:
    grace = timedelta(seconds=2)
    seeded = await seeded_account(settings)
    handle = temporal_client.get_workflow_handle(
        account_deletion_id(seeded.account_id), result_type=AccountDeletionResult
    )
    async with graced_api(settings, temporal_client, grace) as api:
        await scheduled_deletion(api, seeded, grace)
        # Paused during the grace, it stays `scheduled`; once the timer fires it deletes, paused, and stays open.
        await handle.signal("pause")

        async def past_its_grace() -> bool:
            return (await deletion_status(api, seeded.account_id))["status"] == "paused"

        await eventually(past_its_grace, "the grace ran out and the paused deletion began")
        refused = await api.post(f"/accounts/{seeded.account_id}/restore", headers=ADMIN_HEADERS)
        assert refused.status_code == 409, refused.text
        assert "Too late to restore" in refused.json()["detail"]
        with pytest.raises(WorkflowUpdateFailedError) as expedite:
            await handle.execute_update("expedite", result_type=str)
        assert "not in a grace period: the deletion is paused" in str(expedite.value.cause)
        await handle.signal("resume")
        result = await handle.result()
        assert (result.status, result.account_row_deleted) == ("completed", True)
        # Deleted after all: nothing left to restore.
        still_refused = await api.post(f"/accounts/{seeded.account_id}/restore", headers=ADMIN_HEADERS)
        assert still_refused.status_code == 404


async def test_a_deletion_terminated_in_its_grace_is_redriven_or_restored(
    settings: Settings, worker: LifecycleWorkers, temporal_client: Client
) -> None:
    seeded = await seeded_account(settings)
    handle = temporal_client.get_workflow_handle(
        account_deletion_id(seeded.account_id), result_type=AccountDeletionResult
    )
    async with graced_api(settings, temporal_client, HOUR) as api:
        deletes_at = await scheduled_deletion(api, seeded, HOUR)
        await handle.terminate("operator stop during the grace")
        # The run could not record its terminate: the reconciler does, and leaves the operator's stop alone.
        assert (await deletion_status(api, seeded.account_id))["status"] == "scheduled"
        await run_reconciler(temporal_client, settings)
        assert (await deletion_status(api, seeded.account_id))["status"] == "terminated"
        assert (await handle.describe()).status == WorkflowExecutionStatus.TERMINATED

        # Way out 1: the admin re-drive resumes the same grace, to the same deadline.
        redriven = await api.post(f"/accounts/{seeded.account_id}/deletion", headers=ADMIN_HEADERS)
        assert redriven.status_code == 202, redriven.text
        assert redriven.json()["status"] == "scheduled"
        assert datetime.fromisoformat(redriven.json()["deletes_at"]) == deletes_at
        assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING
        await handle.terminate("operator stop during the grace, again")

        # Way out 2: with no run open, restore still works, since the last run stopped while `scheduled`.
        restored = await api.post(f"/accounts/{seeded.account_id}/restore", headers=ADMIN_HEADERS)
        assert restored.status_code == 200, restored.text
        await assert_intact(settings, seeded)
        assert (await api.get("/account", headers=bearer(restored.json()["api_key"]))).status_code == 200


def test_the_grace_is_an_iso_8601_duration_never_negative() -> None:
    def grace(value: str) -> timedelta:
        return Settings.model_validate({"account_deletion_grace": value}).account_deletion_grace

    assert grace("P7D") == timedelta(days=7)
    assert grace("PT2S") == timedelta(seconds=2)
    assert Settings().account_deletion_grace == timedelta(0)
    with pytest.raises(ValidationError):
        grace("-P1D")


async def test_a_restore_leaves_exactly_one_live_key(
    settings: Settings, worker: LifecycleWorkers, temporal_client: Client
) -> None:
    """A `POST /account/keys` authorised just before `DELETE /account` committed its revocation inserts a live key
    the revocation never saw. Such a key opens nothing while the deletion is pending; the restore must not bring it
    back with the account."""
    seeded = await seeded_account(settings)
    handle = temporal_client.get_workflow_handle(account_deletion_id(seeded.account_id))
    async with graced_api(settings, temporal_client, HOUR) as api:
        await scheduled_deletion(api, seeded, HOUR)
        raced_key = "raced-" + seeded.account_id
        conn = await asyncpg.connect(asyncpg_dsn(settings.database_url))
        try:
            await conn.execute(
                "INSERT INTO api_keys (id, account_id, key_hash) VALUES (gen_random_uuid(), $1::uuid, $2)",
                seeded.account_id,
                hash_api_key(raced_key),
            )
        finally:
            await conn.close()

        restored = await api.post(f"/accounts/{seeded.account_id}/restore", headers=ADMIN_HEADERS)
        assert restored.status_code == 200, restored.text
        new_key = restored.json()["api_key"]

        assert (await api.get("/account", headers=bearer(raced_key))).status_code == 401
        keys = await api.get("/account/keys", headers=bearer(new_key))
        assert keys.status_code == 200, keys.text
        assert len(keys.json()) == 1
        await handle.result()
