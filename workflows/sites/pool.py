"""One server's warm pool (lifecycle/sites/pool.py): a long-lived run per server that passes over the pool when
poked (a `refill` signal: a claim left the pool at half its target, an admin changed the server, a worker
started), once the pokes have paused for REFILL_QUIET (so a burst of claims is served before the refill takes
the CPU), and every REFILL_EVERY anyway. Each pass removes half-made databases, then makes a few more
(REFILL_BATCH), drops the unclaimed ones of a draining server, or drops the surplus over a lowered target; the run
pauses REFILL_PAUSE between passes while the pool is still short, which bounds the rate at which it takes the
server's CPU.
"""

# No `from __future__ import annotations`: see workflows/sites/creation.py.
import contextlib

from temporalio import workflow
from temporalio.common import VersioningBehavior

with workflow.unsafe.imports_passed_through():
    import workflows.activity_presets as presets
    from activities.sites.pool import SitePoolActivities
    from lifecycle.sites.contracts import SiteDbPoolInput, SiteDbPoolPass
    from lifecycle.sites.pool import REFILL_DEFER_MAX, REFILL_EVERY, REFILL_PAUSE, REFILL_QUIET, REFILL_SIGNAL
    from lifecycle.sites.workflow_types import SITE_DB_POOL_WORKFLOW

# Looks per run before it continues as new: keeps the history short (a look is a handful of events).
_LOOKS_PER_RUN = 20


# Pinned, as every workflow here; the run never ends on its own, so it continues as new onto the current version.
@workflow.defn(name=SITE_DB_POOL_WORKFLOW, versioning_behavior=VersioningBehavior.PINNED)
class SiteDbPoolWorkflow:
    def __init__(self) -> None:
        self._poked = False
        self._last = SiteDbPoolPass()

    @workflow.signal(name=REFILL_SIGNAL)
    def refill(self) -> None:
        self._poked = True

    @workflow.query(name="last_pass")
    def last_pass(self) -> SiteDbPoolPass:
        return self._last

    async def _quiet(self) -> None:
        """Wait until pokes stop for REFILL_QUIET (a burst of claims is over), REFILL_DEFER_MAX at most."""
        deadline = workflow.now() + REFILL_DEFER_MAX
        while self._poked and workflow.now() < deadline:
            self._poked = False
            quiet = min(REFILL_QUIET, deadline - workflow.now())
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(lambda: self._poked, timeout=quiet)

    @workflow.run
    async def run(self, pool: SiteDbPoolInput) -> None:
        for _ in range(_LOOKS_PER_RUN):
            # A poke that comes during a pass is kept for the next look.
            self._poked = False
            self._last = await workflow.execute_activity_method(
                SitePoolActivities.refill_site_db_pool,
                pool,
                **presets.SITE_POOL_PASS,
                summary=f"refill the warm pool of {pool.server}",
            )
            if self._last.more:
                await workflow.sleep(REFILL_PAUSE)
            else:
                with contextlib.suppress(TimeoutError):  # no poke within REFILL_EVERY: look anyway
                    await workflow.wait_condition(lambda: self._poked or _new_version(), timeout=REFILL_EVERY)
            # Also between the passes of one refill: while sites keep claiming, it makes REFILL_BATCH databases per
            # REFILL_DEFER_MAX, and runs at full rate once they pause.
            await self._quiet()
            info = workflow.info()
            # A new version made current: the run goes on with its code at once, so the old version drains (a run
            # of 20 looks could otherwise hold it for 20 minutes).
            if info.is_continue_as_new_suggested() or info.is_target_worker_deployment_version_changed():
                break
        workflow.continue_as_new(
            pool, initial_versioning_behavior=workflow.ContinueAsNewVersioningBehavior.AUTO_UPGRADE
        )


def _new_version() -> bool:
    return workflow.info().is_target_worker_deployment_version_changed()
