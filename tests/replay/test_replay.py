"""Replay every committed history against the current workflow code: a non-deterministic change fails here,
before it reaches the runs in flight. Re-record with `python -m devstack record-histories`."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections import Counter
from pathlib import Path

import pytest
from temporalio import workflow
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer, UnsandboxedWorkflowRunner

import workflows.sites.creation
from lifecycle.data_converter import DATA_CONVERTER
from lifecycle.workflow_runner import workflow_runner
from workflows.registry import WORKFLOWS

HISTORIES = Path(__file__).parent / "histories"
FILES = sorted(HISTORIES.glob("*.json"))


def _history(path: Path) -> WorkflowHistory:
    return WorkflowHistory.from_json(path.stem, json.loads(path.read_text()))


def test_every_workflow_type_has_at_least_two_histories() -> None:
    recorded = Counter(path.stem.split("-", 1)[0] for path in FILES)
    for cls in WORKFLOWS:
        # The SDK has no public accessor for a class's workflow name.
        name = str(workflow._Definition.must_from_class(cls).name)
        assert recorded[name] >= 2, f"{name}: {recorded[name]} histories; re-record them"


@pytest.mark.parametrize("path", FILES, ids=[path.stem for path in FILES])
async def test_history_replays(path: Path) -> None:
    await Replayer(
        workflows=WORKFLOWS, workflow_runner=workflow_runner(), data_converter=DATA_CONVERTER
    ).replay_workflow(_history(path))


def _changed_copy_of_site_creation() -> type:
    """The site creation module's source, with a timer slipped in before the first step, as a new module.

    The workflow keeps its name, so the replayer matches it to the recorded histories.
    """
    source = Path(workflows.sites.creation.__file__).read_text()
    anchor = "        site = SiteRef(input.site_id)\n"
    assert anchor in source, "the anchor moved: update this test's edit"
    changed = source.replace(anchor, anchor + "        await workflow.sleep(1)\n", 1)  # a new timer: a changed workflow
    name = "site_creation_changed_copy"
    spec = importlib.util.spec_from_loader(name, loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    # Dataclasses look their module up in sys.modules while the class body runs.
    sys.modules[name] = module
    try:
        exec(compile(changed, f"<{name}>", "exec"), module.__dict__)
    finally:
        del sys.modules[name]
    cls: type = module.SiteCreationWorkflow
    return cls


async def test_replay_catches_a_non_deterministic_change() -> None:
    changed = _changed_copy_of_site_creation()
    # The copy exists in memory only, so the sandbox (which re-imports modules by name) cannot load it.
    replayer = Replayer(workflows=[changed], workflow_runner=UnsandboxedWorkflowRunner(), data_converter=DATA_CONVERTER)
    with pytest.raises(workflow.NondeterminismError):
        await replayer.replay_workflow(_history(HISTORIES / "SiteCreationWorkflow-happy.json"))
