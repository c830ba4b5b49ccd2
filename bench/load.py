"""`python -m bench.load`: the open-loop load generator `bench.api` runs in its own process.

Reads one JSON job from stdin, fires one call per target at a fixed offered rate (call i is due at
start + i/rate, whether or not earlier calls have answered), and writes "ready", then the latencies and its own
CPU time as JSON, to stdout.
Latency counts from when a call was due, not from when it was sent, so a generator that falls behind shows up
as latency instead of hiding it (no coordinated omission). Running apart from the API keeps this process's
CPU off the API's books.

Job: {"mode": "http" | "raw", "rate": float, "targets": [bot ids], and
  for http: "base_url", "api_key"; for raw: "temporal_address", "task_queue", "account_id"}.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from temporalio.client import Client

from lifecycle.data_converter import DATA_CONVERTER
from lifecycle.deletion.starts import start_bot_deletion


async def _open_loop(rate: float, calls: list[Callable[[], Awaitable[None]]]) -> dict[str, Any]:
    latencies: list[float] = []
    errors: list[str] = []

    async def one(due: float, call: Callable[[], Awaitable[None]]) -> None:
        try:
            await call()
            latencies.append(time.perf_counter() - due)
        except Exception as exc:  # counted and reported, so a failing side never passes for a fast one
            errors.append(repr(exc)[:200])

    tasks = []
    # The parent reads the API's CPU times when this line arrives: the clock starts after this process's setup.
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    cpu_before = time.process_time()  # every thread of this process: the SDK core's too
    start = time.perf_counter() + 0.05
    for i, call in enumerate(calls):
        due = start + i / rate
        await asyncio.sleep(max(0.0, due - time.perf_counter()))
        tasks.append(asyncio.create_task(one(due, call)))
    await asyncio.gather(*tasks)
    return {
        "latencies": latencies,
        "errors": errors,
        "seconds": time.perf_counter() - start,
        "cpu_seconds": time.process_time() - cpu_before,
    }


async def _http(job: dict[str, Any]) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {job['api_key']}", "Prefer": "respond-async"}
    # aiohttp rather than httpx: on this machine httpx spent 1.05 ms of client CPU and 1.1 ms of latency per
    # keep-alive GET /healthz, aiohttp 0.18 ms and 0.48 ms (docs/benchmarks.md); the difference is the
    # client's, and would otherwise count as what the API adds.
    connector = aiohttp.TCPConnector(limit=200)
    timeout = aiohttp.ClientTimeout(total=30)
    async with aiohttp.ClientSession(job["base_url"], connector=connector, timeout=timeout) as api:
        async with api.get("/healthz") as warm:  # one warm connection before the clock starts
            await warm.read()

        def call(bot_id: str) -> Callable[[], Awaitable[None]]:
            async def delete() -> None:
                async with api.delete(f"/bots/{bot_id}", headers=headers) as response:
                    await response.read()
                    response.raise_for_status()

            return delete

        return await _open_loop(job["rate"], [call(b) for b in job["targets"]])


async def _fresh_bot() -> bool:
    """The raw side's bots are seeded for the run and started once each: no earlier run of theirs completed, so
    the start never asks, and the row is there."""
    return True


async def _raw(job: dict[str, Any]) -> dict[str, Any]:
    client = await Client.connect(job["temporal_address"], data_converter=DATA_CONVERTER)

    def call(bot_id: str) -> Callable[[], Awaitable[None]]:
        async def start() -> None:
            await start_bot_deletion(
                client, job["task_queue"], bot_id=bot_id, account_id=job["account_id"], row_exists=_fresh_bot
            )

        return start

    return await _open_loop(job["rate"], [call(b) for b in job["targets"]])


def main() -> None:
    job = json.loads(sys.stdin.read())
    result = asyncio.run(_http(job) if job["mode"] == "http" else _raw(job))
    json.dump(result, sys.stdout)
    sys.stdout.flush()
    # Skips interpreter finalization, where the SDK's runtime threads sometimes abort the process
    # ("PyGILState_Release: thread state must be current"), after the result is out.
    os._exit(0)


if __name__ == "__main__":
    main()
