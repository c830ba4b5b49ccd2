"""Drill measurements: printed for the test log and appended to a file the README's figures come from."""

from __future__ import annotations

from datetime import UTC, datetime

from tests.processes import PROJECT_ROOT

FIGURES_FILE = PROJECT_ROOT / "test-artifacts" / "drill-figures.txt"


def record(name: str, seconds: float, note: str = "") -> None:
    line = f"{datetime.now(UTC):%Y-%m-%dT%H:%M:%SZ} {name}: {seconds:.1f} s" + (f" ({note})" if note else "")
    print(line)
    FIGURES_FILE.parent.mkdir(parents=True, exist_ok=True)
    with FIGURES_FILE.open("a") as figures:
        figures.write(line + "\n")
