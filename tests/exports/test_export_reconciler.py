"""The reconciler settles the exports an operator's terminate left: an archive past its expiry is deleted, and an
export an account deletion waits for is started again, so the deletion finishes."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from temporalio.client import Client, WorkflowFailureError

from lifecycle.deletion.contracts import AccountDeletionResult
from lifecycle.deletion.workflow_types import account_deletion_id
from lifecycle.exports.workflow_types import account_export_id
from lifecycle.settings import Settings
from tests.db import connection
from tests.deletion.helpers import run_reconciler
from tests.exports.conftest import ApiWith
from tests.exports.helpers import archive_traces, export_row, headers_of, seeded_account, wait_for_status
from tests.workers import own_queue, own_worker
from worker import LifecycleWorkers


async def _execute(settings: Settings, sql: str, *args: object) -> None:
    async with connection(settings.database_url) as conn:
        await conn.execute(sql, *args)


async def test_an_archive_whose_run_was_terminated_is_deleted_once_it_expires(
    api_with: ApiWith, worker: LifecycleWorkers, settings: Settings, temporal_client: Client
) -> None:
    seeded = await seeded_account(settings, bots=1, rows=20)
    async with api_with() as api:
        response = await api.post("/account/exports", headers=headers_of(seeded))
    assert response.status_code == 202, response.text
    export_id = str(response.json()["id"])
    ready = await wait_for_status(settings, export_id, "ready")
    # An operator terminates the run during the archive's retention, so its timer will never fire.
    await temporal_client.get_workflow_handle(ready["workflow_id"]).terminate("operator test")
    assert await archive_traces(settings, export_id) == ["object"]
    # The retention runs out (set back rather than waited for: the export's default retention is days).
    await _execute(
        settings, "UPDATE account_exports SET expires_at = now() - interval '1 second' WHERE id = $1", ready["id"]
    )

    result = await run_reconciler(temporal_client, settings)

    assert result.exports is not None and result.exports.expired >= 1
    row = await export_row(settings, export_id)
    assert row["status"] == "expired" and row["expired_at"] is not None
    assert await archive_traces(settings, export_id) == []


async def test_an_export_a_deletion_waits_for_is_started_again_after_a_terminate(
    api_with: ApiWith, worker: LifecycleWorkers, settings: Settings, temporal_client: Client
) -> None:
    seeded = await seeded_account(settings, bots=1, rows=20)
    # No worker polls this queue yet: the export and the account deletion wait there for the test.
    held = own_queue(settings)
    async with api_with(task_queue=held.task_queue) as api:
        response = await api.request("DELETE", "/account", json={"export_first": True}, headers=headers_of(seeded))
    assert response.status_code == 202, response.text
    async with connection(settings.database_url) as conn:
        export = await conn.fetchrow(
            "SELECT id, workflow_id FROM account_exports WHERE account_id = $1", uuid.UUID(seeded.account_id)
        )
    assert export is not None
    # An operator terminates the export before it wrote anything; the account's keys are already revoked.
    await temporal_client.get_workflow_handle(export["workflow_id"]).terminate("operator test")

    account = temporal_client.get_workflow_handle(
        account_deletion_id(seeded.account_id), result_type=AccountDeletionResult
    )
    async with own_worker(held, temporal_client):
        # The session's worker runs the reconciler, and the export it starts again on the session's queue.
        result = await run_reconciler(temporal_client, settings)
        assert result.exports is not None and str(export["id"]) not in result.exports.left_alone
        row = await wait_for_status(settings, str(export["id"]), "ready")
        finished = await asyncio.wait_for(account.result(), timeout=90)
    assert finished.status == "completed" and finished.account_row_deleted
    assert row["mailed_at"] is not None


async def test_an_export_whose_run_never_started_is_started(
    worker: LifecycleWorkers, settings: Settings, temporal_client: Client
) -> None:
    """The API died between committing the export row and starting its run."""
    seeded = await seeded_account(settings, bots=1, rows=20)
    export_id = uuid.uuid4()
    workflow_id = account_export_id(uuid.UUID(seeded.account_id), 1)
    await _execute(
        settings,
        "INSERT INTO account_exports (id, account_id, sequence, workflow_id, status) VALUES ($1, $2, 1, $3, 'pending')",
        export_id,
        uuid.UUID(seeded.account_id),
        workflow_id,
    )

    result = await run_reconciler(temporal_client, settings)

    assert result.exports is not None and result.exports.started >= 1
    row = await wait_for_status(settings, str(export_id), "ready")
    assert row["workflow_id"] == workflow_id and await archive_traces(settings, str(export_id)) == ["object"]


async def test_an_export_an_operator_terminated_is_left_for_the_users_next_request(
    api_with: ApiWith, worker: LifecycleWorkers, settings: Settings, temporal_client: Client
) -> None:
    seeded = await seeded_account(settings, bots=1, rows=20)
    async with api_with(task_queue=own_queue(settings).task_queue) as api:
        response = await api.post("/account/exports", headers=headers_of(seeded))
    assert response.status_code == 202, response.text
    export_id = str(response.json()["id"])
    row = await export_row(settings, export_id)
    await temporal_client.get_workflow_handle(row["workflow_id"]).terminate("operator test")

    result = await run_reconciler(temporal_client, settings)

    assert result.exports is not None and export_id in result.exports.left_alone
    assert (await export_row(settings, export_id))["status"] == "pending"


async def test_an_export_whose_run_failed_is_started_again(
    api_with: ApiWith, worker: LifecycleWorkers, settings: Settings, temporal_client: Client
) -> None:
    seeded = await seeded_account(settings, bots=1, rows=20)
    faulty = own_queue(settings)
    async with api_with(task_queue=faulty.task_queue) as api:
        response = await api.post("/account/exports", headers=headers_of(seeded))
    assert response.status_code == 202, response.text
    export_id = str(response.json()["id"])
    row = await export_row(settings, export_id)
    failed = temporal_client.get_workflow_handle(row["workflow_id"])
    # A worker whose first export step fails for good: the run fails, the row stays open.
    async with own_worker(faulty, temporal_client, faults="begin_account_export=permanent"):
        with pytest.raises(WorkflowFailureError):
            await asyncio.wait_for(failed.result(), timeout=60)
    assert (await export_row(settings, export_id))["status"] == "pending"

    # The session's worker runs the reconciler, and the export it starts again.
    result = await run_reconciler(temporal_client, settings)

    assert result.exports is not None and result.exports.started >= 1
    ready = await wait_for_status(settings, export_id, "ready")
    assert ready["mailed_at"] is not None and await archive_traces(settings, export_id) == ["object"]
