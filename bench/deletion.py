"""`python -m bench.deletion --rows N`: a bot deleted via the API and a worker process, vs raw DELETEs.

Prints rows/s of each, their ratio (target >= 0.8) and the worker's peak RSS (target < 300 MB).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import asyncpg
import httpx
import psutil

from api.app import create_app
from devstack.seed import asyncpg_dsn, seed
from devstack.throwaway import throwaway_stack
from lifecycle.contracts import DELETION_SERVICES as SERVICES
from lifecycle.settings import Settings

PROJECT_ROOT = Path(__file__).resolve().parent.parent


def _worker(settings: Settings) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "DATA_DIR": str(settings.data_dir),
        "DATABASE_URL": settings.database_url,
        "TEMPORAL_ADDRESS": settings.temporal_address,
        "TASK_QUEUE": settings.task_queue,
        "STORAGE_DIR": str(settings.storage_path),
    }
    return subprocess.Popen([sys.executable, "worker.py"], cwd=PROJECT_ROOT, env=env)


async def _peak_rss(pid: int, peak: list[int], stop: asyncio.Event) -> None:
    process = psutil.Process(pid)
    while not stop.is_set():
        peak[0] = max(peak[0], process.memory_info().rss)
        await asyncio.sleep(0.1)


async def _until_completed(api: httpx.AsyncClient, url: str, headers: dict[str, str]) -> None:
    while (await api.get(url, headers=headers)).json()["status"] != "completed":  # noqa: ASYNC110
        await asyncio.sleep(0.1)


async def _delete_through_api(settings: Settings, rows: int, peak: list[int]) -> float:
    seeded = await seed(settings.database_url, settings.storage_path, bots=1, rows=rows)
    bot_id = seeded.bot_ids[0]
    headers = {"Authorization": f"Bearer {seeded.api_key}"}
    worker = _worker(settings)
    stop = asyncio.Event()
    sampler = asyncio.create_task(_peak_rss(worker.pid, peak, stop))
    app = create_app(settings)
    try:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://bench") as api:
                await asyncio.sleep(2)  # let the worker connect and poll
                started = time.perf_counter()
                response = await api.delete(f"/bots/{bot_id}", headers=headers)
                response.raise_for_status()
                await _until_completed(api, f"/bots/{bot_id}/deletion", headers)
                return time.perf_counter() - started
    finally:
        stop.set()
        await sampler
        worker.terminate()
        worker.wait(60)


async def _delete_raw(settings: Settings, rows: int) -> float:
    seeded = await seed(settings.database_url, settings.storage_path, bots=1, rows=rows)
    conn = await asyncpg.connect(asyncpg_dsn(settings.database_url))
    try:
        started = time.perf_counter()
        for table in SERVICES:
            await conn.execute(f"DELETE FROM {table} WHERE bot_id = $1::uuid", seeded.bot_ids[0])
        return time.perf_counter() - started
    finally:
        await conn.close()


async def main(rows: int) -> None:
    async with throwaway_stack("bench", durable=True) as stack:
        settings, _env = stack.settings, stack.env
        peak = [0]
        workflow_seconds = await _delete_through_api(settings, rows, peak)
        raw_seconds = await _delete_raw(settings, rows)
    workflow_rate, raw_rate = rows / workflow_seconds, rows / raw_seconds
    print(f"rows per bot:        {rows:,}")
    print(f"workflow (API+worker): {workflow_rate:,.0f} rows/s ({workflow_seconds:.1f} s)")
    print(f"raw DELETE per table:  {raw_rate:,.0f} rows/s ({raw_seconds:.1f} s)")
    print(f"ratio workflow/raw:    {workflow_rate / raw_rate:.2f} (target >= 0.8)")
    print(f"worker peak RSS:       {peak[0] / 2**20:.0f} MB (target < 300 MB)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.deletion")
    parser.add_argument("--rows", type=int, default=1_000_000)
    asyncio.run(main(parser.parse_args().rows))
