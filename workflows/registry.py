"""Every workflow the worker runs."""

from workflows.site_creation import SiteCreationWorkflow
from workflows.site_deletion import SiteDeletionWorkflow

WORKFLOWS: list[type] = [SiteCreationWorkflow, SiteDeletionWorkflow]
