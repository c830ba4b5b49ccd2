"""The API and the worker as child processes, the way production runs them, with a throwaway stack's settings."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
from collections import defaultdict
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psutil
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from devstack.ports import free_port
from lifecycle.settings import Settings

PROJECT_ROOT = Path(__file__).resolve().parent.parent
# Seconds a child gets to stop gracefully before the bench gives up on it.
STOP_TIMEOUT = 60


def settings_env(settings: Settings) -> dict[str, str]:
    """The environment that makes a child's get_settings() answer `settings`; nothing of ours inherited."""
    env = {key: value for key, value in os.environ.items() if key.lower() not in Settings.model_fields}
    env.update(
        {name.upper(): str(value) for name in Settings.model_fields if (value := getattr(settings, name)) is not None}
    )
    return env


@dataclass
class Served:
    base_url: str
    process: psutil.Process


@contextlib.asynccontextmanager
async def served_api(
    settings: Settings, profile_to: Path | None = None, root: Path = PROJECT_ROOT
) -> AsyncIterator[Served]:
    """`python -m api` (uvicorn) of the checkout at `root` on a free loopback port; `profile_to`: under cProfile,
    written at exit."""
    port = free_port()
    # The account rate limit counts every request (its cost is in the figures) and refuses none: one account
    # offers the whole load, past the default limit at saturation.
    env = settings_env(settings) | {
        "API_PORT": str(port),
        "PYTHONPATH": str(root),
        "ACCOUNT_REQUESTS_PER_SECOND": "1000000",
    }
    profiler = ["-m", "cProfile", "-o", str(profile_to)] if profile_to else []
    process = await asyncio.create_subprocess_exec(
        sys.executable, *profiler, "-m", "api", env=env, cwd=root, stdout=asyncio.subprocess.DEVNULL
    )
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as api:
            for _ in range(300):
                with contextlib.suppress(httpx.HTTPError):
                    if (await api.get("/healthz")).status_code == 200:
                        break
                await asyncio.sleep(0.1)
            else:
                raise RuntimeError("the API did not start")
        yield Served(f"http://127.0.0.1:{port}", psutil.Process(process.pid))
    finally:
        # SIGINT: uvicorn shuts down gracefully, and cProfile (if any) writes its file on KeyboardInterrupt.
        process.send_signal(signal.SIGINT)
        await asyncio.wait_for(process.wait(), STOP_TIMEOUT)


def worker_process(settings: Settings, root: Path = PROJECT_ROOT) -> subprocess.Popen[bytes]:
    """`python worker.py` of the checkout at `root`, polling the settings' queues; the caller stops it (terminate,
    then wait)."""
    env = settings_env(settings) | {"PYTHONPATH": str(root)}
    return subprocess.Popen([sys.executable, "worker.py"], cwd=root, env=env)


_REGISTER = text(
    "INSERT INTO deletion_services (name, task_queue, contract) VALUES (:name, :name, 'lifecycle.deletion.v1')"
    " ON CONFLICT (name) DO UPDATE SET task_queue = EXCLUDED.task_queue, retired_at = NULL"
)


@contextlib.asynccontextmanager
async def running_services(settings: Settings) -> AsyncIterator[dict[str, subprocess.Popen[bytes]]]:
    """The project's services, each a process of its own as in `make run`, registered under their names and
    queues in the stack's registry; yields them by name; stopped on exit."""
    from services.catalog import SERVICES

    processes = [service_process(settings, service.name) for service in SERVICES]
    try:
        engine = create_async_engine(settings.database_url)
        try:
            async with engine.begin() as conn:
                for service in SERVICES:
                    await conn.execute(_REGISTER, {"name": service.name})
        finally:
            await engine.dispose()
        yield {service.name: process for service, process in zip(SERVICES, processes, strict=True)}
    finally:
        for process in processes:
            process.terminate()
            process.wait(60)


def service_process(settings: Settings, name: str, namespace: str | None = None) -> subprocess.Popen[bytes]:
    """`python -m services.<name>` on its default queue (its name) and database (its name, beside the settings'
    one), registering itself with nobody: the caller registers it; stops it as worker_process's caller does. With
    `namespace`, in that namespace of its own, given Temporal's address, its database and the object store and
    nothing of the gateway's (its namespace, database, queues, keys): the caller puts an endpoint before it."""
    command = [sys.executable, "-m", f"services.{name}"]
    if namespace is None:
        return subprocess.Popen(command, cwd=PROJECT_ROOT, env=settings_env(settings))
    from services.runtime.database import database_url_variable, service_database_url

    env = {
        key: value
        for key, value in settings_env(settings).items()
        if key.lower() not in Settings.model_fields or key.startswith("S3_")
    }
    env |= {
        "TEMPORAL_ADDRESS": settings.temporal_address,
        database_url_variable(name): service_database_url(name, beside=settings.database_url),
        "DATA_DIR": str(settings.data_dir / f"{name}-{namespace}"),
    }
    return subprocess.Popen([*command, "--namespace", namespace], cwd=PROJECT_ROOT, env=env)


async def load_phase(job: dict[str, Any], process: psutil.Process | None = None) -> tuple[dict[str, Any], float]:
    """One phase of `bench.load` in its own process; also the CPU `process` spent while the load ran."""
    generator = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.load", stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
    )
    assert generator.stdin is not None and generator.stdout is not None
    generator.stdin.write(json.dumps(job).encode())
    generator.stdin.close()
    if (await generator.stdout.readline()).strip() != b"ready":
        raise RuntimeError("bench.load did not start")
    cpu_before = cpu_seconds(process) if process else 0.0
    out = await generator.stdout.read()
    cpu = cpu_seconds(process) - cpu_before if process else 0.0
    if await generator.wait() != 0:
        raise RuntimeError(f"bench.load failed ({generator.returncode})")
    result: dict[str, Any] = json.loads(out)
    return result, cpu


def cpu_seconds(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


def cpu_by_thread_name(process: psutil.Process) -> dict[str, float]:
    """CPU seconds so far per thread name (Linux's comm) and mode: the Python thread against the SDK core's
    threads, and user against system time (the kernel's side of the sockets)."""
    spent: dict[str, float] = defaultdict(float)
    for thread in process.threads():
        with contextlib.suppress(OSError):
            name = Path(f"/proc/{process.pid}/task/{thread.id}/comm").read_text().strip()
            spent[f"{name} user"] += thread.user_time
            spent[f"{name} system"] += thread.system_time
    return spent
