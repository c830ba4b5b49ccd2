"""`make run` and `make infra`: the local stack in the foreground, stopped in reverse order on Ctrl-C.

`make infra` starts the infrastructure alone (PostgreSQL, Temporal, SeaweedFS, the SMTP sink); `make run` then
starts every long-running process the Procfile at the repository's root lists, under honcho: the API, the
gateway's worker and each service's worker, which registers itself with the API as it starts; and, apart from them
as another team's deployment would be, the search index in a namespace of its own behind a Nexus endpoint
(devstack/search_team.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from functools import partial
from pathlib import Path

from devstack.local_env import SITE_PROVISIONER, StackPorts, stack_environment
from devstack.postgres import PostgresServer
from devstack.search_team import (
    SEARCH_INDEX_ENDPOINT,
    SEARCH_INDEX_QUEUE,
    SERVICE_NAMESPACE,
    create_nexus_endpoint,
    search_index_command,
)
from devstack.seaweedfs import SeaweedServer
from devstack.site_servers import register_site_servers, site_servers, start_site_servers
from devstack.smtp_sink import SmtpSink
from devstack.temporal_server import TemporalDevServer
from lifecycle.migrate import upgrade
from lifecycle.settings import LOCAL_DATABASE, Settings

PROJECT_ROOT = Path(__file__).resolve().parent.parent


class Stack:
    def __init__(self, settings: Settings, *, with_apps: bool) -> None:
        self.ports = StackPorts.from_environ()
        self.env = stack_environment(settings, self.ports)
        self.data_dir = Path(self.env["DATA_DIR"])
        self.with_apps = with_apps
        self.postgres = PostgresServer(self.data_dir / "postgres", self.ports.postgres)
        self.site_servers = site_servers(self.data_dir, self.ports)
        self.temporal = TemporalDevServer(
            self.data_dir / "temporal" / "temporal.db",
            port=self.ports.temporal,
            ui_port=self.ports.temporal_ui,
            log_path=self.data_dir / "logs" / "temporal.log",
        )
        self.smtp = SmtpSink(Path(self.env["MAIL_DIR"]), self.ports.smtp)
        self.objects = SeaweedServer(
            self.data_dir / "seaweedfs",
            self.ports.s3,
            bucket=self.env["S3_BUCKET"],
            log_path=self.data_dir / "logs" / "seaweedfs.log",
        )
        self.apps: subprocess.Popen[bytes] | None = None
        self.search_team: subprocess.Popen[bytes] | None = None
        self._stopping = threading.Event()

    def start_infra(self) -> None:
        print(f"[stack] data directory: {self.data_dir}", flush=True)
        self.postgres.start()
        self.postgres.create_database(LOCAL_DATABASE)
        self.postgres.ensure_provisioner(SITE_PROVISIONER)
        upgrade(self.env["DATABASE_URL"])
        print(f"[stack] PostgreSQL ready on 127.0.0.1:{self.ports.postgres}, migrations applied", flush=True)
        start_site_servers(self.site_servers)
        register_site_servers(self.postgres, self.site_servers)
        where = ", ".join(f"{name} on 127.0.0.1:{server.port}" for name, server in self.site_servers.items())
        print(f"[stack] site-database servers ready: {where}", flush=True)
        self.temporal.start()
        print(f"[stack] Temporal ready on {self.temporal.address}, search attributes registered", flush=True)
        # The operator's part for the search index's team: its namespace (a flag of the server) and an endpoint.
        create_nexus_endpoint(self.temporal.address, SEARCH_INDEX_ENDPOINT, SERVICE_NAMESPACE, SEARCH_INDEX_QUEUE)
        print(
            f"[stack] namespace {SERVICE_NAMESPACE}, Nexus endpoint {SEARCH_INDEX_ENDPOINT} to its queue"
            f" {SEARCH_INDEX_QUEUE}",
            flush=True,
        )
        self.objects.start()
        print(f"[stack] SeaweedFS S3 on {self.objects.endpoint_url}, bucket {self.objects.bucket}", flush=True)
        self.smtp.start()
        print(f"[stack] SMTP sink on 127.0.0.1:{self.ports.smtp}, saving to {self.env['MAIL_DIR']}", flush=True)

    def start_apps(self) -> None:
        """honcho runs the Procfile's commands with `devstack env`'s environment (the banner's manual path uses the
        same) and this interpreter's first on PATH; the services register themselves with the API
        (DELETION_GATEWAY_URL) as they start."""
        child_env = {
            **os.environ,
            **self.env,
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        }
        self.apps = subprocess.Popen(
            [sys.executable, "-m", "honcho", "start", "-f", str(PROJECT_ROOT / "Procfile"), "-d", str(PROJECT_ROOT)],
            env=child_env,
            cwd=PROJECT_ROOT,
            start_new_session=True,
        )
        self.search_team = self.start_search_team()

    def start_search_team(self) -> subprocess.Popen[bytes]:
        """Another team's service, deployed apart from the gateway (not in the Procfile): the search index in its
        own namespace, given none of the gateway's Temporal settings, registering itself by its Nexus endpoint."""
        env = {name: value for name, value in os.environ.items() if not name.startswith("TEMPORAL_")}
        # Its exports go to the stack's object store.
        env.update({name: value for name, value in self.env.items() if name.startswith("S3_")})
        env["GATEWAY_ADMIN_TOKEN"] = self.env["ADMIN_TOKEN"]
        log = (self.data_dir / "logs" / "search-index.log").open("ab")
        try:
            return subprocess.Popen(
                search_index_command(self.temporal.address, self.data_dir, self.env["DELETION_GATEWAY_URL"]),
                env=env,
                cwd=PROJECT_ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        finally:
            log.close()

    def banner(self) -> str:
        lines = [
            "",
            "Local stack is up:",
            f"  Temporal UI   http://127.0.0.1:{self.ports.temporal_ui}",
            f"  Temporal gRPC {self.temporal.address}",
        ]
        if self.with_apps:
            lines.append(f"  API docs      http://127.0.0.1:{self.env['API_PORT']}/docs")
            lines.append(f"  Demo page     http://127.0.0.1:{self.env['API_PORT']}/demo/")
            lines.append(f"  Search team   namespace {SERVICE_NAMESPACE}, Nexus endpoint {SEARCH_INDEX_ENDPOINT}")
        else:
            lines.append("  Start what the Procfile lists (`honcho start`, or each line by hand),")
            lines.append("  after `. .venv/bin/activate` and `eval $(python -m devstack env | sed 's/^/export /')`.")
        lines += [
            f"  Object store  {self.objects.endpoint_url}/{self.objects.bucket} (SeaweedFS S3)",
            f"  Mail dir      {self.env['MAIL_DIR']}",
            f"  Admin token   {self.env['ADMIN_TOKEN']}",
            "Ctrl-C stops everything; data stays in the data directory.",
            "",
        ]
        return "\n".join(lines)

    def wait(self) -> int:
        """Block until a signal arrives or an app exits; returns the exit code for the stack."""
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: self._stopping.set())
        while not self._stopping.wait(0.5):
            # honcho stops every process of the Procfile once one exits, then exits itself.
            if self.apps is not None and self.apps.poll() is not None:
                print(f"[stack] the Procfile's processes exited ({self.apps.returncode}); stopping", flush=True)
                return 1
            servers: tuple[tuple[str, PostgresServer | TemporalDevServer | SeaweedServer], ...] = (
                ("postgres", self.postgres),
                *((f"postgres {name}", server) for name, server in self.site_servers.items()),
                ("temporal", self.temporal),
                ("seaweedfs", self.objects),
            )
            for name, server in servers:
                if server.process is not None and server.process.poll() is not None:
                    print(f"[stack] {name} exited; stopping", flush=True)
                    return 1
        return 0

    def stop(self) -> None:
        """Stop in reverse order; each step runs even if an earlier one failed, so nothing is orphaned."""
        steps: list[Callable[[], None]] = [
            partial(_terminate, process) for process in (self.search_team, self.apps) if process is not None
        ]
        steps += [self.smtp.stop, self.objects.stop, self.temporal.stop]
        steps += [server.stop for server in self.site_servers.values()]
        steps += [self.postgres.stop]
        for step in steps:
            try:
                step()
            except Exception as exc:
                print(f"[stack] while stopping: {exc!r}", flush=True)
        print("[stack] stopped", flush=True)


def _terminate(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()


def run(settings: Settings, *, with_apps: bool) -> int:
    stack = Stack(settings, with_apps=with_apps)
    try:
        stack.start_infra()
        if with_apps:
            stack.start_apps()
        print(stack.banner(), flush=True)
        return stack.wait()
    finally:
        stack.stop()
