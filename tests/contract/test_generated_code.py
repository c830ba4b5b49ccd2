"""The committed Python code of the deletion contract is what `make proto` generates from proto/ now."""

from __future__ import annotations

from pathlib import Path

from devstack.proto_codegen import PROJECT_ROOT, compile_protos, proto_files


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
