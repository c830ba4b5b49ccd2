"""The worker process exposes the SDK's Prometheus metrics on WORKER_METRICS_PORT."""

from __future__ import annotations

import uuid
from pathlib import Path

import httpx

from devstack.ports import free_port
from lifecycle.settings import Settings
from tests.eventually import eventually
from tests.processes import worker_process


async def test_worker_serves_sdk_metrics(settings: Settings, tmp_path: Path) -> None:
    port = free_port()
    queue = f"metrics-{uuid.uuid4().hex[:8]}"
    worker = worker_process(
        settings,
        tmp_path / "worker.log",
        WORKER_METRICS_PORT=str(port),
        # Queues of its own, both: it takes no work from the suite's worker, and it makes its version current, which
        # on the suite's site queue would route the suite's sites to this worker's deployment after it exits.
        TASK_QUEUE=queue,
        SITE_TASK_QUEUE=queue,
    )
    worker.start()
    try:

        async def sdk_metrics() -> str | None:
            try:
                async with httpx.AsyncClient() as client:
                    body = (await client.get(f"http://127.0.0.1:{port}/metrics", timeout=2)).text
            except httpx.HTTPError:
                return None
            # Polling starts only after the worker connected and registered: its counters show then.
            return body if "temporal_worker_start" in body and "temporal_request" in body else None

        body = await eventually(sdk_metrics, "the worker serves temporal_ metrics")
    finally:
        # Not asserted on here: an assertion in `finally` would replace the body's own failure.
        worker_exit = worker.terminate()
    assert worker_exit == 0, worker.log()[-2000:]
    assert 'task_queue="metrics-' in body
