"""The gateway reaches the project's own services only as it reaches any registered service, through the contract:
none of its code (the API, the workflows, the activities, what both share, the worker) imports services/."""

from __future__ import annotations

import ast
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
GATEWAY = ("api", "workflows", "activities", "lifecycle", "worker.py")


def _imports_services(path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "services":
            return True
        if isinstance(node, ast.Import) and any(alias.name.split(".")[0] == "services" for alias in node.names):
            return True
    return False


def _gateway_modules(root: Path) -> list[Path]:
    found: list[Path] = []
    for name in GATEWAY:
        path = root / name
        found += [path] if path.is_file() else sorted(path.rglob("*.py"))
    return found


def test_no_gateway_module_imports_the_services() -> None:
    modules = _gateway_modules(PROJECT_ROOT)
    assert len(modules) > 50
    assert [str(path.relative_to(PROJECT_ROOT)) for path in modules if _imports_services(path)] == []
