"""Benchmark: site creation through the API and Temporal against the same steps run directly.

`python -m bench.sites [--rounds N] [--against CHECKOUT]` starts its own PostgreSQL and Temporal dev server, and the API
(`python -m api`) and a worker (`python worker.py`) as child processes, as production runs them; then it runs N
interleaved rounds (the four steps called directly, then POST until active, alternating, so drift skews neither
side) and prints both sides' median and p90, the orchestration overhead (end-to-end minus direct in each round)
with where one round's time went, and the ratio of the medians, POST->active over direct (target <= 1.6 with the
pool warm). Then 100 sites at once, through the API and with the steps called directly, each with the CPU each
part and the whole machine spent: the ratio of the machine's CPU per site, through the API over direct, is the
orchestration's cost in CPU. All of it twice: with the site server's warm pool empty (every database made by
CREATE DATABASE), then with it warm, its target set to 100 for the run (lifecycle/sites/pool.py); the load average
is printed with it. The targets are ratios measured in one run: the machine's speed varies too much between days
for an absolute time to mean anything.

`--against CHECKOUT` also runs that checkout's API and worker on the same stack, on a site queue of their own: each
round runs the direct steps and then both sides, each first in turn, and each burst runs once per side; it prints
ours over theirs for the POST->active median and for the CPU ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import os
import statistics
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC
from pathlib import Path

import httpx
import psutil
from sqlalchemy import text
from temporalio.api.history.v1 import HistoryEvent, MarkerRecordedEventAttributes
from temporalio.client import Client
from temporalio.testing import ActivityEnvironment

from activities.resources import ActivityResources
from activities.sites.steps import SiteActivities
from bench.cpu import CpuReading, StackCpu, temporal_dev_server
from bench.processes import PROJECT_ROOT, STOP_TIMEOUT, served_api, worker_process
from devstack.throwaway import throwaway_stack
from lifecycle.sites.contracts import SITE_STEPS, SiteRef
from lifecycle.sites.servers import DEFAULT_SERVER
from lifecycle.sites.workflow_types import site_creation_id

ROUNDS = 30
# POST->active over the direct steps, medians, with the pool warm.
RATIO_TARGET = 1.6
CONCURRENT = 100
ADMIN = "bench-admin-token-at-least-32-bytes-long"
# Only tells the bench when to read the activation time; the time itself is the one the database recorded,
# so a slower poll costs no accuracy (and the API answering it is its own process).
POLL_SECONDS = 0.05


def _domain() -> str:
    return f"bench-{uuid.uuid4().hex[:12]}.example.com"


async def _until_active(api: httpx.AsyncClient, headers: dict[str, str], site_id: str) -> None:
    # Polling, as a client of the API would; the interval is small against a creation's duration.
    while (await api.get(f"/sites/{site_id}", headers=headers)).json()["status"] != "active":  # noqa: ASYNC110
        await asyncio.sleep(POLL_SECONDS)


@dataclass(frozen=True)
class Round:
    seconds: float
    site_id: str
    posted_at: float


async def _end_to_end(resources: ActivityResources, api: httpx.AsyncClient, headers: dict[str, str]) -> Round:
    """From sending the POST until activate_site's transaction set the row active (its updated_at)."""
    started = time.time()  # the wall clock, as PostgreSQL's now() and Temporal's event times on this machine
    response = await api.post("/sites", json={"name": "Bench", "domain": _domain()}, headers=headers)
    site_id = response.json()["id"]
    await _until_active(api, headers, site_id)
    async with resources.sessionmaker() as session:
        activated = (
            await session.execute(
                text("SELECT extract(epoch FROM updated_at) FROM sites WHERE id = :id"), {"id": uuid.UUID(site_id)}
            )
        ).scalar_one()
    return Round(float(activated) - started, site_id, started)


async def _critical_path(client: Client, run: Round) -> str:
    """Where one end-to-end round's time went, from its history: the workflow tasks up to the one whose local
    activity marked the site active, and the regular activities scheduled before it."""
    history = await client.get_workflow_handle(site_creation_id(run.site_id)).fetch_history()

    def at(event_id: int) -> float:
        return history.events[event_id - 1].event_time.ToDatetime(tzinfo=UTC).timestamp() * 1000

    activation = _activation_event(history.events)
    waiting = running = 0.0
    tasks = activities = 0
    for event in history.events[: activation - 1]:
        if event.HasField("activity_task_scheduled_event_attributes"):
            activities += 1
        if event.HasField("workflow_task_completed_event_attributes"):
            attributes = event.workflow_task_completed_event_attributes
            tasks += 1
            waiting += at(attributes.started_event_id) - at(attributes.scheduled_event_id)
            running += at(event.event_id) - at(attributes.started_event_id)
    to_start = at(1) - run.posted_at * 1000
    return (
        f"POST to run started {to_start:.1f} ms; {tasks} workflow tasks up to activation: {waiting:.1f} ms waiting"
        f" for the worker, {running:.1f} ms from started to completed; {activities} activities scheduled"
    )


def _activation_event(events: Sequence[HistoryEvent]) -> int:
    """The event that marked the site active: the first try's marker, or, when the first try gave way to the step
    as a regular activity (workflows/sites/first_try.py), that activity's completion."""
    scheduled = None
    for event in events:
        marker = event.marker_recorded_event_attributes if event.HasField("marker_recorded_event_attributes") else None
        if marker is not None and _local_activity_type(marker) == "activate_site":
            return event.event_id
        if event.activity_task_scheduled_event_attributes.activity_type.name == "activate_site":
            scheduled = event.event_id
        if scheduled and event.activity_task_completed_event_attributes.scheduled_event_id == scheduled:
            return event.event_id
    raise LookupError("the site was never marked active")


def _local_activity_type(marker: MarkerRecordedEventAttributes) -> str | None:
    if marker.marker_name != "core_local_activity":
        return None
    return str(json.loads(marker.details["data"].payloads[0].data)["activity_type"])


async def _direct(resources: ActivityResources, activities: SiteActivities, account_id: str) -> float:
    site_id = str(uuid.uuid4())
    started = time.perf_counter()
    async with resources.sessionmaker.begin() as session:
        await session.execute(
            text(
                "INSERT INTO sites (id, account_id, name, tagline, domain, status, steps) VALUES"
                " (:id, :account, 'Bench', '', :domain, 'provisioning', CAST(:steps AS jsonb))"
            ),
            {
                "id": uuid.UUID(site_id),
                "account": uuid.UUID(account_id),
                "domain": _domain(),
                "steps": json.dumps(dict.fromkeys(SITE_STEPS, "pending")),
            },
        )
    site = SiteRef(site_id)
    # ActivityEnvironment gives the steps the activity context they heartbeat into, and nothing else.
    run = ActivityEnvironment().run
    await run(activities.save_site_metadata, site)
    await asyncio.gather(run(activities.create_site_filesystem, site), run(activities.create_site_database, site))
    await run(activities.bootstrap_site, site)
    await run(activities.activate_site, site)
    return time.perf_counter() - started


async def _all_active(resources: ActivityResources, ids: list[str]) -> None:
    wanted = [uuid.UUID(i) for i in ids]
    while True:
        async with resources.sessionmaker() as session:
            active = (
                await session.execute(
                    text("SELECT count(*) FROM sites WHERE id = ANY(:ids) AND status = 'active'"),
                    {"ids": wanted},
                )
            ).scalar_one()
        if active == len(ids):
            return
        await asyncio.sleep(0.05)


def _met(ok: bool) -> str:
    return "met" if ok else "NOT met"


def _p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10)[8]


@dataclass
class Side:
    """One checkout's API and worker, each creation of it on its own site queue; its account's headers."""

    name: str
    api: httpx.AsyncClient
    cpu: StackCpu
    headers: dict[str, str] = field(default_factory=dict)
    account_id: str = ""


async def main(rounds: int, against: Path | None) -> None:
    async with throwaway_stack("bench-sites", admin_token=ADMIN) as stack:
        # Each side's account holds every site it makes, with the pool empty, then warm: a warm-up, one a round and
        # the burst of each side, and as many of the direct steps.
        settings = stack.settings.model_copy(update={"max_sites_per_account": 2 * (2 * (rounds + 1) + 2 * CONCURRENT)})
        # The other checkout builds on a site queue and a Worker Deployment of its own, so that each side's
        # creations run on its own code only.
        other = settings.model_copy(
            update={
                "site_task_queue": f"{settings.site_task_queue}-against",
                "worker_deployment": "bench-against",
                "worker_roles": "sites",
            }
        )
        resources = ActivityResources.create(settings, stack.env.client)
        workers = [worker_process(settings)] + ([worker_process(other, against)] if against else [])
        assert stack.postgres.process is not None
        postgres_pid = stack.postgres.process.pid
        try:
            async with contextlib.AsyncExitStack() as opened:
                sides = []
                checkouts = [("ours", settings, PROJECT_ROOT)] + (
                    [(f"against {against}", other, against)] if against else []
                )
                for (name, side_settings, root), worker in zip(checkouts, workers, strict=True):
                    served = await opened.enter_async_context(served_api(side_settings, root=root))
                    api = await opened.enter_async_context(httpx.AsyncClient(base_url=served.base_url, timeout=60))
                    cpu = StackCpu(
                        {
                            "Temporal dev server": temporal_dev_server,
                            "worker": functools.partial(psutil.Process, worker.pid),
                            "PostgreSQL": functools.partial(psutil.Process, postgres_pid),
                            "API": functools.partial(psutil.Process, served.process.pid),
                        }
                    )
                    sides.append(Side(name, api, cpu))
                await _rounds_and_burst(resources, stack.env.client, sides, rounds)
        finally:
            for worker in workers:
                worker.terminate()
                worker.wait(STOP_TIMEOUT)
            await resources.close()


async def _rounds_and_burst(resources: ActivityResources, client: Client, sides: list[Side], rounds: int) -> None:
    for side in sides:
        created = await side.api.post(
            "/accounts", json={"name": "Bench", "email": "bench@example.com"}, headers=_ADMIN_HEADERS
        )
        account = created.json()
        side.headers, side.account_id = {"Authorization": f"Bearer {account['api_key']}"}, account["id"]
        await _end_to_end(resources, side.api, side.headers)  # warm-up: connections, worker caches
    activities = SiteActivities(resources)
    await _direct(resources, activities, sides[0].account_id)
    # Each side of the comparison twice: with the server's warm pool empty (every database made by CREATE
    # DATABASE, as before the pool), then warm, its target raised to the burst's size for the run.
    for label, target in (("empty pool", 0), ("warm pool", CONCURRENT)):
        await _pool_at(sides[0].api, target)
        print(f"--- {label} (pool_target {target})")
        medians = await _rounds(resources, client, sides, activities, rounds, judged=target > 0)
        await _pool_at(sides[0].api, target)
        direct = await _direct_burst(resources, activities, sides[0])
        cpu_ratios = []
        for side in sides:
            await _pool_at(sides[0].api, target)
            through_api = await _burst(resources, side)
            cpu_ratios.append(through_api / direct)
            print(f"[{side.name}] the burst's machine CPU per site, through the API over direct: {cpu_ratios[-1]:.2f}")
        if len(sides) > 1:
            print(
                f"ours / {sides[1].name}: POST->active median {medians[0] / medians[1]:.2f},"
                f" the burst's CPU ratio {cpu_ratios[0] / cpu_ratios[1]:.2f}"
            )


_ADMIN_HEADERS = {"Authorization": f"Bearer {ADMIN}"}


async def _pool_at(api: httpx.AsyncClient, target: int) -> None:
    """The server's pool target set, and its pool refilled (or emptied) to it, before anything is measured."""
    answer = await api.patch(f"/site-db-servers/{DEFAULT_SERVER}", json={"pool_target": target}, headers=_ADMIN_HEADERS)
    answer.raise_for_status()
    started = time.perf_counter()
    while True:
        servers = (await api.get("/site-db-servers", headers=_ADMIN_HEADERS)).json()["servers"]
        ready = {server["name"]: server["pool_ready"] for server in servers}[DEFAULT_SERVER]
        if ready == target:
            break
        await asyncio.sleep(0.2)
    print(f"pool at its target of {target} after {time.perf_counter() - started:.1f} s")


async def _rounds(
    resources: ActivityResources,
    client: Client,
    sides: list[Side],
    activities: SiteActivities,
    rounds: int,
    *,
    judged: bool,
) -> list[float]:
    """Each side's POST->active median; every round runs the direct steps, then each side, in turn first."""
    direct: list[float] = []
    runs: list[list[Round]] = [[] for _ in sides]
    for number in range(rounds):
        direct.append(await _direct(resources, activities, sides[0].account_id))
        order = list(range(len(sides)))
        for index in order if number % 2 == 0 else order[::-1]:
            runs[index].append(await _end_to_end(resources, sides[index].api, sides[index].headers))
    direct_median = statistics.median(direct)
    print(f"{rounds} interleaved rounds (direct, then end to end)")
    print(f"four steps, called directly:   median {direct_median * 1000:.1f} ms, p90 {_p90(direct) * 1000:.1f} ms")
    medians = []
    for side, side_runs in zip(sides, runs, strict=True):
        e2e = [run.seconds for run in side_runs]
        e2e_median = statistics.median(e2e)
        medians.append(e2e_median)
        # Each round's own difference: the two sides of a round ran back to back, so drift between rounds (the
        # machine's other load) cancels out of it, which it does not out of the difference of the two medians.
        overheads = [(a - b) * 1000 for a, b in zip(e2e, direct, strict=True)]
        overhead = statistics.median(overheads)
        print(
            f"[{side.name}] end to end, POST until active: median {e2e_median * 1000:.1f} ms,"
            f" p90 {_p90(e2e) * 1000:.1f} ms"
        )
        ratio = e2e_median / direct_median
        if not judged:
            verdict = ""
        elif rounds < ROUNDS:
            verdict = f" (not judged below {ROUNDS} rounds)"
        else:
            verdict = f" (target <= {RATIO_TARGET}): {_met(ratio <= RATIO_TARGET)}"
        print(f"[{side.name}] ratio end-to-end/direct (medians): {ratio:.2f}{verdict}")
        print(
            f"[{side.name}] orchestration overhead, end to end minus direct per round: median {overhead:.1f} ms, p90"
            f" {_p90(overheads):.1f} ms"
        )
        median_run = sorted(side_runs, key=lambda run: run.seconds)[len(side_runs) // 2]
        print(f"[{side.name}] the median end-to-end round: {await _critical_path(client, median_run)}")
    return medians


async def _burst(resources: ActivityResources, side: Side) -> float:
    """100 creations at once through the side's API; the whole machine's CPU-seconds per site."""
    before = side.cpu.read()
    started = time.perf_counter()
    responses = await asyncio.gather(
        *(
            side.api.post("/sites", json={"name": "Crowd", "domain": _domain()}, headers=side.headers)
            for _ in range(CONCURRENT)
        )
    )
    await _all_active(resources, [r.json()["id"] for r in responses])
    elapsed = time.perf_counter() - started
    spent = StackCpu.spent(before, side.cpu.read())
    print(f"[{side.name}] {CONCURRENT} sites started at once: all active after {elapsed:.2f} s")
    return _print_cpu(spent)


async def _direct_burst(resources: ActivityResources, activities: SiteActivities, side: Side) -> float:
    """The four steps of 100 sites called directly at once, in this process; the machine's CPU-seconds per site."""
    before = side.cpu.read()
    started = time.perf_counter()
    await asyncio.gather(*(_direct(resources, activities, side.account_id) for _ in range(CONCURRENT)))
    elapsed = time.perf_counter() - started
    print(f"[direct] {CONCURRENT} sites' steps at once: done after {elapsed:.2f} s")
    return _print_cpu(StackCpu.spent(before, side.cpu.read()))


def _print_cpu(spent: CpuReading) -> float:
    """Prints where a burst's CPU went; returns the whole machine's CPU-seconds per site."""
    cores = psutil.cpu_count() or 1
    by_part = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in spent.by_part.items())
    print(
        f"  CPU spent meanwhile: {by_part}; the whole machine {spent.machine:.1f} CPU-s"
        f" ({spent.machine * 1000 / CONCURRENT:.0f} ms a site), which {cores} cores need at least"
        f" {spent.machine / cores:.1f} s to run; load average {os.getloadavg()[0]:.1f}"
    )
    return spent.machine / CONCURRENT


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.sites")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="interleaved rounds (30 to judge)")
    parser.add_argument(
        "--against", type=Path, help="another checkout whose API and worker run beside ours, interleaved with them"
    )
    args = parser.parse_args()
    asyncio.run(main(args.rounds, args.against.resolve() if args.against else None))
