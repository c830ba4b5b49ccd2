"""One function per business key: the deterministic workflow ids that make duplicate starts collapse."""

from uuid import UUID


def bot_deletion_id(bot_id: UUID | str) -> str:
    return f"bot-deletion-{bot_id}"


def account_deletion_id(account_id: UUID | str) -> str:
    return f"account-deletion-{account_id}"


def reapplied_deletion_id(deletion_id: str, receipt_id: UUID | str) -> str:
    """A deletion made again after a restore brought its subject back (python -m lifecycle.reapply): named by the
    receipt of the deletion it repeats, so running the re-apply twice joins one run, and it never meets the runs
    of the first deletion (their progress, the services' ledgers) under their id."""
    return f"{deletion_id}-reapply-{UUID(str(receipt_id))}"


def site_creation_id(site_id: UUID | str) -> str:
    return f"site-creation-{site_id}"


def site_deletion_id(site_id: UUID | str) -> str:
    return f"site-deletion-{site_id}"


def account_export_id(account_id: UUID | str, sequence: int) -> str:
    """The account's `sequence`-th export (allocated in `account_exports`, unique per account)."""
    return f"account-export-{account_id}-{sequence}"


def site_db_pool_id(server: str) -> str:
    """One pool workflow per site-database server (a catalog name)."""
    return f"site-db-pool-{server}"


def deletion_preview_id(subject_kind: str, subject_id: UUID | str) -> str:
    """A preview of deleting a bot or an account: a repeat while one runs joins it (it counts the same things)."""
    return f"deletion-preview-{subject_kind}-{subject_id}"


def processor_erasure_id(deletion_workflow_id: str) -> str:
    """The run that tells the processors of one account deletion and waits for their answers."""
    return f"processor-erasure-{deletion_workflow_id}"
