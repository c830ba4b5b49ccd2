"""The archive survives a worker killed (SIGKILL) in the middle of writing it: the next worker resumes, the
archive ends complete and correct with no entry twice, the half-written file is never served, and the link
is mailed once.

The gateway writes its own small parts, fetches each service's part and assembles the ZIP; a few documents of
megabytes make the knowledge service's part large, so that its fetch and the assembly take long enough for a kill
to land inside them."""

from __future__ import annotations

import hashlib
import os
import uuid
from pathlib import Path

import pytest

from devstack.seed import storage_keys
from devstack.smtp_sink import SmtpSink
from lifecycle.object_keys import document_key
from lifecycle.object_store import ObjectStore
from lifecycle.settings import Settings
from tests.conftest import ContractServices
from tests.eventually import eventually
from tests.exports.conftest import ApiWith
from tests.exports.helpers import (
    account_email,
    check_archive,
    headers_of,
    ready_mails,
    seeded_account,
    wait_for_status,
)
from tests.processes import ChildProcess, worker_process

pytestmark = pytest.mark.slow  # it kills processes

# Kills tried until one lands in the middle of a write.
KILL_ATTEMPTS = 5
# Documents given random content of this size: incompressible, so deflating them into the ZIP takes a while.
LARGE_DOCUMENTS = 4
LARGE_DOCUMENT_BYTES = 4 * 1024 * 1024


def _partials(exports: Path, export_id: str) -> list[Path]:
    """Files being written (a part, a service's part being fetched, the ZIP): `.partial` files with bytes in them."""
    building = [*exports.glob(f"{export_id}*/*.partial"), *exports.glob(f"{export_id}*.partial")]
    return [path for path in building if _has_bytes(path)]


def _has_bytes(path: Path) -> bool:
    # The worker renames a finished part into place, so a file the glob just listed may be gone already.
    try:
        return path.stat().st_size > 0
    except FileNotFoundError:
        return False


async def _first_partial(exports: Path, export_id: str) -> None:
    # Polled every 2 ms: the worker is to be killed while it writes, and a small part is written in moments.
    await eventually(lambda: _partials(exports, export_id), "a part is being written", within=60, interval=0.002)


@pytest.mark.long
async def test_the_archive_survives_a_worker_killed_mid_write(
    api_with: ApiWith, settings: Settings, smtp_sink: SmtpSink, tmp_path: Path, contract_services: ContractServices
) -> None:
    # A queue of its own, polled only by the worker processes below (the `sites` role: they leave the
    # session's reconciler schedule alone).
    queue = f"export-kill-{uuid.uuid4().hex[:8]}"

    def worker(name: str) -> ChildProcess:
        process = worker_process(settings, tmp_path / f"{name}.log", SITE_TASK_QUEUE=queue, WORKER_ROLES="sites")
        process.start()
        return process

    seeded = await seeded_account(settings, bots=1, rows=300)
    bot_id = seeded.bot_ids[0]
    store = ObjectStore(settings)
    try:
        for key in storage_keys(bot_id, LARGE_DOCUMENTS):
            await store.put_bytes(document_key(bot_id, key), os.urandom(LARGE_DOCUMENT_BYTES))
    finally:
        await store.close()
    first = worker("first")
    second: ChildProcess | None = None
    try:
        async with api_with(task_queue=queue) as api:
            response = await api.post("/account/exports", headers=headers_of(seeded))
            assert response.status_code == 202, response.text
            export_id = response.json()["id"]
            # The kill must cut a write short: a partial file is left. A small part can be renamed into place
            # between the poll that saw it and the kill; then the next worker takes over and is killed in turn.
            for attempt in range(KILL_ATTEMPTS):
                await _first_partial(settings.exports_path, export_id)
                first.kill()
                if _partials(settings.exports_path, export_id):
                    break
                first = worker(f"first-{attempt}")
            assert _partials(settings.exports_path, export_id), f"{KILL_ATTEMPTS} kills all landed between writes"
            assert not (settings.exports_path / f"{export_id}.zip").exists()
            assert (await api.get(f"/account/exports/{export_id}", headers=headers_of(seeded))).json()[
                "download_url"
            ] is None

            second = worker("second")
            row = await wait_for_status(settings, export_id, "ready")
            status = (await api.get(f"/account/exports/{export_id}", headers=headers_of(seeded))).json()
            body = (await api.get(status["download_url"])).content
        assert hashlib.sha256(body).hexdigest() == row["sha256"] and len(body) == row["size_bytes"]
        await check_archive(body, settings, seeded)
        assert not list(settings.exports_path.glob(f"{export_id}*.partial"))
        assert len(ready_mails(smtp_sink, await account_email(settings, seeded.account_id))) == 1
    finally:
        first.kill()
        if second is not None:
            second.kill()
