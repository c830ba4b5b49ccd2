"""Every workflow the worker runs."""

from workflows.account_deletion import AccountDeletionWorkflow
from workflows.bot_deletion import BotDeletionWorkflow
from workflows.reconciler import DeletionReconcilerWorkflow

WORKFLOWS: list[type] = [BotDeletionWorkflow, AccountDeletionWorkflow, DeletionReconcilerWorkflow]
