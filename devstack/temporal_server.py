"""The Temporal dev server (`temporal server start-dev`) as a child process, state kept in a SQLite file."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from temporalio.client import Client
from temporalio.service import RPCError

from devstack.binaries import temporal_cli
from devstack.ports import wait_for_port
from devstack.search_team import DEV_SERVER_NAMESPACE_FLAGS
from lifecycle import search_attributes
from lifecycle.data_converter import DATA_CONVERTER

DEV_SERVER_DYNAMIC_CONFIG = {
    # Eager activities: a worker that schedules an activity on its own task queue may run it at once,
    # saving a round trip per step (measured by bench.sites).
    "system.enableActivityEagerExecution": "true",
    # Task-queue fairness (Server 1.32): tasks carrying different fairness keys (deletions carry their account
    # id, lifecycle/start_options.py) are dispatched in turn instead of in arrival order, so one account's mass
    # deletion does not starve another's. It needs the new matcher (the default since 1.29, set explicitly)
    # and `enableFairness`, which is off by default on self-hosted servers.
    "matching.useNewMatcher": "true",
    "matching.enableFairness": "true",
    # Fairness is kept per partition; one partition per queue makes it exact, and a dev server (or a
    # queue of a few hundred tasks a second) gains nothing from more.
    "matching.numTaskqueueReadPartitions": "1",
    "matching.numTaskqueueWritePartitions": "1",
}
# docker-compose's server needs the same values in its dynamic config file (DYNAMIC_CONFIG_FILE_PATH).
DEV_SERVER_TUNING = [
    flag for key, value in DEV_SERVER_DYNAMIC_CONFIG.items() for flag in ("--dynamic-config-value", f"{key}={value}")
]


class TemporalDevServer:
    def __init__(
        self,
        db_file: Path | None,
        *,
        port: int,
        ui_port: int | None,
        log_path: Path,
        metrics_port: int | None = None,
        dynamic_config: dict[str, str] | None = None,
    ) -> None:
        self.db_file = db_file
        # Values beyond DEV_SERVER_DYNAMIC_CONFIG, for a test that needs the server's timing shortened.
        self.dynamic_config = dynamic_config or {}
        self.port = port
        self.ui_port = ui_port
        self.log_path = log_path
        self.metrics_port = metrics_port
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def process(self) -> subprocess.Popen[bytes] | None:
        return self._process

    def command(self) -> list[str]:
        args = [
            temporal_cli(),
            "server",
            "start-dev",
            "--ip",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--log-level",
            "warn",
            "--ui-disable-news-fetch",
        ]
        if self.db_file is not None:
            args += ["--db-filename", str(self.db_file)]
        if self.ui_port is None:
            args.append("--headless")
        else:
            args += ["--ui-port", str(self.ui_port)]
        if self.metrics_port is not None:
            args += ["--metrics-port", str(self.metrics_port)]
        # Flags register attributes only when the state file is new; `register` below covers restarts.
        extra = [
            flag for key, value in self.dynamic_config.items() for flag in ("--dynamic-config-value", f"{key}={value}")
        ]
        return args + DEV_SERVER_TUNING + DEV_SERVER_NAMESPACE_FLAGS + extra + search_attributes.dev_server_flags()

    def start(self, timeout: float = 60.0) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        if self.db_file is not None:
            self.db_file.parent.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("ab")
        # The OTEL_* variables that turn the API's and the worker's traces on are the server's own settings too,
        # and it refuses to start on OTEL_TRACES_EXPORTER=console: the server gets none of them.
        env = {name: value for name, value in os.environ.items() if not name.startswith("OTEL_")}
        self._process = subprocess.Popen(
            self.command(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env
        )
        log.close()
        wait_for_port(self.port, timeout=timeout)
        # A thread of its own, so that start() also works when called from inside an event loop.
        with ThreadPoolExecutor(max_workers=1) as pool:
            pool.submit(asyncio.run, asyncio.wait_for(self._register_search_attributes(), timeout)).result()

    async def _register_search_attributes(self) -> None:
        while True:
            try:
                client = await Client.connect(self.address, data_converter=DATA_CONVERTER)
                await search_attributes.register(client)
                return
            except (RPCError, RuntimeError):
                # The frontend accepts connections a moment before it reports healthy.
                await asyncio.sleep(0.2)

    def stop(self, timeout: float = 30.0) -> None:
        if self._process is None or self._process.poll() is not None:
            return
        self._process.send_signal(signal.SIGTERM)
        try:
            self._process.wait(timeout)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
