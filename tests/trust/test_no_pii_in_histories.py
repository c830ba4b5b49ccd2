"""Histories outlive a deletion until retention expires, so they must hold ids only: no email, no name.

A site creation and an account deletion (with child bot deletions, a site teardown and an export first) run
through the API on a real worker; every history and description is exported with the real `temporal` binary
and searched, payloads base64-decoded.
"""

from __future__ import annotations

import asyncio
import base64
import json
import uuid
from typing import Any

import asyncpg
import httpx
import pytest
from temporalio.client import Client

from devstack.seed import asyncpg_dsn
from lifecycle.deletion.workflow_types import account_deletion_id, deletion_preview_id
from lifecycle.settings import Settings
from services.chat import CHAT
from services.runtime.database import service_database_url
from tests.conftest import ADMIN_HEADERS
from tests.eventually import eventually
from tests.temporal_cli import TemporalCli
from worker import LifecycleWorkers


def _decoded_payloads(document: Any) -> str:
    """Every payload's `data` in an exported history or description, base64-decoded."""
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("metadata"), dict) and isinstance(node.get("data"), str):
                found.append(base64.b64decode(node["data"]).decode(errors="replace"))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(document)
    return "\n".join(found)


async def _account(api: httpx.AsyncClient, name: str, email: str) -> tuple[str, dict[str, str]]:
    created = await api.post("/accounts", json={"name": name, "email": email}, headers=ADMIN_HEADERS)
    assert created.status_code == 201, created.text
    body = created.json()
    return body["id"], {"Authorization": f"Bearer {body['api_key']}"}


async def _add_rows(settings: Settings, bot_id: str) -> None:
    """Rows of the bot in the chat service's own database."""
    conn = await asyncpg.connect(asyncpg_dsn(service_database_url(CHAT.name, beside=settings.database_url)))
    try:
        await conn.execute(
            "INSERT INTO messages (bot_id, conversation_ref, body) "
            "SELECT $1, g, 'hello ' || g FROM generate_series(1, 500) g",
            uuid.UUID(bot_id),
        )
        await conn.execute(
            "INSERT INTO conversations (bot_id, title) SELECT $1, 'c' || g FROM generate_series(1, 50) g",
            uuid.UUID(bot_id),
        )
    finally:
        await conn.close()


async def _site_active(api: httpx.AsyncClient, headers: dict[str, str], site_id: str) -> None:
    async def site() -> dict[str, Any]:
        body: dict[str, Any] = (await api.get(f"/sites/{site_id}", headers=headers)).json()
        return body

    await eventually(site, f"site {site_id} becomes active", until=lambda body: body["status"] == "active")


@pytest.mark.long
async def test_histories_hold_no_email_and_no_name(
    api: httpx.AsyncClient, worker: LifecycleWorkers, temporal_client: Client, settings: Settings
) -> None:
    marker = uuid.uuid4().hex[:8]
    people = {
        f"Quillfeather Zyxwvut {marker}": f"quill.{marker}@pii-probe.example",
        f"Marigold Vantablack {marker}": f"marigold.{marker}@pii-probe.example",
    }
    (site_owner_name, site_owner_email), (leaver_name, leaver_email) = people.items()

    site_owner, site_headers = await _account(api, site_owner_name, site_owner_email)
    created = await api.post(
        "/sites", json={"name": "Blog", "domain": f"pii-{marker}.example.com"}, headers=site_headers
    )
    assert created.status_code == 202, created.text
    await _site_active(api, site_headers, created.json()["id"])

    leaver, leaver_headers = await _account(api, leaver_name, leaver_email)
    leaver_site = await api.post(
        "/sites", json={"name": "Shop", "domain": f"pii-shop-{marker}.example.com"}, headers=leaver_headers
    )
    await _site_active(api, leaver_headers, leaver_site.json()["id"])
    for n in range(2):
        bot = (await api.post("/bots", json={"name": f"bot {n}"}, headers=leaver_headers)).json()
        await _add_rows(settings, bot["id"])
    # Previewed first: the preview's run is searched too.
    assert (await api.get("/account/deletion/preview", headers=leaver_headers)).status_code == 200
    # Exported first: the export's run (its parts, archive and mailed link) is searched too.
    deleted = await api.request("DELETE", "/account", json={"export_first": True}, headers=leaver_headers)
    assert deleted.status_code == 202
    await asyncio.wait_for(temporal_client.get_workflow_handle(account_deletion_id(leaver)).result(), 90)

    cli = TemporalCli(temporal_client.service_client.config.target_host)
    query = f'AccountId="{site_owner}" OR AccountId="{leaver}"'
    workflow_ids = {run["execution"]["workflowId"] for run in cli.jsonl("workflow", "list", "--query", query)}
    # Two site creations; the account deletion with its two bot deletions and its site teardown; the export.
    assert len(workflow_ids) == 7, workflow_ids
    # The preview carries no search attribute (nothing that lists deletions should find it): named by its id.
    workflow_ids.add(deletion_preview_id("account", leaver))
    exported = []
    for workflow_id in sorted(workflow_ids):
        exported.append(cli.run("workflow", "show", "--workflow-id", workflow_id, "--output", "json").stdout)
        exported.append(cli.run("workflow", "describe", "--workflow-id", workflow_id, "--output", "json").stdout)
    # `workflow show` prints payloads base64-encoded: decode every one, so the search reads what they hold.
    text = "\n".join([*exported, *(_decoded_payloads(json.loads(document)) for document in exported)]).lower()
    assert '"chat"' in text, text[:2000]
    assert "account.jsonl" in text, "the export's plan is not among the decoded payloads"

    for name, email in people.items():
        for secret in (name, email, email.split("@")[0]):
            assert secret.lower() not in text, f"{secret!r} appears in a workflow history or description"
