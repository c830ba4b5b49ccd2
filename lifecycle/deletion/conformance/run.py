"""Every check, in order, each on subjects of its own; and the promises no check from outside can reach."""

from __future__ import annotations

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


async def run_checks(transport: Transport, seeder: Seeder, objects: ObjectStore | None = None) -> list[Result]:
    kit = KitRun(ContractCalls(transport), seeder)
    results: list[Result] = []
    for checks, check in (
        (("never-held",), never_held),
        (("unknown-fields",), unknown_fields),
        (("slices", "max-rows", "counts"), sliced),
        (("retry",), retried),
        # Before the interrupted slice, which a service may go on with, spending its budget, after the kit moved on.
        (("rows-per-second", "max-duration"), paced),
        (("interrupted",), interrupted),
    ):
        results += await guarded(checks, partial(check, kit))
    results += await guarded(("export",), partial(exported, kit, objects))
    return [*results, *NOT_CHECKABLE]
