"""Every workflow the worker runs."""

from workflows.deletion.account import AccountDeletionWorkflow
from workflows.deletion.bot import BotDeletionWorkflow
from workflows.deletion.preview import DeletionPreviewWorkflow
from workflows.deletion.processors import ProcessorErasureWorkflow
from workflows.exports.account import AccountExportWorkflow
from workflows.reconciler import DeletionReconcilerWorkflow
from workflows.sites.creation import SiteCreationWorkflow
from workflows.sites.deletion import SiteDeletionWorkflow
from workflows.sites.health_check import SiteServerHealthCheckWorkflow
from workflows.sites.pool import SiteDbPoolWorkflow

WORKFLOWS: list[type] = [
    BotDeletionWorkflow,
    AccountDeletionWorkflow,
    DeletionReconcilerWorkflow,
    SiteCreationWorkflow,
    SiteDeletionWorkflow,
    SiteDbPoolWorkflow,
    SiteServerHealthCheckWorkflow,
    AccountExportWorkflow,
    DeletionPreviewWorkflow,
    ProcessorErasureWorkflow,
]
