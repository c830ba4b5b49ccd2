"""The contract is language-neutral: examples/search_index_ts, a service written in TypeScript with npm's
@temporalio/worker and code protoc-gen-es generated from the same .proto, its own store (JSON files in a folder)
and its own worker process, takes part in deletions and exports as a Python service does. Against a real
Temporal dev server, the session's gateway worker and API, PostgreSQL and SeaweedFS.

- registered, it is called by the next bot deletion: its data goes, another bot's stays, and the receipt lists it
  by its registered name with its counts and its VerifySubjectErased check;
- it reads a request carrying a field it does not know, and answers `json/protobuf` with the message's full name
  as `messageType`, which the Python side reads;
- an account export asks it for its part (ExportSubjectData), which it writes to the object store and the archive
  then holds, with its counts in the manifest.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import shutil
import subprocess
import uuid
import zipfile
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
from google.protobuf.message import Message
from temporalio.api.common.v1 import Payload
from temporalio.client import Client, WorkflowFailureError
from temporalio.common import RawValue
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.worker import Worker

from devstack.search_team import SERVICE_NAMESPACE, create_nexus_endpoint
from lifecycle.data_converter import DATA_CONVERTER
from lifecycle.deletion.v1.service_pb2 import (
    DeleteRequest,
    Subject,
    VerifyRequest,
    VerifyResponse,
)
from lifecycle.deletion.workflow_types import bot_deletion_id
from lifecycle.object_keys import export_parts_prefix
from lifecycle.object_store import ObjectStore
from lifecycle.settings import Settings
from tests.conftest import ADMIN_HEADERS, ApiAccount
from tests.deletion.conftest import Register
from tests.deletion.contract_call import ContractCall
from tests.deletion.helpers import a_bot, completed, nexus_calls, receipt_of
from tests.eventually import eventually
from tests.processes import PROJECT_ROOT, ChildProcess
from worker import LifecycleWorkers

pytestmark = pytest.mark.usefixtures("registry_left_as_found")

EXAMPLE = PROJECT_ROOT / "examples/search_index_ts"
TSC = PROJECT_ROOT / "node_modules/.bin/tsc"
ENTRIES = 1_234  # three slices of the service's (500 at most)
FILES = 3


@pytest.fixture(scope="session")
def typescript_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example compiled (and type-checked) from its sources as they stand, by npm's typescript."""
    assert TSC.is_file(), "typescript is missing: run `make install` (npm ci)"
    out = tmp_path_factory.mktemp("search-index-ts")
    built = subprocess.run(
        [str(TSC), "-p", str(EXAMPLE), "--outDir", str(out)], capture_output=True, text=True, timeout=300, check=False
    )
    assert built.returncode == 0, built.stdout + built.stderr
    return out


@dataclass
class TypeScriptIndex:
    name: str
    task_queue: str
    store: Path
    build: Path
    env: dict[str, str]

    def seed(self, bot_id: str, account_id: str, entries: int, files: int) -> None:
        arguments = ["--store", str(self.store), "--bot", bot_id, "--account", account_id]
        counts = ["--entries", str(entries), "--files", str(files)]
        subprocess.run([node(), str(self.build / "main.js"), "seed", *arguments, *counts], env=self.env, check=True)

    def entries(self, bot_id: str) -> int | None:
        """The entries the store's document for the bot holds, read from the file itself; None without one."""
        document = self.store / "index" / f"{bot_id}.json"
        return len(json.loads(document.read_text())["entries"]) if document.exists() else None

    def snapshots(self, bot_id: str) -> list[str]:
        folder = self.store / "snapshots" / bot_id
        return sorted(path.name for path in folder.iterdir()) if folder.exists() else []


def node() -> str:
    found = shutil.which("node")
    assert found, "node is missing"
    return found


def index_env(settings: Settings) -> dict[str, str]:
    return {
        **os.environ,
        # The build lives outside the project: Node finds the packages `make install` put in node_modules.
        "NODE_PATH": str(PROJECT_ROOT / "node_modules"),
        "S3_ENDPOINT_URL": str(settings.s3_endpoint_url),
        "S3_BUCKET": settings.s3_bucket,
        "S3_REGION": settings.s3_region,
        "S3_ACCESS_KEY_ID": str(settings.s3_access_key_id),
        "S3_SECRET_ACCESS_KEY": str(settings.s3_secret_access_key),
    }


def serve(index: TypeScriptIndex, log: Path, client: Client, *options: str) -> ChildProcess:
    """The service's worker process (started) on its queue, with `options` besides."""
    address = client.service_client.config.target_host
    where = ["--address", address, "--task-queue", index.task_queue, "--store", str(index.store), "--name", index.name]
    process = ChildProcess([node(), str(index.build / "main.js"), "serve", *where, *options], index.env, log)
    process.start()
    return process


@pytest_asyncio.fixture
async def ts_index(
    register: Register, temporal_client: Client, settings: Settings, typescript_build: Path, tmp_path: Path
) -> AsyncIterator[TypeScriptIndex]:
    """The TypeScript search index, registered, its worker process running on its own queue."""
    name, queue = await register("search-ts")
    index = TypeScriptIndex(name, queue, tmp_path / "store", typescript_build, index_env(settings))
    process = serve(index, tmp_path / "search-index-ts.log", temporal_client)
    try:
        yield index
    finally:
        process.terminate()


def request_payload(request: Message, **unknown: object) -> RawValue:
    """The request as the project's converter encodes it, with fields added that this contract does not have."""
    payload = DATA_CONVERTER.payload_converter.to_payload(request)
    payload.data = json.dumps({**json.loads(payload.data), **unknown}).encode()
    return RawValue(payload)


async def call(client: Client, service_queue: str, activity: str, request: RawValue) -> Payload:
    """The service's answer to one call, as the payload it wrote."""
    caller_queue = f"contract-call-{uuid.uuid4().hex[:8]}"
    async with Worker(client, task_queue=caller_queue, workflows=[ContractCall]):
        answer = await client.execute_workflow(
            ContractCall.run,
            args=[service_queue, activity, request],
            id=f"contract-call-{uuid.uuid4()}",
            task_queue=caller_queue,
        )
    assert isinstance(answer, RawValue)
    return answer.payload


def read(payload: Payload, message_type: str) -> Message:
    """The message the Python side reads, after checking the service wrote it as the contract says."""
    assert payload.metadata["encoding"] == b"json/protobuf"
    assert payload.metadata["messageType"] == message_type.encode()
    message = DATA_CONVERTER.payload_converter.from_payload(payload)
    assert isinstance(message, Message)
    return message


async def test_the_typescript_service_takes_part_in_a_deletion(
    api: httpx.AsyncClient,
    account: ApiAccount,
    worker: LifecycleWorkers,
    ts_index: TypeScriptIndex,
    temporal_client: Client,
) -> None:
    bot_id, neighbour = await a_bot(api, account), str(uuid.uuid4())
    ts_index.seed(bot_id, account.id, entries=ENTRIES, files=FILES)
    ts_index.seed(neighbour, account.id, entries=5, files=1)

    # Before the deletion it counts what it holds, from a request carrying a field of a newer contract.
    subject = Subject(kind=Subject.KIND_BOT, id=bot_id)
    request = request_payload(VerifyRequest(deletion_id="before", subject=subject), fieldOfANewerContract=7)
    held = read(
        await call(temporal_client, ts_index.task_queue, "VerifySubjectErased", request),
        "lifecycle.deletion.v1.VerifyResponse",
    )
    assert held == VerifyResponse(remaining_rows=ENTRIES, remaining_files=FILES)

    assert (await api.delete(f"/bots/{bot_id}", headers=account.headers)).status_code == 202
    status = await completed(api, bot_id, account)

    assert ts_index.entries(bot_id) is None and ts_index.snapshots(bot_id) == []
    assert ts_index.entries(neighbour) == 5 and ts_index.snapshots(neighbour) == ["0.json"]  # another bot's stays
    assert status["progress"][ts_index.name] == {"deleted": ENTRIES, "total": ENTRIES}
    receipt = await receipt_of(api, bot_id, account)
    assert receipt["services"][ts_index.name] == {"rows_deleted": ENTRIES, "files_deleted": FILES, "remaining": 0}
    check = next(check for check in receipt["checks"] if check.get("service") == ts_index.name)
    assert check["passed"] is True and check["found"] == 0
    assert receipt["complete"] is True


async def test_the_typescript_service_behind_a_nexus_endpoint_takes_part_in_a_deletion(
    api: httpx.AsyncClient,
    account: ApiAccount,
    worker: LifecycleWorkers,
    register: Register,
    temporal_client: Client,
    settings: Settings,
    typescript_build: Path,
    tmp_path: Path,
) -> None:
    """As another team runs it: its worker in a namespace of its own serves the contract's Nexus service, and it is
    registered by an endpoint to its queue there that the operator created with the real CLI. The deletion reaches
    it through the endpoint alone: three slices (its workflows running its activity) and the count."""
    name, _ = await register("search-ts-team")
    suffix = uuid.uuid4().hex[:8]
    queue, endpoint = f"ts-team-queue-{suffix}", f"ts-team-endpoint-{suffix}"
    address = temporal_client.service_client.config.target_host
    await asyncio.to_thread(create_nexus_endpoint, address, endpoint, SERVICE_NAMESPACE, queue)
    moved = await api.put(
        f"/deletion-services/{name}",
        json={"nexus_endpoint": endpoint, "contract": "lifecycle.deletion.v1"},
        headers=ADMIN_HEADERS,
    )
    assert moved.status_code == 200, moved.text
    index = TypeScriptIndex(name, queue, tmp_path / "store", typescript_build, index_env(settings))
    bot_id = await a_bot(api, account)
    index.seed(bot_id, account.id, entries=ENTRIES, files=FILES)

    team = ["--namespace", SERVICE_NAMESPACE, "--nexus-endpoint", endpoint]
    process = serve(index, tmp_path / "search-index-ts-team.log", temporal_client, *team)
    try:
        # Its operations' workflows are bundled first: once it serves, each call is answered at its first try.
        await eventually(lambda: "serving" in process.log(), "the service serves its queue")
        assert (await api.delete(f"/bots/{bot_id}", headers=account.headers)).status_code == 202
        status = await completed(api, bot_id, account)
    finally:
        process.terminate()

    assert index.entries(bot_id) is None and index.snapshots(bot_id) == []
    assert status["progress"][name] == {"deleted": ENTRIES, "total": ENTRIES}
    receipt = await receipt_of(api, bot_id, account)
    assert receipt["services"][name] == {"rows_deleted": ENTRIES, "files_deleted": FILES, "remaining": 0}
    check = next(check for check in receipt["checks"] if check.get("service") == name)
    assert check["passed"] is True and check["found"] == 0
    history = await temporal_client.get_workflow_handle(bot_deletion_id(bot_id)).fetch_history()
    assert nexus_calls(history, endpoint) == [*["DeleteSubjectData"] * 3, "VerifySubjectErased"]


async def test_an_account_export_holds_the_typescript_services_part(
    api: httpx.AsyncClient,
    account: ApiAccount,
    worker: LifecycleWorkers,
    ts_index: TypeScriptIndex,
    settings: Settings,
) -> None:
    bots = sorted([await a_bot(api, account), await a_bot(api, account)])
    ts_index.seed(bots[0], account.id, entries=3, files=1)
    ts_index.seed(bots[1], account.id, entries=4, files=2)
    ts_index.seed(str(uuid.uuid4()), str(uuid.uuid4()), entries=5, files=1)  # another account's bot

    # The export asks every registered service for its part (ExportSubjectData) and puts it in the archive.
    requested = await api.post("/account/exports", headers=account.headers)
    assert requested.status_code == 202, requested.text
    status_url = requested.json()["status_url"]
    status = await eventually(
        lambda: _json(api.get(status_url, headers=account.headers)),
        "the export is ready",
        until=lambda answer: answer["status"] == "ready",
    )
    archive = zipfile.ZipFile(io.BytesIO((await api.get(status["download_url"])).content))

    entry = f"services/{ts_index.name}/{ts_index.name}.ndjson"
    lines = [json.loads(line) for line in archive.read(entry).decode().splitlines()]
    assert sorted({line["bot_id"] for line in lines}) == bots  # the other account's bot is not in it
    assert sum("entry_id" in line for line in lines) == 7 and sum("snapshot" in line for line in lines) == 3
    manifest = json.loads(archive.read("manifest.json"))
    assert manifest["services"][ts_index.name] == {"rows": 7, "files": 3, "files_missing": 0, "files_refused": []}
    # Every other registered service (the project's own) was asked too, and holds nothing of these bots.
    assert all(counts["rows"] == 0 for name, counts in manifest["services"].items() if name != ts_index.name)
    # The service's object was only the way into the archive: gone once the archive is ready.
    objects = ObjectStore(settings)
    try:
        assert await objects.count(export_parts_prefix(requested.json()["id"])) == 0
    finally:
        await objects.close()


async def _json(answer: Awaitable[httpx.Response]) -> Any:
    return (await answer).json()


async def test_the_typescript_service_refuses_a_subject_it_cannot_act_on(
    ts_index: TypeScriptIndex, temporal_client: Client
) -> None:
    """An account where a bot is due: a non-retryable error, for an operator to see, not a silent success."""
    request = DeleteRequest(deletion_id="wrong", subject=Subject(kind=Subject.KIND_ACCOUNT, id=str(uuid.uuid4())))
    with pytest.raises(WorkflowFailureError) as failed:
        await call(temporal_client, ts_index.task_queue, "DeleteSubjectData", request_payload(request))
    assert isinstance(failed.value.cause, ActivityError)
    cause = failed.value.cause.cause
    assert isinstance(cause, ApplicationError)
    assert (cause.type, cause.non_retryable) == ("UnsupportedSubject", True)
