"""The build id a worker reports: a hash of the project modules the workflow code imports, nothing else."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lifecycle.settings import Settings
from lifecycle.worker_deployment import code_build_id, deployment_version, workflow_modules
from tests.processes import PROJECT_ROOT

# The packages the image ships (Dockerfile): a copy of them is a checkout as the worker sees it.
APP_PACKAGES = ("workflows", "activities", "lifecycle", "api")

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
        "activities/deletion/deleters.py",  # read by a workflow: BotDeletion iterates its DELETION_SERVICES
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
        "api/accounts/keys.py",  # shared code no workflow imports
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
