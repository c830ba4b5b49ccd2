"""Every process on a secured Temporal, configured only through temporalio.envconfig's variables: the API, a
worker and a service run a bot deletion and a site creation through a TLS proxy that requires a client
certificate, and through one that requires an API key; a process without the credential stops at start-up with
a message that names the cause (lifecycle/temporal_client.py). A service team behind a Nexus endpoint holds a key
for its own namespace alone, which the proxy refuses for the gateway's."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client
from temporalio.envconfig import ClientConfig
from temporalio.service import RPCError, RPCStatusCode

from devstack.binaries import temporal_cli
from devstack.postgres import PostgresServer
from devstack.search_team import SERVICE_NAMESPACE
from examples.search_index.store import SearchIndex
from lifecycle.data_converter import DATA_CONVERTER
from lifecycle.migrate import upgrade_async
from lifecycle.settings import Settings
from tests.conftest import ADMIN_HEADERS, ADMIN_TOKEN
from tests.deletion.search_team import RegisteredIndex, create_endpoint, register_by_endpoint
from tests.eventually import eventually
from tests.grpc_proxies import API_KEY, GATEWAY_NAMESPACE, REFUSED, TEAM_API_KEY, GrpcProxies, make_certificates
from tests.processes import ApiProcess, ChildProcess, settings_environment, worker_process

pytestmark = pytest.mark.long

SERVICE = "chat"


@pytest.fixture(scope="module")
def proxies(temporal_client: Client, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GrpcProxies]:
    directory = tmp_path_factory.mktemp("grpc-proxies")
    proxies = GrpcProxies(
        directory, temporal_client.service_client.config.target_host, make_certificates(directory / "certs")
    )
    proxies.start()
    yield proxies
    proxies.stop()


@pytest_asyncio.fixture
async def own_settings(postgres_server: PostgresServer, settings: Settings, tmp_path: Path) -> Settings:
    """A database, queues and data directory of the test's own, so the service registered here is nobody else's;
    no warm pool, whose refill would only add work."""
    name = f"secured_{uuid.uuid4().hex[:8]}"
    await asyncio.to_thread(postgres_server.create_database, name)
    url = postgres_server.url(name)
    await upgrade_async(url)
    engine = create_async_engine(url)
    try:
        async with engine.begin() as conn:
            await conn.execute(text("UPDATE site_db_servers SET pool_target = 0"))
    finally:
        await engine.dispose()
    queue = f"secured-{uuid.uuid4().hex[:8]}"
    return settings.model_copy(
        update={
            "database_url": url,
            "data_dir": tmp_path / "data",
            "exports_dir": tmp_path / "data" / "exports",
            "sites_root": tmp_path / "data" / "sites",
            "task_queue": queue,
            "site_task_queue": f"{queue}-sites",
        }
    )


@pytest_asyncio.fixture
async def started(tmp_path: Path) -> AsyncIterator[list[ChildProcess]]:
    """The processes a test starts, killed at its end whatever happened."""
    processes: list[ChildProcess] = []
    yield processes
    for process in processes:
        process.kill()


def _gateway(
    settings: Settings, secured: dict[str, str], started: list[ChildProcess], tmp_path: Path
) -> tuple[ApiProcess, ChildProcess]:
    """The gateway's API and worker, reaching Temporal with `secured`."""
    api = ApiProcess(settings, tmp_path / "api.log", **secured)
    started.append(api)
    api.start()
    worker = worker_process(settings, tmp_path / "worker.log", **secured)
    started.append(worker)
    worker.start()
    return api, worker


async def _account(http: httpx.AsyncClient) -> dict[str, str]:
    """An account's headers."""
    created = await http.post("/accounts", json={"name": "Ada", "email": "ada@example.com"}, headers=ADMIN_HEADERS)
    assert created.status_code == 201, created.text
    return {"Authorization": f"Bearer {created.json()['api_key']}"}


async def _deleted(http: httpx.AsyncClient, bot: str, account: dict[str, str]) -> Any:
    """Delete the bot and wait for its signed receipt."""
    assert (await http.delete(f"/bots/{bot}", headers=account)).status_code in (200, 202)

    async def receipt() -> Any:
        answer = await http.get(f"/bots/{bot}/deletion/receipt", headers=account)
        return answer.json() if answer.status_code == 200 else None

    return await eventually(receipt, "the bot's deletion is done and signed", within=90)


def _service(settings: Settings, log: Path, **env: str) -> ChildProcess:
    return ChildProcess(
        [sys.executable, "-m", f"services.{SERVICE}"],
        settings_environment(settings, **{f"{SERVICE.upper()}_TASK_QUEUE": f"{settings.task_queue}-{SERVICE}"}, **env),
        log,
    )


@pytest.mark.parametrize("credential", ["mutual TLS", "API key"])
async def test_a_deletion_and_a_site_run_through_a_proxy_that_requires_a_credential(
    credential: str, proxies: GrpcProxies, own_settings: Settings, started: list[ChildProcess], tmp_path: Path
) -> None:
    secured = proxies.mtls_environment() if credential == "mutual TLS" else proxies.api_key_environment()
    api, worker = _gateway(own_settings, secured, started, tmp_path)
    async with httpx.AsyncClient(base_url=api.url, timeout=30) as http:
        # The service holds its own credential, which registers its name and nothing else, and no admin token.
        issued = await http.post(f"/deletion-services/{SERVICE}/credentials", headers=ADMIN_HEADERS)
        assert issued.status_code == 201, issued.text
        service = _service(
            own_settings,
            tmp_path / "service.log",
            DELETION_GATEWAY_URL=api.url,
            DELETION_SERVICE_CREDENTIAL=issued.json()["credential"],
            ADMIN_TOKEN="",
            **secured,
        )
        started.append(service)
        service.start()

        async def registered() -> bool:
            listed = (await http.get("/deletion-services", headers=ADMIN_HEADERS)).json()["services"]
            return SERVICE in {entry["name"] for entry in listed}

        await eventually(registered, f"{SERVICE} registers through the gateway with its own credential", within=60)
        trail = (await http.get("/audit-events", headers=ADMIN_HEADERS)).json()["events"]
        assert (f"service:{SERVICE}", "PUT /deletion-services/{name}") in {(e["actor"], e["action"]) for e in trail}
        account = await _account(http)
        bot = (await http.post("/bots", json={"name": "secured"}, headers=account)).json()["id"]
        site = await http.post(
            "/sites",
            json={"name": "Blog", "tagline": "Hi", "domain": f"{uuid.uuid4().hex[:8]}.example"},
            headers=account,
        )
        assert site.status_code == 202, site.text
        signed = await _deleted(http, bot, account)
        assert SERVICE in signed["receipt"]["services"], signed
        assert signed["receipt"]["complete"] is True, signed

        async def active() -> bool:
            return (await http.get(f"/sites/{site.json()['id']}", headers=account)).json()["status"] == "active"

        await eventually(active, "the site is active", within=90)
    assert "refused" not in worker.log() + service.log() + api.log()


async def test_a_service_team_behind_an_endpoint_holds_a_key_for_its_own_namespace_alone(
    proxies: GrpcProxies,
    temporal_client: Client,
    own_settings: Settings,
    started: list[ChildProcess],
    tmp_path: Path,
) -> None:
    """The gateway with its key, the search index as its own team with the team's key in its namespace, behind an
    endpoint the operator creates on the server itself: a deletion reaches the index, and the team's key is refused
    for the gateway's namespace, by the SDK and by the CLI, and can change no endpoint."""
    api, _ = _gateway(own_settings, proxies.api_key_environment(), started, tmp_path)
    suffix = uuid.uuid4().hex[:8]
    name, queue, endpoint = f"team-{suffix}", f"team-queue-{suffix}", f"team-endpoint-{suffix}"
    team_env = {
        **{key: value for key, value in os.environ.items() if not key.startswith("TEMPORAL_")},
        **proxies.api_key_environment(key=TEAM_API_KEY),
        "TEMPORAL_NAMESPACE": SERVICE_NAMESPACE,
    }
    store = tmp_path / "team-index"
    process = ChildProcess(
        [sys.executable, "-m", "examples.search_index", "--task-queue", queue, "--store", str(store), "--name", name],
        team_env,
        tmp_path / "team.log",
        # An interpreter of its own, so that /proc shows exactly the environment the team's process was given.
        forked=False,
    )
    started.append(process)
    team = RegisteredIndex(name, queue, SearchIndex(store), process, endpoint)
    await create_endpoint(temporal_client, team)
    team.start()
    async with httpx.AsyncClient(base_url=api.url, timeout=30) as http:
        await register_by_endpoint(http, team)
        account = await _account(http)
        bot = (await http.post("/bots", json={"name": "indexed"}, headers=account)).json()["id"]
        team.index.add(bot, entries=7, files=2)
        signed = await _deleted(http, bot, account)
    assert signed["receipt"]["services"][name] == {"rows_deleted": 7, "files_deleted": 2, "remaining": 0}, signed
    assert team.index.count(bot) == (0, 0)

    environment = (await asyncio.to_thread(Path(f"/proc/{process.pid}/environ").read_bytes)).decode().split("\0")
    assert f"TEMPORAL_API_KEY={TEAM_API_KEY}" in environment
    assert f"TEMPORAL_NAMESPACE={SERVICE_NAMESPACE}" in environment
    assert not [variable for variable in environment if API_KEY in variable or ADMIN_TOKEN in variable]
    assert await _answers(team_env, SERVICE_NAMESPACE) is None
    assert await _answers(team_env, GATEWAY_NAMESPACE) == RPCStatusCode.PERMISSION_DENIED
    listed = await _cli(team_env, "workflow", "list", "--limit", "1", "--namespace", GATEWAY_NAMESPACE)
    assert listed.returncode != 0 and REFUSED in listed.stderr, listed
    assert (await _cli(team_env, "workflow", "list", "--limit", "1")).returncode == 0
    created = await _cli(
        team_env,
        *("operator", "nexus", "endpoint", "create", "--name", f"{endpoint}-2"),
        *("--target-namespace", GATEWAY_NAMESPACE, "--target-task-queue", own_settings.task_queue),
    )
    assert created.returncode != 0 and REFUSED in created.stderr, created


async def _answers(env: dict[str, str], namespace: str) -> RPCStatusCode | None:
    """What Temporal answers a process of `env` that describes and lists `namespace`: None, or the refusal."""
    config = ClientConfig.load_client_connect_config(override_env_vars=env | {"TEMPORAL_NAMESPACE": namespace})
    client = await Client.connect(**config, data_converter=DATA_CONVERTER)
    try:
        await client.workflow_service.describe_namespace(DescribeNamespaceRequest(namespace=namespace))
        await client.count_workflows()
    except RPCError as err:
        return err.status
    return None


async def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """The `temporal` CLI as a process of `env` runs it."""
    return await asyncio.to_thread(
        subprocess.run, [temporal_cli(), *args], env=env, capture_output=True, text=True, timeout=60, check=False
    )


@pytest.mark.parametrize("credential", ["mutual TLS", "API key"])
def test_a_process_without_the_credential_stops_at_start_up_naming_the_cause(
    credential: str, proxies: GrpcProxies, own_settings: Settings, started: list[ChildProcess], tmp_path: Path
) -> None:
    bare = (
        proxies.mtls_environment(with_certificate=False)
        if credential == "mutual TLS"
        else proxies.api_key_environment(with_key=False)
    )
    processes = {
        "worker": worker_process(own_settings, tmp_path / "worker.log", **bare),
        "API": ChildProcess(
            [sys.executable, "-m", "api"], settings_environment(own_settings, **bare), tmp_path / "api.log"
        ),
        "service": _service(own_settings, tmp_path / "service.log", **bare),
    }
    started.extend(processes.values())
    for process in processes.values():
        process.start()
    for name, process in processes.items():
        assert process.process is not None
        code = process.process.wait(60)
        assert code != 0, f"the {name} started without the credential:\n{process.log()[-2000:]}"
        assert "refused this process's credentials (none was sent" in process.log(), process.log()[-3000:]


def test_a_certificate_file_that_does_not_exist_is_named_at_start_up(
    proxies: GrpcProxies, own_settings: Settings, started: list[ChildProcess], tmp_path: Path
) -> None:
    missing = tmp_path / "no-such-client.pem"
    worker = worker_process(
        own_settings,
        tmp_path / "worker.log",
        **(proxies.mtls_environment() | {"TEMPORAL_TLS_CLIENT_CERT_PATH": str(missing)}),
    )
    started.append(worker)
    worker.start()
    assert worker.process is not None
    assert worker.process.wait(60) != 0
    assert f"names the file {missing}, which does not exist" in worker.log(), worker.log()[-3000:]


def test_tls_against_a_plaintext_server_is_named_at_start_up(
    temporal_client: Client, own_settings: Settings, started: list[ChildProcess], tmp_path: Path
) -> None:
    worker = worker_process(own_settings, tmp_path / "worker.log", TEMPORAL_TLS="true")
    started.append(worker)
    worker.start()
    assert worker.process is not None
    assert worker.process.wait(60) != 0
    assert "TLS is on, but Temporal at" in worker.log() and "answers in plaintext" in worker.log(), worker.log()
