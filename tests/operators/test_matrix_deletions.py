"""The operator-action matrix for deletions, driven by the real `temporal` binary.

Workflow types (bot deletion, account deletion), crossed with actions (reset to the first task, the last
task, a task completed in the middle; cancel; terminate), crossed with when (while the run is open, after
it finished). Then the API's repeated request, and, where an
operator stopped the run, the reconciler (which must leave a deliberate stop alone). Afterwards nothing of
the deleted bot or account is left, the account got exactly one confirmation, `deletion_progress` counts
every seeded row once, and the latest run completed.

Each deletion spans both transports: beside the project's services on their task queues, the search index runs
as its own team runs it, in its namespace behind a Nexus endpoint (search_team); its entries and files are gone
and counted once too, whatever run of a reset or repeated deletion called it.

"Open" is held deterministically by the deletion's own pause: the bot deletion starts paused, the account
deletion starts with a `pause` signal (signal-with-start), so its bot deletion starts paused too. The action
lands while the run waits, before the data is deleted; a reset run that comes back paused is resumed by the
operator, as the runbook says.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from email import message_from_bytes
from typing import Any

import httpx
import pytest
import pytest_asyncio
from fastapi import FastAPI
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionDescription, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from devstack.seed import rows_per_service, seed
from devstack.smtp_sink import SmtpSink
from lifecycle.deletion.contracts import DeletionStatus
from lifecycle.deletion.workflow_types import account_deletion_id, bot_deletion_id
from lifecycle.settings import Settings
from tests.conftest import ADMIN_HEADERS
from tests.db import connection
from tests.deletion.helpers import (
    remaining_objects,
    remaining_rows,
    run_reconciler,
    start_paused_account_deletion,
)
from tests.deletion.search_team import RegisteredIndex, behind_an_endpoint
from tests.eventually import eventually
from tests.operators.cli import AsyncCli
from tests.operators.starts import start_bot_deletion
from worker import LifecycleWorkers

ROWS = 200
# Two slices of the search index's (500 at most), so a reset may land between them.
INDEX_ENTRIES, INDEX_FILES = 600, 2
CONFIRMATION = "Your account has been deleted"

RESETS = {
    "reset-first": ("--type", "FirstWorkflowTask"),
    "reset-last": ("--type", "LastWorkflowTask"),
    "reset-middle": (),  # --event-id of a WorkflowTaskCompleted between the first and the last
}
ACTIONS = (*RESETS, "cancel", "terminate")
STOPPED = {"cancel": WorkflowExecutionStatus.CANCELED, "terminate": WorkflowExecutionStatus.TERMINATED}


@dataclass(frozen=True)
class Subject:
    kind: str
    account_id: str
    api_key: str
    address: str
    bot_ids: list[str]

    @property
    def workflow_id(self) -> str:
        return bot_deletion_id(self.bot_ids[0]) if self.kind == "bot" else account_deletion_id(self.account_id)


@pytest_asyncio.fixture(scope="module")
async def search_team(
    app: FastAPI, temporal_client: Client, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[RegisteredIndex]:
    """The search index behind its team's endpoint, registered beside the project's services for this module's
    deletions; one worker process serves every case. Retired afterwards, so no later deletion calls it."""
    name = f"search-team-{uuid.uuid4().hex[:8]}"
    store = tmp_path_factory.mktemp("search-team") / "index"
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://testserver") as api:
        team = await behind_an_endpoint(api, temporal_client, name, store)
        team.start()
        try:
            yield team
        finally:
            team.stop()
            assert (await api.delete(f"/deletion-services/{name}", headers=ADMIN_HEADERS)).status_code == 204


async def _fetch(settings: Settings, sql: str, *args: object) -> Any:
    async with connection(settings.database_url) as conn:
        return await conn.fetch(sql, *args)


async def _describe(client: Client, workflow_id: str) -> WorkflowExecutionDescription:
    return await client.get_workflow_handle(workflow_id).describe()


async def _query_progress(client: Client, workflow_id: str) -> DeletionStatus | None:
    """The open run's progress; None if no run of that id is open (or none started yet)."""
    try:
        described = await _describe(client, workflow_id)
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return None
        raise
    if described.status != WorkflowExecutionStatus.RUNNING:
        return None
    return await client.get_workflow_handle(workflow_id).query("progress", result_type=DeletionStatus)


async def _seeded(settings: Settings, kind: str, team: RegisteredIndex) -> Subject:
    seeded = await seed(settings, bots=1, rows=ROWS)
    for bot_id in seeded.bot_ids:
        team.index.add(bot_id, entries=INDEX_ENTRIES, files=INDEX_FILES)
    address = (await _fetch(settings, "SELECT email FROM accounts WHERE id = $1::uuid", seeded.account_id))[0][0]
    return Subject(kind, seeded.account_id, seeded.api_key, address, list(seeded.bot_ids))


async def _request(api: httpx.AsyncClient, subject: Subject) -> httpx.Response:
    """The API's request, as a user repeats it (bot) or an admin re-drives it (account, whose keys are revoked)."""
    if subject.kind == "bot":
        headers = {"Authorization": f"Bearer {subject.api_key}"}
        return await api.delete(f"/bots/{subject.bot_ids[0]}", headers=headers)
    return await api.post(f"/accounts/{subject.account_id}/deletion", headers=ADMIN_HEADERS)


async def _start_open(api: httpx.AsyncClient, client: Client, settings: Settings, subject: Subject) -> None:
    """Start the run paused, then let the API's request join it (it marks and records as usual)."""
    if subject.kind == "bot":
        await start_bot_deletion(
            client, settings.task_queue, bot_id=subject.bot_ids[0], account_id=subject.account_id, paused=True
        )
    else:
        await start_paused_account_deletion(client, settings, subject.account_id)
    joined = await _request(api, subject)
    assert joined.status_code == 202, joined.text
    assert joined.json()["status"] == "accepted"

    bot_run = bot_deletion_id(subject.bot_ids[0])

    async def bot_deletion_paused() -> bool:
        progress = await _query_progress(client, bot_run)
        return progress is not None and progress.status == "paused"

    await eventually(bot_deletion_paused, "the bot deletion waits, paused")


async def _workflow_tasks_completed(client: Client, workflow_id: str) -> list[int]:
    handle = client.get_workflow_handle(workflow_id)
    return [
        event.event_id
        async for event in handle.fetch_history_events()
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
    ]


async def _act(cli: AsyncCli, client: Client, subject: Subject, action: str) -> Any:
    wid = subject.workflow_id
    if action in RESETS:
        how = RESETS[action]
        if not how:
            completed = await _workflow_tasks_completed(client, wid)
            assert len(completed) >= 3, f"no workflow task between the first and the last: {completed}"
            how = ("--event-id", str(completed[len(completed) // 2]))
        return await cli.run("workflow", "reset", "--workflow-id", wid, *how, "--reason", "matrix", check=False)
    if action == "cancel":
        return await cli.run("workflow", "cancel", "--workflow-id", wid, check=False)
    return await cli.run("workflow", "terminate", "--workflow-id", wid, "--reason", "matrix", check=False)


def _confirmations(sink: SmtpSink, address: str) -> list[str]:
    messages = [message_from_bytes(path.read_bytes()) for path in sink.messages()]
    return [str(m["Message-ID"]) for m in messages if m["To"] == address and m["Subject"] == CONFIRMATION]


async def _assert_nothing_left(settings: Settings, sink: SmtpSink, subject: Subject, team: RegisteredIndex) -> None:
    expected = {**rows_per_service(ROWS), team.name: INDEX_ENTRIES}
    for bot_id in subject.bot_ids:
        assert set((await remaining_rows(settings.database_url, bot_id)).values()) == {0}
        assert await remaining_objects(settings, bot_id) == 0
        assert team.index.count(bot_id) == (0, 0)
        assert not await _fetch(settings, "SELECT 1 FROM bots WHERE id = $1::uuid", bot_id)
        recorded = await _fetch(
            settings,
            "SELECT service, deleted, total, files_deleted, done, skipped FROM deletion_progress"
            " WHERE workflow_id = $1",
            bot_deletion_id(bot_id),
        )
        # Every seeded row counted once, whatever runs the work was spread over, and whichever transport.
        assert {r["service"]: (r["deleted"], r["total"]) for r in recorded} == {s: (n, n) for s, n in expected.items()}
        assert next(r["files_deleted"] for r in recorded if r["service"] == team.name) == INDEX_FILES
        assert all(r["done"] and not r["skipped"] for r in recorded)
    account = await _fetch(settings, "SELECT 1 FROM accounts WHERE id = $1::uuid", subject.account_id)
    keys = await _fetch(settings, "SELECT 1 FROM api_keys WHERE account_id = $1::uuid", subject.account_id)
    mails = _confirmations(sink, subject.address)
    if subject.kind == "bot":
        # A bot deletion leaves its account alone and mails nobody.
        assert account and keys and mails == []
    else:
        assert not account and not keys
        # At least once, deduplicated by Message-ID: one distinct Message-ID, whatever a retry resent.
        assert len(set(mails)) == 1, mails


async def _where_it_stands(client: Client, workflow_id: str, depth: int = 0) -> str:
    """For a failure message: the open run's pending work and last events, then the same for its children."""
    handle = client.get_workflow_handle(workflow_id)
    raw = (await handle.describe()).raw_description
    indent = "  " * depth
    lines = [f"{indent}{workflow_id}: status {raw.workflow_execution_info.status}"]
    lines += [
        f"{indent}  pending {a.activity_type.name} attempt {a.attempt}: {a.last_failure.message}"
        for a in raw.pending_activities
    ]
    events = [event async for event in handle.fetch_history_events()]
    lines += [f"{indent}  event {e.event_id} {EventType.Name(e.event_type)}" for e in events[-12:]]
    for child in raw.pending_children:
        lines.append(await _where_it_stands(client, child.workflow_id, depth + 1))
    return "\n".join(lines)


async def _assert_latest_completed(client: Client, workflow_id: str) -> WorkflowExecutionDescription:
    async def closed() -> WorkflowExecutionDescription | None:
        described = await _describe(client, workflow_id)
        return described if described.status != WorkflowExecutionStatus.RUNNING else None

    try:
        described = await eventually(closed, f"the latest run of {workflow_id} closes")
    except AssertionError as err:
        raise AssertionError(f"{err}\n{await _where_it_stands(client, workflow_id)}") from None
    assert described.status == WorkflowExecutionStatus.COMPLETED
    result = await client.get_workflow_handle(workflow_id).result()
    assert result["status"] == "completed"
    return described


@pytest.mark.parametrize("when", ["open", "finished"])
@pytest.mark.parametrize("action", ACTIONS)
@pytest.mark.parametrize("kind", ["bot", "account"])
async def test_operator_action_keeps_the_promise(
    kind: str,
    action: str,
    when: str,
    cli: AsyncCli,
    api: httpx.AsyncClient,
    temporal_client: Client,
    settings: Settings,
    smtp_sink: SmtpSink,
    worker: LifecycleWorkers,
    search_team: RegisteredIndex,
) -> None:
    subject = await _seeded(settings, kind, search_team)
    wid = subject.workflow_id
    if when == "open":
        await _start_open(api, temporal_client, settings, subject)
        # A few more workflow tasks, as an operator makes them: the middle one is a reset point.
        await cli.run("workflow", "signal", "--workflow-id", wid, "--name", "pause")
        if kind == "bot":
            await cli.run(
                "workflow", "update", "execute", "--workflow-id", wid, "--name", "set_batch_size", "--input", "100"
            )
    else:
        started = (
            await _request(api, subject)
            if kind == "bot"
            else await api.delete("/account", headers={"Authorization": f"Bearer {subject.api_key}"})
        )
        assert started.status_code == 202, started.text
        await _assert_latest_completed(temporal_client, wid)
        await _assert_nothing_left(settings, smtp_sink, subject, search_team)
    before = await _describe(temporal_client, wid)

    acted = await _act(cli, temporal_client, subject, action)

    if when == "finished" and action in STOPPED:
        # Meaningless on a closed run, and nothing changes. The CLI refuses a terminate; a cancel request on
        # a closed run it reports as done (server 1.32 accepts it and does nothing), so the state decides.
        if action == "terminate":
            assert acted.returncode != 0 and "already completed" in acted.stderr, acted.stdout
        after = await _describe(temporal_client, wid)
        assert (after.run_id, after.status) == (before.run_id, WorkflowExecutionStatus.COMPLETED)
    else:
        assert acted.returncode == 0, acted.stdout + acted.stderr
    if when == "open" and action in STOPPED:

        async def stopped() -> bool:
            return (await _describe(temporal_client, wid)).status == STOPPED[action]

        await eventually(stopped, f"the run is {STOPPED[action].name}")
        if action == "cancel":
            # A cancelled run records its stop itself, as it stops: no reconciler pass needed.
            assert (await _shown(api, subject))["status"] == "cancelled"
        # A deliberate stop: the reconciler leaves it for the repeated request, and records it where the API reads.
        await run_reconciler(temporal_client, settings)
        after = await _describe(temporal_client, wid)
        assert (after.run_id, after.status) == (before.run_id, STOPPED[action])
        shown = await _shown(api, subject)
        assert shown["status"] == {"cancel": "cancelled", "terminate": "terminated"}[action]
        assert shown["resume"] is not None
    if when == "open" and action in RESETS:
        # The reset run comes back where the old one was: paused. The operator resumes it.
        assert (await _describe(temporal_client, wid)).run_id != before.run_id
        await cli.run("workflow", "signal", "--workflow-id", wid, "--name", "resume")

    repeated = await _request(api, subject)
    assert repeated.status_code == 202, repeated.text
    final = await _assert_latest_completed(temporal_client, wid)
    await _assert_nothing_left(settings, smtp_sink, subject, search_team)
    # Truthful whatever the operator did: the last run recorded how it ended.
    assert (await _shown(api, subject))["status"] == "completed"
    if when == "finished" and action in STOPPED:
        # Nothing was left to do: the repeat started no run.
        assert final.run_id == before.run_id
        assert repeated.json()["status"] == "completed"


async def _shown(api: httpx.AsyncClient, subject: Subject) -> dict[str, Any]:
    """The deletion as the status API shows it: the bot's to its account, the account's to an admin."""
    if subject.kind == "bot":
        answer = await api.get(f"/bots/{subject.bot_ids[0]}/deletion", headers=_headers(subject))
    else:
        answer = await api.get(f"/accounts/{subject.account_id}/deletion", headers=ADMIN_HEADERS)
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def _headers(subject: Subject) -> dict[str, str]:
    return {"Authorization": f"Bearer {subject.api_key}"}
