"""The health check of the site-database servers, one pass per run, started by its Temporal Schedule every few
seconds (lifecycle/schedules.py): a server that does not answer is marked down, and active again once it does,
never overriding an operator's state (activities/sites/health_check.py)."""

from __future__ import annotations

from temporalio import workflow
from temporalio.common import VersioningBehavior

with workflow.unsafe.imports_passed_through():
    import workflows.activity_presets as presets
    from activities.sites.health_check import SiteServerHealth
    from lifecycle.sites.contracts import SiteServersChecked
    from lifecycle.sites.workflow_types import SITE_SERVER_HEALTH_CHECK_WORKFLOW


# Pinned: a run lasts seconds, and the schedule starts each next one on the current version.
@workflow.defn(name=SITE_SERVER_HEALTH_CHECK_WORKFLOW, versioning_behavior=VersioningBehavior.PINNED)
class SiteServerHealthCheckWorkflow:
    @workflow.run
    async def run(self) -> SiteServersChecked:
        return await workflow.execute_activity_method(
            SiteServerHealth.check_site_db_servers,
            **presets.SITE_SERVER_CHECK,
            summary="connect to every site-database server; mark down or active again",
        )
