"""The steps' log lines (activities/step_log.py), read back from a process's JSON output."""

from __future__ import annotations

import json
from typing import Any

OUTCOMES = ("started", "finished", "skipped", "failed")
IDS = ("workflow_id", "workflow_run_id", "activity_type", "activity_id", "attempt")


def step_lines(log: str, workflow_id: str) -> list[dict[str, Any]]:
    """The step lines of `workflow_id`'s runs, in the order written."""
    lines = []
    for text in log.splitlines():
        if not text.startswith("{"):
            continue
        try:
            line = json.loads(text)
        except ValueError:
            continue  # a span the console exporter prints over several lines
        if isinstance(line, dict) and line.get("outcome") in OUTCOMES and line.get("workflow_id") == workflow_id:
            lines.append(line)
    return lines


def skipped_step(log: str, workflow_id: str, activity_type: str) -> bool:
    return any(
        line["outcome"] == "skipped" and line["activity_type"] == activity_type for line in step_lines(log, workflow_id)
    )


def check_step_lines(log: str, workflow_id: str, *, skipped: set[str]) -> list[dict[str, Any]]:
    """Every attempt of every step of the run wrote `started`, then one of `finished`, `skipped` or `failed`, each
    line with the run's ids and the attempt; each step of `skipped` failed once (its answer lost, injected) and was
    then skipped, its work found done. The lines, for a closer look."""
    lines = step_lines(log, workflow_id)
    assert lines, f"no step line of {workflow_id}"
    attempts: dict[tuple[str, str, int], list[str]] = {}
    for line in lines:
        missing = [name for name in IDS if line.get(name) in (None, "")]
        assert not missing, f"{line} lacks {missing}"
        attempts.setdefault((line["workflow_run_id"], line["activity_id"], line["attempt"]), []).append(line["outcome"])
    unclosed = {key: outcomes for key, outcomes in attempts.items() if outcomes[0] != "started" or len(outcomes) != 2}
    assert not unclosed, f"attempts without one start and one end: {unclosed}"
    for step in skipped:
        ends = [(line["outcome"], line.get("error")) for line in lines if line["activity_type"] == step]
        assert ("failed", "InjectedFault") in ends and ("skipped", None) in ends, f"{step}: {ends}"
    return lines
