"""kill -9 the worker while it is inside a site step: the step heartbeats, so its loss is noticed within the
heartbeat timeout and a new worker carries on in seconds, not at the step's start-to-close timeout."""

from __future__ import annotations

import time
import uuid
from email import message_from_bytes

import httpx
from temporalio.api.enums.v1 import PendingActivityState

from activities.sites.database import site_database_name
from activities.sites.files import site_directory
from lifecycle.sites.workflow_types import site_creation_id
from tests.conftest import ADMIN_TOKEN
from tests.db import fetchval
from tests.drills import figures
from tests.drills.chaos_evidence import retried_activities
from tests.drills.conftest import DrillStack
from tests.eventually import seconds_until

# The first attempt of the database step works 30 s longer (heartbeating), so the kill lands inside it.
SLOW_STEP = "create_site_database=delay:30:1"


async def test_worker_killed_inside_a_site_step(drill_stack: DrillStack) -> None:
    settings = drill_stack.settings
    first = drill_stack.worker("slow-step", FAULT_INJECTION=SLOW_STEP)
    api = drill_stack.api()
    domain = f"step-{uuid.uuid4().hex[:10]}.example.com"
    email = f"step-owner-{uuid.uuid4().hex[:8]}@example.com"
    try:
        async with httpx.AsyncClient(base_url=api.url) as http:
            owner = await http.post(
                "/accounts",
                json={"name": "Step owner", "email": email},
                headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
            )
            headers = {"Authorization": f"Bearer {owner.json()['api_key']}"}
            created = await http.post("/sites", json={"name": "Killed", "domain": domain}, headers=headers)
            assert created.status_code == 202, created.text
            site_id = created.json()["id"]
            handle = drill_stack.client.get_workflow_handle(site_creation_id(site_id))

            async def inside_the_database_step() -> bool:
                pending = (await handle.describe()).raw_description.pending_activities
                return any(
                    activity.activity_type.name == "create_site_database"
                    and activity.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED
                    for activity in pending
                )

            await seconds_until(inside_the_database_step, "the worker is inside the database step")
            first.kill()

            second = drill_stack.worker("successor")
            started = time.monotonic()
            try:

                async def database_done() -> bool:
                    site = (await http.get(f"/sites/{site_id}", headers=headers)).json()
                    return bool(site["steps"]["database"] == "done")

                async def active() -> bool:
                    site = (await http.get(f"/sites/{site_id}", headers=headers)).json()
                    assert site["status"] in ("provisioning", "active"), site
                    return bool(site["status"] == "active")

                # The step itself resumed (its retry ran on the new worker), then the rest of the saga.
                await seconds_until(database_done, "the database step finished on the new worker", within=120)
                step_done = time.monotonic() - started
                await seconds_until(active, "site became active", within=120)
                resumed = time.monotonic() - started
                await handle.result()

                async def emailed() -> bool:
                    return len(_message_ids(drill_stack, email)) == 1

                await seconds_until(emailed, "the site-ready email arrived")
            finally:
                assert second.terminate() == 0, second.log()[-2000:]
    finally:
        first.kill()
        api.terminate()

    figures.record("worker kill -9 inside a site step -> step done on new worker", step_done, SLOW_STEP)
    figures.record("worker kill -9 inside a site step -> site active under new worker", resumed, SLOW_STEP)
    # How the loss was noticed, from the history: by the missing heartbeats (5 s), so the step resumed in
    # seconds (the figures above; the target is 15 s), not at its start-to-close timeout of minutes.
    retried = await retried_activities(drill_stack.client, [site_creation_id(site_id)])
    assert [(r.activity, r.attempts) for r in retried if r.activity == "create_site_database"] == [
        ("create_site_database", 2)
    ], retried
    # The filesystem step runs beside it and may have been in flight too.
    assert all(r.noticed_by_heartbeat for r in retried), retried
    name = site_database_name(site_id)
    assert await fetchval(settings.database_url, "SELECT count(*) FROM pg_database WHERE datname = $1", name) == 1
    assert await fetchval(settings.database_url, "SELECT count(*) FROM pg_roles WHERE rolname = $1", name) == 1
    assert site_directory(settings.sites_path, site_id).is_dir()
    assert len(_message_ids(drill_stack, email)) == 1


def _message_ids(stack: DrillStack, address: str) -> list[str]:
    """Message-IDs of the site-ready emails to `address`, one per message received (duplicates included)."""
    ids = []
    for path in stack.smtp.messages():
        message = message_from_bytes(path.read_bytes())
        if message["To"] == address and "is ready" in (message["Subject"] or ""):
            ids.append(str(message["Message-ID"]))
    return ids
