"""Task-queue fairness for background work: one account's mass deletion must not starve another's.

Every deletion run (and, by inheritance, its activities and children) carries its account id as the
fairness key, so the server dispatches tasks of different accounts in turn rather than in arrival order.
"""

from __future__ import annotations

from temporalio.common import Priority


def deletion_priority(account_id: str) -> Priority:
    # Fairness keys are at most 64 bytes; an account id is a 36-character UUID.
    return Priority(fairness_key=str(account_id))
