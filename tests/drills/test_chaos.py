"""Chaos drill: for half a minute the worker is SIGKILLed every 2-5 s, Temporal, PostgreSQL and the API each go
down once, while bot deletions, an account deletion (with sites) and a stream of site creations run.

Afterwards nothing is left behind, nothing is half-built, nobody is alerted, and every email-worthy event
went out under exactly one Message-ID.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import random
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from temporalio.client import WorkflowExecutionStatus
from temporalio.exceptions import WorkflowAlreadyStartedError

from devstack.seed import Seeded, seed
from lifecycle.deletion.contracts import MIN_BATCH_SIZE
from lifecycle.deletion.workflow_types import RECONCILER_WORKFLOW, account_deletion_id, bot_deletion_id
from lifecycle.shared_contracts import ReconcileResult
from lifecycle.sites.workflow_types import site_creation_id, site_deletion_id
from lifecycle.statuses import SiteStatus
from tests.conftest import ADMIN_TOKEN, FEW_DOCUMENTS
from tests.db import fetchval
from tests.drills import figures
from tests.drills.chaos import ChaosApi, ChaosWorkers, kill_intervals, retrying
from tests.drills.chaos_checks import (
    ACCOUNT_DELETED_SUBJECT,
    Mail,
    account_leftovers,
    bot_leftovers,
    operator_alerts,
    site_orphans,
    site_outcomes,
    site_ready_subject,
)
from tests.drills.chaos_evidence import (
    RetriedActivity,
    database_now,
    deletion_timeline,
    longest_waits,
    retried_activities,
    site_durations,
    summary,
)
from tests.drills.conftest import DrillStack
from tests.eventually import eventually
from tests.operators.starts import start_bot_deletion

# The kill schedule comes from this random seed, so a failing run can be repeated.
SEED = 10
# Half a minute of kills every 2-5 s is about ten kills, each landing on whatever runs at that moment: bot and
# account deletions, site steps, the outages' recoveries. A longer window adds kills of the same kinds, and time.
WINDOW_SECONDS = 30.0
KILL_EVERY_SECONDS = (2.0, 5.0)
# Each outage lasts a couple of seconds, at moments spread over the window and apart from each other.
DOWN_SECONDS = 2.0
TEMPORAL_RESTART_AT = 8.0
POSTGRES_RESTART_AT = 15.0
API_KILL_AT = 22.0
# Bot deletions start at these moments of the window with the smallest batches, so deleting runs throughout.
# Unhindered, one takes a second or two, longer than a worker lives once it has started: the kills land inside
# its deleter calls (with 40,000 rows none did in a run) and stretch it to tens of seconds (a lost call waits out
# its 10 s heartbeat timeout).
BOT_DELETION_STARTS = (0.0, 4.0, 8.0, 12.0, 16.0, 20.0)
ROWS_PER_BOT = 60_000
# The account to delete: bots with rows, and sites made active before the window.
DOOMED_BOTS = 2
DOOMED_ROWS_PER_BOT = 20_000
DOOMED_SITES = 3
# Requested a few seconds before Temporal goes down, so that its children are in flight through the restart.
ACCOUNT_DELETION_AT = 5.0
# How long the settle phase may take before the drill gives up and reports what is still open.
SETTLE_LIMIT_SECONDS = 150.0
# The drill asserts how a kill inside a step is noticed (by its missing heartbeats), not how soon the step
# resumed: after the heartbeat timeout and the backoff, a retry waits for a slot on a worker that lives 2-5 s
# and has six deletion activity slots for up to forty deleter calls (eight deletions of five services). That
# wait measures the drill's capacity and the machine's load, not the step. The longest waits are printed; the
# recovery with a worker to spare is what test_site_step_killed records.
# Every site's database step works this much longer (heartbeating, as a slow CREATE DATABASE would), so that
# some kills land inside a site step rather than between steps that take milliseconds.
SLOW_SITE_STEP = "create_site_database=delay:1.5"
SETTLED_DELETION = {WorkflowExecutionStatus.COMPLETED}
TERMINAL_SITE = {SiteStatus.ACTIVE, SiteStatus.ROLLED_BACK}


@dataclass
class Scenario:
    bots: Seeded
    doomed: Seeded
    doomed_email: str
    doomed_sites: dict[str, str]  # site id -> domain
    owner_email: str
    owner_key: str
    stream_sites: dict[str, str] = field(default_factory=dict)

    def headers(self, key: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {key}"}


async def _prepare(stack: DrillStack, api: ChaosApi) -> Scenario:
    settings = stack.settings
    bots = await seed(settings, bots=len(BOT_DELETION_STARTS), rows=ROWS_PER_BOT, documents=FEW_DOCUMENTS)
    doomed = await seed(settings, bots=DOOMED_BOTS, rows=DOOMED_ROWS_PER_BOT, documents=FEW_DOCUMENTS)
    doomed_email = await fetchval(
        settings.database_url, "SELECT email FROM accounts WHERE id = $1::uuid", doomed.account_id
    )
    owner_email = f"chaos-owner-{uuid.uuid4().hex[:8]}@example.com"
    owner = await api.request("POST", "/accounts", 201, json={"name": "Chaos", "email": owner_email}, headers=_admin())
    scenario = Scenario(bots, doomed, doomed_email, {}, owner_email, owner.json()["api_key"])
    for n in range(DOOMED_SITES):
        domain = f"doomed-{n}-{uuid.uuid4().hex[:8]}.example.com"
        created = await api.request(
            "POST", "/sites", 202, json={"name": "Doomed", "domain": domain}, headers=scenario.headers(doomed.api_key)
        )
        scenario.doomed_sites[created.json()["id"]] = domain
    for site_id in scenario.doomed_sites:
        await eventually(
            functools.partial(_site_status, stack, site_id),
            f"site {site_id} of the account to delete became active",
            until=lambda status: status == SiteStatus.ACTIVE,
            within=60,
        )
    return scenario


def _admin() -> dict[str, str]:
    return {"Authorization": f"Bearer {ADMIN_TOKEN}"}


async def _site_status(stack: DrillStack, site_id: str) -> str | None:
    status = await fetchval(stack.settings.database_url, "SELECT status FROM sites WHERE id = $1::uuid", site_id)
    return None if status is None else str(status)


async def _at(start: float, offset: float, action: Callable[[], Awaitable[object]]) -> None:
    await asyncio.sleep(max(0.0, start + offset - time.monotonic()))  # the drill's schedule: act at `offset`
    await action()


async def _delete_bot_in_small_batches(stack: DrillStack, api: ChaosApi, scenario: Scenario, bot_id: str) -> None:
    """Started with the smallest batch size (as an operator would), then requested through the API, which
    records the request durably and joins the running deletion."""

    async def start() -> None:
        # WorkflowAlreadyStartedError: an earlier attempt started it and its answer was lost in a restart.
        with contextlib.suppress(WorkflowAlreadyStartedError):
            await start_bot_deletion(
                stack.client,
                stack.settings.task_queue,
                bot_id=bot_id,
                account_id=scenario.bots.account_id,
                batch_size=MIN_BATCH_SIZE,
            )

    await retrying(start, f"start deletion of bot {bot_id}")
    await api.request("DELETE", f"/bots/{bot_id}", 202, headers=scenario.headers(scenario.bots.api_key))


async def _create_site(api: ChaosApi, scenario: Scenario, n: int) -> None:
    """One POST /sites, repeated with its Idempotency-Key until accepted: a repeat starts a missing creation."""
    domain = f"chaos-{n:02d}-{uuid.uuid4().hex[:8]}.example.com"
    headers = scenario.headers(scenario.owner_key) | {"Idempotency-Key": f"chaos-site-{n}"}
    created = await api.request("POST", "/sites", 202, json={"name": f"Chaos {n}", "domain": domain}, headers=headers)
    scenario.stream_sites[created.json()["id"]] = domain


async def _delete_account(api: ChaosApi, scenario: Scenario) -> None:
    # 401 on a repeat: the first attempt revoked the keys and committed, then lost its answer (the
    # reconciler run of the settle phase starts the deletion if the workflow start was lost too).
    await api.request("DELETE", "/account", 202, 401, headers=scenario.headers(scenario.doomed.api_key))


def _planned(
    stack: DrillStack, api: ChaosApi, scenario: Scenario
) -> list[tuple[float, Callable[[], Awaitable[object]]]]:
    """The deletions and the outages, each at its moment of the window."""
    deletions: list[tuple[float, Callable[[], Awaitable[object]]]] = [
        (at, functools.partial(_delete_bot_in_small_batches, stack, api, scenario, bot_id))
        for at, bot_id in zip(BOT_DELETION_STARTS, scenario.bots.bot_ids, strict=True)
    ]
    deletions.append((ACCOUNT_DELETION_AT, functools.partial(_delete_account, api, scenario)))
    outages: list[tuple[float, Callable[[], Awaitable[object]]]] = [
        (TEMPORAL_RESTART_AT, functools.partial(asyncio.to_thread, stack.restart_temporal, DOWN_SECONDS)),
        (POSTGRES_RESTART_AT, functools.partial(asyncio.to_thread, stack.restart_postgres, DOWN_SECONDS)),
        (API_KILL_AT, functools.partial(asyncio.to_thread, api.kill_and_replace)),
    ]
    return [*deletions, *outages]


async def _run_the_window(
    stack: DrillStack, workers: ChaosWorkers, api: ChaosApi, scenario: Scenario, intervals: list[float]
) -> tuple[float, float]:
    """Kill the worker on schedule, a new site requested after each kill, while the planned deletions and
    outages run alongside; return (start, last kill), monotonic."""
    started = last_kill = time.monotonic()
    # A request never accepted, or a restart that fails, ends the window at once and fails the drill.
    async with asyncio.TaskGroup() as window:
        for at, action in _planned(stack, api, scenario):
            window.create_task(_at(started, at, action))
        for n, pause in enumerate(intervals):
            await asyncio.sleep(pause)  # the kill schedule (seeded): a worker lives this long
            await asyncio.to_thread(workers.kill_and_replace)
            last_kill = time.monotonic()
            window.create_task(_create_site(api, scenario, n))
    return started, last_kill


async def _open_work(stack: DrillStack, scenario: Scenario) -> tuple[list[str], list[str]]:
    """(deletions still open, sites still open), each as a sentence."""
    deletions = [bot_deletion_id(b) for b in scenario.bots.bot_ids] + [account_deletion_id(scenario.doomed.account_id)]
    open_deletions = []
    for workflow_id in deletions:
        closed = await _workflow_status(stack, workflow_id)
        if closed not in SETTLED_DELETION:
            open_deletions.append(f"{workflow_id}: {closed.name if closed else 'not found'}")
    open_sites = []
    for site_id in scenario.stream_sites:
        status = await _site_status(stack, site_id)
        workflow = await _workflow_status(stack, site_creation_id(site_id))
        if status not in TERMINAL_SITE or workflow in (None, WorkflowExecutionStatus.RUNNING):
            open_sites.append(f"site {site_id}: {status}, creation {workflow.name if workflow else 'not found'}")
    return open_deletions, open_sites


async def _workflow_status(stack: DrillStack, workflow_id: str) -> WorkflowExecutionStatus | None:
    try:
        return (await stack.client.get_workflow_handle(workflow_id).describe()).status
    except Exception:  # not found, or the server unreachable for a moment: open either way
        return None


@dataclass
class Settled:
    sites_after: float | None = None
    everything_after: float | None = None
    waited: float = 0.0
    still_open: list[str] = field(default_factory=list)


async def _settle(stack: DrillStack, scenario: Scenario, last_kill: float) -> Settled:
    """Poll until every deletion completed and every site settled, or until an alert means nothing will."""
    settled = Settled()
    deadline = last_kill + SETTLE_LIMIT_SECONDS
    while True:
        deletions, sites = await _open_work(stack, scenario)
        now = time.monotonic()
        settled.waited = now - last_kill
        if not sites and settled.sites_after is None:
            settled.sites_after = now - last_kill
        if not deletions and not sites:
            settled.everything_after = now - last_kill
            return settled
        alerted = bool(await operator_alerts(stack.settings))
        if now > deadline or (alerted and not sites):
            # A deletion waiting for an operator never settles by itself.
            settled.still_open = deletions + sites
            return settled
        await asyncio.sleep(0.5)  # the polling interval while the drill settles (several conditions, one report)


async def _reconcile(stack: DrillStack) -> ReconcileResult:
    """One reconciler run, as the schedule would start it: deletions recorded but never started get started."""
    return await retrying(
        lambda: stack.client.execute_workflow(
            RECONCILER_WORKFLOW,
            id=f"chaos-reconcile-{uuid.uuid4().hex[:8]}",
            task_queue=stack.settings.task_queue,
            result_type=ReconcileResult,
            execution_timeout=timedelta(seconds=60),
        ),
        "the reconciler run",
    )


def _all_workflow_ids(scenario: Scenario) -> list[str]:
    """Every run the drill caused: the deletions, the account's children, and every site creation."""
    return (
        [bot_deletion_id(b) for b in scenario.bots.bot_ids + scenario.doomed.bot_ids]
        + [account_deletion_id(scenario.doomed.account_id)]
        + [site_deletion_id(s) for s in scenario.doomed_sites]
        + [site_creation_id(s) for s in [*scenario.doomed_sites, *scenario.stream_sites]]
    )


async def _print_evidence(
    stack: DrillStack, scenario: Scenario, window_started: datetime, retried: list[RetriedActivity]
) -> None:
    deletions = [bot_deletion_id(b) for b in scenario.bots.bot_ids] + [account_deletion_id(scenario.doomed.account_id)]
    print("deletions (seconds from the start of the window):")
    for line in await deletion_timeline(stack.settings, deletions, window_started):
        print(f"  {line}")
    print("slowest sites (request -> last status change):")
    for line in (await site_durations(stack.settings, list(scenario.stream_sites)))[:5]:
        print(f"  {line}")
    print("activity attempts lost to the chaos (activity <- why the previous attempt failed: attempts):")
    for reason, attempts in sorted(summary(retried).items()):
        print(f"  {reason}: {attempts}")
    print("longest waits for a lost attempt (heartbeat timeout, backoff, then a free slot on a live worker):")
    for activity in longest_waits(retried, 5):
        print(f"  {activity}")


def _mail_problems(stack: DrillStack, scenario: Scenario, statuses: dict[str, str]) -> list[str]:
    """One ready email per site that became active, none for a site that did not, one account confirmation."""
    mail = Mail.read(stack.smtp, {scenario.owner_email, scenario.doomed_email})
    ready = {
        (scenario.owner_email, site_ready_subject(d))
        for s, d in scenario.stream_sites.items()
        if statuses[s] == SiteStatus.ACTIVE
    }
    # The account's sites were active before its deletion began.
    ready |= {(scenario.doomed_email, site_ready_subject(d)) for d in scenario.doomed_sites.values()}
    never_ready = {
        (scenario.owner_email, site_ready_subject(d))
        for s, d in scenario.stream_sites.items()
        if statuses[s] != SiteStatus.ACTIVE
    }
    print(f"emails to the drill's accounts: {mail.total} for {len(ready)} ready sites and 1 account deletion")
    return mail.problems(ready | {(scenario.doomed_email, ACCOUNT_DELETED_SUBJECT)}, never_ready)


async def _problems(
    stack: DrillStack, scenario: Scenario, settled: Settled, retried: list[RetriedActivity]
) -> list[str]:
    """Everything wrong after the chaos, one sentence each."""
    settings = stack.settings
    problems = [f"still open {settled.waited:.0f} s after the last kill: {item}" for item in settled.still_open]
    problems += [
        f"{activity}: a kill inside the step was noticed only at its start-to-close timeout (no heartbeat)"
        for activity in retried
        if activity.lost_to_a_timeout and not activity.noticed_by_heartbeat
    ]
    problems += [
        f"{activity}: operators saw the server's stand-in for a failure too large to keep, not the error"
        for activity in retried
        if activity.failure_cut_down
    ]
    problems += await bot_leftovers(settings, scenario.bots.bot_ids, requested_one_by_one=True)
    problems += await bot_leftovers(settings, scenario.doomed.bot_ids, requested_one_by_one=False)
    problems += await account_leftovers(settings, scenario.doomed.account_id)
    statuses, site_problems = await site_outcomes(settings, [*scenario.stream_sites, *scenario.doomed_sites])
    problems += site_problems
    print(f"sites by status: {dict(Counter(statuses.values()))}")
    problems += await site_orphans(settings)
    problems += await operator_alerts(settings)

    problems += _mail_problems(stack, scenario, statuses)
    return problems


async def test_everything_settles_cleanly_after_half_a_minute_of_chaos(drill_stack: DrillStack) -> None:
    settings = drill_stack.settings
    rng = random.Random(SEED)
    intervals = kill_intervals(rng, WINDOW_SECONDS, *KILL_EVERY_SECONDS)
    workers = ChaosWorkers(drill_stack, {"FAULT_INJECTION": SLOW_SITE_STEP})
    api = ChaosApi(drill_stack)
    workers.start()
    api.start()
    try:
        scenario = await _prepare(drill_stack, api)

        window_started = await database_now(settings)
        started, last_kill = await _run_the_window(drill_stack, workers, api, scenario, intervals)
        window = last_kill - started

        # Settle with one worker running; the reconciler covers a start the API lost to a kill.
        reconciling = asyncio.create_task(_reconcile(drill_stack))
        settled = await _settle(drill_stack, scenario, last_kill)
        reconciled = await reconciling
    finally:
        await workers.stop()
        api.stop()

    figures.record_count(
        "chaos: worker kill -9 survived",
        workers.kills,
        f"every 2-5 s for {window:.0f} s; Temporal and PostgreSQL restarted once, the API killed {api.kills}x",
    )
    if settled.sites_after is not None:
        figures.record(
            "chaos: last kill -> every site settled", settled.sites_after, f"{len(scenario.stream_sites)} sites"
        )
    if settled.everything_after is not None:
        figures.record("chaos: last kill -> everything settled", settled.everything_after)
    retried = await retried_activities(drill_stack.client, _all_workflow_ids(scenario))
    await _print_evidence(drill_stack, scenario, window_started, retried)
    print(f"reconciler after the chaos: {reconciled}; workers that died on their own: {workers.died_on_their_own}")

    problems = await _problems(drill_stack, scenario, settled, retried)
    assert not problems, (
        f"{len(problems)} problems after {workers.kills} kills (logs in {drill_stack.root}):\n" + "\n".join(problems)
    )
