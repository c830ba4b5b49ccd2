"""`python -m devstack run|infra|env|migrate`: the local stack and its tools."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from dataclasses import asdict

from devstack.local_env import StackPorts, stack_environment, with_local_store_credentials
from lifecycle.settings import Settings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devstack")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser(
        "run", help="the whole local stack: infrastructure, then what the Procfile lists (API, worker, services)"
    )
    commands.add_parser("infra", help="only Temporal, PostgreSQL (migrated), SeaweedFS and the SMTP sink")
    commands.add_parser("env", help="print the environment the worker and API use, KEY=value a line")
    commands.add_parser("migrate", help="apply migrations to DATABASE_URL")
    commands.add_parser(
        "record-histories", help="re-record tests/replay/histories on a throwaway stack (replay test input)"
    )
    seeding = commands.add_parser("seed", help="a new account with bots full of rows; prints its ids and key")
    seeding.add_argument("--bots", type=int, default=1)
    seeding.add_argument("--rows", type=int, default=100_000, help="rows per bot, spread over the services")
    args = parser.parse_args(argv)

    # Each command imports what it needs when it runs: `env`, which tests and scripts call often, then starts
    # without importing the whole stack (API, worker, recorder).
    if args.command == "record-histories":
        from devstack import record_histories

        asyncio.run(record_histories.record())
        return 0
    settings = Settings()
    if args.command == "env":
        for key, value in stack_environment(settings, StackPorts.from_environ()).items():
            print(f"{key}={value}")
        return 0
    if args.command == "seed":
        from devstack.seed import seed

        seeded = asyncio.run(seed(with_local_store_credentials(settings), bots=args.bots, rows=args.rows))
        print(json.dumps(asdict(seeded)))
        return 0
    if args.command == "migrate":
        from lifecycle.migrate import upgrade

        upgrade(settings.database_url)
        return 0
    from devstack import stack

    return stack.run(settings, with_apps=args.command == "run")


if __name__ == "__main__":
    sys.exit(main())
