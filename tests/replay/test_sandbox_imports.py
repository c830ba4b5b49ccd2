"""What the sandbox imports afresh for each run: the run's own workflow module and its packages, nothing else.

Every other module of the project a workflow uses is passed through (`workflow.unsafe.imports_passed_through`). A
module imported as `from workflows import activity_presets` from inside a workflow package is not: the sandbox
decides on passing through by the name given to `import`, here the package `workflows`, which each run imports
afresh; Python then loads the submodule from the package by itself, and every run executed it again. The account
deletion's runs, which also imported three other workflows' modules outside the passed-through block, spent about
34 ms of CPU each in making the run's instance, against about 17 ms with every import passed through.
"""

from __future__ import annotations

import importlib._bootstrap
import json
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from temporalio import workflow
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from lifecycle.data_converter import DATA_CONVERTER
from lifecycle.workflow_runner import workflow_runner
from workflows.registry import WORKFLOWS

HISTORIES = Path(__file__).parent / "histories"


def _one_history_per_type() -> dict[type, Path]:
    by_name = {str(workflow._Definition.must_from_class(cls).name): cls for cls in WORKFLOWS}
    found: dict[type, Path] = {}
    for path in sorted(HISTORIES.glob("*.json")):
        found.setdefault(by_name[path.stem.split("-", 1)[0]], path)
    return found


CASES = _one_history_per_type()


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[str]]:
    """Each module Python loads from its file (rather than finds already loaded), counted by name."""
    loaded: Counter[str] = Counter()
    real = importlib._bootstrap._load_unlocked  # type: ignore[attr-defined]

    def counting(spec: Any) -> Any:
        loaded[spec.name] += 1
        return real(spec)

    monkeypatch.setattr(importlib._bootstrap, "_load_unlocked", counting)
    yield loaded


async def _replay(history: WorkflowHistory, runs: int) -> None:
    async def copies() -> AsyncIterator[WorkflowHistory]:
        for i in range(runs):
            yield WorkflowHistory(f"{history.workflow_id}-{i}", history.events)

    replayer = Replayer(workflows=WORKFLOWS, workflow_runner=workflow_runner(), data_converter=DATA_CONVERTER)
    await replayer.replay_workflows(copies())


@pytest.mark.parametrize("cls", list(CASES), ids=[cls.__name__ for cls in CASES])
async def test_a_run_imports_only_its_own_workflow_module_afresh(cls: type, loads: Counter[str]) -> None:
    history = WorkflowHistory.from_json("imports", json.loads(CASES[cls].read_text()))
    # A replayer's start imports every workflow in the sandbox once, to check it; the runs after it are compared.
    await _replay(history, 1)
    one_run = Counter(loads)
    loads.clear()
    await _replay(history, 3)
    per_run = {name: (count - one_run[name]) / 2 for name, count in loads.items() if count != one_run[name]}
    module = cls.__module__
    own = {".".join(module.split(".")[:depth]) for depth in range(1, module.count(".") + 2)}
    assert per_run == dict.fromkeys(own, 1.0)
