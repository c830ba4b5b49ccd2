"""Each contract service on its own (services/): its own database made and migrated at start-up, DeleteSubjectData
in slices until done with exact counts, VerifySubjectErased, and a lost answer that neither counts a row twice nor
loses one. The activities run in an ActivityEnvironment, against real PostgreSQL and SeaweedFS."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack

import asyncpg
import pytest
import pytest_asyncio
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from devstack.postgres import PostgresServer
from devstack.seaweedfs import SeaweedServer
from devstack.seed import storage_keys, upload_documents
from lifecycle.deletion.v1.service_pb2 import DeleteRequest, DeleteResponse, Subject, VerifyRequest
from lifecycle.object_keys import bot_documents_prefix
from lifecycle.object_store import ObjectStore
from lifecycle.settings import Settings
from services.catalog import SERVICES
from services.chat import CHAT
from services.knowledge import KNOWLEDGE
from services.runtime.contract import ContractService
from services.runtime.database import asyncpg_dsn, ensure_database
from services.runtime.definition import ServiceDefinition
from services.runtime.seeding import seed_rows
from services.runtime.worker import opened
from tests.conftest import object_store_settings
from tests.eventually import eventually

ROWS = 2_345  # per table: several slices of SLICE_ROWS
DOCUMENTS = 30
SLICE_ROWS = 1_000


@pytest.fixture(scope="module")
def store_settings(seaweedfs: SeaweedServer) -> Settings:
    return Settings(**object_store_settings(seaweedfs))


class OpenedServices:
    """Each service over a database of its own on the session's server, opened as its worker opens it."""

    def __init__(self, postgres: PostgresServer, settings: Settings, stack: AsyncExitStack) -> None:
        self._postgres = postgres
        self._settings = settings
        self._stack = stack
        self.urls: dict[str, str] = {}
        self._opened: dict[str, ContractService] = {}

    async def service(self, definition: ServiceDefinition) -> ContractService:
        if definition.name not in self._opened:
            url = self._postgres.url(f"own_{definition.name}")
            service, _ = await self._stack.enter_async_context(opened(definition, self._settings, url))
            self.urls[definition.name] = url
            self._opened[definition.name] = service
        return self._opened[definition.name]


@pytest_asyncio.fixture(scope="module")
async def services(postgres_server: PostgresServer, store_settings: Settings) -> AsyncIterator[OpenedServices]:
    async with AsyncExitStack() as stack:
        yield OpenedServices(postgres_server, store_settings, stack)


async def seeded_bot(services: OpenedServices, definition: ServiceDefinition, settings: Settings) -> str:
    """A bot with ROWS rows in each of the service's tables, and DOCUMENTS documents (rows and objects) instead
    for a table of documents."""
    await services.service(definition)
    bot_id = str(uuid.uuid4())
    counts = {table: DOCUMENTS if definition.uses_objects else ROWS for table in definition.seeds}
    await seed_rows(definition, services.urls[definition.name], [bot_id], counts)
    if definition.uses_objects:
        store = ObjectStore(settings)
        try:
            await upload_documents(store, bot_id, storage_keys(bot_id, DOCUMENTS))
        finally:
            await store.close()
    return bot_id


def delete_request(bot_id: str, cursor: str = "", deletion_id: str | None = None, **fields: int) -> DeleteRequest:
    return DeleteRequest(
        deletion_id=deletion_id or f"bot-deletion-{bot_id}",
        subject=Subject(kind=Subject.KIND_BOT, id=bot_id),
        cursor=cursor,
        max_rows=fields.pop("max_rows", SLICE_ROWS),
        **fields,
    )


async def delete_until_done(service: ContractService, bot_id: str, cursor: str = "") -> tuple[int, int, int]:
    """Slices as a caller makes them, each from the cursor of the answer before: (rows, files, slices)."""
    rows = files = slices = 0
    while True:
        answer: DeleteResponse = await ActivityEnvironment().run(
            service.delete_subject_data, delete_request(bot_id, cursor)
        )
        rows, files, slices, cursor = (
            rows + answer.rows_deleted,
            files + answer.files_deleted,
            slices + 1,
            answer.cursor,
        )
        if answer.done:
            return rows, files, slices
        assert answer.remaining_rows_estimate > 0


@pytest.mark.parametrize("definition", SERVICES, ids=lambda definition: definition.name)
async def test_a_service_deletes_a_bot_in_slices_with_exact_counts(
    services: OpenedServices, store_settings: Settings, definition: ServiceDefinition
) -> None:
    bot_id = await seeded_bot(services, definition, store_settings)
    neighbour = await seeded_bot(services, definition, store_settings)
    service = await services.service(definition)
    held = await ActivityEnvironment().run(
        service.verify_subject_erased, VerifyRequest(subject=Subject(kind=Subject.KIND_BOT, id=bot_id))
    )
    expected_rows = DOCUMENTS if definition.uses_objects else ROWS * len(definition.seeds)
    assert (held.remaining_rows, held.remaining_files) == (expected_rows, DOCUMENTS if definition.uses_objects else 0)

    rows, files, slices = await delete_until_done(service, bot_id)

    assert (rows, files) == (expected_rows, DOCUMENTS if definition.uses_objects else 0)
    assert slices >= 2 or definition.uses_objects
    left = await ActivityEnvironment().run(
        service.verify_subject_erased, VerifyRequest(subject=Subject(kind=Subject.KIND_BOT, id=bot_id))
    )
    assert (left.remaining_rows, left.remaining_files) == (0, 0)
    if definition.uses_objects:
        store = ObjectStore(store_settings)
        try:
            assert await store.count(bot_documents_prefix(bot_id)) == 0
            assert await store.count(bot_documents_prefix(neighbour)) == DOCUMENTS
        finally:
            await store.close()
    kept = await ActivityEnvironment().run(
        service.verify_subject_erased, VerifyRequest(subject=Subject(kind=Subject.KIND_BOT, id=neighbour))
    )
    assert kept.remaining_rows == expected_rows


async def test_a_lost_answer_neither_counts_twice_nor_loses_rows(
    services: OpenedServices, store_settings: Settings
) -> None:
    """The first slice's answer never reaches the caller (its worker died after the batch committed, or the
    answer was lost on the way): the caller asks again from the same cursor, and the counts it receives still add
    up to every row, once."""
    bot_id = await seeded_bot(services, CHAT, store_settings)
    service = await services.service(CHAT)

    lost: DeleteResponse = await ActivityEnvironment().run(service.delete_subject_data, delete_request(bot_id))
    assert lost.rows_deleted == SLICE_ROWS and not lost.done

    rows, _, _ = await delete_until_done(service, bot_id, cursor="")
    assert rows == 2 * ROWS


async def test_a_slice_interrupted_after_a_batch_committed_loses_no_count(
    services: OpenedServices, store_settings: Settings
) -> None:
    """A slice paced to the budget is cancelled (its worker going away) after some batches committed; the caller's
    next call, from the same cursor, counts them."""
    bot_id = await seeded_bot(services, CHAT, store_settings)
    service = await services.service(CHAT)
    environment = ActivityEnvironment()
    # 1,000 rows/s: batches of 100 rows, one every 0.1 s.
    slow = asyncio.create_task(
        environment.run(service.delete_subject_data, delete_request(bot_id, rows_per_second=1_000, max_rows=100_000))
    )
    await eventually(
        lambda: _rows_left(services, bot_id), "a few batches committed", until=lambda left: left <= 2 * ROWS - 300
    )
    environment.cancel()
    with pytest.raises(asyncio.CancelledError):
        await slow

    rows, _, _ = await delete_until_done(service, bot_id, cursor="")
    assert rows == 2 * ROWS


async def _rows_left(services: OpenedServices, bot_id: str) -> int:
    service = await services.service(CHAT)
    answer = await ActivityEnvironment().run(
        service.verify_subject_erased, VerifyRequest(subject=Subject(kind=Subject.KIND_BOT, id=bot_id))
    )
    return int(answer.remaining_rows)


async def test_a_subject_other_than_a_bot_is_refused(services: OpenedServices) -> None:
    service = await services.service(KNOWLEDGE)
    request = DeleteRequest(deletion_id="x", subject=Subject(kind=Subject.KIND_ACCOUNT, id=str(uuid.uuid4())))
    with pytest.raises(ApplicationError) as refused:
        await ActivityEnvironment().run(service.delete_subject_data, request)
    assert refused.value.non_retryable


async def test_the_schema_is_applied_again_harmlessly(
    postgres_server: PostgresServer, store_settings: Settings
) -> None:
    """A second worker starting on the same database (a replica, a restart) applies its schema again."""
    url = postgres_server.url("own_twice")
    async with opened(CHAT, store_settings, url), opened(CHAT, store_settings, url) as (service, _):
        answer = await ActivityEnvironment().run(
            service.verify_subject_erased, VerifyRequest(subject=Subject(kind=Subject.KIND_BOT, id=str(uuid.uuid4())))
        )
    assert answer.remaining_rows == 0


async def test_starters_racing_to_make_the_database_all_get_it(postgres_server: PostgresServer) -> None:
    """A service's replicas and the seed each make its database if it is missing; those that lose the race to
    PostgreSQL's catalog carry on with the one the winner made."""
    for _ in range(5):
        url = postgres_server.url(f"raced_{uuid.uuid4().hex[:8]}")
        await asyncio.gather(*(ensure_database(url) for _ in range(4)))
        conn = await asyncpg.connect(asyncpg_dsn(url))
        await conn.close()


async def test_the_seed_makes_a_missing_database_and_schema_then_fills_them(postgres_server: PostgresServer) -> None:
    """make run seeds before the services start; later seeds find both and only insert."""
    url = postgres_server.url(f"seeded_first_{uuid.uuid4().hex[:8]}")
    bot_id = str(uuid.uuid4())
    counts = dict.fromkeys(CHAT.seeds, 3)
    await seed_rows(CHAT, url, [bot_id], counts)
    await seed_rows(CHAT, url, [bot_id], counts)
    conn = await asyncpg.connect(asyncpg_dsn(url))
    try:
        for table in CHAT.seeds:
            assert await conn.fetchval(f"SELECT count(*) FROM {table} WHERE bot_id = $1::uuid", bot_id) == 6
    finally:
        await conn.close()
