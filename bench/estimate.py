"""`python -m bench.estimate [--rows N] [--budget R]`: how good a deletion's `estimated_completion` is.

A bot of --rows rows (10,000,000 by default) is deleted at a fixed budget. When the status API first reports
half of the rows deleted, its estimate is read; once the deletion completes, the estimate's error is printed as
a share of the whole run's length (target: within 20%).
"""

from __future__ import annotations

import argparse
import asyncio
from datetime import UTC, datetime

import httpx

from api.app import create_app
from bench.processes import worker_process
from devstack.seed import seed
from devstack.throwaway import throwaway_stack

ADMIN_HEADERS = {"Authorization": "Bearer bench-admin-token"}
ERROR_TARGET = 0.20


async def main(rows: int, budget: int) -> None:
    async with throwaway_stack(
        "bench-estimate", admin_token="bench-admin-token-at-least-32-bytes-long", durable=True
    ) as stack:
        settings, client = stack.settings, stack.env.client
        worker = worker_process(settings)
        app = create_app(settings, temporal_client=client)
        try:
            async with app.router.lifespan_context(app):
                transport = httpx.ASGITransport(app=app)
                async with httpx.AsyncClient(transport=transport, base_url="http://bench", timeout=60) as api:
                    seeded = await seed(settings, bots=1, rows=rows)
                    bot_id = seeded.bot_ids[0]
                    headers = {"Authorization": f"Bearer {seeded.api_key}", "Prefer": "respond-async"}
                    put = await api.put("/deletion-budget", json={"rows_per_second": budget}, headers=ADMIN_HEADERS)
                    put.raise_for_status()
                    started = datetime.now(UTC)
                    (await api.delete(f"/bots/{bot_id}", headers=headers)).raise_for_status()
                    half_way: tuple[datetime, datetime] | None = None
                    for _ in range(36_000):  # an hour at most, polled every 100 ms
                        status = (await api.get(f"/bots/{bot_id}/deletion", headers=headers)).json()
                        if status["status"] == "completed":
                            break
                        deleted = sum(service["deleted"] for service in status["progress"].values())
                        if half_way is None and deleted >= rows / 2 and status["estimated_completion"]:
                            half_way = (datetime.now(UTC), datetime.fromisoformat(status["estimated_completion"]))
                            print(f"half-way at {half_way[0]:%H:%M:%S}, estimated end {half_way[1]:%H:%M:%S}")
                        await asyncio.sleep(0.1)
                    finished = datetime.now(UTC)
        finally:
            worker.terminate()
            worker.wait(60)
    assert half_way is not None, "no estimate was read half-way"
    run = (finished - started).total_seconds()
    error = (half_way[1] - finished).total_seconds()
    share = abs(error) / run
    met = "met" if share <= ERROR_TARGET else "NOT met"
    print(f"rows {rows:,} at {budget:,} rows/s: ran {run:.1f} s, finished at {finished:%H:%M:%S}")
    print(
        f"estimate read half-way was {error:+.1f} s off: {share:.1%} of the run (target <= {ERROR_TARGET:.0%}): {met}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.estimate")
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--budget", type=int, default=100_000, help="rows/s, fixed for the whole run")
    args = parser.parse_args()
    asyncio.run(main(args.rows, args.budget))
