"""`python -m lifecycle.deletion.conformance (--task-queue QUEUE | --nexus-endpoint ENDPOINT) --seed COMMAND
[--read-exports]`: checks a running service against the deletion contract's promises, from the outside, and prints
one line per check. It exits 0 when none failed, 1 when one did, 2 when it could not run.

Temporal is reached as the `temporal` CLI reaches it (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY,
TEMPORAL_TLS*, profiles: lifecycle/temporal_client.py). With --task-queue, that is the namespace the service's
worker polls, and the kit calls the service's activities there; with --nexus-endpoint, any namespace the endpoint
admits callers from (the gateway's), and the kit calls the contract's Nexus operations through the endpoint, as the
gateway does. Either way the kit runs workflows of its own in that namespace (`ConformanceCall`,
`ConformanceNexusCall`, on a queue of its own).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator

from temporalio.client import Client

from lifecycle.deletion.conformance.report import any_failed, line, summary
from lifecycle.deletion.conformance.run import run_checks
from lifecycle.deletion.conformance.seeding import CommandSeeder
from lifecycle.deletion.conformance.seeding import __doc__ as SEEDING
from lifecycle.deletion.conformance.transport import Transport, nexus_transport, task_queue_transport
from lifecycle.object_store import ObjectStore
from lifecycle.settings import get_settings
from lifecycle.temporal_client import TemporalMisconfigured, TemporalUnreachable, connect


def arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m lifecycle.deletion.conformance",
        description=__doc__,
        epilog=SEEDING,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--task-queue", help="the service's own task queue, in the namespace the kit connects to")
    where.add_argument("--nexus-endpoint", metavar="ENDPOINT", help="the Nexus endpoint the service is reached by")
    parser.add_argument("--seed", required=True, metavar="COMMAND", help="the command that seeds a subject (below)")
    parser.add_argument(
        "--read-exports",
        action="store_true",
        help="read the export part back from the object store the S3_* variables name (the service's), check its"
        " sha256 and size, and remove it",
    )
    return parser.parse_args(argv)


@contextlib.asynccontextmanager
async def object_store(wanted: bool) -> AsyncIterator[ObjectStore | None]:
    if not wanted:
        yield None
        return
    objects = ObjectStore(get_settings())
    try:
        yield objects
    finally:
        await objects.close()


def transport_of(client: Client, options: argparse.Namespace) -> contextlib.AbstractAsyncContextManager[Transport]:
    if options.nexus_endpoint:
        return nexus_transport(client, options.nexus_endpoint)
    return task_queue_transport(client, options.task_queue)


async def check(options: argparse.Namespace, seeder: CommandSeeder) -> int:
    settings = get_settings()
    client = await connect(settings)
    async with (
        transport_of(client, options) as transport,
        object_store(options.read_exports) as objects,
    ):
        print(f"lifecycle.deletion.v1 conformance of {transport.describe()}", flush=True)
        results = []
        async for result in run_checks(transport, seeder, objects):
            print(line(result), flush=True)
            results.append(result)
    print(summary(results))
    return 1 if any_failed(results) else 0


def main(argv: list[str] | None = None) -> int:
    options = arguments(argv)
    try:
        seeder = CommandSeeder(options.seed)
    except ValueError as err:
        print(f"--seed: {err}", file=sys.stderr)
        return 2
    try:
        return asyncio.run(check(options, seeder))
    except (TemporalMisconfigured, TemporalUnreachable) as err:
        print(f"cannot reach Temporal: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
