"""The activity presets are the only activity options in the workflows, and each is a valid set of SDK options."""

from __future__ import annotations

import re
import typing
from pathlib import Path

import pytest
from temporalio import workflow

from workflows import activity_presets
from workflows.activity_presets import ActivityPreset, LocalActivityPreset

WORKFLOWS = Path(activity_presets.__file__).parent
OPTION = re.compile(
    r"\b(schedule_to_start_timeout|start_to_close_timeout|schedule_to_close_timeout|heartbeat_timeout|retry_policy)\s*="
)


@pytest.mark.parametrize(
    ("preset", "sdk"),
    [(ActivityPreset, workflow.ActivityConfig), (LocalActivityPreset, workflow.LocalActivityConfig)],
)
def test_a_preset_holds_sdk_options_only(preset: type, sdk: type) -> None:
    ours, theirs = typing.get_type_hints(preset), typing.get_type_hints(sdk)
    for key, hint in ours.items():
        assert key in theirs, f"{key} is not an option of {sdk.__name__}"
        assert hint == theirs[key] or hint in typing.get_args(theirs[key]), (key, hint, theirs[key])


def test_only_the_presets_module_sets_activity_options() -> None:
    setting = [
        f"{path.name}: {match.group(0)}"
        for path in sorted(WORKFLOWS.rglob("*.py"))
        if path.name != "activity_presets.py"
        for match in OPTION.finditer(path.read_text())
    ]
    assert setting == [], "use a preset of workflows/activity_presets.py"
