"""Re-apply deletions after a backup restore: `python -m lifecycle.deletion.reapply`.

Verifies the deletion receipts' chain (PostgreSQL's and its copies in the object store), refusing to do anything
on a broken chain; puts back the receipts a restore rolled back; then deletes again every account or bot that a
receipt records as deleted and whose data is present again. Idempotent. It reads the same settings as the API and
the worker (DATABASE_URL, TEMPORAL_ADDRESS, S3_*, TASK_QUEUE). Exit status: 0 done; 3 refused, the chain is
broken (nothing changed); 1 any other failure (Temporal or the object store unreachable, say), after which it
can simply be run again. lifecycle/deletion/after_restore.py has the rules; docs/operations.md the runbook.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from lifecycle.audit import append_audit_event, command_actor, command_request_id
from lifecycle.db.engine import make_engine
from lifecycle.deletion.after_restore import reapply
from lifecycle.deletion.receipt_chain import BrokenChain
from lifecycle.object_store import ObjectStore
from lifecycle.settings import get_settings
from lifecycle.temporal_client import connect

# Told apart from a crash (1) by a script running the command.
EXIT_BROKEN_CHAIN = 3


async def _run() -> None:
    settings = get_settings()
    engine = make_engine(settings.database_url, pool_size=1, max_overflow=0)
    store = ObjectStore(settings)
    # Named first, so an operator finds this run on the audit trail, and can tell a run that was cut short (never
    # recorded) from one that finished.
    request_id = command_request_id()
    print(f"request {request_id}", flush=True)
    try:
        client = await connect(settings)
        await reapply(settings, engine, store, client, lambda line: print(line, flush=True))
        async with engine.begin() as conn:
            await append_audit_event(
                conn,
                actor=command_actor(),
                action="re-apply deletions after a restore",
                target="deletions",
                request_id=request_id,
            )
    finally:
        await store.close()
        await engine.dispose()


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(prog="python -m lifecycle.deletion.reapply", description=__doc__.split("\n")[0]).parse_args(
        argv
    )
    try:
        asyncio.run(_run())
    except BrokenChain as err:
        print(f"refused: the deletion receipts' chain is broken: {err}. Nothing changed.", file=sys.stderr)
        return EXIT_BROKEN_CHAIN
    return 0


if __name__ == "__main__":
    sys.exit(main())
