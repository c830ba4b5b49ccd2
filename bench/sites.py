"""Benchmark: site creation through the API and Temporal against the same steps run directly.

`python -m bench.sites [--rounds N]` starts its own PostgreSQL and Temporal dev server, and the API
(`python -m api`) and a worker (`python worker.py`) as child processes, as production runs them; then it
runs N interleaved rounds (the four steps called directly, then POST until active, alternating, so drift skews
neither side) and prints both sides' median and p90, the orchestration overhead (end-to-end minus direct;
target <= 50 ms at the median), the ratio, and how long 100 concurrent creations take to become active
(target <= 10 s).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
import uuid

import httpx
from sqlalchemy import text
from temporalio.testing import ActivityEnvironment

from activities.resources import ActivityResources
from activities.sites import SiteActivities
from bench.processes import STOP_TIMEOUT, served_api, worker_process
from devstack.throwaway import throwaway_stack
from lifecycle.contracts import SITE_STEPS, SiteRef

ROUNDS = 30
OVERHEAD_TARGET_MS = 50.0
CONCURRENT_TARGET_S = 10.0
CONCURRENT = 100
ADMIN = "bench-admin-token"
# Only tells the bench when to read the activation time; the time itself is the one the database recorded,
# so a slower poll costs no accuracy (and the API answering it is its own process).
POLL_SECONDS = 0.05


def _domain() -> str:
    return f"bench-{uuid.uuid4().hex[:12]}.example.com"


async def _until_active(api: httpx.AsyncClient, headers: dict[str, str], site_id: str) -> None:
    # Polling, as a client of the API would; the interval is small against a creation's duration.
    while (await api.get(f"/sites/{site_id}", headers=headers)).json()["status"] != "active":  # noqa: ASYNC110
        await asyncio.sleep(POLL_SECONDS)


async def _end_to_end(resources: ActivityResources, api: httpx.AsyncClient, headers: dict[str, str]) -> float:
    """From sending the POST until activate_site's transaction set the row active (its updated_at)."""
    started = time.time()  # the wall clock, as PostgreSQL's now() on this machine
    response = await api.post("/sites", json={"name": "Bench", "domain": _domain()}, headers=headers)
    site_id = response.json()["id"]
    await _until_active(api, headers, site_id)
    async with resources.sessionmaker() as session:
        activated = (
            await session.execute(
                text("SELECT extract(epoch FROM updated_at) FROM sites WHERE id = :id"), {"id": uuid.UUID(site_id)}
            )
        ).scalar_one()
    return float(activated) - started


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


async def main(rounds: int) -> None:
    async with throwaway_stack("bench-sites", admin_token=ADMIN) as stack:
        settings = stack.settings
        resources = ActivityResources.create(settings, stack.env.client)
        worker = worker_process(settings)
        try:
            async with (
                served_api(settings) as served,
                httpx.AsyncClient(base_url=served.base_url, timeout=60) as api,
            ):
                await _rounds_and_burst(resources, api, rounds)
        finally:
            worker.terminate()
            worker.wait(STOP_TIMEOUT)
            await resources.engine.dispose()


async def _rounds_and_burst(resources: ActivityResources, api: httpx.AsyncClient, rounds: int) -> None:
    created = await api.post(
        "/accounts",
        json={"name": "Bench", "email": "bench@example.com"},
        headers={"Authorization": f"Bearer {ADMIN}"},
    )
    account = created.json()
    headers = {"Authorization": f"Bearer {account['api_key']}"}
    activities = SiteActivities(resources)
    await _end_to_end(resources, api, headers)  # warm-up: connections, worker caches
    await _direct(resources, activities, account["id"])
    direct: list[float] = []
    e2e: list[float] = []
    for _ in range(rounds):
        direct.append(await _direct(resources, activities, account["id"]))
        e2e.append(await _end_to_end(resources, api, headers))
    e2e_median, direct_median = statistics.median(e2e), statistics.median(direct)
    overheads = [(a - b) * 1000 for a, b in zip(e2e, direct, strict=True)]
    overhead = (e2e_median - direct_median) * 1000
    print(f"{rounds} interleaved rounds (direct, then end to end)")
    print(f"four steps, called directly:   median {direct_median * 1000:.1f} ms, p90 {_p90(direct) * 1000:.1f} ms")
    print(f"end to end, POST until active: median {e2e_median * 1000:.1f} ms, p90 {_p90(e2e) * 1000:.1f} ms")
    print(f"ratio end-to-end/direct (medians): {e2e_median / direct_median:.2f}")
    print(f"per-round overhead: median {statistics.median(overheads):.1f} ms, p90 {_p90(overheads):.1f} ms")
    print(
        f"orchestration overhead (median end-to-end minus median direct): {overhead:.1f} ms"
        f" (target <= {OVERHEAD_TARGET_MS:.0f} ms): {_met(overhead <= OVERHEAD_TARGET_MS)}"
    )

    started = time.perf_counter()
    responses = await asyncio.gather(
        *(api.post("/sites", json={"name": "Crowd", "domain": _domain()}, headers=headers) for _ in range(CONCURRENT))
    )
    await _all_active(resources, [r.json()["id"] for r in responses])
    elapsed = time.perf_counter() - started
    print(
        f"{CONCURRENT} sites started at once: all active after {elapsed:.2f} s"
        f" (target <= {CONCURRENT_TARGET_S:.0f} s): {_met(elapsed <= CONCURRENT_TARGET_S)}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.sites")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="interleaved rounds (at least 30 for the target)")
    asyncio.run(main(parser.parse_args().rounds))
