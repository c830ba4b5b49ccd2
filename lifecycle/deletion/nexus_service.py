"""The deletion contract as a Nexus service: `lifecycle.deletion.v1.DeletionService`, its operations named after the
rpcs and taking and returning the same protobuf messages (proto/README.md). The gateway calls it through an endpoint
(workflows/deletion/service_transport.py); a Python service serves it with lifecycle/deletion/nexus_handler.py.
"""

from __future__ import annotations

from typing import Any

import nexusrpc

from lifecycle.deletion.registry import DELETE_SUBJECT_DATA, EXPORT_SUBJECT_DATA, VERIFY_SUBJECT_ERASED
from lifecycle.deletion.v1 import service_pb2
from lifecycle.deletion.v1.service_pb2 import (
    DeleteRequest,
    DeleteResponse,
    ExportRequest,
    ExportResponse,
    VerifyRequest,
    VerifyResponse,
)

# The protobuf service's full name: what a handler in any language names its service.
NEXUS_SERVICE_NAME = service_pb2.DESCRIPTOR.services_by_name["DeletionService"].full_name


@nexusrpc.service(name=NEXUS_SERVICE_NAME)
class DeletionNexusService:
    # Asynchronous: a workflow in the service's namespace runs the slice, so it may outlast Nexus's 10 s deadline
    # (a paced slice, lock waits, retries) and is cancelled with the gateway's deletion.
    delete_subject_data: nexusrpc.Operation[DeleteRequest, DeleteResponse] = nexusrpc.Operation(
        name=DELETE_SUBJECT_DATA
    )
    # Synchronous: a count, answered within the deadline.
    verify_subject_erased: nexusrpc.Operation[VerifyRequest, VerifyResponse] = nexusrpc.Operation(
        name=VERIFY_SUBJECT_ERASED
    )
    # Asynchronous: an account's part may take hours.
    export_subject_data: nexusrpc.Operation[ExportRequest, ExportResponse] = nexusrpc.Operation(
        name=EXPORT_SUBJECT_DATA
    )


# By the contract's call name, as the workflows name the call on either transport.
OPERATIONS: dict[str, nexusrpc.Operation[Any, Any]] = {
    DELETE_SUBJECT_DATA: DeletionNexusService.delete_subject_data,
    VERIFY_SUBJECT_ERASED: DeletionNexusService.verify_subject_erased,
    EXPORT_SUBJECT_DATA: DeletionNexusService.export_subject_data,
}
