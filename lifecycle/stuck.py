"""Stuck work: the one rule for when each kind of run last made progress, and when it counts as stuck.

Progress is the work moving, never an attempt: a service's rows, files or its `done` (deletion_progress.progressed_at,
which a record that moves nothing leaves), a processor's acknowledgement, a site's step changing state
(sites.updated_at, which a retried attempt leaves), a pool database made. A run whose last progress is older
than its kind's STUCK_AFTER_<KIND> is stuck for as many whole periods as have passed: the sweep
(activities/watch.py) alerts once per period, and the API's /metrics counts the stuck runs by kind.

Deliberate waits are not stuck: a deletion in its grace period (until `deletes_at`), held, paused by an operator,
or waiting for one (a poison pill, which has alerted already and has its own metric); a site whose undo failed
for good, waiting for an operator's `retry`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from lifecycle.settings import Settings
from lifecycle.statuses import (
    OPEN_EXPORT_STATUSES,
    UNSETTLED_SITE_STATUSES,
    DeletionState,
    ProcessorAnswer,
    SiteDbServerState,
    SitePoolState,
    SiteStatus,
    sql_list,
)


class RunKind(StrEnum):
    BOT_DELETION = "bot_deletion"
    ACCOUNT_DELETION = "account_deletion"
    SITE_CREATION = "site_creation"
    SITE_DELETION = "site_deletion"
    ACCOUNT_EXPORT = "account_export"
    PROCESSOR_ERASURE = "processor_erasure"
    SITE_DB_POOL = "site_db_pool"


# The deletion states in which a run is expected to move by itself.
_MOVING_DELETIONS = (
    DeletionState.ACCEPTED,
    DeletionState.SCHEDULED,
    DeletionState.QUEUED,
    DeletionState.RUNNING,
    DeletionState.WAITING,
)

# Every open run as (kind, subject, last progress). A deletion moves with its own services' rows; an account's (and a
# bot deletion queued for one of its account's lanes) with any of its account's deletions' rows; an account's also
# with its processors' acknowledgements, its sites' steps and its exports (DELETE /account with export_first waits
# for one); its clock starts at the request, or at the end of its grace
# period, or at the release of a legal hold. An export is one long step: its request is its last progress until it
# is ready. A processor's erasure moves only with its acknowledgement, which closes it. A pool below its target
# moves with each database it makes; a claim (which left it below) or a change of the server restarts its clock.
_OPEN_RUNS = text(
    f"""
SELECT CASE r.kind WHEN 'bot' THEN '{RunKind.BOT_DELETION}' ELSE '{RunKind.ACCOUNT_DELETION}' END,
       r.workflow_id,
       greatest(
         r.requested_at, r.deletes_at,
         (SELECT max(p.progressed_at) FROM deletion_progress p JOIN deletion_requests o ON o.workflow_id = p.workflow_id
           WHERE o.workflow_id = r.workflow_id
              OR ((r.kind = 'account' OR r.status = '{DeletionState.QUEUED}') AND o.account_id = r.account_id)),
         (SELECT max(e.acknowledged_at) FROM processor_erasures e WHERE e.deletion_workflow_id = r.workflow_id),
         (SELECT max(h.released_at) FROM legal_holds h WHERE h.account_id = r.account_id),
         (SELECT max(s.updated_at) FROM sites s WHERE r.kind = 'account' AND s.account_id = r.account_id),
         (SELECT max(x.ready_at) FROM account_exports x WHERE r.kind = 'account' AND x.account_id = r.account_id))
  FROM deletion_requests r WHERE r.status IN ({sql_list(_MOVING_DELETIONS)})
UNION ALL
SELECT CASE WHEN s.status = '{SiteStatus.DELETING}' THEN '{RunKind.SITE_DELETION}' ELSE '{RunKind.SITE_CREATION}' END,
       CAST(s.id AS text), s.updated_at
  FROM sites s WHERE s.status IN ({sql_list(UNSETTLED_SITE_STATUSES)})
UNION ALL
SELECT '{RunKind.ACCOUNT_EXPORT}', x.workflow_id, x.requested_at
  FROM account_exports x WHERE x.status IN ({sql_list(OPEN_EXPORT_STATUSES)})
UNION ALL
SELECT '{RunKind.PROCESSOR_ERASURE}', e.processor || '/' || e.deletion_workflow_id, e.begun_at
  FROM processor_erasures e JOIN processors p ON p.name = e.processor
 WHERE e.status = '{ProcessorAnswer.PENDING}' AND p.retired_at IS NULL
UNION ALL
SELECT '{RunKind.SITE_DB_POOL}', s.name,
       greatest(s.updated_at, max(d.created_at) FILTER (WHERE d.state <> '{SitePoolState.CREATING}'), max(d.claimed_at))
  FROM site_db_servers s LEFT JOIN site_db_pool d ON d.server = s.name
 WHERE s.state = '{SiteDbServerState.ACTIVE}'
 GROUP BY s.name, s.updated_at, s.pool_target
HAVING count(d.id) FILTER (WHERE d.state = '{SitePoolState.READY}') < s.pool_target
"""
)


@dataclass(frozen=True)
class OpenRun:
    kind: RunKind
    # A deletion's or export's workflow id, a site's id, `<processor>/<deletion workflow id>`, a server's name.
    subject: str
    progressed_at: datetime


def stuck_after(settings: Settings, kind: RunKind) -> timedelta:
    threshold: timedelta = getattr(settings, f"stuck_after_{kind}")
    return threshold


def stuck_periods(run: OpenRun, threshold: timedelta, at: datetime) -> int:
    """Whole periods of `threshold` the run has gone without progress by `at`; 0 while it is not stuck."""
    return max(0, (at - run.progressed_at) // threshold)


async def open_runs(conn: AsyncConnection) -> list[OpenRun]:
    return [OpenRun(RunKind(kind), subject, at) for kind, subject, at in await conn.execute(_OPEN_RUNS)]


async def stuck_runs(conn: AsyncConnection, settings: Settings, at: datetime) -> list[tuple[OpenRun, int]]:
    """The runs stuck at `at`, each with its periods."""
    found = []
    for run in await open_runs(conn):
        periods = stuck_periods(run, stuck_after(settings, run.kind), at)
        if periods:
            found.append((run, periods))
    return found
