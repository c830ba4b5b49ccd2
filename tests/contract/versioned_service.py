"""A stand-in service built from another version of the deletion contract, run as a process of its own:
`python -m tests.contract.versioned_service ADDRESS TASK_QUEUE GENERATED_DIR MODULE`.

GENERATED_DIR holds MODULE, the Python code protoc generated from that version's .proto (test_compatibility.py
compiles tests/contract/protos/previous or next). A process of its own because one Python process holds one
definition of `lifecycle.deletion.v1.DeleteResponse`, as one deployed service does. It reads and writes messages
with the project's data converter, as a Python service of the project does, and never imports the current contract.

Its DeleteSubjectData deletes nothing: it echoes what it read of the request, so the test sees the request arrived,
and fills every response field its version has.
"""

from __future__ import annotations

import asyncio
import importlib
import signal
import sys
from types import ModuleType
from typing import Any

from temporalio import activity
from temporalio.client import Client
from temporalio.worker import Worker

from lifecycle.data_converter import DATA_CONVERTER

# What the stand-in reports for a field, when its version of DeleteResponse has that field.
MEASURED_ROWS_PER_SECOND = 250.0
BYTES_FREED = 4096


def delete_subject_data(contract: ModuleType) -> Any:
    @activity.defn(name="DeleteSubjectData")
    async def delete(request: Any) -> Any:
        fields = contract.DeleteResponse.DESCRIPTOR.fields_by_name
        response = contract.DeleteResponse(
            rows_deleted=request.max_rows,
            cursor=f"{request.deletion_id}/{request.subject.id}/{request.cursor}",
            done=True,
        )
        if "measured_rows_per_second" in fields:
            response.measured_rows_per_second = MEASURED_ROWS_PER_SECOND
        if "bytes_freed" in fields:
            response.bytes_freed = BYTES_FREED
        return response

    return delete


async def serve(address: str, task_queue: str, contract: ModuleType) -> None:
    client = await Client.connect(address, data_converter=DATA_CONVERTER)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    async with Worker(client, task_queue=task_queue, activities=[delete_subject_data(contract)]):
        await stop.wait()


def main(address: str, task_queue: str, generated: str, module: str) -> None:
    sys.path.insert(0, generated)
    asyncio.run(serve(address, task_queue, importlib.import_module(module)))


if __name__ == "__main__":
    main(*sys.argv[1:])
