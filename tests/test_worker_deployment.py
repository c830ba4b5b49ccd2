"""The build id a worker reports: a hash of the code the workflow sandbox runs, nothing else."""

from __future__ import annotations

import shutil
from pathlib import Path

from lifecycle.settings import Settings
from lifecycle.worker_deployment import WORKFLOW_SOURCES, code_build_id, deployment_version
from tests.processes import PROJECT_ROOT


def _checkout(root: Path) -> Path:
    for name in (*WORKFLOW_SOURCES, "activities"):
        shutil.copytree(PROJECT_ROOT / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def test_the_same_code_gives_the_same_build_id(tmp_path: Path) -> None:
    assert code_build_id(_checkout(tmp_path / "a")) == code_build_id(_checkout(tmp_path / "b")) == code_build_id()


def test_a_workflow_change_gives_a_new_build_id_and_an_activity_change_does_not(tmp_path: Path) -> None:
    root = _checkout(tmp_path)
    before = code_build_id(root)
    (root / "activities" / "sites.py").write_text((root / "activities" / "sites.py").read_text() + "\n# changed\n")
    assert code_build_id(root) == before
    workflow = root / "workflows" / "site_deletion.py"
    workflow.write_text(workflow.read_text() + "\n# changed\n")
    assert code_build_id(root) != before


def test_the_deployment_is_named_after_the_task_queue_unless_set() -> None:
    assert deployment_version(Settings(task_queue="q1")).deployment_name == "q1"
    named = deployment_version(Settings(task_queue="q1", worker_deployment="lifecycle", worker_build_id="rev42"))
    assert (named.deployment_name, named.build_id) == ("lifecycle", "rev42")
