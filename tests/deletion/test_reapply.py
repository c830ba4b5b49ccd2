"""Deletions re-applied after a backup restore, as an operator does it: the product's and the services' databases
dumped with the real `pg_dump`, deletions run to completion, the dumps restored with the real `pg_restore`, then
`python -m lifecycle.deletion.reapply` run as a process (the runbook's command, docs/operations.md).

The stack is the module's own (a PostgreSQL server holding the product's and the services' databases, the
services' workers, a gateway worker, the API in process): restoring the session's databases would roll back
every other test's. Temporal, SeaweedFS and the SMTP sink are the session's, as a restore leaves them be.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import re
import shlex
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from email import message_from_bytes
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
import pytest_asyncio
import rfc8785
from sqlalchemy.ext.asyncio import create_async_engine
from temporalio.client import Client, WorkflowHandle

from api.app import create_app
from devstack.ports import free_port
from devstack.postgres import BIN_DIR, PostgresServer
from devstack.seed import asyncpg_dsn, seed
from devstack.smtp_sink import SmtpSink
from lifecycle.deletion.after_restore import reapply
from lifecycle.deletion.contracts import ReceiptSubject
from lifecycle.deletion.reapply import EXIT_BROKEN_CHAIN
from lifecycle.deletion.receipt_chain import BrokenChain
from lifecycle.deletion.workflow_types import account_deletion_id, bot_deletion_id, reapplied_deletion_id
from lifecycle.migrate import upgrade_async
from lifecycle.object_keys import receipt_copies_prefix, receipt_copy_key
from lifecycle.object_store import ObjectStore
from lifecycle.settings import Settings
from services.catalog import SERVICES
from tests.conftest import ADMIN_HEADERS
from tests.deletion.helpers import remaining_rows
from tests.eventually import eventually
from tests.processes import PROJECT_ROOT, ChildProcess, run_command, service_processes, settings_environment
from tests.workers import own_worker

# One xdist worker builds the module's stack once for all its tests.
pytestmark = [pytest.mark.long, pytest.mark.xdist_group("reapply")]

ROWS = 300
DATABASES = ["lifecycle", *(service.name for service in SERVICES)]


@dataclass(frozen=True)
class Stack:
    server: PostgresServer
    settings: Settings
    api: httpx.AsyncClient
    client: Client
    dumps: Path
    mail: SmtpSink
    commands: Path  # the runbook command's output, one pair of files per run


@pytest_asyncio.fixture(scope="module")
async def stack(
    settings: Settings, temporal_client: Client, smtp_sink: SmtpSink, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Stack]:
    root = tmp_path_factory.mktemp("reapply")
    server = PostgresServer(root / "postgres", free_port(), durable=False)
    server.start()
    processes: list[ChildProcess] = []
    try:
        server.create_database("lifecycle")
        queue = f"reapply-{uuid.uuid4().hex[:8]}"
        own = settings.model_copy(
            update={
                "database_url": server.url("lifecycle"),
                "task_queue": queue,
                "site_task_queue": queue,
                "data_dir": root / "data",
            }
        )
        await upgrade_async(own.database_url)
        started = service_processes(own, root, uuid.uuid4().hex[:8])
        processes = [process for process, _ in started.values()]
        for process in processes:
            process.start()

        async def serving() -> bool:
            return all("serving" in process.log() for process in processes)

        await eventually(serving, "every service's worker polls its queue")
        app = create_app(own, temporal_client=temporal_client)
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://testserver") as api,
            own_worker(own, temporal_client),
        ):
            for name, (_, service_queue) in started.items():
                answer = await api.put(
                    f"/deletion-services/{name}",
                    json={"task_queue": service_queue, "contract": "lifecycle.deletion.v1"},
                    headers=ADMIN_HEADERS,
                )
                assert answer.status_code == 201, answer.text
            yield Stack(server, own, api, temporal_client, root / "dumps", smtp_sink, root / "commands")
    finally:
        for process in processes:
            if process.process is not None and process.process.poll() is None:
                process.terminate()
        server.stop()


async def _dump(stack: Stack, databases: list[str] = DATABASES) -> None:
    await asyncio.to_thread(_dump_now, stack, databases)


def _dump_now(stack: Stack, databases: list[str]) -> None:
    stack.dumps.mkdir(exist_ok=True)
    for database in databases:
        subprocess.run(
            [str(BIN_DIR / "pg_dump"), "--format=custom", f"--file={stack.dumps / database}.dump",
             _libpq_url(stack, database)],
            check=True, capture_output=True,
        )  # fmt: skip


async def _restore(stack: Stack, databases: list[str] = DATABASES) -> None:
    await asyncio.to_thread(_restore_now, stack, databases)


def _restore_now(stack: Stack, databases: list[str]) -> None:
    for database in databases:
        subprocess.run(
            [str(BIN_DIR / "pg_restore"), "--clean", "--if-exists", "--single-transaction",
             f"--dbname={_libpq_url(stack, database)}", str(stack.dumps / f"{database}.dump")],
            check=True, capture_output=True,
        )  # fmt: skip


def _libpq_url(stack: Stack, database: str) -> str:
    return stack.server.url(database, driver="postgresql")


def runbook_command(document: str, section: str) -> list[str]:
    """The one command of the section's `sh` block, as written there."""
    text = (PROJECT_ROOT / document).read_text()
    block = re.search(r"```sh\n(.*?)```", text[text.index(section) :], re.DOTALL)
    assert block is not None
    return shlex.split(block.group(1).strip())


def _runbook_process(stack: Stack) -> list[str]:
    command = runbook_command("docs/operations.md", "## Re-applying deletions after a restore")
    assert command == ["python", "-m", "lifecycle.deletion.reapply"]
    return [sys.executable, *command[1:]]


async def _reapply(stack: Stack) -> subprocess.CompletedProcess[str]:
    """The runbook's command, as an operator runs it, with the deployment's settings in its environment. In a
    thread: the worker it needs (for the services' counts) runs on this event loop."""
    return await asyncio.to_thread(
        run_command, _runbook_process(stack), settings_environment(stack.settings), stack.commands, timeout=60
    )


def _request_id(said: str) -> str:
    """The request id a run of the command printed first, which its audit event carries."""
    found = re.search(r"^request (command-\S+)$", said, re.MULTILINE)
    assert found is not None, said
    return found.group(1)


async def _reapply_killed_once_it_says(stack: Stack, marker: str) -> str:
    """The runbook's command, killed with SIGKILL as soon as it printed a line holding `marker`: what it said."""
    name = uuid.uuid4().hex[:8]
    stack.commands.mkdir(exist_ok=True)
    command = ChildProcess(
        _runbook_process(stack),
        settings_environment(stack.settings),
        stack.commands / f"{name}.out",
        stderr_path=stack.commands / f"{name}.err",
    )
    command.start()
    assert command.process is not None
    process = command.process

    def said_it_or_ended() -> bool:
        return marker in command.log() or process.poll() is not None

    try:
        await eventually(said_it_or_ended, f"the command printed {marker!r}", within=60, interval=0.01)
    finally:
        command.kill()
    said = command.log()
    assert marker in said, said + command.errors()
    return said


def test_the_deletion_page_shows_the_runbooks_command() -> None:
    page = (PROJECT_ROOT / "docs" / "deletion.md").read_text()
    assert re.search(r"```sh\npython -m lifecycle.deletion.reapply\n```", page)


async def _receipts(stack: Stack) -> list[dict[str, Any]]:
    conn = await asyncpg.connect(asyncpg_dsn(stack.settings.database_url))
    try:
        rows = await conn.fetch("SELECT workflow_id, canonical, sha256, signature FROM deletion_receipts ORDER BY seq")
    finally:
        await conn.close()
    return [dict(row) | {"body": json.loads(row["canonical"])} for row in rows]


async def _rows(stack: Stack, sql: str, *args: Any) -> int:
    conn = await asyncpg.connect(asyncpg_dsn(stack.settings.database_url))
    try:
        return int(await conn.fetchval(sql, *args))
    finally:
        await conn.close()


async def _start_bot_deletion(stack: Stack, bot_id: str, api_key: str) -> WorkflowHandle[Any, Any]:
    answer = await stack.api.delete(f"/bots/{bot_id}", headers={"Authorization": f"Bearer {api_key}"})
    assert answer.status_code in (200, 202), answer.text
    return stack.client.get_workflow_handle(bot_deletion_id(bot_id))


async def _delete_bot(stack: Stack, bot_id: str, api_key: str) -> None:
    await (await _start_bot_deletion(stack, bot_id, api_key)).result()


async def _receipt_waits(run: WorkflowHandle[Any, Any]) -> bool:
    pending = (await run.describe()).raw_description.pending_activities
    return any("end before their copies in the object store" in p.last_failure.message for p in pending)


def _assert_one_chain(receipts: list[dict[str, Any]]) -> None:
    """Checked as any verifier would, without the project's code: canonical bytes, hash, link."""
    previous = None
    for receipt in receipts:
        assert rfc8785.dumps(receipt["body"]) == receipt["canonical"]
        assert hashlib.sha256(receipt["canonical"]).hexdigest() == receipt["sha256"]
        assert receipt["body"]["previous_sha256"] == previous
        previous = receipt["sha256"]


async def test_a_restore_brings_deleted_data_back_and_the_reapply_deletes_it_again(stack: Stack) -> None:
    earlier = len(await _receipts(stack))
    kept = await seed(stack.settings, bots=2, rows=ROWS, documents=2)
    gone = await seed(stack.settings, bots=2, rows=ROWS, documents=2)
    later = await seed(stack.settings, bots=1, rows=10, documents=1)
    (email,) = await _execute(stack, "SELECT email FROM accounts WHERE id = $1::uuid", gone.account_id)
    # A deletion before the dump: its receipt is in the dump, and its bot stays gone after the restore.
    await _delete_bot(stack, kept.bot_ids[1], kept.api_key)
    await _dump(stack)
    # After the dump: a bot deleted on its own, and a whole account.
    await _delete_bot(stack, kept.bot_ids[0], kept.api_key)
    answer = await stack.api.delete("/account", headers={"Authorization": f"Bearer {gone.api_key}"})
    assert answer.status_code == 202, answer.text
    await stack.client.get_workflow_handle(account_deletion_id(gone.account_id)).result()
    before_restore = (await _receipts(stack))[earlier:]
    chain_head = (await _receipts(stack))[-1]["sha256"]
    # Two bots on their own, then the account's two bots and the account.
    assert len(before_restore) == 5
    deleted_bots = [kept.bot_ids[0], *gone.bot_ids]

    await _restore(stack)
    # The restore brought back the account, its bots, their rows in every service, and the old chain's head.
    assert await _rows(stack, "SELECT count(*) FROM accounts WHERE id = $1::uuid", gone.account_id) == 1
    assert await _rows(stack, "SELECT count(*) FROM bots WHERE id = ANY($1::uuid[])", deleted_bots) == 3
    for bot in deleted_bots:
        assert all((await remaining_rows(stack.settings.database_url, bot)).values())
    assert (await _receipts(stack))[-1]["sha256"] == before_restore[0]["sha256"]
    open_keys = "SELECT count(*) FROM api_keys WHERE account_id = $1::uuid AND revoked_at IS NULL"
    assert await _rows(stack, open_keys, gone.account_id) == 1

    # A deletion asked for after the restore, before the re-apply: its receipt waits rather than fork the chain.
    waiting = await _start_bot_deletion(stack, later.bot_ids[0], later.api_key)
    await eventually(lambda: _receipt_waits(waiting), "the receipt step finds the database behind its copies")

    # The operator's first try is killed (kill -9) once it has started a deletion; run again, it finishes the job.
    killed = await _reapply_killed_once_it_says(stack, "; started ")
    assert f"verified {earlier + 5} receipts" in killed
    assert "put back 4 receipts" in killed
    first = await _reapply(stack)
    assert first.returncode == 0, first.stderr
    # From the re-apply on, no key opens the account (revoked, then deleted with it).
    assert await _rows(stack, open_keys, gone.account_id) == 0
    # Meanwhile the deletion that waited behind the copies, and the one the killed run started, may have signed
    # their receipts on the chain put back.
    verified = re.search(r"verified (\d+) receipts", first.stdout)
    assert verified is not None and earlier + 5 <= int(verified.group(1)) <= earlier + 7, first.stdout
    assert "put back" not in first.stdout
    account_receipt = before_restore[4]["body"]
    bot_receipt = before_restore[1]["body"]
    assert account_receipt["subject"] == {"kind": ReceiptSubject.ACCOUNT, "id": gone.account_id}
    assert bot_receipt["subject"] == {"kind": ReceiptSubject.BOT, "id": kept.bot_ids[0]}
    again = {
        reapplied_deletion_id(account_deletion_id(gone.account_id), account_receipt["id"]),
        reapplied_deletion_id(bot_deletion_id(kept.bot_ids[0]), bot_receipt["id"]),
    }
    # The account's bots go with the account: nothing starts for them on their own. Each deletion started once,
    # by the killed run or by the next; the next finds those of the killed run running (or already done).
    said = (killed + first.stdout).splitlines()
    started = [line.rsplit("started ", 1)[1] for line in said if "; started " in line]
    assert len(started) == len(set(started)) and set(started) <= again
    running = {line.rsplit(" by ", 1)[1] for line in first.stdout.splitlines() if "already being deleted again" in line}
    assert set(started) | running == again
    for workflow_id in again:
        await stack.client.get_workflow_handle(workflow_id).result()
    await waiting.result()

    assert await _rows(stack, "SELECT count(*) FROM accounts WHERE id = $1::uuid", gone.account_id) == 0
    assert await _rows(stack, "SELECT count(*) FROM bots WHERE id = ANY($1::uuid[])", deleted_bots) == 0
    assert await _rows(stack, "SELECT count(*) FROM bots WHERE id = $1::uuid", kept.bot_ids[1]) == 0
    for bot in deleted_bots:
        assert await remaining_rows(stack.settings.database_url, bot) == dict.fromkeys((s.name for s in SERVICES), 0)
    # The owner was told once, by the first deletion: nobody is emailed again.
    assert len([m for m in stack.mail.messages() if message_from_bytes(m.read_bytes())["To"] == email[0]]) == 1
    assert (await stack.api.get("/bots", headers={"Authorization": f"Bearer {gone.api_key}"})).status_code == 401

    receipts = await _receipts(stack)
    _assert_one_chain(receipts)
    assert [r["sha256"] for r in receipts[earlier : earlier + 5]] == [r["sha256"] for r in before_restore]
    new = receipts[earlier + 5 :]
    # The bot on its own, the account's two bots, the account, and the bot deleted meanwhile: chained after the
    # true head, not the restored one.
    assert len(new) == 5
    assert new[0]["body"]["previous_sha256"] == chain_head
    assert {r["workflow_id"] for r in new} >= again
    assert all(r["body"]["complete"] for r in new)
    # Every receipt has its copy in the object store, out of the database's reach.
    (chain,) = await _execute(stack, "SELECT id::text FROM deletion_receipt_chain")
    store = ObjectStore(stack.settings)
    try:
        copies = await store.keys(receipt_copies_prefix(chain[0]))
    finally:
        await store.close()
    assert len(copies) == len(receipts)

    second = await _reapply(stack)
    assert second.returncode == 0, second.stderr
    assert "started 0 deletions" in second.stdout
    assert "put back" not in second.stdout
    assert len(await _receipts(stack)) == len(receipts)
    # Each run that finished is on the audit trail once, as the operator's, under the request id it printed first;
    # the killed one at most once (the kill may reach it only after it finished).
    recorded = await _execute(
        stack,
        "SELECT request_id FROM audit_events"
        " WHERE action = 're-apply deletions after a restore' AND actor LIKE 'command:%'",
    )
    ids = Counter(row[0] for row in recorded)
    assert ids[_request_id(first.stdout)] == ids[_request_id(second.stdout)] == 1
    assert ids[_request_id(killed)] <= 1 and ids.total() == 2 + ids[_request_id(killed)], ids


async def test_a_services_database_restored_alone_is_deleted_again(stack: Stack) -> None:
    seeded = await seed(stack.settings, bots=2, rows=ROWS, documents=1)
    bot_id = seeded.bot_ids[0]
    await _dump(stack, ["chat"])
    await _delete_bot(stack, bot_id, seeded.api_key)
    (receipt,) = [r["body"] for r in await _receipts(stack) if r["body"]["subject"]["id"] == bot_id]
    await _restore(stack, ["chat"])
    # The bot row stays gone; only the chat service holds its rows again.
    assert await _rows(stack, "SELECT count(*) FROM bots WHERE id = $1::uuid", bot_id) == 0
    assert (await remaining_rows(stack.settings.database_url, bot_id))["chat"] > 0

    first = await _reapply(stack)
    assert first.returncode == 0, first.stderr
    workflow_id = reapplied_deletion_id(bot_deletion_id(bot_id), receipt["id"])
    assert f"bot {bot_id} (deleted by receipt {receipt['id']}): present again (chat); started {workflow_id}" in (
        first.stdout
    ), first.stdout
    assert "started 1 deletions" in first.stdout
    await stack.client.get_workflow_handle(workflow_id).result()
    assert await remaining_rows(stack.settings.database_url, bot_id) == dict.fromkeys((s.name for s in SERVICES), 0)
    receipts = await _receipts(stack)
    _assert_one_chain(receipts)
    assert receipts[-1]["workflow_id"] == workflow_id
    assert receipts[-1]["body"]["services"]["chat"]["rows_deleted"] > 0
    assert receipts[-1]["body"]["complete"]
    # The other bot, never deleted, is left be.
    assert await _rows(stack, "SELECT count(*) FROM bots WHERE id = $1::uuid", seeded.bot_ids[1]) == 1

    second = await _reapply(stack)
    assert second.returncode == 0, second.stderr
    assert "started 0 deletions" in second.stdout


async def test_a_receipt_whose_copy_was_never_made_gets_it_from_the_reapply(stack: Stack) -> None:
    """A worker gone between the receipt's commit and its copy, its run then terminated: nothing retried it."""
    seeded = await seed(stack.settings, bots=1, rows=10, documents=1)
    await _delete_bot(stack, seeded.bot_ids[0], seeded.api_key)
    head = (await _receipts(stack))[-1]
    (chain,) = await _execute(stack, "SELECT id::text FROM deletion_receipt_chain")
    copy_key = receipt_copy_key(chain[0], head["body"]["previous_sha256"])
    store = ObjectStore(stack.settings)
    try:
        await store.delete([copy_key])
        answer = await _reapply(stack)
        assert answer.returncode == 0, answer.stderr
        assert "copied 1 receipts to the object store" in answer.stdout
        assert "started 0 deletions" in answer.stdout
        copy = await store.read(copy_key)
    finally:
        await store.close()
    assert copy is not None and json.loads(copy)["sha256"] == head["sha256"]


async def _execute(stack: Stack, sql: str, *args: Any) -> Any:
    conn = await asyncpg.connect(asyncpg_dsn(stack.settings.database_url))
    try:
        return await conn.fetch(sql, *args)
    finally:
        await conn.close()


def _flipped(signature: str) -> str:
    raw = bytearray(base64.b64decode(signature))
    raw[0] ^= 1
    return base64.b64encode(bytes(raw)).decode()


async def test_a_tampered_receipt_makes_the_reapply_refuse(stack: Stack) -> None:
    seeded = await seed(stack.settings, bots=3, rows=10, documents=1)
    for bot_id in seeded.bot_ids[:2]:
        await _delete_bot(stack, bot_id, seeded.api_key)
    target = (await _receipts(stack))[-2]
    (row,) = await _execute(stack, "SELECT * FROM deletion_receipts WHERE sha256 = $1", target["sha256"])
    (chain,) = await _execute(stack, "SELECT id::text FROM deletion_receipt_chain")
    copy_key = receipt_copy_key(chain[0], target["body"]["previous_sha256"])
    store = ObjectStore(stack.settings)
    copy = await store.read(copy_key)
    assert copy is not None
    # As if a restore had brought a deleted bot back: a refusal must start nothing.
    await _execute(
        stack, "INSERT INTO bots (id, account_id, name) VALUES ($1::uuid, $2::uuid, 'back')", seeded.bot_ids[1],
        seeded.account_id,
    )  # fmt: skip

    by_command = True

    async def refused(expected: str) -> None:
        """The command's refusal, then (faster, in this process) the same steps' for the other tamperings."""
        nonlocal by_command
        if by_command:
            by_command = False
            answer = await _reapply(stack)
            assert answer.returncode == EXIT_BROKEN_CHAIN, answer.stdout
            assert "refused: the deletion receipts' chain is broken" in answer.stderr
            assert expected in answer.stderr, answer.stderr
            assert "started" not in answer.stdout
            return
        engine = create_async_engine(stack.settings.database_url)
        try:
            with pytest.raises(BrokenChain, match=re.escape(expected)):
                await reapply(stack.settings, engine, store, stack.client, print)
        finally:
            await engine.dispose()

    try:
        changed_body = rfc8785.dumps(target["body"] | {"services": {}})
        update = "UPDATE deletion_receipts SET canonical = $1, signature = $2 WHERE sha256 = $3"
        await _execute(stack, update, changed_body, target["signature"], target["sha256"])
        await refused("does not match its bytes")
        await _execute(stack, update, target["canonical"], _flipped(target["signature"]), target["sha256"])
        await refused("signature does not verify")
        await _execute(stack, update, target["canonical"], target["signature"], target["sha256"])
        # Removed from PostgreSQL and from the object store alike: the next receipt links to nothing.
        await _execute(stack, "DELETE FROM deletion_receipts WHERE sha256 = $1", target["sha256"])
        await store.delete([copy_key])
        await refused("which no receipt of the chain has")
        await store.put_bytes(copy_key, b"not a receipt")
        await refused("is not a receipt's copy")
        assert await _rows(stack, "SELECT count(*) FROM bots WHERE id = $1::uuid", seeded.bot_ids[1]) == 1
    finally:
        # Left as found, for the module's other tests.
        await _execute(stack, "DELETE FROM bots WHERE id = $1::uuid", seeded.bot_ids[1])
        await store.put_bytes(copy_key, copy)
        await store.close()
        columns = list(row.keys())
        await _execute(
            stack,
            f"INSERT INTO deletion_receipts ({', '.join(columns)}) OVERRIDING SYSTEM VALUE"
            f" VALUES ({', '.join(f'${n}' for n in range(1, len(columns) + 1))}) ON CONFLICT (id) DO UPDATE"
            " SET canonical = excluded.canonical, signature = excluded.signature",
            *row.values(),
        )
    healthy = await _reapply(stack)
    assert healthy.returncode == 0, healthy.stderr
    assert "started 0 deletions" in healthy.stdout
