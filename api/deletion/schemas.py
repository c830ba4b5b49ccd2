"""Request and response bodies of the deletion endpoints."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from lifecycle.statuses import DeletionState, ProcessorAnswer, Throttle


class DeletionAccepted(BaseModel):
    workflow_id: str
    status: str = Field(
        description="`accepted`: recorded, its run not begun yet (it reads `running` once the run begins; follow "
        "`status_url`), or `completed` when a previous request already finished it. After a wait that ran out, how "
        "the run stands: `accepted`, `running`, `paused` or `waiting_for_operator`; or `cancelled`, "
        "`terminated` or `failed` if it closed without completing (a repeated request finishes it). "
        "`scheduled`: an account deletion in its grace period (ACCOUNT_DELETION_GRACE), see `deletes_at`. "
        "`held`: a legal hold is in force on the account; the deletion waits until it is released."
    )
    status_url: str | None = Field(description="Where to follow the deletion; none once the caller is gone.")
    deletes_at: datetime | None = Field(
        default=None,
        exclude_if=lambda value: value is None,
        description="Only while `scheduled`: when the grace period ends and deleting begins. Until then nothing "
        "is deleted, and an admin can restore the account (POST /accounts/{id}/restore).",
    )


class DeletionFinished(BaseModel):
    """A deletion that ended while the request waited for it."""

    workflow_id: str
    status: Literal[DeletionState.COMPLETED, DeletionState.INCOMPLETE] = Field(
        description="`completed`: everything is gone. `incomplete`: an operator skipped a service, so its data "
        "and the bot or account row remain, or decided that there was no deletion service to reach "
        "(`nothing_to_reach`), so no service confirmed anything."
    )
    deleted: dict[str, int] = Field(
        description="Rows deleted per registered service, by its name (its files are counted in the receipt). An "
        "account's "
        "also counts the sites it tore down, as `sites`."
    )
    status_url: str | None = Field(description="Where the deletion stays readable; none once the caller is gone.")


class AccountDeletionFinished(DeletionFinished):
    bots_deleted: int


class ServiceCount(BaseModel):
    deleted: int
    total: int
    status: Literal["waiting"] | None = Field(
        default=None,
        exclude_if=lambda value: value is None,
        description="Only while the deletion waits for a registered service whose workers take no calls (down, "
        "or all busy): `waiting`. Nothing is lost meanwhile; the deletion goes on once a worker is back.",
    )
    waiting_since: datetime | None = Field(
        default=None,
        exclude_if=lambda value: value is None,
        description="Only while `waiting`: since when.",
    )
    reason: str | None = Field(
        default=None,
        exclude_if=lambda value: value is None,
        description="Only while `waiting`, when Temporal holds back the calls to a service behind a Nexus endpoint "
        "(its circuit breaker for the endpoint is open, after repeated retryable failures): why, as Temporal says. "
        "Read from Temporal by the reconciler, so as of its last pass.",
    )


class ProcessorState(BaseModel):
    status: ProcessorAnswer = Field(
        description="`pending` (told, or about to be; retried until it acknowledges), `acknowledged`, or `skipped` "
        "(an operator's `skip_processor`, or retired while pending)."
    )
    acknowledged_at: datetime | None
    reference: str | None = Field(description="What the processor answered as its own reference, if anything.")
    attempts: int = Field(description="Requests sent so far (retries of the same `webhook-id` included).")


class DeletionOut(BaseModel):
    """A deletion as PostgreSQL records it; neither a worker nor the Temporal server is asked."""

    workflow_id: str
    status: DeletionState = Field(
        description=(
            "`accepted` (recorded, its run not begun yet), `scheduled` (an account deletion in its grace period, "
            "see `deletes_at`), `restored` (an admin restored the account during it; nothing was deleted), "
            "`running`, `paused`, `waiting` (nobody to reach yet: see `reason`; it goes on by itself), "
            "`waiting_for_operator`, `held` (a legal hold is in force on the account: "
            "nothing is deleted until it is released, then the deletion goes on), `completed`, `incomplete` (an "
            "operator skipped a service, so some data remains, or let a deletion with no service to reach go "
            "on: `nothing_to_reach`), `cancelled`, `terminated` or `failed`. The run records each change "
            "as it makes it, a cancel included; a closing it cannot record (a terminate, a crash past its retries) "
            "the reconciler records, every 5 minutes, and the status before it shows until then, with `as_of`."
        )
    )
    reason: str | None = Field(
        default=None,
        exclude_if=lambda value: value is None,
        description="Only while `waiting`: why, e.g. `no deletion service is registered` (the deletion goes on once "
        "one registers, or ends `incomplete` after an operator's `nothing_to_reach`).",
        examples=["no deletion service is registered"],
    )
    progress: dict[str, ServiceCount] = Field(description="Rows deleted and found, per service, as committed.")
    as_of: datetime = Field(
        description="When `status` was last known true: when the run recorded it, or when the reconciler last "
        "found the run still open (every 5 minutes). A run stopped without recording it (a terminate) shows its "
        "last status as of this time until the reconciler records the stop."
    )
    requested_at: datetime
    completed_at: datetime | None
    due_at: datetime = Field(
        description="When the erasure is due: the request plus ERASURE_DUE_WITHIN (30 days by default; GDPR Art. "
        "12(3)), moved later by the time a legal hold stopped the clock once the hold is released."
    )
    overdue: bool = Field(
        description="Whether it finished after `due_at`, or is not finished past it. False while a legal hold is in "
        "force (`held`): the hold stops the clock."
    )
    resume: str | None = Field(
        description="How to resume a deletion that closed without completing; null otherwise.",
        examples=["Repeat DELETE /bots/{id} with the account's API key."],
    )
    deletes_at: datetime | None = Field(
        default=None,
        exclude_if=lambda value: value is None,
        description="Only while `scheduled` (an account deletion in its grace period): when deleting begins.",
    )
    rows_per_second: int = Field(
        description="Rows deleted per second, as the services measured their last slice; 0 while not deleting "
        "(not started, paused, waiting, or closed)."
    )
    estimated_completion: datetime | None = Field(
        description="When the deletion should finish at the current rate (RFC 3339); null while unknown. An "
        "account's counts only the bots whose deletion has begun."
    )
    throttled: Throttle | None = Field(
        description="What slows the deletion now: null, `budget` (the shared rows/s budget, "
        "GET /deletion-budget), or the database pressure signal that slows it (`lock_waits`, `autovacuum`, "
        "`replica_lag`)."
    )
    processors: dict[str, ProcessorState] = Field(
        default_factory=dict,
        description="An account's deletion, once its data is gone: each processor told of it, by name, and its "
        "answer. A `completed` deletion with a processor still `pending` has its final receipt still to come.",
    )
    processors_pending: list[str] = Field(
        default_factory=list, description="The processors that have not acknowledged yet (nor been skipped)."
    )
