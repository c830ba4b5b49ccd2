"""The chaos drill's moving parts: a worker killed and replaced at random, and clients that ride out outages.

Everything random comes from one seeded `random.Random`, so a failing run can be replayed with the same
kill schedule (the machine's timing still varies, so the interleaving is similar, not identical).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

import httpx
from temporalio.service import RPCError

from tests.drills.conftest import DrillStack
from tests.processes import ApiProcess, ChildProcess

T = TypeVar("T")

# How long a client keeps retrying one request through a restart of Temporal, PostgreSQL or the API.
RETRY_LIMIT_SECONDS = 60.0
# A worker that died on its own (it cannot start while Temporal is down) is replaced at most this often,
# so a restart storm does not eat the two cores the rest of the drill needs.
RESPAWN_INTERVAL_SECONDS = 1.0


class RetryableStatus(Exception):
    """A 5xx answer: the API is up but a dependency is not (yet); the client repeats the request."""


# What a server restarting looks like to a client: refused connections, 5xx answers, Temporal unavailable.
RESTARTING = (httpx.HTTPError, RetryableStatus, RPCError)


async def retrying(call: Callable[[], Awaitable[T]], what: str, limit: float = RETRY_LIMIT_SECONDS) -> T:
    """Call until it returns, repeating while a server is restarting, up to `limit` seconds."""
    deadline = time.monotonic() + limit
    while True:
        try:
            return await call()
        except RESTARTING as err:
            if time.monotonic() > deadline:
                raise AssertionError(f"gave up after {limit:.0f} s: {what}: {err!r}") from err
            await asyncio.sleep(0.5)  # the pause between tries while a server restarts


def expect(response: httpx.Response, *accepted: int) -> httpx.Response:
    if response.status_code >= 500:
        raise RetryableStatus(f"{response.status_code}: {response.text[:200]}")
    assert response.status_code in accepted, f"{response.request.method} {response.request.url}: {response.text}"
    return response


@dataclass
class ChaosWorkers:
    """Exactly one worker process at a time: killed with SIGKILL on demand, replaced at once."""

    stack: DrillStack
    # Environment of every worker, e.g. FAULT_INJECTION.
    environment: dict[str, str] = field(default_factory=dict)
    current: ChildProcess | None = None
    kills: int = 0
    # Workers that exited without being killed, with the tail of their log: evidence for the report.
    died_on_their_own: list[str] = field(default_factory=list)
    everyone: list[ChildProcess] = field(default_factory=list)
    _keeper: asyncio.Task[None] | None = None

    def _spawn(self) -> None:
        self.current = self.stack.worker(f"chaos-{len(self.everyone):02d}", **self.environment)
        self.everyone.append(self.current)

    def kill_and_replace(self) -> bool:
        """SIGKILL the running worker and start the next one; True if the kill hit a live process."""
        assert self.current is not None and self.current.process is not None
        alive = self.current.process.poll() is None
        self.current.kill()
        if alive:
            self.kills += 1
        self._spawn()
        return alive

    async def _keep_one_running(self) -> None:
        while True:
            await asyncio.sleep(RESPAWN_INTERVAL_SECONDS)  # how often the supervisor looks, as a process manager
            assert self.current is not None and self.current.process is not None
            if self.current.process.poll() is not None:
                tail = self.current.log()[-600:].strip().splitlines()
                self.died_on_their_own.append(f"{self.current.log_path.name}: {tail[-1] if tail else '(no log)'}")
                self._spawn()

    def start(self) -> None:
        self._spawn()
        self._keeper = asyncio.get_running_loop().create_task(self._keep_one_running())

    async def stop(self) -> None:
        if self._keeper is not None:
            self._keeper.cancel()
        for worker in self.everyone:
            worker.kill()


@dataclass
class ChaosApi:
    """The API process, which the drill kills once and replaces (on a new port)."""

    stack: DrillStack
    current: ApiProcess | None = None
    kills: int = 0

    def start(self) -> None:
        self.current = self.stack.api()

    @property
    def url(self) -> str:
        assert self.current is not None
        return self.current.url

    def kill_and_replace(self) -> None:
        assert self.current is not None
        self.current.kill()
        self.kills += 1
        self.current = self.stack.api()

    def stop(self) -> None:
        if self.current is not None:
            self.current.kill()

    async def request(self, method: str, path: str, *accepted: int, **kwargs: object) -> httpx.Response:
        """One logical request, repeated through restarts until it gets one of the `accepted` answers."""

        async def once() -> httpx.Response:
            async with httpx.AsyncClient(base_url=self.url, timeout=10) as http:
                return expect(await http.request(method, path, **kwargs), *accepted)  # type: ignore[arg-type]

        return await retrying(once, f"{method} {path}")


def kill_intervals(rng: random.Random, window: float, low: float, high: float) -> list[float]:
    """Seconds to wait before each kill, drawn until the kills cover at least `window` seconds."""
    intervals: list[float] = []
    while sum(intervals) < window:
        intervals.append(rng.uniform(low, high))
    return intervals
