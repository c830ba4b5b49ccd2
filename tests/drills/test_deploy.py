"""Ship new workflow code while runs are in flight: v1 workers, runs of every kind under way, v2 workers whose
workflows would be non-deterministic for v1's histories, a ramp, a promotion, a rollback and v1's retirement,
with the real dev server and the real `temporal` CLI.

Pinned runs finish on v1, long runs move to v2 at their next continue-as-new, new runs start on the current
version, and no run meets a non-determinism error.
"""

from __future__ import annotations

import asyncio
import shlex
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
import pytest_asyncio
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle

from api.app import create_app
from devstack.history_scenarios import Context, _account, _scheduled_account_deletion, _start_bot_deletion
from devstack.ports import free_port
from devstack.seed import seed
from devstack.temporal_server import TemporalDevServer
from lifecycle.data_converter import DATA_CONVERTER
from lifecycle.exports.workflow_types import account_export_id
from lifecycle.settings import Settings
from lifecycle.sites.workflow_types import site_creation_id
from tests.conftest import ADMIN_HEADERS, EXPORT_SIGNING_KEY
from tests.drills import figures
from tests.drills.conftest import DrillStack
from tests.drills.deployment import (
    Deployments,
    nondeterminism_failures,
    run_version,
    runbook,
    started_with_v2_timer,
    v2_code,
)
from tests.eventually import eventually
from tests.processes import PROJECT_ROOT, ChildProcess, service_processes, settings_environment, worker_process
from tests.temporal_cli import TemporalCli

# The server's defaults suit production and would make the drill wait minutes: stopped workers count as
# pollers for 5 minutes (delete-version refuses them), and drainage is checked every 3 minutes.
FAST_DEPLOYMENTS = {
    "matching.PollerHistoryTTL": '"3s"',
    "matching.wv.VersionDrainageStatusRefreshInterval": '"2s"',
    "matching.wv.VersionDrainageStatusVisibilityGracePeriod": '"2s"',
}
# Holds a site creation inside its bootstrap step, and an export inside its writing, on v1 while v2 ships: long
# enough for v2's start, the ramp's probes and the promotion on a loaded machine, after which the drill waits it
# out.
HOLD_ON_V1 = "bootstrap_site=delay:45:1,write_export_parts=delay:45:1"
PAUSED_BOTS = 2
RAMP_PROBES = 12


@pytest.fixture(scope="module")
def deploy_temporal(drill_root: Path) -> Iterator[TemporalDevServer]:
    log = drill_root / "deploy-temporal.log"
    server = TemporalDevServer(None, port=free_port(), ui_port=None, log_path=log, dynamic_config=FAST_DEPLOYMENTS)
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def deploy_services(drill_stack: DrillStack, deploy_temporal: TemporalDevServer) -> Iterator[None]:
    """The services the deletions call, polling this server on the queues the drills' registry names (the
    drill stack's run beside the drills' own server)."""
    log_dir = drill_stack.root / "deploy-services"
    log_dir.mkdir(exist_ok=True)
    settings = drill_stack.settings.model_copy(update={"temporal_address": deploy_temporal.address})
    processes = [process for process, _ in service_processes(settings, log_dir, "drills").values()]
    for process in processes:
        process.start()
    yield
    for process in processes:
        process.terminate()


@pytest_asyncio.fixture
async def deploy(
    drill_stack: DrillStack, deploy_temporal: TemporalDevServer, deploy_services: None
) -> AsyncIterator[Context]:
    queue = f"deploy-{uuid.uuid4().hex[:6]}"
    settings = drill_stack.settings.model_copy(
        update={
            "temporal_address": deploy_temporal.address,
            "task_queue": queue,
            "site_task_queue": f"{queue}-sites",
            # An export is kept for seconds, so that v1 drains within the drill.
            "export_retention": timedelta(seconds=3),
            "export_signing_key": EXPORT_SIGNING_KEY,
        }
    )
    client = await Client.connect(deploy_temporal.address, data_converter=DATA_CONVERTER)
    app = create_app(settings, temporal_client=client)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://drill") as api,
    ):
        yield Context(client, api, settings, ADMIN_HEADERS, reset=_no_reset)


async def _no_reset(workflow_id: str) -> None:
    raise AssertionError("the deploy drill resets nothing")


def _build_id(worker: ChildProcess) -> str:
    for line in worker.log().splitlines():
        if "build id " in line:
            return line.split("build id ", 1)[1].split(",", 1)[0]
    return ""


async def _started(worker: ChildProcess) -> str:
    async def logged() -> bool:
        return bool(_build_id(worker))

    await eventually(logged, "the worker logs its build id")
    return _build_id(worker)


async def _pending_activity(handle: WorkflowHandle, activity: str) -> bool:
    pending = (await handle.describe()).raw_description.pending_activities
    return any(p.activity_type.name == activity for p in pending)


async def _closed(handle: WorkflowHandle) -> bool:
    return (await handle.describe()).status != WorkflowExecutionStatus.RUNNING


async def _first_run_version(client: Client, workflow_id: str) -> str:
    first = (await client.get_workflow_handle(workflow_id).describe()).raw_description
    first_run = first.workflow_execution_info.first_run_id
    return await run_version(client.get_workflow_handle(workflow_id, run_id=first_run))


async def _probe_versions(ctx: Context, count: int) -> list[str]:
    """Start `count` paused bot deletions (cheap: they wait at once), read the version each started on, end them."""
    handles = [await _start_bot_deletion(ctx, str(uuid.uuid4()), str(uuid.uuid4()), paused=True) for _ in range(count)]
    versions = []
    for handle in handles:
        versions.append(await _first_task_version(handle))
        await handle.terminate("deploy drill probe")
    return versions


async def _first_task_version(handle: WorkflowHandle) -> str:
    async def ran() -> bool:
        return bool(await run_version(handle))

    await eventually(ran, f"{handle.id} ran its first workflow task")
    return await run_version(handle)


async def test_deploy_v2_while_runs_are_in_flight(
    deploy: Context, drill_stack: DrillStack, deploy_temporal: TemporalDevServer, tmp_path: Path
) -> None:
    ctx, settings, client = deploy, deploy.settings, deploy.client
    cli = TemporalCli(deploy_temporal.address)
    deployments = Deployments(cli, settings.task_queue)
    root = drill_stack.root
    v1_worker = worker_process(settings, root / f"{settings.task_queue}-v1.log", FAULT_INJECTION=HOLD_ON_V1)
    v1_worker.start()
    # Another checkout of the code, run as `python worker.py` from its own directory; promoted with the CLI.
    v2_env = settings_environment(settings, WORKER_MAKE_CURRENT="false")
    v2_log = root / f"{settings.task_queue}-v2.log"
    v2_worker = ChildProcess([sys.executable, "worker.py"], v2_env, v2_log, cwd=v2_code(tmp_path))
    try:
        v1 = await _started(v1_worker)
        await eventually(lambda: asyncio.to_thread(lambda: deployments.current() == v1), "v1 is current")

        # In flight on v1: paused bot deletions, an account deletion in its grace period, a site creation
        # inside its bootstrap step, an export being written.
        bots = await seed(settings, bots=PAUSED_BOTS, rows=300)
        paused = [await _start_bot_deletion(ctx, str(b), bots.account_id, paused=True) for b in bots.bot_ids]
        graced = await _scheduled_account_deletion(ctx)
        site = await ctx.api.post(
            "/sites", json={"name": "Deploy", "domain": f"deploy-{uuid.uuid4().hex[:8]}.example.com"},
            headers=await _account(ctx),
        )  # fmt: skip
        site.raise_for_status()
        creation = client.get_workflow_handle(site_creation_id(str(site.json()["id"])))
        exported = await seed(settings, bots=1, rows=200)
        requested = await ctx.api.post("/account/exports", headers={"Authorization": f"Bearer {exported.api_key}"})
        requested.raise_for_status()
        export = client.get_workflow_handle(account_export_id(exported.account_id, 1))
        await eventually(lambda: _pending_activity(creation, "bootstrap_site"), "the site creation is in bootstrap")
        await eventually(lambda: _pending_activity(export, "write_export_parts"), "the export is being written")
        pinned = [creation, export]
        long_runs = [*paused, graced]
        for handle in [*pinned, *long_runs]:
            assert await run_version(handle) == v1

        # v2 beside v1; a ramp sends part of the new runs to it, none of the runs in flight.
        v2_worker.start()
        v2 = await _started(v2_worker)
        assert v2 != v1, "a change to the workflow code is a new build id"
        await eventually(lambda: asyncio.to_thread(deployments.polls, v2, 2), "v2 polls both queues")
        await asyncio.to_thread(deployments.ramp, v2, 50)
        ramped = await _probe_versions(ctx, RAMP_PROBES)
        assert set(ramped) == {v1, v2}, f"a 50% ramp sends new runs to both versions: {ramped}"

        # Promote v2.
        await asyncio.to_thread(deployments.set_current, v2)
        promoted_at = time.monotonic()
        assert not await _closed(creation) and not await _closed(export), "the pinned runs were still in flight"
        assert set(await _probe_versions(ctx, 3)) == {v2}, "new runs start on the current version"

        # Long runs move at their next continue-as-new: the bot deletions when resumed, the account deletion
        # when its grace ends.
        for handle in paused:
            await handle.signal("resume")
        await graced.execute_update("expedite", result_type=str)
        for handle in long_runs:
            await asyncio.wait_for(client.get_workflow_handle(handle.id).result(), 120)
        moved = 0
        for handle in long_runs:
            latest = client.get_workflow_handle(handle.id)
            if await _first_run_version(client, handle.id) == v1 and await run_version(latest) == v2:
                assert started_with_v2_timer([e async for e in latest.fetch_history_events()])
                moved += 1
        assert moved == len(long_runs), f"{moved} of {len(long_runs)} long runs moved to v2 at continue-as-new"

        # Pinned runs finish on v1.
        for handle in pinned:
            await asyncio.wait_for(handle.result(), 120)
            assert await run_version(handle) == v1
        await eventually(lambda: asyncio.to_thread(lambda: deployments.open_runs(v1) == 0), "v1 drained")
        drain_seconds = time.monotonic() - promoted_at
        figures.record("deploy drill: v1 drained after v2 became current", drain_seconds, "its last open run closed")
        figures.record_count("deploy drill: runs moved to v2 at continue-as-new", moved, f"of {len(long_runs)}")

        # Roll back to v1 (its workers still run): new runs go to v1 again; then forward to v2 once more.
        await asyncio.to_thread(deployments.set_current, v1)
        assert set(await _probe_versions(ctx, 3)) == {v1}, "after a rollback, new runs start on v1"
        await asyncio.to_thread(deployments.set_current, v2)
        new_bot = await _start_bot_deletion(ctx, str(uuid.uuid4()), str(uuid.uuid4()), paused=False)
        await asyncio.wait_for(new_bot.result(), 120)
        assert await run_version(new_bot) == v2

        # Retire v1: its workers stop, and the version is deleted once the server no longer counts them.
        assert await asyncio.to_thread(deployments.open_runs, v1) == 0
        v1_worker.terminate()
        try:
            await eventually(lambda: asyncio.to_thread(deployments.delete, v1), "v1 is deleted")
        except AssertionError as err:
            raise AssertionError(f"{err}: {deployments.refusal}") from None
        assert await asyncio.to_thread(deployments.versions) == [v2]
        assert await nondeterminism_failures(client, settings.task_queue) == []
    finally:
        v1_worker.kill()
        v2_worker.kill()


class Operator:
    """Types the runbook's commands: `temporal` with the test server's address, the deployment renamed."""

    def __init__(self, cli: TemporalCli, deployment: str, code: Path, settings: Settings, log: Path) -> None:
        self.cli = cli
        self.deployment = deployment
        self.code = code
        self.settings = settings
        self.log = log
        self.build_ids = {"<old>": "", "<new>": ""}
        self.typed: list[str] = []
        self.workers: list[ChildProcess] = []

    def argv(self, command: str) -> list[str]:
        for placeholder, build_id in self.build_ids.items():
            command = command.replace(placeholder, build_id)
        for written in ("--name lifecycle", "--deployment-name lifecycle", '"lifecycle:'):
            command = command.replace(written, written.replace("lifecycle", self.deployment))
        return shlex.split(command)

    def type(self, command: str, *, check: bool = True) -> subprocess.CompletedProcess[str]:
        self.typed.append(command)
        argv = self.argv(command)
        if argv[0] == "temporal":
            return self.cli.run(*argv[1:], check=check)
        if argv[:3] == ["python", "-m", "lifecycle.worker_deployment"]:
            return subprocess.run(
                [sys.executable, *argv[1:]], cwd=self.code, capture_output=True, text=True, check=True
            )
        assignments = dict(arg.split("=", 1) for arg in argv if "=" in arg and not arg.startswith("-"))
        assert argv[len(assignments) :] == ["python", "worker.py"], f"no way to type {command!r}"
        env = settings_environment(self.settings, **assignments)
        worker = ChildProcess([sys.executable, "worker.py"], env, self.log, cwd=self.code)
        worker.start()
        self.workers.append(worker)
        return subprocess.CompletedProcess(argv, 0, "", "")

    async def type_until_accepted(self, command: str) -> str:
        """A command the runbook says to run again (describe-version before the workers poll, delete-version
        while stopped workers still count as pollers)."""

        async def accepted() -> bool:
            return (await asyncio.to_thread(self.type, command, check=False)).returncode == 0

        await eventually(accepted, f"{command} is accepted")
        return self.typed[-1]


async def test_rollout_runbook(deploy: Context, deploy_temporal: TemporalDevServer, tmp_path: Path) -> None:
    """Every command of docs/versioning.md's rollout runbook, as written there, in the order of a rollout."""
    settings = deploy.settings
    steps = runbook(PROJECT_ROOT / "docs" / "versioning.md")
    assert list(steps) == ["Build", "Start the new workers beside the old", "Ramp", "Promote", "Roll back", "Retire"]
    cli = TemporalCli(deploy_temporal.address)
    deployments = Deployments(cli, settings.task_queue)
    old_worker = worker_process(settings, tmp_path / "old.log", WORKER_MAKE_CURRENT="true")
    old_worker.start()
    operator = Operator(cli, settings.task_queue, v2_code(tmp_path / "new"), settings, tmp_path / "new.log")
    try:
        old = await _started(old_worker)
        await eventually(lambda: asyncio.to_thread(lambda: deployments.current() == old), "the old version is current")
        operator.build_ids["<old>"] = old

        build_id, describe = steps["Build"]
        operator.build_ids["<new>"] = new = operator.type(build_id).stdout.strip()
        assert new != old
        assert old in operator.type(describe).stdout

        start, describe_version = steps["Start the new workers beside the old"]
        operator.type(start)
        assert await _started(operator.workers[0]) == new, "the runbook's build id is the one the workers report"
        await operator.type_until_accepted(describe_version)
        await eventually(lambda: asyncio.to_thread(deployments.polls, new, 2), "the new workers poll both queues")

        (ramp,) = steps["Ramp"]
        operator.type(ramp)
        ramping = cli.json("worker", "deployment", "describe", "--name", settings.task_queue)["routingConfig"]
        assert (ramping["rampingVersionBuildID"], ramping["rampingVersionPercentage"]) == (new, 10)

        (promote,) = steps["Promote"]
        operator.type(promote)
        assert deployments.current() == new
        (roll_back,) = steps["Roll back"]
        operator.type(roll_back)
        assert deployments.current() == old
        operator.type(promote)
        assert deployments.current() == new

        count, delete = steps["Retire"]
        assert operator.type(count).stdout.split() == ["Total:", "0"]
        old_worker.terminate()
        await operator.type_until_accepted(delete)
        assert deployments.versions() == [new]
        assert set(operator.typed) == {command for commands in steps.values() for command in commands}
    finally:
        old_worker.kill()
        for worker in operator.workers:
            worker.kill()
