"""The operator-action matrix for sites, driven by the real `temporal` binary.

Workflow types (site creation, site deletion) x actions (reset to the first task, the last task or an event
in the middle; cancel; terminate) x when (while the run is open, after it finished). Afterwards the API's
repeated request (POST /sites with the same Idempotency-Key, or DELETE /sites/{id}) and, for a terminated
creation, a `reconcile_sites` pass. Then: the site is active with its database, role, directory and stored
password, or fully cleaned up; the API's status says which; there is at most one site-ready Message-ID.

A run is held open by a `delay` fault in the step it is in; after the action the faulty worker is swapped for
a clean one (its in-flight step is cancelled by the shutdown and retried by the clean worker).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from email import message_from_bytes
from typing import Any

import httpx
import pytest
import pytest_asyncio
from fastapi import FastAPI
from temporalio.api.enums.v1 import PendingActivityState
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle
from temporalio.testing import ActivityEnvironment

from activities.resources import ActivityResources
from activities.sites.files import CREDENTIALS_DIR, site_key
from activities.sites.reconciler import SiteReconciler
from api.app import create_app
from devstack.smtp_sink import SmtpSink
from lifecycle.settings import Settings
from lifecycle.sites.contracts import SiteReconcileInput
from lifecycle.sites.workflow_types import site_creation_id, site_deletion_id
from lifecycle.statuses import SiteStatus
from tests.conftest import ADMIN_HEADERS
from tests.eventually import eventually
from tests.operators.cli import AsyncCli
from tests.sites.helpers import site_resources, task_completed_after
from tests.workers import own_worker
from worker import LifecycleWorkers

CREATION, DELETION = "creation", "deletion"
FIRST, LAST, MIDDLE = "reset-first", "reset-last", "reset-middle"
CANCEL, TERMINATE = "cancel", "terminate"
OPEN, FINISHED = "open", "finished"
# The step each type is held in while open, and the activity whose completion marks "the middle".
HELD = {CREATION: "bootstrap_site", DELETION: "drop_site_database"}
MIDDLE_AFTER = {CREATION: "save_site_metadata", DELETION: "begin_site_deletion"}
# A small run finishes in a second or two; a hang fails the case here instead of at the suite's timeout.
RESULT_LIMIT_SECONDS = 60


@dataclass
class Stack:
    settings: Settings
    client: Client
    api: httpx.AsyncClient
    headers: dict[str, str]
    email: str

    def worker(self, faults: str | None = None) -> AbstractAsyncContextManager[LifecycleWorkers]:
        """A worker on the matrix's own queue; it stops at once, so that a swap is quick."""
        return own_worker(self.settings, self.client, faults)


@pytest_asyncio.fixture(scope="module")
async def stack(settings: Settings, temporal_client: Client) -> AsyncIterator[Stack]:
    """One API and one account for the whole matrix; site runs go to a queue of the matrix's own."""
    queue = f"matrix-{uuid.uuid4().hex[:8]}"
    own = settings.model_copy(update={"site_task_queue": queue, "task_queue": queue})
    app: FastAPI = create_app(own, temporal_client=temporal_client)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as api:
            email = f"matrix-{uuid.uuid4().hex[:8]}@example.com"
            created = await api.post("/accounts", json={"name": "Matrix", "email": email}, headers=ADMIN_HEADERS)
            assert created.status_code == 201, created.text
            headers = {"Authorization": f"Bearer {created.json()['api_key']}"}
            yield Stack(own, temporal_client, api, headers, email)


async def _status(stack: Stack, site_id: str) -> str:
    response = await stack.api.get(f"/sites/{site_id}", headers=stack.headers)
    assert response.status_code == 200, response.text
    return str(response.json()["status"])


async def _until_status(stack: Stack, site_id: str, *statuses: str) -> str:
    async def reached() -> str | None:
        status = await _status(stack, site_id)
        return status if status in statuses else None

    return await eventually(reached, f"site {site_id} becomes one of {statuses}")


async def _until_in_step(handle: WorkflowHandle[Any, Any], activity: str) -> None:
    async def inside() -> bool:
        pending = (await handle.describe()).raw_description.pending_activities
        return any(
            p.activity_type.name == activity and p.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED
            for p in pending
        )

    await eventually(inside, f"{handle.id} is inside {activity}")


async def _until_closed(handle: WorkflowHandle[Any, Any]) -> None:
    async def closed() -> bool:
        return (await handle.describe()).status != WorkflowExecutionStatus.RUNNING

    await eventually(closed, f"{handle.id} closes")


async def _until_quiet(handle: WorkflowHandle[Any, Any]) -> None:
    """Wait until the run has no workflow task pending and every pending activity is running.

    Swapping workers while a workflow task is in flight can strand it with the stopping worker, and the server
    then waits out the task's timeout (10 s) before handing it to the next worker: correct, but slow. Waiting
    for this point makes each case take a second instead of sometimes ten.
    """

    async def quiet() -> bool:
        description = (await handle.describe()).raw_description
        started = PendingActivityState.PENDING_ACTIVITY_STATE_STARTED
        return not description.HasField("pending_workflow_task") and all(
            p.state == started for p in description.pending_activities
        )

    await eventually(quiet, f"{handle.id} has nothing in flight but running steps")


async def _act(cli: AsyncCli, handle: WorkflowHandle[Any, Any], kind: str, action: str, when: str) -> bool:
    """Run the operator's command; False when the CLI refused it (acting on a closed run)."""
    workflow = ["--workflow-id", handle.id]
    if action in (FIRST, LAST):
        how = ["--type", "FirstWorkflowTask" if action == FIRST else "LastWorkflowTask"]
        args = ["workflow", "reset", *workflow, *how, "--reason", "matrix"]
    elif action == MIDDLE:
        event = await task_completed_after(handle, MIDDLE_AFTER[kind])
        args = ["workflow", "reset", *workflow, "--event-id", str(event), "--reason", "matrix"]
    elif action == CANCEL:
        args = ["workflow", "cancel", *workflow]
    else:
        args = ["workflow", "terminate", *workflow, "--reason", "matrix"]
    completed = await cli.run(*args, check=False)
    if when == FINISHED and action in (CANCEL, TERMINATE):
        # Meaningless on a closed run: the server ignores a cancel (the CLI still says "Canceled") and refuses a
        # terminate; either way the caller checks that nothing changed.
        if action == TERMINATE:
            assert completed.returncode != 0, f"the CLI terminated a closed run: {completed.stdout}"
        return False
    assert completed.returncode == 0, completed.stderr
    return True


def _ready_message_ids(sink: SmtpSink, address: str, domain: str) -> list[str]:
    ids = []
    for path in sink.messages():
        message = message_from_bytes(path.read_bytes())
        if message["To"] == address and domain in (message["Subject"] or ""):
            ids.append(str(message["Message-ID"]))
    return ids


async def _assert_truthful(stack: Stack, smtp_sink: SmtpSink, site_id: str, domain: str, expected: str) -> None:
    status = await _status(stack, site_id)
    assert status == expected
    held = await site_resources(stack.settings, site_id)
    password = (stack.settings.sites_path / CREDENTIALS_DIR / site_key(site_id)).exists()
    everything = (held.database, held.role, held.directory, password)
    if status == SiteStatus.ACTIVE:
        assert all(everything), everything
    else:
        assert not any(everything), (status, everything)
    ids = _ready_message_ids(smtp_sink, stack.email, domain)
    # At most one site-ready Message-ID per site, and only a site that became active gets one. The guarantee is
    # at least once, deduplicated by Message-ID: a worker swapped out between the SMTP call and its record (as
    # these tests do) makes the next attempt send again, with the same Message-ID.
    assert len(set(ids)) <= 1, ids


async def _reconcile(stack: Stack) -> None:
    resources = ActivityResources.create(stack.settings, stack.client)
    try:
        await ActivityEnvironment().run(SiteReconciler(resources).reconcile_sites, SiteReconcileInput())
    finally:
        await resources.close()


ACTIONS = [FIRST, LAST, MIDDLE, CANCEL, TERMINATE]


@pytest.mark.parametrize("when", [OPEN, FINISHED])
@pytest.mark.parametrize("action", ACTIONS)
async def test_site_creation(stack: Stack, cli: AsyncCli, smtp_sink: SmtpSink, action: str, when: str) -> None:
    domain = f"mc-{uuid.uuid4().hex[:10]}.example.com"
    body = {"name": "Matrix", "domain": domain}
    headers = {**stack.headers, "Idempotency-Key": domain}
    faults = f"{HELD[CREATION]}=delay:60" if when == OPEN else None
    async with stack.worker(faults):
        created = await stack.api.post("/sites", json=body, headers=headers)
        assert created.status_code == 202, created.text
        site_id = created.json()["id"]
        handle = stack.client.get_workflow_handle(site_creation_id(site_id))
        if when == OPEN:
            await _until_in_step(handle, HELD[CREATION])
        else:
            await asyncio.wait_for(handle.result(), RESULT_LIMIT_SECONDS)
            assert await _status(stack, site_id) == SiteStatus.ACTIVE
        acted = await _act(cli, handle, CREATION, action, when)
        await _until_quiet(handle)
    async with stack.worker():
        if action == TERMINATE and acted:
            # The reconciler's rule: a terminated creation is rolled back, as a cancel would have done.
            assert await _status(stack, site_id) == SiteStatus.PROVISIONING
            await _reconcile(stack)
        await _until_closed(stack.client.get_workflow_handle(handle.id))
        repeated = await stack.api.post("/sites", json=body, headers=headers)
        assert repeated.status_code == 202 and repeated.json()["id"] == site_id
        undone = acted and when == OPEN and action in (CANCEL, TERMINATE)
        expected = SiteStatus.ROLLED_BACK if undone else SiteStatus.ACTIVE
        await _until_status(stack, site_id, expected)
        await _until_closed(stack.client.get_workflow_handle(handle.id))
    await _assert_truthful(stack, smtp_sink, site_id, domain, expected)
    if expected == SiteStatus.ACTIVE:
        assert len(set(_ready_message_ids(smtp_sink, stack.email, domain))) == 1


@pytest.mark.parametrize("when", [OPEN, FINISHED])
@pytest.mark.parametrize("action", ACTIONS)
async def test_site_deletion(stack: Stack, cli: AsyncCli, smtp_sink: SmtpSink, action: str, when: str) -> None:
    domain = f"md-{uuid.uuid4().hex[:10]}.example.com"
    async with stack.worker():
        created = await stack.api.post("/sites", json={"name": "Matrix", "domain": domain}, headers=stack.headers)
        site_id = created.json()["id"]
        await _until_status(stack, site_id, SiteStatus.ACTIVE)
    faults = f"{HELD[DELETION]}=delay:60" if when == OPEN else None
    async with stack.worker(faults):
        assert (await stack.api.delete(f"/sites/{site_id}", headers=stack.headers)).status_code == 202
        handle = stack.client.get_workflow_handle(site_deletion_id(site_id))
        if when == OPEN:
            await _until_in_step(handle, HELD[DELETION])
        else:
            await asyncio.wait_for(handle.result(), RESULT_LIMIT_SECONDS)
            assert await _status(stack, site_id) == SiteStatus.DELETED
        await _act(cli, handle, DELETION, action, when)
        await _until_quiet(handle)
    async with stack.worker():
        # A cancel cannot stop a teardown; a terminated one is re-driven by the repeated request.
        await _until_closed(stack.client.get_workflow_handle(handle.id))
        assert (await stack.api.delete(f"/sites/{site_id}", headers=stack.headers)).status_code == 202
        await _until_status(stack, site_id, SiteStatus.DELETED)
        await _until_closed(stack.client.get_workflow_handle(handle.id))
    await _assert_truthful(stack, smtp_sink, site_id, domain, SiteStatus.DELETED)
    assert len(set(_ready_message_ids(smtp_sink, stack.email, domain))) == 1
