"""The worker process of a contract service: `python -m services.<name> [--task-queue Q] [--namespace NS
[--nexus-endpoint E]] [--register-with URL]`.

At start-up it makes its own database if missing and applies its schema, connects to Temporal with the project's
converter (protobuf JSON read ignoring unknown fields, as the contract asks of every reader), optionally registers
itself with the gateway (`PUT /deletion-services/<name>`, admin token), and then polls ONLY its own task queue.

With `--namespace` (or `<NAME>_NAMESPACE`) it runs in a namespace of its own, apart from the gateway's, and also
serves the contract there through Nexus (lifecycle/deletion/nexus_handler.py) to the endpoint an operator creates
to its queue; its Temporal settings are then that namespace's alone, and it registers by `--nexus-endpoint`.

Its settings come from the environment: Temporal's as the `temporal` CLI reads them (TEMPORAL_ADDRESS,
TEMPORAL_API_KEY, TEMPORAL_TLS_*, profiles: lifecycle/temporal_client.py), `<NAME>_DATABASE_URL`
(services/runtime/database.py), `<NAME>_TASK_QUEUE` (the service's name by default), `<NAME>_NAMESPACE`,
`<NAME>_NEXUS_ENDPOINT`, DELETION_GATEWAY_URL to
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
from dataclasses import dataclass

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from temporalio.client import Client
from temporalio.worker import Worker

from activities.interceptors import interceptors_for
from lifecycle.deletion.nexus_handler import OPERATION_WORKFLOWS, DeletionNexusHandler
from lifecycle.deletion.v1.service_pb2 import DeleteRequest
from lifecycle.logging_setup import configure_logging
from lifecycle.object_store import ObjectStore
from lifecycle.settings import Settings, get_settings
from lifecycle.temporal_client import TemporalMisconfigured, connect_when_up
from lifecycle.worker_deployment import PROJECT_ROOT, source_build_id
from lifecycle.workflow_runner import workflow_runner
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
    return service_variable(name, "TASK_QUEUE")


def service_variable(name: str, setting: str) -> str:
    return f"{name.upper().replace('-', '_')}_{setting}"


@dataclass(frozen=True)
class Placement:
    """Where the service answers: its queue, in the gateway's namespace, or in `namespace`, its own, also behind
    `nexus_endpoint`, the endpoint it registers by."""

    task_queue: str
    namespace: str | None = None
    nexus_endpoint: str | None = None

    @property
    def registered_as(self) -> dict[str, str]:
        return {"nexus_endpoint": self.nexus_endpoint} if self.nexus_endpoint else {"task_queue": self.task_queue}


async def register(gateway: str, name: str, where: dict[str, str], credential: str) -> None:
    """Join the deletions: the same call an admin makes by hand, repeated harmlessly at every start. A gateway not
    listening yet (started beside it, as `make run` does) is waited for, up to REGISTER_WITHIN seconds."""
    deadline = time.monotonic() + REGISTER_WITHIN
    async with httpx.AsyncClient(base_url=gateway, timeout=10) as http:
        while True:
            try:
                answer = await http.put(
                    f"/deletion-services/{name}",
                    json={**where, "contract": CONTRACT},
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


def contract_worker(client: Client, service: ContractService, placement: Placement, settings: Settings) -> Worker:
    """The worker of the contract's calls as activities on the service's queue; in a namespace of its own, also as
    the Nexus operations of an endpoint to that queue, with the workflows behind the asynchronous ones."""
    behind_nexus = placement.namespace is not None
    return Worker(
        client,
        task_queue=placement.task_queue,
        # The code a service runs: its own, the shared runtime, and the project's core it imports.
        build_id=source_build_id(PROJECT_ROOT / "services", PROJECT_ROOT / "lifecycle", PROJECT_ROOT / "activities"),
        activities=service.activities,
        max_concurrent_activities=ACTIVITY_SLOTS,
        workflows=OPERATION_WORKFLOWS if behind_nexus else [],
        nexus_service_handlers=[DeletionNexusHandler(service.verify_subject_erased)] if behind_nexus else [],
        workflow_runner=workflow_runner(),
        # A failure reaches history as one line, as the gateway's do: a raw driver error (the store down)
        # would otherwise arrive as the server's stand-in "Failure exceeds size limit".
        interceptors=interceptors_for(settings),
    )


async def serve(definition: ServiceDefinition, placement: Placement, gateway: str | None) -> None:
    settings = get_settings()
    if placement.namespace is not None:
        # Only its own namespace: the Temporal settings (address, API key, certificates) are that namespace's.
        settings = settings.model_copy(update={"temporal_namespace": placement.namespace})
    client = await connect_when_up(settings)
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(signum, stop.set)
    async with (
        opened(definition, settings, service_database_url(definition.name)) as (service, _),
        contract_worker(client, service, placement, settings),
    ):
        if gateway:
            # Its own credential (POST /deletion-services/{name}/credentials) in a deployment; the local stack's
            # services, which share its data directory, may use the admin token instead.
            credential = settings.deletion_service_credential or settings.admin_token
            if not credential:
                raise SystemExit(
                    "--register-with needs the service's credential (DELETION_SERVICE_CREDENTIAL) or the admin token"
                )
            await register(gateway, definition.name, placement.registered_as, credential)
        where = f" in {placement.namespace}, also through Nexus" if placement.namespace else ""
        print(f"{definition.name} serving {placement.task_queue}{where}", flush=True)
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
    parser.add_argument(
        "--namespace",
        default=os.environ.get(service_variable(definition.name, "NAMESPACE")),
        help="a namespace of its own, where it also serves the contract through Nexus"
        f" (default: {service_variable(definition.name, 'NAMESPACE')}; unset: the gateway's, on the queue only)",
    )
    parser.add_argument(
        "--nexus-endpoint",
        default=os.environ.get(service_variable(definition.name, "NEXUS_ENDPOINT")),
        help="with --namespace: the endpoint to its queue there, which it registers by",
    )
    arguments = parser.parse_args()
    if arguments.register_with and arguments.namespace and not arguments.nexus_endpoint:
        parser.error("--register-with in a namespace of its own needs the --nexus-endpoint it is reached by")
    if arguments.nexus_endpoint and not arguments.namespace:
        parser.error("--nexus-endpoint needs the --namespace it leads to")
    placement = Placement(arguments.task_queue, arguments.namespace, arguments.nexus_endpoint)
    settings = get_settings()
    configure_logging(definition.name, level=settings.log_level, form=settings.log_format)
    try:
        asyncio.run(serve(definition, placement, arguments.register_with))
    except TemporalMisconfigured as err:
        raise SystemExit(f"{definition.name} cannot start: {err}") from None
