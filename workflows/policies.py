"""Retry policies and timeouts of the deletion workflows, each with the reason it has its value, and the one retry
policy every workflow gives its idempotent steps."""

from __future__ import annotations

from datetime import timedelta

from temporalio.common import RetryPolicy

# A service failing this many attempts in a row is a poison pill: alert and wait for an operator.
POISON_PILL_ATTEMPTS = 5

# Deleter calls: exponential backoff capped at a minute; after POISON_PILL_ATTEMPTS the workflow decides.
# Transient errors (database down) come back as a TransientError and the workflow calls again, so they
# retry without end; anything else reaching the cap is a poison pill.
DELETER_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(minutes=1),
    maximum_attempts=POISON_PILL_ATTEMPTS,
)
# One batch plus the slice; a call running longer than this is stuck, not slow.
DELETER_START_TO_CLOSE = timedelta(minutes=2)
# Deleters heartbeat after every batch (tens of ms); 10 s of silence means the worker died, so retry soon.
DELETER_HEARTBEAT = timedelta(seconds=10)

# Idempotent steps whose failures are outages (database, disk, SMTP): retry without end, backing off to a minute,
# so an outage delays the work rather than losing it. The deletions' and exports' steps and the sites' undos.
RETRY_WITHOUT_END = RetryPolicy(
    initial_interval=timedelta(seconds=1), backoff_coefficient=2.0, maximum_interval=timedelta(minutes=1)
)
STEP_TIMEOUT = timedelta(seconds=30)
# Every step heartbeats from the background every second (activities/heartbeat.py): 5 s of silence means its
# worker died, and the step is retried elsewhere in seconds rather than at STEP_TIMEOUT.
STEP_HEARTBEAT = timedelta(seconds=5)

# Waiting for a run another request started (activities/polling.py): each attempt looks once and fails while
# the run is open, so the server's retry timer does the waiting and no worker slot is held. Looks every 2 s at
# first, then backs off to every 30 s for runs that take hours; never gives up.
AWAIT_RUN_LOOK_TIMEOUT = timedelta(seconds=30)
AWAIT_RUN_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=2), backoff_coefficient=1.5, maximum_interval=timedelta(seconds=30)
)

# The reconciler's run through the marked rows.
RECONCILE_TIMEOUT = timedelta(minutes=5)
# The reconciler heartbeats per row it looks at; a minute of silence means its worker died.
RECONCILE_HEARTBEAT = timedelta(minutes=1)

# Finishing found rows again (a writer raced the deleters): delete again this many times, then ask an operator.
FINISH_ROUNDS = 3

# Alerts: the activity records the row and tries the webhook a bounded number of times itself (activities/
# alerts.py), so only a database outage fails it; it gets a few attempts, and the run waits for its operator
# whatever becomes of them.
ALERT_TIMEOUT = timedelta(seconds=60)
ALERT_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=30),
    maximum_attempts=10,
)

# A bot deletion of an account that closed without completing (cancelled, terminated, failed) is started
# again after this backoff (a durable timer), doubling up to the cap: an operator stopping it repeatedly is
# not fought in a tight loop, and the account deletion never fails for it.
CHILD_REDRIVE_BACKOFF = timedelta(seconds=5)
CHILD_REDRIVE_BACKOFF_CAP = timedelta(minutes=10)
