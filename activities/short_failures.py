"""Failures that fit in a history event: an unexpected exception reaches Temporal as one short line.

A raw driver error (an asyncpg connection refusal, say) carries a stack trace too large for the server to store,
and the UI then shows only "Failure exceeds size limit". The full trace goes to the worker's log; the failure
recorded in history names the error in a line, and keeps its retry semantics (retryable, as before). An
activity's own ApplicationError keeps its line, type and details, without the chain it was raised from.
"""

from __future__ import annotations

from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError, FailureError
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor

from activities.errors import as_transient, is_transient, short_message


class ShortFailuresInterceptor(Interceptor):
    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _ShortFailures(next)


class _ShortFailures(ActivityInboundInterceptor):
    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        try:
            return await super().execute_activity(input)
        except ApplicationError as err:
            # The activity's own error, often raised from a driver error (activities/exports/steps.py, say). Its chain's
            # traces would reach history as the failure's causes, too large for what the server keeps of a
            # retrying activity's last failure: operators then read the stand-in "Failure exceeds size limit."
            # The chain goes to the log; the failure keeps the activity's line, type and details.
            if err.__cause__ is not None or (err.__context__ is not None and not err.__suppress_context__):
                activity.logger.warning("activity failed: %s", err, exc_info=True)
                err.__cause__ = None
                err.__suppress_context__ = True
            raise
        except FailureError:
            # Already Temporal's own, a cancellation say.
            raise
        except Exception as exc:
            activity.logger.warning("activity failed: %s", type(exc).__name__, exc_info=True)
            if is_transient(exc):
                raise as_transient(exc) from None
            raise ApplicationError(short_message(exc), type=type(exc).__name__) from None
