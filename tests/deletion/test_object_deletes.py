"""Document objects are deleted in DeleteObjects requests of at most 1,000 keys, a key already gone is fine, and
a kill of the object store mid-deletion loses nothing: on real PostgreSQL, Temporal and SeaweedFS. The requests
are counted at the S3 client's own event hooks, as they are sent."""

from __future__ import annotations

import asyncio
import math
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
import pytest_asyncio
from temporalio.client import Client
from temporalio.testing import ActivityEnvironment

from activities.deletion.deleters import BotDataDeleters
from activities.resources import ActivityResources
from devstack.seaweedfs import SeaweedServer
from devstack.seed import Seeded, asyncpg_dsn, rows_per_service, seed, upload_documents
from lifecycle.deletion.contracts import DeleteServiceInput, ServiceProgress
from lifecycle.object_keys import document_key
from lifecycle.object_store import DELETE_OBJECTS_MAX_KEYS, ObjectStore
from lifecycle.settings import Settings
from lifecycle.statuses import DeletionState
from lifecycle.workflow_ids import bot_deletion_id
from tests.conftest import object_store_settings
from tests.deletion.helpers import remaining_objects, remaining_rows
from tests.deletion.test_deletion_budget import budget
from tests.eventually import eventually
from tests.operators.starts import start_bot_deletion
from tests.workers import own_queue, own_worker

EXTRA_DOCUMENTS = 2_500
ROWS = 100


async def _add_documents(settings: Settings, bot_id: str, count: int) -> list[str]:
    """`count` more documents of the bot, rows and objects; their storage keys."""
    keys = [f"{bot_id}/extra-{n}.txt" for n in range(count)]
    conn = await asyncpg.connect(asyncpg_dsn(settings.database_url))
    try:
        await conn.executemany(
            "INSERT INTO knowledge_documents (bot_id, title, storage_key, size_bytes)"
            " VALUES ($1::uuid, 'extra', $2, 32)",
            [(bot_id, key) for key in keys],
        )
    finally:
        await conn.close()
    store = ObjectStore(settings)
    try:
        await upload_documents(store, bot_id, keys)
    finally:
        await store.close()
    return keys


async def _bot_with_documents(settings: Settings) -> tuple[Seeded, str, int]:
    """A seeded bot with EXTRA_DOCUMENTS more documents: its account, its id, and its documents' count."""
    seeded = await seed(settings, bots=1, rows=ROWS)
    bot_id = seeded.bot_ids[0]
    await _add_documents(settings, bot_id, EXTRA_DOCUMENTS)
    return seeded, bot_id, rows_per_service(ROWS)["knowledge_documents"] + EXTRA_DOCUMENTS


def _count_delete_objects(store_client: Any) -> list[int]:
    """The number of keys of every DeleteObjects request the client sends, in order."""
    sent: list[int] = []

    def record(params: dict[str, Any], **_: Any) -> None:
        sent.append(len(params["Delete"]["Objects"]))

    store_client.meta.events.register("before-parameter-build.s3.DeleteObjects", record)
    return sent


async def test_documents_go_in_delete_objects_requests_of_at_most_1000_keys(
    settings: Settings, resources: ActivityResources
) -> None:
    _, bot_id, documents = await _bot_with_documents(settings)
    # One key already gone: not an error, and the batch goes on.
    store = resources.objects
    await store.delete([document_key(bot_id, f"{bot_id}/extra-7.txt")])
    sent = _count_delete_objects(await store.client())

    request = DeleteServiceInput(
        workflow_id=f"{bot_deletion_id(bot_id)}-{uuid.uuid4().hex[:6]}",
        bot_id=bot_id,
        service="knowledge_documents",
        batch_size=10_000,
        progress=ServiceProgress(),
    )
    progress = await ActivityEnvironment().run(BotDataDeleters(resources).delete_bot_service, request)

    assert progress.done and progress.deleted == documents
    assert len(sent) >= math.ceil(documents / DELETE_OBJECTS_MAX_KEYS) >= 3
    assert max(sent) <= DELETE_OBJECTS_MAX_KEYS
    assert sum(sent) == documents
    # S3 answers a key already gone as deleted: every document's object is counted, and none is left.
    assert progress.files_deleted == documents
    assert await remaining_objects(settings, bot_id) == 0
    assert (await remaining_rows(settings.database_url, bot_id))["knowledge_documents"] == 0


@pytest_asyncio.fixture
async def killable_store(tmp_path: Path) -> AsyncIterator[SeaweedServer]:
    """An object store of this test's own, which it kills and starts again at the same address."""
    server = SeaweedServer(tmp_path / "seaweedfs")
    await asyncio.to_thread(server.start)
    try:
        yield server
    finally:
        await asyncio.to_thread(server.stop)


async def _documents_deleted(settings: Settings, workflow_id: str) -> int:
    conn = await asyncpg.connect(asyncpg_dsn(settings.database_url))
    try:
        found = await conn.fetchval(
            "SELECT deleted FROM deletion_progress WHERE workflow_id = $1 AND service = 'knowledge_documents'",
            workflow_id,
        )
        return int(found or 0)
    finally:
        await conn.close()


async def _deleter_retrying(client: Client, workflow_id: str) -> str:
    """The last failure of the documents' deleter once it is being retried, else an empty string."""
    description = await client.get_workflow_handle(workflow_id).describe()
    for pending in description.raw_description.pending_activities:
        if pending.activity_type.name == "delete_bot_service" and pending.attempt >= 2:
            return str(pending.last_failure.message)
    return ""


@pytest.mark.timeout(240)
async def test_a_kill_of_the_object_store_mid_deletion_loses_nothing(
    api: httpx.AsyncClient, settings: Settings, temporal_client: Client, killable_store: SeaweedServer
) -> None:
    own = own_queue(settings).model_copy(update=object_store_settings(killable_store))
    seeded, bot_id, documents = await _bot_with_documents(own)
    workflow_id = bot_deletion_id(bot_id)

    # A slow budget keeps the documents' deletion going long enough to kill the store in the middle of it.
    async with budget(api, 1_000), own_worker(own, temporal_client):
        handle = await start_bot_deletion(temporal_client, own.task_queue, bot_id=bot_id, account_id=seeded.account_id)
        await eventually(
            lambda: _documents_deleted(own, workflow_id), "some documents are deleted", until=lambda n: n > 0
        )
        await asyncio.to_thread(killable_store.kill)
        deleted_before = await _documents_deleted(own, workflow_id)
        assert 0 < deleted_before < documents, "the kill landed outside the documents' deletion"

        failure = await eventually(
            lambda: _deleter_retrying(temporal_client, workflow_id), "the deleter is retried", until=bool
        )
        assert "connect" in failure.lower(), failure
        assert await _documents_deleted(own, workflow_id) < documents

        await asyncio.to_thread(killable_store.start)
        result = await handle.result()

    assert result.status == DeletionState.COMPLETED
    assert await remaining_objects(own, bot_id) == 0
    assert set((await remaining_rows(own.database_url, bot_id)).values()) == {0}
    headers = {"Authorization": f"Bearer {seeded.api_key}"}
    receipt = (await api.get(f"/bots/{bot_id}/deletion/receipt", headers=headers)).json()["receipt"]
    assert receipt["complete"] is True
    documents_service = receipt["services"]["knowledge_documents"]
    assert documents_service["rows_deleted"] == documents
    assert documents_service["files_deleted"] == documents
    assert documents_service["remaining"] == 0
