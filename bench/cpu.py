"""CPU time spent by each part of a bench's stack between two readings: where a burst's work went."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass

import psutil

# Linux's accounting of one core's busy time, as psutil names the fields.
_BUSY_FIELDS = ("user", "nice", "system", "irq", "softirq", "steal")


def _own_and_children(process: psutil.Process) -> float:
    """The process's CPU, its live children's, and that of the children it already reaped (a PostgreSQL
    backend that served one site and exited is counted through its postmaster)."""
    total = 0.0
    with contextlib.suppress(psutil.Error):
        times = process.cpu_times()
        total += times.user + times.system + times.children_user + times.children_system
        for child in process.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                child_times = child.cpu_times()
                total += child_times.user + child_times.system
    return total


def machine_busy_seconds() -> float:
    times = psutil.cpu_times()
    return sum(getattr(times, field, 0.0) for field in _BUSY_FIELDS)


@dataclass
class CpuReading:
    by_part: dict[str, float]
    machine: float


class StackCpu:
    """Reads CPU seconds per named part (a process and its children) and for the whole machine."""

    def __init__(self, parts: dict[str, Callable[[], psutil.Process | None]]) -> None:
        self._parts = parts

    def read(self) -> CpuReading:
        by_part = {}
        for name, find in self._parts.items():
            process = find()
            by_part[name] = _own_and_children(process) if process is not None else 0.0
        return CpuReading(by_part, machine_busy_seconds())

    @staticmethod
    def spent(before: CpuReading, after: CpuReading) -> CpuReading:
        return CpuReading(
            {name: after.by_part[name] - before.by_part.get(name, 0.0) for name in after.by_part},
            after.machine - before.machine,
        )


def temporal_dev_server() -> psutil.Process | None:
    """The dev server the SDK started for this process (WorkflowEnvironment.start_local): a child binary."""
    for child in psutil.Process(os.getpid()).children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if "temporal" in child.name() and "server" in " ".join(child.cmdline()):
                return child
    return None
