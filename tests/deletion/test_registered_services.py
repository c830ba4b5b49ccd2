"""A service nobody here wrote joins the deletions by registering: examples/search_index, its own store and its
own worker process, built from the contract's generated classes alone. Against real PostgreSQL, a real Temporal
dev server, the session's real gateway worker, and the API.

- registered, it is called by the next deletion: its data goes, the receipt lists it by its registered name with
  its counts, and the registry shows when it last answered;
- with its worker stopped, the deletion shows it `waiting` (since when), loses nothing, alerts once stuck for
  STUCK_AFTER_BOT_DELETION (and once per further period), and finishes with exact counts once the worker is back;
- one that answers errors is a poison pill, as a built-in service is: an operator decides;
- its worker may register it at start-up, through the same call;
- with a rows/s of its own (PUT /deletion-budget's `services`), each call it gets carries that, and a change
  reaches the running deletion at its next call;
- run as another team runs it, in a namespace of its own behind a Nexus endpoint an operator created with the CLI,
  it is reached in the same run as the services on task queues, and counted alike; it may move from a task queue to
  an endpoint between deletions, losing nothing; an endpoint that does not exist shows it `waiting`, and the run
  alerts once stuck, until the operator creates it; a handler that keeps failing opens Temporal's circuit breaker
  for the endpoint, which the status gives as the reason the service waits; cancelling the deletion cancels the
  slice's workflow in the service's namespace; and a kill -9 of its worker mid-slice shows it `waiting` until a
  worker is back, the receipt counting every entry once.
"""

from __future__ import annotations

import asyncio
import io
import json
import uuid
import zipfile
from collections import Counter
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import nexusrpc
import pytest
import pytest_asyncio
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine
from temporalio import activity
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.exceptions import ApplicationError
from temporalio.worker import Worker

from activities.deletion.blocked_calls import blocked_endpoints
from devstack.search_team import SERVICE_NAMESPACE
from devstack.seed import rows_per_service, seed
from examples.search_index.__main__ import HOLD_SLICES, SLICE_BOUND_SECONDS
from examples.search_index.store import SearchIndex
from lifecycle.deletion.contracts import TRANSIENT_ERROR
from lifecycle.deletion.nexus_service import DeletionNexusService
from lifecycle.deletion.v1.service_pb2 import (
    DeleteRequest,
    DeleteResponse,
    ExportRequest,
    ExportResponse,
    VerifyRequest,
    VerifyResponse,
)
from lifecycle.deletion.workflow_types import bot_deletion_id
from lifecycle.settings import Settings
from lifecycle.stuck import RunKind
from tests.conftest import ADMIN_HEADERS, ADMIN_TOKEN, ApiAccount
from tests.deletion.conftest import Register
from tests.deletion.helpers import a_bot, completed, nexus_calls, receipt_of, run_reconciler, status_of
from tests.deletion.search_team import (
    RegisteredIndex,
    behind_an_endpoint,
    create_endpoint,
    index_process,
    slice_statuses,
    team_client,
)
from tests.eventually import eventually
from tests.processes import ApiProcess
from tests.stuck import assert_alerts_once_stuck
from worker import LifecycleWorkers

pytestmark = pytest.mark.usefixtures("registry_left_as_found")

RUNNING, CANCELED = WorkflowExecutionStatus.RUNNING, WorkflowExecutionStatus.CANCELED
ENTRIES = 1_234  # three slices of the index's (500 at most): the run resumes from the service's own cursor
FILES = 3


def s3_environment(settings: Settings) -> dict[str, str]:
    """The gateway's object store, named by the S3_* variables the gateway reads too: where exports go."""
    return {field.upper(): str(getattr(settings, field)) for field in Settings.model_fields if field.startswith("s3_")}


@pytest_asyncio.fixture
async def search_index(
    register: Register, temporal_client: Client, settings: Settings, tmp_path: Path
) -> AsyncIterator[RegisteredIndex]:
    """The search index, registered; its worker process is not started yet."""
    name, queue = await register("search")
    store = tmp_path / "search-index"
    process = index_process(temporal_client, queue, store, "--name", name, **s3_environment(settings))
    service = RegisteredIndex(name, queue, SearchIndex(store), process)
    try:
        yield service
    finally:
        service.stop()


async def test_a_registered_service_is_deleted_counted_and_listed(
    api: httpx.AsyncClient,
    account: ApiAccount,
    worker: LifecycleWorkers,
    search_index: RegisteredIndex,
    temporal_client: Client,
) -> None:
    bot_id, neighbour = await a_bot(api, account), str(uuid.uuid4())
    search_index.index.add(bot_id, entries=ENTRIES, files=FILES)
    search_index.index.add(neighbour, entries=5, files=1)
    search_index.start()

    assert (await api.delete(f"/bots/{bot_id}", headers=account.headers)).status_code == 202
    status = await completed(api, bot_id, account)

    assert search_index.index.count(bot_id) == (0, 0)
    assert search_index.index.count(neighbour) == (5, 1)  # another bot's data stays
    assert status["progress"][search_index.name] == {"deleted": ENTRIES, "total": ENTRIES}
    # Three slices (500, 500, then 234 and the files), each from the cursor the one before returned.
    history = await temporal_client.get_workflow_handle(bot_deletion_id(bot_id)).fetch_history()
    calls = [
        event.activity_task_scheduled_event_attributes.input.payloads[0].data
        for event in history.events
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and event.activity_task_scheduled_event_attributes.activity_type.name == "DeleteSubjectData"
        and event.activity_task_scheduled_event_attributes.task_queue.name == search_index.task_queue
    ]
    # The index's cursor is the highest entry id deleted; the bot's entries are the store's first 1,234.
    assert [json.loads(call).get("cursor", "") for call in calls] == ["", "500", "1000"]
    receipt = await receipt_of(api, bot_id, account)
    assert receipt["services"][search_index.name] == {"rows_deleted": ENTRIES, "files_deleted": FILES, "remaining": 0}
    check = next(check for check in receipt["checks"] if check.get("service") == search_index.name)
    assert check == {
        "name": f"rows and files of {search_index.name}",
        "expected": 0,
        "found": 0,
        "passed": True,
        "service": search_index.name,
    }
    assert receipt["complete"] is True
    listed = (await api.get("/deletion-services", headers=ADMIN_HEADERS)).json()["services"]
    entry = next(service for service in listed if service["name"] == search_index.name)
    assert entry["last_answered_at"] is not None


async def shown_waiting(api: httpx.AsyncClient, bot_id: str, account: ApiAccount, service: str) -> dict[str, Any]:
    """The deletion's status once it shows `service` waiting for a worker."""
    status = status_of(api, bot_id, account)

    async def waiting() -> dict[str, Any] | None:
        body = await status()
        return body if body["progress"].get(service, {}).get("status") == "waiting" else None

    return await eventually(waiting, "the status shows the service waiting")


@pytest.mark.long
async def test_a_deletion_waits_for_a_stopped_service_alerts_once_stuck_and_finishes_when_it_is_back(
    api: httpx.AsyncClient,
    account: ApiAccount,
    worker: LifecycleWorkers,
    search_index: RegisteredIndex,
    settings: Settings,
    temporal_client: Client,
) -> None:
    bot_id = await a_bot(api, account)
    search_index.index.add(bot_id, entries=ENTRIES, files=FILES)
    # The service's worker is not running: nobody polls its queue.
    assert (await api.delete(f"/bots/{bot_id}", headers=account.headers)).status_code == 202
    shown = await shown_waiting(api, bot_id, account, search_index.name)
    assert shown["status"] == "running"
    assert shown["progress"][search_index.name]["waiting_since"] is not None
    assert search_index.index.count(bot_id) == (ENTRIES, FILES)  # nothing was touched, nothing lost
    await assert_alerts_once_stuck(settings, temporal_client, RunKind.BOT_DELETION, bot_deletion_id(bot_id))

    search_index.start()
    finished = await completed(api, bot_id, account)
    assert finished["progress"][search_index.name] == {"deleted": ENTRIES, "total": ENTRIES}
    assert search_index.index.count(bot_id) == (0, 0)
    receipt = await receipt_of(api, bot_id, account)
    assert receipt["services"][search_index.name] == {"rows_deleted": ENTRIES, "files_deleted": FILES, "remaining": 0}


@dataclass
class FlakyService:
    """Answers every DeleteSubjectData with a transient error (its store down, say) until `fixed`: the deletion
    retries without end and without an operator, which moves nothing."""

    holds: int
    attempts: int = 0
    fixed: bool = False

    @activity.defn(name="DeleteSubjectData")
    async def delete_subject_data(self, request: DeleteRequest) -> DeleteResponse:
        self.attempts += 1
        if not self.fixed:
            raise ApplicationError("its database does not answer", type=TRANSIENT_ERROR)
        deleted, self.holds = self.holds, 0
        return DeleteResponse(rows_deleted=deleted, cursor="done", done=True)

    @activity.defn(name="VerifySubjectErased")
    async def verify_subject_erased(self, request: VerifyRequest) -> VerifyResponse:
        return VerifyResponse(remaining_rows=self.holds)


@pytest.mark.long
async def test_a_transient_error_that_repeats_alerts_once_stuck_and_the_deletion_finishes_once_it_stops(
    api: httpx.AsyncClient,
    account: ApiAccount,
    worker: LifecycleWorkers,
    register: Register,
    settings: Settings,
    temporal_client: Client,
) -> None:
    """workflows/deletion/bot.py's `_after_failure` calls again without end on a transient error: no poison pill,
    no operator, and so nobody would see it but for the stuck-work alert."""
    _, queue = await register("flaky")
    service = FlakyService(holds=5)
    bot_id = await a_bot(api, account)
    async with Worker(
        temporal_client, task_queue=queue, activities=[service.delete_subject_data, service.verify_subject_erased]
    ):
        assert (await api.delete(f"/bots/{bot_id}", headers=account.headers)).status_code == 202

        async def retried_again() -> None:
            seen = service.attempts
            await eventually(lambda: service.attempts, "the call is tried again", until=lambda n: n > seen + 1)

        await eventually(lambda: service.attempts, "the service is called", until=lambda n: n >= 2)
        await assert_alerts_once_stuck(
            settings, temporal_client, RunKind.BOT_DELETION, bot_deletion_id(bot_id), meanwhile=retried_again
        )
        assert (await status_of(api, bot_id, account)())["status"] == "running"
        service.fixed = True
        await completed(api, bot_id, account)
    assert service.holds == 0


@pytest.mark.long
async def test_retiring_a_service_a_deletion_waits_for_ends_it_incomplete_and_says_so(
    api: httpx.AsyncClient, account: ApiAccount, worker: LifecycleWorkers, search_index: RegisteredIndex
) -> None:
    """An operator's decision, never a silent skip: the receipt names the retirement, and what the service still
    holds is not counted (null), not 0."""
    bot_id = await a_bot(api, account)
    search_index.index.add(bot_id, entries=ENTRIES, files=FILES)
    assert (await api.delete(f"/bots/{bot_id}", headers=account.headers)).status_code == 202
    await shown_waiting(api, bot_id, account, search_index.name)
    status = status_of(api, bot_id, account)
    retired = await api.delete(f"/deletion-services/{search_index.name}", headers=ADMIN_HEADERS)
    assert retired.status_code == 204

    await eventually(status, "the deletion ends incomplete", until=lambda body: body["status"] == "incomplete")
    receipt = await receipt_of(api, bot_id, account)
    assert receipt["complete"] is False
    assert receipt["services"][search_index.name] == {"rows_deleted": 0, "files_deleted": 0, "remaining": None}
    assert receipt["remaining"] == {search_index.name: None}
    (check,) = [check for check in receipt["checks"] if check.get("service") == search_index.name]
    assert check["passed"] is False and check["found"] is None
    retirements = [action for action in receipt["operator_actions"] if action["action"] == "retire"]
    assert [action["target"] for action in retirements] == [search_index.name]
    # The bot row stays with the data the service still holds; the index was never touched.
    (bot_row,) = [check for check in receipt["checks"] if check["name"] == "bot row"]
    assert bot_row["found"] == 1
    assert search_index.index.count(bot_id) == (ENTRIES, FILES)


@activity.defn(name="DeleteSubjectData")
async def refuse_to_delete(request: DeleteRequest) -> DeleteResponse:
    raise ApplicationError("the index is corrupt", type="IndexCorrupt", non_retryable=True)


@pytest.mark.long
async def test_a_service_that_answers_errors_goes_to_an_operator(
    api: httpx.AsyncClient,
    account: ApiAccount,
    worker: LifecycleWorkers,
    register: Register,
    temporal_client: Client,
    settings: Settings,
) -> None:
    """A poison pill, as for a built-in service: waiting_for_operator, an alert, and the operator's skip ends
    the deletion incomplete, the receipt saying so."""
    name, queue = await register("broken")
    bot_id = await a_bot(api, account)
    async with Worker(temporal_client, task_queue=queue, activities=[refuse_to_delete]):
        assert (await api.delete(f"/bots/{bot_id}", headers=account.headers)).status_code == 202
        status = status_of(api, bot_id, account)

        async def stuck() -> bool:
            return (await status())["status"] == "waiting_for_operator"

        await eventually(stuck, "the deletion waits for an operator")
        engine = create_async_engine(settings.database_url)
        try:

            async def alert_subjects() -> list[str]:
                # The status is recorded as the run starts waiting; the alert is raised just after.
                async with engine.connect() as conn:
                    found = await conn.execute(
                        text("SELECT subject FROM alerts WHERE workflow_id = :w"), {"w": bot_deletion_id(bot_id)}
                    )
                    return list(found.scalars())

            await eventually(alert_subjects, "the operator is alerted")
            assert await alert_subjects() == [f"bot deletion stuck on {name}"]
        finally:
            await engine.dispose()
        handle = temporal_client.get_workflow_handle(bot_deletion_id(bot_id))
        assert "skipping" in await handle.execute_update("skip", result_type=str)

        async def incomplete() -> bool:
            return (await status())["status"] == "incomplete"

        await eventually(incomplete, "the deletion ends incomplete")
    receipt = await receipt_of(api, bot_id, account)
    assert receipt["complete"] is False
    assert receipt["services"][name]["rows_deleted"] == 0
    assert [action["action"] for action in receipt["operator_actions"]] == ["skip"]


@dataclass
class RecordingService:
    """A service of two slices that keeps every DeleteRequest it gets, and holds its first call until released,
    so the test can change the budget while a slice is under way."""

    requests: list[DeleteRequest]
    release: asyncio.Event

    @activity.defn(name="DeleteSubjectData")
    async def delete(self, request: DeleteRequest) -> DeleteResponse:
        self.requests.append(request)
        if len(self.requests) == 1:
            await self.release.wait()
        done = len(self.requests) >= 2
        return DeleteResponse(rows_deleted=1, cursor=str(len(self.requests)), done=done)

    @activity.defn(name="VerifySubjectErased")
    async def verify(self, request: VerifyRequest) -> VerifyResponse:
        return VerifyResponse()


async def own_budget(api: httpx.AsyncClient, service: str, rows_per_second: int | None) -> None:
    """Give the service a rows/s of its own (None: its share of the budget again), the shared budget unchanged."""
    shared = (await api.get("/deletion-budget", headers=ADMIN_HEADERS)).json()["rows_per_second"]
    body = {"rows_per_second": shared, "services": {service: rows_per_second}}
    answer = await api.put("/deletion-budget", json=body, headers=ADMIN_HEADERS)
    assert answer.status_code == 200, answer.text


async def test_a_service_with_a_budget_of_its_own_gets_it_and_its_changes(
    api: httpx.AsyncClient,
    account: ApiAccount,
    worker: LifecycleWorkers,
    register: Register,
    temporal_client: Client,
) -> None:
    name, queue = await register("paced")
    service = RecordingService([], asyncio.Event())
    bot_id = await a_bot(api, account)
    await own_budget(api, name, 1_500)
    try:
        async with Worker(temporal_client, task_queue=queue, activities=[service.delete, service.verify]):
            assert (await api.delete(f"/bots/{bot_id}", headers=account.headers)).status_code == 202
            await eventually(lambda: service.requests, "the service gets its first call")
            await own_budget(api, name, 3_000)  # while the first slice is under way
            service.release.set()
            await completed(api, bot_id, account)
    finally:
        await own_budget(api, name, None)
    assert [request.rows_per_second for request in service.requests] == [1_500, 3_000]
    receipt = await receipt_of(api, bot_id, account)
    changes = [action for action in receipt["operator_actions"] if action.get("service") == name]
    assert [(change["action"], change["rows_per_second"]) for change in changes] == [("budget", 3_000)]


async def test_a_service_registers_itself_at_start_up(
    api: httpx.AsyncClient, settings: Settings, temporal_client: Client, tmp_path: Path
) -> None:
    """Through the same call an admin makes, to a gateway API process of its own."""
    gateway = ApiProcess(settings, tmp_path / "api.log")
    await asyncio.to_thread(gateway.start)
    suffix = uuid.uuid4().hex[:8]
    name, queue = f"self-{suffix}", f"self-queue-{suffix}"
    process = index_process(
        temporal_client,
        queue,
        tmp_path / "index",
        *("--register-with", gateway.url, "--name", name),
        GATEWAY_ADMIN_TOKEN=ADMIN_TOKEN,
    )
    process.start()
    try:

        async def registered() -> dict[str, Any] | None:
            listed = (await api.get("/deletion-services", headers=ADMIN_HEADERS)).json()["services"]
            return next((service for service in listed if service["name"] == name), None)

        entry = await eventually(registered, "the service registers itself")
        assert entry["task_queue"] == queue and entry["retired_at"] is None
    finally:
        process.terminate()
        gateway.terminate()
        await api.delete(f"/deletion-services/{name}", headers=ADMIN_HEADERS)


@pytest.mark.parametrize("transport", ["queue", "nexus"])
async def test_an_account_export_holds_the_registered_services_part(
    api: httpx.AsyncClient,
    account: ApiAccount,
    worker: LifecycleWorkers,
    search_index: RegisteredIndex,
    temporal_client: Client,
    settings: Settings,
    transport: str,
) -> None:
    """On its queue, or behind an endpoint (ExportSubjectData as a workflow in the team's namespace)."""
    bot_id = await a_bot(api, account)
    search_index.index.add(bot_id, entries=4, files=2)
    search_index.index.add(str(uuid.uuid4()), entries=3, files=1)  # a bot of no account of the export
    if transport == "nexus":
        search_index = await behind_an_endpoint(
            api, temporal_client, search_index.name, search_index.index.root, env=s3_environment(settings)
        )
    search_index.start()
    try:
        requested = await api.post("/account/exports", headers=account.headers)
        assert requested.status_code == 202, requested.text
        status = await eventually(
            lambda: _json(api.get(requested.json()["status_url"], headers=account.headers)),
            "the export is ready",
            until=lambda answer: answer["status"] == "ready",
        )
    finally:
        search_index.stop()
    archive = zipfile.ZipFile(io.BytesIO((await api.get(status["download_url"])).content))

    lines = archive.read(f"services/{search_index.name}/{search_index.name}.ndjson").decode().splitlines()
    assert {json.loads(line)["bot_id"] for line in lines} == {bot_id}
    services = json.loads(archive.read("manifest.json"))["services"]
    assert services[search_index.name] == {"rows": 4, "files": 2, "files_missing": 0, "files_refused": []}
    # Every other registered service (the project's own) was asked too, and holds nothing of this bot.
    assert all(counts["rows"] == 0 for name, counts in services.items() if name != search_index.name)


async def _json(answer: Awaitable[httpx.Response]) -> Any:
    return (await answer).json()


async def test_one_deletion_reaches_services_on_queues_and_behind_an_endpoint_and_a_service_moves_between_them(
    api: httpx.AsyncClient,
    settings: Settings,
    worker: LifecycleWorkers,
    search_index: RegisteredIndex,
    temporal_client: Client,
) -> None:
    """The search index on a task queue of the gateway's namespace for one deletion, then moved by its team to its
    own namespace behind an endpoint for the next: each deletion reaches it and the project's services (on their
    queues) in one run, the second through Nexus only, and nothing of either bot is missed or counted twice; the
    preview counts through the endpoint as well."""
    seeded = await seed(settings, bots=2, rows=300, documents=2)
    headers = {"Authorization": f"Bearer {seeded.api_key}"}
    on_queue, behind_endpoint = seeded.bot_ids
    for bot_id in seeded.bot_ids:
        search_index.index.add(bot_id, entries=ENTRIES, files=FILES)
    expected = {**rows_per_service(300, 2), search_index.name: ENTRIES}

    async def deleted(bot_id: str) -> dict[str, Any]:
        assert (await api.delete(f"/bots/{bot_id}", headers=headers)).status_code in (200, 202)
        status = await eventually(
            lambda: _json(api.get(f"/bots/{bot_id}/deletion", headers=headers)),
            "the bot deletion completes",
            until=lambda body: body["status"] == "completed",
        )
        assert {name: progress["deleted"] for name, progress in status["progress"].items()} == expected
        receipt = (await _json(api.get(f"/bots/{bot_id}/deletion/receipt", headers=headers)))["receipt"]
        assert receipt["complete"] is True
        return dict(receipt)

    search_index.start()
    receipt = await deleted(on_queue)
    assert receipt["services"][search_index.name] == {"rows_deleted": ENTRIES, "files_deleted": FILES, "remaining": 0}
    search_index.stop()

    team = await behind_an_endpoint(api, temporal_client, search_index.name, search_index.index.root)
    team.start()
    try:
        # A preview counts through the endpoint too (the synchronous operation), and changes nothing.
        preview = await api.get(f"/bots/{behind_endpoint}/deletion/preview", headers=headers)
        assert preview.status_code == 200, preview.text
        assert {name: counted["rows"] for name, counted in preview.json()["services"].items()} == expected
        receipt = await deleted(behind_endpoint)
    finally:
        team.stop()
    assert receipt["services"][team.name] == {"rows_deleted": ENTRIES, "files_deleted": FILES, "remaining": 0}
    assert set(receipt["services"]) == set(expected)
    assert search_index.index.count(on_queue) == search_index.index.count(behind_endpoint) == (0, 0)
    history = await temporal_client.get_workflow_handle(bot_deletion_id(behind_endpoint)).fetch_history()
    # Three slices (500, 500, 234) and the count, all through the endpoint; no activity on a queue of the index.
    assert nexus_calls(history, team.endpoint) == [*["DeleteSubjectData"] * 3, "VerifySubjectErased"]
    assert not [
        event
        for event in history.events
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and event.activity_task_scheduled_event_attributes.task_queue.name in (search_index.task_queue, team.task_queue)
    ]


async def test_a_service_whose_endpoint_does_not_exist_waits_alerts_once_stuck_and_goes_on_once_it_is_created(
    api: httpx.AsyncClient,
    account: ApiAccount,
    worker: LifecycleWorkers,
    settings: Settings,
    temporal_client: Client,
    tmp_path: Path,
) -> None:
    team = await behind_an_endpoint(
        api, temporal_client, f"team-{uuid.uuid4().hex[:8]}", tmp_path / "team-index", endpoint_created=False
    )
    bot_id = await a_bot(api, account)
    team.index.add(bot_id, entries=5, files=1)
    team.start()
    try:
        assert (await api.delete(f"/bots/{bot_id}", headers=account.headers)).status_code == 202
        shown = await shown_waiting(api, bot_id, account, team.name)
        assert shown["status"] == "running"
        assert team.index.count(bot_id) == (5, 1)
        # Asking again whether the endpoint exists is not progress: the run alerts as any stuck one does.
        await assert_alerts_once_stuck(settings, temporal_client, RunKind.BOT_DELETION, bot_deletion_id(bot_id))

        await create_endpoint(temporal_client, team)
        finished = await completed(api, bot_id, account)
    finally:
        team.stop()
    assert finished["progress"][team.name] == {"deleted": 5, "total": 5}
    assert team.index.count(bot_id) == (0, 0)


@nexusrpc.handler.service_handler(service=DeletionNexusService)
class StoreDown:
    """A service's handler whose every call fails with a retryable error (its store down): Temporal retries each
    start, and after a few failures in a row opens its circuit breaker for the endpoint."""

    @nexusrpc.handler.sync_operation
    async def delete_subject_data(
        self, ctx: nexusrpc.handler.StartOperationContext, request: DeleteRequest
    ) -> DeleteResponse:
        raise RuntimeError("the store is down")

    @nexusrpc.handler.sync_operation
    async def verify_subject_erased(
        self, ctx: nexusrpc.handler.StartOperationContext, request: VerifyRequest
    ) -> VerifyResponse:
        raise RuntimeError("the store is down")

    @nexusrpc.handler.sync_operation
    async def export_subject_data(
        self, ctx: nexusrpc.handler.StartOperationContext, request: ExportRequest
    ) -> ExportResponse:
        raise RuntimeError("the store is down")


async def test_an_open_circuit_breaker_shows_as_the_reason_the_service_waits(
    api: httpx.AsyncClient,
    account: ApiAccount,
    worker: LifecycleWorkers,
    settings: Settings,
    temporal_client: Client,
    tmp_path: Path,
) -> None:
    """The breaker (per caller namespace and endpoint, so this test's alone) opens after a handful of failed
    starts; the run's next call is then BLOCKED, which the reconciler records and the status shows."""
    team = await behind_an_endpoint(api, temporal_client, f"team-{uuid.uuid4().hex[:8]}", tmp_path / "team-index")
    team_view = await team_client(temporal_client)
    bot_id = await a_bot(api, account)
    run = temporal_client.get_workflow_handle(bot_deletion_id(bot_id))

    async def blocked() -> str | None:
        return blocked_endpoints(await run.describe()).get(team.endpoint)

    try:
        async with Worker(team_view, task_queue=team.task_queue, nexus_service_handlers=[StoreDown()]):
            assert (await api.delete(f"/bots/{bot_id}", headers=account.headers)).status_code == 202
            await shown_waiting(api, bot_id, account, team.name)
            reason = await eventually(blocked, "the breaker holds the run's call back")
            assert "circuit breaker" in reason
            await run_reconciler(temporal_client, settings)
            shown = await status_of(api, bot_id, account)()
    finally:
        await run.terminate("the test is over")
    assert shown["progress"][team.name]["status"] == "waiting"
    assert shown["progress"][team.name]["reason"] == f"Temporal holds back the calls to its Nexus endpoint: {reason}"


async def test_cancelling_a_deletion_cancels_its_slice_in_the_service_namespace(
    api: httpx.AsyncClient,
    account: ApiAccount,
    worker: LifecycleWorkers,
    register: Register,
    temporal_client: Client,
    tmp_path: Path,
) -> None:
    """A slice paced to the smallest budget (100 rows/s) runs for 5 s in the team's namespace; cancelling the
    gateway's deletion cancels it there too: no handler workflow is left running to delete what nobody counts. Also
    while another service's call is in flight on its queue, which a cancel ends at once (an activity's): the run
    still waits for the operation's cancellation before it closes."""
    _, queue = await register("held")
    held = RecordingService([], asyncio.Event())
    team = await behind_an_endpoint(api, temporal_client, f"team-{uuid.uuid4().hex[:8]}", tmp_path / "team-index")
    bot_id = await a_bot(api, account)
    team.index.add(bot_id, entries=ENTRIES, files=FILES)
    await own_budget(api, team.name, 100)
    team.start()
    team_view = await team_client(temporal_client)

    async def statuses() -> list[WorkflowExecutionStatus | None]:
        return await slice_statuses(team_view, bot_id)

    try:
        async with Worker(temporal_client, task_queue=queue, activities=[held.delete, held.verify]):
            assert (await api.delete(f"/bots/{bot_id}", headers=account.headers)).status_code == 202
            await eventually(statuses, "a slice runs in the team's namespace", until=lambda found: RUNNING in found)
            await eventually(lambda: held.requests, "the other service's call is in flight")
            await temporal_client.get_workflow_handle(bot_deletion_id(bot_id)).cancel()
            slices_run = await eventually(
                statuses, "the slice is cancelled", until=lambda found: RUNNING not in found and CANCELED in found
            )
            status = await eventually(
                status_of(api, bot_id, account),
                "the deletion ends cancelled",
                until=lambda body: body["status"] == "cancelled",
            )
            held.release.set()
    finally:
        team.stop()
        await own_budget(api, team.name, None)
    assert status["status"] == "cancelled"
    # Each slice took its 500 entries before pacing itself; nothing went on deleting after the cancel.
    assert team.index.count(bot_id) == (ENTRIES - 500 * len(slices_run), FILES)


@pytest.mark.long
async def test_a_worker_killed_mid_slice_behind_an_endpoint_is_waited_for_and_every_entry_counted_once(
    api: httpx.AsyncClient,
    account: ApiAccount,
    worker: LifecycleWorkers,
    temporal_client: Client,
    tmp_path: Path,
) -> None:
    """kill -9 of the team's only worker while a slice is in flight (held before it deletes anything): the slice's
    workflow in the team's namespace ends at its bound, though no worker runs it, and the gateway's next call, taken
    by no worker, shows the service `waiting`, as on a task queue; once a worker is back the deletion finishes, and
    the lost slice, never run again, counts nothing twice."""
    store = tmp_path / "team-index"
    # The lost slice's workflow closes at the index's own bound, shorter than the handler's: its slices only hold.
    held = {HOLD_SLICES: "1", SLICE_BOUND_SECONDS: "10"}
    team = await behind_an_endpoint(api, temporal_client, f"team-{uuid.uuid4().hex[:8]}", store, env=held)
    back = index_process(temporal_client, team.task_queue, store, "--name", team.name, "--namespace", SERVICE_NAMESPACE)
    bot_id = await a_bot(api, account)
    team.index.add(bot_id, entries=ENTRIES, files=FILES)
    team.start()
    try:
        assert (await api.delete(f"/bots/{bot_id}", headers=account.headers)).status_code == 202
        await eventually(lambda: "holding a slice" in team.process.log(), "a slice is in flight")
        team.process.kill()
        shown = await shown_waiting(api, bot_id, account, team.name)
        assert shown["status"] == "running"
        assert team.index.count(bot_id) == (ENTRIES, FILES)
        back.start()
        finished = await completed(api, bot_id, account)
    finally:
        team.stop()
        if back.process is not None:
            back.terminate()
    assert finished["progress"][team.name] == {"deleted": ENTRIES, "total": ENTRIES}
    assert team.index.count(bot_id) == (0, 0)
    receipt = await receipt_of(api, bot_id, account)
    assert receipt["services"][team.name] == {"rows_deleted": ENTRIES, "files_deleted": FILES, "remaining": 0}
    team_view = await team_client(temporal_client)

    async def ended() -> Counter[WorkflowExecutionStatus | None]:
        return Counter(await slice_statuses(team_view, bot_id))

    # The killed slice's workflow timed out; the three that deleted (500, 500, then 234 and the files) completed.
    found = await eventually(ended, "every slice is listed", until=lambda statuses: statuses.total() == 4)
    assert found == {WorkflowExecutionStatus.TIMED_OUT: 1, WorkflowExecutionStatus.COMPLETED: 3}
