"""CI's breaking-change check of the deletion contract: `buf breaking` (npm's @bufbuild/buf, installed by `make
install`) compares proto/ as it stands with every earlier committed version of it, and `buf lint` checks its style.

The rules are proto/buf.yaml's: WIRE_JSON, since the messages travel as JSON protobuf, plus no deleted package,
message, enum, service or rpc, since Temporal finds messages and activities by name. Every input is a local
folder, so buf needs no network.
"""

from __future__ import annotations

import io
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from devstack.proto_codegen import PROJECT_ROOT, PROTO_ROOT

BUF = PROJECT_ROOT / "node_modules/.bin/buf"
CONTRACT = Path("lifecycle/deletion/v1/service.proto")
TEST_PROTOS = Path(__file__).parent / "protos"
# A field number no version of the contract uses: the largest protobuf allows.
UNUSED_FIELD_NUMBER = 536_870_911


def buf(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    assert BUF.is_file(), "buf is missing: run `make install` (npm ci)"
    return subprocess.run([str(BUF), *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False)


def breaking(module: Path, against: Path) -> subprocess.CompletedProcess[str]:
    """`buf breaking` of the module folder `module` (with its buf.yaml) against the module folder `against`."""
    return buf("breaking", ".", "--against", str(against), "--error-format", "text", cwd=module)


def git(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", *args], cwd=PROJECT_ROOT, capture_output=True, check=True, timeout=60)


# What buf reads of a module; a commit that changed only proto/README.md leaves the contract as it was.
BUF_INPUTS = (b".proto", b"buf.yaml", b"buf.lock")


def committed_versions() -> list[str]:
    """One commit per distinct committed contract (buf's inputs under proto/), newest first; none in a clone
    without that history. Commits that left those files as they were add no check, so the test does not grow with
    every edit of the guide beside them."""
    versions: dict[bytes, str] = {}
    for sha in git("log", "--format=%H", "--", "proto/").stdout.decode().split():
        listing = git("ls-tree", "-r", sha, "proto/").stdout.splitlines()
        inputs = b"\n".join(line for line in listing if line.endswith(BUF_INPUTS))
        if inputs:
            versions.setdefault(inputs, sha)
    return list(versions.values())


def export_proto(sha: str, into: Path) -> Path:
    archive = git("archive", "--format=tar", sha, "proto").stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into / "proto"


def module_copy(proto: Path, into: Path, name: str = "lifecycle/deletion/v1/service.proto") -> Path:
    """A module folder holding proto/buf.yaml and one .proto file, at the contract's path by default."""
    (into / name).parent.mkdir(parents=True)
    shutil.copy(PROTO_ROOT / "buf.yaml", into / "buf.yaml")
    shutil.copy(proto, into / name)
    return into


def test_the_contract_passes_lint() -> None:
    result = buf("lint", cwd=PROTO_ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


def test_no_change_since_any_committed_version_breaks_the_contract(tmp_path: Path) -> None:
    """The working tree's proto/ against each committed one. A clone with no committed proto/ (or only the one the
    working tree still is) has nothing to break, and passes."""
    for sha in committed_versions():
        result = breaking(PROTO_ROOT, export_proto(sha, tmp_path / sha))
        assert result.returncode == 0, f"proto/ breaks the contract as committed in {sha[:12]}:\n{result.stdout}"


def test_a_renumbered_field_fails_the_check(tmp_path: Path) -> None:
    """The check can fail: the contract with its first field moved to another number is refused."""
    source = (PROTO_ROOT / CONTRACT).read_text()
    field = re.search(r"^\s+[\w.]+ (\w+) = (\d+);", source, re.MULTILINE)
    assert field is not None
    renumbered = source[: field.start(2)] + str(UNUSED_FIELD_NUMBER) + source[field.end(2) :]
    changed = module_copy(PROTO_ROOT / CONTRACT, tmp_path / "changed")
    (changed / CONTRACT).write_text(renumbered)
    result = breaking(changed, PROTO_ROOT)
    assert result.returncode != 0
    assert f'field "{field.group(2)}" with name "{field.group(1)}"' in result.stdout
    assert f'without reserving the number "{field.group(2)}"' in result.stdout


@pytest.mark.parametrize(
    ("change", "old", "new", "complaint"),
    [
        ("a renamed field", "string cursor = 3;", "string position = 3;", 'changed name from "cursor" to "position"'),
        ("a changed type", "uint32 max_rows = 4;", "string max_rows = 4;", 'changed type from "uint32" to "string"'),
        ("a renamed rpc", "rpc VerifySubjectErased(", "rpc VerifyErased(", 'RPC "VerifySubjectErased"'),
    ],
    ids=lambda value: value if " " in value else "",
)
def test_other_breaking_changes_fail_the_check(tmp_path: Path, change: str, old: str, new: str, complaint: str) -> None:
    source = (PROTO_ROOT / CONTRACT).read_text()
    assert old in source, f"{change}: the contract no longer has {old!r}"
    changed = module_copy(PROTO_ROOT / CONTRACT, tmp_path / "changed")
    (changed / CONTRACT).write_text(source.replace(old, new, 1))
    result = breaking(changed, PROTO_ROOT)
    assert result.returncode != 0 and complaint in result.stdout, result.stdout


def test_a_removed_field_passes_once_reserved(tmp_path: Path) -> None:
    """How a field is removed: its number and name reserved (proto/README.md)."""
    source = (PROTO_ROOT / CONTRACT).read_text()
    field = "uint32 max_duration_ms = 6;"
    assert field in source
    changed = module_copy(PROTO_ROOT / CONTRACT, tmp_path / "changed")
    (changed / CONTRACT).write_text(source.replace(field, 'reserved 6;\n  reserved "max_duration_ms";', 1))
    assert breaking(changed, PROTO_ROOT).returncode == 0


def test_the_compatibility_tests_versions_are_one_step_either_side(tmp_path: Path) -> None:
    """The older and newer contracts test_compatibility.py runs are what the check allows: the current contract is
    a compatible successor of the previous one, and the next one of the current one."""
    previous = module_copy(TEST_PROTOS / "previous/contract_previous.proto", tmp_path / "previous")
    following = module_copy(TEST_PROTOS / "next/contract_next.proto", tmp_path / "next")
    current = breaking(PROTO_ROOT, previous)
    assert current.returncode == 0, current.stdout
    newer = breaking(following, PROTO_ROOT)
    assert newer.returncode == 0, newer.stdout
