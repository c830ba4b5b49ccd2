"""The archive survives a worker killed (SIGKILL) in the middle of writing it: the next worker resumes, the
archive ends complete and correct with no entry twice, the half-written file is never served, and the link
is mailed once."""

from __future__ import annotations

import hashlib
import uuid
from pathlib import Path

from devstack.smtp_sink import SmtpSink
from lifecycle.settings import Settings
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

# Kills tried until one lands in the middle of a write.
KILL_ATTEMPTS = 5


def _partials(exports: Path, export_id: str) -> list[Path]:
    """Parts being written: `.partial` files with bytes in them."""
    return [path for path in exports.glob(f"{export_id}*/*.partial") if _has_bytes(path)]


def _has_bytes(path: Path) -> bool:
    # The worker renames a finished part into place, so a file the glob just listed may be gone already.
    try:
        return path.stat().st_size > 0
    except FileNotFoundError:
        return False


async def _first_partial(exports: Path, export_id: str) -> None:
    # Polled every 2 ms: the worker is to be killed while it writes, and a small part is written in moments.
    await eventually(lambda: _partials(exports, export_id), "a part is being written", within=60, interval=0.002)


async def test_the_archive_survives_a_worker_killed_mid_write(
    api_with: ApiWith, settings: Settings, smtp_sink: SmtpSink, tmp_path: Path
) -> None:
    # A queue of its own, polled only by the worker processes below (the `sites` role: they leave the
    # session's reconciler schedule alone). Batches of 5 rows make writing the parts take long enough.
    queue = f"export-kill-{uuid.uuid4().hex[:8]}"

    def worker(name: str) -> ChildProcess:
        process = worker_process(
            settings, tmp_path / f"{name}.log", SITE_TASK_QUEUE=queue, WORKER_ROLES="sites", EXPORT_BATCH_ROWS="5"
        )
        process.start()
        return process

    seeded = await seeded_account(settings, bots=1, rows=3000)
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
