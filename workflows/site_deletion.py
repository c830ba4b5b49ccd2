"""Site teardown: once the creation has closed, drop the database and role, the files, then the metadata."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from lifecycle.contracts import SiteDeletionInput, SiteProgress, SiteRef
    from lifecycle.search_attributes import LIFECYCLE_STATUS
    from lifecycle.workflow_types import SITE_DELETION_WORKFLOW
    from workflows import site_policies as policies
    from workflows.site_shield import uninterruptible

# Each teardown step and what the operator sees while it runs.
TEARDOWN = (
    ("drop_site_database", "drop the database and role"),
    ("remove_site_filesystem", "remove the files"),
)


@workflow.defn(name=SITE_DELETION_WORKFLOW)
class SiteDeletionWorkflow:
    def __init__(self) -> None:
        self._status = "deleting"
        self._stage = "waiting for the creation to close"

    @workflow.query(name="progress")
    def progress(self) -> SiteProgress:
        return SiteProgress(status=self._status, steps={"teardown": self._stage})

    @workflow.run
    async def run(self, input: SiteDeletionInput) -> SiteProgress:
        # Half a teardown is worse than none or all, so a cancellation cannot stop it.
        await uninterruptible(self._tear_down(input))
        return self.progress()

    async def _tear_down(self, input: SiteDeletionInput) -> None:
        self._publish()
        await self._activity("await_site_creation_closed", input, "wait for the creation to close")
        await self._activity("begin_site_deletion", input, "mark deleting")
        workflow.upsert_search_attributes([LIFECYCLE_STATUS.value_set("deleting")])
        for name, summary in TEARDOWN:
            self._stage = summary
            self._publish()
            await self._activity(name, SiteRef(input.site_id), summary)
        self._stage = "delete the metadata"
        await self._activity("delete_site_metadata", input, "delete the metadata and free the domain")
        self._status = "deleted"
        self._stage = "done"
        workflow.upsert_search_attributes([LIFECYCLE_STATUS.value_set("deleted")])
        self._publish()

    async def _activity(self, name: str, arg: object, summary: str) -> None:
        heartbeat = policies.AWAIT_CREATION_HEARTBEAT if name == "await_site_creation_closed" else None
        timeout = policies.AWAIT_CREATION_TIMEOUT if heartbeat else policies.UNDO_TIMEOUT
        await workflow.execute_activity(
            name,
            arg,
            start_to_close_timeout=timeout,
            heartbeat_timeout=heartbeat,
            retry_policy=policies.UNDO_RETRY,
            summary=summary,
        )

    def _publish(self) -> None:
        workflow.set_current_details(f"{self._status}: {self._stage}")
