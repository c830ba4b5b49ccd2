"""Compensation runs to the end: an undo that fails for good is recorded and alerted, the other undos still
run, the domain stays held, and an operator's `retry` update finishes the rollback. Real dev server."""

from __future__ import annotations

import uuid

import pytest
from temporalio.client import Client, WorkflowFailureError, WorkflowUpdateFailedError

from lifecycle.settings import Settings
from lifecycle.sites.contracts import SiteProgress
from lifecycle.statuses import SiteStatus, StepStatus
from tests.db import connection
from tests.eventually import eventually
from tests.sites.helpers import settings_database, site_state, start_creation, undos_run
from tests.workers import own_queue, own_worker


async def _alerts(settings: Settings, workflow_id: str) -> list[str]:
    async with connection(settings.database_url) as conn:
        rows = await conn.fetch("SELECT reason FROM alerts WHERE workflow_id = $1", workflow_id)
    return [row["reason"] for row in rows]


async def test_failed_undo_waits_for_retry_and_the_rest_still_run(
    temporal_client: Client, site_id: str, settings: Settings
) -> None:
    assert settings_database(settings)
    queue = f"sites-{uuid.uuid4().hex[:8]}"
    faults = "bootstrap_site=permanent,drop_site_database=permanent"
    async with own_worker(own_queue(settings, queue), temporal_client, faults):
        handle = await start_creation(temporal_client, queue, site_id)

        async def waiting() -> bool:
            progress = await handle.query("progress", result_type=SiteProgress)
            return progress.status == SiteStatus.ROLLBACK_FAILED

        await eventually(waiting, "the rollback fails and waits for an operator")
        state = await site_state(settings, site_id)
        assert state.status == SiteStatus.ROLLBACK_FAILED
        assert state.steps["database"] == StepStatus.COMPENSATION_FAILED
        # The undos after the failed one ran; the domain is still held, since the database is still there.
        assert state.steps["filesystem"] == StepStatus.COMPENSATED
        assert state.steps["metadata"] != StepStatus.COMPENSATED
        assert state.database and not state.directory
        assert await undos_run(handle) == ["drop_site_tables", "drop_site_database", "remove_site_filesystem"]

        async def alerted() -> list[str]:
            return await _alerts(settings, handle.id)

        assert "database undo failed" in (await eventually(alerted, "an alert is recorded"))[0]

    # The operator fixes the cause (here: a worker without the fault) and retries.
    async with own_worker(own_queue(settings, queue), temporal_client):
        assert "undo" in await handle.execute_update("retry", result_type=str)
        with pytest.raises(WorkflowFailureError):
            await handle.result()
        assert (await undos_run(handle))[-2:] == ["drop_site_database", "release_site_domain"]
    state = await site_state(settings, site_id)
    assert state.status == SiteStatus.ROLLED_BACK
    assert not (state.database or state.role or state.directory)


async def test_retry_while_nothing_waits_is_refused_or_logged(
    temporal_client: Client, site_id: str, settings: Settings
) -> None:
    async with own_worker(own_queue(settings), temporal_client, "create_site_database=delay:30") as worker:
        handle = await start_creation(temporal_client, worker.task_queue, site_id)
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await handle.execute_update("retry", result_type=str)
        assert "nothing waits for a retry" in str(refused.value.cause)
        await handle.signal("retry")

        async def noted() -> bool:
            metadata = await handle.query("__temporal_workflow_metadata")
            return "ignored" in str(metadata)

        await eventually(noted, "the ignored signal shows in the current details")
        await handle.terminate("test over")
    assert (await site_state(settings, site_id)).status == SiteStatus.PROVISIONING
