"""`python -m bench.deletion [--rows N] [--rounds R] [--behind-nexus SERVICE]`: a bot deleted via the API and a
worker process, against a plain script doing the same work on the same database: one DELETE per table, an unlink of
every document file of the bot, and the DELETE of the bot row.

Through the API it deletes twice per round: with every service on its task queue in the gateway's namespace, and
with one service (knowledge by default) in a namespace of its own behind a Nexus endpoint, the endpoint created
with the real CLI as an operator does (devstack/search_team.py); the registry says which.

Each round seeds a fresh bot (same shape: `devstack.seed`) for each deletion and rotates which goes first, so
drift skews none. Prints rows/s of each per round, the ratio of each case's median to the plain script's (target
>= 0.85, 0.8 behind Nexus, or 0.9 from 10M rows), the Nexus case's over the all-queue one, and the worker's RSS
sampled every 100 ms for its whole life (target <= 300 MB). `--rows 10000000` is the large run.
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
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine
from temporalio.client import Client

from api.app import create_app
from bench.processes import running_services, service_process, worker_process
from devstack.search_team import SERVICE_NAMESPACE, create_nexus_endpoint
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
# A service behind Nexus pays an operation and a workflow in its namespace per slice (issue 46).
RATIO_TARGET_NEXUS = 0.8
RATIO_TARGET_LARGE = 0.9
LARGE_ROWS = 10_000_000
RSS_TARGET_MB = 300
# The service in a namespace of its own by default: the one whose part of a deletion takes longest (its documents'
# objects, deleted 1,000 keys a request), so every slice's Nexus operation lies on the deletion's critical path.
# Chat holds 70% of the rows, but deletes them in one slice while knowledge is still at its objects.
NEXUS_SERVICE = "knowledge"
NEXUS_ENDPOINT = "bench-behind-nexus"
PLAIN, QUEUES, NEXUS = "plain script", "all on task queues", "behind Nexus"
# How the service is registered in each case; each deletion reads the registry once, as it starts.
_REGISTERED = {
    QUEUES: text("UPDATE deletion_services SET task_queue = name, nexus_endpoint = NULL WHERE name = :name"),
    NEXUS: text("UPDATE deletion_services SET task_queue = NULL, nexus_endpoint = :endpoint WHERE name = :name"),
}


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


@contextlib.asynccontextmanager
async def _served_behind_nexus(settings: Settings, name: str) -> AsyncIterator[None]:
    """The service's second worker, in the team namespace on its default queue, behind an endpoint to it."""
    await asyncio.to_thread(create_nexus_endpoint, settings.temporal_address, NEXUS_ENDPOINT, SERVICE_NAMESPACE, name)
    process = service_process(settings, name, namespace=SERVICE_NAMESPACE)
    try:
        yield
    finally:
        process.terminate()
        process.wait(60)


async def _register(settings: Settings, case: str, name: str) -> None:
    engine = create_async_engine(settings.database_url)
    try:
        async with engine.begin() as conn:
            await conn.execute(_REGISTERED[case], {"name": name, "endpoint": NEXUS_ENDPOINT})
    finally:
        await engine.dispose()


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


async def main(rows: int, rounds: int, behind_nexus: str) -> None:
    samples = RssSamples()
    seconds: dict[str, list[float]] = {PLAIN: [], QUEUES: [], NEXUS: []}
    async with throwaway_stack("bench", durable=True) as stack:
        settings, client = stack.settings, stack.env.client
        await _unlimited_budget(settings)
        app = create_app(settings, temporal_client=client)
        async with (
            _served_behind_nexus(settings, behind_nexus),
            _worker_sampled(settings, samples),
            app.router.lifespan_context(app),
            httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://bench") as api,
        ):
            for round_number in range(rounds):
                cases, first = list(seconds), round_number % len(seconds)
                for case in cases[first:] + cases[:first]:
                    if case == PLAIN:
                        seconds[case].append(await _delete_plainly(settings, rows))
                    else:
                        await _register(settings, case, behind_nexus)
                        seconds[case].append(await _delete_through_api(api, client, settings, rows))
                    await _vacuum(settings)
                print(
                    f"round {round_number + 1}: "
                    + ", ".join(
                        f"{case} {rows / took[-1]:,.0f} rows/s ({took[-1]:.2f} s)" for case, took in seconds.items()
                    ),
                    flush=True,
                )
    rate = {case: rows / statistics.median(took) for case, took in seconds.items()}
    print(f"rows per bot:             {rows:,} ({rounds} rounds, rotating which deletion goes first)")
    print(f"behind Nexus:             {behind_nexus}, in namespace {SERVICE_NAMESPACE}; the others on task queues")
    print(f"plain script, rows+files: {rate[PLAIN]:,.0f} rows/s (median {statistics.median(seconds[PLAIN]):.2f} s)")
    large = rows >= LARGE_ROWS
    for case, target in ((QUEUES, RATIO_TARGET_SMALL), (NEXUS, RATIO_TARGET_NEXUS)):
        target = RATIO_TARGET_LARGE if large else target
        ratio = rate[case] / rate[PLAIN]
        print(
            f"{case + ':':<25} {rate[case]:,.0f} rows/s (median), {ratio:.2f} of the plain script"
            f" (target >= {target}): {_met(ratio >= target)}"
        )
    print(f"{NEXUS} over {QUEUES}: {rate[NEXUS] / rate[QUEUES]:.2f}")
    peak = samples.peak_mb
    print(
        f"worker RSS, {len(samples.values)} samples every 100 ms: peak {peak:.0f} MB"
        f" (target <= {RSS_TARGET_MB} MB): {_met(0 < peak <= RSS_TARGET_MB)}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.deletion")
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows per bot; 10000000 is the large run")
    parser.add_argument("--rounds", type=int, help="default: 4, or 1 above 2,000,000 rows")
    parser.add_argument(
        "--behind-nexus",
        choices=[service.name for service in SERVICES],
        default=NEXUS_SERVICE,
        help=f"the service in a namespace of its own in the Nexus case (default: {NEXUS_SERVICE})",
    )
    args = parser.parse_args()
    # Four rounds: two with each side first; single rounds on the shared 2 cores moved by up to 0.4 in ratio.
    asyncio.run(main(args.rows, args.rounds or (4 if args.rows <= 2_000_000 else 1), args.behind_nexus))
