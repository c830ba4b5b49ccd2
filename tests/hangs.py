"""When a test hits pytest-timeout, print what every asyncio task of the loop awaits before it fails.

pytest-timeout prints the threads' stacks only, and in this suite every test and fixture shares one event loop on
the main thread: its stack shows the selector and nothing of the coroutine that hangs.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from types import FrameType
from typing import Any

import pytest
import pytest_timeout


def _print_tasks() -> None:
    try:
        tasks = asyncio.all_tasks(asyncio.get_running_loop())
    except RuntimeError:
        return  # the timeout came outside the loop: the threads' stacks tell it all
    print(f"\n{'+' * 35} asyncio tasks {'+' * 35}", file=sys.stderr)
    for task in tasks:
        task.print_stack(file=sys.stderr)


@pytest.hookimpl(tryfirst=True)
def pytest_timeout_set_timer(item: pytest.Item, settings: Any) -> bool | None:
    if settings.method != "signal":
        return None

    def on_timeout(signum: int, frame: FrameType | None) -> None:
        __tracebackhide__ = True
        _print_tasks()
        pytest_timeout.timeout_sigalrm(item, settings)

    def cancel() -> None:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)

    item.cancel_timeout = cancel  # type: ignore[attr-defined]
    signal.signal(signal.SIGALRM, on_timeout)
    signal.setitimer(signal.ITIMER_REAL, settings.timeout)
    return True
