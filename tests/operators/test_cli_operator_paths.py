"""The operator's paths through a deletion, with real faults, real workers and the real `temporal` CLI:
an account ending `incomplete` after skips (then finished by the admin's re-drive), an account-level `retry`
reaching its stuck bot deletion, the reconciler's restart rule, and a failing alert webhook."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from email import message_from_bytes
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.service import RPCError, RPCStatusCode

from activities.alerts import WEBHOOK_ATTEMPTS
from api.deletion.requests import request_account_deletion
from devstack.seed import seed
from devstack.smtp_sink import SmtpSink
from lifecycle.deletion.contracts import BotDeletionInput, DeletionStatus
from lifecycle.deletion.workflow_types import (
    RECONCILER_WORKFLOW,
    account_deletion_id,
    bot_deletion_id,
    bot_deletion_options,
)
from lifecycle.settings import Settings
from lifecycle.shared_contracts import ReconcileResult
from lifecycle.statuses import AlertDelivery, DeletionState
from tests.conftest import ADMIN_HEADERS
from tests.db import connection
from tests.deletion.broken_service import broken_service
from tests.deletion.helpers import remaining_objects, remaining_rows
from tests.eventually import eventually
from tests.operators.cli import AsyncCli
from tests.operators.starts import start_bot_deletion
from tests.workers import own_queue, own_worker
from worker import LifecycleWorkers

ROWS = 200
CONFIRMATION = "Your account has been deleted"


async def _fetch(settings: Settings, sql: str, *args: object) -> list[Any]:
    async with connection(settings.database_url) as conn:
        return list(await conn.fetch(sql, *args))


def _confirmations(sink: SmtpSink, address: str) -> list[str]:
    messages = [message_from_bytes(path.read_bytes()) for path in sink.messages()]
    return [str(m["Message-ID"]) for m in messages if m["To"] == address and m["Subject"] == CONFIRMATION]


async def _progress(client: Client, workflow_id: str) -> DeletionStatus | None:
    """The open run's progress, None while no run of that id is open."""
    try:
        described = await client.get_workflow_handle(workflow_id).describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return None
        raise
    if described.status != WorkflowExecutionStatus.RUNNING:
        return None
    return await client.get_workflow_handle(workflow_id).query("progress", result_type=DeletionStatus)


async def _update(cli: AsyncCli, workflow_id: str, name: str) -> str:
    answer = await cli.json("workflow", "update", "execute", "--workflow-id", workflow_id, "--name", name)
    return str(answer["result"])


async def _start_account_deletion(app: FastAPI, client: Client, settings: Settings, account_id: str) -> None:
    async with app.state.sessionmaker() as session:
        await request_account_deletion(session, client, settings, account_id=uuid.UUID(account_id))


@dataclass(frozen=True)
class Deleting:
    bot_id: str
    account_id: str
    address: str


async def _one_bot_account_deleting(app: FastAPI, client: Client, settings: Settings, task_queue: str) -> Deleting:
    """An account with one seeded bot whose deletion runs on `task_queue` (the test's own worker)."""
    seeded = await seed(settings, bots=1, rows=ROWS)
    account_id = seeded.account_id
    address = (await _fetch(settings, "SELECT email FROM accounts WHERE id = $1::uuid", account_id))[0][0]
    own = settings.model_copy(update={"task_queue": task_queue, "site_task_queue": task_queue})
    await _start_account_deletion(app, client, own, account_id)
    return Deleting(seeded.bot_ids[0], account_id, address)


async def test_skipped_bot_ends_the_account_incomplete_then_the_admin_redrive_finishes_it(
    cli: AsyncCli,
    api: httpx.AsyncClient,
    app: FastAPI,
    temporal_client: Client,
    settings: Settings,
    smtp_sink: SmtpSink,
    task_queue: str,
    worker: LifecycleWorkers,
) -> None:
    async with broken_service(api, temporal_client) as broken:
        deleting = await _one_bot_account_deleting(app, temporal_client, settings, task_queue)
        bot_id, account_id, address = deleting.bot_id, deleting.account_id, deleting.address
        account_wid, bot_wid = account_deletion_id(account_id), bot_deletion_id(bot_id)
        account = temporal_client.get_workflow_handle(account_wid)
        answers: list[str] = []

        async with own_worker(own_queue(settings, task_queue), temporal_client):
            # The first bot run's stuck services are skipped on the bot itself; later runs (the account lists its
            # bots again while the bot remains) through the account, which forwards to its bot deletion in flight;
            # the account's own question last.
            while (await account.describe()).status == WorkflowExecutionStatus.RUNNING:
                bot = await _progress(temporal_client, bot_wid)
                own_question = await _progress(temporal_client, account_wid)
                if bot is not None and bot.waiting_on is not None:
                    target = bot_wid if not answers else account_wid
                    answers.append(await _update(cli, target, "skip"))
                elif own_question is not None and own_question.waiting_on is not None:
                    assert own_question.status == DeletionState.WAITING_FOR_OPERATOR
                    answers.append(await _update(cli, account_wid, "skip"))
                else:
                    await asyncio.sleep(0.2)  # the polling interval: each round answers the question it finds open
            result = await account.result()

        assert result["status"] == DeletionState.INCOMPLETE and result["account_row_deleted"] is False
        assert any(a.startswith("skipping ") for a in answers)  # the bot's own answer
        assert any(a == "skip sent to 1 bot deletions" for a in answers)  # forwarded by the account
        assert answers[-1] == "skip: remaining bots or sites"  # the account's own question
        # Nobody was told anything was deleted: account, keys, bot and the broken service's rows stay (the services
        # that could delete theirs did).
        assert await _fetch(settings, "SELECT 1 FROM accounts WHERE id = $1::uuid", account_id)
        assert await _fetch(settings, "SELECT 1 FROM bots WHERE id = $1::uuid", bot_id)
        assert broken.holds == 7
        assert _confirmations(smtp_sink, address) == []
        skipped = await _fetch(
            settings, "SELECT service FROM deletion_progress WHERE workflow_id = $1 AND skipped", bot_wid
        )
        assert [row["service"] for row in skipped] == [broken.name]
        alerts = await _fetch(
            settings, "SELECT subject FROM alerts WHERE workflow_id = ANY($1)", [account_wid, bot_wid]
        )
        assert {"account deletion: data remains"} < {a["subject"] for a in alerts}

        # The fault is fixed: the admin's re-drive finishes the account.
        broken.fixed = True
        unknown = await api.post(f"/accounts/{uuid.uuid4()}/deletion", headers=ADMIN_HEADERS)
        assert unknown.status_code == 404
        redriven = await api.post(f"/accounts/{account_id}/deletion", headers=ADMIN_HEADERS)
        assert redriven.status_code == 202 and redriven.json()["status"] == "accepted"
        latest = temporal_client.get_workflow_handle(account_wid)
        finished = await asyncio.wait_for(latest.result(), timeout=90)
        assert finished["status"] == DeletionState.COMPLETED and finished["account_row_deleted"] is True
        assert set((await remaining_rows(settings.database_url, bot_id)).values()) == {0} and broken.holds == 0
        assert await remaining_objects(settings, bot_id) == 0
        assert not await _fetch(settings, "SELECT 1 FROM accounts WHERE id = $1::uuid", account_id)
        assert not await _fetch(settings, "SELECT 1 FROM api_keys WHERE account_id = $1::uuid", account_id)
        mails = _confirmations(smtp_sink, address)
        assert len(mails) == 1 and len(set(mails)) == 1
        again = await api.post(f"/accounts/{account_id}/deletion", headers=ADMIN_HEADERS)
        assert again.status_code == 202 and again.json()["status"] == "completed"


async def test_an_account_level_retry_reaches_its_stuck_bot_deletion(
    cli: AsyncCli,
    api: httpx.AsyncClient,
    app: FastAPI,
    temporal_client: Client,
    settings: Settings,
    smtp_sink: SmtpSink,
    task_queue: str,
) -> None:
    deleting = await _one_bot_account_deleting(app, temporal_client, settings, task_queue)
    bot_id, account_id, address = deleting.bot_id, deleting.account_id, deleting.address
    account_wid, bot_wid = account_deletion_id(account_id), bot_deletion_id(bot_id)

    async def bot_stuck() -> DeletionStatus | None:
        progress = await _progress(temporal_client, bot_wid)
        return progress if progress is not None and progress.waiting_on is not None else None

    async with (
        broken_service(api, temporal_client) as broken,
        own_worker(own_queue(settings, task_queue), temporal_client),
    ):
        stuck = await eventually(bot_stuck, "the bot deletion waits for an operator")
        assert stuck.status == DeletionState.WAITING_FOR_OPERATOR
        # The operator fixes the cause, then answers the account, not the bot: one `retry` per service that
        # failed (they wait for the operator one at a time).
        broken.fixed = True
        account = temporal_client.get_workflow_handle(account_wid)
        answers = []
        while (await account.describe()).status == WorkflowExecutionStatus.RUNNING:
            if await bot_stuck() is not None:
                answers.append(await _update(cli, account_wid, "retry"))
            else:
                await asyncio.sleep(0.2)  # the polling interval: each round answers the question it finds open
        result = await account.result()
        assert broken.holds == 0
    assert answers and set(answers) == {"retry sent to 1 bot deletions"}

    assert result["status"] == DeletionState.COMPLETED and result["account_row_deleted"] is True
    assert set((await remaining_rows(settings.database_url, bot_id)).values()) == {0}
    assert not await _fetch(settings, "SELECT 1 FROM accounts WHERE id = $1::uuid", account_id)
    assert len(_confirmations(smtp_sink, address)) == 1


async def test_the_reconciler_restarts_crash_like_closings_and_leaves_deliberate_stops(
    app: FastAPI,
    api: httpx.AsyncClient,
    temporal_client: Client,
    settings: Settings,
    smtp_sink: SmtpSink,
    task_queue: str,
    worker: LifecycleWorkers,
) -> None:
    failed = await seed(settings, bots=1, rows=ROWS)
    timed_out = await seed(settings, bots=1, rows=ROWS)
    stopped = await seed(settings, bots=1, rows=ROWS)
    failed_wid = account_deletion_id(failed.account_id)
    address = (await _fetch(settings, "SELECT email FROM accounts WHERE id = $1::uuid", failed.account_id))[0][0]
    timed_out_wid, stopped_wid = bot_deletion_id(timed_out.bot_ids[0]), bot_deletion_id(stopped.bot_ids[0])
    own = settings.model_copy(update={"task_queue": task_queue, "site_task_queue": task_queue})

    # FAILED: the account deletion's first step fails for good (a real fault, not a code change).
    await _start_account_deletion(app, temporal_client, own, failed.account_id)
    async with own_worker(own_queue(settings, task_queue), temporal_client, "list_account_bots=permanent"):
        failing = temporal_client.get_workflow_handle(failed_wid)
        with pytest.raises(WorkflowFailureError):
            await failing.result()
    assert (await failing.describe()).status == WorkflowExecutionStatus.FAILED
    # TIMED_OUT: a run whose execution timeout passed before any worker took it.
    for seeded in (timed_out, stopped):
        await _fetch(settings, "UPDATE bots SET deletion_requested_at = now() WHERE id = $1::uuid", seeded.bot_ids[0])
    await bot_deletion_options(timed_out.bot_ids[0], timed_out.account_id).start(
        temporal_client,
        BotDeletionInput(bot_id=timed_out.bot_ids[0], account_id=timed_out.account_id),
        task_queue=task_queue,
        execution_timeout=timedelta(seconds=1),
    )
    # TERMINATED: an operator's deliberate stop.
    terminated = await start_bot_deletion(
        temporal_client, task_queue, bot_id=stopped.bot_ids[0], account_id=stopped.account_id, paused=True
    )
    await terminated.terminate(reason="operator test")

    async def timed_out_closed() -> bool:
        described = await temporal_client.get_workflow_handle(timed_out_wid).describe()
        return described.status == WorkflowExecutionStatus.TIMED_OUT

    await eventually(timed_out_closed, "the bot deletion times out")
    runs = {
        wid: (await temporal_client.get_workflow_handle(wid).describe()).run_id
        for wid in (failed_wid, timed_out_wid, stopped_wid)
    }

    reconciled = await temporal_client.execute_workflow(
        RECONCILER_WORKFLOW,
        id=f"reconciler-rule-{uuid.uuid4().hex[:8]}",
        task_queue=settings.task_queue,
        result_type=ReconcileResult,
    )
    assert reconciled.account_deletions_started >= 1 and reconciled.bot_deletions_started >= 1

    # The crash-like closings run again (on the session worker, which has no fault) and finish.
    for wid in (failed_wid, timed_out_wid):
        handle = temporal_client.get_workflow_handle(wid)
        result = await asyncio.wait_for(handle.result(), timeout=90)
        assert result["status"] == DeletionState.COMPLETED
        assert (await handle.describe()).run_id != runs[wid]
    assert set((await remaining_rows(settings.database_url, timed_out.bot_ids[0])).values()) == {0}
    assert not await _fetch(settings, "SELECT 1 FROM accounts WHERE id = $1::uuid", failed.account_id)
    assert len(_confirmations(smtp_sink, address)) == 1
    # The terminated one is left as the operator left it.
    described = await temporal_client.get_workflow_handle(stopped_wid).describe()
    assert (described.run_id, described.status) == (runs[stopped_wid], WorkflowExecutionStatus.TERMINATED)
    assert sum((await remaining_rows(settings.database_url, stopped.bot_ids[0])).values()) == ROWS


class SlowFailingWebhook:
    """A real loopback endpoint that answers every POST late and with `status`: the run must not wait for it."""

    def __init__(self, status: int, delay_seconds: float) -> None:
        self.posts = 0
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["Content-Length"]))
                hook.posts += 1
                time.sleep(delay_seconds)  # the slow webhook this test needs: it answers late on purpose
                self.send_response(status)
                self.end_headers()
                self.wfile.write(b"webhook says no")

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/alerts"


@pytest.fixture(params=[500, 400])
def failing_webhook(request: pytest.FixtureRequest) -> Iterator[tuple[SlowFailingWebhook, int]]:
    hook = SlowFailingWebhook(request.param, delay_seconds=2.0)
    thread = threading.Thread(target=hook.server.serve_forever, daemon=True)
    thread.start()
    yield hook, request.param
    hook.server.shutdown()


async def test_the_run_waits_for_its_operator_while_the_alert_webhook_fails(
    cli: AsyncCli,
    api: httpx.AsyncClient,
    temporal_client: Client,
    settings: Settings,
    failing_webhook: tuple[SlowFailingWebhook, int],
) -> None:
    hook, status = failing_webhook
    seeded = await seed(settings, bots=1, rows=ROWS)
    queue = f"hook-{uuid.uuid4().hex[:8]}"
    own = settings.model_copy(update={"task_queue": queue, "site_task_queue": queue, "alert_webhook_url": hook.url})
    handle = await start_bot_deletion(temporal_client, queue, bot_id=seeded.bot_ids[0], account_id=seeded.account_id)

    async def delivery() -> list[Any]:
        return await _fetch(
            settings,
            "SELECT delivery, delivery_attempts, delivery_error FROM alerts WHERE workflow_id = $1",
            handle.id,
        )

    async with broken_service(api, temporal_client), own_worker(own, temporal_client):

        async def waiting() -> DeletionStatus | None:
            progress = await _progress(temporal_client, handle.id)
            return progress if progress is not None and progress.waiting_on is not None else None

        stuck = await eventually(waiting, "the run waits for its operator")
        assert stuck.status == DeletionState.WAITING_FOR_OPERATOR

        async def posted() -> bool:
            return hook.posts > 0

        # The webhook has the alert and has not answered yet: the run already waits, the row says pending.
        await eventually(posted, "the webhook is called")
        assert [row["delivery"] for row in await delivery()] == [AlertDelivery.PENDING]

        async def given_up() -> list[Any]:
            rows = await delivery()
            return rows if rows and rows[0]["delivery"] != AlertDelivery.PENDING else []

        rows = await eventually(given_up, "the webhook delivery is given up")
        expected_attempts = WEBHOOK_ATTEMPTS if status >= 500 else 1
        assert rows[0]["delivery"] == AlertDelivery.FAILED
        assert rows[0]["delivery_attempts"] == expected_attempts
        assert rows[0]["delivery_error"].startswith(f"HTTP {status}")
        # Still waiting, and the operator's answer is taken.
        assert (await _progress(temporal_client, handle.id)) is not None
        assert (await _update(cli, handle.id, "skip")).startswith("skipping ")
        await handle.terminate(reason="test done")
