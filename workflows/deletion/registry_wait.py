"""A deletion never completes having reached nobody: one that finds no registered deletion service waits for one,
shown as `waiting` with the reason NO_SERVICE_REGISTERED, and alerts once.

It reads the registry again when the API signals that a service registered (SERVICE_REGISTERED), and on a durable
timer besides, so a registration whose signal was lost is seen within the recheck interval. Once a service is
there, it reads again after the settle interval until the registry stops changing: the services of a deployment start
(and register) together, one a few seconds after another, and a deletion that went on with the first one alone
would never call the others. Only an operator's deliberate NOTHING_TO_REACH lets it go on with an empty registry;
the deletion then ends `incomplete`, and its receipt, which lists no service, is never complete
(activities/deletion/receipts.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    import workflows.activity_presets as presets
    import workflows.deletion.registered_calls as registered_calls
    from activities.alerts import Alerts
    from lifecycle.deletion.contracts import OperatorAction, ServiceRegistry
    from lifecycle.deletion.registry import NO_SERVICE_REGISTERED, NOTHING_TO_REACH, SERVICE_REGISTERED
    from lifecycle.shared_contracts import AlertInput
    from workflows.deletion.operator_gate import log_alert_failure


class RegistryWait:
    def __init__(self, recheck: timedelta, settle: timedelta, *, nothing_to_reach: bool, alerted: bool) -> None:
        self._recheck = recheck
        self._settle = settle
        # Set by the operator's NOTHING_TO_REACH (or given: an account's bot deletions inherit it).
        self.nothing_to_reach = nothing_to_reach
        # The alert went out (in this run or one before it): never again for this deletion.
        self.alerted = alerted
        self.waiting = False
        self._signalled = False

    def service_registered(self) -> None:
        """The API's signal: read the registry now rather than at the next timer."""
        self._signalled = True

    def refusal(self) -> str | None:
        """Why NOTHING_TO_REACH is refused now, or None if it would be taken."""
        if self.nothing_to_reach:
            return f"{NOTHING_TO_REACH} was already sent"
        if not self.waiting:
            return f"the deletion is not waiting for a deletion service to register: {NOTHING_TO_REACH} refused"
        return None

    async def read(self, show_status: Callable[[], None], give_up: Callable[[], bool]) -> ServiceRegistry | None:
        """The registry once it holds a service, or as it is (empty) once an operator decided there is nothing to
        reach; None if `give_up` (time to continue as new) while it waits. `show_status` publishes the status as
        `waiting` changes, before the alert goes out."""
        registry = await self._read()
        while not registry.services and not self.nothing_to_reach:
            if give_up():
                return None
            if not self.waiting:
                workflow.logger.warning("%s; waiting for one", NO_SERVICE_REGISTERED)
                self.waiting = True
                show_status()
                self._alert_once()
            # A timeout is the recheck: the registry is read again either way.
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(
                    lambda: self._signalled or self.nothing_to_reach,
                    timeout=self._recheck,
                    timeout_summary="read the deletion services' registry again",
                )
            registry = await self._read()
        if not self.waiting:
            return registry
        self.waiting = False
        show_status()
        return await self._settled(registry) if registry.services else registry

    async def _read(self) -> ServiceRegistry:
        """The registry as it is now. The signal is taken before the read, so that one arriving while the read is
        in flight (a second service registering) makes the next wait end at once instead of being lost."""
        self._signalled = False
        return await registered_calls.read_registry()

    async def _settled(self, registry: ServiceRegistry) -> ServiceRegistry:
        """The registry once no service joined it for the settle interval."""
        while True:
            await workflow.sleep(self._settle, summary="let the services starting together register")
            again = await registered_calls.read_registry()
            if [s.name for s in again.services] == [s.name for s in registry.services]:
                return again
            registry = again

    def _alert_once(self) -> None:
        if self.alerted:
            return
        self.alerted = True
        # In the background: the run already shows `waiting`, and an alert that cannot be recorded never holds
        # it up (as workflows/deletion/operator_gate.py's).
        raising = workflow.start_activity_method(
            Alerts.raise_alert,
            AlertInput(
                workflow_id=workflow.info().workflow_id,
                subject="deletion waits: no deletion service is registered",
                reason=f"{NO_SERVICE_REGISTERED}; it goes on once one registers (PUT /deletion-services/{{name}}),"
                f" or after an operator's {NOTHING_TO_REACH}, incomplete",
            ),
            **presets.OPERATOR_ALERT,
            summary="alert: no deletion service is registered",
        )
        raising.add_done_callback(log_alert_failure)


class RegistryMessages:
    """The messages of a deletion workflow that may wait in a RegistryWait (`_registry_wait`): the API's
    SERVICE_REGISTERED, and the operator's NOTHING_TO_REACH, as a signal (for tctl) and an update that answers.
    The workflow keeps the operator's action for its receipt in `_took_nothing_to_reach`."""

    _registry_wait: RegistryWait

    def _took_nothing_to_reach(self, action: OperatorAction) -> None:
        raise NotImplementedError

    @workflow.signal(name=SERVICE_REGISTERED)
    def service_registered(self) -> None:
        """The API registered a deletion service: a deletion that waits for one reads the registry now."""
        self._registry_wait.service_registered()

    @workflow.signal(name=NOTHING_TO_REACH)
    def nothing_to_reach(self) -> None:
        """Operator: no deletion service holds anything of the subject; go on without any, to end `incomplete`."""
        if (refused := self._registry_wait.refusal()) is not None:
            workflow.logger.warning("operator message ignored: %s", refused)
            return
        self._registry_wait.nothing_to_reach = True
        self._took_nothing_to_reach(OperatorAction(NOTHING_TO_REACH, workflow.now().isoformat()))

    @workflow.update(name=NOTHING_TO_REACH)
    def nothing_to_reach_update(self) -> str:
        """`nothing_to_reach` that answers: refused by the validator unless the deletion waits for a service."""
        self.nothing_to_reach()
        return "going on without any deletion service; the deletion ends incomplete, its receipt says so"

    @nothing_to_reach_update.validator
    def _validate_nothing_to_reach(self) -> None:
        if (refused := self._registry_wait.refusal()) is not None:
            raise ValueError(refused)
