"""`python -m bench.deletion [--rows N] [--rounds R]`: a bot deleted via the API and a worker process, against a
plain script doing the same work on the same database: one DELETE per table, an unlink of every document
file of the bot, and the DELETE of the bot row.

Each round seeds a fresh bot (same shape: `devstack.seed`) for each side and alternates which side goes first,
so drift skews neither. Prints rows/s of each side per round, the ratio of the medians (target >= 0.85, or
0.9 from 10M rows) and the
worker's RSS sampled every 100 ms for its whole life (target <= 300 MB). `--rows 10000000` is the large run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import asyncpg
import httpx
import psutil
from sqlalchemy.ext.asyncio import create_async_engine
from temporalio.client import Client

from api.app import create_app
from bench.processes import running_services, worker_process
from devstack.seed import asyncpg_dsn, seed
from devstack.throwaway import throwaway_stack
from lifecycle.deletion.budget import set_budget
from lifecycle.deletion.workflow_types import bot_deletion_id
from lifecycle.object_keys import DOCUMENTS_PREFIX
from lifecycle.object_store import ObjectStore
from lifecycle.settings import Settings
from services.catalog import SERVICES
from services.runtime.database import service_database_url

# Targets of the ratio. On 1M rows the workflow's fixed cost at the end, which the plain script does not pay (the
# independent check and the signed receipt), weighs on it more than on larger deletions.
RATIO_TARGET_SMALL = 0.85
RATIO_TARGET_LARGE = 0.9
LARGE_ROWS = 10_000_000
RSS_TARGET_MB = 300


def _met(ok: bool) -> str:
    return "met" if ok else "NOT met"


@dataclass
class RssSamples:
    values: list[int] = field(default_factory=list)

    @property
    def peak_mb(self) -> float:
        return max(self.values, default=0) / 2**20


async def _sample_rss(pid: int, samples: RssSamples, stop: asyncio.Event) -> None:
    process = psutil.Process(pid)
    while not stop.is_set():
        with contextlib.suppress(psutil.NoSuchProcess):
            samples.values.append(process.memory_info().rss)
        await asyncio.sleep(0.1)


@contextlib.asynccontextmanager
async def _worker_sampled(settings: Settings, samples: RssSamples) -> AsyncIterator[None]:
    worker = worker_process(settings)
    stop = asyncio.Event()
    sampler = asyncio.create_task(_sample_rss(worker.pid, samples, stop))
    try:
        async with running_services(settings):
            await asyncio.sleep(3)  # let the workers connect and poll
            yield
    finally:
        stop.set()
        await sampler
        worker.terminate()
        worker.wait(60)


async def _delete_through_api(api: httpx.AsyncClient, client: Client, settings: Settings, rows: int) -> float:
    seeded = await seed(settings, bots=1, rows=rows)
    bot_id = seeded.bot_ids[0]
    # respond-async: the timing ends at the workflow's completion either way, never at an inline answer.
    headers = {"Authorization": f"Bearer {seeded.api_key}", "Prefer": "respond-async"}
    started = time.perf_counter()
    (await api.delete(f"/bots/{bot_id}", headers=headers)).raise_for_status()
    await client.get_workflow_handle(bot_deletion_id(bot_id)).result()
    return time.perf_counter() - started


async def _delete_plainly(settings: Settings, rows: int) -> float:
    """The baseline: what the deletion must do, as one plain script on one connection."""
    seeded = await seed(settings, bots=1, rows=rows)
    bot_id = seeded.bot_ids[0]
    store = ObjectStore(settings)
    conns = {
        service.name: await asyncpg.connect(
            asyncpg_dsn(service_database_url(service.name, beside=settings.database_url))
        )
        for service in SERVICES
    }
    conn = await asyncpg.connect(asyncpg_dsn(settings.database_url))
    try:
        started = time.perf_counter()
        for service in SERVICES:
            for table in service.seeds:
                if service.uses_objects:
                    keys = await conns[service.name].fetch(
                        f"DELETE FROM {table} WHERE bot_id = $1::uuid RETURNING storage_key", bot_id
                    )
                    # The same DeleteObjects requests of at most 1,000 keys as the service's.
                    await store.delete([f"{DOCUMENTS_PREFIX}{key}" for (key,) in keys])
                else:
                    await conns[service.name].execute(f"DELETE FROM {table} WHERE bot_id = $1::uuid", bot_id)
        # The workflow removes the bot row last.
        await conn.execute("DELETE FROM bots WHERE id = $1::uuid", bot_id)
        return time.perf_counter() - started
    finally:
        for opened in (conn, *conns.values()):
            await opened.close()
        await store.close()


async def _vacuum(settings: Settings) -> None:
    """Clear the dead rows of the last deletion, so every measurement starts from the same table state."""
    for service in SERVICES:
        conn = await asyncpg.connect(asyncpg_dsn(service_database_url(service.name, beside=settings.database_url)))
        try:
            for table in service.seeds:
                await conn.execute(f"VACUUM {table}")
        finally:
            await conn.close()


async def _unlimited_budget(settings: Settings) -> None:
    """The bench measures the services' deletes themselves: no deletion budget, and so no back-off either."""
    engine = create_async_engine(settings.database_url)
    try:
        async with engine.begin() as conn:
            await set_budget(conn, None)
    finally:
        await engine.dispose()


async def main(rows: int, rounds: int) -> None:
    samples = RssSamples()
    workflow_seconds: list[float] = []
    plain_seconds: list[float] = []
    async with throwaway_stack("bench", durable=True) as stack:
        settings, client = stack.settings, stack.env.client
        await _unlimited_budget(settings)
        app = create_app(settings, temporal_client=client)
        async with _worker_sampled(settings, samples), app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://bench") as api:
                for round_number in range(rounds):
                    plain_first = round_number % 2 == 1
                    if plain_first:
                        plain_seconds.append(await _delete_plainly(settings, rows))
                        await _vacuum(settings)
                    workflow_seconds.append(await _delete_through_api(api, client, settings, rows))
                    await _vacuum(settings)
                    if not plain_first:
                        plain_seconds.append(await _delete_plainly(settings, rows))
                        await _vacuum(settings)
                    print(
                        f"round {round_number + 1}: workflow {rows / workflow_seconds[-1]:,.0f} rows/s"
                        f" ({workflow_seconds[-1]:.2f} s), plain script {rows / plain_seconds[-1]:,.0f} rows/s"
                        f" ({plain_seconds[-1]:.2f} s)",
                        flush=True,
                    )
    workflow_rate = rows / statistics.median(workflow_seconds)
    plain_rate = rows / statistics.median(plain_seconds)
    ratio = workflow_rate / plain_rate
    print(f"rows per bot:            {rows:,} ({rounds} rounds, alternating which side goes first)")
    print(f"workflow (API+worker):   {workflow_rate:,.0f} rows/s (median)")
    print(f"plain script, rows+files: {plain_rate:,.0f} rows/s (median)")
    target = RATIO_TARGET_LARGE if rows >= LARGE_ROWS else RATIO_TARGET_SMALL
    print(f"ratio workflow/plain:    {ratio:.2f} (target >= {target}): {_met(ratio >= target)}")
    peak = samples.peak_mb
    print(
        f"worker RSS, {len(samples.values)} samples every 100 ms: peak {peak:.0f} MB"
        f" (target <= {RSS_TARGET_MB} MB): {_met(0 < peak <= RSS_TARGET_MB)}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.deletion")
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows per bot; 10000000 is the large run")
    parser.add_argument("--rounds", type=int, help="default: 4, or 1 above 2,000,000 rows")
    args = parser.parse_args()
    # Four rounds: two with each side first; single rounds on the shared 2 cores moved by up to 0.4 in ratio.
    asyncio.run(main(args.rows, args.rounds or (4 if args.rows <= 2_000_000 else 1)))
