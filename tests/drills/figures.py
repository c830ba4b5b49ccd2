"""Drill measurements: printed for the test log and appended to a file the figures in docs/design.md come from."""

from __future__ import annotations

from datetime import UTC, datetime

from tests.processes import PROJECT_ROOT

FIGURES_FILE = PROJECT_ROOT / "test-artifacts" / "drill-figures.txt"


def record(name: str, seconds: float, note: str = "") -> None:
    _write(name, f"{seconds:.1f} s", note)


def record_count(name: str, count: int, note: str = "") -> None:
    """A figure that is a number of events (kills survived, emails sent), not a duration."""
    _write(name, f"{count}", note)


def _write(name: str, value: str, note: str) -> None:
    line = f"{datetime.now(UTC):%Y-%m-%dT%H:%M:%SZ} {name}: {value}" + (f" ({note})" if note else "")
    print(line)
    FIGURES_FILE.parent.mkdir(parents=True, exist_ok=True)
    with FIGURES_FILE.open("a") as figures:
        figures.write(line + "\n")
