"""`python -m bench.api`: what the API adds to starting a bot deletion, at a fixed offered rate.

`DELETE /bots/{id}` on `python -m api` (uvicorn, a child process, as production serves it) against raw
`client.start_workflow`, both against the same in-memory Temporal dev server, no worker polling: only starting
is measured. The load comes from `bench.load`, a separate process per phase, open loop at `--rate` calls/s;
phases of `--phase-seconds` alternate (raw, API, raw, API, ...) until each side had `--seconds`, so drift skews
neither side. Targets: the API adds at most 5 ms to p50 and 20 ms to p99, and its process spends at most 1.5 ms
of CPU per request (its own user+system times, read with psutil while the API phases' load runs).

`--profile` runs the API under cProfile and prints where its main thread spent the time.
`--saturation` also prints closed-loop throughput at concurrency 20 (shared cores: not a target).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import pstats
import statistics
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil

from bench.processes import Served, served_api
from devstack.seed import seed
from devstack.throwaway import throwaway_stack

P50_TARGET_MS = 5.0
P99_TARGET_MS = 20.0
CPU_TARGET_MS = 1.5
IDLE_SECONDS = 3.0


def _met(ok: bool) -> str:
    return "met" if ok else "NOT met"


@dataclass
class Side:
    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def p(self, percentile: int) -> float:
        return statistics.quantiles(self.latencies, n=100)[percentile - 1] * 1000


async def _load(job: dict[str, Any], process: psutil.Process | None = None) -> tuple[dict[str, Any], float]:
    """One phase of `bench.load` in its own process; also the CPU `process` spent while the load ran."""
    generator = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.load", stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
    )
    assert generator.stdin is not None and generator.stdout is not None
    generator.stdin.write(json.dumps(job).encode())
    generator.stdin.close()
    if (await generator.stdout.readline()).strip() != b"ready":
        raise RuntimeError("bench.load did not start")
    cpu_before = _cpu_seconds(process) if process else 0.0
    out = await generator.stdout.read()
    cpu = _cpu_seconds(process) - cpu_before if process else 0.0
    if await generator.wait() != 0:
        raise RuntimeError(f"bench.load failed ({generator.returncode})")
    result: dict[str, Any] = json.loads(out)
    return result, cpu


def _cpu_seconds(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


def _cpu_by_thread_name(process: psutil.Process) -> dict[str, float]:
    """CPU seconds so far per thread name (Linux's comm) and mode: the Python thread against the SDK core's
    threads, and user against system time (the kernel's side of the sockets)."""
    spent: dict[str, float] = defaultdict(float)
    for thread in process.threads():
        with contextlib.suppress(OSError):
            name = Path(f"/proc/{process.pid}/task/{thread.id}/comm").read_text().strip()
            spent[f"{name} user"] += thread.user_time
            spent[f"{name} system"] += thread.system_time
    return spent


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


async def main(rate: float, seconds: float, phase_seconds: float, profile: bool, saturation: bool) -> None:
    per_phase = round(rate * phase_seconds)
    phases = max(1, round(seconds / phase_seconds))
    raw, api = Side(), Side()
    api_cpu = 0.0
    raw_cpu = 0.0
    api_threads: dict[str, float] = defaultdict(float)
    idle_rate = 0.0
    saturated: float | None = None
    profile_to = Path(tempfile.mkdtemp(prefix="bench-api-")) / "api.prof" if profile else None
    async with throwaway_stack("bench", durable=True) as stack:
        settings = stack.settings
        seeded = await seed(settings.database_url, settings.storage_path, bots=per_phase * phases, rows=5)
        async with served_api(settings, profile_to) as served:
            idle_before = _cpu_seconds(served.process)
            await asyncio.sleep(IDLE_SECONDS)
            idle_rate = (_cpu_seconds(served.process) - idle_before) / IDLE_SECONDS
            for phase in range(phases):
                bots = seeded.bot_ids[phase * per_phase : (phase + 1) * per_phase]
                raw_job = {
                    "mode": "raw",
                    "rate": rate,
                    "targets": [str(uuid.uuid4()) for _ in bots],
                    "temporal_address": settings.temporal_address,
                    "task_queue": settings.task_queue,
                    "account_id": seeded.account_id,
                }
                result, _ = await _load(raw_job)
                raw_cpu += result["cpu_seconds"]
                raw.latencies += result["latencies"]
                raw.errors += result["errors"]
                api_job = {"mode": "http", "rate": rate, "targets": bots, "base_url": served.base_url}
                threads_before = _cpu_by_thread_name(served.process)
                result, cpu = await _load(api_job | {"api_key": seeded.api_key}, served.process)
                for name, seconds in _cpu_by_thread_name(served.process).items():
                    api_threads[name] += seconds - threads_before.get(name, 0.0)
                api_cpu += cpu
                api.latencies += result["latencies"]
                api.errors += result["errors"]
                print(f"phase {phase + 1}/{phases}: raw then API, {per_phase} starts each", flush=True)
            if saturation:
                extra = await seed(settings.database_url, settings.storage_path, bots=300, rows=1)
                saturated = await _saturation(served, extra.api_key, extra.bot_ids)
    _print(rate, phases * phase_seconds, raw, api, api_cpu, saturated)
    requests = max(1, len(api.latencies) + len(api.errors))
    heaviest_first = sorted(api_threads.items(), key=lambda item: -item[1])
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
    if profile_to:
        _print_profile(profile_to)


def _print(rate: float, seconds: float, raw: Side, api: Side, api_cpu: float, saturated: float | None) -> None:
    print(
        f"offered {rate:.0f} starts/s for {seconds:.0f} s per side, open loop from a separate process,"
        f" interleaved phases; API: python -m api (uvicorn); Temporal: in-memory dev server; no worker"
    )
    for name, side in (("raw client.start_workflow", raw), ("API DELETE /bots/{id}", api)):
        print(
            f"{name:<28} {len(side.latencies):5d} ok {len(side.errors):3d} errors"
            f"   p50 {side.p(50):6.1f} ms   p90 {side.p(90):6.1f} ms   p99 {side.p(99):6.1f} ms"
        )
    for error in sorted(set(raw.errors + api.errors))[:5]:
        print(f"  error: {error}")
    added50, added99 = api.p(50) - raw.p(50), api.p(99) - raw.p(99)
    cpu_ms = api_cpu * 1000 / max(1, len(api.latencies) + len(api.errors))
    no_errors = not raw.errors and not api.errors
    for name, added, target in (("p50", added50, P50_TARGET_MS), ("p99", added99, P99_TARGET_MS)):
        print(f"added {name}: {added:+6.1f} ms (target <= +{target:.0f} ms): {_met(no_errors and added <= target)}")
    print(f"API CPU per request: {cpu_ms:.2f} ms (target <= {CPU_TARGET_MS} ms): {_met(cpu_ms <= CPU_TARGET_MS)}")
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
    args = parser.parse_args()
    asyncio.run(main(args.rate, args.seconds, args.phase_seconds, args.profile, args.saturation))
