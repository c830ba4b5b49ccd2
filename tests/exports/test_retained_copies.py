"""Every copy a deletion keeps is on its receipt: the `export_first` archive is listed as kept until its retention
ends, and its destruction is followed up by a receipt chained to the first; a deletion without `export_first`
removes the account's earlier exports (objects and rows) before its receipt; a destroyed archive's link answers 410.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx
import pytest_asyncio
from sqlalchemy.ext.asyncio import create_async_engine
from temporalio.client import Client

from activities.deletion.follow_up import follow_up_destroyed_archive
from devstack.seed import asyncpg_dsn
from devstack.smtp_sink import SmtpSink
from lifecycle.deletion.receipt_keys import ReceiptSigner
from lifecycle.deletion.workflow_types import account_deletion_id
from lifecycle.exports.links import download_path
from lifecycle.object_store import ObjectStore
from lifecycle.settings import Settings
from tests.deletion.processor_servers import public_key, receipt_of_account
from tests.deletion.receipt_checks import verifies
from tests.eventually import eventually
from tests.exports.helpers import (
    account_email,
    headers_of,
    link_in,
    ready_mails,
    seeded_account,
    stored_archive,
    wait_for_status,
)
from worker import LifecycleWorkers


@pytest_asyncio.fixture
async def conn(settings: Settings) -> AsyncIterator[asyncpg.Connection]:
    connection = await asyncpg.connect(asyncpg_dsn(settings.database_url))
    try:
        yield connection
    finally:
        await connection.close()


def _time(row: asyncpg.Record, column: str) -> str:
    return str(row[column].isoformat().replace("+00:00", "Z"))


async def _gone(api: httpx.AsyncClient, link: str) -> None:
    answer = await api.get(link)
    assert answer.status_code == 410, answer.text
    assert answer.headers["content-type"] == "application/problem+json"


async def test_the_kept_archive_is_on_the_receipt_and_its_destruction_is_followed_up(
    api: httpx.AsyncClient,
    worker: LifecycleWorkers,
    settings: Settings,
    temporal_client: Client,
    smtp_sink: SmtpSink,
    conn: asyncpg.Connection,
) -> None:
    seeded = await seeded_account(settings, bots=1, rows=20)
    address = await account_email(settings, seeded.account_id)
    response = await api.request("DELETE", "/account", json={"export_first": True}, headers=headers_of(seeded))
    assert response.status_code == 202, response.text
    await temporal_client.get_workflow_handle(account_deletion_id(seeded.account_id)).result()

    export = await conn.fetchrow("SELECT * FROM account_exports WHERE account_id = $1::uuid", seeded.account_id)
    first = await receipt_of_account(api, seeded.account_id)
    kept = {"kind": "export_archive", "export_id": str(export["id"]), "expires_at": _time(export, "expires_at")}
    assert first["receipt"]["retained"] == [kept]
    assert first["receipt"]["erased"] is True

    # The operator's expire_now destroys it before its retention ends, as the retention timer would.
    await temporal_client.get_workflow_handle(export["workflow_id"]).execute_update("expire_now", result_type=str)

    async def follow_up() -> dict[str, Any] | None:
        signed = await receipt_of_account(api, seeded.account_id)
        return signed if signed["sha256"] != first["sha256"] else None

    signed = await eventually(follow_up, "the archive's destruction is followed up")
    receipt = signed["receipt"]
    assert receipt["completes"] == {"receipt_id": first["receipt"]["id"], "sha256": first["sha256"]}
    assert receipt["reason"] == "retained_copy_destroyed" and receipt["retained"] == []
    expired = await conn.fetchrow("SELECT * FROM account_exports WHERE id = $1", export["id"])
    destroyed = {"kind": "export_archive", "export_id": str(export["id"]), "destroyed_at": _time(expired, "expired_at")}
    assert receipt["destroyed"] == [destroyed]
    assert receipt["complete"] is True and receipt["previous_sha256"] is not None
    assert verifies(signed, await public_key(api))
    (mail,) = ready_mails(smtp_sink, address)
    await _gone(api, link_in(mail))

    # Destroyed again (a retried step, the export reconciler): the same follow-up, nothing signed twice.
    engine, store = create_async_engine(settings.database_url), ObjectStore(settings)
    try:
        again = await follow_up_destroyed_archive(engine, store, ReceiptSigner(settings), str(export["id"]))
    finally:
        await engine.dispose()
        await store.close()
    assert again == receipt["id"]
    account_receipts = "SELECT count(*) FROM deletion_receipts WHERE account_id = $1::uuid AND subject_kind = 'account'"
    assert await conn.fetchval(account_receipts, seeded.account_id) == 2


async def test_a_deletion_without_export_first_removes_the_earlier_exports_first(
    api: httpx.AsyncClient,
    worker: LifecycleWorkers,
    settings: Settings,
    temporal_client: Client,
    conn: asyncpg.Connection,
) -> None:
    seeded = await seeded_account(settings, bots=1, rows=20)
    requested = await api.post("/account/exports", headers=headers_of(seeded))
    assert requested.status_code == 202, requested.text
    export_id = requested.json()["id"]
    row = await wait_for_status(settings, export_id, "ready")
    assert await stored_archive(settings, export_id) is not None
    link = download_path(settings, export_id, int(row["expires_at"].timestamp()))
    assert (await api.get(link)).status_code == 200

    assert (await api.delete("/account", headers=headers_of(seeded))).status_code == 202
    await temporal_client.get_workflow_handle(account_deletion_id(seeded.account_id)).result()

    assert await stored_archive(settings, export_id) is None
    assert await conn.fetchval("SELECT count(*) FROM account_exports WHERE id = $1", uuid.UUID(export_id)) == 0
    await _gone(api, link)
    receipt = (await receipt_of_account(api, seeded.account_id))["receipt"]
    assert receipt["retained"] == [] and receipt["complete"] is True
