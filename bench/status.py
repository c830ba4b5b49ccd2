"""`python -m bench.status [--requests N] [--rounds R] [--against CHECKOUT]`: what `GET /bots/{id}/deletion` costs.

One paused bot deletion, as the status API sees it mid-run: its request recorded (`paused`, since PostgreSQL is
where the status is read), a progress row per service, and an open run publishing `paused` (on a queue no worker
polls: only the status is measured). The sides, each timed over N sequential keep-alive GETs per round, in
interleaved rounds so that drift skews none:

- `floor`: the statements the route needs, run from this process on one asyncpg connection (the key check, the
  request record, the progress by service): what any status answer costs PostgreSQL, without HTTP or Python's
  share of the API;
- `ours`: `python -m api` of this checkout;
- `before` (with `--against`): `python -m api` of another checkout (say, a `git worktree` of the commit before a
  change) on the same stack and database, so a change of the status path is measured against what it replaced.

Prints p50/p90/p99 per side, each API's CPU per request (its process's user+system time, psutil), their ratios to
the floor, and with `--against` the target: ours no slower than before, at p50 and in CPU per request.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg
import httpx
from temporalio.client import Client

from api.accounts.keys import account_of_key_sql
from api.security import hash_api_key
from bench.processes import Served, cpu_seconds, served_api
from devstack.seed import asyncpg_dsn, seed
from devstack.throwaway import throwaway_stack
from lifecycle.deletion.workflow_types import bot_deletion_id, deletion_search_attributes
from lifecycle.settings import Settings
from lifecycle.statuses import DeletionState
from services.catalog import SERVICES

WARM_UP = 50

_RECORD = "SELECT * FROM deletion_requests WHERE workflow_id = $1"
_PROGRESS = (
    "SELECT service, sum(deleted), sum(total), coalesce(sum(rows_per_second) FILTER (WHERE NOT done), 0),"
    " coalesce(sum(greatest(total - deleted, 0)) FILTER (WHERE NOT done), 0),"
    " array_agg(DISTINCT throttled) FILTER (WHERE NOT done)"
    " FROM deletion_progress WHERE workflow_id = ANY($1::text[]) GROUP BY service ORDER BY service"
)


def _met(ok: bool) -> str:
    return "met" if ok else "NOT met"


@dataclass
class Side:
    name: str
    latencies: list[float] = field(default_factory=list)
    cpu: float = 0.0

    def p(self, percentile: int) -> float:
        return statistics.quantiles(self.latencies, n=100)[percentile - 1] * 1000

    @property
    def cpu_ms(self) -> float:
        return self.cpu * 1000 / max(1, len(self.latencies))


@dataclass(frozen=True)
class Subject:
    api_key: str
    bot_id: str


async def _paused_deletion(settings: Settings, client: Client) -> Subject:
    database_url = settings.database_url
    seeded = await seed(settings, bots=1, rows=10)
    bot_id = seeded.bot_ids[0]
    workflow_id = bot_deletion_id(bot_id)
    conn = await asyncpg.connect(asyncpg_dsn(database_url))
    try:
        # As the API and the run leave it (code before migration 0009 ignores `status` and asks Temporal).
        await conn.execute(
            "INSERT INTO deletion_requests (workflow_id, kind, account_id, bot_id, status, due_at)"
            " VALUES ($1, 'bot', $2, $3, 'paused', now() + $4::interval)",
            workflow_id,
            uuid.UUID(seeded.account_id),
            uuid.UUID(bot_id),
            settings.erasure_due_within,
        )
        for n, service in enumerate(service.name for service in SERVICES):
            await conn.execute(
                "INSERT INTO deletion_progress (workflow_id, service, deleted, total) VALUES ($1, $2, $3, $4)",
                workflow_id,
                service,
                1_000 * n,
                100_000,
            )
    finally:
        await conn.close()
    await client.start_workflow(
        "BotDeletion",
        id=workflow_id,
        task_queue=f"unpolled-{uuid.uuid4().hex[:8]}",
        search_attributes=deletion_search_attributes(seeded.account_id, bot_id, DeletionState.PAUSED),
    )
    return Subject(seeded.api_key, bot_id)


async def _api_round(served: Served, subject: Subject, side: Side, requests: int) -> None:
    headers = {"Authorization": f"Bearer {subject.api_key}"}
    path = f"/bots/{subject.bot_id}/deletion"
    async with httpx.AsyncClient(base_url=served.base_url, headers=headers) as http:
        for _ in range(WARM_UP):
            (await http.get(path)).raise_for_status()
        cpu_before = cpu_seconds(served.process)
        for _ in range(requests):
            started = time.perf_counter()
            answer = await http.get(path)
            side.latencies.append(time.perf_counter() - started)
            if answer.status_code != 200 or answer.json()["status"] != DeletionState.PAUSED:
                raise RuntimeError(f"{side.name}: {answer.status_code} {answer.text}")
        side.cpu += cpu_seconds(served.process) - cpu_before


async def _floor_round(database_url: str, subject: Subject, side: Side, requests: int) -> None:
    conn = await asyncpg.connect(asyncpg_dsn(database_url))
    key_hash = hash_api_key(subject.api_key)
    workflow_id = bot_deletion_id(subject.bot_id)
    try:
        for n in range(WARM_UP + requests):
            started = time.perf_counter()
            await conn.fetchval(account_of_key_sql("$1::text"), key_hash)
            await conn.fetchrow(_RECORD, workflow_id)
            await conn.fetch(_PROGRESS, [workflow_id])
            if n >= WARM_UP:
                side.latencies.append(time.perf_counter() - started)
    finally:
        await conn.close()


async def main(requests: int, rounds: int, against: Path | None) -> None:
    floor, ours, before = Side("floor"), Side("ours"), Side("before")
    async with throwaway_stack("bench-status") as stack:
        settings = stack.settings
        subject = await _paused_deletion(settings, stack.env.client)
        async with served_api(settings) as served_ours:
            if against is None:
                for _ in range(rounds):
                    await _floor_round(settings.database_url, subject, floor, requests)
                    await _api_round(served_ours, subject, ours, requests)
            else:
                async with served_api(settings, root=against) as served_before:
                    for _ in range(rounds):
                        await _floor_round(settings.database_url, subject, floor, requests)
                        await _api_round(served_before, subject, before, requests)
                        await _api_round(served_ours, subject, ours, requests)
    _print(requests, rounds, floor, ours, before if against is not None else None, against)


def _print(requests: int, rounds: int, floor: Side, ours: Side, before: Side | None, against: Path | None) -> None:
    print(
        f"GET /bots/{{id}}/deletion of a paused deletion: {rounds} interleaved rounds of {requests} sequential"
        f" keep-alive requests per side; API: python -m api (uvicorn); Temporal: in-memory dev server"
    )
    sides = [floor, *([before] if before is not None else []), ours]
    for side in sides:
        cpu = f"   CPU {side.cpu_ms:5.2f} ms/request" if side is not floor else ""
        print(
            f"{side.name:<7} {len(side.latencies):6d} ok   p50 {side.p(50):6.2f} ms   p90 {side.p(90):6.2f} ms"
            f"   p99 {side.p(99):6.2f} ms   p50/floor {side.p(50) / floor.p(50):5.2f}x{cpu}"
        )
    if before is None:
        print("(no --against: the code before the change was not measured, so no target is judged)")
        return
    print(f"before: {against}")
    p50_ratio, cpu_ratio = ours.p(50) / before.p(50), ours.cpu_ms / before.cpu_ms
    print(f"ours / before, p50: {p50_ratio:.2f}x (target <= 1.0): {_met(p50_ratio <= 1.0)}")
    print(f"ours / before, p99: {ours.p(99) / before.p(99):.2f}x (not a target)")
    print(f"ours / before, API CPU per request: {cpu_ratio:.2f}x (target <= 1.0): {_met(cpu_ratio <= 1.0)}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.status")
    parser.add_argument("--requests", type=int, default=500, help="GETs per side and round")
    parser.add_argument("--rounds", type=int, default=4, help="interleaved rounds")
    parser.add_argument(
        "--against", type=Path, help="another checkout whose `python -m api` is measured as `before` (same stack)"
    )
    args = parser.parse_args()
    asyncio.run(main(args.requests, args.rounds, args.against.resolve() if args.against else None))
