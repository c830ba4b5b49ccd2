"""Timeouts and retries of the account export, each with the reason it has its value."""

from __future__ import annotations

from datetime import timedelta

# Writing parts and assembling the ZIP heartbeat every second from the background; 5 s of silence means the
# worker died, and the next attempt resumes from the parts already renamed into place.
EXPORT_HEARTBEAT = timedelta(seconds=5)
# A very large account takes hours to write; a call running longer than this is stuck, not slow.
EXPORT_WRITE_TIMEOUT = timedelta(hours=12)
# Every step retries with policies.RETRY_WITHOUT_END: disk, database and SMTP failures are transient and every
# step is idempotent.
