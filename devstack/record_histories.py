"""`python -m devstack record-histories`: record the histories the replay test replays.

Starts its own PostgreSQL, SMTP sink, Temporal dev server and in-process worker, runs the scenarios of
devstack.history_scenarios, and exports each run with `temporal workflow show --output json` (the format
an operator would attach to a bug report) into tests/replay/histories/<WorkflowType>-<scenario>.json.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
from temporalio.client import Client
from temporalio.worker import Worker

from activities.fault_injection import FaultInjectionInterceptor
from activities.resources import ActivityResources
from api.app import create_app
from devstack.binaries import temporal_cli
from devstack.history_scenarios import FAULTS, FAULTY, HAPPY, SERVICE_FAULTS, Context, Scenario
from devstack.throwaway import throwaway_stack
from lifecycle.settings import Settings
from services.catalog import SERVICES
from services.runtime.database import service_database_url
from services.runtime.worker import CONTRACT, opened
from worker import build_worker

HISTORIES = Path(__file__).resolve().parent.parent / "tests" / "replay" / "histories"
ADMIN = "recorder-admin-token-at-least-32-bytes-long"
# A scenario that has not finished by then is stuck; better to fail than hang.
SCENARIO_TIMEOUT_SECONDS = 180


def _cli(address: str, *args: str) -> str:
    command = [temporal_cli(), *args, "--address", address, "--namespace", "default"]
    return subprocess.run(command, capture_output=True, text=True, check=True, timeout=60).stdout


async def _reset(client: Client, address: str, workflow_id: str) -> None:
    handle = client.get_workflow_handle(workflow_id)
    first = (await handle.describe()).run_id
    await asyncio.to_thread(
        _cli, address, "workflow", "reset", "--workflow-id", workflow_id,
        "--type", "FirstWorkflowTask", "--reason", "recorded operator reset",
    )  # fmt: skip
    latest = client.get_workflow_handle(workflow_id)
    assert (await latest.describe()).run_id != first
    await latest.result()


async def _export(client: Client, address: str, scenario: str, workflow_id: str, out: Path) -> Path:
    workflow_type = (await client.get_workflow_handle(workflow_id).describe()).workflow_type
    path = out / f"{workflow_type}-{scenario}.json"
    history = await asyncio.to_thread(
        _cli, address, "workflow", "show", "--workflow-id", workflow_id, "--output", "json"
    )
    path.write_text(history)
    return path


async def _run(ctx: Context, address: str, scenarios: list[tuple[str, Scenario]], out: Path) -> None:
    for name, scenario in scenarios:
        workflow_id = await asyncio.wait_for(scenario(ctx), SCENARIO_TIMEOUT_SECONDS)
        print(f"recorded {await _export(ctx.client, address, name, workflow_id, out)}")


async def record(out: Path = HISTORIES) -> None:
    await asyncio.to_thread(out.mkdir, parents=True, exist_ok=True)
    async with throwaway_stack("record-histories", admin_token=ADMIN) as stack:
        await _record_all(stack.env.client, stack.address, stack.settings, out)


async def _record_all(client: Client, address: str, settings: Settings, out: Path) -> None:
    app = create_app(settings, temporal_client=client)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app),
            base_url="http://recorder",
            # The scenarios step through runs in the background; a small deletion must not end inside its DELETE.
            headers={"Prefer": "respond-async"},
        ) as api,
    ):

        async def reset(workflow_id: str) -> None:
            await _reset(client, address, workflow_id)

        ctx = Context(client, api, settings, {"Authorization": f"Bearer {ADMIN}"}, reset)
        for service in SERVICES:
            registered = await api.put(
                f"/deletion-services/{service.name}",
                json={"task_queue": service.name, "contract": CONTRACT},
                headers=ctx.admin_headers,
            )
            registered.raise_for_status()
        # One queue, two phases: the same API starts runs that a clean, then a faulty, worker picks up; in the
        # faulty one every service fails its deletes for good too.
        for faults, service_faults, scenarios in ((None, None, HAPPY), (FAULTS, SERVICE_FAULTS, FAULTY)):
            phase = settings.model_copy(update={"fault_injection": faults})
            resources = ActivityResources.create(phase, client)
            try:
                async with build_worker(client, resources, phase), _services(client, settings, service_faults):
                    await _run(ctx, address, scenarios, out)
            finally:
                await resources.close()


@contextlib.asynccontextmanager
async def _services(client: Client, settings: Settings, faults: str | None) -> AsyncIterator[None]:
    """The project's services in this process, each over its own database beside the stack's, on its own queue."""
    interceptors = [FaultInjectionInterceptor.from_spec(faults)] if faults else []
    async with contextlib.AsyncExitStack() as stack:
        for definition in SERVICES:
            url = service_database_url(definition.name, beside=settings.database_url)
            service, _ = await stack.enter_async_context(opened(definition, settings, url))
            await stack.enter_async_context(
                Worker(
                    client,
                    task_queue=definition.name,
                    activities=service.activities,
                    interceptors=interceptors,
                )
            )
        yield
