"""The worker and the API as real child processes, for tests that kill, restart or flood them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx

from devstack.ports import free_port
from lifecycle.settings import Settings
from tests.forkserver import ForkedProcess, fork_server, forks_alike, starts_alike

PROJECT_ROOT = Path(__file__).resolve().parent.parent


def settings_environment(settings: Settings, **overrides: str) -> dict[str, str]:
    """The environment under which a child process reads exactly these settings."""
    env = {key: value for key, value in os.environ.items() if key not in Settings.model_fields}
    for name in Settings.model_fields:
        value = getattr(settings, name)
        if value is not None:
            env[name.upper()] = str(value)
    env.update(overrides)
    return env


class ChildProcess:
    def __init__(
        self,
        args: list[str],
        env: dict[str, str],
        log_path: Path,
        cwd: Path = PROJECT_ROOT,
        stderr_path: Path | None = None,
        forked: bool = True,
    ) -> None:
        """`log_path` takes stdout, and stderr too unless `stderr_path` is given. `forked=False` gives the child an
        interpreter of its own, without what the fork server imported (the current contract's messages among
        them): for a stand-in built from another version of the project's code."""
        self.args = args
        self.env = env
        self.log_path = log_path
        self.stderr_path = stderr_path
        self.cwd = cwd
        self.forked = forked
        self.process: subprocess.Popen[bytes] | ForkedProcess | None = None

    def start(self) -> None:
        if self.forked and self.cwd == PROJECT_ROOT and forks_alike(self.args):
            server = fork_server(PROJECT_ROOT)
            if starts_alike(self.env, server):
                self.process = server.start(self.args, self.env, self.cwd, self.log_path, self.stderr_path)
                return
        with self.log_path.open("ab") as log, (self.stderr_path or self.log_path).open("ab") as errors:
            self.process = subprocess.Popen(self.args, env=self.env, cwd=self.cwd, stdout=log, stderr=errors)

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def kill(self) -> None:
        """SIGKILL: no shutdown hook, no graceful anything, as when a node disappears."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def terminate(self, timeout: float = 60.0) -> int:
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def errors(self) -> str:
        """What it wrote to stderr, when that has a file of its own."""
        path = self.stderr_path
        return path.read_text(errors="replace") if path is not None and path.exists() else ""


def run_command(
    args: list[str], env: dict[str, str], output_dir: Path, timeout: float
) -> subprocess.CompletedProcess[str]:
    """A one-shot command run to its end, as subprocess.run(capture_output=True, text=True) would, but forked like
    the other children when it is `python -m ...`: the product's command-line tools import what the worker does,
    about a second of CPU per run otherwise. Its stdout and stderr go to files of their own in `output_dir`."""
    output_dir.mkdir(parents=True, exist_ok=True)
    name = uuid.uuid4().hex[:8]
    command = ChildProcess(args, env, output_dir / f"{name}.out", stderr_path=output_dir / f"{name}.err")
    command.start()
    assert command.process is not None
    try:
        returncode = command.process.wait(timeout)
    except subprocess.TimeoutExpired:
        command.kill()
        raise
    return subprocess.CompletedProcess(args, returncode, command.log_path.read_text(errors="replace"), command.errors())


def worker_process(settings: Settings, log_path: Path, **overrides: str) -> ChildProcess:
    return ChildProcess([sys.executable, "worker.py"], settings_environment(settings, **overrides), log_path)


class ApiProcess(ChildProcess):
    def __init__(self, settings: Settings, log_path: Path, **overrides: str) -> None:
        self.port = free_port()
        env = settings_environment(settings, API_PORT=str(self.port), **overrides)
        super().__init__([sys.executable, "-m", "api"], env, log_path)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        super().start()
        deadline = time.monotonic() + 30
        # One client for the whole wait: each new one builds an SSL context (about 20 ms of CPU), which per poll
        # was a visible share of the suite's CPU.
        with httpx.Client(timeout=1) as http:
            while time.monotonic() < deadline:
                try:
                    if http.get(f"{self.url}/healthz").status_code == 200:
                        return
                except httpx.HTTPError:
                    time.sleep(0.1)  # polling interval of a synchronous wait: fixtures start processes outside a loop
        self.kill()  # a fixture that fails here never reaches its teardown
        raise AssertionError(f"API did not start:\n{self.log()[-2000:]}")


def service_processes(settings: Settings, log_dir: Path, suffix: str) -> dict[str, tuple[ChildProcess, str]]:
    """The project's own services (services/catalog.py) as `make run` starts them, `python -m services.<name>`,
    each on a task queue of its own (`<name>-<suffix>`) and with its own database beside `settings`' one; not
    started yet. By service name: (process, task queue)."""
    from services.catalog import SERVICES
    from services.runtime.worker import task_queue_variable

    started = {}
    for service in SERVICES:
        queue = f"{service.name}-{suffix}"
        process = ChildProcess(
            [sys.executable, "-m", f"services.{service.name}"],
            settings_environment(settings, **{task_queue_variable(service.name): queue}),
            log_dir / f"{service.name}.log",
        )
        started[service.name] = (process, queue)
    return started
