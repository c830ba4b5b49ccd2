"""`python -m bench.queue_limit [--batches N] [--limits R,R]`: what Temporal's task-queue rate limit would cost as
the deletion budget (docs/deletion-budget.md says why the budget is a PostgreSQL row instead).

To enforce rows/s with `temporal task-queue config set --queue-rps-limit`, a deletion would run one activity per
fixed-size batch. This runs that shape with empty batches: one workflow calling N activities one after another on
an activity queue under each limit, then prints the activities/s reached, the history events per batch, and
what a 2,000,000-row deletion in 2,000-row batches (the default budget's 0.1 s of rows) would write to history.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import time
import uuid
from datetime import timedelta

from temporalio import activity, workflow
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from devstack.binaries import temporal_cli
from devstack.throwaway import throwaway_stack

ROWS_PER_BATCH = 2_000
DELETION_ROWS = 2_000_000


@activity.defn
async def empty_batch(n: int) -> int:
    return n


@workflow.defn
class BatchesOneByOne:
    @workflow.run
    async def run(self, batches: int, queue: str) -> int:
        for n in range(batches):
            await workflow.execute_activity(
                empty_batch, n, task_queue=queue, start_to_close_timeout=timedelta(seconds=30)
            )
        return batches


def _config(address: str, queue: str) -> str:
    """The queue's configuration as the server keeps it, on one line."""
    shown = subprocess.run(
        [temporal_cli(), "task-queue", "config", "get", "--address", address, "--task-queue", queue,
         "--task-queue-type", "activity", "-o", "json"],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    return " ".join(shown.stdout.split())


def _set_limit(address: str, queue: str, limit: float) -> None:
    subprocess.run(
        [temporal_cli(), "task-queue", "config", "set", "--address", address, "--task-queue", queue,
         "--task-queue-type", "activity", "--queue-rps-limit", str(limit), "--queue-rps-limit-reason", "bench"],
        check=True, capture_output=True,
    )  # fmt: skip


async def main(batches: int, limits: list[float]) -> None:
    async with throwaway_stack("bench-queue-limit") as stack:
        client = stack.env.client
        for limit in limits:
            queue = f"batches-{uuid.uuid4().hex[:8]}"
            async with Worker(
                client, task_queue=queue, workflows=[BatchesOneByOne], activities=[empty_batch],
                workflow_runner=UnsandboxedWorkflowRunner(),
            ):  # fmt: skip
                # Set once the worker polls, so the queue exists; the server's answer shows what it kept.
                _set_limit(stack.address, queue, limit)
                print(f"limit {limit:g}/s set; the server keeps: {_config(stack.address, queue)}", flush=True)
                started = time.perf_counter()
                handle = await client.start_workflow(
                    BatchesOneByOne.run, args=[batches, queue], id=f"batches-{queue}", task_queue=queue
                )
                await handle.result()
                seconds = time.perf_counter() - started
            events = len((await handle.fetch_history()).events)
            per_batch = events / batches
            print(
                f"limit {limit:g}/s: {batches} batches in {seconds:.1f} s = {batches / seconds:.2f} activities/s;"
                f" {events} history events, {per_batch:.1f} per batch",
                flush=True,
            )
            deletion_batches = DELETION_ROWS // ROWS_PER_BATCH
            print(
                f"  a {DELETION_ROWS:,}-row deletion in {ROWS_PER_BATCH:,}-row batches: {deletion_batches:,}"
                f" activities,"
                f" about {deletion_batches * per_batch:,.0f} history events; rows/s at this limit:"
                f" {ROWS_PER_BATCH * batches / seconds:,.0f}",
                flush=True,
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.queue_limit")
    parser.add_argument("--batches", type=int, default=50)
    parser.add_argument("--limits", default="10,20", help="activities/s, comma-separated")
    args = parser.parse_args()
    asyncio.run(main(args.batches, [float(limit) for limit in args.limits.split(",")]))
