"""The processors' step survives its worker stopped mid-request, a lost answer, and resets of both runs: each
processor is acknowledged once, and the deletion has one first receipt and one final one."""

from __future__ import annotations

import asyncpg
import httpx
from temporalio.client import Client

from api.app import create_app
from devstack.ports import free_port
from lifecycle.deletion.workflow_types import account_deletion_id, processor_erasure_id
from lifecycle.settings import Settings
from tests.conftest import ADMIN_HEADERS
from tests.deletion.processor_servers import (
    Behaviour,
    ProcessorServer,
    Registered,
    account_status,
    receipt_of_account,
    requests_for,
)
from tests.eventually import eventually
from tests.operators.cli import AsyncCli
from tests.workers import own_queue, own_worker


async def _reset(cli: AsyncCli, workflow_id: str) -> None:
    await cli.run("workflow", "reset", "--workflow-id", workflow_id, "--type", "FirstWorkflowTask", "--reason", "test")


async def test_a_stopped_worker_a_lost_answer_and_resets_tell_each_processor_once(
    settings: Settings,
    temporal_client: Client,
    processors_http: ProcessorServer,
    conn: asyncpg.Connection,
) -> None:
    # A queue of its own, so this test stops and starts the only worker that runs the deletion.
    own = own_queue(settings)
    app = create_app(own, temporal_client=temporal_client)
    cli = AsyncCli(temporal_client.service_client.config.target_host)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://testserver") as api,
    ):
        registered = Registered(api)
        try:
            # Holds its first request past the worker's stop; acknowledges at once; down until the end.
            hanging = await registered.add(processors_http, "hanging", Behaviour(hang=1, hang_seconds=5))
            prompt = await registered.add(processors_http, "prompt")
            late_server = ProcessorServer(free_port())
            late = await registered.add(late_server, "late")
            created = await api.post("/accounts", json={"name": "t", "email": "t@example.com"}, headers=ADMIN_HEADERS)
            account_id, key = created.json()["id"], created.json()["api_key"]
            deletion = account_deletion_id(account_id)
            erasure = processor_erasure_id(deletion)

            # Every delivery's first answer is lost after it ran (a worker gone once the acknowledgement was
            # recorded): the retry finds it recorded and sends nothing again.
            async with own_worker(own, temporal_client, faults="deliver_erasure_request=lose:1"):
                auth = {"Authorization": f"Bearer {key}"}
                assert (await api.delete("/account", headers=auth)).status_code == 202

                async def prompt_acknowledged() -> bool:
                    answers = (await account_status(api, account_id))["processors"]
                    return answers.get(registered.names[1], {}).get("status") == "acknowledged"

                # Its acknowledgement recorded (and then its answer lost) before the worker stops.
                await eventually(prompt_acknowledged, "the prompt processor's acknowledgement is recorded")
                await eventually(lambda: requests_for(hanging, account_id), "the hanging processor is asked")
            # The worker stopped mid-request. Both runs are reset meanwhile: the processors' run while it waits,
            # the account's after it completed (it signs no second receipt and starts no second processors' run).
            await _reset(cli, erasure)
            await _reset(cli, deletion)
            async with own_worker(own, temporal_client):

                async def only_late_pending() -> bool:
                    return (await account_status(api, account_id))["processors_pending"] == [registered.names[2]]

                await eventually(only_late_pending, "the hanging and the prompt processors acknowledge")
                await late_server.start()
                try:
                    result = await temporal_client.get_workflow_handle(erasure).result()
                finally:
                    await late_server.stop()
            assert set(result.values()) == {"acknowledged"}
            receipt = (await receipt_of_account(api, account_id))["receipt"]
            assert receipt["complete"] is True and set(receipt["processors"]) == set(registered.names)
        finally:
            for name in registered.names:
                await api.delete(f"/processors/{name}", headers=ADMIN_HEADERS)

    for processor in (hanging, prompt, late):
        requests = requests_for(processor, account_id)
        assert len(set(requests)) == 1 and set(requests) <= processor.distinct_acknowledged
    # The lost answer was recorded before it was lost: one request only.
    assert len(requests_for(prompt, account_id)) == 1
    kinds = await conn.fetch(
        "SELECT receipt_key LIKE 'follow-up:%' AS follow_up FROM deletion_receipts WHERE account_id = $1::uuid",
        account_id,
    )
    assert sorted(row["follow_up"] for row in kinds) == [False, True]
