"""Worker-side fault injection for drills and tests: named activities fail before they run.

`FAULT_INJECTION="bootstrap_site=permanent,create_site_database=transient:3"`:
- `permanent`: every attempt fails with a non-retryable error;
- `transient:N`: the first N attempts fail with a retryable error, later ones run normally;
- `delay:S` or `delay:S:N`: every attempt (or the first N) works S seconds longer, heartbeating meanwhile,
  so that a drill's kill lands inside the step; a local first try (workflows/sites/first_try.py) fails at once
  instead, so that the run waits in the step's regular activity, where an operator and a drill can reach it;
- `lose:N`: the first N attempts run to the end, then fail with a retryable error, as if their answer had been
  lost on the way (a worker gone after its work committed): what they did stands, and the caller tries again.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
)

from activities.heartbeat import heartbeating

_RULE = re.compile(
    r"^(?P<activity>[A-Za-z_][A-Za-z0-9_]*)="
    r"(?:permanent|transient:(?P<count>[0-9]+)|lose:(?P<lost>[0-9]+)"
    r"|delay:(?P<seconds>[0-9]+(?:\.[0-9]+)?)(?::(?P<delayed>[0-9]+))?)$"
)


class FaultSpecError(ValueError):
    pass


@dataclass(frozen=True)
class FaultRule:
    activity: str
    # None means every attempt fails, without retries.
    failing_attempts: int | None
    # A `delay` rule: extra seconds of work, on every attempt (delayed_attempts None) or the first N.
    delay_seconds: float = 0.0
    delayed_attempts: int | None = None
    # A `lose` rule: the first N attempts run, then their answer is dropped.
    lost_attempts: int = 0

    async def apply(self, attempt: int, local: bool) -> None:
        if self.lost_attempts:
            return  # lose_answer, after the activity ran
        if self.delay_seconds:
            if local:
                raise ApplicationError(f"injected: {self.activity} is delayed, not run locally", type="InjectedFault")
            if self.delayed_attempts is None or attempt <= self.delayed_attempts:
                async with heartbeating():
                    await asyncio.sleep(self.delay_seconds)
            return
        self.check(attempt)

    def lose_answer(self, attempt: int) -> None:
        if attempt <= self.lost_attempts:
            raise ApplicationError(
                f"injected lost answer of {self.activity} (attempt {attempt} of {self.lost_attempts})",
                type="InjectedFault",
            )

    def check(self, attempt: int) -> None:
        if self.failing_attempts is None:
            raise ApplicationError(
                f"injected permanent fault in {self.activity}", type="InjectedFault", non_retryable=True
            )
        if attempt <= self.failing_attempts:
            raise ApplicationError(
                f"injected transient fault in {self.activity} (attempt {attempt} of {self.failing_attempts})",
                type="InjectedFault",
            )


def parse_fault_spec(spec: str) -> dict[str, FaultRule]:
    rules: dict[str, FaultRule] = {}
    for part in spec.split(","):
        text = part.strip()
        if not text:
            continue
        match = _RULE.match(text)
        if match is None:
            raise FaultSpecError(
                f"invalid FAULT_INJECTION rule {text!r}: expected `<activity>=permanent`, "
                "`<activity>=transient:<attempts>`, `<activity>=lose:<attempts>` or"
                " `<activity>=delay:<seconds>[:<attempts>]`, comma-separated"
            )
        name = match["activity"]
        if name in rules:
            raise FaultSpecError(f"FAULT_INJECTION names {name!r} twice")
        count, seconds, delayed = match["count"], match["seconds"], match["delayed"]
        if match["lost"] is not None:
            rules[name] = FaultRule(name, 0, lost_attempts=int(match["lost"]))
        elif seconds is not None:
            rules[name] = FaultRule(name, 0, float(seconds), None if delayed is None else int(delayed))
        else:
            rules[name] = FaultRule(name, None if count is None else int(count))
    if not rules:
        raise FaultSpecError("FAULT_INJECTION is set but holds no rule")
    return rules


class FaultInjectionInterceptor(Interceptor):
    def __init__(self, rules: dict[str, FaultRule]) -> None:
        self.rules = rules

    @classmethod
    def from_spec(cls, spec: str) -> FaultInjectionInterceptor:
        return cls(parse_fault_spec(spec))

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _FaultyActivities(next, self.rules)


class _FaultyActivities(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, rules: dict[str, FaultRule]) -> None:
        super().__init__(next)
        self._rules = rules

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        info = activity.info()
        rule = self._rules.get(info.activity_type)
        if rule is not None:
            await rule.apply(info.attempt, info.is_local)
        result = await super().execute_activity(input)
        if rule is not None:
            rule.lose_answer(info.attempt)
        return result
