from __future__ import annotations

import pytest

from activities.fault_injection import FaultInjectionInterceptor, FaultRule, FaultSpecError, parse_fault_spec
from activities.interceptors import interceptors_for
from activities.short_failures import ShortFailuresInterceptor
from lifecycle.settings import Settings


def test_rules_parse() -> None:
    rules = parse_fault_spec("bootstrap_site=permanent, create_site_database=transient:3")
    assert rules == {
        "bootstrap_site": FaultRule("bootstrap_site", None),
        "create_site_database": FaultRule("create_site_database", 3),
    }


@pytest.mark.parametrize(
    "spec",
    ["bootstrap_site", "x=sometimes", "x=transient:", "x=transient:-1", ",", "a=permanent,a=permanent"],
)
def test_invalid_rules_fail_at_worker_start(spec: str) -> None:
    with pytest.raises(FaultSpecError):
        interceptors_for(Settings(fault_injection=spec))


def test_no_variable_no_fault_interceptor() -> None:
    without = interceptors_for(Settings(fault_injection=None))
    assert not any(isinstance(interceptor, FaultInjectionInterceptor) for interceptor in without)
    assert isinstance(without[-1], ShortFailuresInterceptor)
    *_, faults = interceptors_for(Settings(fault_injection="bootstrap_site=permanent"))
    assert isinstance(faults, FaultInjectionInterceptor)
