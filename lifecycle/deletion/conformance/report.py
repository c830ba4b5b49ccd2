"""The kit's report: one line per check, its outcome and the figure it rests on, for a person to read."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum


class Outcome(StrEnum):
    PASS = "pass"
    FAIL = "FAIL"
    # A promise the kit cannot check from outside the service.
    SKIP = "skip"


@dataclass(frozen=True)
class Result:
    check: str
    outcome: Outcome
    figure: str


def passed(check: str, figure: str) -> Result:
    return Result(check, Outcome.PASS, figure)


def failed(check: str, figure: str) -> Result:
    return Result(check, Outcome.FAIL, figure)


def judged(check: str, ok: bool, figure: str) -> Result:
    return Result(check, Outcome.PASS if ok else Outcome.FAIL, figure)


def skipped(check: str, why: str) -> Result:
    return Result(check, Outcome.SKIP, why)


def line(result: Result) -> str:
    return f"{result.outcome:<4}  {result.check:<16}  {result.figure}"


def summary(results: Sequence[Result]) -> str:
    count = {outcome: sum(1 for result in results if result.outcome == outcome) for outcome in Outcome}
    return (
        f"{len(results)} checks: {count[Outcome.PASS]} passed, {count[Outcome.FAIL]} failed,"
        f" {count[Outcome.SKIP]} not checkable from outside"
    )


def any_failed(results: Sequence[Result]) -> bool:
    return any(result.outcome == Outcome.FAIL for result in results)
