"""The runs `record-histories` records: per workflow type a happy path and an operator or compensation path.

Each scenario drives the system as a user or an operator would and returns the workflow id to export.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import tempfile
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import httpx
from aiohttp import web
from sqlalchemy import text
from temporalio.api.errordetails.v1 import WorkflowNotReadyFailure
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.service import RPCError, RPCStatusCode

from api.deletion.requests import request_account_deletion
from devstack.ports import free_port
from devstack.search_team import SERVICE_NAMESPACE, create_nexus_endpoint
from devstack.seed import seed
from examples.search_index.__main__ import SearchIndexService, index_worker
from examples.search_index.store import SearchIndex
from lifecycle.data_converter import DATA_CONVERTER
from lifecycle.db.engine import make_engine, make_sessionmaker
from lifecycle.deletion.contracts import AccountDeletionInput, BotDeletionInput, BotDeletionResult, DeletionStatus
from lifecycle.deletion.workflow_types import (
    account_deletion_id,
    account_deletion_options,
    bot_deletion_id,
    bot_deletion_options,
    deletion_preview_id,
    processor_erasure_id,
)
from lifecycle.exports.workflow_types import account_export_id
from lifecycle.settings import Settings
from lifecycle.sites.contracts import SITE_STEPS, SiteCreationInput, SiteProgress
from lifecycle.sites.servers import DEFAULT_SERVER, MAX_CAPACITY
from lifecycle.sites.workflow_types import (
    SITE_SERVER_HEALTH_CHECK_WORKFLOW,
    site_creation_id,
    site_creation_options,
    site_db_pool_id,
    site_deletion_id,
)
from lifecycle.statuses import DeletionState
from workflows.reconciler import RECONCILER_WORKFLOW


@dataclass
class Context:
    client: Client
    api: httpx.AsyncClient
    settings: Settings
    admin_headers: dict[str, str]
    # `temporal workflow reset --type FirstWorkflowTask` on a closed run; returns when the new run closes.
    reset: Callable[[str], Awaitable[None]]


Scenario = Callable[[Context], Awaitable[str]]


async def _account(ctx: Context) -> dict[str, str]:
    suffix = uuid.uuid4().hex[:8]
    created = await ctx.api.post(
        "/accounts",
        json={"name": f"Recorder {suffix}", "email": f"recorder-{suffix}@example.com"},
        headers=ctx.admin_headers,
    )
    created.raise_for_status()
    return {"Authorization": f"Bearer {created.json()['api_key']}"}


async def _start_bot_deletion(ctx: Context, bot_id: str, account_id: str, *, paused: bool) -> WorkflowHandle:
    """As the API starts it (its start options), but paused if asked: an operator's knob the API lacks."""
    return await bot_deletion_options(bot_id, account_id).start(
        ctx.client,
        BotDeletionInput(bot_id=bot_id, account_id=account_id, paused=paused),
        task_queue=ctx.settings.task_queue,
        result_type=BotDeletionResult,
    )


async def _query_until(handle: WorkflowHandle, done: Callable[[DeletionStatus], bool]) -> DeletionStatus:
    """Polls the run's progress until `done`; a run not started yet (a parent starts it soon) is waited for."""
    while True:
        try:
            status = await handle.query("progress", result_type=DeletionStatus)
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:
                raise
        else:
            if done(status):
                return status
        await asyncio.sleep(0.1)


# Happy paths: run on a worker without faults.


async def bot_deletion_happy(ctx: Context) -> str:
    seeded = await seed(ctx.settings, bots=1, rows=500)
    response = await ctx.api.delete(f"/bots/{seeded.bot_ids[0]}", headers={"Authorization": f"Bearer {seeded.api_key}"})
    response.raise_for_status()
    workflow_id = response.json()["workflow_id"]
    await ctx.client.get_workflow_handle(workflow_id).result()
    return str(workflow_id)


async def bot_deletion_through_nexus(ctx: Context) -> str:
    """A bot deletion that also reaches the search index of another team, in its own namespace behind a Nexus
    endpoint: the history holds the operations' events."""
    address = ctx.client.service_client.config.target_host
    endpoint = f"recorded-search-{uuid.uuid4().hex[:6]}"
    team = Client(ctx.client.service_client, namespace=SERVICE_NAMESPACE, data_converter=DATA_CONVERTER)
    await asyncio.to_thread(create_nexus_endpoint, address, endpoint, SERVICE_NAMESPACE, endpoint)
    registry = "/deletion-services/search"
    body = {"nexus_endpoint": endpoint, "contract": "lifecycle.deletion.v1"}
    with tempfile.TemporaryDirectory(prefix="recorded-search-") as store:
        (await ctx.api.put(registry, json=body, headers=ctx.admin_headers)).raise_for_status()
        try:
            async with index_worker(team, endpoint, SearchIndexService(SearchIndex(Path(store)), "search")):
                return await bot_deletion_happy(ctx)
        finally:
            (await ctx.api.delete(registry, headers=ctx.admin_headers)).raise_for_status()


async def account_deletion_happy(ctx: Context) -> str:
    seeded = await seed(ctx.settings, bots=2, rows=200)
    response = await ctx.api.delete("/account", headers={"Authorization": f"Bearer {seeded.api_key}"})
    response.raise_for_status()
    await ctx.client.get_workflow_handle(account_deletion_id(seeded.account_id)).result()
    return account_deletion_id(seeded.account_id)


async def account_deletion_joins_paused_bot(ctx: Context) -> str:
    """A bot's own deletion, paused by an operator, is running when its account is deleted: the account
    deletion waits for it (await_bot_deletion) instead of starting a second one."""
    seeded = await seed(ctx.settings, bots=1, rows=200)
    bot = await _start_bot_deletion(ctx, seeded.bot_ids[0], seeded.account_id, paused=True)
    await _query_until(bot, lambda s: s.status == "paused")
    response = await ctx.api.delete("/account", headers={"Authorization": f"Bearer {seeded.api_key}"})
    response.raise_for_status()
    account = ctx.client.get_workflow_handle(account_deletion_id(seeded.account_id))
    await _await_activity(account, "await_bot_deletion")
    await bot.signal("resume")
    await account.result()
    return account.id


async def account_deletion_forwards_in_order(ctx: Context) -> str:
    """An operator's resume, pause and resume reach a paused account deletion together: they go on to its bot
    deletion one at a time, each once the previous was delivered (ordered-forwards), and the last one holds."""
    seeded = await seed(ctx.settings, bots=1, rows=200)
    account = await account_deletion_options(seeded.account_id).start(
        ctx.client,
        AccountDeletionInput(account_id=seeded.account_id, site_task_queue=ctx.settings.site_task_queue),
        task_queue=ctx.settings.task_queue,
        start_signal="pause",
    )
    # The admin's re-drive joins the paused run, and marks and records the account as the API does.
    redrive = await ctx.api.post(f"/accounts/{seeded.account_id}/deletion", headers=ctx.admin_headers)
    redrive.raise_for_status()
    bot = ctx.client.get_workflow_handle(bot_deletion_id(seeded.bot_ids[0]))
    await _query_until(bot, lambda s: s.status == "paused")
    # One after the other, so that they arrive in this order (sent at once, they raced, and a final `pause` left
    # the run waiting); sent back to back, they still usually reach the run in one workflow task.
    for message in ("resume", "pause", "resume"):
        await account.signal(message)
    await account.result()
    return account.id


async def bot_deletion_cancelled_then_repeated(ctx: Context) -> str:
    """An operator cancels an open (paused) bot deletion; the user's repeated DELETE starts a new run, which
    counts on from deletion_progress and finishes. The latest run is the one exported."""
    seeded = await seed(ctx.settings, bots=1, rows=200)
    bot = await _start_bot_deletion(ctx, seeded.bot_ids[0], seeded.account_id, paused=True)
    headers = {"Authorization": f"Bearer {seeded.api_key}"}
    (await ctx.api.delete(f"/bots/{seeded.bot_ids[0]}", headers=headers)).raise_for_status()  # joins, marks
    await _query_until(bot, lambda s: s.status == "paused")
    await bot.cancel()
    await _closed(bot)
    (await ctx.api.delete(f"/bots/{seeded.bot_ids[0]}", headers=headers)).raise_for_status()  # a new run
    await ctx.client.get_workflow_handle(bot.id).result()
    return bot.id


async def _await_activity(handle: WorkflowHandle, activity: str) -> None:
    # Polling the history, as an operator's script would; the runs are on another process's server.
    while not await _scheduled(handle, activity):  # noqa: ASYNC110
        await asyncio.sleep(0.1)


async def _scheduled(handle: WorkflowHandle, activity: str) -> int:
    """How many times the run has scheduled `activity` so far."""
    return sum(
        [
            event.activity_task_scheduled_event_attributes.activity_type.name == activity
            async for event in handle.fetch_history_events()
        ]
    )


async def reconciler_happy(ctx: Context) -> str:
    workflow_id = f"reconciler-{uuid.uuid4().hex[:8]}"
    await ctx.client.execute_workflow(RECONCILER_WORKFLOW, id=workflow_id, task_queue=ctx.settings.task_queue)
    return workflow_id


async def reconciler_reset(ctx: Context) -> str:
    workflow_id = await reconciler_happy(ctx)
    await ctx.reset(workflow_id)
    return workflow_id


async def _active_site(ctx: Context, headers: dict[str, str]) -> str:
    created = await ctx.api.post(
        "/sites",
        json={"name": "Recorded", "domain": f"rec-{uuid.uuid4().hex[:10]}.example.com"},
        headers=headers,
    )
    created.raise_for_status()
    site_id = str(created.json()["id"])
    await ctx.client.get_workflow_handle(site_creation_id(site_id)).result()
    return site_id


async def site_creation_happy(ctx: Context) -> str:
    return site_creation_id(await _active_site(ctx, await _account(ctx)))


async def site_creation_cancelled(ctx: Context) -> str:
    """DELETE /sites while provisioning requests cancellation. Whether it lands mid-flight (roll back) or
    after the last step (the site stays) depends on timing; either history must replay."""
    headers = await _account(ctx)
    created = await ctx.api.post(
        "/sites",
        json={"name": "Cancelled", "domain": f"can-{uuid.uuid4().hex[:10]}.example.com"},
        headers=headers,
    )
    created.raise_for_status()
    site_id = str(created.json()["id"])
    handle = ctx.client.get_workflow_handle(site_creation_id(site_id), result_type=SiteProgress)
    (await ctx.api.delete(f"/sites/{site_id}", headers=headers)).raise_for_status()
    await _closed(handle)
    return handle.id


async def _closed(handle: WorkflowHandle) -> None:
    while (await handle.describe()).close_time is None:  # noqa: ASYNC110
        await asyncio.sleep(0.1)


async def site_deletion_happy(ctx: Context) -> str:
    headers = await _account(ctx)
    site_id = await _active_site(ctx, headers)
    (await ctx.api.delete(f"/sites/{site_id}", headers=headers)).raise_for_status()
    await ctx.client.get_workflow_handle(site_deletion_id(site_id)).result()
    return site_deletion_id(site_id)


async def site_deletion_reset(ctx: Context) -> str:
    """An operator resets a finished teardown: every step runs again, idempotently."""
    workflow_id = await site_deletion_happy(ctx)
    await ctx.reset(workflow_id)
    return workflow_id


async def _put_server(ctx: Context, name: str, url: str, capacity: int, pool_target: int | None = None) -> None:
    body: dict[str, object] = {"url": url, "capacity": capacity}
    if pool_target is not None:
        body["pool_target"] = pool_target
    (await ctx.api.put(f"/site-db-servers/{name}", json=body, headers=ctx.admin_headers)).raise_for_status()


def _unreachable_url() -> str:
    return f"postgresql+asyncpg://postgres@127.0.0.1:{free_port()}/postgres"


_TOUCHED_SITE = text(
    "INSERT INTO sites (id, account_id, name, tagline, domain, status, steps, database_server, database_touched)"
    " SELECT :id, id, 'Late', '', :domain, 'provisioning', CAST(:steps AS jsonb), :server, true FROM accounts"
    " WHERE email = :email"
)


async def site_creation_waits_for_server(ctx: Context) -> str:
    """A site whose database step reached its server before the server stopped answering (as an earlier run left
    it: placed there, `database_touched`): the move is refused, so its database step waits for that server, and
    finishes once the server's URL leads to a live one (woken by the health check, or by its own timer)."""
    await _put_server(ctx, "recorder-late", _unreachable_url(), MAX_CAPACITY)
    email = f"late-{uuid.uuid4().hex[:8]}@example.com"
    created = await ctx.api.post("/accounts", json={"name": "Late", "email": email}, headers=ctx.admin_headers)
    created.raise_for_status()
    site_id = uuid.uuid4()
    engine = make_engine(ctx.settings.database_url, pool_size=1)
    try:
        async with engine.begin() as connection:
            params = {
                "id": site_id,
                "domain": f"late-{site_id.hex[:10]}.example.com",
                "steps": json.dumps(dict.fromkeys(SITE_STEPS, "pending")),
                "server": "recorder-late",
                "email": email,
            }
            await connection.execute(_TOUCHED_SITE, params)
    finally:
        await engine.dispose()
    # As the API starts it.
    account_id = str(created.json()["id"])
    handle = await site_creation_options(str(site_id), account_id).start(
        ctx.client,
        SiteCreationInput(site_id=str(site_id), account_id=account_id),
        task_queue=ctx.settings.site_task_queue,
        result_type=SiteProgress,
    )
    while await _scheduled(handle, "create_site_database") < 2:  # noqa: ASYNC110
        await asyncio.sleep(0.1)
    # The health check marks it down; once its URL leads to a live server, active again, and wakes the creation.
    for _ in range(2):
        await _health_check(ctx)
    await _put_server(ctx, "recorder-late", ctx.settings.site_admin_database_url, MAX_CAPACITY)
    for _ in range(2):
        await _health_check(ctx)
    await handle.result()
    (
        await ctx.api.patch("/site-db-servers/recorder-late", json={"state": "draining"}, headers=ctx.admin_headers)
    ).raise_for_status()
    return handle.id


async def site_creation_moves_off_server(ctx: Context) -> str:
    """A new site is placed on a server that does not answer, before any health check noticed (all the room is
    there): its database step never reached it, so the site moves to the server with room next, and is built there."""
    await _put_server(ctx, "recorder-dead", _unreachable_url(), MAX_CAPACITY, pool_target=0)
    site_id = await _active_site(ctx, await _account(ctx))
    (
        await ctx.api.patch("/site-db-servers/recorder-dead", json={"state": "draining"}, headers=ctx.admin_headers)
    ).raise_for_status()
    return site_creation_id(site_id)


async def _health_check(ctx: Context) -> str:
    workflow_id = f"health-check-{uuid.uuid4().hex[:8]}"
    await ctx.client.execute_workflow(
        SITE_SERVER_HEALTH_CHECK_WORKFLOW, id=workflow_id, task_queue=ctx.settings.site_task_queue
    )
    return workflow_id


async def health_check_happy(ctx: Context) -> str:
    return await _health_check(ctx)


async def health_check_marks_down(ctx: Context) -> str:
    """A server that does not answer (with no room, so no site goes there): the second check marks it down."""
    await _put_server(ctx, "recorder-gone", _unreachable_url(), 0)
    await _health_check(ctx)
    return await _health_check(ctx)


# Compensation and operator paths: run on a worker with FAULTS.

FAULTS = "bootstrap_site=permanent"
# On the services' own workers (devstack/record_histories.py): every delete fails for good.
SERVICE_FAULTS = "DeleteSubjectData=permanent"


async def bot_deletion_operator(ctx: Context) -> str:
    """Paused, resized, resumed; every service then fails for good: retried once, then each skipped."""
    seeded = await seed(ctx.settings, bots=1, rows=200)
    handle = await _start_bot_deletion(ctx, seeded.bot_ids[0], seeded.account_id, paused=True)
    await _query_until(handle, lambda s: s.status == "paused")
    await handle.execute_update("set_batch_size", 2_000)
    await handle.signal("resume")
    alerts = 0
    while await _next_alert(handle, alerts):
        await handle.signal("retry" if alerts == 0 else "skip")
        alerts += 1
    return handle.id


async def _next_alert(handle: WorkflowHandle, seen: int) -> bool:
    """Wait until the run waits on an operator after a new alert (True) or completes (False)."""
    while True:
        status = await handle.query("progress", result_type=DeletionStatus)
        if status.status in (DeletionState.COMPLETED, DeletionState.INCOMPLETE):
            return False
        if status.waiting_on is not None and await _scheduled(handle, "raise_alert") > seen:
            return True
        await asyncio.sleep(0.1)


async def account_deletion_incomplete(ctx: Context) -> str:
    """Every deleter of the account's only bot fails for good: each stuck service is skipped (signals, as tctl
    sends them), every round; then the account's own question is answered `skip` (an update). The account
    ends `incomplete`: row kept, no email."""
    seeded = await seed(ctx.settings, bots=1, rows=200)
    (await ctx.api.delete("/account", headers={"Authorization": f"Bearer {seeded.api_key}"})).raise_for_status()
    account = ctx.client.get_workflow_handle(account_deletion_id(seeded.account_id))
    bot = ctx.client.get_workflow_handle(bot_deletion_id(seeded.bot_ids[0]))
    while (await account.describe()).status == WorkflowExecutionStatus.RUNNING:
        if await _waits_for_operator(bot):
            await bot.signal("skip")
        elif await _waits_for_operator(account):
            try:
                await account.execute_update("skip")
            except RPCError as err:
                # A new run (after continue-as-new) whose first workflow task has not finished: ask again.
                if not _not_ready(err):
                    raise
        await asyncio.sleep(0.1)
    return account.id


def _not_ready(err: RPCError) -> bool:
    return any(detail.Is(WorkflowNotReadyFailure.DESCRIPTOR) for detail in err.grpc_status.details)


async def _waits_for_operator(handle: WorkflowHandle) -> bool:
    """Whether the latest run of `handle` is open and waits for an operator (no run yet counts as no)."""
    try:
        if (await handle.describe()).status != WorkflowExecutionStatus.RUNNING:
            return False
        return (await handle.query("progress", result_type=DeletionStatus)).waiting_on is not None
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return False
        raise


async def site_creation_rolled_back(ctx: Context) -> str:
    headers = await _account(ctx)
    created = await ctx.api.post(
        "/sites",
        json={"name": "Doomed", "domain": f"doom-{uuid.uuid4().hex[:10]}.example.com"},
        headers=headers,
    )
    created.raise_for_status()
    handle = ctx.client.get_workflow_handle(site_creation_id(str(created.json()["id"])))
    await _closed(handle)
    return handle.id


async def _expired_export(ctx: Context) -> WorkflowHandle:
    """An export written and mailed, then expired at once by an operator's `expire_now` (the retention timer
    cut short)."""
    seeded = await seed(ctx.settings, bots=1, rows=200)
    headers = {"Authorization": f"Bearer {seeded.api_key}"}
    created = await ctx.api.post("/account/exports", headers=headers)
    created.raise_for_status()
    while True:
        if (await ctx.api.get(created.json()["status_url"], headers=headers)).json()["download_url"]:
            break
        await asyncio.sleep(0.1)
    handle = ctx.client.get_workflow_handle(account_export_id(seeded.account_id, 1))
    while True:
        try:
            await handle.execute_update("expire_now", result_type=str)
            break
        except WorkflowUpdateFailedError:
            # The row reads `ready` once its activity committed, a workflow task before the run says so.
            await asyncio.sleep(0.1)
    await handle.result()
    return handle


async def account_export_expired_now(ctx: Context) -> str:
    return (await _expired_export(ctx)).id


async def account_export_reset(ctx: Context) -> str:
    """A finished export reset to its first task: the new run finds it expired and writes nothing again."""
    handle = await _expired_export(ctx)
    await ctx.reset(handle.id)
    return handle.id


async def account_deletion_export_first(ctx: Context) -> str:
    """`DELETE /account {"export_first": true}`: the deletion waits for the export's archive and email."""
    seeded = await seed(ctx.settings, bots=1, rows=200)
    response = await ctx.api.request(
        "DELETE", "/account", json={"export_first": True}, headers={"Authorization": f"Bearer {seeded.api_key}"}
    )
    response.raise_for_status()
    await ctx.client.get_workflow_handle(account_deletion_id(seeded.account_id)).result()
    return account_deletion_id(seeded.account_id)


async def _scheduled_account_deletion(ctx: Context) -> WorkflowHandle:
    """`DELETE /account` as the API takes it with ACCOUNT_DELETION_GRACE=PT1H (the recorder's own API keeps
    the local default, zero): signed out, recorded with its deletes_at, and waiting on its grace timer."""
    seeded = await seed(ctx.settings, bots=1, rows=200)
    graced = ctx.settings.model_copy(update={"account_deletion_grace": timedelta(hours=1)})
    engine = make_engine(ctx.settings.database_url, pool_size=1)
    try:
        async with make_sessionmaker(engine)() as session:
            await request_account_deletion(session, ctx.client, graced, account_id=uuid.UUID(seeded.account_id))
    finally:
        await engine.dispose()
    handle = ctx.client.get_workflow_handle(account_deletion_id(seeded.account_id))
    await _query_until(handle, lambda status: status.status == DeletionState.SCHEDULED)
    return handle


async def account_deletion_grace_restored(ctx: Context) -> str:
    """A grace-period deletion an admin restores (`POST /accounts/{id}/restore`): it ends having deleted nothing."""
    handle = await _scheduled_account_deletion(ctx)
    account_id = handle.id.removeprefix("account-deletion-")
    restored = await ctx.api.post(f"/accounts/{account_id}/restore", headers=ctx.admin_headers)
    restored.raise_for_status()
    await handle.result()
    return handle.id


async def account_deletion_grace_expedited(ctx: Context) -> str:
    """A grace-period deletion an operator expedites (update `expedite`): it deletes at once, as without one."""
    handle = await _scheduled_account_deletion(ctx)
    await handle.execute_update("expedite", result_type=str)
    await handle.result()
    return handle.id


async def _pool_ready(ctx: Context, server: str, count: int) -> None:
    while True:
        answer = await ctx.api.get("/site-db-servers", headers=ctx.admin_headers)
        answer.raise_for_status()
        if {s["name"]: s for s in answer.json()["servers"]}[server]["pool_ready"] == count:
            return
        await asyncio.sleep(0.1)


async def _pool_change(ctx: Context, server: str, **changes: object) -> None:
    answer = await ctx.api.patch(f"/site-db-servers/{server}", json=changes, headers=ctx.admin_headers)
    answer.raise_for_status()


async def site_db_pool_refilled(ctx: Context) -> str:
    """The pool filled to a target of 2, a site claims one, and the pool makes it up again."""
    await _pool_change(ctx, DEFAULT_SERVER, pool_target=2)
    await _pool_ready(ctx, DEFAULT_SERVER, 2)
    await _active_site(ctx, await _account(ctx))
    await _pool_ready(ctx, DEFAULT_SERVER, 2)
    return site_db_pool_id(DEFAULT_SERVER)


async def site_db_pool_drained(ctx: Context) -> str:
    """The server drains, and its pool's unclaimed databases are dropped; then it is active with no pool."""
    await _pool_change(ctx, DEFAULT_SERVER, state="draining")
    await _pool_ready(ctx, DEFAULT_SERVER, 0)
    await _pool_change(ctx, DEFAULT_SERVER, state="active", pool_target=0)
    return site_db_pool_id(DEFAULT_SERVER)


async def deletion_preview_happy(ctx: Context) -> str:
    seeded = await seed(ctx.settings, bots=1, rows=200)
    bot_id = seeded.bot_ids[0]
    response = await ctx.api.get(
        f"/bots/{bot_id}/deletion/preview", headers={"Authorization": f"Bearer {seeded.api_key}"}
    )
    response.raise_for_status()
    return deletion_preview_id("bot", bot_id)


async def deletion_preview_service_down(ctx: Context) -> str:
    """An account's preview while a registered service has no worker: it is reported unknown. The service is
    retired afterwards, so no later deletion waits for it."""
    registered = await ctx.api.put(
        "/deletion-services/preview-down",
        json={"task_queue": "preview-down", "contract": "lifecycle.deletion.v1"},
        headers=ctx.admin_headers,
    )
    registered.raise_for_status()
    try:
        seeded = await seed(ctx.settings, bots=2, rows=100)
        response = await ctx.api.get("/account/deletion/preview", headers={"Authorization": f"Bearer {seeded.api_key}"})
        response.raise_for_status()
    finally:
        (await ctx.api.delete("/deletion-services/preview-down", headers=ctx.admin_headers)).raise_for_status()
    return deletion_preview_id("account", seeded.account_id)


async def account_deletion_held_then_released(ctx: Context) -> str:
    """A deletion requested during a legal hold waits, `held`, then finishes once the hold is released."""
    seeded = await seed(ctx.settings, bots=1, rows=100)
    hold = f"/accounts/{seeded.account_id}/legal-hold"
    (await ctx.api.put(hold, json={"reason": "recorded history"}, headers=ctx.admin_headers)).raise_for_status()
    response = await ctx.api.delete("/account", headers={"Authorization": f"Bearer {seeded.api_key}"})
    response.raise_for_status()
    account = ctx.client.get_workflow_handle(account_deletion_id(seeded.account_id))
    await _query_until(account, lambda s: s.status == DeletionState.HELD)
    (await ctx.api.delete(hold, headers=ctx.admin_headers)).raise_for_status()
    await account.result()
    return account.id


async def bot_deletion_queued_for_a_lane(ctx: Context) -> str:
    """One more of an account's bot deletions than it has lanes, during a legal hold: the last waits `queued`,
    then, once the hold is released, is let in by the run that frees a lane, and finishes."""
    at_once = ctx.settings.account_deletions_at_once
    seeded = await seed(ctx.settings, bots=at_once + 1, rows=50)
    hold = f"/accounts/{seeded.account_id}/legal-hold"
    (await ctx.api.put(hold, json={"reason": "recorded history"}, headers=ctx.admin_headers)).raise_for_status()
    for bot_id in seeded.bot_ids:
        response = await ctx.api.delete(f"/bots/{bot_id}", headers={"Authorization": f"Bearer {seeded.api_key}"})
        response.raise_for_status()
    last = ctx.client.get_workflow_handle(bot_deletion_id(seeded.bot_ids[-1]))
    await _query_until(last, lambda s: s.status == DeletionState.QUEUED)
    (await ctx.api.delete(hold, headers=ctx.admin_headers)).raise_for_status()
    for bot_id in seeded.bot_ids:
        await ctx.client.get_workflow_handle(bot_deletion_id(bot_id)).result()
    return last.id


async def _tell_processor(ctx: Context, url: str, then: Callable[[WorkflowHandle, str], Awaitable[None]]) -> str:
    """An account deletion that tells one processor at `url`; `then` sees its processors' run through. The
    processor is retired afterwards, so no later deletion tells it."""
    name = f"recorder-{uuid.uuid4().hex[:8]}"
    secret = "whsec_" + base64.b64encode(os.urandom(32)).decode()
    registered = await ctx.api.put(
        f"/processors/{name}", json={"url": url, "secret": secret}, headers=ctx.admin_headers
    )
    registered.raise_for_status()
    try:
        seeded = await seed(ctx.settings, bots=1, rows=50)
        response = await ctx.api.delete("/account", headers={"Authorization": f"Bearer {seeded.api_key}"})
        response.raise_for_status()
        await ctx.client.get_workflow_handle(account_deletion_id(seeded.account_id)).result()
        handle = ctx.client.get_workflow_handle(processor_erasure_id(account_deletion_id(seeded.account_id)))
        await then(handle, name)
        await handle.result()
    finally:
        (await ctx.api.delete(f"/processors/{name}", headers=ctx.admin_headers)).raise_for_status()
    return handle.id


async def processor_erasure_acknowledged(ctx: Context) -> str:
    async def acknowledge(request: web.Request) -> web.Response:
        return web.json_response({"reference": "recorded"})

    app = web.Application()
    app.router.add_post("/erasure", acknowledge)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:

        async def nothing(handle: WorkflowHandle, name: str) -> None:
            return None

        return await _tell_processor(ctx, f"http://127.0.0.1:{port}/erasure", nothing)
    finally:
        await runner.cleanup()


async def processor_erasure_skipped(ctx: Context) -> str:
    """The processor is down; an operator skips it for this deletion."""

    async def skip(handle: WorkflowHandle, name: str) -> None:
        await handle.execute_update("skip_processor", name, result_type=str)

    return await _tell_processor(ctx, f"http://127.0.0.1:{free_port()}/erasure", skip)


# (scenario, run): the file is named <WorkflowType>-<scenario>.json.
HAPPY: list[tuple[str, Scenario]] = [
    ("happy", bot_deletion_happy),
    ("through-nexus", bot_deletion_through_nexus),
    ("happy", account_deletion_happy),
    ("joins-paused-bot", account_deletion_joins_paused_bot),
    ("forwards-in-order", account_deletion_forwards_in_order),
    ("cancelled-then-repeated", bot_deletion_cancelled_then_repeated),
    ("happy", reconciler_happy),
    ("reset", reconciler_reset),
    ("happy", site_creation_happy),
    ("cancel-requested", site_creation_cancelled),
    ("happy", site_deletion_happy),
    ("reset", site_deletion_reset),
    ("expired-now", account_export_expired_now),
    ("reset", account_export_reset),
    ("export-first", account_deletion_export_first),
    ("grace-restored", account_deletion_grace_restored),
    ("grace-expedited", account_deletion_grace_expedited),
    ("held-then-released", account_deletion_held_then_released),
    ("queued-for-a-lane", bot_deletion_queued_for_a_lane),
    ("waits-for-server", site_creation_waits_for_server),
    ("moves-off-server", site_creation_moves_off_server),
    ("happy", health_check_happy),
    ("marks-down", health_check_marks_down),
    ("happy", deletion_preview_happy),
    ("service-down", deletion_preview_service_down),
    # After the unreachable-server scenarios, the skip usually lands before the request has started: the run then
    # records the skip only once the cancel resolved (workflows/activity_presets.py, processor_delivery).
    ("acknowledged", processor_erasure_acknowledged),
    ("skipped", processor_erasure_skipped),
    # Last: before them no pool runs (nothing pokes it), so the runs above are made the slow way, as recorded.
    ("refilled", site_db_pool_refilled),
    ("drained", site_db_pool_drained),
]
FAULTY: list[tuple[str, Scenario]] = [
    ("operator-retry-skip", bot_deletion_operator),
    ("bot-skipped-incomplete", account_deletion_incomplete),
    ("rolled-back", site_creation_rolled_back),
]
