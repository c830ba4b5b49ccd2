"""Processors told of an account deletion, against real local HTTP processors that fail for a while, time out,
acknowledge twice, and are down for the whole deletion and then recover: each is acknowledged once, every request
to it carries the same `webhook-id` and a signature the standardwebhooks library verifies, the first receipt says
`complete: false` while one is pending, and the final receipt is chained to it once the last one answers."""

from __future__ import annotations

from typing import Any

import asyncpg
import httpx
from temporalio.client import Client, WorkflowUpdateFailedError

from devstack.ports import free_port
from lifecycle.settings import Settings
from lifecycle.workflow_ids import account_deletion_id, processor_erasure_id
from tests.conftest import ADMIN_HEADERS, ApiAccount
from tests.deletion.processor_servers import (
    Behaviour,
    ProcessorServer,
    Registered,
    account_status,
    public_key,
    receipt_of_account,
    requests_for,
)
from tests.deletion.receipt_checks import verifies
from tests.eventually import eventually
from worker import LifecycleWorkers


async def _delete_account(api: httpx.AsyncClient, account: ApiAccount, client: Client) -> None:
    assert (await api.post("/bots", json={"name": "told"}, headers=account.headers)).status_code == 201
    assert (await api.delete("/account", headers=account.headers)).status_code == 202
    # The deletion itself closes without waiting for any processor.
    await client.get_workflow_handle(account_deletion_id(account.id)).result()


async def test_every_processor_is_acknowledged_once_and_the_final_receipt_is_chained(
    api: httpx.AsyncClient,
    account: ApiAccount,
    registered: Registered,
    processors_http: ProcessorServer,
    temporal_client: Client,
    worker: LifecycleWorkers,
    settings: Settings,
) -> None:
    flaky = await registered.add(processors_http, "flaky", Behaviour(fail=3))
    slow = await registered.add(processors_http, "slow", Behaviour(hang=1))
    twice = await registered.add(processors_http, "twice", Behaviour(late_ack=True))
    # Down for the whole deletion: registered at a port where nothing listens yet.
    down_server = ProcessorServer(free_port())
    down = await registered.add(down_server, "down")
    names = {registered.name_of(p, s): p for p, s in [(flaky, processors_http), (slow, processors_http)]}
    names |= {registered.name_of(twice, processors_http): twice, registered.name_of(down, down_server): down}
    listed = (await api.get("/processors", headers=ADMIN_HEADERS)).json()["processors"]
    assert set(names) <= {p["name"] for p in listed} and all("secret" not in p for p in listed)
    preview = (await api.get("/account/deletion/preview", headers=account.headers)).json()
    assert set(names) <= set(preview["processors"])

    await _delete_account(api, account, temporal_client)
    first = await receipt_of_account(api, account.id)
    assert first["receipt"]["erased"] is True and first["receipt"]["complete"] is False
    assert {name: p["status"] for name, p in first["receipt"]["processors"].items() if name in names} == dict.fromkeys(
        names, "pending"
    )

    down_name = registered.name_of(down, down_server)

    async def only_the_down_one_pending() -> dict[str, Any] | None:
        status = await account_status(api, account.id)
        return status if status["processors_pending"] == [down_name] else None

    status = await eventually(only_the_down_one_pending, "every processor but the down one acknowledges")
    assert status["status"] == "completed"
    # Not final while one is pending: GET still answers the first receipt, complete false.
    assert (await receipt_of_account(api, account.id))["sha256"] == first["sha256"]

    await down_server.start()
    try:

        async def final() -> dict[str, Any] | None:
            signed = await receipt_of_account(api, account.id)
            return signed if signed["sha256"] != first["sha256"] else None

        signed = await eventually(final, "the final receipt is chained once the down processor recovers")
    finally:
        await down_server.stop()
    receipt = signed["receipt"]
    assert receipt["completes"] == {"receipt_id": first["receipt"]["id"], "sha256": first["sha256"]}
    assert receipt["previous_sha256"] is not None and receipt["complete"] is True
    assert {name: p["status"] for name, p in receipt["processors"].items()} == dict.fromkeys(names, "acknowledged")
    assert all(p["acknowledged_at"] and p["reference"].startswith("ref-") for p in receipt["processors"].values())
    assert verifies(signed, await public_key(api))

    for name, processor in names.items():
        requests = requests_for(processor, account.id)
        # One request, however often sent: the same webhook-id on every retry, acknowledged once.
        assert len(set(requests)) == 1, name
        assert {message_id for message_id in processor.distinct_acknowledged if message_id in requests} == set(requests)
        assert processor.refused_signatures == 0
        body = next(body for _, body in processor.received if body["subject"]["id"] == account.id)
        assert set(body) == {"erasure_id", "subject", "requested_at"}
        assert body["subject"] == {"kind": "account", "id": account.id}
    assert len(requests_for(flaky, account.id)) == 4 and len(requests_for(slow, account.id)) >= 2
    # It acknowledged twice (its first answer came too late); the receipt counts it once.
    assert twice.acknowledged.count(requests_for(twice, account.id)[0]) == 2
    assert (await account_status(api, account.id))["processors_pending"] == []


async def test_an_operator_skips_a_processor_after_its_alert(
    api: httpx.AsyncClient,
    account: ApiAccount,
    registered: Registered,
    temporal_client: Client,
    worker: LifecycleWorkers,
    settings: Settings,
    conn: asyncpg.Connection,
) -> None:
    gone_server = ProcessorServer(free_port())  # never started
    gone = registered.name_of(await registered.add(gone_server, "gone"), gone_server)
    await _delete_account(api, account, temporal_client)
    handle = temporal_client.get_workflow_handle(processor_erasure_id(account_deletion_id(account.id)))

    # PROCESSOR_ALERT_AFTER (3 s in the tests) without an acknowledgement: an operator is alerted.
    async def alerted() -> int:
        return int(await conn.fetchval("SELECT count(*) FROM alerts WHERE workflow_id = $1", handle.id))

    await eventually(alerted, "an operator is alerted about the processor")
    try:
        await handle.execute_update("skip_processor", "nobody", result_type=str)
        raise AssertionError("a processor the deletion does not tell cannot be skipped")
    except WorkflowUpdateFailedError:
        pass
    assert "skipped" in await handle.execute_update("skip_processor", gone, result_type=str)
    assert (await handle.result())[gone] == "skipped"

    receipt = (await receipt_of_account(api, account.id))["receipt"]
    assert receipt["processors"][gone]["status"] == "skipped" and receipt["complete"] is False
    assert receipt["erased"] is True and "completes" in receipt
