"""The registry of deletion services: services that own data about bots and accounts, each implementing the
deletion contract (proto/lifecycle/deletion/v1/service.proto) on a task queue of its own in the gateway's namespace,
or behind a Nexus endpoint into a namespace of its own. The API registers and retires them
(api/deletion/services_router.py); a deletion reads them once (activities/deletion/services.py) and calls each one
where the registry says (workflows/deletion/service_transport.py), and a preview (api/deletion/preview.py) asks the
same ones.
"""

from __future__ import annotations

from datetime import UTC
from typing import Final

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from lifecycle.deletion.contracts import RegisteredService
from lifecycle.deletion.v1 import service_pb2
from lifecycle.statuses import Throttle

# A registered name is how the status API and the receipts name the service: a lowercase slug, such as
# `search-index`.
SERVICE_NAME_PATTERN: Final = r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$"
SERVICE_NAME_MAX_LENGTH: Final = 40
TASK_QUEUE_MAX_LENGTH: Final = 200
# A Nexus endpoint's name, as the Temporal server accepts it.
NEXUS_ENDPOINT_PATTERN: Final = r"^[a-zA-Z][a-zA-Z0-9-]*[a-zA-Z0-9]$"
NEXUS_ENDPOINT_MAX_LENGTH: Final = 200

# The contracts a deletion knows how to call: the package of the generated code it is built with.
SUPPORTED_CONTRACTS: Final = (service_pb2.DESCRIPTOR.package,)

# The contract's calls: each rpc of DeletionService is an activity type of the rpc's exact name.
DELETE_SUBJECT_DATA: Final = "DeleteSubjectData"
VERIFY_SUBJECT_ERASED: Final = "VerifySubjectErased"
EXPORT_SUBJECT_DATA: Final = "ExportSubjectData"

# What a service's DeleteResponse.throttled says, as the status API shows it.
THROTTLES: Final = {
    service_pb2.THROTTLE_BUDGET: Throttle.BUDGET,
    service_pb2.THROTTLE_LOCK_WAITS: Throttle.LOCK_WAITS,
    service_pb2.THROTTLE_AUTOVACUUM: Throttle.AUTOVACUUM,
    service_pb2.THROTTLE_REPLICA_LAG: Throttle.REPLICA_LAG,
}

# A deletion that finds no active service waits, showing this reason (deletion_requests.status_reason), until one
# registers: the API signals SERVICE_REGISTERED to the deletions that wait so, and an operator's NOTHING_TO_REACH
# (an update and a signal of that name) lets one go on without any, incomplete (workflows/deletion/registry_wait.py).
NO_SERVICE_REGISTERED: Final = "no deletion service is registered"
SERVICE_REGISTERED: Final = "service_registered"
NOTHING_TO_REACH: Final = "nothing_to_reach"

_ACTIVE = text(
    "SELECT name, task_queue, nexus_endpoint, registered_at FROM deletion_services WHERE retired_at IS NULL"
    " AND contract = ANY(:contracts) ORDER BY name"
)


async def active_services(conn: AsyncConnection) -> list[RegisteredService]:
    """The registered services of a contract this code calls, not retired, with where each answers and when it
    registered."""
    return [
        RegisteredService(
            name,
            task_queue or "",
            registered_at.astimezone(UTC).isoformat().replace("+00:00", "Z"),
            nexus_endpoint=nexus_endpoint or "",
        )
        for name, task_queue, nexus_endpoint, registered_at in await conn.execute(
            _ACTIVE, {"contracts": list(SUPPORTED_CONTRACTS)}
        )
    ]
