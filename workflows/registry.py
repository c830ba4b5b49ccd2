"""Every workflow the worker runs."""

from workflows.account_deletion import AccountDeletionWorkflow
from workflows.account_export import AccountExportWorkflow
from workflows.bot_deletion import BotDeletionWorkflow
from workflows.reconciler import DeletionReconcilerWorkflow
from workflows.site_creation import SiteCreationWorkflow
from workflows.site_deletion import SiteDeletionWorkflow

WORKFLOWS: list[type] = [
    BotDeletionWorkflow,
    AccountDeletionWorkflow,
    DeletionReconcilerWorkflow,
    SiteCreationWorkflow,
    SiteDeletionWorkflow,
    AccountExportWorkflow,
]
