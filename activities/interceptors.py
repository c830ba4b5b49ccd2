"""The activity interceptors every worker runs, the gateway's and each service's alike."""

from __future__ import annotations

from collections.abc import Sequence

from temporalio.worker import Interceptor

from activities.fault_injection import FaultInjectionInterceptor
from activities.short_failures import ShortFailuresInterceptor
from activities.step_log import StepLogInterceptor
from lifecycle.settings import Settings


def interceptors_for(settings: Settings) -> Sequence[Interceptor]:
    # Outermost first: injected faults pass through the short-failure conversion like real ones, and every
    # attempt's lines (activities/step_log.py) say what reached Temporal.
    interceptors: list[Interceptor] = [StepLogInterceptor(), ShortFailuresInterceptor()]
    # An invalid rule raises here, at worker start, rather than when the activity first runs.
    if settings.fault_injection:
        interceptors.append(FaultInjectionInterceptor.from_spec(settings.fault_injection))
    return interceptors
