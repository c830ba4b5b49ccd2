"""Telling a site-database server that does not answer apart from every other failure of a step.

A server that is down, restarting or cut off is an outage: the steps of its sites wait for it (the creation
saga, workflows/sites/creation.py) or retry without end (undos and teardowns), and the health check marks it
down (activities/sites/health_check.py). Anything else keeps the step's own retry budget.
"""

from __future__ import annotations

from typing import Final

import asyncpg

# Connecting to a live server takes milliseconds; one that has not answered in this long is treated as down,
# rather than holding a step for the driver's default minute.
CONNECT_TIMEOUT_SECONDS: Final = 10.0
# A pooled administrative connection was opened earlier, so its first statement is the step's first word with the
# server: bounded as a connect is (activities/sites/database.py). A server that stopped since (SIGSTOP, a frozen
# VM) keeps the connection open and answers nothing, and without the bound the statement would wait for the step's
# own timeout, minutes away.
FIRST_ANSWER_TIMEOUT_SECONDS: Final = CONNECT_TIMEOUT_SECONDS

# Refused, reset, timed out (TimeoutError is an OSError), dropped mid-statement (class 08), or the server starting
# up, shutting down or recovering from a crash (57P01-57P03).
_UNREACHABLE = (
    OSError,
    asyncpg.PostgresConnectionError,
    asyncpg.CannotConnectNowError,
    asyncpg.AdminShutdownError,
    asyncpg.CrashShutdownError,
)


class SiteDatabaseServerUnreachable(Exception):
    """The site's database server did not answer, or went away mid-step; `server` is its catalog name, if known."""

    def __init__(self, message: str, server: str | None = None) -> None:
        super().__init__(message)
        self.server = server


def is_unreachable(exc: BaseException) -> bool:
    return isinstance(exc, _UNREACHABLE)
