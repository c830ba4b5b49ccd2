"""Every activity's options, as named presets: `workflow.execute_activity_method(fn, arg, **presets.STEP)`.

The one place a timeout, a heartbeat timeout or a retry policy is written. Each preset says why it has its values;
a workflow picks a preset by name and adds only the summary.

The presets are typed with the SDK's keys (tests/test_activity_presets.py checks them against
`workflow.ActivityConfig` and `workflow.LocalActivityConfig`) but not as those TypedDicts: they declare `summary`,
so mypy refuses `**preset, summary=...` (the preset might carry a summary too).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Final, TypedDict

from temporalio.common import RetryPolicy
from temporalio.workflow import ActivityCancellationType

from workflows.deletion.policies import POISON_PILL_ATTEMPTS


class ActivityPreset(TypedDict, total=False):
    schedule_to_start_timeout: timedelta
    schedule_to_close_timeout: timedelta
    start_to_close_timeout: timedelta
    heartbeat_timeout: timedelta
    retry_policy: RetryPolicy
    cancellation_type: ActivityCancellationType


class NexusPreset(TypedDict, total=False):
    """A Nexus operation's options (`NexusClient.execute_operation`): it has no retry policy of its own, the handler
    retrying what it runs."""

    schedule_to_start_timeout: timedelta
    start_to_close_timeout: timedelta
    schedule_to_close_timeout: timedelta


class LocalActivityPreset(TypedDict, total=False):
    start_to_close_timeout: timedelta
    retry_policy: RetryPolicy
    cancellation_type: ActivityCancellationType


# Every step that does real work heartbeats from the background every second (activities/heartbeat.py): 5 s of
# silence means its worker died, and the step is retried elsewhere in seconds rather than at its timeout.
_HEARTBEAT = timedelta(seconds=5)


def _doubling(first: timedelta, cap: timedelta, attempts: int = 0) -> RetryPolicy:
    """Retries that wait twice as long each time, from `first` up to `cap`; `attempts` 0 means without end."""
    return RetryPolicy(initial_interval=first, backoff_coefficient=2.0, maximum_interval=cap, maximum_attempts=attempts)


# Idempotent steps whose failures are outages (database, disk, SMTP): retry without end, backing off to a minute,
# so an outage delays the work rather than losing it.
_RETRY_WITHOUT_END = _doubling(timedelta(seconds=1), timedelta(minutes=1))

# Waiting for another run (activities/polling.py): each attempt looks once and fails while the run is open, so the
# server's retry timer does the waiting and no worker slot is held; a look is one describe, bounded like a step.
_LOOK_TIMEOUT = timedelta(seconds=30)


# --- Deletions, exports and the reconciler (the background queue)

# A bookkeeping step (one short transaction, an email, a receipt): a call running longer than 30 s is stuck.
STEP: Final = ActivityPreset(
    start_to_close_timeout=timedelta(seconds=30), heartbeat_timeout=_HEARTBEAT, retry_policy=_RETRY_WITHOUT_END
)

# A call of a registered deletion service (DeleteSubjectData, VerifySubjectErased) on its own task queue. A live
# worker takes a call within milliseconds, so one not taken within 10 s means no worker of the service polls (or
# every one is busy): the run shows the service as waiting and calls again, without end, so nothing is lost while
# the service is down. A slice returns within seconds (DeleteRequest.max_duration_ms), so a minute is stuck; the
# contract asks for no heartbeat, so a worker killed mid-call is noticed at that minute. Errors retry with backoff
# capped at a minute, and after POISON_PILL_ATTEMPTS the workflow decides (a transient error or a timeout is
# called again without end, anything else is a poison pill for an operator).
SERVICE_CALL: Final = ActivityPreset(
    schedule_to_start_timeout=timedelta(seconds=10),
    start_to_close_timeout=timedelta(minutes=1),
    retry_policy=_doubling(timedelta(seconds=1), timedelta(minutes=1), POISON_PILL_ATTEMPTS),
)

# A registered service's ExportSubjectData: taken within 10 s by a live worker, as SERVICE_CALL, but an account's
# part may take as long as the gateway's own parts (EXPORT_WRITE). The contract asks a long export to heartbeat at
# least every minute, so a worker killed mid-call is noticed within that minute; a service that never heartbeats
# has the minute SERVICE_CALL gives it.
SERVICE_EXPORT: Final = ActivityPreset(
    schedule_to_start_timeout=timedelta(seconds=10),
    start_to_close_timeout=timedelta(hours=12),
    heartbeat_timeout=timedelta(minutes=1),
    retry_policy=_doubling(timedelta(seconds=1), timedelta(minutes=1), POISON_PILL_ATTEMPTS),
)

# A preview's count (VerifySubjectErased) on a registered service's queue: someone waits for the answer, so a
# service whose worker does not take the call within 5 s is reported as unknown rather than waited for (a
# schedule-to-start timeout is never retried); a count that fails is tried 3 times, and 25 s bound all of it, well
# inside the API's wait (api/deletion/preview.py), then the service is unknown.
SERVICE_PREVIEW: Final = ActivityPreset(
    schedule_to_start_timeout=timedelta(seconds=5),
    start_to_close_timeout=timedelta(seconds=20),
    schedule_to_close_timeout=timedelta(seconds=25),
    retry_policy=_doubling(timedelta(seconds=1), timedelta(seconds=2), 3),
)

# The same three calls to a service behind a Nexus endpoint (workflows/deletion/service_transport.py). The same wait
# for a worker of the service to take a call, then the handler's workflow retries as SERVICE_CALL and SERVICE_EXPORT
# do (lifecycle/deletion/nexus_handler.py): schedule_to_close bounds all of those attempts with room to spare, and
# a call that outlives it is a timeout, called again as a worker killed mid-call is. A preview's count is bounded
# as SERVICE_PREVIEW bounds it.
SERVICE_CALL_NEXUS: Final = NexusPreset(
    schedule_to_start_timeout=timedelta(seconds=10), schedule_to_close_timeout=timedelta(minutes=15)
)
SERVICE_EXPORT_NEXUS: Final = NexusPreset(
    schedule_to_start_timeout=timedelta(seconds=10), schedule_to_close_timeout=timedelta(hours=13)
)
SERVICE_PREVIEW_NEXUS: Final = NexusPreset(
    schedule_to_start_timeout=timedelta(seconds=5), schedule_to_close_timeout=timedelta(seconds=25)
)

# Asking whether a service's Nexus endpoint exists, before each call through it: a local activity (one read of
# the server's endpoint registry), so it costs no activity task; an outage of the server delays it, never loses it.
ENDPOINT_CHECK: Final = LocalActivityPreset(
    start_to_close_timeout=timedelta(seconds=10), retry_policy=_RETRY_WITHOUT_END
)

# Waiting for a run another request started: looks every 2 s at first, backing off to every 30 s for runs that
# take hours; never gives up.
AWAIT_RUN: Final = ActivityPreset(
    start_to_close_timeout=_LOOK_TIMEOUT,
    heartbeat_timeout=_HEARTBEAT,
    retry_policy=RetryPolicy(
        initial_interval=timedelta(seconds=2), backoff_coefficient=1.5, maximum_interval=timedelta(seconds=30)
    ),
)

# Recording a deletion's status change (one UPDATE), a local activity: it runs in the worker that made the change,
# never queued behind the deleters, so a pause shows at once; a hung statement is cut off after 10 s and retried
# without end (an outage delays the record, never loses it).
DELETION_STATUS: Final = LocalActivityPreset(
    start_to_close_timeout=timedelta(seconds=10), retry_policy=_RETRY_WITHOUT_END
)

# Taking or opening an account's deletion lanes (one short transaction), a local activity like DELETION_STATUS:
# a run waiting its turn costs no activity task, and an outage delays the lane, never loses it.
ACCOUNT_LANE: Final = LocalActivityPreset(start_to_close_timeout=timedelta(seconds=10), retry_policy=_RETRY_WITHOUT_END)

# The reconciler's pass through the marked rows: minutes at most; it heartbeats per row, so a minute of silence
# means its worker died.
RECONCILE: Final = ActivityPreset(
    start_to_close_timeout=timedelta(minutes=5),
    heartbeat_timeout=timedelta(minutes=1),
    retry_policy=_RETRY_WITHOUT_END,
)

# A deletion's operator alert: the activity records the row and tries the webhook a bounded number of times itself
# (activities/alerts.py), so only a database outage fails it; a few attempts, and the run waits for its operator
# whatever becomes of them.
OPERATOR_ALERT: Final = ActivityPreset(
    start_to_close_timeout=timedelta(seconds=60),
    heartbeat_timeout=_HEARTBEAT,
    retry_policy=_doubling(timedelta(seconds=1), timedelta(seconds=30), 10),
)

# Writing an export's parts or assembling its ZIP: a very large account takes hours (12 h: longer is stuck); after
# a worker's death the next attempt resumes from the parts already renamed into place.
EXPORT_WRITE: Final = ActivityPreset(
    start_to_close_timeout=timedelta(hours=12), heartbeat_timeout=_HEARTBEAT, retry_policy=_RETRY_WITHOUT_END
)


# An erasure request to a processor (PROCESSOR_RETRY_* settings): a processor may be down for days, so it is
# retried without end, backing off from seconds to at most an hour, each wait a server-side timer that costs
# nothing; an attempt is bounded by the request's own timeout, and heartbeats notice a killed worker in seconds.
def processor_delivery(first: timedelta, cap: timedelta, request_timeout: timedelta) -> ActivityPreset:
    return ActivityPreset(
        start_to_close_timeout=request_timeout + timedelta(seconds=30),
        heartbeat_timeout=_HEARTBEAT,
        retry_policy=_doubling(first, cap),
        # An operator's skip records its answer only once the request in flight has ended (its acknowledgement
        # then stands). Cancelled without waiting, a request not yet started was cancelled in the same workflow
        # task that scheduled the skip's record, and that record was then never dispatched (docs/testing.md).
        cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
    )


# --- Sites (the customer-facing queue)

# A forward step of the saga: usually milliseconds, but it may wait minutes on a lock or a slow CREATE DATABASE
# (10 min bounds only a step that hangs while its worker lives); transient faults clear within seconds, so five
# attempts (~15 s) then roll back; the undo must not start while the step may still run on a worker.
SITE_STEP: Final = ActivityPreset(
    start_to_close_timeout=timedelta(minutes=10),
    heartbeat_timeout=_HEARTBEAT,
    retry_policy=_doubling(timedelta(seconds=1), timedelta(seconds=30), 5),
    cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
)

# A site step's (or the site-ready email's) first try (workflows/sites/first_try.py), run by the worker inside the
# workflow task that reaches it (a local activity): a creation whose steps all work at once costs one workflow task
# instead of six (bench.sites). One try, cut off well inside the workflow task's timeout; anything else falls back
# to the regular activity, with its retries and a pending activity an operator can see, pause and reset. A
# cancellation waits for the try to end, as SITE_STEP's does.
SITE_STEP_FIRST_TRY: Final = LocalActivityPreset(
    start_to_close_timeout=timedelta(seconds=5),
    retry_policy=RetryPolicy(maximum_attempts=1),
    cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
)

# An undo, a teardown step or the rollback's bookkeeping: idempotent and must not be lost, so it retries until it
# succeeds or fails for good (non-retryable), which the rollback records and hands to an operator; bounded like a
# forward step.
SITE_UNDO: Final = ActivityPreset(
    start_to_close_timeout=timedelta(minutes=10), heartbeat_timeout=_HEARTBEAT, retry_policy=_RETRY_WITHOUT_END
)

# Marking the site active, a local activity (one UPDATE, no heartbeat): a hung statement is cut off after 30 s and
# retried, rather than holding the workflow task for the ten minutes a step may take.
SITE_ACTIVATION: Final = LocalActivityPreset(
    start_to_close_timeout=timedelta(seconds=30), retry_policy=_RETRY_WITHOUT_END
)

# The site-ready email goes out once the site is already active: ride out an SMTP outage for about a day, then give
# up (a lost email is logged, not rolled back).
SITE_READY_EMAIL: Final = ActivityPreset(
    start_to_close_timeout=timedelta(seconds=30),
    heartbeat_timeout=_HEARTBEAT,
    retry_policy=_doubling(timedelta(seconds=5), timedelta(minutes=30), 60),
)

# The alert for a failed rollback is best effort: the site already shows `rollback_failed`, so a webhook that keeps
# failing must not keep the run from waiting for the operator.
SITE_ALERT: Final = ActivityPreset(
    start_to_close_timeout=timedelta(seconds=30),
    retry_policy=RetryPolicy(initial_interval=timedelta(seconds=1), maximum_attempts=5),
)

# A teardown waiting for the creation to close: every second at first, for the usual creation that ends in
# moments, backing off to every 30 s for one that waits on an operator; never gives up.
AWAIT_CREATION: Final = ActivityPreset(
    start_to_close_timeout=_LOOK_TIMEOUT,
    heartbeat_timeout=_HEARTBEAT,
    retry_policy=RetryPolicy(
        initial_interval=timedelta(seconds=1), backoff_coefficient=1.5, maximum_interval=timedelta(seconds=30)
    ),
)

# A pass over a server's warm pool (workflows/sites/pool.py): a few CREATE DATABASEs at most, seconds; heartbeats,
# so a worker's death is noticed in seconds; retried without end (an unreachable server delays the refill, and a
# claim meanwhile makes its site the slow way). A minute bounds a pass that hangs, below HALF_MADE_AFTER.
SITE_POOL_PASS: Final = ActivityPreset(
    start_to_close_timeout=timedelta(minutes=1), heartbeat_timeout=_HEARTBEAT, retry_policy=_RETRY_WITHOUT_END
)

# One pass of the site-database servers' health check: each server is given 3 s (activities/sites/health_check.py)
# and they are checked side by side, so a minute is stuck. A failed pass is tried twice more; the schedule starts
# the next one within seconds anyway.
SITE_SERVER_CHECK: Final = ActivityPreset(
    start_to_close_timeout=timedelta(minutes=1),
    heartbeat_timeout=_HEARTBEAT,
    retry_policy=_doubling(timedelta(seconds=1), timedelta(seconds=5), 3),
)
