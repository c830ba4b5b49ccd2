"""The committed code of the deletion contract, Python and the TypeScript example's, is what `make proto`
generates from proto/ now."""

from __future__ import annotations

import subprocess
from pathlib import Path

from devstack.proto_codegen import PROJECT_ROOT, compile_protos, proto_files

BUF = PROJECT_ROOT / "node_modules/.bin/buf"
# protoc-gen-es's template, and the folder it writes (relative to the project's root).
TYPESCRIPT_TEMPLATE = Path("examples/search_index_ts/buf.gen.yaml")
TYPESCRIPT_GENERATED = Path("examples/search_index_ts/src/gen")


def test_committed_code_is_generated_from_the_current_proto(tmp_path: Path) -> None:
    assert proto_files(), "no .proto under proto/"
    for generated in compile_protos(tmp_path):
        committed = PROJECT_ROOT / generated.relative_to(tmp_path)
        assert committed.is_file(), f"{committed.relative_to(PROJECT_ROOT)} is missing: run `make proto`"
        assert committed.read_text() == generated.read_text(), (
            f"{committed.relative_to(PROJECT_ROOT)} differs from what proto/ generates: run `make proto`"
        )


def test_no_generated_module_outlives_its_proto(tmp_path: Path) -> None:
    expected = {path.relative_to(tmp_path) for path in compile_protos(tmp_path)}
    committed = {
        path.relative_to(PROJECT_ROOT)
        for pattern in ("*_pb2.py", "*_pb2.pyi")
        for path in (PROJECT_ROOT / "lifecycle").rglob(pattern)
    }
    assert committed == expected


def files_under(root: Path) -> dict[Path, str]:
    return {path.relative_to(root): path.read_text() for path in root.rglob("*") if path.is_file()}


def test_committed_typescript_code_is_generated_from_the_current_proto(tmp_path: Path) -> None:
    assert BUF.is_file(), "buf is missing: run `make install` (npm ci)"
    generate = [str(BUF), "generate", "proto", "--template", str(TYPESCRIPT_TEMPLATE), "-o", str(tmp_path)]
    subprocess.run(generate, cwd=PROJECT_ROOT, check=True, capture_output=True, timeout=120)
    generated = files_under(tmp_path / TYPESCRIPT_GENERATED)
    assert generated, "protoc-gen-es wrote nothing"
    assert files_under(PROJECT_ROOT / TYPESCRIPT_GENERATED) == generated, (
        f"{TYPESCRIPT_GENERATED} differs from what proto/ generates: run `make proto`"
    )
