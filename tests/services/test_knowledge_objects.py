"""The knowledge service's documents: objects go in DeleteObjects requests of at most 1,000 keys, a key already
gone is fine, and a kill of the object store mid-slice loses nothing: the slice fails as transient (the gateway
calls again without end), and the next call, from the same cursor, finishes with every row and object counted
once. On real PostgreSQL and SeaweedFS; the requests are counted at the S3 client's own event hooks."""

from __future__ import annotations

import asyncio
import math
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from sqlalchemy.ext.asyncio import create_async_engine
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from devstack.postgres import PostgresServer
from devstack.seaweedfs import SeaweedServer
from devstack.seed import storage_keys, upload_documents
from lifecycle.deletion.contracts import TRANSIENT_ERROR
from lifecycle.deletion.v1.service_pb2 import DeleteRequest, DeleteResponse, Subject, VerifyRequest
from lifecycle.object_keys import document_key
from lifecycle.object_store import DELETE_OBJECTS_MAX_KEYS, ObjectStore
from lifecycle.settings import Settings
from services.knowledge import KNOWLEDGE
from services.runtime.contract import ContractService
from services.runtime.seeding import prepare, seed_rows
from tests.conftest import object_store_settings
from tests.eventually import eventually

# Two DeleteObjects requests' worth, the second of one key: each upload costs the client and the store some 4 ms
# of CPU, so no more than that.
DOCUMENTS = DELETE_OBJECTS_MAX_KEYS + 1
# A slice of three batches a second apart (a batch is a second's worth at the rate, services/runtime/pace.py): the
# kill follows the first, and lands with two seconds of the slice to go.
KILL_DOCUMENTS, KILL_RATE = 600, 200


@pytest_asyncio.fixture(scope="module")
async def knowledge_url(postgres_server: PostgresServer) -> str:
    url = postgres_server.url("own_knowledge_objects")
    await prepare(KNOWLEDGE, url)
    return url


@pytest_asyncio.fixture
async def killable_store(tmp_path: Path) -> AsyncIterator[SeaweedServer]:
    """An object store of this test's own, which it kills and starts again at the same address."""
    server = SeaweedServer(tmp_path / "seaweedfs")
    await asyncio.to_thread(server.start)
    try:
        yield server
    finally:
        await asyncio.to_thread(server.stop)


class Knowledge:
    """The knowledge service over its own database and the given object store, as its worker builds it."""

    def __init__(self, url: str, store: ObjectStore) -> None:
        self.store = store
        self.engine = create_async_engine(url)
        self.service = ContractService(
            self.engine, KNOWLEDGE.tables(store), name=KNOWLEDGE.name, objects=store, export_batch_rows=1_000
        )

    async def close(self) -> None:
        await self.engine.dispose()
        await self.store.close()


@pytest_asyncio.fixture
async def knowledge(knowledge_url: str, seaweedfs: SeaweedServer) -> AsyncIterator[Knowledge]:
    opened = Knowledge(knowledge_url, ObjectStore(Settings(**object_store_settings(seaweedfs))))
    try:
        yield opened
    finally:
        await opened.close()


async def _bot_with_documents(url: str, store: ObjectStore, documents: int) -> str:
    bot_id = str(uuid.uuid4())
    await seed_rows(KNOWLEDGE, url, [bot_id], {"knowledge_documents": documents})
    await upload_documents(store, bot_id, storage_keys(bot_id, documents))
    return bot_id


def _request(bot_id: str, cursor: str = "", **fields: int) -> DeleteRequest:
    return DeleteRequest(
        deletion_id=f"bot-deletion-{bot_id}", subject=Subject(kind=Subject.KIND_BOT, id=bot_id), cursor=cursor, **fields
    )


def _count_delete_objects(store_client: Any) -> list[int]:
    """The number of keys of every DeleteObjects request the client sends, in order."""
    sent: list[int] = []

    def record(params: dict[str, Any], **_: Any) -> None:
        sent.append(len(params["Delete"]["Objects"]))

    store_client.meta.events.register("before-parameter-build.s3.DeleteObjects", record)
    return sent


async def _left(knowledge: Knowledge, bot_id: str) -> tuple[int, int]:
    answer = await ActivityEnvironment().run(
        knowledge.service.verify_subject_erased, VerifyRequest(subject=Subject(kind=Subject.KIND_BOT, id=bot_id))
    )
    return int(answer.remaining_rows), int(answer.remaining_files)


@pytest.mark.long
async def test_documents_go_in_delete_objects_requests_of_at_most_1000_keys(
    knowledge: Knowledge, knowledge_url: str
) -> None:
    bot_id = await _bot_with_documents(knowledge_url, knowledge.store, DOCUMENTS)
    # One key already gone: not an error, and the batch goes on.
    await knowledge.store.delete([document_key(bot_id, f"{bot_id}/7.txt")])
    sent = _count_delete_objects(await knowledge.store.client())

    answer: DeleteResponse = await ActivityEnvironment().run(
        knowledge.service.delete_subject_data, _request(bot_id, max_rows=10_000)
    )

    assert answer.done and answer.rows_deleted == DOCUMENTS
    assert len(sent) >= math.ceil(DOCUMENTS / DELETE_OBJECTS_MAX_KEYS) >= 2
    assert max(sent) <= DELETE_OBJECTS_MAX_KEYS
    assert sum(sent) == DOCUMENTS
    # S3 answers a key already gone as deleted: every document's object is counted, and none is left.
    assert answer.files_deleted == DOCUMENTS
    assert await _left(knowledge, bot_id) == (0, 0)


@pytest.mark.long
async def test_a_kill_of_the_object_store_mid_slice_loses_nothing(
    knowledge_url: str, killable_store: SeaweedServer
) -> None:
    knowledge = Knowledge(knowledge_url, ObjectStore(Settings(**object_store_settings(killable_store))))
    try:
        bot_id = await _bot_with_documents(knowledge_url, knowledge.store, KILL_DOCUMENTS)
        slow = asyncio.create_task(
            ActivityEnvironment().run(
                knowledge.service.delete_subject_data, _request(bot_id, rows_per_second=KILL_RATE, max_rows=100_000)
            )
        )
        await eventually(
            lambda: _left(knowledge, bot_id), "some documents are deleted", until=lambda left: left[0] < KILL_DOCUMENTS
        )
        await asyncio.to_thread(killable_store.kill)
        with pytest.raises(ApplicationError) as failed:
            await slow
        assert failed.value.type == TRANSIENT_ERROR and not failed.value.non_retryable

        await asyncio.to_thread(killable_store.start)
        rows = files = 0
        cursor = ""
        while True:
            answer: DeleteResponse = await ActivityEnvironment().run(
                knowledge.service.delete_subject_data, _request(bot_id, cursor, max_rows=100_000)
            )
            rows, files, cursor = rows + answer.rows_deleted, files + answer.files_deleted, answer.cursor
            if answer.done:
                break
        # The answer the kill cut off is counted by the next call from the same cursor: every document once.
        assert rows == files == KILL_DOCUMENTS
        assert await _left(knowledge, bot_id) == (0, 0)
    finally:
        await knowledge.close()
