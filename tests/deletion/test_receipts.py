"""Deletion receipts against real PostgreSQL, a real Temporal dev server, a real worker and a real SMTP sink:
counts equal to what was seeded, an independent check, a signature anyone can verify (here with `cryptography`
and `openssl`, never with this project's code), a chain, and a receipt that outlives the account."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import subprocess
from email import message_from_bytes
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
import rfc8785
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import load_pem_public_key
from temporalio.client import Client

from devstack.seed import asyncpg_dsn, rows_per_service, seed
from devstack.smtp_sink import SmtpSink
from lifecycle.deletion.contracts import BotDeletionInput, BotDeletionResult, DeletionStatus
from lifecycle.deletion.workflow_types import bot_deletion_id, bot_deletion_options
from lifecycle.settings import Settings
from lifecycle.statuses import DeletionState
from tests.conftest import ADMIN_HEADERS
from tests.deletion.broken_service import broken_service
from tests.deletion.receipt_checks import verifies
from tests.eventually import eventually
from worker import LifecycleWorkers

ROWS = 3_000


async def _public_key(api: httpx.AsyncClient) -> Ed25519PublicKey:
    answer = await api.get("/deletion-receipts/public-key")
    assert answer.status_code == 200
    key = load_pem_public_key(answer.json()["public_key"].encode())
    assert isinstance(key, Ed25519PublicKey)
    return key


def _openssl_verifies(signed: dict[str, Any], public_pem: str, directory: Path) -> bool:
    (directory / "public.pem").write_text(public_pem)
    (directory / "receipt.json").write_bytes(rfc8785.dumps(signed["receipt"]))
    (directory / "receipt.sig").write_bytes(base64.b64decode(signed["signature"]))
    verified = subprocess.run(
        ["openssl", "pkeyutl", "-verify", "-pubin", "-inkey", "public.pem", "-rawin", "-in", "receipt.json",
         "-sigfile", "receipt.sig"],
        cwd=directory, capture_output=True, text=True, check=False,
    )  # fmt: skip
    return verified.returncode == 0 and "Signature Verified Successfully" in verified.stdout


async def _completed(api: httpx.AsyncClient, url: str, headers: dict[str, str]) -> dict[str, Any] | None:
    status = (await api.get(url, headers=headers)).json()
    return status if status["status"] == "completed" else None


async def test_a_bot_deletion_leaves_a_signed_receipt_that_verifies_offline(
    api: httpx.AsyncClient, settings: Settings, worker: LifecycleWorkers, tmp_path: Path
) -> None:
    seeded = await seed(settings, bots=1, rows=ROWS)
    bot_id = seeded.bot_ids[0]
    headers = {"Authorization": f"Bearer {seeded.api_key}"}
    assert (await api.get(f"/bots/{bot_id}/deletion/receipt", headers=headers)).status_code == 404
    assert (await api.delete(f"/bots/{bot_id}", headers=headers)).status_code == 202
    await eventually(lambda: _completed(api, f"/bots/{bot_id}/deletion", headers), "the deletion completes")

    answer = await api.get(f"/bots/{bot_id}/deletion/receipt", headers=headers)
    assert answer.status_code == 200, answer.text
    signed = answer.json()
    receipt = signed["receipt"]
    seeded_counts = rows_per_service(ROWS)
    assert receipt["subject"] == {"kind": "bot", "id": bot_id}
    assert receipt["workflow_id"] == bot_deletion_id(bot_id)
    assert {name: s["rows_deleted"] for name, s in receipt["services"].items()} == seeded_counts
    assert receipt["services"]["knowledge"]["files_deleted"] == seeded_counts["knowledge"]
    assert all(s["remaining"] == 0 for s in receipt["services"].values())
    assert receipt["complete"] is True and receipt["remaining"] == {}
    # Each service's own count (VerifySubjectErased) is the check of it; the gateway counts its bot row.
    assert {check["name"] for check in receipt["checks"]} == {f"rows and files of {s}" for s in seeded_counts} | {
        "bot row"
    }
    assert all(check["passed"] and check["found"] == 0 for check in receipt["checks"])
    assert [phase["name"] for phase in receipt["phases"]][-1] == "independent check"
    assert all(phase["started_at"] and phase["ended_at"] for phase in receipt["phases"])

    # Verified with the published key and nothing of this project's code, by Python and by openssl.
    key = await _public_key(api)
    public_pem = (await api.get("/deletion-receipts/public-key")).json()["public_key"]
    assert verifies(signed, key)
    if shutil.which("openssl"):
        assert _openssl_verifies(signed, public_pem, tmp_path)
    tampered = json.loads(json.dumps(signed))
    tampered["receipt"]["services"]["chat"]["rows_deleted"] += 1
    assert not verifies(tampered, key)
    assert not verifies({**tampered, "sha256": hashlib.sha256(rfc8785.dumps(tampered["receipt"])).hexdigest()}, key)
    if shutil.which("openssl"):
        assert not _openssl_verifies(tampered, public_pem, tmp_path)

    # No personal data: none of the account's or the bot's words, and nothing of the documents.
    conn = await asyncpg.connect(asyncpg_dsn(settings.database_url))
    try:
        name, email = await conn.fetchrow("SELECT name, email FROM accounts WHERE id = $1::uuid", seeded.account_id)
        previous = await conn.fetchval(
            "SELECT sha256 FROM deletion_receipts WHERE seq < (SELECT seq FROM deletion_receipts WHERE id = $1::uuid)"
            " ORDER BY seq DESC LIMIT 1",
            receipt["id"],
        )
    finally:
        await conn.close()
    text = json.dumps(signed)
    for personal in (name, email, "bot 1", "knowledge document body"):
        assert personal not in text
    # Chained: it names the hash of the receipt issued before it.
    assert receipt["previous_sha256"] == previous


@pytest.mark.usefixtures("registry_left_as_found")
async def test_a_skipped_service_shows_as_remaining_and_the_receipt_is_incomplete(
    api: httpx.AsyncClient, settings: Settings, temporal_client: Client, worker: LifecycleWorkers
) -> None:
    seeded = await seed(settings, bots=1, rows=ROWS)
    bot_id = seeded.bot_ids[0]
    # One service fails every call for good: it waits for an operator, who skips it; the others finish.
    async with broken_service(api, temporal_client, holds=7) as service:
        broken = service.name
        handle = await bot_deletion_options(bot_id, seeded.account_id).start(
            temporal_client,
            BotDeletionInput(bot_id=bot_id, account_id=seeded.account_id),
            task_queue=settings.task_queue,
            result_type=BotDeletionResult,
        )

        async def waiting() -> DeletionStatus | None:
            status = await handle.query("progress", result_type=DeletionStatus)
            return status if status.waiting_on else None

        assert (await eventually(waiting, "the broken service waits for an operator")).waiting_on == broken
        await handle.execute_update("skip", result_type=str)
        result = await handle.result()
    assert result.status == DeletionState.INCOMPLETE

    headers = {"Authorization": f"Bearer {seeded.api_key}"}
    signed = (await api.get(f"/bots/{bot_id}/deletion/receipt", headers=headers)).json()
    receipt = signed["receipt"]
    assert receipt["complete"] is False
    # What the skipped service still holds, by its own count; everything else went.
    assert receipt["remaining"] == {broken: 7}
    assert {name: s["remaining"] for name, s in receipt["services"].items()} == {
        **dict.fromkeys(rows_per_service(ROWS), 0),
        broken: 7,
    }
    assert receipt["services"][broken]["rows_deleted"] == 0
    failed = {check["name"] for check in receipt["checks"] if not check["passed"]}
    assert failed == {f"rows and files of {broken}", "bot row"}
    skips = [action for action in receipt["operator_actions"] if action["action"] == "skip"]
    assert [action["target"] for action in skips] == [broken]
    assert verifies(signed, await _public_key(api))


async def test_an_account_receipt_survives_the_account_and_is_named_in_the_confirmation(
    api: httpx.AsyncClient, settings: Settings, worker: LifecycleWorkers, smtp_sink: SmtpSink
) -> None:
    seeded = await seed(settings, bots=2, rows=ROWS)
    headers = {"Authorization": f"Bearer {seeded.api_key}"}
    mails_before = len(smtp_sink.messages())
    # The admin's change meanwhile is an operator action the receipt records.
    budget_before = (await api.get("/deletion-budget", headers=ADMIN_HEADERS)).json()
    assert (await api.delete("/account", headers=headers)).status_code == 202
    await api.put("/deletion-budget", json=budget_before, headers=ADMIN_HEADERS)
    url = f"/accounts/{seeded.account_id}/deletion"
    await eventually(lambda: _completed(api, url, ADMIN_HEADERS), "the account deletion completes")

    # The account and its keys are gone; the receipt stays, for the admin.
    assert (await api.get("/account", headers=headers)).status_code == 401
    assert (await api.get(f"{url}/receipt", headers=headers)).status_code == 401
    answer = await api.get(f"{url}/receipt", headers=ADMIN_HEADERS)
    assert answer.status_code == 200, answer.text
    signed = answer.json()
    receipt = signed["receipt"]
    assert receipt["subject"] == {"kind": "account", "id": seeded.account_id}
    assert receipt["bots_deleted"] == 2 and receipt["complete"] is True
    assert {name: s["rows_deleted"] for name, s in receipt["services"].items()} == {
        name: 2 * count for name, count in rows_per_service(ROWS).items()
    }
    assert {check["name"] for check in receipt["checks"]} >= {
        "account row",
        "API keys of the account",
        "bots of the account",
    }
    assert all(check["passed"] for check in receipt["checks"])
    assert any(action["action"] == "budget" for action in receipt["operator_actions"])
    assert verifies(signed, await _public_key(api))

    async def confirmation() -> str | None:
        for path in smtp_sink.messages()[mails_before:]:
            mail = message_from_bytes(path.read_bytes())
            if mail["Subject"] == "Your account has been deleted":
                return mail.get_payload(decode=True).decode()  # type: ignore[union-attr]
        return None

    body = await eventually(confirmation, "the confirmation is mailed")
    assert f"Deletion receipt: {receipt['id']}" in body


@pytest.mark.parametrize("path", ["/accounts/{id}/deletion/receipt"])
async def test_an_account_key_cannot_read_an_account_receipt(api: httpx.AsyncClient, account: Any, path: str) -> None:
    assert (await api.get(path.format(id=account.id), headers=account.headers)).status_code == 403
