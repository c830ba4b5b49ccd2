"""Telling transient infrastructure failures apart from bugs, so only the latter become poison pills."""

from __future__ import annotations

from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from temporalio.exceptions import ApplicationError

from lifecycle.contracts import TRANSIENT_ERROR


def is_transient(exc: BaseException) -> bool:
    if isinstance(exc, OperationalError | InterfaceError | OSError | ConnectionError):
        return True
    return isinstance(exc, DBAPIError) and exc.connection_invalidated


def as_transient(exc: BaseException, *details: object) -> ApplicationError:
    """`details` travel with the failure, e.g. how far a deleter got, so the next call counts from there."""
    return ApplicationError(f"{type(exc).__name__}: {exc}", *details, type=TRANSIENT_ERROR)
