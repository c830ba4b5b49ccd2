"""A bot deletion started through a real API process, for drills that break something mid-way."""

from __future__ import annotations

from dataclasses import dataclass

import httpx
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHandle

from devstack.seed import rows_per_service, seed
from lifecycle.deletion.workflow_types import bot_deletion_id
from tests.conftest import FEW_DOCUMENTS
from tests.drills.conftest import DrillStack
from tests.drills.probes import rows_left
from tests.eventually import seconds_until


@dataclass
class DeletionRun:
    stack: DrillStack
    bot_id: str
    headers: dict[str, str]
    total: int

    @property
    def handle(self) -> WorkflowHandle[object, object]:
        return self.stack.client.get_workflow_handle(bot_deletion_id(self.bot_id))

    async def deleted(self) -> int:
        return self.total - await rows_left(self.stack.settings.database_url, [self.bot_id])

    async def wait_past(self, rows: int, what: str) -> float:
        async def past() -> bool:
            return await self.deleted() > rows

        return await seconds_until(past, what)

    async def alerts_raised(self) -> int:
        """Operator alerts in the history: a transient outage must never reach one."""
        return len(
            [
                event
                async for event in self.handle.fetch_history_events()
                if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
                and event.activity_task_scheduled_event_attributes.activity_type.name == "raise_alert"
            ]
        )


async def start_bot_deletion(stack: DrillStack, api_url: str, rows: int) -> DeletionRun:
    settings = stack.settings
    seeded = await seed(settings, bots=1, rows=rows, documents=FEW_DOCUMENTS)
    headers = {"Authorization": f"Bearer {seeded.api_key}"}
    run = DeletionRun(stack, seeded.bot_ids[0], headers, sum(rows_per_service(rows, FEW_DOCUMENTS).values()))
    async with httpx.AsyncClient(base_url=api_url) as http:
        accepted = await http.delete(f"/bots/{run.bot_id}", headers=headers)
    assert accepted.status_code == 202, accepted.text
    return run
