"""The reconciler's watch over work nobody may be looking at: runs stuck without progress (lifecycle/stuck.py) and
erasures near or past their due date (lifecycle/deletion/due.py), each alerted through the alert channel.

Each alert is named after what it found (`alerts.raised_by` is unique): a stuck run's kind, subject, last progress
and period; an erasure's workflow id, due date and stage. A sweep run twice, or retried, alerts nothing twice; a
run still stuck one period later, or progress followed by a new stall, alerts again.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import text
from temporalio import activity

from activities.alerts import record_alert
from activities.heartbeat import heartbeats
from activities.resources import ActivityResources
from lifecycle.contracts import AlertInput, WatchResult
from lifecycle.deletion.due import DueStage, due_erasures
from lifecycle.stuck import OpenRun, RunKind, stuck_after, stuck_runs
from lifecycle.workflow_ids import processor_erasure_id, site_creation_id, site_db_pool_id, site_deletion_id

_NOW = text("SELECT now()")


def _workflow_id(run: OpenRun) -> str:
    """The run an operator looks up in Temporal for this subject."""
    match run.kind:
        case RunKind.SITE_CREATION:
            return site_creation_id(run.subject)
        case RunKind.SITE_DELETION:
            return site_deletion_id(run.subject)
        case RunKind.PROCESSOR_ERASURE:
            return processor_erasure_id(run.subject.split("/", 1)[1])
        case RunKind.SITE_DB_POOL:
            return site_db_pool_id(run.subject)
    return run.subject


async def watch_work(resources: ActivityResources, at: datetime | None = None) -> WatchResult:
    """Alert what is stuck or near its due date at `at` (the database's clock unless given: tests move it)."""
    settings = resources.settings
    async with resources.engine.connect() as conn:
        if at is None:
            at = (await conn.execute(_NOW)).scalar_one()
        stuck = await stuck_runs(conn, settings, at)
        due = await due_erasures(conn, settings, at)
    for run, periods in stuck:
        threshold = stuck_after(settings, run.kind)
        reason = (
            f"{run.kind} {run.subject} has made no progress since {run.progressed_at.isoformat()}"
            f" ({periods} x STUCK_AFTER_{run.kind.upper()}={threshold})"
        )
        await record_alert(
            resources,
            AlertInput(workflow_id=_workflow_id(run), subject=f"stuck {run.kind}", reason=reason),
            raised_by=f"stuck/{run.kind}/{run.subject}/{run.progressed_at.isoformat()}/{periods}",
        )
    for erasure in due:
        reason = (
            f"erasure past its due date {erasure.due_at.isoformat()}"
            if erasure.stage == DueStage.OVERDUE
            else f"erasure not finished at {settings.erasure_due_alert_share:.0%} of its time:"
            f" due {erasure.due_at.isoformat()}"
        )
        await record_alert(
            resources,
            AlertInput(workflow_id=erasure.workflow_id, subject=f"erasure {erasure.stage}", reason=reason),
            raised_by=f"due/{erasure.workflow_id}/{erasure.due_at.isoformat()}/{erasure.stage}",
        )
    return WatchResult(
        stuck=len(stuck),
        near_due=sum(e.stage == DueStage.NEAR for e in due),
        overdue=sum(e.stage == DueStage.OVERDUE for e in due),
    )


class WorkWatch:
    def __init__(self, resources: ActivityResources) -> None:
        self._resources = resources

    @activity.defn(name="watch_work")
    @heartbeats
    async def watch_work(self) -> WatchResult:
        return await watch_work(self._resources)
