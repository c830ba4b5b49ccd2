"""The worker writes its workflow modules' bytecode, which the sandbox then loads for every new run."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

from worker import WORKFLOWS_DIR, ensure_workflow_bytecode


def test_every_workflow_module_gets_its_bytecode_even_with_dont_write_bytecode(tmp_path: Path) -> None:
    # The suite, like the image, runs with PYTHONDONTWRITEBYTECODE=1 (sys.dont_write_bytecode): imports alone
    # would leave no bytecode behind.
    copy = tmp_path / "workflows"
    shutil.copytree(WORKFLOWS_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    modules = sorted(copy.rglob("*.py"))
    assert modules
    assert not any(Path(importlib.util.cache_from_source(str(module))).exists() for module in modules)

    assert ensure_workflow_bytecode(copy)

    assert all(Path(importlib.util.cache_from_source(str(module))).exists() for module in modules)
