"""`python -m bench.neighbour [--rows N] [--budgets R,R]`: what a large deletion costs the product's own traffic.

A neighbour bot's traffic (bench.neighbour_traffic: 100 operations/s, an INSERT of a message and a read of its
latest 50 in the chat service's own database, from a process of its own) is measured in phases on one throwaway
stack, with the worker, the services and the API as in production:
- idle: no deletion, once before the budget phases and once after them (the baseline is both together, so that
  drift over the run, which moved one idle phase's p99 between 1.4 and 2.3 ms from run to run, skews neither side);
- one per budget: while a bot of --rows rows is deleted at that budget (default: the shipped default);
- unlimited: while another such bot is deleted with no budget.
Prints p50 and p99 of each phase with their ratios to idle (and the p99 of the INSERTs and the reads apart, the
CPU each process spent and the WAL and disk writes meanwhile), the deletion's rows/s during each phase, and how
long a live budget change (the budget doubled mid-run) took to show in the rows/s the status API reports.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import asyncpg
import httpx
import psutil

from api.app import create_app
from bench.cpu import CpuReading, StackCpu, temporal_dev_server
from bench.processes import running_services, worker_process
from devstack.seed import Seeded, asyncpg_dsn, seed
from devstack.throwaway import ThrowawayStack, throwaway_stack
from lifecycle.deletion.budget import DEFAULT_ROWS_PER_SECOND
from lifecycle.deletion.workflow_types import bot_deletion_id
from lifecycle.settings import Settings
from services.catalog import SERVICES
from services.runtime.database import service_database_url

ADMIN = "bench-admin-token-at-least-32-bytes-long"
ADMIN_HEADERS = {"Authorization": f"Bearer {ADMIN}"}
PHASE_SECONDS = 30.0
P99_RATIO_TARGET = 2.0
# Each neighbour operation slower than this is listed with its time in the phase, to see when slowness comes.
SLOW_MS = 50


def _percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=1000)[round(q * 1000) - 1]


def _chat_dsn(settings: Settings) -> str:
    """The chat service's own database, where a bot's messages live (services/chat)."""
    return asyncpg_dsn(service_database_url("chat", beside=settings.database_url))


async def _traffic(
    settings: Settings, bot_id: str, seconds: float, parts: StackCpu, conn: asyncpg.Connection
) -> list[float]:
    """The neighbour's latencies over `seconds`; prints its slow operations, and the CPU and I/O meanwhile."""
    cpu_before, io_before = parts.read(), await _io_reading(conn)
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.neighbour_traffic", _chat_dsn(settings), bot_id, str(seconds),
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, _ = await process.communicate()
    cpu, io_after = StackCpu.spent(cpu_before, parts.read()), await _io_reading(conn)
    operations = [(float(at), float(ms)) for at, ms in json.loads(out)]
    slow = [f"{at:.1f}s:{ms:.0f}ms" for at, ms in operations if ms > SLOW_MS]
    if slow:
        print(f"  operations over {SLOW_MS} ms ({len(slow)}): {' '.join(slow[:40])}", flush=True)
    print(f"  {_by_kind(operations)}", flush=True)
    print(f"  CPU meanwhile: {_cpu_line(cpu)}", flush=True)
    print(f"  I/O meanwhile: {_io_line(io_before, io_after)}", flush=True)
    return [ms for _, ms in operations]


async def _settle(settings: Settings) -> None:
    """After seeding: statistics fresh, dead rows gone, hint bits set, and the seeding's dirty pages and files written
    out, in the product's database and every service's, so that no phase measures an autovacuum, a first read's
    writes or a checkpoint of rows written before it. (Before, only the product's and the chat service's were: the
    other services' autovacuum could start during a phase.)"""
    for url in (settings.database_url, *(service_database_url(s.name, beside=settings.database_url) for s in SERVICES)):
        conn = await asyncpg.connect(asyncpg_dsn(url))
        try:
            await conn.execute("VACUUM ANALYZE")
        finally:
            await conn.close()
    conn = await asyncpg.connect(asyncpg_dsn(settings.database_url))
    try:
        await conn.execute("CHECKPOINT")
    finally:
        await conn.close()
    # The seeded document files too: the kernel would otherwise write them back during the phase.
    await asyncio.to_thread(os.sync)


async def _deleted(conn: asyncpg.Connection, workflow_id: str) -> int:
    query = "SELECT coalesce(sum(deleted), 0) FROM deletion_progress WHERE workflow_id = $1"
    return int(await conn.fetchval(query, workflow_id))


async def _watch_throttling(settings: Settings, workflow_id: str, phase_over: asyncio.Event) -> Counter[str]:
    """What the running deleters report as `throttled`, sampled every 0.2 s until the phase is over."""
    seen: Counter[str] = Counter()
    conn = await asyncpg.connect(asyncpg_dsn(settings.database_url))
    query = "SELECT coalesce(throttled, 'none') FROM deletion_progress WHERE workflow_id = $1 AND NOT done"
    try:
        while not phase_over.is_set():
            seen.update(row[0] for row in await conn.fetch(query, workflow_id))
            await asyncio.sleep(0.2)
    finally:
        await conn.close()
    return seen


async def _phase(
    api: httpx.AsyncClient,
    settings: Settings,
    conn: asyncpg.Connection,
    neighbour: str,
    seeded: Seeded,
    rows: int,
    budget: int | None,
    parts: StackCpu,
) -> tuple[list[float], float, str, str]:
    """Traffic while the seeded bot of `rows` is deleted at `budget`; returns latencies, rows/s, its id and key."""
    bot_id = seeded.bot_ids[0]
    (await api.put("/deletion-budget", json={"rows_per_second": budget}, headers=ADMIN_HEADERS)).raise_for_status()
    headers = {"Authorization": f"Bearer {seeded.api_key}", "Prefer": "respond-async"}
    (await api.delete(f"/bots/{bot_id}", headers=headers)).raise_for_status()
    workflow_id = bot_deletion_id(bot_id)
    for _ in range(1200):  # a minute at most for the first batch to commit
        if await _deleted(conn, workflow_id):
            break
        await asyncio.sleep(0.05)
    before, started = await _deleted(conn, workflow_id), time.perf_counter()
    # At unlimited the deletion may end before the phase does: the traffic stops with it.
    seconds = PHASE_SECONDS if budget is not None else min(PHASE_SECONDS, rows / 300_000)
    phase_over = asyncio.Event()
    watching = asyncio.create_task(_watch_throttling(settings, workflow_id, phase_over))
    latencies = await _traffic(settings, neighbour, seconds, parts, conn)
    rate = (await _deleted(conn, workflow_id) - before) / (time.perf_counter() - started)
    phase_over.set()
    seen = await watching
    shares = ", ".join(f"{name} {count / seen.total():.0%}" for name, count in seen.most_common())
    print(f"  throttled, in {seen.total()} samples of the deleters' progress: {shares or 'never sampled'}", flush=True)
    return latencies, rate, bot_id, seeded.api_key


async def _change_shows(api: httpx.AsyncClient, bot_id: str, key: str, budget: int) -> str:
    """How long a budget change took until the status API's rows/s came within 20% of the new budget, or why not."""
    headers = {"Authorization": f"Bearer {key}"}
    started = time.perf_counter()
    (await api.put("/deletion-budget", json={"rows_per_second": budget}, headers=ADMIN_HEADERS)).raise_for_status()
    status: dict[str, Any] = {}
    while time.perf_counter() - started < 30:
        status = (await api.get(f"/bots/{bot_id}/deletion", headers=headers)).json()
        if int(status["rows_per_second"] or 0) >= 0.8 * budget:
            return f"showed in the status API within {time.perf_counter() - started:.2f} s"
        if status["status"] == "completed":
            break
        await asyncio.sleep(0.05)
    return (
        f"did not show within {time.perf_counter() - started:.1f} s: last {status.get('rows_per_second')} rows/s,"
        f" throttled {status.get('throttled')}, status {status.get('status')}"
    )


async def _finish(api: httpx.AsyncClient, bot_id: str, key: str) -> None:
    (await api.put("/deletion-budget", json={"rows_per_second": None}, headers=ADMIN_HEADERS)).raise_for_status()
    headers = {"Authorization": f"Bearer {key}"}
    for _ in range(3000):  # ten minutes at most
        if (await api.get(f"/bots/{bot_id}/deletion", headers=headers)).json()["status"] == "completed":
            return
        await asyncio.sleep(0.2)
    raise TimeoutError(f"the deletion of bot {bot_id} did not complete")


async def _io_reading(conn: asyncpg.Connection) -> tuple[float, float, int]:
    """WAL bytes the server wrote so far, and the machine's disk writes (bytes, requests)."""
    wal = float(await conn.fetchval("SELECT wal_bytes FROM pg_stat_wal"))
    disks = psutil.disk_io_counters()
    return wal, float(disks.write_bytes) if disks else 0.0, disks.write_count if disks else 0


def _io_line(before: tuple[float, float, int], after: tuple[float, float, int]) -> str:
    mb = 1024 * 1024
    return (
        f"WAL {(after[0] - before[0]) / mb:.1f} MB, disk writes {(after[1] - before[1]) / mb:.1f} MB in"
        f" {after[2] - before[2]:,} requests"
    )


def _by_kind(operations: list[tuple[float, float]]) -> str:
    """p99 of the INSERTs and of the reads apart (the traffic alternates them, an INSERT first)."""
    inserts = [ms for n, (_, ms) in enumerate(operations) if n % 2 == 0]
    reads = [ms for n, (_, ms) in enumerate(operations) if n % 2 == 1]
    return f"p99 of the INSERTs {_percentile(inserts, 0.99):.2f} ms, of the reads {_percentile(reads, 0.99):.2f} ms"


def _cpu_line(spent: CpuReading) -> str:
    by_part = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in spent.by_part.items())
    return f"{by_part}; the whole machine {spent.machine:.1f} CPU-s"


def _stack_cpu(
    stack: ThrowawayStack, worker: subprocess.Popen[bytes], services: dict[str, subprocess.Popen[bytes]]
) -> StackCpu:
    """The parts whose CPU a phase reports: PostgreSQL (its backends included), Temporal, the gateway's worker and
    each service's process."""
    assert stack.postgres.process is not None
    processes = {"PostgreSQL": stack.postgres.process.pid, "worker": worker.pid}
    processes.update({name: process.pid for name, process in services.items()})
    parts: dict[str, Callable[[], psutil.Process | None]] = {"Temporal": temporal_dev_server}
    parts.update({name: functools.partial(psutil.Process, pid) for name, pid in processes.items()})
    return StackCpu(parts)


def _line(name: str, latencies: list[float], idle: list[float] | None, rate: float | None) -> str:
    p50, p99 = _percentile(latencies, 0.5), _percentile(latencies, 0.99)
    line = f"{name:<10} p50 {p50:6.2f} ms  p99 {p99:7.2f} ms"
    if idle is not None:
        line += f"  (x{p50 / _percentile(idle, 0.5):.2f}, x{p99 / _percentile(idle, 0.99):.2f} of idle)"
    if rate is not None:
        line += f"  deletion {rate:,.0f} rows/s"
    return line


async def main(rows: int, budgets: list[int]) -> None:
    async with throwaway_stack("bench-neighbour", admin_token=ADMIN, durable=True) as stack:
        settings, client = stack.settings, stack.env.client
        worker = worker_process(settings)
        app = create_app(settings, temporal_client=client)
        conn = await asyncpg.connect(asyncpg_dsn(settings.database_url))
        limited: dict[int, list[float]] = {}
        try:
            async with running_services(settings) as services, app.router.lifespan_context(app):
                parts = _stack_cpu(stack, worker, services)
                transport = httpx.ASGITransport(app=app)
                async with httpx.AsyncClient(transport=transport, base_url="http://bench", timeout=60) as api:
                    seeded = await seed(settings, bots=1, rows=10_000)
                    neighbour = seeded.bot_ids[0]
                    # Every bot a phase deletes is there from the start, idle phase included: the neighbour's
                    # queries meet the same tables in every phase, and only the deletion differs. (Seeded just
                    # before its phase instead, a bot's rows lay above all of the neighbour's in the id index,
                    # and the neighbour's "latest 50" read walked them for seconds: a bulk load's cost, not a
                    # deletion's.)
                    to_delete = [await seed(settings, bots=1, rows=rows) for _ in range(len(budgets) + 1)]
                    await _settle(settings)
                    before = await _traffic(settings, neighbour, PHASE_SECONDS, parts, conn)
                    print(_line("idle", before, None, None), flush=True)
                    rates: dict[int, float] = {}
                    for budget in budgets:
                        bot = to_delete.pop()
                        latencies, rates[budget], bot_id, key = await _phase(
                            api, settings, conn, neighbour, bot, rows, budget, parts
                        )
                        limited[budget] = latencies
                        print(_line(f"{budget:,}/s", latencies, before, rates[budget]), flush=True)
                        shown = await _change_shows(api, bot_id, key, 2 * budget)
                        print(f"  a live change to {2 * budget:,} rows/s {shown}")
                        await _finish(api, bot_id, key)
                    # The deleted rows vacuumed and written out, as the seeding's were before the first idle phase.
                    await _settle(settings)
                    after = await _traffic(settings, neighbour, PHASE_SECONDS, parts, conn)
                    print(_line("idle again", after, before, None), flush=True)
                    idle = before + after
                    print(_line("idle, both", idle, None, None), flush=True)
                    for budget, latencies in limited.items():
                        print(_line(f"{budget:,}/s", latencies, idle, rates[budget]), flush=True)
                    unlimited, unlimited_rate, bot_id, key = await _phase(
                        api, settings, conn, neighbour, to_delete.pop(), rows, None, parts
                    )
                    print(_line("unlimited", unlimited, idle, unlimited_rate), flush=True)
                    await _finish(api, bot_id, key)
        finally:
            await conn.close()
            worker.terminate()
            worker.wait(60)
    for budget, latencies in limited.items():
        # Against both idle phases together.
        ratio = _percentile(latencies, 0.99) / _percentile(idle, 0.99)
        met = "met" if ratio <= P99_RATIO_TARGET else "NOT met"
        default = " (the default)" if budget == DEFAULT_ROWS_PER_SECOND else ""
        print(f"neighbour p99 at {budget:,} rows/s{default} / idle: {ratio:.2f} (target <= {P99_RATIO_TARGET}): {met}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.neighbour")
    parser.add_argument("--rows", type=int, default=2_000_000, help="rows of each deleted bot")
    parser.add_argument(
        "--budgets",
        type=lambda value: [int(part) for part in value.split(",")],
        default=[DEFAULT_ROWS_PER_SECOND],
        help="rows/s of the budget phases, comma-separated (default: the shipped default)",
    )
    args = parser.parse_args()
    asyncio.run(main(args.rows, args.budgets))
