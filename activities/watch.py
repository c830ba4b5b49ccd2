"""The reconciler's watch over work nobody may be looking at: runs stuck without progress (lifecycle/stuck.py) and
erasures near or past their due date (lifecycle/deletion/due.py), each alerted through the alert channel.

Each alert is named after what it found (`alerts.raised_by` is unique): a stuck run's kind, subject, last progress
and period; an erasure's workflow id, due date and stage. A sweep run twice, or retried, alerts nothing twice; a
run still stuck one period later, or progress followed by a new stall, alerts again.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import text
from temporalio import activity

from activities.alerts import record_alert
from activities.heartbeat import heartbeats
from activities.resources import ActivityResources
from lifecycle.deletion.due import DueErasure, DueStage, due_erasures
from lifecycle.deletion.workflow_types import processor_erasure_id
from lifecycle.shared_contracts import AlertInput, WatchResult
from lifecycle.sites.workflow_types import site_creation_id, site_db_pool_id, site_deletion_id
from lifecycle.stuck import OpenRun, RunKind, stuck_after, stuck_runs

_NOW = text("SELECT now()")
_RAISED = text("SELECT raised_by FROM alerts WHERE raised_by = ANY(:keys)")


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


def _stuck_alert(run: OpenRun, periods: int, threshold: timedelta) -> tuple[str, AlertInput]:
    reason = (
        f"{run.kind} {run.subject} has made no progress since {run.progressed_at.isoformat()}"
        f" ({periods} x STUCK_AFTER_{run.kind.upper()}={threshold})"
    )
    raised_by = f"stuck/{run.kind}/{run.subject}/{run.progressed_at.isoformat()}/{periods}"
    return raised_by, AlertInput(workflow_id=_workflow_id(run), subject=f"stuck {run.kind}", reason=reason)


def _due_alert(erasure: DueErasure, share: float) -> tuple[str, AlertInput]:
    due = erasure.due_at.isoformat()
    reason = (
        f"erasure past its due date {due}"
        if erasure.stage == DueStage.OVERDUE
        else f"erasure not finished at {share:.0%} of its time: due {due}"
    )
    raised_by = f"due/{erasure.workflow_id}/{due}/{erasure.stage}"
    return raised_by, AlertInput(workflow_id=erasure.workflow_id, subject=f"erasure {erasure.stage}", reason=reason)


async def watch_work(resources: ActivityResources, at: datetime | None = None) -> WatchResult:
    """Alert what is stuck or near its due date at `at` (the database's clock unless given: tests move it)."""
    settings = resources.settings
    async with resources.engine.connect() as conn:
        if at is None:
            at = (await conn.execute(_NOW)).scalar_one()
        stuck = await stuck_runs(conn, settings, at)
        due = await due_erasures(conn, settings, at)
        alerts = dict(
            [_stuck_alert(run, periods, stuck_after(settings, run.kind)) for run, periods in stuck]
            + [_due_alert(erasure, settings.erasure_due_alert_share) for erasure in due]
        )
        # Raised by an earlier sweep, or an earlier attempt of this one: not again, so that a webhook that is down
        # costs each alert its few tries once, and a retried sweep always gets further.
        raised = set((await conn.execute(_RAISED, {"keys": list(alerts)})).scalars())
    for raised_by, alert in alerts.items():
        if raised_by not in raised:
            await record_alert(resources, alert, raised_by=raised_by)
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
