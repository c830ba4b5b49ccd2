"""The API and the worker as child processes, the way production runs them, with a throwaway stack's settings."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil

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
async def served_api(settings: Settings, profile_to: Path | None = None) -> AsyncIterator[Served]:
    """`python -m api` (uvicorn) on a free loopback port; `profile_to`: under cProfile, written at exit."""
    port = free_port()
    env = settings_env(settings) | {"API_PORT": str(port)}
    profiler = ["-m", "cProfile", "-o", str(profile_to)] if profile_to else []
    process = await asyncio.create_subprocess_exec(
        sys.executable, *profiler, "-m", "api", env=env, cwd=PROJECT_ROOT, stdout=asyncio.subprocess.DEVNULL
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


def worker_process(settings: Settings) -> subprocess.Popen[bytes]:
    """`python worker.py` polling the settings' queues; the caller stops it (terminate, then wait)."""
    return subprocess.Popen([sys.executable, "worker.py"], cwd=PROJECT_ROOT, env=settings_env(settings))
