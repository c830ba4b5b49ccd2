"""Site teardown: once the creation has closed, drop the database and role, the files, then the metadata.

It deletes whatever the creation left: an active site, one whose creation was terminated half-way, one
whose rollback was interrupted or failed, or one already rolled back (which only becomes `deleted`: it no
longer holds its domain, and another site may hold it now). Every step is idempotent and guarded by the
site's status, so a reset at any point, or a new run after a terminate, changes nothing twice.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from temporalio import workflow
from temporalio.common import VersioningBehavior

with workflow.unsafe.imports_passed_through():
    import workflows.activity_presets as presets
    from activities.sites.steps import SiteActivities
    from lifecycle.search_attributes import LIFECYCLE_STATUS
    from lifecycle.sites.contracts import SiteDeletionInput, SiteProgress, SiteRef
    from lifecycle.sites.workflow_types import SITE_DELETION_WORKFLOW
    from lifecycle.statuses import SiteStatus, StepStatus
    from workflows.sites.shield import uninterruptible

# Each teardown step and what the operator sees while it runs.
TEARDOWN: tuple[tuple[Callable[[SiteActivities, SiteRef], Awaitable[Any]], str], ...] = (
    (SiteActivities.drop_site_database, "drop the database and role"),
    (SiteActivities.remove_site_filesystem, "remove the files"),
)


# Pinned: a teardown takes seconds to minutes, so it ends on the version it started on.
@workflow.defn(name=SITE_DELETION_WORKFLOW, versioning_behavior=VersioningBehavior.PINNED)
class SiteDeletionWorkflow:
    def __init__(self) -> None:
        self._status = SiteStatus.DELETING
        self._stage = "waiting for the creation to close"

    @workflow.query(name="progress")
    def progress(self) -> SiteProgress:
        # The step in progress is named in the current details (_publish); the answer says whether it is done.
        teardown = StepStatus.DONE if self._status == SiteStatus.DELETED else StepStatus.RUNNING
        return SiteProgress(status=self._status, steps={"teardown": teardown})

    @workflow.run
    async def run(self, input: SiteDeletionInput) -> SiteProgress:
        # Half a teardown is worse than none or all, so a cancellation cannot stop it.
        await uninterruptible(self._tear_down(input))
        return self.progress()

    async def _tear_down(self, input: SiteDeletionInput) -> None:
        self._publish()
        await workflow.execute_activity_method(
            SiteActivities.await_site_creation_closed,
            input,
            **presets.AWAIT_CREATION,
            summary="wait for the creation to close",
        )
        await self._activity(SiteActivities.begin_site_deletion, input, "mark deleting")
        workflow.upsert_search_attributes([LIFECYCLE_STATUS.value_set(SiteStatus.DELETING)])
        for activity, summary in TEARDOWN:
            self._stage = summary
            self._publish()
            await self._activity(activity, SiteRef(input.site_id), summary)
        self._stage = "delete the metadata"
        await self._activity(SiteActivities.delete_site_metadata, input, "delete the metadata and free the domain")
        self._status = SiteStatus.DELETED
        self._stage = "done"
        workflow.upsert_search_attributes([LIFECYCLE_STATUS.value_set(SiteStatus.DELETED)])
        self._publish()

    @staticmethod
    async def _activity(activity: Callable[[SiteActivities, Any], Awaitable[Any]], arg: object, summary: str) -> None:
        await workflow.execute_activity_method(
            activity,
            arg,
            **presets.SITE_UNDO,
            summary=summary,
        )

    def _publish(self) -> None:
        workflow.set_current_details(f"{self._status}: {self._stage}")
