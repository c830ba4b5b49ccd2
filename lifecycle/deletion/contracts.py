"""Bot and account deletion inputs and outputs: ids and counts, never PII."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from enum import StrEnum

from lifecycle.statuses import DeletionState, Throttle

# A service's slice works for at most this long (DeleteRequest.max_duration_ms), then returns so the workflow can
# pause or resize batches.
DELETER_SLICE = timedelta(seconds=5)
# The ApplicationError type of infrastructure failures (database down, connection lost): the workflows retry
# these without end, while anything else that exhausts its retries is a poison pill for an operator.
TRANSIENT_ERROR = "TransientError"

# Rows per call of a service (DeleteRequest.max_rows): with the key-range DELETE of services/runtime/tables.py,
# larger slices delete faster per row (bench.deletion), and 50,000 rows is still one transaction of well under a
# second, short enough for the locks it holds.
DEFAULT_BATCH_SIZE = 50_000
MIN_BATCH_SIZE = 100
MAX_BATCH_SIZE = 100_000
# A run continues as new past this many history events, well below Temporal's warning thresholds.
CONTINUE_AS_NEW_AFTER_EVENTS = 2_000
# While a legal hold stops a deletion, its run asks PostgreSQL again on a durable timer this often, besides on every
# signal of a change, so a release whose signal was lost (the API died between its commit and the signal) is seen
# within this. 15 minutes is about 30 history events an hour: a hold of months continues as new every few days.
LEGAL_HOLD_RECHECK_SECONDS = 15 * 60
# While a deletion waits for a deletion service to register, its run reads the registry again on a durable timer
# this often, besides on the API's `service_registered` signal, so a registration whose signal was lost is seen
# within this; about 10 history events a reading, so a wait of days continues as new every few hours.
REGISTRY_RECHECK_SECONDS = 5 * 60
# Once a deletion that waited sees a service registered, it reads the registry again this long after until no
# service joined it meanwhile (workflows/deletion/registry_wait.py): long enough for the services started together
# to have registered, one after another (`make run` starts four within a few seconds); short beside a wait that had
# no service at all.
REGISTRY_SETTLE_SECONDS = 20
# While a deletion waits for one of its account's lanes, its run asks again on a durable timer this often, besides on
# the signal of the run that let it in, so a lane freed without a signal (a terminated run) is taken within this.
ACCOUNT_LANE_RECHECK_SECONDS = 5 * 60
# The signal a deletion's run sends to the runs of its account it let into a lane.
ACCOUNT_LANE_OPENED = "account_lane_opened"


@dataclass
class AccountLaneRequest:
    workflow_id: str
    account_id: str


@dataclass
class AccountLaneAnswer:
    """Whether the deletion holds one of its account's lanes, and the other deletions that took one just now,
    which the run tells (they would otherwise wait for their recheck)."""

    taken: bool
    opened_for: list[str] = field(default_factory=list)


@dataclass
class ServiceProgress:
    """How far one registered service's deletion got, as its answers (DeleteResponse) said."""

    deleted: int = 0
    total: int = 0
    done: bool = False
    skipped: bool = False
    files_deleted: int = 0
    # Measured over the last window of at least a second, and what slowed the last batch (a Throttle value).
    rows_per_second: int = 0
    throttled: Throttle | None = None
    # The service's own cursor (DeleteResponse.cursor), opaque here.
    resume_from: str = ""
    # Since when (RFC 3339) the run has waited for a registered service's worker to take its call; None while
    # the service answers.
    waiting_since: str | None = None


@dataclass
class RegisteredService:
    """A service of the registry (lifecycle/deletion/registry.py): its name and how a deletion reaches it, which is
    the registry's business alone: the task queue it answers on in the gateway's namespace, or else (task_queue
    empty) the Nexus endpoint into its own namespace."""

    name: str
    task_queue: str
    # When it registered (RFC 3339, deletion_services.registered_at), for the receipt; empty where not read.
    registered_at: str = ""
    nexus_endpoint: str = ""


@dataclass
class DeletionBudget:
    """The deletion budget as it stands (lifecycle/deletion/budget.py): the rows/s the services share (None:
    unlimited), and the services that have a rows/s of their own instead."""

    rows_per_second: int | None = None
    services: dict[str, int] = field(default_factory=dict)


@dataclass
class ServiceRegistry:
    """The registered services a deletion calls, read once by its first run and carried across continue-as-new,
    so every replay calls the same ones."""

    services: list[RegisteredService] = field(default_factory=list)
    # The budget as the last activity read it; each service's next call takes its rows/s from it (budget_share).
    budget: DeletionBudget = field(default_factory=DeletionBudget)
    # What earlier runs of the same deletion recorded for these services (a run after a cancel or a terminate
    # resumes from it); the first run takes it into its progress, and carries none on.
    recorded: dict[str, ServiceProgress] = field(default_factory=dict)


@dataclass
class ServiceProgressRecord:
    """A registered service's progress, as the run knows it, to record where the API and the receipt read it."""

    workflow_id: str
    service: str
    progress: ServiceProgress
    # The service answered a call (sets its last_answered_at in the registry).
    answered: bool


@dataclass
class ServiceVerification:
    """What a registered service's VerifySubjectErased counted of the subject: the receipt's check of it."""

    service: str
    remaining_rows: int
    remaining_files: int


@dataclass
class BotDeletionInput:
    bot_id: str
    account_id: str
    batch_size: int = DEFAULT_BATCH_SIZE
    # Carried across continue-as-new; empty on the first run.
    progress: dict[str, ServiceProgress] = field(default_factory=dict)
    paused: bool = False
    continue_as_new_after_events: int = CONTINUE_AS_NEW_AFTER_EVENTS
    # Carried across continue-as-new, for the receipt.
    operator_actions: list[OperatorAction] = field(default_factory=list)
    # The registered services, read by the first run; None until then.
    registry: ServiceRegistry | None = None
    legal_hold_recheck_seconds: int = LEGAL_HOLD_RECHECK_SECONDS
    registry_recheck_seconds: int = REGISTRY_RECHECK_SECONDS
    registry_settle_seconds: int = REGISTRY_SETTLE_SECONDS
    # Carried across continue-as-new while it waits for a service to register: the alert went out once already.
    no_service_alerted: bool = False
    # A DELETE /bots deletion takes one of its account's lanes before it deletes; an account deletion's bots run
    # in the lanes their account deletion bounds (workflows/deletion/account.py).
    takes_account_lane: bool = True
    # Carried across continue-as-new once the run holds its lane: the next run goes on deleting, never queues again.
    holds_account_lane: bool = False
    account_lane_recheck_seconds: int = ACCOUNT_LANE_RECHECK_SECONDS


@dataclass
class OperatorAction:
    """An operator's message a deletion acted on, for its receipt: what, when (RFC 3339), and on what."""

    action: str
    at: str
    target: str | None = None


@dataclass
class DeletionStatus:
    """What the `progress` query returns (the API reads deletion_requests and deletion_progress instead)."""

    status: DeletionState
    services: dict[str, ServiceProgress]
    batch_size: int
    waiting_on: str | None = None
    # The last operator message that arrived while nothing waited for one (logged and shown, not acted on).
    ignored_message: str | None = None
    # As the deleters last measured them; the estimate is at that rate (RFC 3339), None while unknown.
    rows_per_second: int = 0
    throttled: Throttle | None = None
    estimated_completion: str | None = None


@dataclass
class BotDeletionResult:
    bot_id: str
    services: dict[str, ServiceProgress]
    # `incomplete` when an operator skipped a service: its rows and the bot row remain.
    status: DeletionState = DeletionState.COMPLETED


@dataclass
class FinishBotDeletionInput:
    workflow_id: str
    bot_id: str
    # A skipped service leaves data of the bot, so its row must stay too.
    delete_bot_row: bool
    # Recorded in deletion_progress, so the status API says which services an operator skipped.
    skipped_services: list[str] = field(default_factory=list)


@dataclass
class FinishBotDeletionResult:
    """Whether finishing removed the bot row (not when an operator skipped a service)."""

    bot_row_deleted: bool = False


@dataclass
class AccountDeletionInput:
    account_id: str
    max_concurrent_bots: int = 4
    # Child site deletions run on the customer-facing queue (settings.site_task_queue); empty: on the account
    # deletion's own queue.
    site_task_queue: str = ""
    # Carried across continue-as-new.
    finished_bot_ids: list[str] = field(default_factory=list)
    totals: dict[str, ServiceProgress] = field(default_factory=dict)
    continue_as_new_after_events: int = CONTINUE_AS_NEW_AFTER_EVENTS
    # The end of the grace period (ISO 8601, UTC), from deletion_requests.deletes_at: nothing is deleted before
    # it, and an admin may restore the account until then. None (a zero grace, or a run past it): no grace.
    deletes_at: str | None = None
    # Carried across continue-as-new: an operator's pause holds in the next run, whose bot deletions start paused.
    paused: bool = False
    # Given to its bot deletions too.
    legal_hold_recheck_seconds: int = LEGAL_HOLD_RECHECK_SECONDS
    registry_recheck_seconds: int = REGISTRY_RECHECK_SECONDS
    registry_settle_seconds: int = REGISTRY_SETTLE_SECONDS
    # Carried across continue-as-new: the registry the account read before deleting its bots (for its receipt),
    # None until then, and whether the alert about an empty one already went out.
    registry: list[RegisteredService] | None = None
    no_service_alerted: bool = False
    # An operator's nothing_to_reach, for the receipt; its bot deletions go on without a service too.
    nothing_to_reach: OperatorAction | None = None


@dataclass
class AccountDeletionResult:
    account_id: str
    bots_deleted: int
    services: dict[str, ServiceProgress]
    account_row_deleted: bool
    # `incomplete` when an operator chose to stop with data left: the account row stays and no email goes out.
    status: DeletionState = DeletionState.COMPLETED


@dataclass
class AwaitBotDeletionInput:
    workflow_id: str


@dataclass
class FinishAccountDeletionInput:
    workflow_id: str
    account_id: str


@dataclass
class DeletionEmailInput:
    """Counts only: the address is read from deletion_requests by the activity, never carried here."""

    workflow_id: str
    deleted_per_service: dict[str, int]
    # Named in the email, so the recipient can ask for the signed receipt later.
    receipt_id: str | None = None


class ReceiptSubject(StrEnum):
    BOT = "bot"
    ACCOUNT = "account"


@dataclass
class ReceiptInput:
    """What a deletion asks its receipt to record; the rest is read and checked in the database and on disk."""

    workflow_id: str
    # The first run of the chain: one receipt per deletion request, whatever retries, resets and
    # continues-as-new happen; a later request under the same workflow id (after a skip) gets its own.
    first_run_id: str
    run_id: str
    subject_kind: ReceiptSubject
    subject_id: str
    account_id: str
    operator_actions: list[OperatorAction] = field(default_factory=list)
    # The registered services' own counts of what is left, from VerifySubjectErased just before.
    verified: list[ServiceVerification] = field(default_factory=list)
    # The registry the deletion used; a receipt with none in it is never complete.
    registry: list[RegisteredService] = field(default_factory=list)


@dataclass
class DeletionPreviewInput:
    """What a preview counts (workflows/deletion/preview.py): the services the registry holds now and the bots a
    deletion of the subject would delete (one for a bot; every bot of an account), ids and queue names only."""

    services: list[RegisteredService]
    bot_ids: list[str]


@dataclass
class ServiceHoldings:
    """What one service holds of the previewed bots, by its own count (VerifySubjectErased); `estimated` when it
    answered any of them from an estimate."""

    rows: int
    files: int
    estimated: bool = False


@dataclass
class DeletionPreviewResult:
    """Per service name, what it holds of the subject; None for a service that did not answer (no worker took
    the call in time, or it failed)."""

    services: dict[str, ServiceHoldings | None]


@dataclass
class BeginErasureInput:
    """An account deletion whose data is gone: the processors to tell are recorded under its erasure id."""

    workflow_id: str
    first_run_id: str
    account_id: str


@dataclass
class ProcessorErasureInput:
    """What the processors' run (workflows/deletion/processors.py) needs: ids, names and the retry timings the
    workers are configured with (PROCESSOR_RETRY_*), never a URL or a secret."""

    erasure_id: str
    account_id: str
    deletion_workflow_id: str
    processors: list[str] = field(default_factory=list)
    # The deletion's first receipt, which the follow-up receipt completes (set once it is signed).
    receipt_id: str = ""
    retry_first_seconds: float = 2.0
    retry_cap_seconds: float = 3600.0
    request_timeout_seconds: float = 10.0
    alert_after_seconds: float = 86400.0


@dataclass
class ErasureDelivery:
    """One deletion's request to one processor."""

    erasure_id: str
    processor: str


@dataclass
class FollowUpInput:
    """A follow-up receipt of the deletion whose first receipt is `receipt_id`, for `reason`; keyed by `key` so a
    retry finds the one it signed."""

    receipt_id: str
    key: str
    reason: str
