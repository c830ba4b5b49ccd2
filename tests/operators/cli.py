"""The real `temporal` binary, called off the event loop.

The suite's in-process worker shares the test's event loop: a blocking CLI call that waits on the workflow
(an update, a query) would starve the very worker that must answer it.
"""

from __future__ import annotations

import asyncio
import subprocess
from typing import Any

from tests.temporal_cli import TemporalCli


class AsyncCli:
    def __init__(self, address: str) -> None:
        self.sync = TemporalCli(address)

    async def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return await asyncio.to_thread(self.sync.run, *args, check=check)

    async def json(self, *args: str) -> Any:
        return await asyncio.to_thread(self.sync.json, *args)

    async def jsonl(self, *args: str) -> list[Any]:
        return await asyncio.to_thread(self.sync.jsonl, *args)

    async def workflow_ids(self, query: str) -> set[str]:
        """`temporal workflow list --query`: the ids of the runs that match."""
        runs = await self.jsonl("workflow", "list", "--query", query)
        return {run["execution"]["workflowId"] for run in runs}
