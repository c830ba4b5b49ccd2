"""What the drills watch while they break things: rows left, workflow progress, mail received."""

from __future__ import annotations

import asyncio
from email import message_from_bytes
from itertools import pairwise

from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from devstack.smtp_sink import SmtpSink
from lifecycle.deletion.contracts import DeletionStatus
from lifecycle.deletion.workflow_types import bot_deletion_id
from services.catalog import SERVICES
from tests.deletion.helpers import remaining_rows


async def rows_left(database_url: str, bot_ids: list[str]) -> int:
    """The bots' rows left in every service's own database (beside `database_url`, the product's)."""
    return sum([sum((await remaining_rows(database_url, bot_id)).values()) for bot_id in bot_ids])


async def bot_progress(client: Client, bot_id: str) -> dict[str, int] | None:
    """Rows of each service the bot's deletion workflow says it deleted, or None while no worker answers queries."""
    handle = client.get_workflow_handle(bot_deletion_id(bot_id))
    try:
        status = await asyncio.wait_for(handle.query("progress", result_type=DeletionStatus), timeout=2)
    except Exception:  # no worker, or the server restarting: no sample this time
        return None
    return {service: progress.deleted for service, progress in status.services.items()}


async def nexus_operation_open(client: Client, bot_ids: list[str]) -> bool:
    """Whether a bot's deletion run waits on a Nexus operation it started (a service's slice in its namespace)."""
    for bot_id in bot_ids:
        try:
            described = await client.get_workflow_handle(bot_deletion_id(bot_id)).describe()
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:  # the account deletion has not started it yet
                continue
            raise
        if described.raw_description.pending_nexus_operations:
            return True
    return False


class ProgressRecorder:
    """Samples every bot's query progress in the background, to check no service's count ever goes backwards."""

    def __init__(self, client: Client, bot_ids: list[str]) -> None:
        self._client = client
        self.samples: dict[str, list[dict[str, int]]] = {bot_id: [] for bot_id in bot_ids}
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        while True:
            for bot_id, samples in self.samples.items():
                value = await bot_progress(self._client, bot_id)
                if value is not None:
                    samples.append(value)
            await asyncio.sleep(0.2)  # the sampling interval of this background recorder

    def __enter__(self) -> ProgressRecorder:
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()

    def assert_never_went_backwards(self) -> None:
        for bot_id, samples in self.samples.items():
            assert samples, f"no progress sample for bot {bot_id}"
            for service in (service.name for service in SERVICES):
                counts = [sample.get(service, 0) for sample in samples]
                drops = [(a, b) for a, b in pairwise(counts) if b < a]
                assert not drops, f"{service} progress of bot {bot_id} went backwards: {drops}"


def mail_to(sink: SmtpSink, address: str, subject_contains: str = "") -> list[str]:
    """Subjects of the messages the sink received for `address`."""
    subjects = []
    for path in sink.messages():
        message = message_from_bytes(path.read_bytes())
        if message["To"] == address and subject_contains in (message["Subject"] or ""):
            subjects.append(str(message["Subject"]))
    return subjects
