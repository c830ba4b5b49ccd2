"""The gateway reaches the project's own services only as it reaches any registered service, through the contract:
none of its code (the API, the workflows, the activities, what both share, the worker) imports services/."""

from __future__ import annotations

import ast
import re
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


def _gateway_modules() -> list[Path]:
    return [path for name in GATEWAY for path in _gateway_modules_of(name)]


def test_no_gateway_module_imports_the_services() -> None:
    modules = _gateway_modules()
    assert len(modules) > 50
    assert [str(path.relative_to(PROJECT_ROOT)) for path in modules if _imports_services(path)] == []


def test_no_service_is_named_where_a_deletion_is_decided() -> None:
    """Issue 29's grep: the API, the workflows and the worker name none of the project's services, so a service joins
    by registering alone."""
    from services.catalog import SERVICES

    names = re.compile(r"\b(" + "|".join(re.escape(service.name) for service in SERVICES) + r")\b", re.IGNORECASE)
    deciding = [path for name in ("api", "workflows", "worker.py") for path in _gateway_modules_of(name)]
    assert len(deciding) > 30
    named = [
        f"{path.relative_to(PROJECT_ROOT)}: {match}" for path in deciding for match in names.findall(path.read_text())
    ]
    assert named == []


def _gateway_modules_of(name: str) -> list[Path]:
    path = PROJECT_ROOT / name
    return [path] if path.is_file() else sorted(path.rglob("*.py"))
