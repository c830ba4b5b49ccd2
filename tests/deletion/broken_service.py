"""A registered service that answers DeleteSubjectData with a non-retryable error (a poison pill) until a test
fixes it, in the test's own process, for the tests of the operator's path with the real services beside it."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.worker import Worker

from lifecycle.deletion.v1.service_pb2 import DeleteRequest, DeleteResponse, VerifyRequest, VerifyResponse
from tests.conftest import ADMIN_HEADERS


@dataclass
class BrokenService:
    """Holds `holds` rows of every bot it is asked about, by its own count; deletes them only once `fixed`."""

    name: str
    holds: int
    fixed: bool = False

    @activity.defn(name="DeleteSubjectData")
    async def delete_subject_data(self, request: DeleteRequest) -> DeleteResponse:
        if not self.fixed:
            raise ApplicationError(f"{self.name} cannot delete", non_retryable=True)
        deleted, self.holds = self.holds, 0
        return DeleteResponse(rows_deleted=deleted, cursor="done", done=True)

    @activity.defn(name="VerifySubjectErased")
    async def verify_subject_erased(self, request: VerifyRequest) -> VerifyResponse:
        return VerifyResponse(remaining_rows=self.holds)


@contextlib.asynccontextmanager
async def broken_service(api: httpx.AsyncClient, client: Client, *, holds: int = 7) -> AsyncIterator[BrokenService]:
    """Registered, under a name of its own, for as long as the block runs."""
    service = BrokenService(f"broken-{uuid.uuid4().hex[:8]}", holds)
    queue = f"{service.name}-queue"
    registered = await api.put(
        f"/deletion-services/{service.name}",
        json={"task_queue": queue, "contract": "lifecycle.deletion.v1"},
        headers=ADMIN_HEADERS,
    )
    assert registered.status_code == 201, registered.text
    try:
        async with Worker(
            client, task_queue=queue, activities=[service.delete_subject_data, service.verify_subject_erased]
        ):
            yield service
    finally:
        await api.delete(f"/deletion-services/{service.name}", headers=ADMIN_HEADERS)
