"""A service's worker takes no more calls at once than it has database connections: the rest wait in Temporal's
task queue (where the deletions' fairness keys order them), scheduled, not started. The knowledge service as
`make run` starts it, on a queue and database of its own, each call held a few seconds by the fault-injection
interceptor, and three times as many calls as it has slots requested at once."""

from __future__ import annotations

import asyncio
import sys
import uuid
from datetime import timedelta
from pathlib import Path

from temporalio import workflow
from temporalio.api.enums.v1 import PendingActivityState
from temporalio.client import Client
from temporalio.worker import Worker

with workflow.unsafe.imports_passed_through():
    from devstack.postgres import PostgresServer
    from lifecycle.deletion.registry import VERIFY_SUBJECT_ERASED
    from lifecycle.deletion.v1.service_pb2 import Subject, VerifyRequest, VerifyResponse
    from lifecycle.settings import Settings
    from services.knowledge import KNOWLEDGE
    from services.runtime.database import database_url_variable
    from services.runtime.worker import ACTIVITY_SLOTS, POOL_CAPACITY, task_queue_variable
    from tests.eventually import eventually
    from tests.processes import ChildProcess, settings_environment
    from tests.services.own_database import own_service_database

CALLS = 3 * ACTIVITY_SLOTS
HELD_SECONDS = 3  # each call's extra time: long enough for the describes below to see each wave


@workflow.defn(name="ManyVerifyCalls")
class ManyVerifyCalls:
    @workflow.run
    async def run(self, service_queue: str, calls: int) -> None:
        request = VerifyRequest(
            deletion_id=workflow.info().workflow_id, subject=Subject(kind=Subject.KIND_BOT, id=str(workflow.uuid4()))
        )
        await asyncio.gather(
            *(
                workflow.execute_activity(
                    VERIFY_SUBJECT_ERASED,
                    request,
                    task_queue=service_queue,
                    result_type=VerifyResponse,
                    start_to_close_timeout=timedelta(minutes=2),
                )
                for _ in range(calls)
            )
        )


async def test_a_service_starts_no_more_calls_than_it_has_connections(
    settings: Settings, temporal_client: Client, postgres_server: PostgresServer, tmp_path: Path
) -> None:
    assert ACTIVITY_SLOTS <= POOL_CAPACITY
    suffix = uuid.uuid4().hex[:8]
    url = await own_service_database(postgres_server, KNOWLEDGE, "slots")
    queue, caller_queue = f"knowledge-slots-{suffix}", f"slots-caller-{suffix}"
    environment = settings_environment(
        settings,
        FAULT_INJECTION=f"{VERIFY_SUBJECT_ERASED}=delay:{HELD_SECONDS}",
        **{task_queue_variable(KNOWLEDGE.name): queue, database_url_variable(KNOWLEDGE.name): url},
    )
    service = ChildProcess([sys.executable, "-m", "services.knowledge"], environment, tmp_path / "knowledge.log")
    service.start()
    started_at_once: list[int] = []
    waiting_at_once: list[int] = []
    try:
        await eventually(lambda: "serving" in service.log(), "the service polls its queue")
        async with Worker(temporal_client, task_queue=caller_queue, workflows=[ManyVerifyCalls]):
            handle = await temporal_client.start_workflow(
                ManyVerifyCalls.run, args=[queue, CALLS], id=f"many-verify-{suffix}", task_queue=caller_queue
            )

            async def all_answered() -> bool:
                described = await handle.describe()
                pending = described.raw_description.pending_activities
                started = [p for p in pending if p.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED]
                started_at_once.append(len(started))
                waiting_at_once.append(len(pending) - len(started))
                return described.close_time is not None

            await eventually(all_answered, "every call answered", within=120)
            await handle.result()
    finally:
        service.kill()

    # Every slot was used, never more; the calls beyond them waited in the task queue (a wave's worth at least, as
    # the describes caught the first or the second wave).
    assert max(started_at_once) == ACTIVITY_SLOTS, started_at_once
    assert max(waiting_at_once) >= CALLS - 2 * ACTIVITY_SLOTS, waiting_at_once
