"""What the chaos drill prints about its run, so a failure can be explained from the test log alone:
which activity attempts the kills cost, when each deletion ran, how long each site took."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime

import asyncpg
from temporalio.api.enums.v1 import EventType
from temporalio.api.failure.v1 import Failure
from temporalio.client import Client

from devstack.seed import asyncpg_dsn
from lifecycle.settings import Settings

# The server's stand-in for a failure too large to store; the original, cut down, is its cause.
_CUT_DOWN = "Failure exceeds size limit."


@dataclass(frozen=True)
class RetriedActivity:
    """An activity that needed more than one attempt, as its workflow's history records it."""

    workflow_id: str
    activity: str
    attempts: int
    # From scheduling to the start of the attempt that finished: what the failed attempts cost.
    waited: float
    last_failure: str
    # The server kept a stand-in for the last failure, too large to keep: operators saw no error there.
    failure_cut_down: bool = False

    @property
    def lost_to_a_timeout(self) -> bool:
        """The previous attempt timed out: its worker died (or hung) inside the step."""
        return "timeout" in self.last_failure.lower()

    @property
    def noticed_by_heartbeat(self) -> bool:
        """The server noticed the lost attempt by its missing heartbeats, within the step's heartbeat timeout,
        rather than at its start-to-close timeout (minutes for a site step)."""
        return "heartbeat timeout" in self.last_failure.lower()

    @property
    def seconds_per_lost_attempt(self) -> float:
        return self.waited / (self.attempts - 1)

    def __str__(self) -> str:
        return (
            f"{self.workflow_id}: {self.activity} waited {self.waited:.1f} s over {self.attempts - 1} lost"
            f" attempts (last: {self.last_failure})"
        )


def _cut_down(failure: Failure) -> bool:
    return failure.message == _CUT_DOWN


def _failure_text(failure: Failure) -> str:
    if _cut_down(failure) and failure.HasField("cause"):
        return f"{failure.cause.message[:90]} (cut down by the server: too large)"
    return failure.message[:90]


async def retried_activities(client: Client, workflow_ids: list[str]) -> list[RetriedActivity]:
    """Every activity of these workflows (their latest runs) that took more than one attempt.

    A kill inside a step shows up as a timeout: "Heartbeat timeout" when the step heartbeats, a
    "StartToClose timeout" (after the whole step timeout) when it does not.
    """
    retried = []
    for workflow_id in workflow_ids:
        scheduled: dict[int, tuple[str, datetime]] = {}
        async for event in client.get_workflow_handle(workflow_id).fetch_history_events():
            if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                name = event.activity_task_scheduled_event_attributes.activity_type.name
                scheduled[event.event_id] = (name, event.event_time.ToDatetime())
            elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
                started = event.activity_task_started_event_attributes
                if started.attempt > 1:
                    name, at = scheduled[started.scheduled_event_id]
                    waited = (event.event_time.ToDatetime() - at).total_seconds()
                    failure = started.last_failure
                    retried.append(
                        RetriedActivity(
                            workflow_id, name, started.attempt, waited, _failure_text(failure), _cut_down(failure)
                        )
                    )
    return retried


def longest_waits(retried: list[RetriedActivity], count: int) -> list[RetriedActivity]:
    """The activities whose lost attempts cost the most time each."""
    return sorted(retried, key=lambda activity: activity.seconds_per_lost_attempt, reverse=True)[:count]


def summary(retried: list[RetriedActivity]) -> Counter[str]:
    """Attempts lost, by activity and by why the previous attempt failed."""
    lost: Counter[str] = Counter()
    for activity in retried:
        lost[f"{activity.activity} <- {activity.last_failure}"] += activity.attempts - 1
    return lost


async def deletion_timeline(settings: Settings, workflow_ids: list[str], window_started: datetime) -> list[str]:
    """When each deletion was requested and completed, in seconds from the start of the chaos window."""
    conn = await asyncpg.connect(asyncpg_dsn(settings.database_url))
    try:
        rows = await conn.fetch(
            "SELECT workflow_id, requested_at, completed_at FROM deletion_requests"
            " WHERE workflow_id = ANY($1::text[]) ORDER BY requested_at",
            workflow_ids,
        )
    finally:
        await conn.close()
    lines = []
    for row in rows:
        requested = (row["requested_at"] - window_started).total_seconds()
        completed = row["completed_at"]
        end = f"{(completed - window_started).total_seconds():.1f} s" if completed else "never"
        lines.append(f"{row['workflow_id']}: requested at {requested:.1f} s, completed at {end}")
    return lines


async def site_durations(settings: Settings, site_ids: list[str]) -> list[str]:
    """Each site's status and the seconds from its request to its last status change, slowest first."""
    conn = await asyncpg.connect(asyncpg_dsn(settings.database_url))
    try:
        rows = await conn.fetch(
            "SELECT id, status, extract(epoch FROM updated_at - created_at) AS took FROM sites"
            " WHERE id = ANY($1::uuid[]) ORDER BY took DESC",
            site_ids,
        )
    finally:
        await conn.close()
    return [f"site {row['id']}: {row['status']} after {float(row['took']):.1f} s" for row in rows]


async def database_now(settings: Settings) -> datetime:
    conn = await asyncpg.connect(asyncpg_dsn(settings.database_url))
    try:
        now: datetime = await conn.fetchval("SELECT clock_timestamp()")
        return now
    finally:
        await conn.close()
