"""One log line for each thing an activity attempt does: `step started`, then `step finished`, `step skipped`
(its work was already done: a retry after a lost answer, a reset run) or `step failed`.

Every line carries the ids the SDK attaches (workflow id, run id, activity type, attempt: lifecycle/logging_setup.py)
and `outcome`; a finished or skipped line also carries the step's counts: the whole numbers and flags of the
dataclass it returns (or the number or flag it returns, as `result`), and those it gave (`step_counts`); a skipped
line says why (`step_skipped`), a failed one the error's type. Never a payload, a text field, an error's message or
anything read from a row: those may hold an email or a name, and a count or a fixed reason never does.
"""

from __future__ import annotations

import dataclasses
import logging
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor


@dataclass
class _Step:
    skipped: str | None = None
    counts: dict[str, int | bool] = field(default_factory=dict)


_current: ContextVar[_Step | None] = ContextVar("step", default=None)

# The SDK's adapter attaches the activity's ids to each record; the message stays as written (they are fields).
_logger = activity.LoggerAdapter(logging.getLogger(__name__), None)
_logger.activity_info_on_message = False


def step_skipped(reason: str, **counts: int | bool) -> None:
    """The running attempt found its work already done: its last line says `skipped`, with `reason`, which is a
    fixed text (never a value read from a row). Outside an activity run by a worker, nothing."""
    step = _current.get()
    if step is not None:
        step.skipped = reason
        step.counts.update(counts)


def step_counts(**counts: int | bool) -> None:
    """Counts for the running attempt's last line (rows deleted, files, done); outside a worker, nothing."""
    step = _current.get()
    if step is not None:
        step.counts.update(counts)


def _log(level: int, outcome: str, **fields: Any) -> None:
    _logger.log(level, "step %s", outcome, extra={"fields": {"outcome": outcome, **fields}})


def _result_counts(result: object) -> dict[str, int | bool]:
    if isinstance(result, int):  # a bool too
        return {"result": result}
    if not dataclasses.is_dataclass(result) or isinstance(result, type):
        return {}
    values = ((item.name, getattr(result, item.name)) for item in dataclasses.fields(result))
    return {name: value for name, value in values if isinstance(value, int)}


def _error_type(err: BaseException) -> str:
    if isinstance(err, ApplicationError) and err.type:
        return err.type
    return type(err).__name__


class StepLogInterceptor(Interceptor):
    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _StepLog(next)


class _StepLog(ActivityInboundInterceptor):
    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        step = _Step()
        token = _current.set(step)
        _log(logging.INFO, "started")
        try:
            result = await super().execute_activity(input)
        except BaseException as err:
            # A cancellation too: the attempt stops here, and the next one (if any) starts its own lines.
            _log(logging.WARNING, "failed", error=_error_type(err), **step.counts)
            raise
        finally:
            _current.reset(token)
        counts = {**_result_counts(result), **step.counts}
        if step.skipped is not None:
            _log(logging.INFO, "skipped", reason=step.skipped, **counts)
        else:
            _log(logging.INFO, "finished", **counts)
        return result
