"""Processors told of an account deletion, against real local HTTP processors that fail for a while, time out,
acknowledge twice, and are down for the whole deletion and then recover: each is acknowledged once, every request
to it carries the same `webhook-id` and a signature the standardwebhooks library verifies, the first receipt says
`complete: false` while one is pending, and the final receipt is chained to it once the last one answers."""

from __future__ import annotations

import base64
import re
import shlex
from pathlib import Path
from typing import Any

import asyncpg
import httpx
from temporalio.client import Client, WorkflowUpdateFailedError

from devstack.ports import free_port
from lifecycle.deletion.workflow_types import account_deletion_id, processor_erasure_id
from lifecycle.settings import Settings
from lifecycle.stuck import RunKind
from tests.conftest import ADMIN_HEADERS, ApiAccount
from tests.deletion.processor_servers import (
    Behaviour,
    ProcessorServer,
    Registered,
    account_status,
    new_secret,
    public_key,
    receipt_of_account,
    requests_for,
)
from tests.deletion.receipt_checks import verifies
from tests.eventually import eventually
from tests.operators.cli import AsyncCli
from tests.stuck import assert_alerts_once_stuck
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
    project_root: Path,
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
    cli = AsyncCli(temporal_client.service_client.config.target_host)

    # PROCESSOR_ALERT_AFTER (3 s in the tests) without an acknowledgement: an operator is alerted.
    async def alerted() -> int:
        return int(await conn.fetchval("SELECT count(*) FROM alerts WHERE workflow_id = $1", handle.id))

    await eventually(alerted, "an operator is alerted about the processor")
    # The delivery is stuck too: its retried requests are attempts, not progress.
    deletion_id = account_deletion_id(account.id)
    attempts_sql = "SELECT attempts FROM processor_erasures WHERE processor = $1 AND deletion_workflow_id = $2"
    attempts = int(await conn.fetchval(attempts_sql, gone, deletion_id))

    async def retried() -> bool:
        return int(await conn.fetchval(attempts_sql, gone, deletion_id)) > attempts

    await assert_alerts_once_stuck(
        settings,
        temporal_client,
        RunKind.PROCESSOR_ERASURE,
        f"{gone}/{deletion_id}",
        meanwhile=lambda: eventually(retried, "the request is sent again"),
    )
    try:
        await handle.execute_update("skip_processor", "nobody", result_type=str)
        raise AssertionError("a processor the deletion does not tell cannot be skipped")
    except WorkflowUpdateFailedError:
        pass
    # The runbook's command, as written there.
    await cli.run(*runbook_skip_command(project_root, account.id, gone))

    async def final() -> dict[str, Any]:
        return dict((await receipt_of_account(api, account.id))["receipt"])

    receipt = await eventually(final, "the final receipt is signed after the skip", until=lambda r: "completes" in r)
    assert (await handle.result())[gone] == "skipped"
    assert receipt["processors"][gone]["status"] == "skipped" and receipt["complete"] is False
    assert receipt["erased"] is True and "completes" in receipt


def _section(path: Path, heading: str) -> str:
    text = path.read_text()
    section = text[text.index(heading) :]
    block = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert block is not None
    return block.group(1).replace("\\\n", " ")


def runbook_skip_command(project_root: Path, account_id: str, processor: str) -> list[str]:
    """The runbook's `skip_processor` command, its placeholders filled in, without the leading `temporal`."""
    text = (project_root / "docs" / "operations.md").read_text()
    section = text[text.index("## Processors") :]
    (line,) = [line for line in section.splitlines() if "--name skip_processor" in line]
    line = line.replace("<account id>", account_id).replace("<processor>", processor)
    command = shlex.split(line)
    assert command[0] == "temporal"
    return command[1:]


async def test_the_deletion_pages_processor_commands_register_list_and_retire(
    api: httpx.AsyncClient, project_root: Path, processors_http: ProcessorServer
) -> None:
    lines = [
        line for line in _section(project_root / "docs" / "deletion.md", "## Telling processors").splitlines() if line
    ]
    methods, answers = [], []
    for line in lines:
        args = shlex.split(line)
        methods.append(args[args.index("-X") + 1] if "-X" in args else "GET")
        path = next(arg for arg in args if arg.startswith("localhost:8000"))[len("localhost:8000") :]
        # A processor that answers, and a real secret, in place of the page's examples.
        body = (
            {"url": processors_http.url("crm"), "secret": processors_http.add("crm").secret} if "-d" in args else None
        )
        answers.append(await api.request(methods[-1], path, json=body, headers=ADMIN_HEADERS))
    assert methods == ["PUT", "GET", "DELETE"]
    assert answers[0].status_code in (200, 201) and answers[2].status_code == 204
    (listed,) = [p for p in answers[1].json()["processors"] if p["name"] == "crm"]
    assert listed["retired_at"] is None and "secret" not in listed
    after = (await api.get("/processors", headers=ADMIN_HEADERS)).json()["processors"]
    assert next(p for p in after if p["name"] == "crm")["retired_at"] is not None


async def test_a_processor_is_refused_clearly(api: httpx.AsyncClient) -> None:
    good = {"url": "https://crm.example.com/erasure", "secret": new_secret()}
    for name, body in [
        ("crm", {**good, "secret": "sk_live_123"}),
        ("crm", {**good, "secret": "whsec_not base64!"}),
        ("crm", {**good, "secret": "whsec_" + base64.b64encode(b"short").decode()}),
        ("crm", {**good, "url": "ftp://crm.example.com"}),
        ("crm", {**good, "extra": 1}),
        ("Not-A-Slug", good),
    ]:
        answer = await api.put(f"/processors/{name}", json=body, headers=ADMIN_HEADERS)
        assert answer.status_code == 422, (body, answer.text)
        assert answer.headers["content-type"] == "application/problem+json"
    missing = await api.delete("/processors/never-registered", headers=ADMIN_HEADERS)
    assert missing.status_code == 404 and missing.headers["content-type"] == "application/problem+json"
    assert (await api.put("/processors/crm", json=good)).status_code == 401
