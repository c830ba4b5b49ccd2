"""The search index's worker: `python -m examples.search_index --address HOST:PORT --task-queue QUEUE --store DIR`.

It polls only its own task queue and implements the deletion contract's calls as activities of the rpcs' names,
reading and writing the generated protobuf messages. Register it with the gateway (admin):
`PUT /deletion-services/search-index {"task_queue": QUEUE, "contract": "lifecycle.deletion.v1"}`, or let it do so
itself at start-up: `--register-with GATEWAY_URL [--name NAME]`, with the admin token in GATEWAY_ADMIN_TOKEN.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import time
from pathlib import Path

import httpx
from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.worker import Worker

from examples.search_index.store import SearchIndex
from lifecycle.data_converter import DATA_CONVERTER
from lifecycle.deletion.v1.service_pb2 import (
    DeleteRequest,
    DeleteResponse,
    Subject,
    VerifyRequest,
    VerifyResponse,
)

# Entries per call at most, whatever max_rows allows: each call is one short SQLite transaction.
MAX_SLICE = 500


def _bot(subject: Subject) -> str:
    if subject.kind != Subject.KIND_BOT or not subject.id:
        # The contract: a subject this service cannot act on is a non-retryable error, for an operator to see.
        raise ApplicationError(f"unsupported subject {Subject.Kind.Name(subject.kind)}", non_retryable=True)
    return subject.id


class SearchIndexService:
    def __init__(self, index: SearchIndex) -> None:
        self._index = index

    @activity.defn(name="DeleteSubjectData")
    async def delete_subject_data(self, request: DeleteRequest) -> DeleteResponse:
        bot_id = _bot(request.subject)
        limit = min(request.max_rows or MAX_SLICE, MAX_SLICE)
        started = time.monotonic()
        # The cursor is ours: the highest entry id deleted so far. An older one (a lost answer) deletes nothing twice.
        after = int(request.cursor or 0)
        deleted = await asyncio.to_thread(self._index.delete, bot_id, after, limit)
        if request.rows_per_second and deleted.rows:
            # The gateway's share of its deletion budget for us: never faster than that.
            await asyncio.sleep(max(0.0, deleted.rows / request.rows_per_second - (time.monotonic() - started)))
        rows_left, files_left = await asyncio.to_thread(self._index.count, bot_id)
        elapsed = time.monotonic() - started
        return DeleteResponse(
            rows_deleted=deleted.rows,
            files_deleted=deleted.files,
            cursor=str(deleted.cursor),
            done=rows_left == 0 and files_left == 0,
            remaining_rows_estimate=rows_left,
            remaining_files_estimate=files_left,
            measured_rows_per_second=deleted.rows / elapsed if deleted.rows and elapsed > 0 else 0.0,
        )

    @activity.defn(name="VerifySubjectErased")
    async def verify_subject_erased(self, request: VerifyRequest) -> VerifyResponse:
        rows, files = await asyncio.to_thread(self._index.count, _bot(request.subject))
        return VerifyResponse(remaining_rows=rows, remaining_files=files)


async def register(gateway: str, name: str, task_queue: str, admin_token: str) -> None:
    """Join the deletions: the same call an admin makes by hand, repeated harmlessly at every start."""
    async with httpx.AsyncClient(base_url=gateway, timeout=10) as http:
        answer = await http.put(
            f"/deletion-services/{name}",
            json={"task_queue": task_queue, "contract": DeleteRequest.DESCRIPTOR.file.package},
            headers={"Authorization": f"Bearer {admin_token}"},
        )
        answer.raise_for_status()
    print(f"registered as {name} with {gateway}", flush=True)


async def serve(address: str, task_queue: str, store: Path) -> None:
    # The project's converter reads JSON protobuf ignoring unknown fields, as the contract asks of every reader.
    client = await Client.connect(address, data_converter=DATA_CONVERTER)
    service = SearchIndexService(SearchIndex(store))
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(signum, stop.set)
    async with Worker(
        client,
        task_queue=task_queue,
        activities=[service.delete_subject_data, service.verify_subject_erased],
    ):
        print(f"search index serving {task_queue}", flush=True)
        await stop.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--address", required=True, help="the Temporal frontend, host:port")
    parser.add_argument("--task-queue", required=True)
    parser.add_argument("--store", required=True, type=Path, help="the folder of the index's own store")
    parser.add_argument(
        "--register-with",
        metavar="GATEWAY_URL",
        help="register with the gateway's API at start-up, under --name, with the admin token in GATEWAY_ADMIN_TOKEN",
    )
    parser.add_argument("--name", default="search-index", help="the name to register under")
    arguments = parser.parse_args()
    asyncio.run(start(arguments))


async def start(arguments: argparse.Namespace) -> None:
    if arguments.register_with:
        await register(arguments.register_with, arguments.name, arguments.task_queue, os.environ["GATEWAY_ADMIN_TOKEN"])
    await serve(arguments.address, arguments.task_queue, arguments.store)


if __name__ == "__main__":
    main()
