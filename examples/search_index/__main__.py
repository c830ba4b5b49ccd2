"""The search index's worker: `python -m examples.search_index [--address HOST:PORT] [--namespace NS] --task-queue
QUEUE --store DIR`.

It reaches Temporal as the project's processes do (lifecycle/temporal_client.py): through envconfig's variables
(TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_TLS and its certificate variables) or a profile,
with its team's own credential; `--address` and `--namespace` win over them.

It polls only its own task queue, in its namespace, and implements the deletion contract's calls as activities of
the rpcs' names, reading and writing the generated protobuf messages; the same worker serves the contract's Nexus
service (lifecycle/deletion/nexus_handler.py) from those activities. Register it with the gateway (admin):
`PUT /deletion-services/search-index {"task_queue": QUEUE, "contract": "lifecycle.deletion.v1"}` when it polls the
gateway's namespace, or `{"nexus_endpoint": ENDPOINT, ...}` when it runs in a namespace of its own behind an
endpoint an operator created to its queue; or let it do so itself at start-up: `--register-with GATEWAY_URL [--name
NAME] [--nexus-endpoint ENDPOINT]`, with the admin token in GATEWAY_ADMIN_TOKEN.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import signal
import time
from datetime import timedelta
from pathlib import Path

import httpx
from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.worker import Worker

from examples.search_index.store import SearchIndex
from lifecycle.deletion.nexus_handler import OPERATION_WORKFLOWS, SLICE_BOUND, DeletionNexusHandler
from lifecycle.deletion.v1.service_pb2 import (
    DeleteRequest,
    DeleteResponse,
    ExportRequest,
    ExportResponse,
    Subject,
    VerifyRequest,
    VerifyResponse,
)
from lifecycle.settings import Settings
from lifecycle.temporal_client import connect
from lifecycle.worker_deployment import PROJECT_ROOT, source_build_id

# Entries per call at most, whatever max_rows allows: each call is one short SQLite transaction.
MAX_SLICE = 500
REGISTER_ATTEMPTS = 120
# Set (to anything) for a drill: every slice says so on stdout and then holds, before it deletes anything, until
# the process is killed; a kill then loses a slice in flight and nothing of the store.
HOLD_SLICES = "SEARCH_INDEX_HOLD_SLICES"
# Seconds a slice asked through Nexus may run, its retries included (the handler's SLICE_BOUND when unset). A
# slice lost with every worker closes at that bound, and the service shows `waiting`, that much sooner. Its slices
# return within about 5 s; a bound shorter than the retries' backoff (15 s) ends a call that keeps failing as a
# timeout, which the gateway calls again, rather than with its last error.
SLICE_BOUND_SECONDS = "SEARCH_INDEX_SLICE_BOUND_SECONDS"


def _bot(subject: Subject) -> str:
    if subject.kind != Subject.KIND_BOT or not subject.id:
        # The contract: a subject this service cannot act on is a non-retryable error, for an operator to see.
        raise ApplicationError(f"unsupported subject {Subject.Kind.Name(subject.kind)}", non_retryable=True)
    return subject.id


def _s3_from_environment() -> dict[str, str]:
    """The object store the exports go to, from the same S3_* variables the gateway reads."""
    return {
        "endpoint_url": os.environ["S3_ENDPOINT_URL"],
        "region_name": os.environ.get("S3_REGION", "us-east-1"),
        "aws_access_key_id": os.environ["S3_ACCESS_KEY_ID"],
        "aws_secret_access_key": os.environ["S3_SECRET_ACCESS_KEY"],
    }


class SearchIndexService:
    def __init__(self, index: SearchIndex, name: str) -> None:
        self._index = index
        self._name = name

    @activity.defn(name="DeleteSubjectData")
    async def delete_subject_data(self, request: DeleteRequest) -> DeleteResponse:
        bot_id = _bot(request.subject)
        if os.environ.get(HOLD_SLICES):
            print(f"holding a slice of {request.deletion_id}", flush=True)
            await asyncio.Event().wait()
        limit = min(request.max_rows or MAX_SLICE, MAX_SLICE)
        if request.rows_per_second and request.max_duration_ms:
            # No more than the budget allows within the slice's duration: the call returns within about that.
            limit = min(limit, max(1, request.rows_per_second * request.max_duration_ms // 1000))
        started = time.monotonic()
        # The cursor is ours: the highest entry id deleted so far. An older one (a lost answer) deletes nothing twice,
        # and is answered what went since from the store's ledger.
        after = int(request.cursor or 0)
        deleted = await asyncio.to_thread(self._index.delete, request.deletion_id, bot_id, after, limit)
        if request.rows_per_second and deleted.removed:
            # The gateway's share of its deletion budget for us: never faster than that.
            await asyncio.sleep(max(0.0, deleted.removed / request.rows_per_second - (time.monotonic() - started)))
        rows_left, files_left = await asyncio.to_thread(self._index.count, bot_id)
        elapsed = time.monotonic() - started
        return DeleteResponse(
            rows_deleted=deleted.rows,
            files_deleted=deleted.files,
            cursor=str(deleted.cursor),
            done=rows_left == 0 and files_left == 0,
            remaining_rows_estimate=rows_left,
            remaining_files_estimate=files_left,
            measured_rows_per_second=deleted.removed / elapsed if deleted.removed and elapsed > 0 else 0.0,
        )

    @activity.defn(name="ExportSubjectData")
    async def export_subject_data(self, request: ExportRequest) -> ExportResponse:
        """The account's bots' entries and files as one JSON-lines object under the prefix the gateway gave.

        The index keys its data by bot, so it exports the bots the request lists. A retried call writes the same
        object again (the same content, so the same digest).
        """
        if request.subject.kind != Subject.KIND_ACCOUNT:
            raise ApplicationError("an export's subject is an account", non_retryable=True)
        body, rows, files = await asyncio.to_thread(self._index.export, list(request.bot_ids))
        if not rows and not files:
            return ExportResponse()  # nothing of the account here: no object, as the contract says
        key = f"{request.object_key_prefix}{self._name}.ndjson"
        # Imported on the first export only: it costs a third of the worker's start-up, and most never export.
        from aiobotocore.session import get_session

        session = get_session()
        async with session.create_client("s3", **_s3_from_environment()) as s3:
            await s3.put_object(Bucket=request.bucket or os.environ["S3_BUCKET"], Key=key, Body=body)
        return ExportResponse(
            object_key=key,
            rows=rows,
            files=files,
            sha256=hashlib.sha256(body).hexdigest(),
            size_bytes=len(body),
            content_type="application/x-ndjson",
        )

    @activity.defn(name="VerifySubjectErased")
    async def verify_subject_erased(self, request: VerifyRequest) -> VerifyResponse:
        rows, files = await asyncio.to_thread(self._index.count, _bot(request.subject))
        return VerifyResponse(remaining_rows=rows, remaining_files=files)


async def register(gateway: str, name: str, where: dict[str, str], admin_token: str) -> None:
    """Join the deletions: the same call an admin makes by hand, repeated harmlessly at every start. `where` is
    the transport: {"task_queue": ...} or {"nexus_endpoint": ...}."""
    async with httpx.AsyncClient(base_url=gateway, timeout=10) as http:
        # A gateway started beside it (`make run`) may not listen yet: asked again every half second for a minute.
        for attempt in range(REGISTER_ATTEMPTS):
            try:
                answer = await http.put(
                    f"/deletion-services/{name}",
                    json={**where, "contract": DeleteRequest.DESCRIPTOR.file.package},
                    headers={"Authorization": f"Bearer {admin_token}"},
                )
                break
            except httpx.TransportError:
                if attempt == REGISTER_ATTEMPTS - 1:
                    raise
                await asyncio.sleep(0.5)
        answer.raise_for_status()
    print(f"registered as {name} with {gateway}", flush=True)


async def serve(address: str | None, namespace: str | None, task_queue: str, store: Path, name: str) -> None:
    # Its connection carries the project's converter, which reads JSON protobuf ignoring unknown fields, as the
    # contract asks of every reader.
    given = {"temporal_address": address, "temporal_namespace": namespace}
    client = await connect(Settings().model_copy(update={key: value for key, value in given.items() if value}))
    service = SearchIndexService(SearchIndex(store), name)
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(signum, stop.set)
    async with index_worker(client, task_queue, service):
        print(f"search index serving {task_queue} in {client.namespace}", flush=True)
        await stop.wait()


def index_worker(client: Client, task_queue: str, service: SearchIndexService) -> Worker:
    """The index's worker: the contract's calls as activities on `task_queue`, and as Nexus operations for an
    endpoint that targets it."""
    bound = os.environ.get(SLICE_BOUND_SECONDS)
    slice_bound = timedelta(seconds=float(bound)) if bound else SLICE_BOUND
    return Worker(
        client,
        task_queue=task_queue,
        build_id=source_build_id(Path(__file__).parent, PROJECT_ROOT / "lifecycle"),
        activities=[service.delete_subject_data, service.verify_subject_erased, service.export_subject_data],
        workflows=OPERATION_WORKFLOWS,
        nexus_service_handlers=[DeletionNexusHandler(service.verify_subject_erased, slice_bound)],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--address", help="the Temporal frontend, host:port; TEMPORAL_ADDRESS's by default")
    parser.add_argument("--namespace", help="its own Temporal namespace; TEMPORAL_NAMESPACE's by default")
    parser.add_argument("--task-queue", required=True)
    parser.add_argument("--store", required=True, type=Path, help="the folder of the index's own store")
    parser.add_argument(
        "--register-with",
        metavar="GATEWAY_URL",
        help="register with the gateway's API at start-up, under --name, with the admin token in GATEWAY_ADMIN_TOKEN",
    )
    parser.add_argument(
        "--name", default="search-index", help="the name it registers under, and its export objects' name"
    )
    parser.add_argument(
        "--nexus-endpoint",
        help="register as reached through this Nexus endpoint (to --task-queue in --namespace), not on the queue",
    )
    arguments = parser.parse_args()
    asyncio.run(start(arguments))


async def start(arguments: argparse.Namespace) -> None:
    if arguments.register_with:
        where = (
            {"nexus_endpoint": arguments.nexus_endpoint}
            if arguments.nexus_endpoint
            else {"task_queue": arguments.task_queue}
        )
        await register(arguments.register_with, arguments.name, where, os.environ["GATEWAY_ADMIN_TOKEN"])
    await serve(arguments.address, arguments.namespace, arguments.task_queue, arguments.store, arguments.name)


if __name__ == "__main__":
    main()
