"""The registry of deletion services: services that own data about bots and accounts, each implementing the
deletion contract (proto/lifecycle/deletion/v1/service.proto) on a task queue of its own. The API registers and
retires them (api/deletion/services_router.py); a deletion reads them once (activities/deletion/services.py) and
calls each one's queue, and a preview (api/deletion/preview.py) asks the same ones.
"""

from __future__ import annotations

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

_ACTIVE = text(
    "SELECT name, task_queue FROM deletion_services WHERE retired_at IS NULL AND contract = ANY(:contracts)"
    " ORDER BY name"
)


async def active_services(conn: AsyncConnection) -> list[RegisteredService]:
    """The registered services of a contract this code calls, not retired."""
    return [
        RegisteredService(name, queue)
        for name, queue in await conn.execute(_ACTIVE, {"contracts": list(SUPPORTED_CONTRACTS)})
    ]
