"""Receipt signing keys on real servers: a worker refuses to start on an empty or short key file or a short
secret, and a rotation (`python -m lifecycle.deletion.receipt_keys rotate`, run as operators run it) leaves the receipts
signed before it verifiable with the key their `key_id` names in GET /deletion-receipts/public-keys."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import secrets
import stat
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import load_pem_public_key
from temporalio.client import Client

from activities.resources import ActivityResources
from api.app import create_app
from devstack.ports import free_port
from devstack.postgres import PostgresServer
from devstack.seed import seed
from lifecycle.deletion.receipt_keys import ReceiptKeyError
from lifecycle.deletion.workflow_types import bot_deletion_id
from lifecycle.migrate import upgrade_async
from lifecycle.settings import RECEIPT_SIGNING_KEY_FILE, Settings
from tests.conftest import ADMIN_HEADERS, ContractServices
from tests.db import connection
from tests.deletion.receipt_checks import verifies
from tests.eventually import eventually
from tests.processes import ChildProcess, run_command, settings_environment
from worker import build_worker

# A process that refuses its configuration exits within this; one that accepts it keeps running.
START_UP_SECONDS = 60


def _verifies(signed: dict[str, Any], public_pem: str) -> bool:
    key = load_pem_public_key(public_pem.encode())
    assert isinstance(key, Ed25519PublicKey)
    return verifies(signed, key)


async def _exit_code(process: ChildProcess) -> int | None:
    """The process's exit code, or None if it was still running after START_UP_SECONDS (then it is stopped)."""
    assert process.process is not None
    try:
        return await asyncio.to_thread(process.process.wait, START_UP_SECONDS)
    except subprocess.TimeoutExpired:
        process.kill()
        return None


@pytest.mark.parametrize("content", ["", "\n", "too-short-a-secret\n"], ids=["empty", "blank", "short"])
async def test_an_empty_or_short_key_file_stops_the_worker_with_a_clear_error(
    settings: Settings, tmp_path: Path, content: str
) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / RECEIPT_SIGNING_KEY_FILE).write_text(content)
    queue = f"keys-{uuid.uuid4().hex[:8]}"
    env = settings_environment(settings, DATA_DIR=str(data_dir), TASK_QUEUE=queue, SITE_TASK_QUEUE=queue)
    env.pop("RECEIPT_SIGNING_KEY", None)
    worker = ChildProcess([sys.executable, "worker.py"], env, tmp_path / "worker.log")
    worker.start()
    assert await _exit_code(worker) == 2, worker.log()[-2000:]
    assert f"the receipt signing key file {data_dir / RECEIPT_SIGNING_KEY_FILE} holds" in worker.log()
    assert "a key needs at least 32 bytes" in worker.log()


@pytest.mark.parametrize(
    ("command", "variable"),
    [
        (["worker.py"], "RECEIPT_SIGNING_KEY"),
        (["worker.py"], "EXPORT_SIGNING_KEY"),
        (["-m", "api"], "ADMIN_TOKEN"),
        (["-m", "api"], "EXPORT_SIGNING_KEY"),
    ],
    ids=["worker-receipt-key", "worker-export-key", "api-admin-token", "api-export-key"],
)
async def test_a_short_secret_is_refused_at_start_up(
    settings: Settings, tmp_path: Path, command: list[str], variable: str
) -> None:
    queue = f"keys-{uuid.uuid4().hex[:8]}"
    env = settings_environment(
        settings,
        DATA_DIR=str(tmp_path),
        TASK_QUEUE=queue,
        SITE_TASK_QUEUE=queue,
        API_PORT="0",
        **{variable: "31-bytes-is-one-byte-too-short!"},
    )
    process = ChildProcess([sys.executable, *command], env, tmp_path / "process.log")
    process.start()
    exit_code = await _exit_code(process)
    assert exit_code not in (None, 0), process.log()[-2000:]
    assert f"{variable} is 31 bytes long; a secret needs at least 32" in process.log()


async def test_a_worker_started_while_postgresql_is_down_waits_to_publish_its_key(
    settings: Settings, tmp_path: Path
) -> None:
    queue = f"keys-{uuid.uuid4().hex[:8]}"
    nobody = f"postgresql+asyncpg://postgres@127.0.0.1:{free_port()}/lifecycle"
    env = settings_environment(settings, DATABASE_URL=nobody, TASK_QUEUE=queue, SITE_TASK_QUEUE=queue)
    worker = ChildProcess([sys.executable, "worker.py"], env, tmp_path / "worker.log")
    worker.start()
    try:

        def waiting() -> bool:
            assert worker.process is not None and worker.process.poll() is None, worker.log()[-2000:]
            return "publishing the receipt key again" in worker.log()

        await eventually(waiting, "the worker waits for PostgreSQL")
        # Not yet polling: a SIGTERM ends the wait and stops it cleanly.
        assert await asyncio.to_thread(worker.terminate, START_UP_SECONDS) == 0, worker.log()[-2000:]
        assert "worker stopped while starting" in worker.log()
    finally:
        worker.kill()


@dataclass(frozen=True)
class OwnStack:
    """A database, data directory and queue of the test's own: its rotation touches nobody else's key."""

    settings: Settings
    client: Client


@pytest_asyncio.fixture
async def own_stack(
    postgres_server: PostgresServer,
    settings: Settings,
    temporal_client: Client,
    tmp_path: Path,
    contract_services: ContractServices,
) -> OwnStack:
    name = f"receipt_keys_{uuid.uuid4().hex[:8]}"
    await asyncio.to_thread(postgres_server.create_database, name)
    url = postgres_server.url(name)
    await upgrade_async(url)
    # The session's services, registered here too: a deletion with none to reach would wait for one.
    async with connection(url) as conn:
        await conn.executemany(
            "INSERT INTO deletion_services (name, task_queue, contract) VALUES ($1, $2, 'lifecycle.deletion.v1')",
            list(contract_services.queues.items()),
        )
    data_dir = tmp_path / "data"
    queue = f"keys-{uuid.uuid4().hex[:8]}"
    own = settings.model_copy(
        update={
            "database_url": url,
            "data_dir": data_dir,
            "exports_dir": data_dir / "exports",
            "sites_root": data_dir / "sites",
            "task_queue": queue,
            "site_task_queue": queue,
        }
    )
    return OwnStack(own, temporal_client)


@pytest_asyncio.fixture
async def own_api(own_stack: OwnStack) -> AsyncIterator[httpx.AsyncClient]:
    application = create_app(own_stack.settings, temporal_client=own_stack.client)
    async with application.router.lifespan_context(application):
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
            yield client


@contextlib.asynccontextmanager
async def _worker(settings: Settings, client: Client) -> AsyncIterator[None]:
    resources = ActivityResources.create(settings, client)
    try:
        async with build_worker(client, resources, settings):
            yield
    finally:
        await resources.close()


async def _receipt(api: httpx.AsyncClient, bot_id: str, api_key: str) -> Any:
    headers = {"Authorization": f"Bearer {api_key}"}

    async def receipt() -> Any:
        answer = await api.get(f"/bots/{bot_id}/deletion/receipt", headers=headers)
        return answer.json() if answer.status_code == 200 else None

    return await eventually(receipt, f"bot {bot_id} has its receipt")


async def _deleted_with_receipt(api: httpx.AsyncClient, bot_id: str, api_key: str) -> Any:
    assert (await api.delete(f"/bots/{bot_id}", headers={"Authorization": f"Bearer {api_key}"})).status_code == 202
    return await _receipt(api, bot_id, api_key)


async def _rotate(settings: Settings, **overrides: str) -> subprocess.CompletedProcess[str]:
    """`python -m lifecycle.deletion.receipt_keys rotate`, as an operator runs it."""
    env = settings_environment(settings)
    env.pop("RECEIPT_SIGNING_KEY", None)
    env.update(overrides)
    command = [sys.executable, "-m", "lifecycle.deletion.receipt_keys", "rotate"]
    return await asyncio.to_thread(run_command, command, env, settings.data_dir / "commands", timeout=60)


async def test_a_rotation_leaves_older_receipts_verifiable_by_their_key_id(
    own_stack: OwnStack, own_api: httpx.AsyncClient, project_root: Path, tmp_path: Path
) -> None:
    """The key file, as `make run` keeps it: the running worker takes the rotated key without a restart."""
    own = own_stack.settings
    # No worker has started on this database yet: nothing to serve.
    assert (await own_api.get("/deletion-receipts/public-key")).status_code == 503
    assert (await own_api.get("/deletion-receipts/public-keys")).json() == {"keys": []}
    seeded = await seed(own, bots=2, rows=100)
    key_file = own.data_dir / RECEIPT_SIGNING_KEY_FILE
    async with _worker(own, own_stack.client):
        assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
        old_secret = key_file.read_text().strip()
        first = (await own_api.get("/deletion-receipts/public-key")).json()
        before = await _deleted_with_receipt(own_api, seeded.bot_ids[0], seeded.api_key)
        assert before["receipt"]["key_id"] == first["key_id"]

        rotated = await _rotate(own)
        assert rotated.returncode == 0, rotated.stderr
        second = (await own_api.get("/deletion-receipts/public-key")).json()
        assert second["key_id"] != first["key_id"]
        assert f"receipt signing key {second['key_id']} is current; {first['key_id']} is retired" in rotated.stdout
        # On the audit trail, once, as the operator who ran it.
        audit = (await own_api.get("/audit-events", headers=ADMIN_HEADERS)).json()["events"]
        assert [(e["action"], e["target"]) for e in audit] == [
            ("rotate the receipt signing key", f"receipt-signing-keys/{second['key_id']}")
        ]
        assert audit[0]["actor"].startswith("command:")
        assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
        after = await _deleted_with_receipt(own_api, seeded.bot_ids[1], seeded.api_key)
        assert after["receipt"]["key_id"] == second["key_id"]

    answer = (await own_api.get("/deletion-receipts/public-keys")).json()
    old, new = answer["keys"]
    assert (old["key_id"], new["key_id"]) == (first["key_id"], second["key_id"])
    assert old["valid_until"] is not None and old["valid_until"] == new["valid_from"]
    assert new["valid_until"] is None and new["public_key"] == second["public_key"]
    published = {key["key_id"]: key["public_key"] for key in answer["keys"]}
    for signed in (before, after):
        assert _verifies(signed, published[signed["receipt"]["key_id"]])
    # Each verifies with its own key only.
    assert not _verifies(before, published[second["key_id"]])
    assert not _verifies(after, published[first["key_id"]])
    # docs/deletion.md's snippet, as it stands, verifies both and rejects a tampered one.
    for signed in (before, after):
        assert (await _page_snippet_verifies(project_root, tmp_path, signed, answer)).returncode == 0
    tampered = json.loads(json.dumps(before))
    tampered["receipt"]["checks"][0]["found"] += 1
    assert (await _page_snippet_verifies(project_root, tmp_path, tampered, answer)).returncode != 0

    # A worker given the retired key refuses to start, before it signs anything.
    with pytest.raises(ReceiptKeyError, match=f"receipt signing key {first['key_id']} was retired"):
        async with _worker(own.model_copy(update={"receipt_signing_key": old_secret}), own_stack.client):
            pass


async def _page_snippet_verifies(
    project_root: Path, directory: Path, signed: Any, public_keys: Any
) -> subprocess.CompletedProcess[str]:
    """Run docs/deletion.md's verification snippet on these files, in a Python of its own."""
    page = (project_root / "docs" / "deletion.md").read_text()
    section = page[page.index("## The deletion budget and receipts") :]
    snippet = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert snippet is not None
    (directory / "receipt.json").write_text(json.dumps(signed))
    (directory / "public-keys.json").write_text(json.dumps(public_keys))
    return await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", snippet.group(1)],
        cwd=directory,
        capture_output=True,
        text=True,
        check=False,
    )


async def test_a_worker_holding_a_retired_key_signs_nothing_until_restarted_with_the_new_one(
    own_stack: OwnStack, own_api: httpx.AsyncClient
) -> None:
    """RECEIPT_SIGNING_KEY, as docker-compose gives it: rotate with the new value, then restart the workers."""
    own = own_stack.settings
    old_secret, new_secret = secrets.token_hex(32), secrets.token_hex(32)
    seeded = await seed(own, bots=2, rows=100)
    first, second = seeded.bot_ids
    async with _worker(own.model_copy(update={"receipt_signing_key": old_secret}), own_stack.client):
        before = await _deleted_with_receipt(own_api, first, seeded.api_key)
        rotated = await _rotate(own, RECEIPT_SIGNING_KEY=new_secret)
        assert rotated.returncode == 0, rotated.stderr
        assert "give the workers this RECEIPT_SIGNING_KEY and restart them" in rotated.stdout
        current = (await own_api.get("/deletion-receipts/public-key")).json()["key_id"]
        assert current != before["receipt"]["key_id"]

        # The old worker deletes the second bot, but refuses to sign its receipt with the retired key.
        headers = {"Authorization": f"Bearer {seeded.api_key}"}
        assert (await own_api.delete(f"/bots/{second}", headers=headers)).status_code == 202
        handle = own_stack.client.get_workflow_handle(bot_deletion_id(second))

        async def refused() -> str | None:
            for pending in (await handle.describe()).raw_description.pending_activities:
                if pending.last_failure.application_failure_info.type == "ReceiptKeyNotCurrent":
                    return str(pending.last_failure.message)
            return None

        message = await eventually(refused, "the old worker refuses to sign")
        assert f"{current} is current" in message
        assert (await own_api.get(f"/bots/{second}/deletion/receipt", headers=headers)).status_code == 404

    # Restarted with the new value, a worker signs it with the current key.
    async with _worker(own.model_copy(update={"receipt_signing_key": new_secret}), own_stack.client):
        after = await _receipt(own_api, second, seeded.api_key)
    assert after["receipt"]["key_id"] == current
    published = {
        key["key_id"]: key["public_key"] for key in (await own_api.get("/deletion-receipts/public-keys")).json()["keys"]
    }
    assert _verifies(before, published[before["receipt"]["key_id"]])
    assert _verifies(after, published[current])
    # A key no rotation published never makes itself current: its worker refuses to start.
    stranger = own.model_copy(update={"receipt_signing_key": secrets.token_hex(32)})
    with pytest.raises(ReceiptKeyError, match=f"is not published; {current} is current"):
        async with _worker(stranger, own_stack.client):
            pass


async def test_a_rotation_replaces_a_key_file_left_empty(own_stack: OwnStack, own_api: httpx.AsyncClient) -> None:
    """The remedy the start-up error names: the old key is lost, its receipts stay verifiable, a new key signs."""
    own = own_stack.settings
    seeded = await seed(own, bots=2, rows=100)
    async with _worker(own, own_stack.client):
        before = await _deleted_with_receipt(own_api, seeded.bot_ids[0], seeded.api_key)
    (own.data_dir / RECEIPT_SIGNING_KEY_FILE).write_text("")
    with pytest.raises(ReceiptKeyError, match="holds nothing"):
        async with _worker(own, own_stack.client):
            pass

    rotated = await _rotate(own)
    assert rotated.returncode == 0, rotated.stderr
    async with _worker(own, own_stack.client):
        after = await _deleted_with_receipt(own_api, seeded.bot_ids[1], seeded.api_key)
    assert after["receipt"]["key_id"] != before["receipt"]["key_id"]
    keys = (await own_api.get("/deletion-receipts/public-keys")).json()["keys"]
    published = {key["key_id"]: key["public_key"] for key in keys}
    assert _verifies(before, published[before["receipt"]["key_id"]])
    assert _verifies(after, published[after["receipt"]["key_id"]])


async def test_a_rotation_cut_short_is_finished_by_running_it_again(
    own_stack: OwnStack, own_api: httpx.AsyncClient
) -> None:
    """Cut short after publishing the new key, before the key file holds it: the state a crash there leaves."""
    own = own_stack.settings
    seeded = await seed(own, bots=1, rows=100)
    async with _worker(own, own_stack.client):
        pass
    staged_secret = secrets.token_hex(32)
    staged = own.data_dir / f"{RECEIPT_SIGNING_KEY_FILE}.next"
    staged.write_text(staged_secret + "\n")
    # Published, as the interrupted rotation had done; the key file still holds the retired key.
    assert (await _rotate(own, RECEIPT_SIGNING_KEY=staged_secret)).returncode == 0
    with pytest.raises(ReceiptKeyError, match="if the rotation was interrupted, run"):
        async with _worker(own, own_stack.client):
            pass

    finished = await _rotate(own)
    assert finished.returncode == 0, finished.stderr
    current = (await own_api.get("/deletion-receipts/public-key")).json()["key_id"]
    assert f"receipt signing key {current} is current (since" in finished.stdout
    assert not staged.exists()
    assert (own.data_dir / RECEIPT_SIGNING_KEY_FILE).read_text().strip() == staged_secret
    async with _worker(own, own_stack.client):
        signed = await _deleted_with_receipt(own_api, seeded.bot_ids[0], seeded.api_key)
    assert signed["receipt"]["key_id"] == current
