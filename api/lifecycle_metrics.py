"""Gauges of the work itself, read from PostgreSQL at each scrape (the read model every process writes), so any API
process answers the same and none keeps state: stuck runs by kind, poison pills, erasures near or past their due
date, the deletion budget held at its floor, and the registered services' silence. The alert rules that read them
are deploy/prometheus-rules.yml (docs/observability.md, "Stuck work").
"""

from __future__ import annotations

from collections import Counter as Tally

from prometheus_client import CollectorRegistry, Gauge
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from lifecycle.deletion.budget import MIN_ROWS_PER_SECOND
from lifecycle.deletion.due import DueStage, due_erasures
from lifecycle.settings import Settings
from lifecycle.statuses import OPEN_DELETIONS_SQL, DeletionState
from lifecycle.stuck import RunKind, stuck_runs

_NOW = text("SELECT now()")
_POISON_PILLS = text(f"SELECT count(*) FROM deletion_requests WHERE status = '{DeletionState.WAITING_FOR_OPERATOR}'")
# The shared budget at the lowest rate PUT /deletion-budget accepts: every deletion crawls at its slowest, which an
# operator chose (or a script left), and for how long.
_BUDGET_AT_FLOOR = text(
    "SELECT coalesce(extract(epoch FROM now() - updated_at), 0) FROM deletion_budget"
    " WHERE id = 1 AND rows_per_second <= :floor"
).bindparams(floor=MIN_ROWS_PER_SECOND)
# An active service's silence counts only while an open deletion still has its part to do: an idle service has
# nothing to answer. Silence runs from its last answer, or its registration if it never answered.
_SILENCE = text(
    "SELECT s.name, CASE WHEN EXISTS (SELECT FROM deletion_progress p JOIN deletion_requests r"
    f" ON r.workflow_id = p.workflow_id WHERE p.service = s.name AND NOT p.done AND r.{OPEN_DELETIONS_SQL})"
    " THEN extract(epoch FROM now() - coalesce(s.last_answered_at, s.registered_at)) ELSE 0 END"
    " FROM deletion_services s WHERE s.retired_at IS NULL"
)


class LifecycleGauges:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.stuck = Gauge(
            "lifecycle_stuck_runs",
            "Runs without progress for longer than STUCK_AFTER_<KIND>",
            ["kind"],
            registry=registry,
        )
        self.poison_pills = Gauge(
            "lifecycle_deletions_waiting_for_operator",
            "Deletions stopped at a poison pill, waiting for an operator",
            registry=registry,
        )
        self.erasures = Gauge(
            "lifecycle_erasures_due",
            "Open erasures, clock running, past ERASURE_DUE_ALERT_SHARE of their time (near) or due (overdue)",
            ["stage"],
            registry=registry,
        )
        self.budget_at_floor = Gauge(
            "lifecycle_deletion_budget_at_floor_seconds",
            f"How long the deletion budget has been at its floor ({MIN_ROWS_PER_SECOND} rows/s); 0 above it",
            registry=registry,
        )
        self.silence = Gauge(
            "lifecycle_deletion_service_silence_seconds",
            "Seconds since a registered service with work to do last answered; 0 while it has none",
            ["service"],
            registry=registry,
        )

    async def refresh(self, engine: AsyncEngine, settings: Settings) -> None:
        async with engine.connect() as conn:
            at = (await conn.execute(_NOW)).scalar_one()
            stuck = Tally(run.kind for run, _ in await stuck_runs(conn, settings, at))
            due = Tally(erasure.stage for erasure in await due_erasures(conn, settings, at))
            poison_pills = (await conn.execute(_POISON_PILLS)).scalar_one()
            at_floor = (await conn.execute(_BUDGET_AT_FLOOR)).scalar_one_or_none() or 0
            silence = list(await conn.execute(_SILENCE))
        for kind in RunKind:
            self.stuck.labels(kind.value).set(stuck[kind])
        for stage in DueStage:
            self.erasures.labels(stage.value).set(due[stage])
        self.poison_pills.set(poison_pills)
        self.budget_at_floor.set(float(at_floor))
        # A retired service's series goes with it.
        self.silence.clear()
        for service, seconds in silence:
            self.silence.labels(service).set(float(seconds))
