"""`python -m bench.api`: what the API adds to starting a bot deletion, at a fixed offered rate.

`DELETE /bots/{id}` on `python -m api` (uvicorn, a child process, as production serves it) against raw
`client.start_workflow`, both against the same in-memory Temporal dev server, no worker polling: only starting
is measured. The load comes from `bench.load`, a separate process per phase, open loop at `--rate` calls/s;
phases of `--phase-seconds` alternate (raw, API, raw, API, ...) until each side had `--seconds`, so drift skews
neither side. Targets: the API adds at most 5 ms to p50 and 20 ms to p99, and its process spends at most 1.3x
the CPU per request of `bench.api_floor`'s full floor (the same work as a bare ASGI app), measured on the same
stack just before and just after the API's phases (CPU: each server's own user+system times, read with psutil
while its load runs).

`--against CHECKOUT` (repeatable) also serves `python -m api` of another checkout on the same stack (say, a
`git worktree` of an earlier commit, or a copy with one change undone) and puts its phases in the same rotation,
each API's order reversed every other phase: a change's cost in CPU and latency, measured in one run.
`--profile` runs the API under cProfile and prints where its main thread spent the time.
`--saturation` also prints closed-loop throughput at concurrency 20 (shared cores: not a target).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import pstats
import statistics
import tempfile
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.api_floor import FULL_FLOOR, RATIO_TARGET, WARM_UP, measure_floor
from bench.processes import Served, cpu_by_thread_name, cpu_seconds, load_phase, served_api
from devstack.seed import seed
from devstack.throwaway import throwaway_stack
from lifecycle.settings import Settings

P50_TARGET_MS = 5.0
P99_TARGET_MS = 20.0
IDLE_SECONDS = 3.0


def _met(ok: bool) -> str:
    return "met" if ok else "NOT met"


@dataclass
class Side:
    name: str = "raw client.start_workflow"
    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    cpu: float = 0.0
    # The serving process's CPU per request (ms) in each phase: a difference between two APIs is judged phase by
    # phase, each pair measured seconds apart, so the machine's other load mostly cancels out of it.
    phase_cpu_ms: list[float] = field(default_factory=list)

    def p(self, percentile: int) -> float:
        return statistics.quantiles(self.latencies, n=100)[percentile - 1] * 1000

    @property
    def cpu_ms(self) -> float:
        """The serving process's CPU per request (ms)."""
        return self.cpu * 1000 / max(1, len(self.latencies) + len(self.errors))

    def add(self, result: dict[str, Any], cpu: float) -> None:
        self.latencies += result["latencies"]
        self.errors += result["errors"]
        self.cpu += cpu
        self.phase_cpu_ms.append(cpu * 1000 / max(1, len(result["latencies"]) + len(result["errors"])))


@dataclass
class ApiSide(Side):
    """One `python -m api` under load: its server, and the seeded bots its phases delete."""

    served: Served | None = None
    account_id: str = ""
    api_key: str = ""
    bot_ids: list[str] = field(default_factory=list)

    async def phase(self, number: int, per_phase: int, rate: float) -> None:
        assert self.served is not None
        bots = self.bot_ids[number * per_phase : (number + 1) * per_phase]
        job = {"mode": "http", "rate": rate, "targets": bots, "base_url": self.served.base_url}
        self.add(*await load_phase(job | {"api_key": self.api_key}, self.served.process))


async def _saturation(served: Served, api_key: str, bot_ids: list[str]) -> float:
    gate = asyncio.Semaphore(20)
    headers = {"Authorization": f"Bearer {api_key}", "Prefer": "respond-async"}
    async with httpx.AsyncClient(base_url=served.base_url, timeout=30) as api:

        async def one(bot_id: str) -> None:
            async with gate:
                (await api.delete(f"/bots/{bot_id}", headers=headers)).raise_for_status()

        started = time.perf_counter()
        await asyncio.gather(*(one(b) for b in bot_ids))
        return len(bot_ids) / (time.perf_counter() - started)


async def main(
    rate: float, seconds: float, phase_seconds: float, profile: bool, saturation: bool, against: list[Path]
) -> None:
    per_phase = round(rate * phase_seconds)
    phases = max(1, round(seconds / phase_seconds))
    raw = Side()
    api = ApiSide("API DELETE /bots/{id}")
    others = [ApiSide(f"against {root}") for root in against]
    raw_cpu = 0.0
    api_threads: dict[str, float] = defaultdict(float)
    idle_rate = 0.0
    saturated: float | None = None
    profile_to = Path(tempfile.mkdtemp(prefix="bench-api-")) / "api.prof" if profile else None
    async with throwaway_stack("bench", durable=True) as stack, contextlib.AsyncExitStack() as servers:
        settings = stack.settings
        # Each API deletes its own account's bots; the raw side starts runs for made-up bot ids.
        for side in [api, *others]:
            seeded = await seed(settings, bots=per_phase * phases, rows=5)
            side.account_id, side.api_key, side.bot_ids = seeded.account_id, seeded.api_key, seeded.bot_ids
        # The floor's two readings, before and after the API's phases, together as many requests as the API's.
        floor_requests = max(1, per_phase * phases // 2)
        floor_bots = await seed(settings, bots=2 * (floor_requests + WARM_UP), rows=5)
        floor_batches = [floor_bots.bot_ids[: floor_requests + WARM_UP], floor_bots.bot_ids[floor_requests + WARM_UP :]]
        floor_cpu = [await _floor(settings, rate, floor_bots.api_key, floor_batches[0])]
        served = api.served = await servers.enter_async_context(served_api(settings, profile_to))
        for side, root in zip(others, against, strict=True):
            side.served = await servers.enter_async_context(served_api(settings, root=root))
        idle_before = cpu_seconds(served.process)
        await asyncio.sleep(IDLE_SECONDS)
        idle_rate = (cpu_seconds(served.process) - idle_before) / IDLE_SECONDS
        for phase in range(phases):
            raw_job = {
                "mode": "raw",
                "rate": rate,
                "targets": [str(uuid.uuid4()) for _ in range(per_phase)],
                "temporal_address": settings.temporal_address,
                "task_queue": settings.task_queue,
                "account_id": api.account_id,
            }
            result, _ = await load_phase(raw_job)
            raw_cpu += result["cpu_seconds"]
            raw.add(result, 0.0)
            # Every other phase in reverse, so that no API always follows the raw side or another API.
            apis = [api, *others]
            for side in apis if phase % 2 == 0 else apis[::-1]:
                threads_before = cpu_by_thread_name(served.process)
                await side.phase(phase, per_phase, rate)
                if side is api:
                    for name, spent in cpu_by_thread_name(served.process).items():
                        api_threads[name] += spent - threads_before.get(name, 0.0)
            print(f"phase {phase + 1}/{phases}: raw then {1 + len(others)} API(s), {per_phase} starts each", flush=True)
        if saturation:
            extra = await seed(settings, bots=300, rows=1)
            saturated = await _saturation(served, extra.api_key, extra.bot_ids)
        await servers.aclose()
        floor_cpu.append(await _floor(settings, rate, floor_bots.api_key, floor_batches[1]))
    _print(rate, phases * phase_seconds, raw, [*others, api], saturated)
    heaviest_first = sorted(api_threads.items(), key=lambda item: -item[1])
    requests = max(1, len(api.latencies) + len(api.errors))
    by_thread = ", ".join(f"{name} {seconds * 1000 / requests:.2f} ms" for name, seconds in heaviest_first)
    print(f"API CPU per request by thread name: {by_thread}")
    print(
        f"the raw side's own process (the SDK's start and the load loop, nothing else): "
        f"{raw_cpu * 1000 / max(1, len(raw.latencies) + len(raw.errors)):.2f} ms of CPU per start"
    )
    print(
        f"(the idle API burns {idle_rate * 1000:.1f} ms of CPU per second, measured over {IDLE_SECONDS:.0f} s before"
        f" the load: {idle_rate * 1000 / rate:.2f} ms of each request's figure at {rate:.0f}/s; it is not subtracted)"
    )
    _print_ratio(api.cpu_ms, [cpu * 1000 / floor_requests for cpu in floor_cpu])
    for other in others:
        paired = [ours - theirs for ours, theirs in zip(api.phase_cpu_ms, other.phase_cpu_ms, strict=True)]
        quartiles = statistics.quantiles(paired, n=4) if len(paired) > 1 else paired * 3
        print(
            f"ours / {other.name}: p50 {api.p(50) / other.p(50):.2f}x, p99 {api.p(99) / other.p(99):.2f}x,"
            f" API CPU per request {api.cpu_ms:.2f} - {other.cpu_ms:.2f} = {api.cpu_ms - other.cpu_ms:+.2f} ms"
            f" ({api.cpu_ms / other.cpu_ms:.2f}x); phase by phase: median {quartiles[1]:+.2f} ms,"
            f" quartiles {quartiles[0]:+.2f} to {quartiles[2]:+.2f} ms over {len(paired)} phases"
        )
    if profile_to:
        _print_profile(profile_to)


async def _floor(settings: Settings, rate: float, api_key: str, bot_ids: list[str]) -> float:
    cpu, _ = await measure_floor(settings, FULL_FLOOR, rate, api_key, bot_ids)
    return cpu


def _print_ratio(api_ms: float, floor_ms: list[float]) -> None:
    floor = statistics.fmean(floor_ms)
    ratio = api_ms / floor
    readings = " and ".join(f"{ms:.2f}" for ms in floor_ms)
    print(f"floor ({FULL_FLOOR}, bench.api_floor, before and after the API's phases): {readings} ms of CPU per DELETE")
    print(
        f"API CPU per request / floor: {api_ms:.2f} / {floor:.2f} ms = {ratio:.2f}x"
        f" (target <= {RATIO_TARGET}x): {_met(ratio <= RATIO_TARGET)}"
    )


def _print(rate: float, seconds: float, raw: Side, apis: list[Side], saturated: float | None) -> None:
    print(
        f"offered {rate:.0f} starts/s for {seconds:.0f} s per side, open loop from a separate process,"
        f" interleaved phases; API: python -m api (uvicorn); Temporal: in-memory dev server; no worker"
    )
    for side in (raw, *apis):
        cpu = f"   CPU {side.cpu_ms:5.2f} ms/request" if side is not raw else ""
        print(
            f"{side.name:<28} {len(side.latencies):5d} ok {len(side.errors):3d} errors"
            f"   p50 {side.p(50):6.1f} ms   p90 {side.p(90):6.1f} ms   p99 {side.p(99):6.1f} ms{cpu}"
        )
    api = apis[-1]
    for error in sorted(set(raw.errors + api.errors))[:5]:
        print(f"  error: {error}")
    added50, added99 = api.p(50) - raw.p(50), api.p(99) - raw.p(99)
    no_errors = not raw.errors and not api.errors
    for name, added, target in (("p50", added50, P50_TARGET_MS), ("p99", added99, P99_TARGET_MS)):
        print(f"added {name}: {added:+6.1f} ms (target <= +{target:.0f} ms): {_met(no_errors and added <= target)}")
    print(f"API CPU per request: {api.cpu_ms:.2f} ms")
    if saturated is not None:
        print(f"saturation (closed loop, concurrency 20, not a target): {saturated:.0f} DELETE/s")


def _print_profile(path: Path) -> None:
    print(f"\ncProfile of the API's main thread ({path}), top 25 by cumulative time:")
    stats = pstats.Stats(str(path))
    stats.sort_stats("cumulative").print_stats(25)
    print("top 25 by own time:")
    stats.sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.api")
    parser.add_argument("--rate", type=float, default=50, help="offered starts per second")
    parser.add_argument("--seconds", type=float, default=20, help="load per side")
    parser.add_argument("--phase-seconds", type=float, default=5, help="length of one interleaved phase")
    parser.add_argument("--profile", action="store_true", help="run the API under cProfile and print the profile")
    parser.add_argument("--saturation", action="store_true", help="also measure closed-loop throughput")
    parser.add_argument(
        "--against",
        type=Path,
        action="append",
        default=[],
        help="another checkout whose `python -m api` is measured in the same rotation (repeatable)",
    )
    args = parser.parse_args()
    against = [root.resolve() for root in args.against]
    asyncio.run(main(args.rate, args.seconds, args.phase_seconds, args.profile, args.saturation, against))
