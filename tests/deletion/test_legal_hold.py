"""Legal holds: an admin's hold stops an account's deletions, before or during them, and its release lets them
finish; the hold is in PostgreSQL and its times on the receipt, its reason in neither the history nor the receipt.
Real PostgreSQL, a real Temporal dev server, the project's services and real workers."""

from __future__ import annotations

import asyncio
import json
import re
import shlex
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import asyncpg
import httpx
from temporalio.client import Client, WorkflowHandle

from api.app import create_app
from devstack.seed import Seeded, asyncpg_dsn, rows_per_service, seed
from lifecycle.deletion.budget import DEFAULT_ROWS_PER_SECOND
from lifecycle.deletion.contracts import AccountDeletionResult, BotDeletionInput, BotDeletionResult
from lifecycle.deletion.workflow_types import account_deletion_id, bot_deletion_id, bot_deletion_options
from lifecycle.settings import Settings
from tests.conftest import ADMIN_HEADERS, ApiAccount
from tests.deletion.helpers import remaining_rows, waiting_on_the_hold
from tests.eventually import eventually
from tests.temporal_cli import TemporalCli
from tests.workers import own_queue, own_worker
from worker import LifecycleWorkers

ROWS = 40
REASON = "Litigation hold, case 2026-CV-0042"


def _key(seeded: Seeded) -> dict[str, str]:
    return {"Authorization": f"Bearer {seeded.api_key}"}


async def _hold(api: httpx.AsyncClient, account_id: str, reason: str = REASON) -> dict[str, Any]:
    answer = await api.put(f"/accounts/{account_id}/legal-hold", json={"reason": reason}, headers=ADMIN_HEADERS)
    assert answer.status_code == 201, answer.text
    return dict(answer.json())


async def _release(api: httpx.AsyncClient, account_id: str) -> dict[str, Any]:
    answer = await api.delete(f"/accounts/{account_id}/legal-hold", headers=ADMIN_HEADERS)
    assert answer.status_code == 200, answer.text
    assert answer.json()["held"] is False
    return dict(answer.json())


async def _status(api: httpx.AsyncClient, account_id: str) -> str:
    answer = await api.get(f"/accounts/{account_id}/deletion", headers=ADMIN_HEADERS)
    assert answer.status_code == 200, answer.text
    return str(answer.json()["status"])


async def _recorded_status(settings: Settings, workflow_id: str) -> str | None:
    conn = await asyncpg.connect(asyncpg_dsn(settings.database_url))
    try:
        return await conn.fetchval("SELECT status FROM deletion_requests WHERE workflow_id = $1", workflow_id)
    finally:
        await conn.close()


async def _history_text(handle: WorkflowHandle[Any, Any]) -> str:
    history = await handle.fetch_history()
    return json.dumps(history.to_json_dict())


async def test_bad_requests_get_problems_and_repeats_are_idempotent(
    api: httpx.AsyncClient, account: ApiAccount
) -> None:
    path = f"/accounts/{account.id}/legal-hold"
    unknown = await api.put(f"/accounts/{uuid.uuid4()}/legal-hold", json={"reason": "x"}, headers=ADMIN_HEADERS)
    assert unknown.status_code == 404 and unknown.headers["content-type"] == "application/problem+json"
    assert unknown.json()["detail"] == "No such account."
    for body in ({"reason": "   "}, {}, {"reason": "x", "until": "never"}, {"reason": "a\x00b"}):
        bad = await api.put(path, json=body, headers=ADMIN_HEADERS)
        assert bad.status_code == 422, (body, bad.text)
        assert bad.headers["content-type"] == "application/problem+json"
    not_an_id = await api.put("/accounts/not-a-uuid/legal-hold", json={"reason": "x"}, headers=ADMIN_HEADERS)
    assert not_an_id.status_code == 422
    assert (await api.put(path, json={"reason": "x"}, headers=account.headers)).status_code == 403
    assert (await api.put(path, json={"reason": "x"})).status_code == 401

    none = await api.get(path, headers=ADMIN_HEADERS)
    assert none.status_code == 404 and "no legal hold in force" in none.json()["detail"]
    nothing = await api.delete(path, headers=ADMIN_HEADERS)
    assert nothing.status_code == 404 and "nothing to release" in nothing.json()["detail"]

    placed = await _hold(api, account.id, "first reason")
    again = await api.put(path, json={"reason": " second reason "}, headers=ADMIN_HEADERS)
    assert again.status_code == 200, again.text
    assert again.json() == placed | {"reason": "second reason"}
    assert (await api.get(path, headers=ADMIN_HEADERS)).json() == again.json()

    released = await _release(api, account.id)
    assert released["placed_at"] == placed["placed_at"] and released["released_at"] is not None
    repeat = await api.delete(path, headers=ADMIN_HEADERS)
    assert repeat.status_code == 404 and "nothing to release" in repeat.json()["detail"]
    # A new hold after a release is a new one.
    assert (await _hold(api, account.id))["placed_at"] != placed["placed_at"]
    await _release(api, account.id)


async def test_a_deletion_requested_during_a_hold_waits_then_finishes_on_release(
    api: httpx.AsyncClient, settings: Settings, worker: LifecycleWorkers, temporal_client: Client
) -> None:
    seeded = await seed(settings, bots=1, rows=ROWS)
    hold = await _hold(api, seeded.account_id)
    preview = await api.get("/account/deletion/preview", headers=_key(seeded))
    assert preview.status_code == 200 and preview.json()["held"] is True, preview.text

    accepted = await api.delete("/account", headers=_key(seeded))
    assert accepted.status_code == 202, accepted.text
    assert accepted.json()["status"] == "held"
    handle = temporal_client.get_workflow_handle(
        account_deletion_id(seeded.account_id), result_type=AccountDeletionResult
    )
    await eventually(lambda: waiting_on_the_hold(handle), "the account deletion waits on the hold")
    assert await _status(api, seeded.account_id) == "held"
    assert await remaining_rows(settings.database_url, seeded.bot_ids[0]) == rows_per_service(ROWS)
    # Ids only: the reason is in PostgreSQL, never in the run's history.
    assert REASON not in await _history_text(handle)

    await _release(api, seeded.account_id)
    result = await handle.result()
    assert (result.status, result.account_row_deleted, result.bots_deleted) == ("completed", True, 1)
    assert set((await remaining_rows(settings.database_url, seeded.bot_ids[0])).values()) == {0}

    answer = await api.get(f"/accounts/{seeded.account_id}/deletion/receipt", headers=ADMIN_HEADERS)
    assert answer.status_code == 200, answer.text
    receipt = answer.json()["receipt"]
    assert len(receipt["legal_holds"]) == 1
    recorded = receipt["legal_holds"][0]
    assert recorded["placed_at"] is not None and recorded["released_at"] is not None
    assert recorded["placed_at"] <= recorded["released_at"] <= receipt["issued_at"]
    assert hold["placed_at"].startswith(recorded["placed_at"][:19])
    assert REASON not in json.dumps(receipt)


@asynccontextmanager
async def _budget(api: httpx.AsyncClient, rows_per_second: int) -> AsyncIterator[None]:
    """A slow deletion, so a hold arrives mid-run; then the default again (other tests share the database)."""
    changed = await api.put("/deletion-budget", json={"rows_per_second": rows_per_second}, headers=ADMIN_HEADERS)
    assert changed.status_code == 200, changed.text
    try:
        yield
    finally:
        await api.put("/deletion-budget", json={"rows_per_second": DEFAULT_ROWS_PER_SECOND}, headers=ADMIN_HEADERS)


async def test_a_hold_during_a_deletion_stops_it_at_a_batch_boundary_until_released(
    api: httpx.AsyncClient, settings: Settings, worker: LifecycleWorkers, temporal_client: Client
) -> None:
    rows = 2_000
    seeded = await seed(settings, bots=1, rows=rows, documents=4)
    bot_id = seeded.bot_ids[0]
    before = sum((await remaining_rows(settings.database_url, bot_id)).values())
    account = temporal_client.get_workflow_handle(
        account_deletion_id(seeded.account_id), result_type=AccountDeletionResult
    )
    bot = temporal_client.get_workflow_handle(bot_deletion_id(bot_id))
    async with _budget(api, 100):
        assert (await api.delete("/account", headers=_key(seeded))).status_code == 202

        async def deleting() -> bool:
            return sum((await remaining_rows(settings.database_url, bot_id)).values()) < before

        await eventually(deleting, "the deletion commits its first batches")
        await _hold(api, seeded.account_id)
    # The slices in flight finish at the slow budget; the ones after the release go at the default.
    await eventually(lambda: waiting_on_the_hold(bot), "the bot deletion stops at a batch boundary")
    left = sum((await remaining_rows(settings.database_url, bot_id)).values())
    assert 0 < left < before
    assert await _status(api, seeded.account_id) == "held"
    assert await _recorded_status(settings, bot_deletion_id(bot_id)) == "held"
    # Stopped: nothing in flight, and nothing more went.
    assert await waiting_on_the_hold(bot)
    assert sum((await remaining_rows(settings.database_url, bot_id)).values()) == left
    await _release(api, seeded.account_id)
    result = await account.result()
    assert (result.status, result.account_row_deleted) == ("completed", True)
    assert set((await remaining_rows(settings.database_url, bot_id)).values()) == {0}


def runbook_held_list(project_root: Path) -> list[str]:
    """The runbook's command that lists the held deletions, as written there, without `temporal`."""
    runbook = (project_root / "docs" / "operations.md").read_text()
    line = re.search(r"^temporal (workflow list --query 'LifecycleStatus=\"held\"')$", runbook, re.MULTILINE)
    assert line is not None
    return shlex.split(line.group(1))


async def test_a_bot_deletion_of_a_held_account_waits_through_a_reset(
    api: httpx.AsyncClient,
    settings: Settings,
    worker: LifecycleWorkers,
    temporal_client: Client,
    project_root: Path,
) -> None:
    seeded = await seed(settings, bots=1, rows=ROWS)
    bot_id = seeded.bot_ids[0]
    await _hold(api, seeded.account_id)
    accepted = await api.delete(f"/bots/{bot_id}", headers=_key(seeded))
    assert accepted.status_code == 202, accepted.text
    assert accepted.json()["status"] == "held"
    handle = temporal_client.get_workflow_handle(bot_deletion_id(bot_id), result_type=BotDeletionResult)
    await eventually(lambda: waiting_on_the_hold(handle), "the bot deletion waits on the hold")
    first_run = (await handle.describe()).run_id

    # The operator's reset to the first task: the new run asks PostgreSQL again, and waits again.
    cli = TemporalCli(temporal_client.service_client.config.target_host)
    await asyncio.to_thread(
        cli.run, "workflow", "reset", "--workflow-id", handle.id, "--type", "FirstWorkflowTask", "--reason", "test"
    )
    latest = temporal_client.get_workflow_handle(handle.id, result_type=BotDeletionResult)
    assert (await latest.describe()).run_id != first_run
    await eventually(lambda: waiting_on_the_hold(latest), "the reset run waits on the hold")
    assert await _recorded_status(settings, handle.id) == "held"

    # The runbook's list of held deletions names it.
    async def listed() -> bool:
        found = await asyncio.to_thread(cli.jsonl, *runbook_held_list(project_root))
        return handle.id in {run["execution"]["workflowId"] for run in found}

    await eventually(listed, "the runbook's `temporal workflow list` shows the held deletion")
    assert await remaining_rows(settings.database_url, bot_id) == rows_per_service(ROWS)

    await _release(api, seeded.account_id)
    assert (await latest.result()).status == "completed"
    assert set((await remaining_rows(settings.database_url, bot_id)).values()) == {0}


async def test_a_held_deletion_survives_its_worker_stopping_and_ends_after_release(
    settings: Settings, temporal_client: Client
) -> None:
    own = own_queue(settings)
    seeded = await seed(settings, bots=1, rows=ROWS)
    app = create_app(own, temporal_client=temporal_client)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://testserver") as api,
    ):
        await _hold(api, seeded.account_id)
        assert (await api.delete("/account", headers=_key(seeded))).json()["status"] == "held"
        handle = temporal_client.get_workflow_handle(
            account_deletion_id(seeded.account_id), result_type=AccountDeletionResult
        )
        async with own_worker(own, temporal_client):
            await eventually(lambda: waiting_on_the_hold(handle), "the account deletion waits on the hold")
        # No worker now: the release's signal waits in the run's history for the next one.
        await _release(api, seeded.account_id)
        assert await remaining_rows(settings.database_url, seeded.bot_ids[0]) == rows_per_service(ROWS)
        async with own_worker(own, temporal_client):
            result = await asyncio.wait_for(handle.result(), timeout=90)
    assert (result.status, result.account_row_deleted) == ("completed", True)


async def test_a_lost_release_signal_is_caught_by_the_timer(
    api: httpx.AsyncClient, settings: Settings, worker: LifecycleWorkers, temporal_client: Client
) -> None:
    """A release whose signal never came (the API died between its commit and the signal): the run's own timer
    asks PostgreSQL again, and the deletion goes on."""
    seeded = await seed(settings, bots=1, rows=ROWS)
    await _hold(api, seeded.account_id)
    handle = await _start_bot_deletion(temporal_client, settings, seeded, legal_hold_recheck_seconds=1)
    await eventually(lambda: waiting_on_the_hold(handle), "the bot deletion waits on the hold")
    conn = await asyncpg.connect(asyncpg_dsn(settings.database_url))
    try:
        await conn.execute("UPDATE legal_holds SET released_at = now() WHERE account_id = $1::uuid", seeded.account_id)
    finally:
        await conn.close()
    assert (await asyncio.wait_for(handle.result(), timeout=60)).status == "completed"


async def test_a_long_hold_continues_as_new_and_still_waits(
    api: httpx.AsyncClient, settings: Settings, worker: LifecycleWorkers, temporal_client: Client
) -> None:
    """A hold of months must not grow one history without end: a held run continues as new, and the next one
    asks first and waits on."""
    seeded = await seed(settings, bots=1, rows=ROWS)
    await _hold(api, seeded.account_id)
    handle = await _start_bot_deletion(
        temporal_client, settings, seeded, legal_hold_recheck_seconds=1, continue_as_new_after_events=40
    )
    first_run = (await handle.describe()).run_id
    latest = temporal_client.get_workflow_handle(handle.id, result_type=BotDeletionResult)

    async def a_later_run_waits() -> bool:
        return (await latest.describe()).run_id != first_run and await waiting_on_the_hold(latest)

    await eventually(a_later_run_waits, "a later run of the held deletion waits on the hold")
    assert await remaining_rows(settings.database_url, seeded.bot_ids[0]) == rows_per_service(ROWS)
    await _release(api, seeded.account_id)
    assert (await asyncio.wait_for(latest.result(), timeout=60)).status == "completed"


async def _start_bot_deletion(
    client: Client, settings: Settings, seeded: Seeded, **changes: Any
) -> WorkflowHandle[Any, BotDeletionResult]:
    bot_id = seeded.bot_ids[0]
    return await bot_deletion_options(bot_id, seeded.account_id).start(
        client,
        BotDeletionInput(bot_id=bot_id, account_id=seeded.account_id, **changes),
        task_queue=settings.task_queue,
        result_type=BotDeletionResult,
    )


def page_hold_commands(project_root: Path) -> list[tuple[str, str, str, dict[str, Any] | None, int]]:
    """docs/deletion.md's hold commands, as written there: (method, path, credential, body, status it shows)."""
    page = (project_root / "docs" / "deletion.md").read_text()
    section = page[page.index("## Legal holds") :]
    block = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert block is not None
    text = block.group(1).replace("\\\n", " ")
    commands = re.findall(
        r"curl -s -X (\w+) localhost:8000(.+?) -H \"Authorization: Bearer \$(\w+)\"(?:.*?-d '(.*?)')?\n# → (\d{3})",
        text,
    )
    return [
        (method, path, credential, json.loads(body) if body else None, int(status))
        for method, path, credential, body, status in commands
    ]


async def test_the_deletion_pages_hold_commands_answer_as_shown(
    api: httpx.AsyncClient, settings: Settings, worker: LifecycleWorkers, temporal_client: Client, project_root: Path
) -> None:
    seeded = await seed(settings, bots=1, rows=ROWS)
    commands = page_hold_commands(project_root)
    assert [(method, path) for method, path, *_ in commands] == [
        ("PUT", "/accounts/<account id>/legal-hold"),
        ("DELETE", "/account"),
        ("DELETE", "/accounts/<account id>/legal-hold"),
    ]
    credentials = {"TOKEN": ADMIN_HEADERS, "KEY": _key(seeded)}
    for method, path, credential, body, status in commands:
        answer = await api.request(
            method, path.replace("<account id>", seeded.account_id), json=body, headers=credentials[credential]
        )
        assert answer.status_code == status, answer.text
    handle = temporal_client.get_workflow_handle(
        account_deletion_id(seeded.account_id), result_type=AccountDeletionResult
    )
    assert (await handle.result()).status == "completed"
