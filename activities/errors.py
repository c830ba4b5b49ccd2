"""Telling transient infrastructure failures apart from bugs, so only the latter become poison pills."""

from __future__ import annotations

from botocore.exceptions import ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as StoreUnreachable
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from temporalio.exceptions import ApplicationError

from lifecycle.deletion.contracts import TRANSIENT_ERROR
from lifecycle.object_store import ObjectDeleteFailed


def is_transient(exc: BaseException) -> bool:
    if isinstance(exc, OperationalError | InterfaceError | OSError | ConnectionError):
        return True
    # The object store down, unreachable, or answering an error of its own (a 5xx, SlowDown).
    if isinstance(exc, StoreUnreachable | HTTPClientError | ObjectDeleteFailed):
        return True
    if isinstance(exc, ClientError):
        return int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)) >= 500
    return isinstance(exc, DBAPIError) and exc.connection_invalidated


# Enough to identify an error; a failure is stored in workflow history, which must stay small.
MAX_MESSAGE = 300


def short_message(exc: BaseException) -> str:
    """The error's type and the first line of its message, bounded."""
    first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {first_line[:MAX_MESSAGE]}"


def as_transient(exc: BaseException, *details: object) -> ApplicationError:
    """`details` travel with the failure, e.g. how far a deleter got, so the next call counts from there."""
    return ApplicationError(short_message(exc), *details, type=TRANSIENT_ERROR)
