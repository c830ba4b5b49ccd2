"""`python -m bench.api`: the API's start path (DELETE /bots/{id}) against raw `client.start_workflow`.

Same dev server, same concurrency, no worker polling: only starting is measured. Target ratio >= 0.9.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable

import httpx
from temporalio.client import Client

from api.app import create_app
from devstack.seed import seed
from devstack.throwaway import throwaway_stack
from lifecycle.deletion_starts import start_bot_deletion

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


async def main(bots: int) -> None:
    async with throwaway_stack("bench", durable=True) as stack:
        settings, env = stack.settings, stack.env
        client: Client = env.client
        seeded = await seed(settings.database_url, settings.storage_path, bots=bots, rows=5)
        headers = {"Authorization": f"Bearer {seeded.api_key}"}
        app = create_app(settings, temporal_client=client)
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://bench") as api:

                def via_api(bot_id: str) -> Callable[[], Awaitable[None]]:
                    async def call() -> None:
                        (await api.delete(f"/bots/{bot_id}", headers=headers)).raise_for_status()

                    return call

                def raw(bot_id: str) -> Callable[[], Awaitable[None]]:
                    async def call() -> None:
                        await start_bot_deletion(
                            client, settings.task_queue, bot_id=bot_id, account_id=seeded.account_id
                        )

                    return call

                raw_ids = [str(uuid.uuid4()) for _ in range(bots)]
                raw_rate, raw_latencies = await _timed([raw(b) for b in raw_ids])
                api_rate, api_latencies = await _timed([via_api(b) for b in seeded.bot_ids])
    print(f"{bots} starts each, concurrency {CONCURRENCY}, no worker polling")
    _report("raw client.start_workflow", raw_rate, raw_latencies)
    _report("API DELETE /bots/{id}", api_rate, api_latencies)
    print(f"ratio API/raw: {api_rate / raw_rate:.2f} (target >= 0.9)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.api")
    parser.add_argument("--bots", type=int, default=300)
    asyncio.run(main(parser.parse_args().bots))
