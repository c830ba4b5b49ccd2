"""The worker process: runs every workflow and activity, and shuts down gracefully on SIGTERM or SIGINT."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from types import TracebackType

from sqlalchemy.ext.asyncio import AsyncEngine
from temporalio.client import Client
from temporalio.common import WorkerDeploymentVersion
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig
from temporalio.worker import Worker

from activities.errors import is_transient
from activities.interceptors import interceptors_for
from activities.registry import build_activities
from activities.resources import ActivityResources
from lifecycle.backoff import until_it_answers
from lifecycle.db.engine import POOL_CAPACITY
from lifecycle.deletion.receipt_keys import ReceiptKey, ReceiptKeyError, ReceiptSigner, publish_at_start
from lifecycle.logging_setup import configure_logging
from lifecycle.schedules import ensure_health_check_schedule, ensure_reconciler_schedule
from lifecycle.sealing import KeyRing, SealingKeyError, reseal
from lifecycle.sealing import publish_at_start as publish_sealing_key
from lifecycle.settings import Settings, get_settings
from lifecycle.sites.pool import poke_every_pool
from lifecycle.temporal_client import TemporalMisconfigured, connect_when_up
from lifecycle.tracing import configure_tracing, stop_tracing
from lifecycle.worker_deployment import deployment_config, deployment_version, make_current
from lifecycle.workflow_runner import workflow_runner
from workflows.registry import WORKFLOWS

logger = logging.getLogger("worker")

# Long enough for a deleter to finish its current batch and heartbeat it, so the next worker resumes there.
GRACEFUL_SHUTDOWN = timedelta(seconds=30)
# A killed worker's runs wait this long on its sticky queue before any worker may take them (SDK default 10 s):
# part of the time to recover from a kill, so kept short; a live worker picks its sticky tasks up in milliseconds.
STICKY_SCHEDULE_TO_START = timedelta(seconds=3)


@dataclass(frozen=True)
class Slots:
    workflow_tasks: int
    activities: int


# Every activity holds at most one connection of the process's one SQLAlchemy pool (activities/resources.py)
# while it runs; site databases are reached over connections of their own. Both queues' activity slots
# together stay below the pool's capacity, so a backlog of any size waits in Temporal's task queue, where
# it is visible and fair, rather than in the pool, where a checkout waits 30 s and then fails:
#   deletions 6 + sites 8 = 14 activity slots  <=  POOL_CAPACITY 30,
# and the 16 left over cover the reconciler's and the schedules' short checkouts.
# Workflow tasks touch no database; their slots bound how much of the one event loop a deletion backlog can
# take from site work in the same process (300 deletions would otherwise run 100 workflow tasks at once).
DELETION_SLOTS = Slots(workflow_tasks=4, activities=6)
SITE_SLOTS = Slots(workflow_tasks=10, activities=8)
assert DELETION_SLOTS.activities + SITE_SLOTS.activities < POOL_CAPACITY


def slots_for(queue: str, settings: Settings) -> Slots:
    return SITE_SLOTS if queue == settings.site_task_queue else DELETION_SLOTS


ROLES = ("deletions", "sites")


def task_queues(settings: Settings) -> list[str]:
    """The queues this process polls (WORKER_ROLES): background work, customer-facing work, or both."""
    roles = [role.strip() for role in settings.worker_roles.split(",") if role.strip()]
    unknown = sorted(set(roles) - set(ROLES))
    if unknown or not roles:
        raise ValueError(f"WORKER_ROLES must name deletions, sites or both, got {settings.worker_roles!r}")
    queues = {"deletions": settings.task_queue, "sites": settings.site_task_queue}
    return list(dict.fromkeys(queues[role] for role in ROLES if role in roles))


@dataclass(frozen=True)
class Promotion:
    """Make `version` current once its workers poll (WORKER_MAKE_CURRENT)."""

    client: Client
    version: WorkerDeploymentVersion


class LifecycleWorkers:
    """One Temporal Worker per task queue in this process, started and stopped together.

    Every worker registers every workflow and activity, so a run works on whichever queue it was started
    on; what separates the work is which queue the starter chose, and each queue's own worker slots.
    `before_polling` runs first: a step that fails (a receipt key this worker must not sign with) stops the
    process before it takes any work. The workers are built only then, by `build`: a Worker registers with its
    client as it is made, and one made for a start that was refused would hold its queue in that client.
    """

    def __init__(
        self,
        build: Callable[[], list[Worker]],
        promote: Promotion | None = None,
        before_polling: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.workers: list[Worker] = []
        self.promote = promote
        self.before_polling = before_polling
        self._build = build
        self._stack = AsyncExitStack()

    @property
    def task_queue(self) -> str:
        """The first queue polled: the one a test or script starts its runs on when it does not care."""
        return self.workers[0].task_queue

    async def __aenter__(self) -> LifecycleWorkers:
        if self.before_polling is not None:
            await self.before_polling()
        self.workers = self._build()
        async with AsyncExitStack() as stack:
            for worker in self.workers:
                await stack.enter_async_context(worker)
            if self.promote is not None:
                await make_current(self.promote.client, self.promote.version)
            self._stack = stack.pop_all()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        await self._stack.aclose()


def build_worker(
    client: Client,
    resources: ActivityResources,
    settings: Settings,
    signer: ReceiptSigner | None = None,
    *,
    graceful_shutdown: timedelta = GRACEFUL_SHUTDOWN,
) -> LifecycleWorkers:
    """Versioned workers (deployment_version): a run started on these queues goes to the current version.

    The receipt signing key is loaded here unless given (an unusable key file raises ReceiptKeyError), and so are
    the sealing keys (SealingKeyError); both are published, or checked against the published ones, and the stored
    secrets re-sealed to the published sealing key, before the workers poll. `graceful_shutdown`: how
    long running activities may go on once the workers stop (tests swap workers at once).
    """
    signer = signer or ReceiptSigner(settings)
    keys = resources.keys
    activities = build_activities(resources, signer)
    version = deployment_version(settings)
    return LifecycleWorkers(
        lambda: [
            Worker(
                client,
                task_queue=queue,
                workflows=WORKFLOWS,
                workflow_runner=workflow_runner(),
                activities=activities,
                interceptors=interceptors_for(settings),
                graceful_shutdown_timeout=graceful_shutdown,
                sticky_queue_schedule_to_start_timeout=STICKY_SCHEDULE_TO_START,
                max_concurrent_workflow_tasks=slots_for(queue, settings).workflow_tasks,
                max_concurrent_activities=slots_for(queue, settings).activities,
                deployment_config=deployment_config(version),
            )
            for queue in task_queues(settings)
        ],
        Promotion(client, version) if settings.worker_make_current else None,
        before_polling=partial(_publish_keys, resources.engine, signer.key, keys),
    )


def _runtime(settings: Settings) -> Runtime | None:
    if settings.worker_metrics_port is None:
        return None
    return Runtime(
        telemetry=TelemetryConfig(
            metrics=PrometheusConfig(bind_address=f"{settings.worker_metrics_host}:{settings.worker_metrics_port}")
        )
    )


async def _publish_keys(engine: AsyncEngine, key: ReceiptKey, keys: KeyRing) -> None:
    """Publish the receipt and sealing keys, or check them against the published ones, then seal the stored secrets
    not sealed to the published key; a PostgreSQL that does not answer yet is waited for, with the backoff Temporal
    is waited for as Temporal is (lifecycle/backoff.py), while a key this worker must not use stops it."""

    async def publish() -> None:
        await publish_at_start(engine, key)
        await publish_sealing_key(engine, keys)
        if resealed := await reseal(engine, keys):
            logger.info("sealed %d stored secrets to the published sealing key", resealed)

    await until_it_answers(
        publish, transient=is_transient, doing="publishing the receipt key again once PostgreSQL answers"
    )


# The queue every sites worker polls unless configured otherwise: a worker on it starts the warm pools; one on a
# queue of its own only wakes them (lifecycle/sites/pool.py, poke_pool).
SHARED_SITE_QUEUE = Settings.model_fields["site_task_queue"].default


async def _start_pools(client: Client, engine: AsyncEngine, task_queue: str) -> None:
    """Every server's warm pool runs (lifecycle/sites/pool.py); one not started now starts at its next poke (an
    admin's change of the server), and a site meanwhile is made the slow way."""
    try:
        servers = await poke_every_pool(client, engine, task_queue, start=task_queue == SHARED_SITE_QUEUE)
    except Exception as err:
        logger.warning("could not start the site-database pools: %s", err)
    else:
        logger.info("site-database pools running for %s", ", ".join(servers) or "no server")


async def main() -> None:
    settings = get_settings()
    configure_logging("worker", level=settings.log_level, form=settings.log_format)
    # SIGTERM or SIGINT stops the worker cleanly at any moment. While it starts, by cancelling the start: a wait
    # for Temporal or PostgreSQL ends, and workers already polling while their version is made current are shut
    # down by LifecycleWorkers' exit stack. Once the workers run, by letting running activities finish.
    started = asyncio.Event()
    stop = asyncio.Event()
    starting = asyncio.current_task()

    def on_signal() -> None:
        stop.set()
        if not started.is_set() and starting is not None:
            starting.cancel()

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal)
    try:
        await _serve(settings, started, stop)
    except asyncio.CancelledError:
        if not stop.is_set():
            raise
        logger.info("worker stopped while starting")


async def _serve(settings: Settings, started: asyncio.Event, stop: asyncio.Event) -> None:
    # Before anything else: a worker without a usable receipt key stops here, not at its first receipt.
    signer = ReceiptSigner(settings)
    configure_tracing("worker")
    runtime = _runtime(settings)
    client = await connect_when_up(settings, runtime=runtime)
    if settings.task_queue in task_queues(settings):
        await ensure_reconciler_schedule(client, settings.task_queue)
    if settings.site_task_queue in task_queues(settings):
        await ensure_health_check_schedule(client, settings.site_task_queue)
    resources = ActivityResources.create(settings, client)
    version = deployment_version(settings)
    logger.info(
        "worker deployment %s, build id %s, polling task queues %s",
        version.deployment_name,
        version.build_id,
        ", ".join(task_queues(settings)),
    )
    worker = build_worker(client, resources, settings, signer)
    try:
        async with worker:
            started.set()
            if settings.site_task_queue in task_queues(settings):
                await _start_pools(client, resources.engine, settings.site_task_queue)
            await stop.wait()
            logger.info("shutting down: letting running activities finish or heartbeat")
    finally:
        await resources.close()
        stop_tracing()
    logger.info("worker stopped")


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except (ReceiptKeyError, SealingKeyError, TemporalMisconfigured) as err:
        logger.critical("cannot start: %s", err)
        logging.shutdown()
        os._exit(2)
    # Everything is stopped and logged by now. Interpreter finalization can still abort ("PyGILState_Release:
    # thread state must be current") when the SDK core's native threads outlive it, which turns a clean stop
    # into exit code -6; leave without finalizing instead.
    logging.shutdown()
    os._exit(0)
