"""Every check, in order, each on subjects of its own; and the promises no check from outside can reach."""

from __future__ import annotations

from collections.abc import AsyncIterator
from functools import partial

from lifecycle.deletion.conformance.calls import ContractCalls
from lifecycle.deletion.conformance.checks import guarded, never_held, retried, sliced, unknown_fields
from lifecycle.deletion.conformance.export_check import exported
from lifecycle.deletion.conformance.paced_checks import interrupted, paced
from lifecycle.deletion.conformance.report import Result, skipped
from lifecycle.deletion.conformance.seeding import Seeder
from lifecycle.deletion.conformance.subjects import KitRun
from lifecycle.deletion.conformance.transport import Transport
from lifecycle.object_store import ObjectStore

NOT_CHECKABLE = (
    skipped("batch-rows", "how a service batches its statements (DeleteRequest.batch_rows) is not visible outside"),
    skipped("export-heartbeat", "a long export's heartbeats show only in an export of more than a minute"),
)


async def run_checks(transport: Transport, seeder: Seeder, objects: ObjectStore | None = None) -> AsyncIterator[Result]:
    """The results, each as soon as its check is done: a run takes a few seconds a check."""
    kit = KitRun(ContractCalls(transport), seeder)
    for checks, check in (
        (("never-held",), partial(never_held, kit)),
        (("unknown-fields",), partial(unknown_fields, kit)),
        (("slices", "max-rows", "counts"), partial(sliced, kit)),
        (("retry",), partial(retried, kit)),
        # Before the interrupted slice, which a service may go on with, spending its budget, after the kit moved on.
        (("rows-per-second", "max-duration"), partial(paced, kit)),
        (("interrupted",), partial(interrupted, kit)),
        (("export",), partial(exported, kit, objects)),
    ):
        for result in await guarded(checks, check):
            yield result
    for result in NOT_CHECKABLE:
        yield result
