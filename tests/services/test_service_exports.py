"""Each contract service's ExportSubjectData (services/runtime/export.py), run in an ActivityEnvironment against real
PostgreSQL and SeaweedFS: the object holds exactly the rows of the bots the request names, and nothing of another
account's bot; the knowledge service's files byte for byte, one larger than a piece and of a length no multiple of
3; a repeated call writes the same object with the same SHA-256; an account with nothing here gets no object."""

from __future__ import annotations

import base64
import hashlib
import json
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack

import pytest
import pytest_asyncio
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from devstack.postgres import PostgresServer
from devstack.seaweedfs import SeaweedServer
from devstack.seed import storage_keys
from lifecycle.deletion.v1.service_pb2 import ExportRequest, ExportResponse, Subject
from lifecycle.object_keys import document_key
from lifecycle.object_store import ObjectStore
from lifecycle.settings import Settings
from services.catalog import SERVICES
from services.runtime.definition import ServiceDefinition
from services.runtime.export import FILE_PIECE
from services.runtime.seeding import seed_rows
from services.runtime.worker import opened
from tests.conftest import object_store_settings
from tests.db import connection

ROWS = 230  # per table and bot: several export batches
DOCUMENTS = 7
BATCH_ROWS = 100


@pytest.fixture(scope="module")
def store_settings(seaweedfs: SeaweedServer) -> Settings:
    return Settings(**object_store_settings(seaweedfs), export_batch_rows=BATCH_ROWS)


@pytest_asyncio.fixture(scope="module")
async def store(store_settings: Settings) -> AsyncIterator[ObjectStore]:
    opened_store = ObjectStore(store_settings)
    yield opened_store
    await opened_store.close()


async def _seed(definition: ServiceDefinition, url: str, store: ObjectStore, bot_ids: list[str]) -> None:
    counts = {table: DOCUMENTS if definition.uses_objects else ROWS for table in definition.seeds}
    await seed_rows(definition, url, bot_ids, counts)
    if definition.uses_objects:
        for bot_id in bot_ids:
            for n, key in enumerate(storage_keys(bot_id, DOCUMENTS)):
                # Distinct bytes, not all text; the first one spans two pieces and ends off a multiple of 3.
                body = uuid.uuid4().bytes * (FILE_PIECE // 16 + 1) + b"\xff" if n == 0 else uuid.uuid4().bytes + b"\x00"
                await store.put_bytes(document_key(bot_id, key), body)


async def _ids(url: str, definition: ServiceDefinition, bot_ids: list[str]) -> set[tuple[str, int, str]]:
    """(table, id, bot id) of every row the bots have in the service's tables, read from its database."""
    async with connection(url) as conn:
        found: set[tuple[str, int, str]] = set()
        for table in definition.seeds:
            records = await conn.fetch(
                f"SELECT id, bot_id FROM {table} WHERE bot_id = ANY($1::uuid[])", [uuid.UUID(b) for b in bot_ids]
            )
            found |= {(table, record["id"], str(record["bot_id"])) for record in records}
        return found


def _request(bot_ids: list[str], prefix: str) -> ExportRequest:
    return ExportRequest(
        export_id=prefix.split("/")[1],
        subject=Subject(kind=Subject.KIND_ACCOUNT, id=str(uuid.uuid4())),
        object_key_prefix=prefix,
        bot_ids=bot_ids,
    )


@pytest.mark.parametrize("definition", SERVICES, ids=lambda definition: definition.name)
async def test_the_object_holds_exactly_the_bots_rows_and_a_retry_writes_the_same(
    postgres_server: PostgresServer, store_settings: Settings, store: ObjectStore, definition: ServiceDefinition
) -> None:
    url = postgres_server.url(f"export_{definition.name}")
    async with AsyncExitStack() as stack:
        service, _ = await stack.enter_async_context(opened(definition, store_settings, url))
        ours, theirs = [str(uuid.uuid4()), str(uuid.uuid4())], [str(uuid.uuid4())]
        await _seed(definition, url, store, ours + theirs)
        prefix = f"exports/{uuid.uuid4()}/"

        answer: ExportResponse = await ActivityEnvironment().run(service.export_subject_data, _request(ours, prefix))

        assert answer.object_key == f"{prefix}{definition.name}.ndjson"
        body = await store.read(answer.object_key)
        assert body is not None
        assert (answer.sha256, answer.size_bytes) == (hashlib.sha256(body).hexdigest(), len(body))
        assert answer.content_type == "application/x-ndjson"
        lines = [json.loads(line) for line in body.decode().splitlines()]
        exported = {(line["table"], line["row"]["id"], line["row"]["bot_id"]) for line in lines}
        assert len(exported) == len(lines) == answer.rows
        assert exported == await _ids(url, definition, ours)
        assert not exported & await _ids(url, definition, theirs)
        files = [line for line in lines if "file" in line]
        if definition.uses_objects:
            assert len(files) == answer.files == DOCUMENTS * len(ours)
            for line in files:
                stored = await store.read(document_key(line["row"]["bot_id"], line["row"]["storage_key"]))
                assert base64.b64decode(line["file"]["content_base64"]) == stored
                assert line["file"]["size_bytes"] == len(stored or b"")
        else:
            assert files == [] and answer.files == 0

        again: ExportResponse = await ActivityEnvironment().run(service.export_subject_data, _request(ours, prefix))
        assert (again.object_key, again.sha256, again.rows) == (answer.object_key, answer.sha256, answer.rows)
        assert await store.read(answer.object_key) == body

        nothing: ExportResponse = await ActivityEnvironment().run(
            service.export_subject_data, _request([str(uuid.uuid4())], f"exports/{uuid.uuid4()}/")
        )
        assert nothing == ExportResponse()


async def test_a_subject_other_than_an_account_or_a_bot_id_not_an_id_is_refused(
    postgres_server: PostgresServer, store_settings: Settings
) -> None:
    (chat,) = [definition for definition in SERVICES if definition.name == "chat"]
    async with opened(chat, store_settings, postgres_server.url("export_refusals")) as (service, _):
        for request in (
            ExportRequest(subject=Subject(kind=Subject.KIND_BOT, id=str(uuid.uuid4())), object_key_prefix="x/"),
            ExportRequest(subject=Subject(kind=Subject.KIND_ACCOUNT, id=str(uuid.uuid4())), bot_ids=["x' OR true --"]),
        ):
            with pytest.raises(ApplicationError) as refused:
                await ActivityEnvironment().run(service.export_subject_data, request)
            assert refused.value.non_retryable
