"""A stand-in service built from another version of the deletion contract, run as a process of its own:
`python -m tests.contract.versioned_service ADDRESS TASK_QUEUE GENERATED_DIR MODULE [NAMESPACE]`; with a
namespace, it runs there and serves the contract's Nexus service on its queue too (reached through an endpoint).

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

import nexusrpc
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


def nexus_handler(delete: Any) -> Any:
    """The contract's Nexus service, named as the current contract names it (this process may not import that)."""

    @nexusrpc.handler.service_handler(name="lifecycle.deletion.v1.DeletionService")
    class DeletionService:
        # Untyped: the converter finds the message by the payload's messageType, of this process's version.
        @nexusrpc.handler.sync_operation(name="DeleteSubjectData")
        async def delete_subject_data(self, ctx: nexusrpc.handler.StartOperationContext, request: Any) -> Any:
            return await delete(request)

    return DeletionService()


async def serve(address: str, task_queue: str, contract: ModuleType, namespace: str) -> None:
    client = await Client.connect(address, namespace=namespace, data_converter=DATA_CONVERTER)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    delete = delete_subject_data(contract)
    async with Worker(
        client, task_queue=task_queue, activities=[delete], nexus_service_handlers=[nexus_handler(delete)]
    ):
        await stop.wait()


def main(address: str, task_queue: str, generated: str, module: str, namespace: str = "default") -> None:
    sys.path.insert(0, generated)
    asyncio.run(serve(address, task_queue, importlib.import_module(module), namespace))


if __name__ == "__main__":
    main(*sys.argv[1:])
