"""Real servers for the suite: PostgreSQL, a Temporal dev server, SeaweedFS, an SMTP sink; all on free loopback
ports."""

from __future__ import annotations

import atexit
import gc
import os
import subprocess
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
from fastapi import FastAPI
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from api.app import create_app
from devstack.binaries import temporal_cli, temporal_test_server
from devstack.ports import free_port
from devstack.postgres import PostgresServer
from devstack.search_team import DEV_SERVER_NAMESPACE_FLAGS
from devstack.seaweedfs import SeaweedServer
from devstack.smtp_sink import SmtpSink
from devstack.temporal_server import DEV_SERVER_TUNING
from lifecycle import search_attributes
from lifecycle.data_converter import DATA_CONVERTER
from lifecycle.migrate import upgrade_async
from lifecycle.settings import Settings
from lifecycle.worker_deployment import code_build_id
from services.catalog import SERVICES
from tests.eventually import eventually
from tests.processes import ChildProcess, service_processes
from tests.workers import own_worker, publish_sealing_key
from worker import LifecycleWorkers

pytest_plugins = ["tests.hangs"]

_OWN_BASETEMP = pytest.StashKey[str]()
# Documents per bot for the tests that delete many rows to exercise something else than documents (devstack.seed).
FEW_DOCUMENTS = 50
ADMIN_TOKEN = "test-admin-token-at-least-32-bytes-long"
EXPORT_SIGNING_KEY = "test-export-signing-key-of-32-bytes-or-more"


@pytest.fixture(scope="session")
def postgres_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PostgresServer]:
    server = PostgresServer(tmp_path_factory.mktemp("postgres"), free_port(), durable=False)
    server.start()
    yield server
    server.stop()


@pytest_asyncio.fixture(scope="session")
async def database_url(postgres_server: PostgresServer) -> str:
    postgres_server.create_database("lifecycle_test")
    url = postgres_server.url("lifecycle_test")
    await upgrade_async(url)
    return url


@pytest_asyncio.fixture(scope="session")
async def temporal_env() -> AsyncIterator[WorkflowEnvironment]:
    env = await WorkflowEnvironment.start_local(
        port=free_port(),  # the SDK's own pick is an ephemeral port, which a client's connection may take first
        dev_server_existing_path=temporal_cli(),
        search_attributes=search_attributes.ALL,
        # A namespace of a service's team besides the gateway's, for the services that join through Nexus.
        dev_server_extra_args=["--ui-disable-news-fetch", *DEV_SERVER_TUNING, *DEV_SERVER_NAMESPACE_FLAGS],
        data_converter=DATA_CONVERTER,
    )
    yield env
    await env.shutdown()


async def start_time_skipping() -> WorkflowEnvironment:
    """The time-skipping test server, with the custom search attributes the workflows upsert added directly: it
    lacks ListSearchAttributes, so `search_attributes.register` cannot run there."""
    env = await WorkflowEnvironment.start_time_skipping(
        port=free_port(), test_server_existing_path=temporal_test_server(), data_converter=DATA_CONVERTER
    )
    await env.client.operator_service.add_search_attributes(
        AddSearchAttributesRequest(
            namespace=env.client.namespace,
            search_attributes={key.name: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD for key in search_attributes.ALL},
        )
    )
    return env


@pytest_asyncio.fixture(scope="session")
async def time_skipping_env() -> AsyncIterator[WorkflowEnvironment]:
    """One time-skipping server for the session's tests: each uses queues and workflow ids of its own, and none
    depends on where the clock starts (it only moves forward).

    A test that closes a run while one of its activities still runs needs a server of its own (start_time_skipping):
    the activity's cancellation then reaches a closed run, and the server never releases the time lock the activity
    took, so every later test would wait out its timers and backoffs in real time.
    """
    env = await start_time_skipping()
    yield env
    await env.shutdown()


@pytest.fixture(scope="session")
def temporal_client(temporal_env: WorkflowEnvironment) -> Client:
    return temporal_env.client


@pytest.fixture(scope="session")
def smtp_sink(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SmtpSink]:
    sink = SmtpSink(tmp_path_factory.mktemp("mail"), free_port())
    sink.start()
    yield sink
    sink.stop()


@pytest.fixture(scope="session")
def seaweedfs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedServer]:
    """The object store of the session's tests. A test that kills it starts one of its own."""
    server = SeaweedServer(tmp_path_factory.mktemp("seaweedfs"))
    server.start()
    yield server
    server.stop()


def object_store_settings(server: SeaweedServer) -> dict[str, Any]:
    """The settings that point the app at `server`."""
    return {
        "s3_endpoint_url": server.endpoint_url,
        "s3_bucket": server.bucket,
        "s3_access_key_id": server.access_key_id,
        "s3_secret_access_key": server.secret_access_key,
    }


@pytest.fixture(scope="session")
def settings(
    tmp_path_factory: pytest.TempPathFactory,
    database_url: str,
    temporal_client: Client,
    smtp_sink: SmtpSink,
    seaweedfs: SeaweedServer,
) -> Settings:
    data_dir = tmp_path_factory.mktemp("data")
    return Settings(
        data_dir=data_dir,
        database_url=database_url,
        temporal_address=temporal_client.service_client.config.target_host,
        task_queue=f"test-{uuid.uuid4().hex[:8]}",
        site_task_queue=f"test-sites-{uuid.uuid4().hex[:8]}",
        smtp_port=smtp_sink.port,
        mail_dir=smtp_sink.directory,
        admin_token=ADMIN_TOKEN,
        # These tests follow deletions in the background (202); tests/deletion/test_inline_answer.py turns the
        # inline answer on for its own app.
        deletion_inline_wait=0,
        # A test registers the services again one right after another (tests/deletion/test_empty_registry.py): a
        # deletion that waited for them needs less time to settle than on a deployment, whose services start apart.
        deletion_registry_settle_seconds=5,
        export_signing_key=EXPORT_SIGNING_KEY,
        # Every test worker is versioned (the SDK requires it of workflow types that declare a versioning
        # behaviour) and makes its version current as it starts, or no run would reach it (docs/versioning.md).
        worker_make_current=True,
        # One deployment for every worker of the session: they all run this checkout's code, so they are one
        # version, and a worker on a queue of its own joins it, which costs the dev server less than a deployment's
        # system workflows for each new worker. A test that makes another version current does so on a server of
        # its own (the deploy drill).
        worker_deployment=f"tests-{uuid.uuid4().hex[:8]}",
        # The build id the code gives (lifecycle/worker_deployment.py), worked out once here rather than by each
        # worker process the tests start, which would read and parse about 100 modules for it. The drills,
        # `make run`'s test and tests/test_worker_deployment.py still have workers work it out.
        worker_build_id=code_build_id(),
        # Processors' erasure requests (tests/deletion/test_processors.py): retried within a second, each attempt
        # given a second, and an operator alerted after a few seconds, so a processor down for a while costs the
        # tests seconds, not the hours the defaults allow.
        processor_retry_initial=timedelta(milliseconds=200),
        processor_retry_max=timedelta(seconds=1),
        processor_request_timeout=timedelta(seconds=1),
        processor_alert_after=timedelta(seconds=3),
        # The tests' processors, webhooks and site-database servers listen on loopback (lifecycle/outbound.py).
        outbound_allow_loopback=True,
        **object_store_settings(seaweedfs),
    )


@dataclass(frozen=True)
class ContractServices:
    """The project's own services (services/catalog.py), each a worker process of its own polling its own queue,
    with its own database on the session's server, registered in the session's registry."""

    queues: dict[str, str]
    processes: dict[str, ChildProcess]


@pytest_asyncio.fixture(scope="session")
async def contract_services(
    settings: Settings, app: FastAPI, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[ContractServices]:
    """Started once per session (per xdist worker), as `make run` starts them (`python -m services.<name>`), and
    registered through the API as they would register themselves; registry_left_as_found leaves them be."""
    started = service_processes(settings, tmp_path_factory.mktemp("services"), uuid.uuid4().hex[:8])
    processes = {name: process for name, (process, _) in started.items()}
    queues = {name: queue for name, (_, queue) in started.items()}
    for process in processes.values():
        process.start()
    try:

        async def serving() -> bool:
            return all("serving" in process.log() for process in processes.values())

        await eventually(serving, "every service's worker polls its queue")
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://testserver") as api:
            for name, queue in queues.items():
                answer = await api.put(
                    f"/deletion-services/{name}",
                    json={"task_queue": queue, "contract": "lifecycle.deletion.v1"},
                    headers=ADMIN_HEADERS,
                )
                assert answer.status_code in (200, 201), answer.text
        yield ContractServices(queues, processes)
    finally:
        for process in processes.values():
            if process.process is not None and process.process.poll() is None:
                process.terminate()


@pytest_asyncio.fixture(scope="session")
async def worker(
    settings: Settings, temporal_client: Client, contract_services: ContractServices
) -> AsyncIterator[LifecycleWorkers]:
    """A real worker on the session's task queues, polling the dev server for the whole session; the services it
    deletes from run beside it (contract_services)."""
    async with own_worker(settings, temporal_client) as running:
        yield running


@pytest_asyncio.fixture(scope="session")
async def app(settings: Settings, temporal_client: Client) -> AsyncIterator[FastAPI]:
    await publish_sealing_key(settings)
    application = create_app(settings, temporal_client=temporal_client)
    async with application.router.lifespan_context(application):
        yield application


@pytest_asyncio.fixture
async def api(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
        yield client


@pytest_asyncio.fixture
async def registry_left_as_found(settings: Settings) -> AsyncIterator[None]:
    """Retires every deletion service a test registered, once it is done; the project's own (contract_services)
    stay.

    Every bot deletion calls every registered service and waits for it without end, which is the point; so a
    service left registered in the session's database, on a queue nobody polls, would hold every later deletion
    of the session open. Modules that register services use this fixture.
    """
    yield
    engine = create_async_engine(settings.database_url)
    try:
        async with engine.begin() as connection:
            await connection.execute(
                text("UPDATE deletion_services SET retired_at = now() WHERE retired_at IS NULL AND name <> ALL(:kept)"),
                {"kept": [service.name for service in SERVICES]},
            )
    finally:
        await engine.dispose()


@dataclass(frozen=True)
class ApiAccount:
    id: str
    name: str
    email: str
    api_key: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"}


ADMIN_HEADERS = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


@pytest_asyncio.fixture
async def account(api: httpx.AsyncClient) -> ApiAccount:
    suffix = uuid.uuid4().hex[:8]
    response = await api.post(
        "/accounts",
        json={"name": f"Test {suffix}", "email": f"owner-{suffix}@example.com"},
        headers=ADMIN_HEADERS,
    )
    assert response.status_code == 201, response.text
    body = response.json()
    return ApiAccount(id=body["id"], name=body["name"], email=body["email"], api_key=body["api_key"])


@pytest.fixture(scope="session")
def project_root() -> Path:
    return Path(__file__).resolve().parent.parent


# The fault drills in two groups, each run one drill at a time on one xdist worker, the two side by side. A drill
# kills, stops or floods servers of its own: each worker process has its own drill stack (tests/drills/conftest.py),
# so drills of different groups break nothing of each other's. The groups take about as long as each other.
DRILL_GROUPS = dict.fromkeys(
    ["test_chaos.py", "test_postgres_outage_api.py", "test_worker_killed.py", "test_deploy.py"], "drills-a"
)
OTHER_DRILLS = "drills-b"
# The limits are hang bounds, some 3x the slowest runs of the drills and the long tests (`make run`'s restart,
# schemathesis) on a slow day; the default, 150 s (pyproject.toml), holds for the rest. An explicit
# `pytest.mark.timeout` on a test wins.
DRILL_TIMEOUT = 600
LONG_TIMEOUT = 400


# Left out of the edit-test loop (`pytest -m "not slow"`, docs/testing.md) with the drills and the long tests: the
# browser's, and those that kill, stop or freeze processes.
SLOW_FOLDERS = ("tests/browser/",)


def drill_group(nodeid: str) -> str | None:
    if not nodeid.startswith("tests/drills/"):
        return None
    return DRILL_GROUPS.get(nodeid.split("::")[0].rsplit("/", 1)[-1], OTHER_DRILLS)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """A temporary root of this run's own, where no other pytest run takes PostgreSQL's access away.

    As root, PostgreSQL runs as its service user, which must traverse the folders above its data directory.
    Every pytest session that starts resets /tmp/pytest-of-root to mode 0700, so a second run on the machine (another
    checkout's) made this run's next initdb fail. xdist's workers inherit the root from the controller.
    """
    if config.option.basetemp is None and not hasattr(config, "workerinput"):
        config.option.basetemp = config.stash[_OWN_BASETEMP] = tempfile.mkdtemp(prefix="pytest-lifecycle-")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A passing run leaves nothing in /tmp; a failing one keeps its servers' logs and data to look at.

    A full run leaves some 3 GB in about 70,000 files (each worker's PostgreSQL holds the sites' and the services'
    databases), and removing them took 4 to 20 s: a process of its own removes them while the run ends.
    """
    own = session.config.stash.get(_OWN_BASETEMP, None)
    if own is not None and exitstatus == 0:
        subprocess.Popen(
            ["rm", "-rf", "--", own], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """An xdist worker has sent its last report by now, and the run waits for its process to exit: skip the
    interpreter's own shutdown (freeing every object, dropping Temporal's runtime), which took seconds."""
    if hasattr(config, "workerinput"):
        atexit.register(os._exit, 0)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Everything but the drills is spread over the xdist workers, the long tests first. The marks go on first:
    xdist's own hook reads them to name the group."""
    for item in items:
        group = drill_group(item.nodeid)
        if item.get_closest_marker("alone") is not None and group is None:
            # `make test` runs the tests marked `alone` by collecting tests/drills/ only.
            raise pytest.UsageError(f"{item.nodeid} is marked alone outside tests/drills/")
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
        if group is not None or item.nodeid.startswith(SLOW_FOLDERS) or item.get_closest_marker("long") is not None:
            item.add_marker(pytest.mark.slow)
        if item.get_closest_marker("timeout") is None:
            if group is not None:
                item.add_marker(pytest.mark.timeout(DRILL_TIMEOUT))
            elif item.get_closest_marker("long") is not None:
                item.add_marker(pytest.mark.timeout(LONG_TIMEOUT))
    # xdist hands the tests out in this order: a long test begun last would leave one worker busy while the
    # others have finished, so the long ones go first.
    items.sort(key=lambda item: item.get_closest_marker("long") is None)


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection imported (every test module, pytest, the libraries) lives as long as the run: out of the
    cyclic collector's sight, each full collection no longer walks it. On tests/deletion with two workers, the
    full collections took 1.1 s and 0.7 s of CPU instead of 1.9 s and 1.2 s."""
    gc.freeze()


def pytest_xdist_node_collection_finished(node: Any, ids: list[str]) -> None:
    """Refuse to run the drills ungrouped. xdist names a test's group in the node id a worker reports, and with
    pytest 9.2 that stopped taking effect without a word (pytest-dev/pytest-xdist#1386): the drills ran two at a
    time."""
    if node.config.getvalue("dist") != "loadgroup":
        return
    ungrouped = [nodeid for nodeid in ids if (group := drill_group(nodeid)) and not nodeid.endswith(f"@{group}")]
    if ungrouped:
        pytest.exit(f"xdist did not put the drills in their groups, e.g. {ungrouped[0]}", returncode=3)
