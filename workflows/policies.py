"""Retry policies and timeouts of the deletion workflows, each with the reason it has its value."""

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

# Short database and SMTP steps: retry forever with backoff; they are idempotent and an outage is transient.
STEP_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1), backoff_coefficient=2.0, maximum_interval=timedelta(minutes=1)
)
STEP_TIMEOUT = timedelta(seconds=30)

# Waiting for a bot deletion another request started: it may run for hours; heartbeats detect a lost worker.
AWAIT_DELETION_TIMEOUT = timedelta(days=7)
AWAIT_DELETION_HEARTBEAT = timedelta(seconds=30)

# The reconciler's run through the marked rows.
RECONCILE_TIMEOUT = timedelta(minutes=5)
