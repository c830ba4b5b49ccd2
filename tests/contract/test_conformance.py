"""The conformance kit (lifecycle/deletion/conformance) against real services through a real Temporal dev server,
PostgreSQL and SeaweedFS: it passes against each of the project's services and the search index example, and
names the promise each of two deliberately broken services breaks (tests/contract/conformance_services.py).

The kit runs in the test's process against the services, each a worker there on a queue of its own; once as the
command a service's team runs, `python -m lifecycle.deletion.conformance --nexus-endpoint`, against the search index
in a namespace of its own behind a Nexus endpoint, with the index's own seed command.
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from temporalio.api.common.v1 import Payload
from temporalio.client import Client
from temporalio.worker import Worker

from devstack.postgres import PostgresServer
from devstack.search_team import SERVICE_NAMESPACE, create_nexus_endpoint
from devstack.seaweedfs import SeaweedServer
from examples.search_index.__main__ import SearchIndexService
from examples.search_index.store import SearchIndex
from lifecycle.data_converter import DATA_CONVERTER
from lifecycle.deletion.conformance.__main__ import main as conformance_command
from lifecycle.deletion.conformance.report import Outcome, Result, line
from lifecycle.deletion.conformance.run import run_checks
from lifecycle.deletion.conformance.seeding import CommandSeeder, Seeder
from lifecycle.deletion.conformance.transport import task_queue_transport
from lifecycle.deletion.conformance.wire import AnswerUnreadable, decode, encode
from lifecycle.deletion.nexus_handler import OPERATION_WORKFLOWS, DeletionNexusHandler
from lifecycle.deletion.v1.service_pb2 import DeleteResponse
from lifecycle.object_store import ObjectStore
from lifecycle.settings import Settings
from services.catalog import SERVICES
from services.runtime.definition import ServiceDefinition
from services.runtime.worker import opened
from tests.conftest import object_store_settings
from tests.contract.conformance_services import IgnoresMaxRows, MemoryService, RunningTotal, ServiceSeeder
from tests.deletion.test_typescript_service import node, typescript_build  # noqa: F401 (a fixture)
from tests.eventually import eventually
from tests.processes import PROJECT_ROOT, ChildProcess, run_command

CHECKS = {
    "never-held",
    "unknown-fields",
    "slices",
    "max-rows",
    "counts",
    "retry",
    "interrupted",
    "rows-per-second",
    "max-duration",
    "export",
    "export-object",
    "batch-rows",
    "export-heartbeat",
}
NOT_CHECKABLE = {"batch-rows", "export-heartbeat"}


@pytest_asyncio.fixture
async def objects(seaweedfs: SeaweedServer) -> AsyncIterator[ObjectStore]:
    store = ObjectStore(Settings(**object_store_settings(seaweedfs)))
    try:
        yield store
    finally:
        await store.close()


async def kit_against(
    client: Client, activities: Sequence[Callable[..., Any]], seeder: Seeder, objects: ObjectStore
) -> dict[str, Result]:
    """The kit's results, by check, against a worker of `activities` on a queue of its own."""
    queue = f"conformance-service-{uuid.uuid4().hex[:8]}"
    async with (
        Worker(client, task_queue=queue, activities=activities),
        task_queue_transport(client, queue) as transport,
    ):
        return {result.check: result async for result in run_checks(transport, seeder, objects)}


def outcomes(results: dict[str, Result]) -> dict[str, set[str]]:
    """The names of the checks, by outcome."""
    by_outcome: dict[str, set[str]] = {outcome: set() for outcome in Outcome}
    for result in results.values():
        by_outcome[result.outcome].add(result.check)
    return by_outcome


def report(results: dict[str, Result]) -> str:
    return "\n".join(line(result) for result in results.values())


@pytest.mark.long
@pytest.mark.parametrize("definition", SERVICES, ids=lambda definition: definition.name)
async def test_the_kit_passes_against_each_of_the_projects_services(
    postgres_server: PostgresServer, temporal_client: Client, objects: ObjectStore, definition: ServiceDefinition
) -> None:
    url = postgres_server.url(f"conformance_{definition.name}")
    async with opened(definition, objects.settings, url) as (service, _):
        results = await kit_against(
            temporal_client, service.activities, ServiceSeeder(definition, url, objects), objects
        )
    assert set(results) == CHECKS
    assert outcomes(results)[Outcome.FAIL] == set(), report(results)
    assert outcomes(results)[Outcome.SKIP] == NOT_CHECKABLE, report(results)


@pytest.mark.parametrize(
    ("broken", "breaks"),
    [(RunningTotal, {"counts", "retry"}), (IgnoresMaxRows, {"max-rows"})],
    ids=["counts-twice", "ignores-max-rows"],
)
async def test_the_kit_names_the_promise_a_broken_service_breaks(
    temporal_client: Client, objects: ObjectStore, broken: type[MemoryService], breaks: set[str]
) -> None:
    service = broken(objects)
    results = await kit_against(temporal_client, service.activities, service, objects)
    assert outcomes(results)[Outcome.FAIL] == breaks, report(results)
    assert outcomes(results)[Outcome.PASS] == CHECKS - NOT_CHECKABLE - breaks, report(results)


def s3_environment(seaweedfs: SeaweedServer) -> dict[str, str]:
    """The S3_* variables of the session's object store, which the examples write their export parts to."""
    return {
        "S3_ENDPOINT_URL": seaweedfs.endpoint_url,
        "S3_BUCKET": seaweedfs.bucket,
        "S3_ACCESS_KEY_ID": seaweedfs.access_key_id,
        "S3_SECRET_ACCESS_KEY": seaweedfs.secret_access_key,
    }


@pytest.mark.long
async def test_the_kit_passes_against_the_typescript_example(
    temporal_client: Client,
    seaweedfs: SeaweedServer,
    objects: ObjectStore,
    typescript_build: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """Seeded by the example's own `seed` command, its worker a Node process of its own."""
    queue = f"search-index-ts-{uuid.uuid4().hex[:8]}"
    store = tmp_path / "store"
    # The build lives outside the project: Node finds the packages `make install` put in node_modules.
    packages = f"NODE_PATH={PROJECT_ROOT / 'node_modules'}"
    main = [node(), str(typescript_build / "main.js")]
    serve = ["serve", "--address", temporal_client.service_client.config.target_host, "--task-queue", queue]
    worker = ChildProcess(
        [*main, *serve, "--store", str(store)],
        {**os.environ, packages.split("=")[0]: packages.split("=")[1], **s3_environment(seaweedfs)},
        tmp_path / "search-index-ts.log",
    )
    seed = f"env {packages} {' '.join(main)} seed --store {store} --bot {{id}} --account {{account}} --entries {{rows}}"
    worker.start()
    try:
        await eventually(lambda: _serving(worker), "the example's worker polls its queue")
        async with task_queue_transport(temporal_client, queue) as transport:
            results = {result.check: result async for result in run_checks(transport, CommandSeeder(seed), objects)}
    finally:
        worker.terminate()
    assert outcomes(results)[Outcome.FAIL] == set(), report(results)
    assert outcomes(results)[Outcome.PASS] == CHECKS - NOT_CHECKABLE, report(results)


async def _serving(process: ChildProcess) -> bool:
    return "serving" in process.log()


@pytest.mark.long
async def test_the_command_checks_the_search_index_behind_its_endpoint_with_its_own_seed(
    temporal_client: Client, seaweedfs: SeaweedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As a service's team runs it against a service in a namespace of its own: Temporal from the environment, the
    gateway's namespace, the service reached through its Nexus endpoint (which an operator created with the CLI),
    subjects seeded by the team's own command, the export part read back from the object store the S3_* variables
    name."""
    for name, value in s3_environment(seaweedfs).items():
        monkeypatch.setenv(name, value)  # the index's worker, here, writes its export parts there
    store = tmp_path / "index"
    service = SearchIndexService(SearchIndex(store), "search-index")
    suffix = uuid.uuid4().hex[:8]
    queue, endpoint = f"search-index-{suffix}", f"search-index-{suffix}"
    address = temporal_client.service_client.config.target_host
    await asyncio.to_thread(create_nexus_endpoint, address, endpoint, SERVICE_NAMESPACE, queue)
    team_client = await Client.connect(address, namespace=SERVICE_NAMESPACE, data_converter=DATA_CONVERTER)
    seed = f"{sys.executable} -m examples.search_index.seed --store {store} --bot {{id}} --rows {{rows}}"
    command = [sys.executable, "-m", "lifecycle.deletion.conformance", "--nexus-endpoint", endpoint, "--seed", seed]
    environment = {**os.environ, "TEMPORAL_ADDRESS": address}
    async with Worker(
        team_client,
        task_queue=queue,
        activities=[service.delete_subject_data, service.verify_subject_erased, service.export_subject_data],
        workflows=OPERATION_WORKFLOWS,
        nexus_service_handlers=[DeletionNexusHandler(service.verify_subject_erased)],
    ):
        # In a thread: the index's worker answers the command's calls on this loop meanwhile.
        ran = await asyncio.to_thread(
            run_command, [*command, "--read-exports"], environment, tmp_path / "kit", timeout=120
        )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    lines = ran.stdout.splitlines()
    assert (
        lines[0] == f"lifecycle.deletion.v1 conformance of Nexus endpoint {endpoint!r}, called from namespace 'default'"
    )
    checked = {parts[1]: parts[0] for parts in (line.split() for line in lines[1:-1])}
    assert checked == {check: "skip" if check in NOT_CHECKABLE else "pass" for check in CHECKS}, ran.stdout
    passing = len(CHECKS - NOT_CHECKABLE)
    assert lines[-1] == f"{len(CHECKS)} checks: {passing} passed, 0 failed, 2 not checkable from outside"


@pytest.mark.parametrize("where", [[], ["--task-queue", "q", "--nexus-endpoint", "e"]], ids=["neither", "both"])
def test_the_command_is_told_either_a_task_queue_or_an_endpoint(
    where: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        conformance_command([*where, "--seed", "true"])
    assert exited.value.code == 2
    usage = capsys.readouterr().err
    assert "--task-queue" in usage and "--nexus-endpoint" in usage, usage


def test_the_kit_reads_an_answer_with_a_field_it_does_not_know() -> None:
    answer = encode(DeleteResponse(rows_deleted=3, cursor="7", done=True), with_unknown_field=True)
    assert decode(answer, DeleteResponse) == DeleteResponse(rows_deleted=3, cursor="7", done=True)


def test_an_answer_not_encoded_as_the_contract_says_is_refused() -> None:
    binary = Payload(
        metadata={"encoding": b"binary/protobuf", "messageType": b"lifecycle.deletion.v1.DeleteResponse"},
        data=DeleteResponse(rows_deleted=3).SerializeToString(),
    )
    with pytest.raises(AnswerUnreadable, match="json/protobuf"):
        decode(binary, DeleteResponse)
