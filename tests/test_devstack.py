"""The commands of docs/operations.md and the README: `python -m devstack env`, `python -m devstack seed`, the
`make infra` banner's manual path (Procfile lines by hand after `devstack env`), and `make run` finding the
data that path left, the object store's included."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from devstack.ports import free_port
from devstack.seed import rows_per_service
from lifecycle.deletion.workflow_types import bot_deletion_id
from lifecycle.object_keys import bot_documents_prefix
from lifecycle.object_store import ObjectStore
from lifecycle.settings import Settings
from tests.temporal_cli import TemporalCli

REQUEST_TIMEOUT_SECONDS = 60.0
REQUIRED_KEYS = {
    "S3_ENDPOINT_URL",
    "S3_BUCKET",
    "S3_ACCESS_KEY_ID",
    "S3_SECRET_ACCESS_KEY",
    "TEMPORAL_ADDRESS",
    "TEMPORAL_NAMESPACE",
    "DATABASE_URL",
    "SMTP_HOST",
    "SMTP_PORT",
    "MAIL_DIR",
    "ADMIN_TOKEN",
    "DELETION_GATEWAY_URL",
}
# The Procfile's services, each registering itself with the API as it starts.
SERVICES = {"chat", "analytics", "knowledge", "integrations"}


def _devstack_env(env: dict[str, str], project_root: Path) -> str:
    return subprocess.run(
        [sys.executable, "-m", "devstack", "env"], env=env, cwd=project_root, capture_output=True, text=True, check=True
    ).stdout


def test_env_prints_the_worker_and_api_environment(tmp_path: Path, project_root: Path) -> None:
    env = {**os.environ, "DATA_DIR": str(tmp_path)}
    env.pop("ADMIN_TOKEN", None)
    output = _devstack_env(env, project_root)
    values = dict(line.split("=", 1) for line in output.splitlines())
    assert set(values) >= REQUIRED_KEYS
    assert values["DATABASE_URL"].startswith("postgresql+asyncpg://")
    assert values["MAIL_DIR"] == str(tmp_path / "mail")
    # Generated once, kept in the data directory, and the same on the next call.
    assert (tmp_path / "admin_token").read_text().strip() == values["ADMIN_TOKEN"]
    again = _devstack_env(env, project_root)
    assert again == output


class RunningStack:
    def __init__(self, project_root: Path, data_dir: Path) -> None:
        self.api_port = free_port()
        # One client for every call to the stack; its timeout is a hang's bound, not a latency target: with the
        # suite's other long tests starting beside it, a call can take more than httpx's default 5 s.
        self.http = httpx.Client(base_url=self.api_url, timeout=REQUEST_TIMEOUT_SECONDS)
        self.ui_port = free_port()
        self.env = {
            **os.environ,
            "DATA_DIR": str(data_dir),
            "API_PORT": str(self.api_port),
            "DEVSTACK_POSTGRES_PORT": str(free_port()),
            "DEVSTACK_TEMPORAL_PORT": str(free_port()),
            "DEVSTACK_TEMPORAL_UI_PORT": str(self.ui_port),
            "DEVSTACK_SMTP_PORT": str(free_port()),
            "DEVSTACK_S3_PORT": str(free_port()),
            "DEVSTACK_SITES_A_PORT": str(free_port()),
            "DEVSTACK_SITES_B_PORT": str(free_port()),
        }
        self.env.pop("ADMIN_TOKEN", None)
        self.project_root = project_root
        self.log = data_dir.parent / f"stack-{data_dir.name}.log"
        self.process: subprocess.Popen[bytes] | None = None
        # The Procfile's processes started by hand (the banner's manual path), by name.
        self.by_hand: dict[str, subprocess.Popen[bytes]] = {}

    def start_infra(self) -> str:
        """`python -m devstack infra` (`make infra`), until it prints its banner; returns the banner."""
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "devstack", "infra"],
                env=self.env,
                cwd=self.project_root,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 120.0
        while "Ctrl-C stops everything" not in (text := self.log.read_text()):
            assert self.process.poll() is None and time.monotonic() < deadline, text[-3000:]
            time.sleep(0.5)  # the polling interval of this synchronous wait, as in wait_ready below
        return text[text.rindex("Local stack is up:") :]

    def start_by_hand(self, names: set[str], setup: str) -> None:
        """The Procfile's lines `names`, each in a shell that runs `setup` (the banner's instructions) first."""
        procfile = (self.project_root / "Procfile").read_text().splitlines()
        lines = dict(line.split(": ", 1) for line in procfile if line.strip() and not line.startswith("#"))
        for name in sorted(names):
            with (self.log.parent / f"by-hand-{name}.log").open("ab") as log:
                self.by_hand[name] = subprocess.Popen(
                    ["bash", "-c", f"{setup} && {lines[name]}"],
                    env=self.env,
                    cwd=self.project_root,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )

    def stop_by_hand(self) -> None:
        """The Procfile's processes as honcho stops them (SIGTERM to each one's group), then the infrastructure."""
        for process in self.by_hand.values():
            os.killpg(process.pid, signal.SIGTERM)
        for process in self.by_hand.values():
            process.wait(60)
        self.by_hand.clear()
        assert self.stop() == 0

    def start(self) -> None:
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "devstack", "run"],
                env=self.env,
                cwd=self.project_root,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.wait_ready()

    def wait_ready(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process is not None and self.process.poll() is None, self.log.read_text()[-3000:]
            try:
                if self.http.get("/readyz", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)  # the polling interval of this synchronous wait (the stack runs outside any loop)
        raise AssertionError(f"stack not ready in {timeout}s:\n{self.log.read_text()[-3000:]}")

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    def wait_pinned_to_current_version(self, workflow_id: str, timeout: float = 120.0) -> None:
        cli = TemporalCli(f"127.0.0.1:{self.env['DEVSTACK_TEMPORAL_PORT']}")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            # The workers make their version current a moment after they start polling; the deployment exists
            # only once one polls, which may be after the API is ready.
            try:
                described = cli.json("worker", "deployment", "describe", "--name", "lifecycle")
            except AssertionError as missing:
                assert "no Worker Deployment found" in str(missing), missing
                time.sleep(0.2)  # the polling interval of this synchronous wait, as below
                continue
            current = described["routingConfig"]["currentVersionBuildID"]
            run = cli.json("workflow", "describe", "--workflow-id", workflow_id)
            versioning = run["workflowExecutionInfo"].get("versioningInfo") or {}
            # The behavior shows once a worker has completed the run's first workflow task.
            if current and versioning.get("behavior"):
                assert versioning["behavior"] == "VERSIONING_BEHAVIOR_PINNED", versioning
                assert versioning["deploymentVersion"] == {"deploymentName": "lifecycle", "buildId": current}
                return
            time.sleep(0.2)  # the polling interval of this synchronous wait, as in wait_ready above
        raise AssertionError(f"{workflow_id} never ran its first workflow task on a current version")

    def run(self, *args: str, **extra: str) -> str:
        """`python -m devstack ARGS` with the stack's own variables and `extra`."""
        return subprocess.run(
            [sys.executable, "-m", "devstack", *args],
            env={**self.env, **extra},
            cwd=self.project_root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout

    def values(self) -> dict[str, str]:
        """What `devstack env` says of this stack."""
        return dict(line.split("=", 1) for line in self.run("env").splitlines())

    def objects_under(self, prefix: str) -> int:
        """Objects under `prefix` in the stack's SeaweedFS, as `devstack env` names it."""
        values = self.values()
        settings = Settings(
            s3_endpoint_url=values["S3_ENDPOINT_URL"],
            s3_bucket=values["S3_BUCKET"],
            s3_access_key_id=values["S3_ACCESS_KEY_ID"],
            s3_secret_access_key=values["S3_SECRET_ACCESS_KEY"],
        )

        async def count() -> int:
            store = ObjectStore(settings)
            try:
                return await store.count(prefix)
            finally:
                await store.close()

        return asyncio.run(count())

    def wait_export_ready(self, status_url: str, key: str, timeout: float = 120.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status = self.http.get(status_url, headers={"Authorization": f"Bearer {key}"}).json()
            if status["download_url"]:
                return str(status["download_url"])
            time.sleep(0.2)  # the polling interval of this synchronous wait, as in wait_ready above
        raise AssertionError(f"{status_url} never became ready")

    def wait_registered(self, admin: dict[str, str], names: set[str], timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            listed = self.http.get("/deletion-services", headers=admin).json()
            if names <= {service["name"] for service in listed["services"]}:
                return
            time.sleep(0.2)  # the polling interval of this synchronous wait, as in wait_ready above
        raise AssertionError(f"{names} never all registered:\n{self.log.read_text()[-3000:]}")

    def wait_deletion_completed(self, status_url: str, key: str, timeout: float = 120.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status: dict[str, Any] = self.http.get(status_url, headers={"Authorization": f"Bearer {key}"}).json()
            if status["status"] == "completed":
                return status
            time.sleep(0.2)  # the polling interval of this synchronous wait, as in wait_ready above
        raise AssertionError(f"{status_url} never completed")

    def wait_site_active(self, status_url: str, key: str, timeout: float = 120.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            site: dict[str, Any] = self.http.get(status_url, headers={"Authorization": f"Bearer {key}"}).json()
            if site["status"] == "active":
                return site
            time.sleep(0.2)  # the polling interval of this synchronous wait, as in wait_ready above
        raise AssertionError(f"{status_url} never became active")

    def stop(self) -> int:
        assert self.process is not None
        self.process.send_signal(signal.SIGINT)
        return self.process.wait(90)


@pytest.fixture
def stack(tmp_path: Path, project_root: Path) -> Iterator[RunningStack]:
    running = RunningStack(project_root, tmp_path / "data")
    yield running
    running.http.close()
    for process in running.by_hand.values():
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(30)
    if running.process is not None and running.process.poll() is None:
        # Ctrl-C, as a person would: the stack stops its servers and apps (a SIGKILL would orphan them all).
        try:
            running.stop()
        except subprocess.TimeoutExpired:
            running.process.kill()


@dataclass(frozen=True)
class Kept:
    """What the first start left in the data directory, for the next start to find."""

    account_key: str
    account_name: str
    archive_link: str
    documents: str


def _follow_the_banner(stack: RunningStack, token: str) -> Kept:
    """`make infra`, then the API's and the worker's Procfile lines by hand as its banner says; they leave an
    account, its export and a bot's documents for `make run` to find on the next start."""
    banner = stack.start_infra()
    assert token in banner, "the banner prints the admin token"
    setup = next(line for line in banner.splitlines() if "eval $(" in line)
    # The banner's own words: the virtualenv, then the environment `devstack env` prints.
    assert "`. .venv/bin/activate`" in setup
    setup = " && ".join(part.strip("`") for part in setup.strip(" .").removeprefix("after ").split(" and "))
    stack.start_by_hand({"api", "worker"}, setup)
    stack.wait_ready()
    # The seed keeps its flags and JSON output, and puts the documents in the stack's object store: on the
    # default ports it needs no variable; on these, the database's and the store's addresses, not its credentials.
    values = stack.values()
    where = {name: values[name] for name in ("DATABASE_URL", "S3_ENDPOINT_URL")}
    seeded = json.loads(stack.run("seed", "--bots", "1", "--rows", "100", **where))
    assert set(seeded) == {"account_id", "api_key", "bot_ids"}
    documents = bot_documents_prefix(seeded["bot_ids"][0])
    assert stack.objects_under(documents) == rows_per_service(100)["knowledge"]

    admin = {"Authorization": f"Bearer {token}"}
    created = stack.http.post("/accounts", json={"name": "Persisted", "email": "persisted@example.com"}, headers=admin)
    assert created.status_code == 201, created.text
    account_key = created.json()["api_key"]
    exported = stack.http.post("/account/exports", headers={"Authorization": f"Bearer {account_key}"})
    assert exported.status_code == 202, exported.text
    link = stack.wait_export_ready(exported.json()["status_url"], account_key)
    assert stack.objects_under("exports/") == 1
    stack.stop_by_hand()
    return Kept(account_key, "Persisted", link, documents)


@pytest.mark.long
def test_the_banner_path_and_make_run_serve_and_keep_data_across_restart(stack: RunningStack, tmp_path: Path) -> None:
    token = stack.values()["ADMIN_TOKEN"]
    kept = _follow_the_banner(stack, token)
    # `make run` over the same data directory.
    stack.start()
    assert stack.http.get("/docs").status_code == 200
    assert "EventSource" in stack.http.get("/demo/demo.js").text  # make run turns the demo page on
    assert stack.http.get(f"http://127.0.0.1:{stack.ui_port}/").status_code == 200
    assert (tmp_path / "data" / "admin_token").read_text().strip() == token
    # PostgreSQL and SeaweedFS kept what the first start wrote: the account, its archive, the bot's documents.
    again = stack.http.get("/account", headers={"Authorization": f"Bearer {kept.account_key}"})
    assert again.status_code == 200
    assert again.json()["name"] == kept.account_name
    archive = stack.http.get(kept.archive_link)
    assert archive.status_code == 200 and archive.headers["content-type"] == "application/zip"
    assert stack.objects_under(kept.documents) == rows_per_service(100)["knowledge"]

    # Every service of the Procfile registered itself as it started, on its queue, and the search index's team by
    # its Nexus endpoint, from its own namespace; a deletion reaches each one's own store.
    admin = {"Authorization": f"Bearer {token}"}
    stack.wait_registered(admin, {*SERVICES, "search-index"})
    listed = {
        service["name"]: service for service in stack.http.get("/deletion-services", headers=admin).json()["services"]
    }
    assert {name: listed[name]["task_queue"] for name in SERVICES} == {name: name for name in SERVICES}
    assert (listed["search-index"]["nexus_endpoint"], listed["search-index"]["task_queue"]) == ("search-index", None)
    values = stack.values()
    where = {name: values[name] for name in ("DATABASE_URL", "S3_ENDPOINT_URL")}
    seeded = json.loads(stack.run("seed", "--bots", "1", "--rows", "100", **where))
    deleted = seeded["bot_ids"][0]
    deleting = stack.http.delete(f"/bots/{deleted}", headers={"Authorization": f"Bearer {seeded['api_key']}"})
    assert deleting.status_code in (200, 202), deleting.text
    # `make run` registers its workers' version and makes it current; a new run is pinned to it.
    stack.wait_pinned_to_current_version(bot_deletion_id(deleted))
    status = stack.wait_deletion_completed(deleting.json()["status_url"], seeded["api_key"])
    assert {name: p["deleted"] for name, p in status["progress"].items()} == {
        **rows_per_service(100),
        "search-index": 0,
    }
    assert stack.objects_under(bot_documents_prefix(deleted)) == 0
    # Two servers of their own hold the sites' databases; the product's own (`default`) takes none.
    servers = stack.http.get("/site-db-servers", headers=admin).json()["servers"]
    assert {server["name"]: server["state"] for server in servers} == {
        "default": "draining",
        "sites-a": "active",
        "sites-b": "active",
    }
    site = stack.http.post(
        "/sites",
        json={"name": "Placed", "domain": "placed.example.com"},
        headers={"Authorization": f"Bearer {kept.account_key}"},
    )
    assert site.status_code == 202, site.text
    assert stack.wait_site_active(site.json()["status_url"], kept.account_key)["database_server"] == "sites-a"

    assert stack.stop() == 0
    assert "[stack] stopped" in stack.log.read_text()
