"""`python -m bench.api`: the API's start path (DELETE /bots/{id}) against raw `client.start_workflow`.

Same dev server, same concurrency, no worker polling: only starting is measured. Target ratio >= 0.9.
The API runs as production serves it, `python -m api` (uvicorn) in a child process, and is called over
HTTP; `--in-process` calls the app through httpx's ASGI transport in the bench's own process instead.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx
from temporalio.client import Client

from api.app import create_app
from devstack.ports import free_port
from devstack.seed import seed
from devstack.throwaway import throwaway_stack
from lifecycle.deletion_starts import start_bot_deletion
from lifecycle.settings import Settings

CONCURRENCY = 20


async def _timed(calls: list[Callable[[], Awaitable[None]]]) -> tuple[float, list[float]]:
    """Run the calls CONCURRENCY at a time; return (calls per second, latencies)."""
    gate = asyncio.Semaphore(CONCURRENCY)
    latencies: list[float] = []

    async def one(call: Callable[[], Awaitable[None]]) -> None:
        async with gate:
            started = time.perf_counter()
            await call()
            latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    await asyncio.gather(*(one(call) for call in calls))
    return len(calls) / (time.perf_counter() - started), latencies


def _report(name: str, rate: float, latencies: list[float]) -> None:
    p50 = statistics.median(latencies) * 1000
    p99 = statistics.quantiles(latencies, n=100)[98] * 1000
    print(f"{name:<28} {rate:8.0f} starts/s   p50 {p50:6.1f} ms   p99 {p99:6.1f} ms")


@contextlib.asynccontextmanager
async def _in_process(settings: Settings, client: Client) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(settings, temporal_client=client)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://bench") as api:
            yield api


@contextlib.asynccontextmanager
async def _served(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """`python -m api` in a child process, as production runs it, with these settings."""
    port = free_port()
    env = {key: value for key, value in os.environ.items() if key.lower() not in Settings.model_fields}
    env.update(
        {name.upper(): str(value) for name in Settings.model_fields if (value := getattr(settings, name)) is not None}
    )
    env["API_PORT"] = str(port)
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "api", env=env, stdout=asyncio.subprocess.DEVNULL
    )
    try:
        limits = httpx.Limits(max_connections=CONCURRENCY, max_keepalive_connections=CONCURRENCY)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", limits=limits) as api:
            for _ in range(300):
                with contextlib.suppress(httpx.HTTPError):
                    if (await api.get("/healthz")).status_code == 200:
                        break
                await asyncio.sleep(0.1)
            else:
                raise RuntimeError("the API did not start")
            yield api
    finally:
        process.terminate()
        await asyncio.wait_for(process.wait(), 30)


async def main(bots: int, in_process: bool) -> None:
    async with throwaway_stack("bench", durable=True) as stack:
        settings, env = stack.settings, stack.env
        client: Client = env.client
        seeded = await seed(settings.database_url, settings.storage_path, bots=bots, rows=5)
        # No worker polls, so a small bot's DELETE would wait DELETION_INLINE_WAIT for nothing: this measures
        # accepting a deletion, which is what `respond-async` asks for.
        headers = {"Authorization": f"Bearer {seeded.api_key}", "Prefer": "respond-async"}
        async with _in_process(settings, client) if in_process else _served(settings) as api:

            def via_api(bot_id: str) -> Callable[[], Awaitable[None]]:
                async def call() -> None:
                    (await api.delete(f"/bots/{bot_id}", headers=headers)).raise_for_status()

                return call

            def raw(bot_id: str) -> Callable[[], Awaitable[None]]:
                async def call() -> None:
                    await start_bot_deletion(client, settings.task_queue, bot_id=bot_id, account_id=seeded.account_id)

                return call

            raw_ids = [str(uuid.uuid4()) for _ in range(bots)]
            raw_rate, raw_latencies = await _timed([raw(b) for b in raw_ids])
            api_rate, api_latencies = await _timed([via_api(b) for b in seeded.bot_ids])
    served = "in-process ASGI" if in_process else "python -m api (uvicorn)"
    print(f"{bots} starts each, concurrency {CONCURRENCY}, no worker polling; API: {served}")
    _report("raw client.start_workflow", raw_rate, raw_latencies)
    _report("API DELETE /bots/{id}", api_rate, api_latencies)
    print(f"ratio API/raw: {api_rate / raw_rate:.2f} (target >= 0.9)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.api")
    parser.add_argument("--bots", type=int, default=300)
    parser.add_argument("--in-process", action="store_true", help="call the app in this process (ASGI)")
    args = parser.parse_args()
    asyncio.run(main(args.bots, args.in_process))
