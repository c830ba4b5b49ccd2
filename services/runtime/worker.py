"""The worker process of a contract service: `python -m services.<name> [--task-queue Q] [--register-with URL]`.

At start-up it makes its own database if missing and applies its schema, connects to Temporal with the project's
converter (protobuf JSON read ignoring unknown fields, as the contract asks of every reader), optionally registers
itself with the gateway (`PUT /deletion-services/<name>`, admin token), and then polls ONLY its own task queue.

Its settings come from the environment: Temporal's as the `temporal` CLI reads them (TEMPORAL_ADDRESS,
TEMPORAL_API_KEY, TEMPORAL_TLS_*, profiles: lifecycle/temporal_client.py), `<NAME>_DATABASE_URL`
(services/runtime/database.py), `<NAME>_TASK_QUEUE` (the service's name by default), DELETION_GATEWAY_URL to
register with, ADMIN_TOKEN (or DATA_DIR's admin_token file), the S3_* variables (where its export parts go, and
a service's own objects), EXPORT_BATCH_ROWS, and FAULT_INJECTION for drills and tests
(activities/fault_injection.py).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import time
from collections.abc import AsyncIterator

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from temporalio.worker import Worker

from activities.interceptors import interceptors_for
from lifecycle.deletion.v1.service_pb2 import DeleteRequest
from lifecycle.logging_setup import configure_logging
from lifecycle.object_store import ObjectStore
from lifecycle.settings import Settings, get_settings
from lifecycle.temporal_client import TemporalMisconfigured, connect_when_up
from services.runtime.contract import ContractService
from services.runtime.database import apply_schema, ensure_database, service_database_url
from services.runtime.definition import ServiceDefinition

CONTRACT = DeleteRequest.DESCRIPTOR.file.package
# How long a worker waits at start-up for the gateway it registers with to listen.
REGISTER_WITHIN = 60.0
# Connections one service process holds at most (docker-compose.yml's connection budget counts them), kept once
# opened: as in lifecycle/db/engine.py, an overflow connection would be closed on return and opened again.
POOL_CAPACITY = 8
# Each call holds at most one of those connections, so the worker takes no more calls than it has connections: a
# backlog waits in Temporal's task queue, where the deletions' fairness keys order it (another account's small
# deletion goes ahead of a mass deletion's calls), not on the pool, in arrival order, until a checkout times out.
ACTIVITY_SLOTS = POOL_CAPACITY


def task_queue_variable(name: str) -> str:
    return f"{name.upper().replace('-', '_')}_TASK_QUEUE"


async def register(gateway: str, name: str, task_queue: str, credential: str) -> None:
    """Join the deletions: the same call an admin makes by hand, repeated harmlessly at every start. A gateway not
    listening yet (started beside it, as `make run` does) is waited for, up to REGISTER_WITHIN seconds."""
    deadline = time.monotonic() + REGISTER_WITHIN
    async with httpx.AsyncClient(base_url=gateway, timeout=10) as http:
        while True:
            try:
                answer = await http.put(
                    f"/deletion-services/{name}",
                    json={"task_queue": task_queue, "contract": CONTRACT},
                    headers={"Authorization": f"Bearer {credential}"},
                )
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.5)
        answer.raise_for_status()


@contextlib.asynccontextmanager
async def opened(
    definition: ServiceDefinition, settings: Settings, url: str
) -> AsyncIterator[tuple[ContractService, AsyncEngine]]:
    """The service over its own database at `url` (made and migrated first) and the object store."""
    await ensure_database(url)
    engine = create_async_engine(url, pool_size=POOL_CAPACITY, max_overflow=0, pool_pre_ping=True)
    objects = ObjectStore(settings)
    try:
        await apply_schema(engine, definition.full_schema)
        yield (
            ContractService(
                engine,
                definition.tables(objects),
                name=definition.name,
                objects=objects,
                export_batch_rows=settings.export_batch_rows,
            ),
            engine,
        )
    finally:
        await objects.close()
        await engine.dispose()


async def serve(definition: ServiceDefinition, task_queue: str, gateway: str | None) -> None:
    settings = get_settings()
    client = await connect_when_up(settings)
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(signum, stop.set)
    async with (
        opened(definition, settings, service_database_url(definition.name)) as (service, _),
        Worker(
            client,
            task_queue=task_queue,
            activities=service.activities,
            max_concurrent_activities=ACTIVITY_SLOTS,
            # A failure reaches history as one line, as the gateway's do: a raw driver error (the store down)
            # would otherwise arrive as the server's stand-in "Failure exceeds size limit".
            interceptors=interceptors_for(settings),
        ),
    ):
        if gateway:
            # Its own credential (POST /deletion-services/{name}/credentials) in a deployment; the local stack's
            # services, which share its data directory, may use the admin token instead.
            credential = settings.deletion_service_credential or settings.admin_token
            if not credential:
                raise SystemExit(
                    "--register-with needs the service's credential (DELETION_SERVICE_CREDENTIAL) or the admin token"
                )
            await register(gateway, definition.name, task_queue, credential)
        print(f"{definition.name} serving {task_queue}", flush=True)
        await stop.wait()


def main(definition: ServiceDefinition) -> None:
    parser = argparse.ArgumentParser(description=f"The {definition.name} service's worker. {__doc__}")
    parser.add_argument(
        "--task-queue",
        default=os.environ.get(task_queue_variable(definition.name), definition.name),
        help=f"its own task queue (default: {task_queue_variable(definition.name)}, else {definition.name!r})",
    )
    parser.add_argument(
        "--register-with",
        metavar="GATEWAY_URL",
        default=os.environ.get("DELETION_GATEWAY_URL"),
        help="register with the gateway's API at start-up (default: DELETION_GATEWAY_URL; unset: do not)",
    )
    arguments = parser.parse_args()
    settings = get_settings()
    configure_logging(definition.name, level=settings.log_level, form=settings.log_format)
    try:
        asyncio.run(serve(definition, arguments.task_queue, arguments.register_with))
    except TemporalMisconfigured as err:
        raise SystemExit(f"{definition.name} cannot start: {err}") from None
