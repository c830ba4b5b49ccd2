"""Seeding an account with distinct document files, waiting for an export, and checking its archive against
the databases and the object store independently of the export code (asyncpg's own types, not PostgreSQL's JSON
rendering)."""

from __future__ import annotations

import base64
import io
import json
import uuid
import zipfile
from datetime import datetime
from email import message_from_bytes
from email.message import Message
from typing import Any

import asyncpg
import httpx

from devstack.seed import Seeded, rows_per_table, seed, storage_keys
from devstack.smtp_sink import SmtpSink
from lifecycle.object_keys import archive_name, document_key, export_archive_key
from lifecycle.object_store import ObjectStore
from lifecycle.settings import Settings
from services.catalog import SERVICES
from services.runtime.database import service_database_url
from tests.db import connection
from tests.eventually import eventually

READY_SUBJECT = "Your data export is ready"


async def seeded_account(settings: Settings, *, bots: int, rows: int) -> Seeded:
    """A seeded account whose document objects all differ, so an object swapped in the archive is caught."""
    seeded = await seed(settings, bots=bots, rows=rows)
    store = ObjectStore(settings)
    try:
        for bot_id in seeded.bot_ids:
            for key in storage_keys(bot_id, rows_per_table(rows)["knowledge_documents"]):
                body = f"document {key}\n".encode() + uuid.uuid4().bytes * 8
                await store.put_bytes(document_key(bot_id, key), body)
    finally:
        await store.close()
    return seeded


async def stored_archive(settings: Settings, export_id: str) -> bytes | None:
    """The export's archive as the object store holds it, or None."""
    store = ObjectStore(settings)
    try:
        return await store.read(export_archive_key(archive_name(export_id)))
    finally:
        await store.close()


async def archive_traces(settings: Settings, export_id: str) -> list[str]:
    """Whatever of the export is left: its object in the store, its files in the exports directory."""
    local = sorted(path.name for path in settings.exports_path.glob(f"{export_id}*"))
    return (["object"] if await stored_archive(settings, export_id) is not None else []) + local


def headers_of(seeded: Seeded) -> dict[str, str]:
    return {"Authorization": f"Bearer {seeded.api_key}"}


async def account_email(settings: Settings, account_id: str) -> str:
    async with connection(settings.database_url) as conn:
        return str(await conn.fetchval("SELECT email FROM accounts WHERE id = $1", uuid.UUID(account_id)))


async def export_row(settings: Settings, export_id: str) -> asyncpg.Record:
    async with connection(settings.database_url) as conn:
        row = await conn.fetchrow("SELECT * FROM account_exports WHERE id = $1", uuid.UUID(export_id))
        assert row is not None
        return row


async def wait_for_status(settings: Settings, export_id: str, *wanted: str) -> asyncpg.Record:
    """The export's row once its status is one of `wanted` (and, for `ready`, its link mailed)."""

    def arrived(row: asyncpg.Record) -> bool:
        return row["status"] in wanted and (row["status"] != "ready" or row["mailed_at"] is not None)

    return await eventually(lambda: export_row(settings, export_id), f"export {export_id} is {wanted}", until=arrived)


def ready_mails(sink: SmtpSink, address: str) -> list[Message]:
    messages = [message_from_bytes(path.read_bytes()) for path in sink.messages()]
    return [m for m in messages if m["To"] == address and m["Subject"] == READY_SUBJECT]


def link_in(message: Message) -> str:
    body = message.get_payload(decode=True)
    assert isinstance(body, bytes)
    (line,) = [line for line in body.decode().splitlines() if "/download?" in line]
    return line[line.index("/exports/") :]


# Each of the project's services and its tables: the archive holds each service's part,
# `services/<name>/<name>.ndjson`, one line per row of the account's bots ({"table", "row"}, and "file" with it).
SERVICE_TABLES: dict[str, tuple[str, ...]] = {service.name: tuple(service.seeds) for service in SERVICES}


async def database_rows(settings: Settings, service: str, table: str, bot_id: str) -> list[dict[str, Any]]:
    """The bot's rows of a table, read from the service's own database."""
    url = service_database_url(service, beside=settings.database_url)
    async with connection(url) as conn:
        records = await conn.fetch(f"SELECT * FROM {table} WHERE bot_id = $1 ORDER BY id", uuid.UUID(bot_id))
        return [dict(record) for record in records]


def service_lines(archive: zipfile.ZipFile, service: str) -> list[dict[str, Any]]:
    """The lines of a service's part in the archive."""
    return [json.loads(line) for line in archive.read(f"services/{service}/{service}.ndjson").splitlines()]


def rows_of(lines: list[dict[str, Any]], table: str, bot_id: str) -> list[dict[str, Any]]:
    """The lines of one table's rows of one bot, in the part's order."""
    return [line for line in lines if line["table"] == table and line["row"]["bot_id"] == bot_id]


def _same(exported: Any, stored: Any) -> bool:
    if isinstance(stored, uuid.UUID):
        return uuid.UUID(exported) == stored
    if isinstance(stored, datetime):
        return datetime.fromisoformat(exported) == stored
    if isinstance(stored, str) and isinstance(exported, dict | list):
        return json.loads(stored) == exported  # asyncpg hands jsonb over as text
    return bool(exported == stored)


def open_archive(body: bytes) -> zipfile.ZipFile:
    archive = zipfile.ZipFile(io.BytesIO(body))
    assert archive.testzip() is None, "a corrupt entry"
    names = archive.namelist()
    assert len(names) == len(set(names)), "an entry appears twice"
    return archive


async def check_archive(body: bytes, settings: Settings, seeded: Seeded) -> None:
    """Every row of every service of every bot, field by field, and every document file byte for byte."""
    archive = open_archive(body)
    bots = [json.loads(line) for line in archive.read("bots.jsonl").splitlines()]
    assert sorted(bot["id"] for bot in bots) == sorted(seeded.bot_ids)
    (account,) = [json.loads(line) for line in archive.read("account.jsonl").splitlines()]
    assert account["id"] == seeded.account_id
    manifest = json.loads(archive.read("manifest.json"))
    store = ObjectStore(settings)
    for service, tables in SERVICE_TABLES.items():
        lines = service_lines(archive, service)
        checked = files = 0
        for bot_id in seeded.bot_ids:
            for table in tables:
                exported = rows_of(lines, table, bot_id)
                stored = await database_rows(settings, service, table, bot_id)
                assert len(exported) == len(stored) > 0, (table, len(exported), len(stored))
                for got, want in zip(exported, stored, strict=True):
                    assert set(got["row"]) == set(want), (table, got)
                    assert all(_same(got["row"][key], value) for key, value in want.items()), (table, got, want)
                    # A document's row carries its file; no other row carries one.
                    assert ("file" in got) == ("storage_key" in want), (table, got)
                    if "file" in got:
                        content = base64.b64decode(got["file"]["content_base64"])
                        assert content == await store.read(document_key(bot_id, want["storage_key"]))
                        files += 1
                checked += len(exported)
        assert checked == len(lines), f"{service}'s part holds rows of no bot of the account"
        assert manifest["services"][service] == {
            "rows": checked,
            "files": files,
            "files_missing": 0,
            "files_refused": [],
        }
    await store.close()


async def download(api: httpx.AsyncClient, link: str, **headers: str) -> httpx.Response:
    return await api.get(link, headers=headers)
