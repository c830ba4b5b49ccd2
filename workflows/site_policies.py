"""Timeouts and retry policies of the site workflows, each with the reason for its value."""

from datetime import timedelta

from temporalio.common import RetryPolicy

# Each step usually takes milliseconds but may wait minutes on a lock or a slow CREATE DATABASE: the
# start-to-close timeout only bounds a step that hangs while its worker lives.
STEP_TIMEOUT = timedelta(minutes=10)
# Steps and undos heartbeat every second from a background task (activities/heartbeat.py): five seconds of
# silence means the worker died, and the step is retried elsewhere well within the 15 s recovery target.
STEP_HEARTBEAT_TIMEOUT = timedelta(seconds=5)
# Transient faults (a restarting database) clear within seconds; five attempts (~15 s) then roll back.
STEP_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=30),
    maximum_attempts=5,
)

# Activation runs as a local activity (one UPDATE, no heartbeat): a hung statement is cut off here and retried,
# rather than holding the workflow task for the ten minutes a step may take.
LOCAL_ACTIVATION_TIMEOUT = timedelta(seconds=30)

# An undo is idempotent and must not be lost, so it retries with policies.RETRY_WITHOUT_END until it succeeds or
# fails for good (non-retryable), which the rollback records and hands to an operator. Bounded like a step.
UNDO_TIMEOUT = timedelta(minutes=10)

# The site is already active when the email goes out: ride out an SMTP outage for about a day, then give up.
EMAIL_TIMEOUT = timedelta(seconds=30)
EMAIL_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=5),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(minutes=30),
    maximum_attempts=60,
)

# Waiting for the creation to close (activities/polling.py): each attempt looks once and fails while it is
# open, so the server's retry timer waits and no site slot is held. Every second at first, for the usual
# creation that ends in moments; backing off to every 30 s for one that waits on an operator.
AWAIT_CREATION_LOOK_TIMEOUT = timedelta(seconds=30)
AWAIT_CREATION_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1), backoff_coefficient=1.5, maximum_interval=timedelta(seconds=30)
)

# The alert for a failed rollback is best-effort: the site already shows `rollback_failed`, so a webhook that
# keeps failing must not keep the run from waiting for the operator.
ALERT_TIMEOUT = timedelta(seconds=30)
ALERT_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_attempts=5)
