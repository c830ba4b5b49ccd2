"""The build id a worker reports (a hash of the project modules the workflow code imports, nothing else), and
how soon a new version is made current."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from temporalio.api.workflowservice.v1 import DescribeWorkerDeploymentRequest
from temporalio.client import Client
from temporalio.common import WorkerDeploymentVersion
from temporalio.worker import Worker

from lifecycle.settings import Settings
from lifecycle.worker_deployment import (
    code_build_id,
    deployment_config,
    deployment_version,
    make_current,
    source_build_id,
    workflow_modules,
)
from lifecycle.workflow_runner import workflow_runner
from tests.eventually import eventually
from tests.processes import PROJECT_ROOT
from workflows.registry import WORKFLOWS

# The packages the image ships (Dockerfile): a copy of them is a checkout as the worker sees it.
APP_PACKAGES = ("workflows", "activities", "lifecycle", "api", "services")

# What Python itself loads from the project when it imports every workflow module: the truth the build id's
# reading of import statements must match.
_IMPORTED = """
import json, pkgutil, sys, importlib
from pathlib import Path
import workflows
for module in pkgutil.walk_packages(workflows.__path__, "workflows."):
    importlib.import_module(module.name)
root = Path.cwd().resolve()
files = {Path(m.__file__).resolve() for m in list(sys.modules.values()) if getattr(m, "__file__", None)}
print(json.dumps(sorted(str(f.relative_to(root)) for f in files if f.is_relative_to(root))))
"""


def _checkout(root: Path) -> Path:
    for name in APP_PACKAGES:
        shutil.copytree(PROJECT_ROOT / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def _edit(root: Path, module: str) -> None:
    path = root / module
    path.write_text(path.read_text() + "\n# changed\n")


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _checkout(tmp_path_factory.mktemp("checkout"))


def test_the_same_code_gives_the_same_build_id(tmp_path: Path) -> None:
    assert code_build_id(_checkout(tmp_path / "a")) == code_build_id(_checkout(tmp_path / "b")) == code_build_id()


def test_an_unversioned_workers_build_id_follows_its_sources(tmp_path: Path) -> None:
    """A service's worker names its code by its sources, wherever they are, not by the SDK's hash of every loaded
    module."""
    copy = _checkout(tmp_path / "a") / "services"
    assert source_build_id(copy) == source_build_id(PROJECT_ROOT / "services")
    changed = _checkout(tmp_path / "b") / "services"
    _edit(changed.parent, "services/chat/__init__.py")
    assert source_build_id(changed) != source_build_id(copy)


def test_the_hashed_modules_are_exactly_those_importing_the_workflows_loads(checkout: Path) -> None:
    loaded = subprocess.run(
        [sys.executable, "-c", _IMPORTED],
        cwd=checkout,
        env={**os.environ, "PYTHONPATH": str(checkout)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert sorted(str(path.relative_to(checkout)) for path in workflow_modules(checkout)) == json.loads(loaded.stdout)


@pytest.mark.parametrize(
    "module",
    [
        "workflows/sites/deletion.py",  # a workflow
        "activities/deletion/services.py",  # read by a workflow: the budget share BotDeletion sends services
        "activities/sites/wordpress_schema.py",  # imported by an activity module a workflow imports
        "lifecycle/db/models.py",  # imported only through activity modules
        "activities/__init__.py",  # run by importing any activity module
    ],
)
def test_a_change_to_a_module_the_workflows_import_gives_a_new_build_id(tmp_path: Path, module: str) -> None:
    root = _checkout(tmp_path)
    before = code_build_id(root)
    _edit(root, module)
    assert code_build_id(root) != before


@pytest.mark.parametrize(
    "module",
    [
        "api/app.py",
        "lifecycle/migrate.py",  # shared code no workflow imports
        "lifecycle/worker_deployment.py",
        "activities/registry.py",  # the worker's activity list, not the workflows'
    ],
)
def test_a_change_to_a_module_no_workflow_imports_keeps_the_build_id(tmp_path: Path, module: str) -> None:
    root = _checkout(tmp_path)
    before = code_build_id(root)
    _edit(root, module)
    assert code_build_id(root) == before


def test_the_image_holds_every_module_of_the_build_id() -> None:
    # The image computes the build id at start from its own files: one left out would hash to another id.
    copied = set(re.findall(r"^COPY (\S+)", (PROJECT_ROOT / "Dockerfile").read_text(), re.MULTILINE))
    assert {path.relative_to(PROJECT_ROOT).parts[0] for path in workflow_modules()} <= copied


def test_the_command_prints_the_build_id() -> None:
    printed = subprocess.run(
        [sys.executable, "-m", "lifecycle.worker_deployment"],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert printed.stdout.strip() == code_build_id()


def test_the_deployment_is_named_after_the_task_queue_unless_set() -> None:
    assert deployment_version(Settings(task_queue="q1")).deployment_name == "q1"
    named = deployment_version(Settings(task_queue="q1", worker_deployment="lifecycle", worker_build_id="rev42"))
    assert (named.deployment_name, named.build_id) == ("lifecycle", "rev42")


def _retry_waits(caplog: pytest.LogCaptureFixture) -> list[float]:
    """The waits make_current logged before each retry."""
    found = (re.search(r"retrying in ([0-9.]+) s", record.getMessage()) for record in caplog.records)
    return [float(match[1]) for match in found if match]


async def test_a_new_version_is_made_current_moments_after_its_worker_first_polls(
    temporal_client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    """The server knows a version only once a worker of it has polled, which happens moments after the worker
    starts: make_current asks again after 50 ms, then twice as long each time up to a second, rather than a
    second each time (most test workers waited that second before their version was current)."""
    queue = f"current-{uuid.uuid4().hex[:8]}"
    version = WorkerDeploymentVersion(queue, "v1")
    with caplog.at_level(logging.INFO, logger="worker"):
        promoting = asyncio.create_task(make_current(temporal_client, version))
        # No worker of the version polls yet: the server refuses it, and make_current keeps asking.
        await eventually(lambda: len(_retry_waits(caplog)) >= 6, "make_current retried six times", within=30)
        versioned = deployment_config(version)
        async with Worker(
            temporal_client,
            task_queue=queue,
            workflows=WORKFLOWS,
            workflow_runner=workflow_runner(),
            deployment_config=versioned,
        ):
            await asyncio.wait_for(promoting, 60)
    assert _retry_waits(caplog)[:6] == [0.05, 0.1, 0.2, 0.4, 0.8, 1.0]
    described = await temporal_client.workflow_service.describe_worker_deployment(
        DescribeWorkerDeploymentRequest(namespace=temporal_client.namespace, deployment_name=queue)
    )
    assert described.worker_deployment_info.routing_config.current_deployment_version.build_id == "v1"
