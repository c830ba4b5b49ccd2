"""A service's worker killed (SIGKILL) in the middle of ExportSubjectData: the next attempt, on the worker started
after it, writes the part whole, its SHA-256 the object's, every file byte for byte; and a later call writes the
very same object. The knowledge service as `make run` starts it, on a queue and database of its own, called by a
workflow on the session's dev server; the kill lands while its part is being written (an anonymous temporary
file of the process, seen in /proc, holds bytes)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import sys
import tempfile
import uuid
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.worker import Worker

from devstack.postgres import PostgresServer
from devstack.seed import storage_keys
from lifecycle.deletion.v1.service_pb2 import ExportRequest, ExportResponse, Subject
from lifecycle.object_keys import document_key
from lifecycle.object_store import ObjectStore
from lifecycle.settings import Settings
from services.knowledge import KNOWLEDGE
from services.runtime.database import database_url_variable
from services.runtime.seeding import seed_rows
from services.runtime.worker import task_queue_variable
from tests.eventually import eventually
from tests.processes import ChildProcess, settings_environment
from tests.services.export_call import ExportCall
from tests.services.own_database import own_service_database

pytestmark = pytest.mark.slow  # it kills processes

# Random, so base64-encoding and uploading them takes long enough for a kill to land inside the call.
DOCUMENTS = 6
DOCUMENT_BYTES = 4 * 1024 * 1024


def _writing(pid: int) -> bool:
    """Whether the process holds an anonymous temporary file with bytes in it: its export part, being written."""
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
            if target.startswith(tempfile.gettempdir()) and target.endswith("(deleted)") and os.stat(fd).st_size:
                return True
        except OSError:
            continue  # closed meanwhile
    return False


async def _attempts(client: Client, workflow_id: str) -> list[int]:
    """The attempt number of each start of the call, from the run's history."""
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    return [
        event.activity_task_started_event_attributes.attempt
        for event in history.events
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
    ]


async def test_a_service_killed_mid_export_writes_the_part_whole_on_the_next_attempt(
    settings: Settings, temporal_client: Client, postgres_server: PostgresServer, tmp_path: Path
) -> None:
    suffix = uuid.uuid4().hex[:8]
    url = await own_service_database(postgres_server, KNOWLEDGE, "export_killed")
    bot_id = str(uuid.uuid4())
    await seed_rows(KNOWLEDGE, url, [bot_id], {"knowledge_documents": DOCUMENTS})
    store = ObjectStore(settings)
    queue, caller_queue = f"knowledge-killed-{suffix}", f"export-caller-{suffix}"
    environment = settings_environment(
        settings, **{task_queue_variable(KNOWLEDGE.name): queue, database_url_variable(KNOWLEDGE.name): url}
    )
    processes: list[ChildProcess] = []

    def service(name: str) -> ChildProcess:
        process = ChildProcess([sys.executable, "-m", "services.knowledge"], environment, tmp_path / f"{name}.log")
        process.start()
        processes.append(process)
        return process

    try:
        for key in storage_keys(bot_id, DOCUMENTS):
            await store.put_bytes(document_key(bot_id, key), os.urandom(DOCUMENT_BYTES))
        first = service("first")
        await eventually(lambda: "serving" in first.log(), "the first worker polls its queue")
        prefix = f"exports/{uuid.uuid4()}/"
        request = ExportRequest(
            export_id=prefix.split("/")[1],
            subject=Subject(kind=Subject.KIND_ACCOUNT, id=str(uuid.uuid4())),
            object_key_prefix=prefix,
            bot_ids=[bot_id],
        )
        async with Worker(temporal_client, task_queue=caller_queue, workflows=[ExportCall]):
            handle = await temporal_client.start_workflow(
                ExportCall.run, args=[queue, request], id=f"export-call-{suffix}", task_queue=caller_queue
            )
            await eventually(lambda: _writing(first.pid), "the part is being written", interval=0.002)
            first.kill()
            service("second")
            answer: ExportResponse = await handle.result()
            again: ExportResponse = await temporal_client.execute_workflow(
                ExportCall.run, args=[queue, request], id=f"export-call-{suffix}-again", task_queue=caller_queue
            )

        # The kill cut the first attempt short: the answer is the next attempt's.
        assert max(await _attempts(temporal_client, handle.id)) >= 2
        body = await store.read(answer.object_key)
        assert body is not None and hashlib.sha256(body).hexdigest() == answer.sha256
        assert (answer.rows, answer.files, answer.size_bytes) == (DOCUMENTS, DOCUMENTS, len(body))
        for line in map(json.loads, body.splitlines()):
            stored = await store.read(document_key(bot_id, line["row"]["storage_key"]))
            assert base64.b64decode(line["file"]["content_base64"]) == stored
        assert (again.object_key, again.sha256) == (answer.object_key, answer.sha256)
        assert await store.keys(prefix) == [answer.object_key]
    finally:
        for process in processes:
            process.kill()
        await store.close()
