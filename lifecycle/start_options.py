"""How a workflow run is started, whatever its type: the options a start is made of, and the policy every start
shares. Each feature's `workflow_types.py` (lifecycle/deletion/, lifecycle/sites/, lifecycle/exports/) defines, per
workflow type, its type name, id, id reuse policy, search attributes, fairness key and one function that returns
its StartOptions. The API, the reconciler, a parent workflow (as child options) and the tests all start runs
through those functions, so a run started anywhere looks the same.

Every start joins the open run under its id (ON_CONFLICT): a repeated request never makes a second one. What a
start does once the last run closed is chosen per type (the table in docs/design.md, "How the work runs").
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.client import Client, WorkflowHandle
from temporalio.common import (
    Priority,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
from temporalio.workflow import ParentClosePolicy

# A start while a run is open joins it.
ON_CONFLICT = WorkflowIDConflictPolicy.USE_EXISTING


def account_fairness(account_id: str) -> Priority:
    """Task-queue fairness for background work, so one account's mass deletion does not starve another's: a run
    that carries its account id as the fairness key (and, by inheritance, its activities and children) has its
    tasks dispatched in turn with other accounts' rather than in arrival order."""
    # Fairness keys are at most 64 bytes; an account id is a 36-character UUID.
    return Priority(fairness_key=str(account_id))


@dataclass(frozen=True)
class StartOptions:
    """A run's identity and labels, for a client's start or a parent's child start."""

    workflow_type: str
    id: str
    id_reuse_policy: WorkflowIDReusePolicy
    search_attributes: TypedSearchAttributes
    static_summary: str
    static_details: str
    # Background work carries its account as the task-queue fairness key (account_fairness).
    priority: Priority = Priority.default

    async def start(
        self,
        client: Client,
        arg: Any,
        *,
        task_queue: str,
        result_type: type | None = None,
        execution_timeout: timedelta | None = None,
        start_signal: str | None = None,
    ) -> WorkflowHandle[Any, Any]:
        """Start the run, or join the open one. `execution_timeout` bounds a run someone waits for (a preview);
        `start_signal` sends that signal to the run, starting it first if none is open (the warm pool's pokes,
        and tests)."""
        return await client.start_workflow(
            self.workflow_type,
            arg,
            id=self.id,
            task_queue=task_queue,
            result_type=result_type,
            execution_timeout=execution_timeout,
            start_signal=start_signal,
            id_conflict_policy=ON_CONFLICT,
            id_reuse_policy=self.id_reuse_policy,
            search_attributes=self.search_attributes,
            priority=self.priority,
            static_summary=self.static_summary,
            static_details=self.static_details,
        )

    def child(
        self, *, parent_close_policy: ParentClosePolicy, task_queue: str | None = None
    ) -> workflow.ChildWorkflowConfig:
        """Options for `workflow.execute_child_workflow`; no `task_queue`: the parent's."""
        return workflow.ChildWorkflowConfig(
            id=self.id,
            task_queue=task_queue,
            id_reuse_policy=self.id_reuse_policy,
            parent_close_policy=parent_close_policy,
            search_attributes=self.search_attributes,
            priority=self.priority,
            static_summary=self.static_summary,
            static_details=self.static_details,
        )


@dataclass(frozen=True)
class ScheduledStart:
    """A workflow type that a Temporal Schedule starts every `every`, one run at a time (lifecycle/schedules.py
    keeps the schedule): the schedule's id, and the type, id and summary of the runs it starts."""

    schedule_id: str
    workflow_type: str
    id: str
    every: timedelta
    static_summary: str
