"""What the deploy drill works with: a second version of the code, the real `temporal` CLI, and each run's version."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from temporalio.api.enums.v1 import EventType, WorkflowTaskFailedCause
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowHandle

from tests.processes import PROJECT_ROOT
from tests.temporal_cli import TemporalCli
from workflows.registry import WORKFLOWS

# What `python worker.py` imports: a copy of these is a complete worker of another version.
WORKER_CODE = ("worker.py", "workflows", "activities", "lifecycle", "services")
# Every workflow's first command in v2: a timer v1 never issued, so a v1 history replayed on v2 code would fail
# with a non-determinism error (as tests/replay shows for such a timer).
V2_FIRST_COMMAND = "deploy drill: v2 code"
_V2_TIMER = f'        await workflow.sleep(0.01, summary="{V2_FIRST_COMMAND}")\n'
_RUN_SIGNATURE = re.compile(r"(    @workflow\.run\n    async def run\(self[^)]*\) -> [^\n]+:\n)")


def v2_code(root: Path) -> Path:
    """A copy of the worker's code whose every workflow starts with a timer: a non-deterministic change."""
    root.mkdir(parents=True, exist_ok=True)
    for name in WORKER_CODE:
        source = PROJECT_ROOT / name
        if source.is_dir():
            shutil.copytree(source, root / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, root / name)
    changed = 0
    for module in (root / "workflows").rglob("*.py"):
        text = module.read_text()
        edited, count = _RUN_SIGNATURE.subn(lambda match: match.group(1) + _V2_TIMER, text)
        module.write_text(edited)
        changed += count
    assert changed == len(WORKFLOWS), f"expected the {len(WORKFLOWS)} workflow types' run methods, changed {changed}"
    return root


def started_with_v2_timer(events: list[HistoryEvent]) -> bool:
    timers = [e for e in events if e.event_type == EventType.EVENT_TYPE_TIMER_STARTED]
    return bool(timers) and timers[0].user_metadata.summary.data.decode().strip('"') == V2_FIRST_COMMAND


async def run_version(handle: WorkflowHandle) -> str:
    """The build id the run is pinned to (or last ran on): what `temporal workflow describe` shows."""
    description = await handle.describe()
    info = description.raw_description.workflow_execution_info.versioning_info
    return str(info.deployment_version.build_id)


async def nondeterminism_failures(client: Client, deployment: str) -> list[str]:
    """Every run of the deployment whose history holds a workflow task failed for non-determinism."""
    failures = []
    async for execution in client.list_workflows(f'TemporalWorkerDeployment="{deployment}"'):
        handle = client.get_workflow_handle(execution.id, run_id=execution.run_id)
        async for event in handle.fetch_history_events():
            attributes = event.workflow_task_failed_event_attributes
            if (
                event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
                and attributes.cause == WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_NON_DETERMINISTIC_ERROR
            ):
                failures.append(f"{execution.id}/{execution.run_id}")
    return failures


class Deployments:
    """`temporal worker deployment ...` as an operator types it."""

    def __init__(self, cli: TemporalCli, name: str) -> None:
        self.cli = cli
        self.name = name
        # Why the last delete-version was refused.
        self.refusal = ""

    def current(self) -> str:
        """The current version's build id; empty until the deployment exists (its first workers poll)."""
        result = self.cli.run("worker", "deployment", "describe", "--name", self.name, "--output", "json", check=False)
        if result.returncode != 0:
            if "no Worker Deployment found" in result.stderr:
                return ""
            raise AssertionError(f"worker deployment describe failed ({result.returncode}): {result.stderr}")
        described = json.loads(result.stdout)
        return str((described.get("routingConfig") or {}).get("currentVersionBuildID", ""))

    def polls(self, build_id: str, queues: int) -> bool:
        """The version's workers poll `queues` task queues (set-current-version refuses one that does not)."""
        result = self.cli.run(
            "worker", "deployment", "describe-version", "--deployment-name", self.name, "--build-id", build_id,
            "--output", "json", check=False,
        )  # fmt: skip
        if result.returncode != 0:
            return False
        # One entry per queue and task type (workflow, activity).
        polled = {queue["name"] for queue in json.loads(result.stdout).get("taskQueuesInfos") or []}
        return len(polled) >= queues

    def set_current(self, build_id: str) -> None:
        self.cli.run(
            "worker", "deployment", "set-current-version", "--deployment-name", self.name, "--build-id", build_id,
            "--yes",
        )  # fmt: skip

    def ramp(self, build_id: str, percentage: int) -> None:
        self.cli.run(
            "worker", "deployment", "set-ramping-version", "--deployment-name", self.name, "--build-id", build_id,
            "--percentage", str(percentage), "--yes",
        )  # fmt: skip

    def open_runs(self, build_id: str) -> int:
        query = f'TemporalWorkerDeploymentVersion="{self.name}:{build_id}" AND ExecutionStatus="Running"'
        # The CLI prints {} for a count of zero.
        return int(self.cli.json("workflow", "count", "--query", query).get("count", 0))

    def delete(self, build_id: str) -> bool:
        """False while the server still counts the version's stopped workers as pollers."""
        result = self.cli.run(
            "worker", "deployment", "delete-version", "--deployment-name", self.name, "--build-id", build_id,
            # The drill checked that no run is open on the version; the server's drainage status lags that.
            "--skip-drainage", check=False,
        )  # fmt: skip
        self.refusal = result.stderr.strip()
        return result.returncode == 0

    def versions(self) -> list[str]:
        described = self.cli.json("worker", "deployment", "describe", "--name", self.name)
        return [str(summary.get("BuildID")) for summary in described.get("versionSummaries") or []]


def runbook(path: Path) -> dict[str, list[str]]:
    """The commands of each `### step` of the rollout runbook (docs/versioning.md), as written there."""
    text = path.read_text().split("## Rollout runbook", 1)[1].split("### With docker compose", 1)[0]
    steps: dict[str, list[str]] = {}
    for section in text.split("\n### ")[1:]:
        title, body = section.split("\n", 1)
        blocks = re.findall(r"```sh\n(.*?)```", body, re.DOTALL)
        steps[title.strip()] = [line for block in blocks for line in block.splitlines() if line.strip()]
    return steps
