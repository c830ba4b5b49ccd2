"""Timeouts and retry policies of the site workflows, each with the reason for its value."""

from datetime import timedelta

from temporalio.common import RetryPolicy

# Each step takes milliseconds; a minute without an answer means the worker died mid-step.
STEP_TIMEOUT = timedelta(minutes=1)
# Transient faults (a restarting database) clear within seconds; five attempts (~15 s) then roll back.
STEP_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=30),
    maximum_attempts=5,
)

# An undo is idempotent and must not be lost, so it retries until it succeeds (0 = no limit).
UNDO_TIMEOUT = timedelta(minutes=2)
UNDO_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(minutes=1),
    maximum_attempts=0,
)

# The site is already active when the email goes out: ride out an SMTP outage for about a day, then give up.
EMAIL_TIMEOUT = timedelta(seconds=30)
EMAIL_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=5),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(minutes=30),
    maximum_attempts=60,
)

# Waiting for a creation to close lasts as long as its email retries; heartbeats detect a dead worker.
AWAIT_CREATION_TIMEOUT = timedelta(days=2)
AWAIT_CREATION_HEARTBEAT = timedelta(seconds=15)
