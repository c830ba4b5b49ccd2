"""`python -m devstack record-histories`: record the histories the replay test replays.

Starts its own PostgreSQL, SMTP sink, Temporal dev server and in-process worker, runs the scenarios of
devstack.history_scenarios, and exports each run with `temporal workflow show --output json` (the format
an operator would attach to a bug report) into tests/replay/histories/<WorkflowType>-<scenario>.json.
"""

from __future__ import annotations

import asyncio
import subprocess
import tempfile
from pathlib import Path

import httpx
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from activities.resources import ActivityResources
from api.app import create_app
from devstack.binaries import temporal_cli
from devstack.history_scenarios import FAULTS, FAULTY, HAPPY, Context, Scenario
from devstack.ports import free_port
from devstack.postgres import PostgresServer
from devstack.smtp_sink import SmtpSink
from devstack.temporal_server import DEV_SERVER_TUNING
from lifecycle import search_attributes
from lifecycle.migrate import upgrade_async
from lifecycle.settings import Settings
from worker import build_worker

HISTORIES = Path(__file__).resolve().parent.parent / "tests" / "replay" / "histories"
ADMIN = "recorder-admin-token"
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
    with tempfile.TemporaryDirectory(prefix="record-histories-") as scratch:
        root = Path(scratch)
        postgres = PostgresServer(root / "postgres", free_port(), durable=False)
        postgres.start()
        mail = SmtpSink(root / "mail", free_port())
        mail.start()
        env = await WorkflowEnvironment.start_local(
            dev_server_existing_path=temporal_cli(),
            search_attributes=search_attributes.ALL,
            dev_server_extra_args=DEV_SERVER_TUNING,
        )
        try:
            postgres.create_database("lifecycle")
            address = env.client.service_client.config.target_host
            settings = Settings(
                data_dir=root / "data",
                database_url=postgres.url("lifecycle"),
                temporal_address=address,
                task_queue="record-histories",
                admin_token=ADMIN,
                smtp_port=mail.port,
                mail_dir=mail.directory,
            )
            await upgrade_async(settings.database_url)
            await _record_all(env.client, address, settings, out)
        finally:
            await env.shutdown()
            postgres.stop()
            mail.stop()


async def _record_all(client: Client, address: str, settings: Settings, out: Path) -> None:
    app = create_app(settings, temporal_client=client)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://recorder") as api,
    ):

        async def reset(workflow_id: str) -> None:
            await _reset(client, address, workflow_id)

        ctx = Context(client, api, settings, {"Authorization": f"Bearer {ADMIN}"}, reset)
        # One queue, two phases: the same API starts runs that a clean, then a faulty, worker picks up.
        for faults, scenarios in ((None, HAPPY), (FAULTS, FAULTY)):
            phase = settings.model_copy(update={"fault_injection": faults})
            resources = ActivityResources.create(phase, client)
            try:
                async with build_worker(client, resources, phase):
                    await _run(ctx, address, scenarios, out)
            finally:
                await resources.engine.dispose()
