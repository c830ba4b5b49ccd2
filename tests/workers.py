"""The suite's one way to run a worker inside the test process: as worker.py builds it, on the queues the given
settings name, optionally with FAULT_INJECTION."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta

from temporalio.client import Client

from activities.resources import ActivityResources
from lifecycle.db.engine import make_engine
from lifecycle.sealing import KeyRing, publish_at_start
from lifecycle.settings import Settings
from worker import LifecycleWorkers, build_worker


@contextlib.asynccontextmanager
async def own_worker(settings: Settings, client: Client, faults: str | None = None) -> AsyncIterator[LifecycleWorkers]:
    """A real worker polling both queues of `settings` (see own_queue), optionally with FAULT_INJECTION rules.

    It makes its version current as it starts (the session's settings turn WORKER_MAKE_CURRENT on), so runs
    started on its queues reach it; the time-skipping server has no deployments and dispatches to it anyway.
    It stops at once: an activity still running is cancelled and retried by the next worker a test starts (they
    are idempotent), where worker.py's graceful shutdown would let a step held by a `delay` fault run on for 30 s.
    """
    own = settings.model_copy(update={"fault_injection": faults})
    resources = ActivityResources.create(own, client)
    try:
        async with build_worker(client, resources, own, graceful_shutdown=timedelta(0)) as running:
            yield running
    finally:
        await resources.close()


async def publish_sealing_key(settings: Settings) -> None:
    """What a worker's start does first with the sealing key (lifecycle/sealing.py): the API stores processors'
    secrets and site servers' URLs only once a worker has published it, and many tests register them with no worker
    of `settings` running yet. Idempotent: the session's workers, sharing its data directory, hold the same key."""
    engine = make_engine(settings.database_url, pool_size=1, max_overflow=0)
    try:
        await publish_at_start(engine, KeyRing(settings))
    finally:
        await engine.dispose()


def own_queue(settings: Settings, queue: str | None = None) -> Settings:
    """Settings whose deletions and sites both go to `queue` (by default a new one): a queue nobody polls until
    own_worker starts on it, so runs started there wait for the test."""
    queue = queue or f"own-{uuid.uuid4().hex[:8]}"
    return settings.model_copy(update={"task_queue": queue, "site_task_queue": queue})
