"""kill -9 the worker mid-run: a new worker finishes the job, nothing twice, nothing left behind. The account
deletion also tells a processor that is down throughout, and comes back only after the deletion: it is asked
again until it acknowledges, once; and it spans both transports, the search index answering as its own team runs
it, behind a Nexus endpoint, where the worker dies while a slice of it is in flight."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import httpx
from temporalio.client import Client

from activities.sites.database import site_database_name
from devstack.ports import free_port
from devstack.search_team import SERVICE_NAMESPACE
from devstack.seed import rows_per_service, seed
from lifecycle.data_converter import DATA_CONVERTER
from lifecycle.deletion.contracts import AccountDeletionResult
from lifecycle.deletion.workflow_types import account_deletion_id, bot_deletion_id
from lifecycle.sites.workflow_types import site_creation_id
from tests.conftest import ADMIN_HEADERS, ADMIN_TOKEN, FEW_DOCUMENTS
from tests.db import fetchval
from tests.deletion.helpers import nexus_calls, remaining_objects
from tests.deletion.processor_servers import ProcessorServer
from tests.deletion.search_team import RegisteredIndex, behind_an_endpoint
from tests.drills import figures
from tests.drills.conftest import DrillStack
from tests.drills.probes import ProgressRecorder, mail_to, nexus_operation_open, rows_left
from tests.eventually import eventually, seconds_until
from tests.sites.helpers import scheduled_activities

# Large enough that the deletion is mid-way when the worker dies (at the drills' 100,000 rows/s budget it takes
# over a second; the kill lands once a tenth is gone), small enough to seed in seconds.
ROWS_PER_BOT = 60_000
BOTS = 2
# The processor's requests are retried at most a second apart here (an hour by default).
PROCESSOR_RETRY = {"PROCESSOR_RETRY_INITIAL": "PT0.2S", "PROCESSOR_RETRY_MAX": "PT1S"}
# The search index's part of each bot, and a rows/s of its own low enough that its slices take seconds: the kill
# lands while one is in flight in its team's namespace, and it still ends within the rest of the deletion.
INDEX_ENTRIES, INDEX_FILES = 600, 2
INDEX_ROWS_PER_SECOND = 200


async def test_worker_killed_during_account_deletion(drill_stack: DrillStack) -> None:
    settings = drill_stack.settings
    seeded = await seed(settings, bots=BOTS, rows=ROWS_PER_BOT, documents=FEW_DOCUMENTS)
    email = await fetchval(settings.database_url, "SELECT email FROM accounts WHERE id = $1::uuid", seeded.account_id)
    total = BOTS * sum(rows_per_service(ROWS_PER_BOT, FEW_DOCUMENTS).values())
    api = drill_stack.api()
    first = drill_stack.worker("killed", **PROCESSOR_RETRY)
    # Down for the whole deletion: registered at a port where nothing listens until the deletion is over.
    down = ProcessorServer(free_port())
    down_secret = down.add("down").secret
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    team: RegisteredIndex | None = None
    try:
        async with httpx.AsyncClient(base_url=api.url) as http:
            registered = await http.put(
                "/processors/down", json={"url": down.url("down"), "secret": down_secret}, headers=admin
            )
            assert registered.status_code in (200, 201), registered.text
            team = await _search_team(http, drill_stack, seeded.bot_ids)
            headers = {"Authorization": f"Bearer {seeded.api_key}"}
            accepted = await http.delete("/account", headers=headers)
            assert accepted.status_code == 202, accepted.text
            # Signed out before anything else runs.
            assert (await http.get("/account", headers=headers)).status_code == 401

        async def deleted() -> int:
            return total - await rows_left(settings.database_url, seeded.bot_ids)

        async def deleted_past(threshold: int) -> bool:
            return await deleted() > threshold

        async def under_way_through_nexus_too() -> bool:
            return await deleted_past(total // 10) and await nexus_operation_open(drill_stack.client, seeded.bot_ids)

        with ProgressRecorder(drill_stack.client, seeded.bot_ids) as recorder:
            await seconds_until(under_way_through_nexus_too, "deletion got under way, a Nexus operation in flight")
            first.kill()
            # Rows of the batch in flight roll back with the dead connection: this count is what survived.
            before_kill = await deleted()
            assert before_kill < total, "the deletion finished before the kill; seed more rows"

            second = drill_stack.worker("successor", **PROCESSOR_RETRY)
            try:
                resumed = await seconds_until(lambda: deleted_past(before_kill), "deletion resumed")
                handle = drill_stack.client.get_workflow_handle(
                    account_deletion_id(seeded.account_id), result_type=AccountDeletionResult
                )
                result = await asyncio.wait_for(handle.result(), timeout=120)
                receipts = await _processor_receipts(api.url, seeded.account_id, down)
            finally:
                assert second.terminate() == 0, second.log()[-2000:]
        recorder.assert_never_went_backwards()
    finally:
        first.kill()
        async with httpx.AsyncClient(base_url=api.url) as http:
            await http.delete("/processors/down", headers=admin)
            if team is not None:
                team.stop()
                # Retired, so that the package's later drills do not wait for it.
                await http.delete(f"/deletion-services/{team.name}", headers=admin)
        api.terminate()

    figures.record(
        "worker kill -9 mid account deletion -> new worker deleting again", resumed, f"{total:,} rows, 2 bots"
    )
    first_receipt, final_receipt = receipts
    assert first_receipt["complete"] is False and first_receipt["processors"]["down"]["status"] == "pending"
    assert final_receipt["complete"] is True and final_receipt["processors"]["down"]["status"] == "acknowledged"
    asked = {message_id for message_id, body in down.processors["down"].received}
    assert len(asked) == 1 and asked == down.processors["down"].distinct_acknowledged
    assert result.account_row_deleted and result.bots_deleted == BOTS
    assert await rows_left(settings.database_url, seeded.bot_ids) == 0
    assert [await remaining_objects(settings, bot_id) for bot_id in seeded.bot_ids] == [0] * len(seeded.bot_ids)
    assert await fetchval(settings.database_url, "SELECT count(*) FROM accounts WHERE email = $1", email) == 0
    keys = "SELECT count(*) FROM api_keys WHERE account_id = $1::uuid"
    assert await fetchval(settings.database_url, keys, seeded.account_id) == 0
    assert len(mail_to(drill_stack.smtp, email)) == 1
    assert team is not None
    assert first_receipt["services"][team.name] == {
        "rows_deleted": BOTS * INDEX_ENTRIES,
        "files_deleted": BOTS * INDEX_FILES,
        "remaining": 0,
    }
    for bot_id in seeded.bot_ids:
        assert team.index.count(bot_id) == (0, 0)
        await _each_slice_started_once(drill_stack, team, bot_id)


async def _search_team(http: httpx.AsyncClient, stack: DrillStack, bot_ids: list[str]) -> RegisteredIndex:
    """The search index behind its team's endpoint in the drills' registry, holding a part of every bot, paced to a
    rows/s of its own, its worker started."""
    name = f"search-team-{uuid.uuid4().hex[:6]}"
    team = await behind_an_endpoint(http, stack.client, name, stack.root / name)
    for bot_id in bot_ids:
        team.index.add(bot_id, entries=INDEX_ENTRIES, files=INDEX_FILES)
    shared = (await http.get("/deletion-budget", headers=ADMIN_HEADERS)).json()["rows_per_second"]
    body = {"rows_per_second": shared, "services": {name: INDEX_ROWS_PER_SECOND}}
    assert (await http.put("/deletion-budget", json=body, headers=ADMIN_HEADERS)).status_code == 200
    team.start()
    return team


async def _each_slice_started_once(stack: DrillStack, team: RegisteredIndex, bot_id: str) -> None:
    """Every DeleteSubjectData the bot's run asked of the endpoint, the dead worker's and its successor's, started one
    workflow in the team's namespace, and no more: no slice was asked for twice."""
    history = await stack.client.get_workflow_handle(bot_deletion_id(bot_id)).fetch_history()
    asked = nexus_calls(history, team.endpoint).count("DeleteSubjectData")
    team_client = await Client.connect(
        stack.temporal.address, namespace=SERVICE_NAMESPACE, data_converter=DATA_CONVERTER
    )
    slices = (
        'WorkflowType = "DeleteSubjectDataOperation"'
        f' AND WorkflowId STARTS_WITH "delete-slice-{bot_deletion_id(bot_id)}-"'
    )
    started = await eventually(
        lambda: team_client.count_workflows(slices), "the slices are listed", until=lambda found: found.count >= asked
    )
    assert asked >= 2 and started.count == asked


async def _processor_receipts(
    api_url: str, account_id: str, down: ProcessorServer
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The account's receipt while the processor is down, then the final one once it is back."""
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    async with httpx.AsyncClient(base_url=api_url) as http:

        async def receipt() -> dict[str, Any]:
            answer = await http.get(f"/accounts/{account_id}/deletion/receipt", headers=admin)
            assert answer.status_code == 200, answer.text
            return dict(answer.json()["receipt"])

        first = await receipt()
        await down.start()
        try:
            final = await eventually(
                receipt, "the processor that came back acknowledges", until=lambda signed: "completes" in signed
            )
        finally:
            await down.stop()
    return first, final


async def test_worker_killed_during_site_provisioning(drill_stack: DrillStack) -> None:
    # The bootstrap step fails its first attempts, so the run waits in backoff where the kill lands.
    first = drill_stack.worker("faulty", FAULT_INJECTION="bootstrap_site=transient:3")
    api = drill_stack.api()
    domain = f"drill-{uuid.uuid4().hex[:10]}.example.com"
    try:
        async with httpx.AsyncClient(base_url=api.url) as http:
            email = f"site-owner-{uuid.uuid4().hex[:8]}@example.com"
            owner = await http.post(
                "/accounts",
                json={"name": "Site owner", "email": email},
                headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
            )
            headers = {"Authorization": f"Bearer {owner.json()['api_key']}"}
            created = await http.post("/sites", json={"name": "Drill", "domain": domain}, headers=headers)
            assert created.status_code == 202, created.text
            site_id = created.json()["id"]
            handle = drill_stack.client.get_workflow_handle(site_creation_id(site_id))

            async def bootstrapping() -> bool:
                progress = await handle.query("progress")
                return bool(progress["steps"]["bootstrap"] == "running")

            await seconds_until(bootstrapping, "site reached the bootstrap step")
            first.kill()

            second = drill_stack.worker("clean")
            started = time.monotonic()
            try:

                async def active() -> bool:
                    site = (await http.get(f"/sites/{site_id}", headers=headers)).json()
                    assert site["status"] in ("provisioning", "active"), site
                    return bool(site["status"] == "active")

                await seconds_until(active, "site became active")
                resumed = time.monotonic() - started
                await asyncio.wait_for(handle.result(), timeout=120)
            finally:
                assert second.terminate() == 0, second.log()[-2000:]
    finally:
        first.kill()
        api.terminate()

    figures.record("worker kill -9 mid site provisioning -> site active under new worker", resumed)
    name = site_database_name(site_id)
    databases = await fetchval(
        drill_stack.settings.database_url, "SELECT count(*) FROM pg_database WHERE datname = $1", name
    )
    assert databases == 1
    # The database step ran once (its first try, inside a workflow task), before the kill, and never again.
    assert (await scheduled_activities(handle)).count("create_site_database") == 1
    assert len(mail_to(drill_stack.smtp, email, "is ready")) == 1
