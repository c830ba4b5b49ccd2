"""An export through the API on a real worker: contents checked against the seeded data, the signed link,
Range requests, retention, the operator's expire_now, joining, and DELETE /account with export_first."""

from __future__ import annotations

import hashlib
import time
import uuid
from datetime import timedelta

import httpx
from temporalio.client import Client

from devstack.ports import free_port
from devstack.seed import rows_per_table
from devstack.smtp_sink import SmtpSink
from lifecycle.deletion.workflow_types import account_deletion_id
from lifecycle.exports.links import download_path
from lifecycle.settings import Settings
from tests.db import connection
from tests.exports.conftest import ApiWith
from tests.exports.helpers import (
    SERVICE_TABLES,
    account_email,
    archive_traces,
    check_archive,
    headers_of,
    link_in,
    open_archive,
    ready_mails,
    rows_of,
    seeded_account,
    service_lines,
    stored_archive,
    wait_for_status,
)
from worker import LifecycleWorkers


async def _export(api: httpx.AsyncClient, headers: dict[str, str]) -> str:
    response = await api.post("/account/exports", headers=headers)
    assert response.status_code == 202, response.text
    body = response.json()
    assert body["status"] in ("pending", "writing")
    assert body["status_url"] == f"/account/exports/{body['id']}" == response.headers["Location"]
    return str(body["id"])


async def test_the_archive_holds_every_row_and_file_and_the_link_is_mailed_once(
    api: httpx.AsyncClient, worker: LifecycleWorkers, settings: Settings, smtp_sink: SmtpSink
) -> None:
    seeded = await seeded_account(settings, bots=2, rows=300)
    export_id = await _export(api, headers_of(seeded))
    await wait_for_status(settings, export_id, "ready")

    status = (await api.get(f"/account/exports/{export_id}", headers=headers_of(seeded))).json()
    assert status["status"] == "ready" and status["expires_at"] and status["download_url"]
    link = status["download_url"]
    response = await api.get(link)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/zip"
    assert int(response.headers["content-length"]) == status["size_bytes"] == len(response.content)
    assert hashlib.sha256(response.content).hexdigest() == status["sha256"]
    await check_archive(response.content, settings, seeded)
    # Served from the object store; the worker kept no copy on its disk.
    assert await stored_archive(settings, export_id) == response.content
    assert await archive_traces(settings, export_id) == ["object"]

    (mail,) = ready_mails(smtp_sink, await account_email(settings, seeded.account_id))
    assert link_in(mail) == link
    # Another account cannot read this export's status.
    other = await seeded_account(settings, bots=1, rows=10)
    assert (await api.get(f"/account/exports/{export_id}", headers=headers_of(other))).status_code == 404


async def test_range_requests_and_the_link_checks(
    api: httpx.AsyncClient, worker: LifecycleWorkers, settings: Settings, temporal_client: Client
) -> None:
    seeded = await seeded_account(settings, bots=1, rows=100)
    export_id = await _export(api, headers_of(seeded))
    row = await wait_for_status(settings, export_id, "ready")
    link = download_path(settings, export_id, int(row["expires_at"].timestamp()))
    whole = (await api.get(link)).content

    part = await api.get(link, headers={"Range": "bytes=10-99"})
    assert part.status_code == 206
    assert part.headers["content-range"] == f"bytes 10-99/{len(whole)}"
    assert part.headers["content-length"] == "90" and part.content == whole[10:100]
    tail = await api.get(link, headers={"Range": "bytes=-5"})
    assert tail.status_code == 206 and tail.content == whole[-5:]
    assert (await api.get(link, headers={"Range": f"bytes={len(whole) + 10}-"})).status_code == 416

    tampered = link.replace("signature=", "signature=0")
    assert (await api.get(tampered)).status_code == 403
    bad = await api.get(link[: link.index("signature=")] + "signature=" + "a" * 64)
    assert bad.status_code == 403 and bad.headers["content-type"] == "application/problem+json"
    # A correctly signed link whose time has passed is refused.
    past = int(time.time()) - 1
    assert (await api.get(download_path(settings, export_id, past))).status_code == 403
    later = int(time.time()) + 60
    # Signed by us for an export that is gone: its account's deletion destroyed it.
    assert (await api.get(download_path(settings, str(uuid.uuid4()), later))).status_code == 410

    # The operator's expedite: the archive goes now and the link says so.
    handle = temporal_client.get_workflow_handle(row["workflow_id"])
    assert "expired" in await handle.execute_update("expire_now", result_type=str)
    assert (await api.get(link)).status_code == 410
    assert await archive_traces(settings, export_id) == []
    status = (await api.get(f"/account/exports/{export_id}", headers=headers_of(seeded))).json()
    assert status["status"] == "expired" and status["download_url"] is None


async def test_a_download_while_the_store_is_unreachable_is_503(
    api_with: ApiWith, worker: LifecycleWorkers, settings: Settings
) -> None:
    seeded = await seeded_account(settings, bots=1, rows=10)
    async with api_with() as api:
        export_id = await _export(api, headers_of(seeded))
    row = await wait_for_status(settings, export_id, "ready")
    link = download_path(settings, export_id, int(row["expires_at"].timestamp()))
    # An API whose store address answers nothing: the link is fine, the store is not.
    async with api_with(s3_endpoint_url=f"http://127.0.0.1:{free_port()}") as cut_off:
        response = await cut_off.get(link)
    assert response.status_code == 503, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert response.headers["retry-after"] == "30"


async def test_retention_deletes_the_archive(api_with: ApiWith, worker: LifecycleWorkers, settings: Settings) -> None:
    seeded = await seeded_account(settings, bots=1, rows=50)
    async with api_with(export_retention=timedelta(seconds=1)) as api:
        export_id = await _export(api, headers_of(seeded))
        ready = await wait_for_status(settings, export_id, "ready", "expired")
        link = download_path(settings, export_id, int(ready["expires_at"].timestamp()) + 3600)
        expired = await wait_for_status(settings, export_id, "expired")
        assert expired["expired_at"] >= expired["expires_at"]
        assert await archive_traces(settings, export_id) == []
        # Even a link signed for later: the archive is gone.
        assert (await api.get(link)).status_code == 410


async def test_a_repeat_while_one_is_open_joins_it(
    api_with: ApiWith, settings: Settings, temporal_client: Client
) -> None:
    seeded = await seeded_account(settings, bots=1, rows=10)
    # No worker polls this queue, so the export stays open however slow the machine.
    async with api_with(task_queue=f"no-worker-{uuid.uuid4().hex[:8]}") as api:
        first = await _export(api, headers_of(seeded))
        assert await _export(api, headers_of(seeded)) == first
    row = await wait_for_status(settings, first, "pending")
    assert row["workflow_id"] == f"account-export-{seeded.account_id}-1"
    await temporal_client.get_workflow_handle(row["workflow_id"]).terminate("test done")


async def test_export_first_mails_the_link_before_the_account_goes(
    api: httpx.AsyncClient, worker: LifecycleWorkers, settings: Settings, temporal_client: Client, smtp_sink: SmtpSink
) -> None:
    seeded = await seeded_account(settings, bots=2, rows=100)
    address = await account_email(settings, seeded.account_id)
    response = await api.request("DELETE", "/account", json={"export_first": True}, headers=headers_of(seeded))
    assert response.status_code == 202, response.text
    await temporal_client.get_workflow_handle(account_deletion_id(seeded.account_id)).result()

    async with connection(settings.database_url) as conn:
        account = uuid.UUID(seeded.account_id)
        assert await conn.fetchval("SELECT count(*) FROM accounts WHERE id = $1", account) == 0
        export = await conn.fetchrow("SELECT * FROM account_exports WHERE account_id = $1", account)
        deleted_at = await conn.fetchval(
            "SELECT completed_at FROM deletion_requests WHERE workflow_id = $1", account_deletion_id(account)
        )
    assert export["status"] == "ready" and export["deletion_waits"]
    assert export["mailed_at"] < deleted_at

    # The mailed link works without a key, after the account is gone, and holds what the account held.
    (mail,) = ready_mails(smtp_sink, address)
    download = await api.get(link_in(mail))
    assert download.status_code == 200
    archive = open_archive(download.content)
    expected = rows_per_table(100)
    for service, tables in SERVICE_TABLES.items():
        lines = service_lines(archive, service)
        for bot_id in seeded.bot_ids:
            for table in tables:
                assert len(rows_of(lines, table, bot_id)) == expected[table]
