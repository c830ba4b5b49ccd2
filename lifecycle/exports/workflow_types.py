"""The account export's workflow type, with everything a start of it needs: its type name, workflow id, id reuse
policy, search attributes, fairness key and the function that returns its StartOptions
(lifecycle/start_options.py)."""

from __future__ import annotations

from uuid import UUID

from temporalio.common import SearchAttributePair, TypedSearchAttributes, WorkflowIDReusePolicy

from lifecycle.search_attributes import ACCOUNT_ID, LIFECYCLE_STATUS
from lifecycle.start_options import StartOptions, account_fairness
from lifecycle.statuses import ExportStatus

ACCOUNT_EXPORT_WORKFLOW = "AccountExport"

# A run terminated before its archive was ready can run again (its parts are kept); a completed one (its archive
# expired) never does; a new request makes a new export under a new id.
EXPORT_REUSE = WorkflowIDReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY


def account_export_id(account_id: UUID | str, sequence: int) -> str:
    """The account's `sequence`-th export (allocated in `account_exports`, unique per account)."""
    return f"account-export-{account_id}-{sequence}"


def export_search_attributes(account_id: str) -> TypedSearchAttributes:
    return TypedSearchAttributes(
        [
            SearchAttributePair(ACCOUNT_ID, account_id),
            SearchAttributePair(LIFECYCLE_STATUS, ExportStatus.WRITING.value),
        ]
    )


def account_export_options(export_id: str, account_id: str, workflow_id: str) -> StartOptions:
    """`workflow_id`: the export's, allocated with its row (lifecycle/exports/starts.py)."""
    return StartOptions(
        workflow_type=ACCOUNT_EXPORT_WORKFLOW,
        id=workflow_id,
        id_reuse_policy=EXPORT_REUSE,
        search_attributes=export_search_attributes(account_id),
        priority=account_fairness(account_id),
        static_summary=f"Export account {account_id}",
        static_details=(
            f"Writes export {export_id} of account {account_id} (every bot's rows as JSON lines and every "
            "document file) into one ZIP, emails a signed link once, and deletes the archive when it expires."
        ),
    )
