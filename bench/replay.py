"""`python -m bench.replay [--runs N] [--rounds R] [--against CHECKOUT]`: the worker's CPU per workflow run.

Replays each workflow type's committed histories (tests/replay/histories) N times in one Replayer, with the
runner the checkout's `lifecycle.workflow_runner.workflow_runner()` builds, and reads the process's CPU time per
run, the Replayer's start (which imports every workflow in the sandbox once) left out. Each checkout replays in a
process of its own, its code first on the path; with `--against`, the sides take turns over R rounds, so drift
skews neither. No server: only the worker's side of a run (its sandbox, activations and payloads) is measured.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import AsyncIterator
from pathlib import Path

HISTORIES = Path(__file__).resolve().parent.parent / "tests" / "replay" / "histories"


async def _child(runs: int) -> None:
    """In the checkout's process: CPU ms per run for each workflow type, as JSON on stdout."""
    from temporalio.client import WorkflowHistory
    from temporalio.worker import Replayer

    from lifecycle.data_converter import DATA_CONVERTER
    from lifecycle.workflow_runner import workflow_runner
    from workflows.registry import WORKFLOWS

    by_type: dict[str, list[WorkflowHistory]] = defaultdict(list)
    for path in sorted(HISTORIES.glob("*.json")):
        by_type[path.stem.split("-", 1)[0]].append(WorkflowHistory.from_json(path.stem, json.loads(path.read_text())))

    async def copies(histories: list[WorkflowHistory]) -> AsyncIterator[WorkflowHistory]:
        for i in range(runs):
            for history in histories:
                yield WorkflowHistory(f"{history.workflow_id}-{i}", history.events)

    replayer = Replayer(workflows=WORKFLOWS, workflow_runner=workflow_runner(), data_converter=DATA_CONVERTER)
    await replayer.replay_workflows(copies(next(iter(by_type.values()))[:1]))  # warm-up, not counted
    spent: dict[str, float] = {}
    for name, histories in sorted(by_type.items()):
        started = time.process_time()
        await replayer.replay_workflows(copies(histories))
        spent[name] = (time.process_time() - started) * 1000 / (runs * len(histories))
    print(json.dumps(spent))


def _side(root: Path, runs: int) -> dict[str, float]:
    env = os.environ | {"PYTHONPATH": str(root)}
    done = subprocess.run(
        [sys.executable, __file__, "--child", "--runs", str(runs)],
        cwd=root,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    measured: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return measured


def main(runs: int, rounds: int, against: list[Path]) -> None:
    ours = Path(__file__).resolve().parent.parent
    sides = [ours, *against]
    readings: dict[Path, list[dict[str, float]]] = defaultdict(list)
    for round_ in range(rounds):
        for root in sides if round_ % 2 == 0 else sides[::-1]:
            readings[root].append(_side(root, runs))
        print(f"round {round_ + 1}/{rounds}", flush=True)
    types = sorted(readings[ours][0])
    print(f"CPU ms per run, median of {rounds} rounds of {runs} runs of each history")
    print(f"{'workflow type':<26}" + "".join(f"{root!s:>28}" for root in sides))
    medians = {root: {t: statistics.median(r[t] for r in readings[root]) for t in types} for root in sides}
    for name in types:
        print(f"{name:<26}" + "".join(f"{medians[root][name]:>28.1f}" for root in sides))
    for other in against:
        ratios = {name: medians[ours][name] / medians[other][name] for name in types}
        print(f"ours / {other}: " + ", ".join(f"{name} {ratio:.2f}x" for name, ratio in ratios.items()))
        print(f"  all types, summed: {sum(medians[ours].values()) / sum(medians[other].values()):.2f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.replay")
    parser.add_argument("--runs", type=int, default=20, help="runs of each history per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--against", type=Path, action="append", default=[], help="another checkout (repeatable)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        asyncio.run(_child(args.runs))
    else:
        main(args.runs, args.rounds, [root.resolve() for root in args.against])
