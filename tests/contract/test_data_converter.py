"""The project's data converter: protobuf JSON read leniently, everything else exactly as the SDK's default.

The round trips through a real Temporal server are in test_compatibility.py; these pin the converter itself.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.converter import DataConverter

from lifecycle.data_converter import DATA_CONVERTER
from lifecycle.deletion.v1.service_pb2 import DeleteResponse

PROJECT_CODE = ("lifecycle", "workflows", "activities", "api", "devstack", "bench", "examples", "tests", "worker.py")


def newer_delete_response() -> Payload:
    """A DeleteResponse as a newer service sends it: with a field this code's contract does not have."""
    fields = {"rowsDeleted": "7", "cursor": "after-7", "done": True, "bytesFreed": "4096"}
    return Payload(
        metadata={"encoding": b"json/protobuf", "messageType": b"lifecycle.deletion.v1.DeleteResponse"},
        data=json.dumps(fields).encode(),
    )


def test_a_field_it_does_not_know_is_ignored() -> None:
    [response] = DATA_CONVERTER.payload_converter.from_payloads([newer_delete_response()], [DeleteResponse])
    assert response == DeleteResponse(rows_deleted=7, cursor="after-7", done=True)


def test_the_sdk_default_refuses_it() -> None:
    """Why the project has a converter of its own."""
    with pytest.raises(RuntimeError, match="could not be converted") as refused:
        DataConverter.default.payload_converter.from_payloads([newer_delete_response()], [DeleteResponse])
    parsing = refused.value.__cause__
    assert parsing is not None
    assert 'no field named "bytesFreed"' in str(parsing.__cause__)


@dataclass(frozen=True)
class Sample:
    name: str
    count: int


@pytest.mark.parametrize(
    "value",
    [None, b"raw", "text", 3, {"a": [1, 2]}, Sample("x", 1), DeleteResponse(rows_deleted=5, files_deleted=2)],
    ids=repr,
)
def test_every_value_is_encoded_as_the_sdk_default_encodes_it(value: object) -> None:
    """So histories recorded with the default converter (tests/replay) replay unchanged."""
    ours = DATA_CONVERTER.payload_converter.to_payloads([value])
    default = DataConverter.default.payload_converter.to_payloads([value])
    assert ours == default


def _builds_a_client_without_the_converter(call: ast.Call) -> bool:
    func = call.func
    builds = (
        (isinstance(func, ast.Attribute) and func.attr in {"connect", "start_local", "start_time_skipping"})
        and isinstance(func.value, ast.Name)
        and func.value.id in {"Client", "WorkflowEnvironment"}
    ) or (isinstance(func, ast.Name) and func.id in {"Client", "Replayer"})
    return builds and not any(keyword.arg == "data_converter" for keyword in call.keywords)


def test_every_client_environment_and_replayer_uses_it(project_root: Path) -> None:
    """Workers take their client's converter, so every Client.connect, dev or test server, and Replayer the
    project builds names DATA_CONVERTER (or, for a Client built by hand, an existing client's converter)."""
    missing = []
    for entry in PROJECT_CODE:
        path = project_root / entry
        for file in [path] if path.is_file() else sorted(path.rglob("*.py")):
            for node in ast.walk(ast.parse(file.read_text())):
                if isinstance(node, ast.Call) and _builds_a_client_without_the_converter(node):
                    missing.append(f"{file.relative_to(project_root)}:{node.lineno}")
    assert not missing
