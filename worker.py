"""The worker process: runs every workflow and activity, and shuts down gracefully on SIGTERM or SIGINT."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Sequence
from datetime import timedelta

from temporalio.client import Client
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig
from temporalio.worker import Interceptor, Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from activities.fault_injection import FaultInjectionInterceptor
from activities.registry import build_activities
from activities.resources import ActivityResources
from lifecycle.logging_setup import configure_logging
from lifecycle.schedules import ensure_reconciler_schedule
from lifecycle.settings import Settings, get_settings
from workflows.registry import WORKFLOWS

logger = logging.getLogger("worker")

# Long enough for a deleter to finish its current batch and heartbeat it, so the next worker resumes there.
GRACEFUL_SHUTDOWN = timedelta(seconds=30)

# The sandbox still blocks non-deterministic calls, but imports every module from outside instead of
# re-executing it for each new run: the first workflow task of a site creation took 15-20 ms, mostly
# re-importing the workflow modules (bench.sites). The workflow modules hold only immutable constants.
WORKFLOW_RUNNER = SandboxedWorkflowRunner(restrictions=SandboxRestrictions.default.with_passthrough_all_modules())


def interceptors_for(settings: Settings) -> Sequence[Interceptor]:
    # An invalid rule raises here, at worker start, rather than when the activity first runs.
    if settings.fault_injection:
        return [FaultInjectionInterceptor.from_spec(settings.fault_injection)]
    return []


def build_worker(client: Client, resources: ActivityResources, settings: Settings) -> Worker:
    return Worker(
        client,
        task_queue=settings.task_queue,
        workflows=WORKFLOWS,
        workflow_runner=WORKFLOW_RUNNER,
        activities=build_activities(resources),
        interceptors=interceptors_for(settings),
        graceful_shutdown_timeout=GRACEFUL_SHUTDOWN,
    )


def _runtime(settings: Settings) -> Runtime | None:
    if settings.worker_metrics_port is None:
        return None
    return Runtime(
        telemetry=TelemetryConfig(
            metrics=PrometheusConfig(bind_address=f"{settings.worker_metrics_host}:{settings.worker_metrics_port}")
        )
    )


async def main() -> None:
    settings = get_settings()
    configure_logging("worker")
    runtime = _runtime(settings)
    client = await Client.connect(settings.temporal_address, namespace=settings.temporal_namespace, runtime=runtime)
    await ensure_reconciler_schedule(client, settings.task_queue)
    resources = ActivityResources.create(settings, client)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    worker = build_worker(client, resources, settings)
    logger.info("worker polling task queue %s", settings.task_queue)
    try:
        async with worker:
            await stop.wait()
            logger.info("shutting down: letting running activities finish or heartbeat")
    finally:
        await resources.engine.dispose()
    logger.info("worker stopped")


if __name__ == "__main__":
    asyncio.run(main())
