"""Processors told of an account deletion, against real local HTTP processors that fail for a while, time out,
acknowledge twice, and are down for the whole deletion and then recover: each is acknowledged once, every request
to it carries the same `webhook-id` and a signature the standardwebhooks library verifies, the first receipt says
`complete: false` while one is pending, and the final receipt is chained to it once the last one answers."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx
import pytest_asyncio
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import load_pem_public_key
from temporalio.client import Client, WorkflowUpdateFailedError

from devstack.ports import free_port
from lifecycle.settings import Settings
from lifecycle.workflow_ids import account_deletion_id, processor_erasure_id
from tests.conftest import ADMIN_HEADERS, ApiAccount
from tests.deletion.processor_servers import Behaviour, Processor, ProcessorServer, processor_server
from tests.deletion.receipt_checks import verifies
from tests.eventually import eventually
from worker import LifecycleWorkers


@pytest_asyncio.fixture(scope="session")
async def processors_http() -> AsyncIterator[ProcessorServer]:
    """The processors that answer from the start, one path each, for the whole session."""
    async with processor_server() as server:
        yield server


class Registered:
    """Processors a test registered through the API; every one is retired afterwards, so no later deletion of the
    session tells it."""

    def __init__(self, api: httpx.AsyncClient) -> None:
        self.api = api
        self.names: list[str] = []

    async def add(self, server: ProcessorServer, kind: str, behaviour: Behaviour | None = None) -> Processor:
        name = f"{kind}-{uuid.uuid4().hex[:8]}"
        processor = server.add(name, behaviour)
        answer = await self.api.put(
            f"/processors/{name}", json={"url": server.url(name), "secret": processor.secret}, headers=ADMIN_HEADERS
        )
        assert answer.status_code == 201, answer.text
        self.names.append(name)
        return processor

    def name_of(self, processor: Processor, server: ProcessorServer) -> str:
        return next(name for name, p in server.processors.items() if p is processor)


@pytest_asyncio.fixture
async def registered(api: httpx.AsyncClient) -> AsyncIterator[Registered]:
    registry = Registered(api)
    yield registry
    for name in registry.names:
        assert (await api.delete(f"/processors/{name}", headers=ADMIN_HEADERS)).status_code == 204


async def _public_key(api: httpx.AsyncClient) -> Ed25519PublicKey:
    key = load_pem_public_key((await api.get("/deletion-receipts/public-key")).json()["public_key"].encode())
    assert isinstance(key, Ed25519PublicKey)
    return key


async def _receipt(api: httpx.AsyncClient, account_id: str) -> dict[str, Any]:
    answer = await api.get(f"/accounts/{account_id}/deletion/receipt", headers=ADMIN_HEADERS)
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


async def _status(api: httpx.AsyncClient, account_id: str) -> dict[str, Any]:
    answer = await api.get(f"/accounts/{account_id}/deletion", headers=ADMIN_HEADERS)
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def _requests_for(processor: Processor, account_id: str) -> list[str]:
    """The webhook-ids of the requests about this account (another test's deletion may tell it too)."""
    return [message_id for message_id, body in processor.received if body["subject"]["id"] == account_id]


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
    first = await _receipt(api, account.id)
    assert first["receipt"]["erased"] is True and first["receipt"]["complete"] is False
    assert {name: p["status"] for name, p in first["receipt"]["processors"].items() if name in names} == dict.fromkeys(
        names, "pending"
    )

    down_name = registered.name_of(down, down_server)

    async def only_the_down_one_pending() -> dict[str, Any] | None:
        status = await _status(api, account.id)
        return status if status["processors_pending"] == [down_name] else None

    status = await eventually(only_the_down_one_pending, "every processor but the down one acknowledges")
    assert status["status"] == "completed"
    # Not final while one is pending: GET still answers the first receipt, complete false.
    assert (await _receipt(api, account.id))["sha256"] == first["sha256"]

    await down_server.start()
    try:

        async def final() -> dict[str, Any] | None:
            signed = await _receipt(api, account.id)
            return signed if signed["sha256"] != first["sha256"] else None

        signed = await eventually(final, "the final receipt is chained once the down processor recovers")
    finally:
        await down_server.stop()
    receipt = signed["receipt"]
    assert receipt["completes"] == {"receipt_id": first["receipt"]["id"], "sha256": first["sha256"]}
    assert receipt["previous_sha256"] is not None and receipt["complete"] is True
    assert {name: p["status"] for name, p in receipt["processors"].items()} == dict.fromkeys(names, "acknowledged")
    assert all(p["acknowledged_at"] and p["reference"].startswith("ref-") for p in receipt["processors"].values())
    assert verifies(signed, await _public_key(api))

    for name, processor in names.items():
        requests = _requests_for(processor, account.id)
        # One request, however often sent: the same webhook-id on every retry, acknowledged once.
        assert len(set(requests)) == 1, name
        assert {message_id for message_id in processor.distinct_acknowledged if message_id in requests} == set(requests)
        assert processor.refused_signatures == 0
        body = next(body for _, body in processor.received if body["subject"]["id"] == account.id)
        assert set(body) == {"erasure_id", "subject", "requested_at"}
        assert body["subject"] == {"kind": "account", "id": account.id}
    assert len(_requests_for(flaky, account.id)) == 4 and len(_requests_for(slow, account.id)) >= 2
    # It acknowledged twice (its first answer came too late); the receipt counts it once.
    assert twice.acknowledged.count(_requests_for(twice, account.id)[0]) == 2
    assert (await _status(api, account.id))["processors_pending"] == []


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

    receipt = (await _receipt(api, account.id))["receipt"]
    assert receipt["processors"][gone]["status"] == "skipped" and receipt["complete"] is False
    assert receipt["erased"] is True and "completes" in receipt
