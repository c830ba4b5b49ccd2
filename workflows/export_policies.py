"""Timeouts and retries of the account export, each with the reason it has its value."""

from __future__ import annotations

from datetime import timedelta

from temporalio.common import RetryPolicy

# Writing parts and assembling the ZIP heartbeat every second from the background; 5 s of silence means the
# worker died, and the next attempt resumes from the parts already renamed into place.
EXPORT_HEARTBEAT = timedelta(seconds=5)
# A very large account takes hours to write; a call running longer than this is stuck, not slow.
EXPORT_WRITE_TIMEOUT = timedelta(hours=12)
# Disk, database and SMTP failures are transient and every step is idempotent: retry without end, backing off
# to a minute, so an outage delays the export rather than losing it.
EXPORT_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1), backoff_coefficient=2.0, maximum_interval=timedelta(minutes=1)
)
